// Owns the parts of the RecordStore interface shared by every implementation.
#include "store/store.h"

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

std::string adminActionSql(AdminAction a) {
  switch (a) {
    case AdminAction::Delete: return "DELETE FROM records AS r WHERE ";
    case AdminAction::Quarantine: return "UPDATE records AS r SET quarantined = 1 WHERE ";
    case AdminAction::Release: return "UPDATE records AS r SET quarantined = 0 WHERE ";
    case AdminAction::Pin: return "UPDATE records AS r SET trust = 2 WHERE ";
    case AdminAction::Unpin: return "UPDATE records AS r SET trust = 0 WHERE ";
    case AdminAction::Dispute: return "UPDATE records AS r SET trust = -2 WHERE ";
    case AdminAction::Count: break;
  }
  return "SELECT count(*) FROM records r WHERE ";
}

std::string adminActionWhere(AdminAction a) {
  switch (a) {
    case AdminAction::Quarantine: return " AND r.quarantined = 0";
    // What `token revoke --retract` set aside stays aside: a token's name is never reused, so its
    // records are the revoked holder's.
    case AdminAction::Release:
      return " AND r.quarantined = 1 AND r.writer NOT IN (SELECT name FROM tokens WHERE revoked_at IS NOT NULL)";
    case AdminAction::Pin: return " AND r.status = 'ok' AND r.quarantined = 0 AND r.trust <> 2";
    case AdminAction::Unpin: return " AND r.trust = 2";
    case AdminAction::Dispute: return " AND r.status = 'ok' AND r.quarantined = 0 AND r.trust = 0";
    case AdminAction::Count:
    case AdminAction::Delete: break;
  }
  return "";
}

void rankNearest(const HardKey& key, std::vector<NearestMatch>& matches, int limit) {
  auto rank = [&](const NearestMatch& m) {
    return std::make_tuple(m.distance, m.record.key.layout != key.layout, m.record.median_us, m.record.id);
  };
  std::sort(matches.begin(), matches.end(), [&](const auto& a, const auto& b) { return rank(a) < rank(b); });
  if (static_cast<int>(matches.size()) > limit) matches.resize(static_cast<size_t>(std::max(limit, 0)));
}

}  // namespace tessera::cache
