// Owns the vendors' occupancy rules (occupancy.h).
#include "targets/occupancy.h"

#include <algorithm>

namespace tessera {

namespace {

int64_t roundUp(int64_t v, int64_t m) { return m <= 1 ? v : (v + m - 1) / m * m; }

}  // namespace

void occupancyLimits(const BlockResources& b, const TargetDesc& t,
                     const std::function<void(int64_t, const char*)>& limit) {
  const int64_t W = (std::max<int64_t>(b.threadsPerBlock, 1) + t.warpSize - 1) / std::max(t.warpSize, 1);
  if (t.vendor == Vendor::Nvidia) {
    // Registers are allocated per warp in granules; each block also holds the reserved system
    // shared memory [CUDA-CC].
    const int64_t regsPerWarp = roundUp(std::max<int64_t>(b.registers, 1) * 32, t.regAllocGranule);
    limit((t.regsPerSM / regsPerWarp) / W, "registers");
    if (b.sharedBytes > 0) limit(t.smemPerSM / (roundUp(b.sharedBytes, 128) + t.smemReservedPerBlock), "shared memory");
    return;
  }
  if (t.vendor != Vendor::Amd) return;
  // VGPRs and AGPRs share one file on gfx90a/gfx94x (AGPRs start at a 4-aligned offset),
  // allocated per wave in granules; gfx9 SIMDs share their SGPRs; LDS per CU.
  const int64_t vg = b.agprs > 0 ? roundUp(b.registers, 4) + b.agprs : b.registers;
  const int64_t alloc = roundUp(std::max<int64_t>(vg, 1), t.regAllocGranule);
  int64_t wavesPerSimd = std::min<int64_t>(t.maxWavesPerSimd, t.regsPerSimd / alloc);
  const char* why = "registers";
  if (t.sgprsPerSimd > 0 && b.sgprs > 0) {
    const int64_t bySgpr = t.sgprsPerSimd / roundUp(b.sgprs, 16);
    if (bySgpr < wavesPerSimd) {
      wavesPerSimd = bySgpr;
      why = "scalar registers";
    }
  }
  if (wavesPerSimd < t.maxWavesPerSimd) limit(wavesPerSimd * t.simdsPerUnit / W, why);
  if (b.sharedBytes > 0) limit(t.smemPerSM / b.sharedBytes, "LDS");
}

}  // namespace tessera
