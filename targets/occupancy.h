// Owns the vendors' occupancy rules: how many blocks of a kernel's register and shared-memory/LDS
// use one SM/CU holds. One rule for the code generator's resource reports (the GpuBackends, from
// what the compiler reported) and the analytic model (costmodel/gpu_model.cpp, from estimates).
#pragma once

#include <cstdint>
#include <functional>

#include "targets/target_desc.h"

namespace tessera {

// What one block of a kernel uses.
struct BlockResources {
  int64_t threadsPerBlock = 1;
  int64_t registers = 0;    // per thread: NVIDIA registers, AMD architectural VGPRs
  int64_t agprs = 0;        // AMD CDNA accumulation registers per thread (0: none)
  int64_t sgprs = 0;        // AMD scalar registers per wave (0: not known, no bound)
  int64_t sharedBytes = 0;  // shared memory / LDS per block, static and dynamic
};

// Calls limit(blocks, why) for each register and shared-memory/LDS bound of `t`'s vendor on the
// resident blocks per SM/CU. NVIDIA: registers allocated per warp in granules, shared memory in
// 128-byte units plus the per-block reservation. AMD: VGPRs (with AGPRs where the file is unified)
// allocated per wave in granules, SGPRs shared by a SIMD's waves, LDS per CU. The caller applies
// the vendor-neutral bounds (threads, blocks per unit) and keeps the smallest.
void occupancyLimits(const BlockResources& b, const TargetDesc& t,
                     const std::function<void(int64_t blocks, const char* why)>& limit);

}  // namespace tessera
