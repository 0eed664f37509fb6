// Owns what the AMD backend's files share (gpu_backend_amd.cpp, gpu_backend_amd_mfma.cpp): the
// MFMA lowering is the backend's own step, reached through GpuBackend::lowerWarpContracts.
#pragma once

#include "support/status.h"

namespace mlir {
class ModuleOp;
}

namespace tessera::codegen {

// Per-lane rewrite of the unrolled 16x16x16 f16/bf16 vector.contract ops of a mapped CDNA kernel
// into amdgpu.mfma: operands loaded per lane in the MFMA register layout, the accumulators carried
// as vector<4xf32> per lane through the K loop.
Status rewriteContractsToMfma(mlir::ModuleOp m, int waveSize);

}  // namespace tessera::codegen
