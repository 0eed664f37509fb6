// Owns the face of the Hopper GEMM's kernel builder (wgmma + TMA, warp-specialized,
// gpu_wgmma_kernel.cpp) for its strategy (gpu_wgmma.cpp: host wrapper); the plan it builds from
// (tiles, warpgroups, the shared-memory layout and the register split) is wgmma::Plan (gpu_plans.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/gpu_gemm_epilogue.h"
#include "codegen/gpu_plans.h"
#include "ir/dtype.h"
#include "ir/families.h"
#include "ir/schedule.h"
#include "support/status.h"
#include "targets/target_desc.h"

namespace mlir {
class OpBuilder;
namespace func {
class FuncOp;
}
}  // namespace mlir

namespace tessera::codegen::wgmma {

// The epilogue as the kernel reads it (shared with the mma-lane GEMM: gpu_gemm_epilogue.h).
using EpiOperand = gemm::EpiOperand;
using Epilogue = gemm::Epilogue;

// Fills the entry block of `fn` (arguments: A, B, A's map, B's map, then Epilogue's) with the
// gpu.launch of the kernel (gpu_wgmma_kernel.cpp).
Status buildKernel(mlir::OpBuilder& b, mlir::func::FuncOp fn, const Plan& p, const Epilogue& e);

}  // namespace tessera::codegen::wgmma
