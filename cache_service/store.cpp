// Owns the parts of the RecordStore interface shared by every implementation.
#include "cache_service/store.h"

#include <algorithm>
#include <tuple>

namespace tessera::cache {

std::string_view putOutcomeName(PutOutcome o) {
  switch (o) {
    case PutOutcome::Inserted: return "inserted";
    case PutOutcome::Improved: return "improved";
    case PutOutcome::Kept: return "kept";
  }
  return "kept";
}

Expected<PutResult> RecordStore::putOne(const Record& r, const PutOptions& opts) {
  TESSERA_ASSIGN(auto results, put(std::span<const Record>(&r, 1), opts));
  return std::move(results.front());
}

void rankNearest(const HardKey& key, std::vector<NearestMatch>& matches, int limit) {
  auto rank = [&](const NearestMatch& m) {
    return std::make_tuple(m.distance, m.record.key.layout != key.layout, m.record.median_us, m.record.id);
  };
  std::sort(matches.begin(), matches.end(), [&](const auto& a, const auto& b) { return rank(a) < rank(b); });
  if (static_cast<int>(matches.size()) > limit) matches.resize(static_cast<size_t>(std::max(limit, 0)));
}

}  // namespace tessera::cache
