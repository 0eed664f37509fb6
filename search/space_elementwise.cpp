// Owns the host elementwise space: vector lanes VW and vectors per step UNROLL along the
// innermost dimension (tails are masked, so any shape is legal), and non-temporal stores.
#include <algorithm>

#include "ir/families.h"
#include "search/space.h"

namespace tessera::search {

Expected<ir::Space> elementwiseHostSpace(const ir::Kernel& k, const TargetDesc& t) {
  TESSERA_ASSIGN(ir::ElementwiseRegion r, ir::analyzeElementwise(k));
  int64_t inner = r.iter.back();
  int64_t lanes = std::max(4, t.simdBits / 32);
  double outBytes = 0;
  for (const auto* o : k.outputs()) outBytes += double(o->numel() * ir::byteSize(o->dtype));
  ir::Space s;
  s.family = "elementwise";
  std::vector<ir::KnobValue> vw = clampDomain({4, 8, 16, 32}, inner);
  std::vector<ir::KnobValue> un = {int64_t(1), int64_t(2), int64_t(4), int64_t(8)};
  int64_t vwDef = 4;
  for (const auto& v : vw)
    if (std::get<int64_t>(v) <= lanes) vwDef = std::get<int64_t>(v);
  int64_t unDef = 1;
  while (unDef < 4 && vwDef * unDef * 2 <= std::max<int64_t>(inner, vwDef)) unDef *= 2;
  s.knobs = {
      {"VW", vw, vwDef, "vector lanes per operation"},
      {"UNROLL", un, unDef, "vectors per loop step (tile = VW*UNROLL elements)"},
      {"NT", {int64_t(0), int64_t(1)}, int64_t(outBytes > t.l3Bytes / 2 ? 1 : 0),
       "non-temporal stores: outputs stream past the caches (no read-for-ownership)"},
  };
  s.constraint = [inner](const ir::Config& c) -> std::optional<std::string> {
    int64_t tile = std::get<int64_t>(c.values.at("VW")) * std::get<int64_t>(c.values.at("UNROLL"));
    // A tile more than twice the row only adds masked-off lanes.
    if (tile > 2 * std::max<int64_t>(inner, 32)) return "VW*UNROLL=" + std::to_string(tile) + " exceeds twice the innermost dimension";
    return std::nullopt;
  };
  return s;
}

}  // namespace tessera::search
