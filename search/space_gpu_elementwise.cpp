// Owns the GPU elementwise space (codegen/gpu_elementwise.cpp): threads per block TPB, vector
// lanes VW (dividing the innermost dim, at most 16-byte accesses), vectors per thread EPT and the
// grid shape GRID (0: one tile per block; k: k blocks per SM/CU and a grid-stride loop).
#include <algorithm>

#include "codegen/gpu_rules.h"
#include "ir/families.h"
#include "ir/verifier.h"
#include "search/space.h"
#include "search/space_gpu.h"

namespace tessera::search {

Expected<ir::Space> elementwiseGpuSpace(const ir::Kernel& k, const TargetDesc& t) {
  TESSERA_ASSIGN(ir::ElementwiseRegion r, ir::analyzeElementwise(k));
  int64_t total = 1;
  for (int64_t d : r.iter) total *= d;
  const int64_t inner = r.iter.empty() ? 1 : r.iter.back();
  int64_t widest = 1;
  for (const auto* d : k.inputs()) widest = std::max(widest, ir::byteSize(d->dtype));
  for (const auto* d : k.outputs()) widest = std::max(widest, ir::byteSize(d->dtype));

  std::vector<ir::KnobValue> tpb, vw, ept, grid;
  for (int64_t v : {64, 128, 256, 512, 1024})
    if (v <= t.maxThreadsPerBlock && v % t.warpSize == 0) tpb.push_back(v);
  int64_t vwDef = 1;
  for (int64_t v : {1, 2, 4, 8})
    if (inner % v == 0 && v * widest <= 16) {
      vw.push_back(v);
      vwDef = v;
    }
  for (int64_t v : {1, 2, 4, 8}) ept.push_back(v);
  for (int64_t v : {0, 1, 2, 4, 8, 16}) grid.push_back(v);

  ir::Space s;
  s.family = "elementwise";
  const int64_t vectors = total / vwDef;
  // Small problems: fewer threads per block so the grid still spreads over the SMs/CUs.
  int64_t tpbDef = 256;
  while (tpbDef > 64 && vectors / tpbDef < 2 * t.units) tpbDef /= 2;
  s.knobs = {
      {"TPB", tpb, tpbDef, "threads per block"},
      {"VW", vw, vwDef, "vector lanes per load/store (divides the innermost dim, <= 16 bytes)"},
      {"EPT", ept, int64_t(vectors >= int64_t(t.units) * 1024 * 4 ? 4 : 1), "vectors per thread per grid step"},
      {"GRID", grid, int64_t(0), "0: one tile per block; k: k blocks per SM/CU with a grid-stride loop"},
  };
  ir::Kernel kc = k;
  TargetDesc tc = t;
  s.constraint = [total, kc, tc](const ir::Config& c) -> std::optional<std::string> {
    Status st = codegen::checkGpuConfig(kc, c, tc);
    if (!st.ok()) return st.error().message;
    int64_t tpbv = std::get<int64_t>(c.values.at("TPB")), vwv = std::get<int64_t>(c.values.at("VW")),
            eptv = std::get<int64_t>(c.values.at("EPT"));
    // A block tile more than twice the problem only adds predicated-off threads.
    if (tpbv * vwv * eptv > 2 * std::max<int64_t>(total, 64 * vwv))
      return "TPB*VW*EPT=" + std::to_string(tpbv * vwv * eptv) + " exceeds twice the problem (" + std::to_string(total) + ")";
    return std::nullopt;
  };
  return s;
}

}  // namespace tessera::search
