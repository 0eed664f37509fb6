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

double epochSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace tessera::cache
