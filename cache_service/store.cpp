// Owns the parts of the RecordStore interface shared by every implementation.
#include "cache_service/store.h"

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

}  // namespace tessera::cache
