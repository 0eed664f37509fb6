// Owns the GPU schedule spaces (one rule file per family: space_gpu_gemm.cpp,
// space_gpu_elementwise.cpp, space_gpu_attention.cpp): knobs as data, legal domains derived from
// the kernel and the TargetDesc (threads per block, shared memory/LDS, register estimates, MMA
// shapes), so configs over a limit are never proposed. What only the compiler can tell (spills,
// exact registers) comes back in codegen::ResourceReport and rejects the candidate there.
#pragma once

#include "ir/ir.h"
#include "ir/schedule.h"
#include "support/status.h"
#include "targets/target_desc.h"

namespace tessera::search {

// The space `tune` searches on GPU target `t`: gpuRuleSpace with the measured or modelled default
// (space_gpu.cpp, tessera_search).
Expected<ir::Space> gpuSpace(const ir::Kernel& k, const TargetDesc& t);

// The family's rule space: knobs, domains, the legality constraint (codegen/gpu_rules.h plus the
// register estimates) and the rule files' own default. MLIR-free (tessera_space_rules): the legal
// configs are gpuSpace's, only the default may differ.
Expected<ir::Space> gpuRuleSpace(const ir::Kernel& k, const TargetDesc& t);

Expected<ir::Space> gemmGpuSpace(const ir::Kernel& k, const TargetDesc& t);
Expected<ir::Space> elementwiseGpuSpace(const ir::Kernel& k, const TargetDesc& t);
Expected<ir::Space> attentionGpuSpace(const ir::Kernel& k, const TargetDesc& t);

}  // namespace tessera::search
