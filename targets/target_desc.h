// Owns TargetDesc, the capability data of a compilation target (ARCHITECTURE.md §2.2), and the target
// registry. Plain data: no LLVM. `host` is read from the machine; GPU targets are tables.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "support/status.h"

namespace tessera {

// A host memory-bound kernel's share of the copy roof may reach this many times the roofline
// margin: an L1-resident kernel runs at the L1's rate, up to ~20x a core's DRAM copy on the hosts
// seen, and a loaded writer's probe reads the copy low besides. Past it the roof, not the kernel,
// is wrong: the runner reports no share (targets/host_runner.cpp) and the cache service refuses a
// record claiming one (service/plausibility.cpp).
inline constexpr double kHostCacheShareLimit = 32;

enum class Vendor { Host, Nvidia, Amd };

// How a vendor's documents name its parts: every report takes its words from this one table, so
// that no caller chooses them by if/else on the vendor.
struct VendorWords {
  const char* name;            // "host", "nvidia", "amd": bundles, --emit errors
  const char* unit;            // "SM", "CU": one compute unit
  const char* units;           // "SMs", "CUs"
  const char* warps;           // "warps", "waves": thread groups in estimates
  const char* warpsFormal;     // "warps", "wavefronts": thread groups in explanations
  const char* sharedMemory;    // "shared memory", "LDS"
  const char* sharedShort;     // "smem", "LDS": in table cells
  const char* deviceCompiler;  // "ptxas", "the AMDGPU backend": what checks code without a device
  const char* kernelDialect;   // "NVVM", "ROCDL": the MLIR dialect a mapped GPU kernel is written in
};
const VendorWords& vendorWords(Vendor v);
const char* vendorName(Vendor v);  // vendorWords(v).name

// One matrix-core instruction shape (mma.sync / MFMA / WMMA) for an input dtype.
struct MmaShape {
  std::string dtype;  // input dtype: "f16", "bf16", "f32" (tf32/xf32)
  int m = 0, n = 0, k = 0;
  std::string kind;   // instruction family: "mma.sync", "wgmma", "mfma", "wmma"
  // Share of the dtype's matrix peak (peakGflopsF16/BF16) this instruction family can sustain:
  // 1 where it is the chip's fastest path; on sm_90 mma.sync issues at about half of wgmma's rate.
  double peakShare = 1.0;
};

struct TargetDesc {
  std::string name;    // cache-key name: "host", "sm_80", "gfx942", ...
  Vendor vendor = Vendor::Host;
  std::string arch;    // host: ISA level (x86-64-v4, ...); GPU: the chip (sm_80, gfx942)
  std::string model;   // human-readable (CPU model string, "NVIDIA A100", ...)
  // Cores (host) or SMs/CUs (GPU): part of the cache key. For the host it is the number of
  // threads the kernels may use: all cores as probed, fewer with `--threads N`
  // (hostTargetWithThreads), so that records of different thread counts never mix.
  int units = 1;
  int cores = 1;       // host: cores the machine has (the probe's units)

  // Host CPU.
  std::vector<std::string> isa;  // selected flags: avx512f, avx2, fma, ...
  int simdBits = 128;            // widest vector register the kernels may use
  int vectorRegisters = 16;      // architectural vector registers (32 with AVX-512)
  int64_t l1dBytes = 0, l2Bytes = 0, l3Bytes = 0;  // per core for L1/L2, shared L3
  int l1dWays = 8, l2Ways = 8, l3Ways = 16;        // associativity (the BLIS blocking model uses ways)
  int cacheLineBytes = 64;
  // Vector FMA pipeline: latency in cycles and FMAs of simdBits width issued per cycle. Their
  // product is how many independent accumulators keep the FMA units busy (Low et al. 2016).
  int fmaLatency = 4, fmaPerCycle = 2;

  // Peaks (single core for the host, whole chip for GPUs), GFLOP/s and GB/s. The host's are
  // measured by the probe (host_probe.cpp): FMA chains and a memcpy, on one core.
  double peakGflopsF32 = 0;
  double peakGflopsF16 = 0;       // tensor cores when present
  double peakGflopsBF16 = 0;
  double memBandwidthGBs = 0;
  double memBandwidthAllCoresGBs = 0;  // host: the copy with every core copying a slice
  // Host: empty when the copy probe's best copies ran on cores of their own while the load control
  // read the machine quiet; else one line saying why its bandwidth is no roof (a loaded machine reads
  // it several times low), and memory-bound shares of it are unknown (bandwidthGBs answers 0).
  std::string copyDoubt;

  // GPUs.
  int warpSize = 0;
  int maxThreadsPerBlock = 0;
  int64_t regsPerSM = 0;
  int maxRegsPerThread = 0;
  // Registers a thread can use for operands and accumulators: NVIDIA 255; AMD the architectural
  // VGPRs (256; CDNA's AGPRs, counted in maxRegsPerThread, hold MFMA accumulators only).
  int operandRegsPerThread = 0;
  int64_t smemPerBlock = 0, smemPerSM = 0;  // bytes (LDS on AMD)
  int maxBlocksPerSM = 0;
  int maxWarpsPerSM = 0;
  int64_t l2Bytes_gpu = 0;
  // GPU: boost clock, turns per-clock rates (shared memory/LDS, latencies) into time. Host: the
  // clock the core ran at during the peak probe (0: not measured).
  double clockGHz = 0;
  std::vector<MmaShape> mma;
  // GPU occupancy inputs. NVIDIA: registers are allocated per warp in units of regAllocGranule;
  // each block also holds smemReservedPerBlock of system shared memory; static shared memory is
  // capped at smemPerBlock (48 KB), dynamic up to smemPerBlockOptIn. AMD: regsPerSimd VGPRs per
  // lane per SIMD (AGPRs included where unified), granule in VGPRs per wave, maxWavesPerSimd,
  // simdsPerUnit SIMDs per CU.
  int64_t smemPerBlockOptIn = 0, smemReservedPerBlock = 0;
  int regAllocGranule = 0;
  int simdsPerUnit = 0;
  int64_t regsPerSimd = 0;
  int maxWavesPerSimd = 0;
  int sgprsPerSimd = 0;  // AMD gfx9: scalar registers shared by the waves of a SIMD
  int maxSgprsPerWave = 0;
  // The L1 data cache (AMD: the vector L1/L0) of one SM/CU: bytes it delivers per clock and its
  // line size (a global access costs one wavefront per line it touches). 0: unknown, taken as
  // shared memory's 128 B per clock and 128-byte lines.
  int l1BytesPerClock = 0;
  int l1LineBytes = 0;
  // The MMA shape of `kind` for input dtype `dtype`, or null.
  const MmaShape* findMma(const std::string& dtype, const std::string& kind) const;

  bool hasIsa(const std::string& f) const;
  const VendorWords& words() const { return vendorWords(vendor); }
  bool isGpu() const { return vendor != Vendor::Host; }
  // The compute peak a kernel with `input`-typed operands is measured against: on a GPU the
  // matrix-core peak of that dtype (f16, bf16) or the FP32 peak; on the host the FMA peak of the
  // `threads` it runs on (one core's times the threads that have a core of their own).
  double computePeakGflops(ir::ScalarType input, int threads = 1) const;
  // The bandwidth a memory-bound kernel on `threads` host threads is measured against: the copy
  // on one core, on all cores, or in between (GPUs: their DRAM bandwidth); 0 (no roof) when the
  // copy probe could not be trusted (copyDoubt).
  double bandwidthGBs(int threads = 1) const;
  // "host/x86-64-v4/2" — what must match for a record to be reused.
  std::string keyString() const;
};

// How a measured share of a peak reads: "72.9% of the FMA peak", and above 100 % the figure with
// the reason, since a kernel cannot beat the hardware: by default that the probe read the peak
// low (a shared vCPU or a slower clock while it ran). Never a bare 150 %. A fraction of 0 is a
// share not known (no roof to hold it against), never "0.0%".
inline constexpr const char* kProbeReadLow = "the probe read it low";
std::string peakShareText(double fraction, const std::string& ofWhat, const std::string& whyAbove = kProbeReadLow);
// Why a memory-bound kernel of `bytes` (read + written) can pass the copy bandwidth: its data fit
// in the caches (the copy is measured past them), or else the probe read it low.
std::string whyAboveBandwidth(const TargetDesc& t, double bytes);
// The share of a memory-bound kernel of `bytes` in `ofWhat` (t's copy bandwidth): as peakShareText
// with whyAboveBandwidth's reason, or, when t's copy probe could not be trusted, no share and why.
std::string bandwidthShareText(const TargetDesc& t, double fraction, const std::string& ofWhat, double bytes);

// Looks a target up by name ("host", or a GPU name once registered). Unknown names are an
// InvalidArgument error listing the known ones.
Expected<TargetDesc> getTarget(const std::string& name);
std::vector<std::string> knownTargets();

// The host description (probed once per process: /proc/cpuinfo, sysfs caches, a ~10 ms FMA
// and copy measurement for the peaks).
const TargetDesc& hostTarget();

// The host with kernels on `threads` threads (units = threads; the default is all cores). 1..1024;
// more threads than cores is allowed (oversubscribed) but rarely useful.
Expected<TargetDesc> hostTargetWithThreads(int threads);

// FMA latency and issue rate of the host's vector width by microarchitecture (vendor_id, cpu family
// and model of /proc/cpuinfo; t.simdBits already set): a table, so defaults derived from them do not
// move between runs.
void setFmaPipes(TargetDesc& t, const std::string& vendor, int family, int model);
// f32 flops one core's FMA units retire a cycle: lanes of t.simdBits x 2 (multiply and add) x
// t.fmaPerCycle. 64 on Sapphire Rapids, 32 on Zen 4 (AVX-512 or not) and Zen 2, 16 on Zen 1.
int flopsPerCycleF32(const TargetDesc& t);
// The clock the host probe reports, from a dependent integer-add chain's reading (`chainGHz`) and
// the FMA peak it measured just before: no core retires more than `flopsPerCycle` a cycle, so the
// peak implies a clock of at least peak / flopsPerCycle; a chain reading below it (the chain ran
// on a shared core) or above any x86 core's clock (kMaxCoreGHz: the core shortened the chain, as
// Golden Cove folds add-immediate chains at rename) gives way to that implied clock.
inline constexpr double kMaxCoreGHz = 7.0;
double settleClockGHz(double chainGHz, double peakGflopsF32, int flopsPerCycle);

// Named x86 machine descriptions (zen4, zen4-avx2, sapphire-rapids): fixed caches, ISA and peaks,
// for tests of rules that derive values from the host, whichever machine runs them.
std::vector<std::string> hostPresets();
Expected<TargetDesc> hostPreset(const std::string& name);
// The LLVM CPU of a preset (znver4, x86-64-v3, sapphirerapids), for code emitted for it.
std::string hostPresetCpu(const std::string& name);

// The host as a machine of ISA level `arch` ("x86-64-v2|v3|v4": vector width and register count
// of that level, caches and peaks of this one): features for records measured on another x86
// host, e.g. a replay table recorded where AVX-512 was (or was not) available. Other strings
// are an InvalidArgument error.
Expected<TargetDesc> hostTargetAs(const std::string& arch);

// `t` with only the ISA flags every x86 CPU of its level (t.arch) has: what code compiled for
// "any CPU of that level" (a bundle's host objects) may use. avx512_bf16, VNNI, AMX and the like
// are dropped; the level's own flags are added.
TargetDesc hostAtLevel(TargetDesc t);

}  // namespace tessera
