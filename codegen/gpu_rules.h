// Owns the face of the GPU legality rules: which matrix instruction a GEMM reaches on a target and
// whether a config of a GPU strategy can be built, decided from the strategies' plans
// (codegen/gpu_plans.h) without building IR. These files (gpu_rules*.cpp) form the MLIR-free
// library tessera_gpu_rules: the code generator builds from the same plans, the GPU spaces
// constrain with them and the cache service refuses records with them (issue 47: one rule).
#pragma once

#include <optional>
#include <string>

#include "codegen/gpu_backend.h"
#include "ir/dtype.h"
#include "ir/families.h"
#include "ir/ir.h"
#include "ir/schedule.h"
#include "support/status.h"
#include "targets/kernel_configs.h"
#include "targets/target_desc.h"

namespace tessera::codegen {

// MmaFamily and MmaPath are gpu_backend.h's (an MLIR-free header); the backends' gemmMma,
// gemmLaneMma and gemmWarpgroupMma answer with the rules below.

// The matrix instruction a GEMM with `input` operands reaches on `t` through our lowering
// (strategy=mma; nullopt: FMA pipes only).
std::optional<MmaPath> gemmMmaPath(ir::ScalarType input, const TargetDesc& t);
// The lane-level mma.sync path (strategy=mma-lane), where there is one.
std::optional<MmaPath> gemmLaneMmaPath(ir::ScalarType input, const TargetDesc& t);
// The warpgroup path (strategy=wgmma: wgmma fed by TMA, sm_90a), where there is one.
std::optional<MmaPath> gemmWarpgroupMmaPath(ir::ScalarType input, const TargetDesc& t);
// The matrix instruction of family `f` a tensor-core attention kernel runs on `t` for `input`
// operands (flash-mma: NVIDIA mma.sync; flash-wgmma: sm_90a's wgmma; flash-mfma: wave64 CDNA
// MFMA), where `t` has it. Outside the backends code asks this, never an instruction's name.
std::optional<MmaPath> attentionMmaPath(MmaFamily f, ir::ScalarType input, const TargetDesc& t);

// The strategy's own legality rules for (kernel, config) on `t`, without building any IR: the GPU
// spaces use it in their constraint, so the space and the code generator cannot disagree.
// InvalidConfig saying which rule fails (also declared by gpu.h, the code generator's face).
Status checkGpuConfig(const ir::Kernel& k, const ir::Config& c, const TargetDesc& t);
Status checkGpuGemm(const ir::Kernel& k, const ir::Config& c, const TargetDesc& t);
// The same rules for a config already read (the builders read it once).
Status checkGpuGemm(const ir::GemmInfo& g, const GpuGemmConfig& c, const TargetDesc& t);
Status checkGpuElementwise(const ir::Kernel& k, const ir::Config& c, const TargetDesc& t);
Status checkGpuAttention(const ir::Kernel& k, const ir::Config& c, const TargetDesc& t);

}  // namespace tessera::codegen
