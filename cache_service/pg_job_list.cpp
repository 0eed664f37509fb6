// Owns the PostgreSQL engine's view of the job queue for the dashboard (JobQueue::jobList,
// jobs.h): recent jobs, their items' states and the queue's totals, in one read-only snapshot on
// the database's clock.
#include <algorithm>

#include "cache_service/pg_store_impl.h"
#include "cache_service/record_json.h"

namespace tessera::cache::pg {

Expected<JobList> PgStore::jobList(const std::string& submitter, int limit, const QueuePolicy&) {
  static const std::string jobs_sql = jobListSql(true), holders_sql = jobHoldersSql(true),
                           totals_sql = queueTotalsSql(true);
  JobList out;
  Status s = runTx(pool_, TxKind::ReadOnly, [&](Conn& c, pqxx::transaction_base& t) -> Status {
    out = {};
    out.now = asDouble(exec(c, t, std::string("SELECT ") + kNowEpoch)[0][0]);
    const std::string now = num(out.now);
    for (const auto& row : exec(c, t, jobs_sql, now, submitter, std::to_string(std::clamp(limit, 1, kMaxJobList)))) {
      JobSummary j;
      j.id = asText(row[0]);
      j.submitter = asText(row[1]);
      j.kind = asText(row[2]);
      TESSERA_ASSIGN(auto key_json, parseJson(asText(row[3])));
      TESSERA_ASSIGN(j.key, hardKeyFromJson(key_json, "key"));
      j.key_id = keyIdOf(j.key);
      j.model = asText(row[4]);
      j.state = asText(row[5]);
      j.items = asInt(row[6]);
      j.done = asInt(row[7]);
      j.created_at = asDouble(row[8]);
      j.finished_at = asDouble(row[9]);
      j.leased = asInt(row[10]);
      j.queued = std::max<int64_t>(0, j.items - j.done - j.leased);
      out.jobs.push_back(std::move(j));
    }
    for (JobSummary& j : out.jobs)
      if (j.leased > 0)
        for (const auto& row : exec(c, t, holders_sql, j.id, now)) j.holders.push_back(asText(row[0]));
    auto row = exec(c, t, totals_sql, now)[0];
    out.totals.open_jobs = asInt(row[0]);
    out.totals.leased = asInt(row[2]);
    out.totals.done = asInt(row[3]);
    out.totals.queued = std::max<int64_t>(0, asInt(row[1]) - out.totals.done - out.totals.leased);
    return {};
  });
  if (!s.ok()) return s.takeError();
  return out;
}

}  // namespace tessera::cache::pg
