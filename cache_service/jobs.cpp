// Owns the engine-independent parts of the job queue contract (jobs.h).
#include "cache_service/jobs.h"

#include <chrono>

#include "cache_service/record_json.h"

namespace tessera::cache {

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
