// Owns the interface between the GPU driver and the per-family GPU strategies. A strategy turns
// (kernel, config, target) into a GpuPlan: a payload module holding `func.func @kernel`, the
// transform text with @pre_main (target independent: tiling to scf.forall with #gpu mappings,
// workgroup promotion, vectorization, bufferization) and @map_main (everything GPU specific), C++
// steps around them, and the host wrapper of the launch.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <string>

#include "codegen/gpu.h"
#include "codegen/gpu_plans.h"
#include "ir/families.h"
#include "ir/ir.h"
#include "ir/schedule.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "support/status.h"
#include "targets/target_desc.h"

namespace tessera::codegen {

struct GpuPlan {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  // Transform module. With hasPre, @pre_main turns the payload into the pre-mapping IR; without
  // it the payload already is pre-mapping IR (OpBuilder kernels). @map_main is always there.
  std::string schedule;
  bool hasPre = false;
  // On the pre-mapping IR, before it is cloned for the CPU: both consumers see the result.
  std::function<Status(mlir::ModuleOp)> afterPre;
  // On the mapped IR (GPU only): tensor-core rewrites, pipelining.
  std::function<Status(mlir::ModuleOp)> afterMap;
  GpuLaunch launch;  // args and batches; grid/block are read back from the mapped IR
  std::string strategy;
  // Built as the mapped kernel itself (lane-level code: warp collectives, tensor-core fragments):
  // there is no pre-mapping form to run sequentially; the mapped-kernel emulator checks it.
  bool laneLevel = false;
  // Read by afterMap when it runs (set by the driver from GpuCompileOptions::sharedSwizzle).
  std::shared_ptr<bool> sharedSwizzle = std::make_shared<bool>(true);
  // After the resource report is read (GPU only): the strategy's own checks of it.
  std::function<void(ResourceReport&)> checkResources;
};

// Runtime rows (RuntimeDims::m, the leading dimension): the kernel reads M from its sizes
// argument and the launch's grid.x follows it; other runtime dimensions are refused.
Expected<GpuPlan> buildGpuElementwise(mlir::MLIRContext* ctx, const ir::Kernel& k, const ir::Config& c,
                                      const TargetDesc& t, const RuntimeDims& rt = {});
// With runtime dimensions (RuntimeDims: M, or the batch count) the launch carries
// GpuLaunch::Runtime and the kernel a sizes argument; strategies that cannot take them refuse.
Expected<GpuPlan> buildGpuGemm(mlir::MLIRContext* ctx, const ir::Kernel& k, const ir::Config& c, const TargetDesc& t,
                               const RuntimeDims& rt = {});
// strategy=wgmma (gpu_wgmma.cpp): buildGpuGemm and checkGpuGemm hand such configs over.
Expected<GpuPlan> buildGpuGemmWgmma(mlir::MLIRContext* ctx, const ir::Kernel& k, const GpuGemmConfig& c, const TargetDesc& t);
// strategy=mma-lane (gpu_gemm_lane.cpp): the lane-level mma.sync GEMM, f16/bf16, NVIDIA sm_80+.
Expected<GpuPlan> buildGpuGemmLane(mlir::MLIRContext* ctx, const ir::Kernel& k, const GpuGemmConfig& c, const TargetDesc& t,
                                   const RuntimeDims& rt = {});
// Runtime sizes (RuntimeDims): `m` the sequence length (query and key lengths together, on a
// kernel whose lengths are equal: sizes[0]), `batch` the batch (sizes[1]); flash-simt and
// flash-mma take them, flash-wgmma and flash-mfma refuse in one line.
Expected<GpuPlan> buildGpuAttention(mlir::MLIRContext* ctx, const ir::Kernel& k, const ir::Config& c,
                                    const TargetDesc& t, const RuntimeDims& rt = {});
// Tensor-core attention (gpu_attention_mma.cpp: FlashAttention-2 on mma.sync, NVIDIA).
Expected<GpuPlan> buildGpuAttentionMma(mlir::MLIRContext* ctx, const ir::Kernel& k, const GpuAttentionConfig& c,
                                       const TargetDesc& t, const RuntimeDims& rt = {});
// The launch's Runtime of a shape-generic attention kernel (`strategy` names the refusals): query
// blocks of BQ rows on grid.x follow the length, the batch is grid.z; the tensors [B][H][S][D]
// hold the runtime length at dimension 2 and the runtime batch outermost.
Expected<GpuLaunch::Runtime> planAttentionRuntime(const ir::AttentionSpec& s, const RuntimeDims& rt, const std::string& strategy,
                                                  int64_t BQ);
// A [B][H][seq][D] view (dynamic strides) of the kernel argument `mem` ([B][H][Smax][D]) at the
// runtime length `seq`; `mem` itself when seq is null.
mlir::Value seqView(mlir::OpBuilder& b, mlir::Location loc, mlir::Value mem, mlir::Value seq);
// Hopper tensor-core attention (gpu_attention_wgmma.cpp: FlashAttention-2 on wgmma, sm_90a).
Expected<GpuPlan> buildGpuAttentionWgmma(mlir::MLIRContext* ctx, const ir::Kernel& k, const GpuAttentionConfig& c,
                                         const TargetDesc& t);
// Matrix-core attention (gpu_attention_mfma.cpp: FlashAttention-2 on MFMA, AMD CDNA wave64).
Expected<GpuPlan> buildGpuAttentionMfma(mlir::MLIRContext* ctx, const ir::Kernel& k, const GpuAttentionConfig& c,
                                        const TargetDesc& t);

// Knob legality of each strategy (no IR built): gpu_rules.h, from the plans of gpu_plans.h.

}  // namespace tessera::codegen
