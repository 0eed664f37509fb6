// Owns the named x86 machine descriptions: fixed TargetDescs of the hosts Tessera runs on (a Zen 4
// with and without AVX-512, a Sapphire Rapids, an AVX2-only Zen 1, a Zen 5), so that rules deriving values from a host's ISA and
// caches can be tested on every one of them whichever machine runs the tests. Figures are those
// the host probe reported on each machine (lscpu / sysfs), peaks rounded.
#include <algorithm>

#include "targets/target_desc.h"

namespace tessera {
namespace {

TargetDesc base(const std::string& preset) {
  TargetDesc t;
  t.name = "host";
  t.vendor = Vendor::Host;
  t.model = preset;
  return t;
}

std::vector<std::pair<std::string, TargetDesc>> presets() {
  std::vector<std::pair<std::string, TargetDesc>> out;
  // AMD EPYC Zen 4 VM: AVX-512 executed as two 256-bit halves (one zmm FMA per cycle).
  TargetDesc zen4 = base("AMD EPYC (Zen 4), preset zen4");
  zen4.arch = "x86-64-v4";
  zen4.units = zen4.cores = 2;
  zen4.isa = {"sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_bf16", "avx512_vnni"};
  zen4.simdBits = 512;
  zen4.vectorRegisters = 32;
  zen4.l1dBytes = 32 << 10;
  zen4.l2Bytes = 1 << 20;
  zen4.l3Bytes = 32 << 20;
  zen4.l1dWays = 8;
  zen4.l2Ways = 8;
  zen4.l3Ways = 16;
  zen4.fmaLatency = 4;
  zen4.fmaPerCycle = 1;
  zen4.peakGflopsF32 = zen4.peakGflopsF16 = 118;
  zen4.peakGflopsBF16 = 236;  // vdpbf16ps: two products per f32 lane
  zen4.clockGHz = 3.7;
  zen4.memBandwidthGBs = 22;
  out.push_back({"zen4", zen4});
  // The same VM with AVX-512 hidden (x86-64-v3): 16 ymm registers.
  TargetDesc v3 = zen4;
  v3.model = "AMD EPYC (Zen 4, AVX-512 hidden), preset zen4-avx2";
  v3.arch = "x86-64-v3";
  v3.isa = {"sse4_2", "avx", "avx2", "fma", "f16c"};
  v3.simdBits = 256;
  v3.vectorRegisters = 16;
  v3.peakGflopsF32 = v3.peakGflopsF16 = v3.peakGflopsBF16 = 90;
  v3.fmaPerCycle = 2;
  out.push_back({"zen4-avx2", v3});
  // Intel Sapphire Rapids VM: two zmm FMA ports, AMX, large private L2 and a large shared L3.
  TargetDesc spr = base("Intel Xeon (Sapphire Rapids), preset sapphire-rapids");
  spr.arch = "x86-64-v4";
  spr.units = spr.cores = 4;
  spr.isa = {"sse4_2",      "avx",         "avx2",        "fma",      "f16c",     "avx512f", "avx512bw",
             "avx512vl",    "avx512_bf16", "avx512_fp16", "avx512_vnni", "amx_tile", "amx_bf16", "amx_int8"};
  spr.simdBits = 512;
  spr.vectorRegisters = 32;
  spr.l1dBytes = 48 << 10;
  spr.l2Bytes = 2 << 20;
  spr.l3Bytes = int64_t(105) << 20;
  spr.l1dWays = 12;
  spr.l2Ways = 16;
  spr.l3Ways = 15;
  spr.fmaLatency = 4;
  spr.fmaPerCycle = 2;
  spr.peakGflopsF32 = 190;
  spr.peakGflopsF16 = 380;    // avx512_fp16: two products per f32 lane
  spr.peakGflopsBF16 = 2048;  // AMX: 1024 flops a cycle at 2.0 GHz
  spr.clockGHz = 2.0;
  spr.memBandwidthGBs = 20;
  out.push_back({"sapphire-rapids", spr});
  // AMD EPYC 7001 (Zen 1, family 23 model 1) VM: AVX2 and FMA, no AVX-512, no bf16 instructions;
  // two 128-bit FMA pipes, so a 256-bit FMA takes both (one per cycle, latency 5); 512 KB L2 and
  // an 8 MB L3 per core complex. Zen 2 (family 23 from model 0x30) has 256-bit pipes: the probe
  // tells them apart by model (host_probe.cpp). Peak: 16 flops a cycle at about 2.8 GHz (its
  // 12-chain FMA loop measured 39-42 GFLOP/s there, a GEMM 45); copy bandwidth not measured there.
  TargetDesc zen1 = base("AMD EPYC (Zen 1), preset zen1");
  zen1.arch = "x86-64-v3";
  zen1.units = zen1.cores = 2;
  zen1.isa = {"sse4_2", "avx", "avx2", "fma", "f16c"};
  zen1.simdBits = 256;
  zen1.vectorRegisters = 16;
  zen1.l1dBytes = 32 << 10;
  zen1.l2Bytes = 512 << 10;
  zen1.l3Bytes = 8 << 20;
  zen1.l1dWays = 8;
  zen1.l2Ways = 8;
  zen1.l3Ways = 16;
  zen1.fmaLatency = 5;
  zen1.fmaPerCycle = 1;
  zen1.peakGflopsF32 = zen1.peakGflopsF16 = zen1.peakGflopsBF16 = 45;
  zen1.memBandwidthGBs = 15;
  out.push_back({"zen1", zen1});
  // AMD EPYC Zen 5 VM (family 26, seen 2026-12-01): AVX-512 on two full-width 512-bit FMA pipes
  // (two zmm FMAs a cycle, latency 4), a 48 KB 12-way L1, 1 MB 16-way L2 and a 32 MB L3;
  // avx512_bf16, no avx512_fp16 or AMX. Peak: 2 x 16 lanes x 2 flops at 4.2 GHz (its probe read
  // 268-287 GFLOP/s at 4.2-4.5 GHz); 35 GB/s: a one-thread 1 x 4096 x 4096 GEMM streaming B.
  TargetDesc zen5 = zen4;
  zen5.model = "AMD EPYC (Zen 5), preset zen5";
  zen5.l1dBytes = 48 << 10;
  zen5.l1dWays = 12;
  zen5.l2Ways = 16;
  zen5.fmaPerCycle = 2;
  zen5.peakGflopsF32 = zen5.peakGflopsF16 = 269;
  zen5.peakGflopsBF16 = 538;
  zen5.clockGHz = 4.2;
  zen5.memBandwidthGBs = 35;
  out.push_back({"zen5", zen5});
  return out;
}

}  // namespace

std::vector<std::string> hostPresets() {
  std::vector<std::string> names;
  for (const auto& [n, t] : presets()) names.push_back(n);
  return names;
}

std::string hostPresetCpu(const std::string& name) {
  if (name == "zen4") return "znver4";
  if (name == "zen4-avx2") return "x86-64-v3";
  if (name == "sapphire-rapids") return "sapphirerapids";
  if (name == "zen1") return "znver1";
  if (name == "zen5") return "znver5";
  return "";
}

Expected<TargetDesc> hostPreset(const std::string& name) {
  for (const auto& [n, t] : presets())
    if (n == name) return t;
  std::string list;
  for (const auto& n : hostPresets()) list += (list.empty() ? "" : ", ") + n;
  return makeError(ErrorCode::InvalidArgument, "unknown host preset '" + name + "' (known: " + list + ")");
}

}  // namespace tessera
