// Owns the GPU spaces as the tuner searches them: the family's rule space (space_gpu_rules in
// tessera_space_rules: knobs, domains, the code generator's legality) with its default moved where
// measurements or the analytic model know better: the device tables (search/measured_defaults.h)
// and, for sm_90a GEMMs the tables do not cover, the model's fastest wgmma config.
#include "search/space_gpu.h"

#include <algorithm>
#include <vector>

#include "measure/estimate.h"
#include "search/measured_defaults.h"

namespace tessera::search {

using measure::estimateKernel;

namespace {

// Where the hand rule's wgmma tiles leave SMs idle (fewer blocks than SMs: the 128x256 tiles of
// 1024^3 are 32 blocks on an H100's 132) and no device table covers the shape: the analytic
// model's fastest wgmma config of the space (block and warpgroup tiles, ring slots, split-K; among
// near-ties one whose tiles fill the SMs) is the default instead. The tables decide where they
// reach (measured_defaults.h).
void modelDefault(ir::Space& s, const ir::Kernel& k, const TargetDesc& t) {
  ir::Config d = s.defaults();
  if (std::get<std::string>(d.values.at("strategy")) != "wgmma") return;
  auto cur = estimateKernel(k, d, t);
  if (!cur.ok() || cur->workload.blocks >= t.units) return;
  // Candidates within kTie of the fastest estimate are one estimate to the model (its known error
  // is larger); among them those whose output tiles busy at least 3/4 of the SMs come first (the
  // device's lesson at these shapes: tiles that leave SMs idle measured slow; split-K adds blocks,
  // not tiles), then the faster one.
  constexpr double kTie = 1.02;
  struct Cand {
    double us;
    bool fills;  // the output tiles (blocks / SPLITK) busy at least 3/4 of the SMs
    ir::Config c;
  };
  std::vector<Cand> cands;
  auto fills = [&](const ir::Config& c, int64_t blocks) {
    return 4 * (blocks / std::max<int64_t>(std::get<int64_t>(c.values.at("SPLITK")), 1)) >= 3 * int64_t(t.units);
  };
  if (cur->model.fits) cands.push_back({cur->model.timeUs, fills(d, cur->workload.blocks), d});
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
            if (!e.ok() || !e->model.fits) continue;
            cands.push_back({e->model.timeUs, fills(c, e->workload.blocks), c});
          }
  if (cands.empty()) return;
  double best = 1e300;
  for (const auto& x : cands) best = std::min(best, x.us);
  const Cand* pickC = nullptr;
  for (const auto& x : cands)
    if (x.us <= kTie * best && (!pickC || (x.fills && !pickC->fills) || (x.fills == pickC->fills && x.us < pickC->us))) pickC = &x;
  const ir::Config pick = pickC->c;
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
