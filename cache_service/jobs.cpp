// Owns the engine-independent parts of the job queue contract (jobs.h).
#include "cache_service/jobs.h"

#include <algorithm>
#include <chrono>
#include <string_view>
#include <vector>

#include "cache_service/record_json.h"

namespace tessera::cache {

nlohmann::json workerInfoToJson(const WorkerInfo& w) {
  return nlohmann::json{{"id", w.id},
                        {"token", w.token},
                        {"target", w.target},
                        {"arch", w.arch},
                        {"units", w.units},
                        {"model", w.model},
                        {"device", w.device},
                        {"host", w.host},
                        {"tessera_version", w.tessera_version},
                        {"llvm_version", w.llvm_version},
                        {"toolkit_version", w.toolkit_version},
                        {"driver_version", w.driver_version},
                        {"runtime_version", w.runtime_version},
                        {"slots", w.slots},
                        {"live", w.live},
                        {"leased", w.leased},
                        {"registered_at", w.registered_at},
                        {"last_seen", w.last_seen},
                        {"quarantined", w.quarantined}};
}

std::optional<ReportResult> settledReport(const std::string& state, const std::string& holder,
                                          const std::string& worker_id, int64_t record_id) {
  ReportResult res;
  if (holder != worker_id || state == "queued") {
    res.outcome = ReportOutcome::NotLeased;
    return res;
  }
  if (state != "done") return std::nullopt;
  res.outcome = ReportOutcome::Duplicate;
  res.put.id = record_id;
  res.put.duplicate = true;
  return res;
}

bool refusedBy(const std::string& refused_by, const std::string& worker_id) {
  size_t at = 0;
  while (at < refused_by.size()) {
    const size_t end = std::min(refused_by.find(',', at), refused_by.size());
    const std::string_view entry = std::string_view(refused_by).substr(at, end - at);
    const size_t colon = entry.find(':');
    if ((colon == std::string_view::npos ? entry : entry.substr(colon + 1)) == worker_id) return true;
    at = end + 1;
  }
  return false;
}

bool listHas(const std::string& comma_list, const std::string& item) {
  size_t at = 0;
  while (at <= comma_list.size()) {
    const size_t end = std::min(comma_list.find(',', at), comma_list.size());
    if (comma_list.compare(at, end - at, item) == 0) return true;
    at = end + 1;
  }
  return false;
}

namespace {
int64_t listSize(const std::string& comma_list) {
  return comma_list.empty() ? 0 : 1 + static_cast<int64_t>(std::count(comma_list.begin(), comma_list.end(), ','));
}
void listAdd(std::string& comma_list, const std::string& item) {
  if (item.empty() || listHas(comma_list, item)) return;
  comma_list += (comma_list.empty() ? "" : ",") + item;
}
// A refusal is listed as "token:worker_id" (a plain worker id in stores from before refusals were
// counted per token, standing for a token of its own).
std::string_view refuserToken(std::string_view entry) { return entry.substr(0, entry.find(':')); }
int64_t refusingTokens(const std::string& refused_by) {
  std::vector<std::string_view> tokens;
  size_t at = 0;
  while (at < refused_by.size()) {
    const size_t end = std::min(refused_by.find(',', at), refused_by.size());
    const std::string_view t = refuserToken(std::string_view(refused_by).substr(at, end - at));
    if (std::find(tokens.begin(), tokens.end(), t) == tokens.end()) tokens.push_back(t);
    at = end + 1;
  }
  return static_cast<int64_t>(tokens.size());
}
// Expiries of any kind after which an item is given up, per max_attempts: what stops a candidate
// that takes every worker down with it, whichever tokens they hold.
constexpr int kExpiriesPerAttempt = 4;
}  // namespace

LeaseStep leaseStep(const LeaseCandidate& c, const std::string& worker_id, const std::string& token, int64_t held,
                    const QueuePolicy& p) {
  LeaseStep s;
  s.lost_workers = c.lost_workers;
  s.lost_tokens = c.lost_tokens;
  if (refusedBy(c.refused_by, worker_id)) return s;  // it refused this item once; another worker's turn
  s.mine = c.state == "leased" && c.holder == worker_id;
  if (c.state == "leased" && !s.mine && !c.expired) {
    // Held by a live worker: taken over only by an idle worker of another token, and only once it
    // was held for steal_after_s (a hoarder's items; not a loss of the holder's).
    if (held > 0 || c.holder_token == token || c.held_s < p.steal_after_s) return s;
    s.kind = LeaseStep::Take;
    s.attempts = c.attempts + 1;
    return s;
  }
  const bool taken_over = c.state == "leased" && !s.mine;  // its holder's lease expired
  if (taken_over) {
    s.lost_workers += (s.lost_workers.empty() ? "" : ",") + c.holder;
    // A vanished worker costs its item one attempt per token, however many ids that token rotates.
    listAdd(s.lost_tokens, c.holder_token.empty() ? c.holder : c.holder_token);
    if (listSize(s.lost_tokens) >= p.max_attempts || c.attempts >= int64_t{p.max_attempts} * kExpiriesPerAttempt) {
      s.kind = LeaseStep::GiveUp;
      s.attempts = c.attempts;
      return s;
    }
  }
  s.kind = LeaseStep::Take;
  s.attempts = s.mine ? c.attempts : c.attempts + 1;
  return s;
}

int leaseBudget(int requested, int64_t slots, int64_t held_by_worker, int64_t held_by_token, const QueuePolicy& p) {
  const int64_t token_room = int64_t{p.max_leased_per_token} - (held_by_token - held_by_worker);
  return static_cast<int>(std::max<int64_t>(0, std::min({int64_t{requested}, std::max<int64_t>(slots, 1), token_room})));
}

RefusalStep refusalStep(const std::string& refused_by, const std::string& token, const std::string& worker_id,
                        int64_t others_live, const QueuePolicy& p) {
  RefusalStep s;
  s.refused_by = refused_by;
  listAdd(s.refused_by, token.empty() ? worker_id : token + ":" + worker_id);
  s.finished = others_live <= 0 || refusingTokens(s.refused_by) >= p.max_attempts;
  return s;
}

bool isJobId(std::string_view s) {
  if (s.size() != 32) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

std::string lostItemResult(int64_t attempts, const std::string& lost_workers) {
  return dumpJson(nlohmann::json{
      {"lost", attempts},
      {"message", "not measured: its lease expired " + std::to_string(attempts) +
                      " times (workers lost while measuring it: " + lost_workers + ")"}});
}

namespace {
std::string ph(bool numbered, int n) { return (numbered ? "$" : "?") + std::to_string(n); }
}  // namespace

std::string jobListSql(bool numbered) {
  const std::string now = "CAST(" + ph(numbered, 1) + " AS DOUBLE PRECISION)";
  return "SELECT j.id, j.submitter, j.kind, j.key_json, j.model, j.state, j.items, j.done_items, j.created_at,"
         " j.finished_at, (SELECT count(*) FROM job_items i WHERE i.job_id = j.id AND i.state = 'leased'"
         " AND i.lease_expires >= " + now + ") FROM jobs j WHERE (" + ph(numbered, 2) + " = '' OR j.submitter = " +
         ph(numbered, 2) + ") ORDER BY j.seq DESC LIMIT CAST(" + ph(numbered, 3) + " AS BIGINT)";
}

std::string jobHoldersSql(bool numbered) {
  return "SELECT DISTINCT worker_id FROM job_items WHERE job_id = " + ph(numbered, 1) +
         " AND state = 'leased' AND lease_expires >= CAST(" + ph(numbered, 2) + " AS DOUBLE PRECISION) ORDER BY worker_id";
}

std::string queueTotalsSql(bool numbered) {
  const std::string now = "CAST(" + ph(numbered, 1) + " AS DOUBLE PRECISION)";
  return "SELECT (SELECT count(*) FROM jobs WHERE state = 'open'),"
         " (SELECT coalesce(sum(items), 0) FROM jobs WHERE state = 'open'),"
         " (SELECT count(*) FROM job_items i JOIN jobs j ON j.id = i.job_id WHERE j.state = 'open'"
         " AND i.state = 'leased' AND i.lease_expires >= " + now + "),"
         " (SELECT coalesce(sum(done_items), 0) FROM jobs WHERE state = 'open')";
}

double epochSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace tessera::cache
