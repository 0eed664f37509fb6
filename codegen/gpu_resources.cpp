// Owns GPU resource reports: reading ptxas -v output (NVIDIA) and the AMDGPU backend's assembly
// comments and amdhsa metadata (AMD), the theoretical occupancy those numbers give on a
// TargetDesc, the limit checks, and the --emit stage names.
#include <algorithm>
#include <cmath>
#include <regex>

#include "codegen/gpu_lowering.h"

namespace tessera::codegen {
namespace {

int64_t roundUp(int64_t v, int64_t m) { return m <= 1 ? v : (v + m - 1) / m * m; }

int64_t firstInt(const std::string& text, const std::string& re, int64_t def = 0) {
  std::smatch m;
  if (std::regex_search(text, m, std::regex(re))) return std::stoll(m[1].str());
  return def;
}

}  // namespace

void parsePtxasReport(const std::string& log, ResourceReport& r) {
  r.registers = int(firstInt(log, R"(Used (\d+) registers)"));
  r.sharedBytes = firstInt(log, R"((\d+) bytes smem)");
  r.localBytes = firstInt(log, R"((\d+) bytes stack frame)");
  r.spillStoreBytes = firstInt(log, R"((\d+) bytes spill stores)");
  r.spillLoadBytes = firstInt(log, R"((\d+) bytes spill loads)");
}

// The AMDGPU asm printer writes "; NumVgprs: 66"-style comments per kernel and the amdhsa
// metadata block (.vgpr_spill_count, .group_segment_fixed_size, ...).
void parseAmdAssembly(const std::string& a, ResourceReport& r) {
  r.vgprs = int(firstInt(a, R"(\.vgpr_count:\s+(\d+))", firstInt(a, R"(; NumVgprs: (\d+))")));
  r.sgprs = int(firstInt(a, R"(\.sgpr_count:\s+(\d+))", firstInt(a, R"(; NumSgprs: (\d+))")));
  r.agprs = int(firstInt(a, R"(\.agpr_count:\s+(\d+))", firstInt(a, R"(; NumAgprs: (\d+))")));
  r.sharedBytes = firstInt(a, R"(\.group_segment_fixed_size:\s+(\d+))", firstInt(a, R"(; LDSByteSize: (\d+))"));
  r.scratchBytes = firstInt(a, R"(\.private_segment_fixed_size:\s+(\d+))", firstInt(a, R"(; ScratchSize: (\d+))"));
  r.vgprSpills = int(firstInt(a, R"(\.vgpr_spill_count:\s+(\d+))"));
  r.sgprSpills = int(firstInt(a, R"(\.sgpr_spill_count:\s+(\d+))"));
}

void finishResourceReport(ResourceReport& r, const TargetDesc& t) {
  r.vendor = t.vendor;
  r.target = t.name;
  r.problems.clear();
  const int64_t T = std::max<int64_t>(r.threadsPerBlock, 1);
  const int64_t W = (T + t.warpSize - 1) / std::max(t.warpSize, 1);
  int64_t blocks = t.maxBlocksPerSM;
  r.limiter = "blocks per unit";
  auto limit = [&](int64_t b, const char* why) {
    if (b < blocks) {
      blocks = b;
      r.limiter = why;
    }
  };
  limit(t.maxWarpsPerSM / W, "threads");
  if (t.vendor == Vendor::Nvidia) {
    int64_t regsPerWarp = roundUp(std::max(r.registers, 1) * 32, t.regAllocGranule);
    limit((t.regsPerSM / regsPerWarp) / W, "registers");
    int64_t smem = roundUp(r.sharedBytes, 128) + t.smemReservedPerBlock;
    if (smem > 0) limit(t.smemPerSM / smem, "shared memory");
    if (r.registers > t.maxRegsPerThread) r.problems.push_back("registers exceed " + std::to_string(t.maxRegsPerThread));
    if (r.sharedBytes > t.smemPerBlock)
      r.problems.push_back("static shared memory " + std::to_string(r.sharedBytes) + " B exceeds " + std::to_string(t.smemPerBlock) + " B");
    if (r.spillStoreBytes + r.spillLoadBytes > 0)
      r.problems.push_back("spills (" + std::to_string(r.spillStoreBytes) + " B stores, " + std::to_string(r.spillLoadBytes) + " B loads)");
    else if (r.localBytes > 0)
      r.problems.push_back("uses " + std::to_string(r.localBytes) + " B of local memory per thread");
  } else {
    // VGPRs and AGPRs share one file on gfx90a/gfx94x: AGPRs start at a 4-aligned offset.
    int64_t vg = r.agprs > 0 ? roundUp(r.vgprs, 4) + r.agprs : r.vgprs;
    int64_t alloc = roundUp(std::max<int64_t>(vg, 1), t.regAllocGranule);
    int64_t wavesPerSimd = std::min<int64_t>(t.maxWavesPerSimd, t.regsPerSimd / alloc);
    std::string why = "registers";
    if (t.sgprsPerSimd > 0 && r.sgprs > 0) {
      int64_t bySgpr = t.sgprsPerSimd / roundUp(r.sgprs, 16);
      if (bySgpr < wavesPerSimd) {
        wavesPerSimd = bySgpr;
        why = "scalar registers";
      }
    }
    if (wavesPerSimd < t.maxWavesPerSimd) limit(wavesPerSimd * t.simdsPerUnit / W, why.c_str());
    if (r.sharedBytes > 0) limit(t.smemPerSM / r.sharedBytes, "LDS");
    if (vg > t.maxRegsPerThread) r.problems.push_back("VGPRs exceed " + std::to_string(t.maxRegsPerThread));
    if (r.sharedBytes > t.smemPerBlock)
      r.problems.push_back("LDS " + std::to_string(r.sharedBytes) + " B exceeds " + std::to_string(t.smemPerBlock) + " B");
    if (r.vgprSpills + r.sgprSpills > 0)
      r.problems.push_back("spills (" + std::to_string(r.vgprSpills) + " VGPRs, " + std::to_string(r.sgprSpills) + " SGPRs)");
    else if (r.scratchBytes > 0)
      r.problems.push_back("uses " + std::to_string(r.scratchBytes) + " B of scratch per work-item");
  }
  if (r.threadsPerBlock > t.maxThreadsPerBlock)
    r.problems.push_back(std::to_string(r.threadsPerBlock) + " threads per block exceed " + std::to_string(t.maxThreadsPerBlock));
  blocks = std::max<int64_t>(blocks, 0);
  if (blocks == 0) r.problems.push_back("a block does not fit on one SM/CU");
  r.blocksPerUnit = int(blocks);
  r.wavesPerUnit = int(blocks * W);
  r.occupancy = t.maxWarpsPerSM > 0 ? double(r.wavesPerUnit) / double(t.maxWarpsPerSM) : 0;
  r.ok = r.problems.empty();
}

std::string ResourceReport::summary() const {
  char buf[512];
  if (vendor == Vendor::Amd) {
    std::snprintf(buf, sizeof buf,
                  "%s: %lld threads/block, VGPR %d, SGPR %d, AGPR %d, LDS %lld B, scratch %lld B, spills %d VGPR / %d SGPR; "
                  "occupancy %d blocks = %d waves/CU (%.0f%%, limited by %s)",
                  target.c_str(), (long long)threadsPerBlock, vgprs, sgprs, agprs, (long long)sharedBytes,
                  (long long)scratchBytes, vgprSpills, sgprSpills, blocksPerUnit, wavesPerUnit, 100 * occupancy,
                  limiter.c_str());
  } else {
    std::snprintf(buf, sizeof buf,
                  "%s: %lld threads/block, %d registers, smem %lld B, spills %lld B st / %lld B ld, local %lld B; "
                  "occupancy %d blocks = %d warps/SM (%.0f%%, limited by %s)",
                  target.c_str(), (long long)threadsPerBlock, registers, (long long)sharedBytes,
                  (long long)spillStoreBytes, (long long)spillLoadBytes, (long long)localBytes, blocksPerUnit,
                  wavesPerUnit, 100 * occupancy, limiter.c_str());
  }
  std::string s = buf;
  if (!ok) {
    s += "; REJECTED:";
    for (const auto& p : problems) s += " " + p + ";";
  }
  return s;
}

Expected<GpuEmit> parseGpuEmit(const std::string& s, Vendor v) {
  if (s == "payload") return GpuEmit::Payload;
  if (s == "schedule") return GpuEmit::Schedule;
  if (s == "pre") return GpuEmit::Pre;
  if (s == "mlir") return GpuEmit::Mapped;
  if (v == Vendor::Nvidia && s == "ptx") return GpuEmit::Asm;
  if (v == Vendor::Nvidia && s == "cubin") return GpuEmit::Binary;
  if (v == Vendor::Amd && s == "asm") return GpuEmit::Asm;
  if (v == Vendor::Amd && s == "hsaco") return GpuEmit::Binary;
  return makeError(ErrorCode::InvalidArgument,
                   "unknown --emit '" + s + "' for a " + vendorName(v) + " target (" +
                       (v == Vendor::Nvidia ? "ptx, cubin" : "asm, hsaco") + ", mlir, pre, payload, schedule)");
}

const char* gpuEmitName(GpuEmit e, Vendor v) {
  switch (e) {
    case GpuEmit::Payload: return "payload";
    case GpuEmit::Schedule: return "schedule";
    case GpuEmit::Pre: return "pre";
    case GpuEmit::Mapped: return "mlir";
    case GpuEmit::Asm: return v == Vendor::Nvidia ? "ptx" : "asm";
    case GpuEmit::Binary: return v == Vendor::Nvidia ? "cubin" : "hsaco";
  }
  return "?";
}

}  // namespace tessera::codegen
