// Owns the GPU spaces as the tuner searches them: the family's rule space (space_gpu_rules in
// tessera_space_rules: knobs, domains, the code generator's legality) with its default moved where
// measurements or the analytic model know better: the device tables (search/measured_defaults.h)
// and, for sm_90a GEMMs the tables do not cover, the model's fastest wgmma config.
#include "search/space_gpu.h"

#include "measure/estimate.h"
#include "search/measured_defaults.h"

namespace tessera::search {

namespace {

// Where the hand rule's wgmma tiles leave SMs idle (fewer blocks than SMs: the 128x256 tiles of
// 1024^3 are 32 blocks on an H100's 132) and no device table covers the shape: the analytic
// model's fastest wgmma config of the space (block and warpgroup tiles, ring slots, split-K) is
// the default instead. The tables decide where they reach (measured_defaults.h).
void modelDefault(ir::Space& s, const ir::Kernel& k, const TargetDesc& t) {
  ir::Config d = s.defaults();
  if (std::get<std::string>(d.values.at("strategy")) != "wgmma") return;
  auto cur = estimateKernel(k, d, t);
  if (!cur.ok() || cur->workload.blocks >= t.units) return;
  double best = cur->model.fits ? cur->model.timeUs : 1e300;
  ir::Config pick = d;
  const ir::Knob *bm = s.find("BM"), *bn = s.find("BN"), *st = s.find("STAGES"), *sk = s.find("SPLITK");
  for (const auto& vm : bm->domain)
    for (const auto& vn : bn->domain)
      for (int64_t tm : {64, 128})
        for (const auto& vs : st->domain)
          for (const auto& vk : sk->domain) {
            ir::Config c = d;
            c.set("BM", vm);
            c.set("BN", vn);
            c.set("TM", tm);
            c.set("TN", vn);
            c.set("STAGES", vs);
            c.set("SPLITK", vk);
            if (s.check(c)) continue;
            auto e = estimateKernel(k, c, t);
            if (!e.ok() || !e->model.fits || e->model.timeUs >= best) continue;
            best = e->model.timeUs;
            pick = c;
          }
  for (auto& kn : s.knobs) kn.def = pick.values.at(kn.name);
}

}  // namespace

Expected<ir::Space> gpuSpace(const ir::Kernel& k, const TargetDesc& t) {
  TESSERA_ASSIGN(ir::Space s, gpuRuleSpace(k, t));
  if (k.family == ir::Family::Gemm && !measuredDefault(k, t)) modelDefault(s, k, t);
  applyMeasuredDefault(s, k, t);
  return s;
}

}  // namespace tessera::search
