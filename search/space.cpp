// Owns the family dispatch of schedule spaces and shared domain helpers.
#include "search/space.h"

#include <algorithm>

namespace tessera::search {

std::vector<ir::KnobValue> clampDomain(const std::vector<int64_t>& all, int64_t limit) {
  std::vector<int64_t> v = all;
  std::sort(v.begin(), v.end());
  std::vector<ir::KnobValue> out;
  for (int64_t x : v) {
    out.push_back(x);
    if (x >= limit) break;
  }
  return out;
}

Expected<ir::Space> makeSpace(const ir::Kernel& k, const TargetDesc& t) {
  if (t.vendor != Vendor::Host)
    return makeError(ErrorCode::Unsupported, "no schedule space for target " + t.name + " yet");
  switch (k.family) {
    case ir::Family::Gemm: return gemmHostSpace(k, t);
    case ir::Family::Elementwise: return elementwiseHostSpace(k, t);
    case ir::Family::Attention: return attentionHostSpace(k, t);
  }
  return makeError(ErrorCode::Internal, "unknown family");
}

}  // namespace tessera::search
