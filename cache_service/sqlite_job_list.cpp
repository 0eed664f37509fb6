// Owns the SQLite engine's view of the job queue for the dashboard (JobQueue::jobList, jobs.h):
// recent jobs, their items' states and the queue's totals, read in one snapshot.
#include <algorithm>

#include "cache_service/record_json.h"
#include "cache_service/sqlite_store_impl.h"

namespace tessera::cache {

Expected<JobList> SqliteStore::jobList(const std::string& submitter, int limit, const QueuePolicy&) {
  static const std::string jobs_sql = jobListSql(false), holders_sql = jobHoldersSql(false),
                           totals_sql = queueTotalsSql(false);
  JobList out;
  out.now = epochSeconds();
  TESSERA_ASSIGN(Reader rd, reader());
  TESSERA_TRY(rd->exec("BEGIN"));
  auto body = [&]() -> Status {
    {
      TESSERA_ASSIGN(sql::Stmt * st, rd->cached(jobs_sql));
      sql::Use use(*st);
      st->bind(1, out.now).bind(2, submitter).bind(3, std::clamp(limit, 1, kMaxJobList));
      for (;;) {
        TESSERA_ASSIGN(bool row, st->step());
        if (!row) break;
        JobSummary j;
        j.id = st->text(0);
        j.submitter = st->text(1);
        j.kind = st->text(2);
        TESSERA_ASSIGN(auto key_json, parseJson(st->text(3)));
        TESSERA_ASSIGN(j.key, hardKeyFromJson(key_json, "key"));
        j.key_id = keyIdOf(j.key);
        j.model = st->text(4);
        j.state = st->text(5);
        j.items = st->i64(6);
        j.done = st->i64(7);
        j.created_at = st->f64(8);
        j.finished_at = st->f64(9);
        j.leased = st->i64(10);
        j.queued = std::max<int64_t>(0, j.items - j.done - j.leased);
        out.jobs.push_back(std::move(j));
      }
    }
    for (JobSummary& j : out.jobs) {
      if (j.leased == 0) continue;
      TESSERA_ASSIGN(sql::Stmt * st, rd->cached(holders_sql));
      sql::Use use(*st);
      st->bind(1, j.id).bind(2, out.now);
      for (;;) {
        TESSERA_ASSIGN(bool row, st->step());
        if (!row) break;
        j.holders.push_back(st->text(0));
      }
    }
    TESSERA_ASSIGN(sql::Stmt * st, rd->cached(totals_sql));
    sql::Use use(*st);
    st->bind(1, out.now);
    TESSERA_ASSIGN(bool row, st->step());
    if (row) {
      out.totals.open_jobs = st->i64(0);
      out.totals.leased = st->i64(2);
      out.totals.done = st->i64(3);
      out.totals.queued = std::max<int64_t>(0, st->i64(1) - out.totals.done - out.totals.leased);
    }
    return {};
  };
  Status s = body();
  (void)rd->exec("COMMIT");
  if (!s.ok()) return s.takeError();
  return out;
}

}  // namespace tessera::cache
