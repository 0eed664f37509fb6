// Owns the job queue of the SQLite engine (jobs.h): every change runs in the store's group commit
// (one BEGIN IMMEDIATE transaction on the single writer connection), so leasing an item, and
// storing a result together with its record, are atomic; reads use the pooled readers.
#include <algorithm>

#include "cache_service/record_json.h"
#include "cache_service/sqlite_store_impl.h"

namespace tessera::cache {

namespace {

constexpr const char* kWorkerColumns =
    "w.id, w.token, w.target, w.arch, w.units, w.model, w.device, w.host, w.tessera_version, w.llvm_version,"
    " w.toolkit_version, w.driver_version, w.slots, w.registered_at, w.last_seen,"
    " (SELECT count(*) FROM job_items i WHERE i.worker_id = w.id AND i.state = 'leased'), w.quarantined";

WorkerInfo workerRow(const sql::Stmt& st, double now, const QueuePolicy& p) {
  WorkerInfo w;
  w.id = st.text(0);
  w.token = st.text(1);
  w.target = st.text(2);
  w.arch = st.text(3);
  w.units = st.i64(4);
  w.model = st.text(5);
  w.device = st.text(6);
  w.host = st.text(7);
  w.tessera_version = st.text(8);
  w.llvm_version = st.text(9);
  w.toolkit_version = st.text(10);
  w.driver_version = st.text(11);
  w.slots = st.i64(12);
  w.registered_at = st.f64(13);
  w.last_seen = st.f64(14);
  w.leased = st.i64(15);
  w.quarantined = st.text(16);
  w.live = w.last_seen >= now - p.worker_ttl_s && w.quarantined.empty();
  return w;
}

constexpr const char* kJobColumns =
    "id, submitter, kind, key_json, model, kernel, settings, rounds, first_trial, elapsed_s, state";

Expected<JobSpec> jobRow(const sql::Stmt& st, std::string* state) {
  JobSpec j;
  j.id = st.text(0);
  j.submitter = st.text(1);
  j.kind = st.text(2);
  TESSERA_ASSIGN(auto key_json, parseJson(st.text(3)));
  TESSERA_ASSIGN(j.key, hardKeyFromJson(key_json, "key"));
  j.key_id = keyIdOf(j.key);
  j.model = st.text(4);
  j.kernel = st.text(5);
  j.settings = st.text(6);
  j.rounds = st.i64(7);
  j.first_trial = st.i64(8);
  j.elapsed_s = st.f64(9);
  if (state) *state = st.text(10);
  return j;
}

// Live workers that may lease a job of this key and model.
Expected<int64_t> liveWorkersFor(sql::Db& db, const HardKey& key, const std::string& model, double now,
                                 const QueuePolicy& p) {
  TESSERA_ASSIGN(sql::Stmt * st, db.cached(
      "SELECT count(*) FROM workers WHERE target = ? AND arch = ? AND units = ? AND (?4 = '' OR model = ?4)"
      " AND last_seen >= ?5 AND quarantined = ''"));
  sql::Use use(*st);
  st->bind(1, key.target).bind(2, key.arch).bind(3, key.units).bind(4, model).bind(5, now - p.worker_ttl_s);
  TESSERA_ASSIGN(bool row, st->step());
  return row ? st->i64(0) : 0;
}

// One more item of a job is done; the job is done with its last item.
Status itemDone(sql::Db& db, const std::string& job_id, double now) {
  TESSERA_ASSIGN(sql::Stmt * st, db.cached(
      "UPDATE jobs SET done_items = done_items + 1,"
      " state = CASE WHEN state = 'open' AND done_items + 1 >= items THEN 'done' ELSE state END,"
      " finished_at = CASE WHEN state = 'open' AND done_items + 1 >= items THEN ?2 ELSE finished_at END"
      " WHERE id = ?1"));
  sql::Use use(*st);
  st->bind(1, job_id).bind(2, now);
  return st->run();
}

// Marks a worker of `token` as seen now; NotFound when the service does not know it (or it is
// another token's), Unsupported when it was quarantined.
Status touchWorker(sql::Db& db, const std::string& worker_id, const std::string& token, double now) {
  TESSERA_ASSIGN(sql::Stmt * st, db.cached("UPDATE workers SET last_seen = ? WHERE id = ? AND token = ? RETURNING quarantined"));
  sql::Use use(*st);
  st->bind(1, now).bind(2, worker_id).bind(3, token);
  TESSERA_ASSIGN(bool row, st->step());
  if (!row) return makeError(ErrorCode::NotFound, "unknown worker " + worker_id);
  if (!st->text(0).empty())
    return makeError(ErrorCode::Unsupported, "worker " + worker_id + " is quarantined: " + st->text(0));
  return {};
}

}  // namespace

Status SqliteStore::registerWorker(const WorkerInfo& w, const QueuePolicy& p) {
  return write([&](sql::Db& db, Touched&) -> Status {
    const double now = epochSeconds();
    {
      TESSERA_ASSIGN(sql::Stmt * st, db.cached("SELECT quarantined FROM workers WHERE id = ? AND token = ?"));
      sql::Use use(*st);
      st->bind(1, w.id).bind(2, w.token);
      TESSERA_ASSIGN(bool row, st->step());
      if (row && !st->text(0).empty())
        return makeError(ErrorCode::Unsupported, "worker " + w.id + " is quarantined: " + st->text(0));
    }
    {
      TESSERA_ASSIGN(sql::Stmt * st, db.cached(
          "SELECT count(*) FROM workers WHERE token = ? AND id != ? AND last_seen >= ? AND quarantined = ''"));
      sql::Use use(*st);
      st->bind(1, w.token).bind(2, w.id).bind(3, now - p.worker_ttl_s);
      TESSERA_ASSIGN(bool row, st->step());
      if (row && st->i64(0) >= p.max_workers_per_token)
        return makeError(ErrorCode::RuntimeError, "token '" + w.token + "' already has " + std::to_string(st->i64(0)) +
                                                      " live workers (at most " +
                                                      std::to_string(p.max_workers_per_token) + ")");
    }
    TESSERA_ASSIGN(sql::Stmt * st, db.cached(
        "INSERT INTO workers(id, token, target, arch, units, model, device, host, tessera_version, llvm_version,"
        " toolkit_version, driver_version, slots, registered_at, last_seen) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
        " ON CONFLICT(id) DO UPDATE SET target = excluded.target, arch = excluded.arch, units = excluded.units,"
        " model = excluded.model, device = excluded.device, host = excluded.host,"
        " tessera_version = excluded.tessera_version, llvm_version = excluded.llvm_version,"
        " toolkit_version = excluded.toolkit_version, driver_version = excluded.driver_version,"
        " slots = excluded.slots, last_seen = excluded.last_seen WHERE workers.token = excluded.token"));
    sql::Use use(*st);
    st->bind(1, w.id).bind(2, w.token).bind(3, w.target).bind(4, w.arch).bind(5, w.units).bind(6, w.model);
    st->bind(7, w.device).bind(8, w.host).bind(9, w.tessera_version).bind(10, w.llvm_version);
    st->bind(11, w.toolkit_version).bind(12, w.driver_version).bind(13, w.slots).bind(14, now).bind(15, now);
    TESSERA_TRY(st->run());
    if (sqlite3_changes(db.handle()) == 0)
      return makeError(ErrorCode::InvalidArgument, "worker id " + w.id + " belongs to another token");
    return {};
  });
}

Expected<int64_t> SqliteStore::heartbeat(const std::string& worker_id, const std::string& token, const QueuePolicy& p) {
  int64_t renewed = 0;
  Status s = write([&](sql::Db& db, Touched&) -> Status {
    const double now = epochSeconds();
    TESSERA_TRY(touchWorker(db, worker_id, token, now));
    // Renewed for at most max_hold_s after the lease was taken: an item a worker holds without
    // reporting goes back to the queue, however faithfully it beats.
    TESSERA_ASSIGN(sql::Stmt * st, db.cached(
        "UPDATE job_items SET lease_expires = min(?1, CASE WHEN leased_at > 0 THEN leased_at + ?2 ELSE ?1 END)"
        " WHERE worker_id = ?3 AND state = 'leased'"));
    sql::Use use(*st);
    st->bind(1, now + p.lease_s).bind(2, p.max_hold_s).bind(3, worker_id);
    TESSERA_TRY(st->run());
    renewed = sqlite3_changes(db.handle());
    return {};
  });
  if (!s.ok()) return s.takeError();
  return renewed;
}

Expected<std::vector<WorkerInfo>> SqliteStore::workers(const WorkerFilter& f, const QueuePolicy& p) {
  const double now = epochSeconds();
  std::string q = std::string("SELECT ") + kWorkerColumns + " FROM workers w WHERE 1";
  std::vector<std::string> texts;
  for (auto [col, v] : {std::pair<const char*, const std::string*>{"w.target", &f.target}, {"w.arch", &f.arch},
                        {"w.model", &f.model}}) {
    if (v->empty()) continue;
    q += std::string(" AND ") + col + " = ?";
    texts.push_back(*v);
  }
  if (f.units) q += " AND w.units = ?";
  if (f.live_only) q += " AND w.last_seen >= ?";
  q += " ORDER BY w.target, w.arch, w.id LIMIT 10000";
  TESSERA_ASSIGN(Reader rd, reader());
  TESSERA_ASSIGN(sql::Stmt * st, rd->cached(q));
  sql::Use use(*st);
  int i = 1;
  for (const auto& t : texts) st->bind(i++, t);
  if (f.units) st->bind(i++, *f.units);
  if (f.live_only) st->bind(i++, now - p.worker_ttl_s);
  std::vector<WorkerInfo> out;
  for (;;) {
    TESSERA_ASSIGN(bool row, st->step());
    if (!row) break;
    out.push_back(workerRow(*st, now, p));
  }
  return out;
}

Expected<SubmitResult> SqliteStore::submit(const JobSpec& job, const QueuePolicy& p) {
  SubmitResult res;
  Status s = write([&](sql::Db& db, Touched&) -> Status {
    const double now = epochSeconds();
    {
      TESSERA_ASSIGN(sql::Stmt * st, db.cached("SELECT submitter FROM jobs WHERE id = ?"));
      sql::Use use(*st);
      st->bind(1, job.id);
      TESSERA_ASSIGN(bool row, st->step());
      if (row && st->text(0) != job.submitter)
        return makeError(ErrorCode::InvalidArgument, "job id " + job.id + " belongs to another submitter");
      res.created = !row;
    }
    if (res.created) {
      TESSERA_ASSIGN(sql::Stmt * st, db.cached(
          "INSERT INTO jobs(id, submitter, kind, key_id, key_json, target, arch, units, model, kernel, settings,"
          " rounds, first_trial, elapsed_s, state, items, created_at) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,'open',?,?)"));
      sql::Use use(*st);
      st->bind(1, job.id).bind(2, job.submitter).bind(3, job.kind).bind(4, keyIdOf(job.key));
      st->bind(5, dumpJson(hardKeyToJson(job.key))).bind(6, job.key.target).bind(7, job.key.arch);
      st->bind(8, job.key.units).bind(9, job.model).bind(10, job.kernel).bind(11, job.settings);
      st->bind(12, job.rounds).bind(13, job.first_trial).bind(14, job.elapsed_s);
      st->bind(15, static_cast<int64_t>(job.items.size())).bind(16, now);
      TESSERA_TRY(st->run());
      TESSERA_ASSIGN(sql::Stmt * item, db.cached("INSERT INTO job_items(job_id, item, payload, state) VALUES(?,?,?,'queued')"));
      for (size_t i = 0; i < job.items.size(); ++i) {
        sql::Use use2(*item);
        item->bind(1, job.id).bind(2, static_cast<int64_t>(i)).bind(3, job.items[i]);
        TESSERA_TRY(item->run());
      }
    }
    TESSERA_ASSIGN(res.live_workers, liveWorkersFor(db, job.key, job.model, now, p));
    return {};
  });
  if (!s.ok()) return s.takeError();
  return res;
}

Expected<Lease> SqliteStore::lease(const std::string& worker_id, const std::string& token, int max_items,
                                   const QueuePolicy& p) {
  Lease out;
  Status s = write([&](sql::Db& db, Touched&) -> Status {
    out = Lease{};
    const double now = epochSeconds();
    TESSERA_TRY(touchWorker(db, worker_id, token, now));
    std::string target, arch, model;
    int64_t units = 0, slots = 1, held_by_worker = 0, held_by_token = 0;
    {
      TESSERA_ASSIGN(sql::Stmt * st, db.cached(
          "SELECT target, arch, units, model, slots,"
          " (SELECT count(*) FROM job_items WHERE worker_id = ?1 AND state = 'leased' AND lease_expires >= ?3),"
          " (SELECT count(*) FROM job_items i JOIN workers o ON o.id = i.worker_id WHERE o.token = ?2"
          "  AND i.state = 'leased' AND i.lease_expires >= ?3)"
          " FROM workers WHERE id = ?1"));
      sql::Use use(*st);
      st->bind(1, worker_id).bind(2, token).bind(3, now);
      TESSERA_ASSIGN(bool row, st->step());
      if (!row) return makeError(ErrorCode::NotFound, "unknown worker " + worker_id);
      target = st->text(0);
      arch = st->text(1);
      units = st->i64(2);
      model = st->text(3);
      slots = st->i64(4);
      held_by_worker = st->i64(5);
      held_by_token = st->i64(6);
    }
    const int budget = leaseBudget(max_items, slots, held_by_worker, held_by_token, p);
    // Candidates in submission order, this worker's own unanswered leases first; items whose
    // leases expired too often are failed on the way and do not count.
    struct Row {
      std::string job_id, payload;
      int64_t item;
      LeaseCandidate c;
    };
    std::vector<Row> cands;
    {
      TESSERA_ASSIGN(sql::Stmt * st, db.cached(
          "SELECT i.job_id, i.item, i.payload, i.state, i.worker_id, i.attempts, i.lost_workers,"
          " coalesce(h.token, ''), i.lost_tokens, i.refused_by, i.lease_expires < ?6, ?6 - i.leased_at"
          " FROM job_items i JOIN jobs j ON j.id = i.job_id LEFT JOIN workers h ON h.id = i.worker_id"
          " WHERE j.state = 'open' AND j.target = ?1 AND j.arch = ?2 AND j.units = ?3 AND (j.model = '' OR j.model = ?4)"
          " AND (i.state = 'queued' OR (i.state = 'leased' AND (i.lease_expires < ?6 OR i.worker_id = ?5"
          "  OR (i.leased_at > 0 AND i.leased_at < ?6 - ?8))))"
          // Its own unanswered leases first, items held by other live workers (to take over) last.
          " ORDER BY (i.state = 'leased' AND i.worker_id = ?5) DESC,"
          " (i.state = 'leased' AND i.worker_id != ?5 AND i.lease_expires >= ?6) ASC, j.seq, i.item LIMIT ?7"));
      sql::Use use(*st);
      st->bind(1, target).bind(2, arch).bind(3, units).bind(4, model).bind(5, worker_id).bind(6, now);
      st->bind(7, static_cast<int64_t>(budget) + 64).bind(8, p.steal_after_s);
      for (;;) {
        TESSERA_ASSIGN(bool row, st->step());
        if (!row) break;
        Row r{st->text(0), st->text(2), st->i64(1), {}};
        r.c.state = st->text(3);
        r.c.holder = st->text(4);
        r.c.attempts = st->i64(5);
        r.c.lost_workers = st->text(6);
        r.c.holder_token = st->text(7);
        r.c.lost_tokens = st->text(8);
        r.c.refused_by = st->text(9);
        r.c.expired = st->i64(10) != 0;
        r.c.held_s = st->f64(11);
        cands.push_back(std::move(r));
      }
    }
    std::vector<std::string> job_ids;
    for (const Row& c : cands) {
      const LeaseStep step = leaseStep(c.c, worker_id, token, held_by_worker, p);
      if (step.kind == LeaseStep::Skip) continue;
      if (step.kind == LeaseStep::GiveUp) {
        TESSERA_ASSIGN(sql::Stmt * st, db.cached(
            "UPDATE job_items SET state = 'done', worker_id = '', result = ?, lost_workers = ?, lost_tokens = ?"
            " WHERE job_id = ? AND item = ?"));
        sql::Use use(*st);
        st->bind(1, lostItemResult(step.attempts, step.lost_workers)).bind(2, step.lost_workers);
        st->bind(3, step.lost_tokens).bind(4, c.job_id).bind(5, c.item);
        TESSERA_TRY(st->run());
        TESSERA_TRY(itemDone(db, c.job_id, now));
        continue;
      }
      if (static_cast<int>(out.items.size()) >= budget) continue;
      TESSERA_ASSIGN(sql::Stmt * st, db.cached(
          "UPDATE job_items SET state = 'leased', worker_id = ?1, attempts = ?2, lost_workers = ?3, lost_tokens = ?4,"
          " leased_at = CASE WHEN ?5 AND leased_at > 0 THEN leased_at ELSE ?6 END,"
          " lease_expires = min(?6 + ?7, CASE WHEN ?5 AND leased_at > 0 THEN leased_at ELSE ?6 END + ?8)"
          " WHERE job_id = ?9 AND item = ?10"));
      sql::Use use(*st);
      st->bind(1, worker_id).bind(2, step.attempts).bind(3, step.lost_workers).bind(4, step.lost_tokens);
      st->bind(5, int64_t(step.mine ? 1 : 0)).bind(6, now).bind(7, p.lease_s).bind(8, p.max_hold_s);
      st->bind(9, c.job_id).bind(10, c.item);
      TESSERA_TRY(st->run());
      out.items.push_back({c.job_id, c.item, c.payload, step.attempts});
      if (std::find(job_ids.begin(), job_ids.end(), c.job_id) == job_ids.end()) job_ids.push_back(c.job_id);
    }
    for (const std::string& id : job_ids) {
      TESSERA_ASSIGN(sql::Stmt * st, db.cached(std::string("SELECT ") + kJobColumns + " FROM jobs WHERE id = ?"));
      sql::Use use(*st);
      st->bind(1, id);
      TESSERA_ASSIGN(bool row, st->step());
      if (!row) return makeError(ErrorCode::Internal, "leased item of a vanished job");
      TESSERA_ASSIGN(JobSpec j, jobRow(*st, nullptr));
      out.jobs.push_back(std::move(j));
    }
    return {};
  });
  if (!s.ok()) return s.takeError();
  return out;
}

Expected<ReportResult> SqliteStore::report(const ItemReport& r, const PutOptions& put) {
  ReportResult res;
  Status s = write([&](sql::Db& db, Touched& touched) -> Status {
    res = ReportResult{};
    const double now = epochSeconds();
    TESSERA_TRY(touchWorker(db, r.worker_id, r.token, now));
    std::string state, holder;
    int64_t record_id = 0;
    {
      TESSERA_ASSIGN(sql::Stmt * st, db.cached(
          "SELECT state, worker_id, record_id FROM job_items WHERE job_id = ? AND item = ?"));
      sql::Use use(*st);
      st->bind(1, r.job_id).bind(2, r.item);
      TESSERA_ASSIGN(bool row, st->step());
      if (!row) return makeError(ErrorCode::NotFound, "no item " + std::to_string(r.item) + " in job " + r.job_id);
      state = st->text(0);
      holder = st->text(1);
      record_id = st->i64(2);
    }
    if (auto settled = settledReport(state, holder, r.worker_id, record_id)) {
      res = std::move(*settled);
      return {};
    }
    if (r.record) {
      TESSERA_ASSIGN(res.put, putRecord(db, *r.record, put, touched));
      record_id = res.put.id;
    }
    {
      TESSERA_ASSIGN(sql::Stmt * st, db.cached(
          "UPDATE job_items SET state = 'done', result = ?, record_id = ? WHERE job_id = ? AND item = ?"));
      sql::Use use(*st);
      st->bind(1, r.result).bind(2, record_id).bind(3, r.job_id).bind(4, r.item);
      TESSERA_TRY(st->run());
    }
    TESSERA_TRY(itemDone(db, r.job_id, now));
    res.outcome = ReportOutcome::Recorded;
    return {};
  });
  if (!s.ok()) return s.takeError();
  return res;
}

Expected<ReportOutcome> SqliteStore::refuse(const ItemReport& r, const QueuePolicy& p) {
  ReportOutcome outcome = ReportOutcome::NotLeased;
  Status s = write([&](sql::Db& db, Touched&) -> Status {
    const double now = epochSeconds();
    TESSERA_TRY(touchWorker(db, r.worker_id, r.token, now));
    std::string state, holder, refused_by, target, arch, model;
    int64_t record_id = 0, units = 0;
    {
      TESSERA_ASSIGN(sql::Stmt * st, db.cached(
          "SELECT i.state, i.worker_id, i.record_id, i.refused_by, j.target, j.arch, j.units, j.model"
          " FROM job_items i JOIN jobs j ON j.id = i.job_id WHERE i.job_id = ? AND i.item = ?"));
      sql::Use use(*st);
      st->bind(1, r.job_id).bind(2, r.item);
      TESSERA_ASSIGN(bool row, st->step());
      if (!row) return makeError(ErrorCode::NotFound, "no item " + std::to_string(r.item) + " in job " + r.job_id);
      state = st->text(0);
      holder = st->text(1);
      record_id = st->i64(2);
      refused_by = st->text(3);
      target = st->text(4);
      arch = st->text(5);
      units = st->i64(6);
      model = st->text(7);
    }
    if (auto settled = settledReport(state, holder, r.worker_id, record_id)) {
      outcome = settled->outcome;
      return {};
    }
    int64_t others = 0;
    {
      TESSERA_ASSIGN(sql::Stmt * st, db.cached(
          "SELECT id FROM workers WHERE target = ? AND arch = ? AND units = ? AND (?4 = '' OR model = ?4)"
          " AND last_seen >= ?5 AND quarantined = '' AND id != ?6"));
      sql::Use use(*st);
      st->bind(1, target).bind(2, arch).bind(3, units).bind(4, model).bind(5, now - p.worker_ttl_s);
      st->bind(6, r.worker_id);
      for (;;) {
        TESSERA_ASSIGN(bool row, st->step());
        if (!row) break;
        others += listHas(refused_by, st->text(0)) ? 0 : 1;
      }
    }
    const RefusalStep step = refusalStep(refused_by, r.worker_id, others, p);
    if (step.finished) {
      TESSERA_ASSIGN(sql::Stmt * st, db.cached(
          "UPDATE job_items SET state = 'done', result = ?, refused_by = ? WHERE job_id = ? AND item = ?"));
      sql::Use use(*st);
      st->bind(1, r.result).bind(2, step.refused_by).bind(3, r.job_id).bind(4, r.item);
      TESSERA_TRY(st->run());
      TESSERA_TRY(itemDone(db, r.job_id, now));
    } else {
      TESSERA_ASSIGN(sql::Stmt * st, db.cached(
          "UPDATE job_items SET state = 'queued', worker_id = '', lease_expires = 0, refused_by = ?"
          " WHERE job_id = ? AND item = ?"));
      sql::Use use(*st);
      st->bind(1, step.refused_by).bind(2, r.job_id).bind(3, r.item);
      TESSERA_TRY(st->run());
    }
    outcome = ReportOutcome::Recorded;
    return {};
  });
  if (!s.ok()) return s.takeError();
  return outcome;
}

Expected<std::vector<int64_t>> SqliteStore::quarantineWorker(const std::string& worker_id, const std::string& why) {
  std::vector<int64_t> records;
  Status s = write([&](sql::Db& db, Touched&) -> Status {
    records.clear();
    {
      TESSERA_ASSIGN(sql::Stmt * st, db.cached("UPDATE workers SET quarantined = ? WHERE id = ?"));
      sql::Use use(*st);
      st->bind(1, why.empty() ? std::string("quarantined") : why).bind(2, worker_id);
      TESSERA_TRY(st->run());
      if (sqlite3_changes(db.handle()) == 0) return makeError(ErrorCode::NotFound, "unknown worker " + worker_id);
    }
    {
      TESSERA_ASSIGN(sql::Stmt * st, db.cached(
          "UPDATE job_items SET state = 'queued', worker_id = '', lease_expires = 0 WHERE worker_id = ? AND state = 'leased'"));
      sql::Use use(*st);
      st->bind(1, worker_id);
      TESSERA_TRY(st->run());
    }
    TESSERA_ASSIGN(sql::Stmt * st, db.cached(
        "SELECT record_id FROM job_items WHERE worker_id = ? AND state = 'done' AND record_id != 0"));
    sql::Use use(*st);
    st->bind(1, worker_id);
    for (;;) {
      TESSERA_ASSIGN(bool row, st->step());
      if (!row) break;
      records.push_back(st->i64(0));
    }
    return {};
  });
  if (!s.ok()) return s.takeError();
  return records;
}

Expected<std::optional<JobView>> SqliteStore::job(const std::string& job_id, const QueuePolicy& p) {
  const double now = epochSeconds();
  TESSERA_ASSIGN(Reader rd, reader());
  // One read transaction: the items agree with the job's state.
  TESSERA_TRY(rd->exec("BEGIN"));
  auto body = [&]() -> Expected<std::optional<JobView>> {
    JobView v;
    {
      TESSERA_ASSIGN(sql::Stmt * st, rd->cached(std::string("SELECT ") + kJobColumns + " FROM jobs WHERE id = ?"));
      sql::Use use(*st);
      st->bind(1, job_id);
      TESSERA_ASSIGN(bool row, st->step());
      if (!row) return std::optional<JobView>();
      TESSERA_ASSIGN(v.spec, jobRow(*st, &v.state));
    }
    {
      TESSERA_ASSIGN(sql::Stmt * st, rd->cached(
          "SELECT item, state, worker_id, result, attempts, record_id, payload FROM job_items WHERE job_id = ? ORDER BY item"));
      sql::Use use(*st);
      st->bind(1, job_id);
      for (;;) {
        TESSERA_ASSIGN(bool row, st->step());
        if (!row) break;
        v.items.push_back({st->i64(0), st->text(1), st->text(2), st->text(3), st->i64(4), st->i64(5)});
        v.spec.items.push_back(st->text(6));
      }
    }
    TESSERA_ASSIGN(v.live_workers, liveWorkersFor(*rd, v.spec.key, v.spec.model, now, p));
    return std::optional<JobView>(std::move(v));
  };
  auto out = body();
  (void)rd->exec("COMMIT");
  return out;
}

Expected<bool> SqliteStore::cancel(const std::string& job_id) {
  bool cancelled = false;
  Status s = write([&](sql::Db& db, Touched&) -> Status {
    TESSERA_ASSIGN(sql::Stmt * st, db.cached(
        "UPDATE jobs SET state = 'cancelled', finished_at = ? WHERE id = ? AND state = 'open'"));
    sql::Use use(*st);
    st->bind(1, epochSeconds()).bind(2, job_id);
    TESSERA_TRY(st->run());
    cancelled = sqlite3_changes(db.handle()) > 0;
    return {};
  });
  if (!s.ok()) return s.takeError();
  return cancelled;
}

Expected<int64_t> SqliteStore::purge(double keep_finished_s, double max_open_s) {
  int64_t removed = 0;
  Status s = write([&](sql::Db& db, Touched&) -> Status {
    const double now = epochSeconds();
    TESSERA_ASSIGN(sql::Stmt * stale, db.cached(
        "UPDATE jobs SET state = 'cancelled', finished_at = ?1 WHERE state = 'open' AND created_at < ?2"));
    {
      sql::Use use(*stale);
      stale->bind(1, now).bind(2, now - max_open_s);
      TESSERA_TRY(stale->run());
    }
    TESSERA_ASSIGN(sql::Stmt * items, db.cached(
        "DELETE FROM job_items WHERE job_id IN (SELECT id FROM jobs WHERE state != 'open' AND finished_at < ?)"));
    {
      sql::Use use(*items);
      items->bind(1, now - keep_finished_s);
      TESSERA_TRY(items->run());
    }
    TESSERA_ASSIGN(sql::Stmt * jobs, db.cached("DELETE FROM jobs WHERE state != 'open' AND finished_at < ?"));
    {
      sql::Use use(*jobs);
      jobs->bind(1, now - keep_finished_s);
      TESSERA_TRY(jobs->run());
      removed = sqlite3_changes(db.handle());
    }
    TESSERA_ASSIGN(sql::Stmt * gone, db.cached("DELETE FROM workers WHERE last_seen < ?"));
    sql::Use use(*gone);
    gone->bind(1, now - max_open_s);
    return gone->run();
  });
  if (!s.ok()) return s.takeError();
  return removed;
}

}  // namespace tessera::cache
