// Owns the dispatch of the GPU legality rules by family (gpu_rules.h) and the elementwise rule
// (the kernel: gpu_elementwise.cpp); GEMM's and attention's are gpu_rules_gemm.cpp and
// gpu_rules_attention.cpp.
#include <algorithm>

#include "codegen/gpu_plans.h"

namespace tessera::codegen {

Expected<EwKnobs> readEwKnobs(const ir::Config& c, const ir::ElementwiseRegion& r, const ir::Kernel& k, const TargetDesc& t) {
  TESSERA_ASSIGN(GpuElementwiseConfig cfg, readGpuElementwiseConfig(c));
  EwKnobs kn{cfg.TPB, cfg.VW, cfg.EPT, cfg.GRID};
  auto bad = [](const std::string& m) { return makeError(ErrorCode::InvalidConfig, "elementwise: " + m); };
  if (kn.tpb <= 0 || kn.tpb > t.maxThreadsPerBlock)
    return bad("TPB=" + std::to_string(kn.tpb) + " outside 1.." + std::to_string(t.maxThreadsPerBlock));
  if (kn.vw <= 0 || kn.ept <= 0 || kn.ept > 16 || kn.grid < 0) return bad("VW, EPT (<= 16) must be positive, GRID >= 0");
  int64_t inner = r.iter.empty() ? 1 : r.iter.back();
  if (inner % kn.vw) return bad("VW=" + std::to_string(kn.vw) + " must divide the innermost dimension " + std::to_string(inner));
  int64_t widest = 1;
  for (const auto* d : k.inputs()) widest = std::max(widest, ir::byteSize(d->dtype));
  for (const auto* d : k.outputs()) widest = std::max(widest, ir::byteSize(d->dtype));
  if (kn.vw * widest > 16) return bad("VW=" + std::to_string(kn.vw) + " lanes exceed 16-byte accesses");
  return kn;
}

Status checkGpuElementwise(const ir::Kernel& k, const ir::Config& c, const TargetDesc& t) {
  TESSERA_ASSIGN(ir::ElementwiseRegion region, ir::analyzeElementwise(k));
  TESSERA_ASSIGN(EwKnobs kn, readEwKnobs(c, region, k, t));
  (void)kn;
  return {};
}

Status checkGpuConfig(const ir::Kernel& k, const ir::Config& c, const TargetDesc& t) {
  switch (k.family) {
    case ir::Family::Gemm: return checkGpuGemm(k, c, t);
    case ir::Family::Elementwise: return checkGpuElementwise(k, c, t);
    case ir::Family::Attention: return checkGpuAttention(k, c, t);
  }
  return makeError(ErrorCode::Internal, "unknown family");
}

}  // namespace tessera::codegen
