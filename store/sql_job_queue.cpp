// Owns the job queue's statements and steps (sql_job_queue.h), once for both SQL engines: workers
// register and beat, jobs are submitted, leased (the candidate rows locked, SKIP LOCKED where the
// engine has row locks), reported with their records in the same transaction, refused, cancelled
// and purged. What a step decides from the rows it read is in jobs.cpp (leaseStep, refusalStep,
// settledReport); times are the engine's clock.
#include "store/sql_job_queue.h"

#include <algorithm>

#include "store/record_json.h"

namespace tessera::cache {

namespace {

// Parameters that PostgreSQL could not type from their context (both sides of an operator are
// parameters) are cast; SQLite takes the casts as they are.
#define TESSERA_F(n) "CAST(?" #n " AS DOUBLE PRECISION)"

constexpr const char* kWorkerColumns =
    "w.id, w.token, w.target, w.arch, w.units, w.model, w.device, w.host, w.tessera_version, w.llvm_version,"
    " w.toolkit_version, w.driver_version, w.slots, w.registered_at, w.last_seen,"
    " (SELECT count(*) FROM job_items i WHERE i.worker_id = w.id AND i.state = 'leased'), w.quarantined, w.stopped_at,"
    " w.runtime_version, w.probe_signature";

WorkerInfo workerRow(const SqlRow& row, double now, const QueuePolicy& p) {
  WorkerInfo w;
  w.id = row.text(0);
  w.token = row.text(1);
  w.target = row.text(2);
  w.arch = row.text(3);
  w.units = row.i64(4);
  w.model = row.text(5);
  w.device = row.text(6);
  w.host = row.text(7);
  w.tessera_version = row.text(8);
  w.llvm_version = row.text(9);
  w.toolkit_version = row.text(10);
  w.driver_version = row.text(11);
  w.slots = row.i64(12);
  w.registered_at = row.f64(13);
  w.last_seen = row.f64(14);
  w.leased = row.i64(15);
  w.quarantined = row.text(16);
  w.live = w.last_seen >= now - p.worker_ttl_s && w.quarantined.empty() && row.f64(17) == 0;
  w.runtime_version = row.text(18);
  w.probe_signature = row.text(19);
  return w;
}

const std::string kJobSelect =
    "SELECT id, submitter, kind, key_json, model, kernel, settings, rounds, first_trial, elapsed_s, state,"
    " done_items, changes FROM jobs WHERE id = ?1";

// The id, submitter, kind and key of a job from the first four columns of a row.
template <typename Job>
Status jobHead(const SqlRow& row, Job& j) {
  j.id = row.text(0);
  j.submitter = row.text(1);
  j.kind = row.text(2);
  TESSERA_ASSIGN(auto key_json, parseJson(row.text(3)));
  TESSERA_ASSIGN(j.key, hardKeyFromJson(key_json, "key"));
  j.key_id = keyIdOf(j.key);
  return {};
}

Expected<JobSpec> jobRow(const SqlRow& row, std::string* state) {
  JobSpec j;
  TESSERA_TRY(jobHead(row, j));
  j.model = row.text(4);
  j.kernel = row.text(5);
  j.settings = row.text(6);
  j.rounds = row.i64(7);
  j.first_trial = row.i64(8);
  j.elapsed_s = row.f64(9);
  if (state) *state = row.text(10);
  return j;
}

// Live workers that may lease a job of this key and model.
Expected<int64_t> liveWorkersFor(SqlTx& tx, const HardKey& key, const std::string& model, double now,
                                 const QueuePolicy& p) {
  TESSERA_ASSIGN(auto rows, tx.query("SELECT count(*) FROM workers WHERE target = ?1 AND arch = ?2 AND units = ?3"
                                     " AND (?4 = '' OR model = ?4) AND last_seen >= ?5 AND quarantined = '' AND stopped_at = 0",
                                     {key.target, key.arch, key.units, model, now - p.worker_ttl_s}));
  return rows.empty() ? int64_t{0} : rows[0].i64(0);
}

// One more item of a job is done; the job is done with its last item.
Status itemDone(SqlTx& tx, const std::string& job_id, double now) {
  TESSERA_TRY(tx.run("UPDATE jobs SET done_items = done_items + 1,"
                     " state = CASE WHEN state = 'open' AND done_items + 1 >= items THEN 'done' ELSE state END,"
                     " finished_at = CASE WHEN state = 'open' AND done_items + 1 >= items THEN " TESSERA_F(2) " ELSE finished_at END"
                     " WHERE id = ?1",
                     {job_id, now}));
  return {};
}

// An item of a job changed (leased, done, back in the queue): the job's change count moves on and
// the item remembers it, so a poll with an earlier cursor returns it.
Status itemChanged(SqlTx& tx, const std::string& job_id, int64_t item) {
  TESSERA_TRY(tx.run("UPDATE jobs SET changes = changes + 1 WHERE id = ?1", {job_id}));
  TESSERA_TRY(tx.run("UPDATE job_items SET changed = (SELECT changes FROM jobs WHERE id = ?1)"
                     " WHERE job_id = ?1 AND item = ?2",
                     {job_id, item}));
  return {};
}

// Every item a worker holds goes back to the queue (the worker was quarantined or stopped);
// returns how many.
Expected<int64_t> requeueWorkerItems(SqlTx& tx, const std::string& worker_id) {
  TESSERA_TRY(tx.run("UPDATE jobs SET changes = changes + 1 WHERE id IN"
                     " (SELECT job_id FROM job_items WHERE worker_id = ?1 AND state = 'leased')",
                     {worker_id}));
  return tx.run("UPDATE job_items SET state = 'queued', worker_id = '', lease_expires = 0,"
                " changed = (SELECT j.changes FROM jobs j WHERE j.id = job_items.job_id)"
                " WHERE worker_id = ?1 AND state = 'leased'",
                {worker_id});
}

// Marks a worker of `token` as seen now; NotFound when the service does not know it (or it is
// another token's), Unsupported when it was quarantined.
Status touchWorker(SqlTx& tx, const std::string& worker_id, const std::string& token, double now) {
  TESSERA_ASSIGN(auto rows, tx.query("UPDATE workers SET last_seen = ?1 WHERE id = ?2 AND token = ?3 AND stopped_at = 0"
                                     " RETURNING quarantined",
                                     {now, worker_id, token}));
  if (rows.empty()) return makeError(ErrorCode::NotFound, "unknown worker " + worker_id);
  if (!rows[0].text(0).empty())
    return makeError(ErrorCode::Unsupported, "worker " + worker_id + " is quarantined: " + rows[0].text(0));
  return {};
}

// The per-token limits (live ids, items held) are counted and then acted on: two transactions
// doing that for one token at once would both see room.
Status lockToken(SqlTx& tx, const std::string& token) { return tx.lockName("token:" + token); }

}  // namespace

Status SqlJobQueue::registerWorker(const WorkerInfo& w, const QueuePolicy& p) {
  return engine_.transact(TxMode::Write, [&](SqlTx& tx, core::TouchedKeys&) -> Status {
    TESSERA_TRY(lockToken(tx, w.token));
    TESSERA_ASSIGN(const double now, tx.nowEpoch());
    TESSERA_ASSIGN(auto was, tx.query("SELECT quarantined, probe_signature FROM workers WHERE id = ?1 AND token = ?2",
                                      {w.id, w.token}));
    if (!was.empty() && !was[0].text(0).empty())
      return makeError(ErrorCode::Unsupported, "worker " + w.id + " is quarantined: " + was[0].text(0));
    // An id registered with a probe stays that machine (issue 47): another probe, or none, under it
    // would let a worker rename its hardware past its submitters' spot checks.
    if (!was.empty() && !was[0].text(1).empty() && was[0].text(1) != w.probe_signature)
      return makeError(ErrorCode::InvalidArgument,
                       "worker " + w.id + " was registered with probe signature " + was[0].text(1) + ", not " +
                           (w.probe_signature.empty() ? std::string("none") : w.probe_signature) +
                           ": another machine registers under its own id");
    TESSERA_ASSIGN(auto live, tx.query("SELECT count(*) FROM workers WHERE token = ?1 AND id != ?2 AND last_seen >= ?3"
                                       " AND quarantined = '' AND stopped_at = 0",
                                       {w.token, w.id, now - p.worker_ttl_s}));
    const int64_t n = live.empty() ? 0 : live[0].i64(0);
    if (n >= p.max_workers_per_token)
      return makeError(ErrorCode::RuntimeError, "token '" + w.token + "' already has " + std::to_string(n) +
                                                    " live workers (at most " +
                                                    std::to_string(p.max_workers_per_token) + ")");
    TESSERA_ASSIGN(int64_t changed,
                   tx.run("INSERT INTO workers(id, token, target, arch, units, model, device, host, tessera_version,"
                          " llvm_version, toolkit_version, driver_version, slots, registered_at, last_seen, runtime_version,"
                          " probe_signature)"
                          " VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?14,?15,?16)"
                          " ON CONFLICT(id) DO UPDATE SET target = excluded.target, arch = excluded.arch,"
                          " units = excluded.units, model = excluded.model, device = excluded.device,"
                          " host = excluded.host, tessera_version = excluded.tessera_version,"
                          " llvm_version = excluded.llvm_version, toolkit_version = excluded.toolkit_version,"
                          " driver_version = excluded.driver_version, runtime_version = excluded.runtime_version,"
                          " slots = excluded.slots, probe_signature = excluded.probe_signature,"
                          " last_seen = excluded.last_seen, stopped_at = 0 WHERE workers.token = excluded.token",
                          {w.id, w.token, w.target, w.arch, w.units, w.model, w.device, w.host, w.tessera_version,
                           w.llvm_version, w.toolkit_version, w.driver_version, w.slots, now, w.runtime_version, w.probe_signature}));
    if (changed == 0) return makeError(ErrorCode::InvalidArgument, "worker id " + w.id + " belongs to another token");
    return {};
  });
}

Expected<int64_t> SqlJobQueue::heartbeat(const std::string& worker_id, const std::string& token, const QueuePolicy& p) {
  int64_t renewed = 0;
  Status s = engine_.transact(TxMode::Write, [&](SqlTx& tx, core::TouchedKeys&) -> Status {
    TESSERA_ASSIGN(const double now, tx.nowEpoch());
    TESSERA_TRY(touchWorker(tx, worker_id, token, now));
    // Renewed for at most max_hold_s after the lease was taken: an item a worker holds without
    // reporting goes back to the queue, however faithfully it beats.
    TESSERA_ASSIGN(renewed, tx.run(std::string("UPDATE job_items SET lease_expires = ") + tx.dialect().least +
                                       "(" TESSERA_F(1) ", CASE WHEN leased_at > 0 THEN leased_at + " TESSERA_F(2)
                                       " ELSE " TESSERA_F(1) " END) WHERE worker_id = ?3 AND state = 'leased'",
                                   {now + p.lease_s, p.max_hold_s, worker_id}));
    return {};
  });
  if (!s.ok()) return s.takeError();
  return renewed;
}

Expected<std::vector<WorkerInfo>> SqlJobQueue::workers(const WorkerFilter& f, const QueuePolicy& p) {
  std::vector<WorkerInfo> out;
  Status s = engine_.transact(TxMode::Read, [&](SqlTx& tx, core::TouchedKeys&) -> Status {
    out.clear();
    TESSERA_ASSIGN(const double now, tx.nowEpoch());
    std::vector<SqlValue> params;
    auto param = [&](SqlValue v) {
      params.push_back(std::move(v));
      return "?" + std::to_string(params.size());
    };
    std::string q = std::string("SELECT ") + kWorkerColumns + " FROM workers w WHERE TRUE";
    for (auto [col, v] : {std::pair<const char*, const std::string*>{"w.target", &f.target}, {"w.arch", &f.arch},
                          {"w.model", &f.model}})
      if (!v->empty()) q += std::string(" AND ") + col + " = " + param(*v);
    if (f.units) q += " AND w.units = " + param(*f.units);
    if (f.live_only) q += " AND w.stopped_at = 0 AND w.last_seen >= " + param(now - p.worker_ttl_s);
    q += " ORDER BY w.target, w.arch, w.id LIMIT 10000";
    TESSERA_ASSIGN(auto rows, tx.query(q, params));
    for (const SqlRow& row : rows) out.push_back(workerRow(row, now, p));
    return {};
  });
  if (!s.ok()) return s.takeError();
  return out;
}

Expected<int64_t> SqlJobQueue::deregisterWorker(const std::string& worker_id, const std::string& token) {
  int64_t released = 0;
  Status s = engine_.transact(TxMode::Write, [&](SqlTx& tx, core::TouchedKeys&) -> Status {
    TESSERA_TRY(lockToken(tx, token));
    TESSERA_ASSIGN(const double now, tx.nowEpoch());
    // Stopping twice is stopping once (a retried request).
    TESSERA_ASSIGN(auto w, tx.query("UPDATE workers SET stopped_at = CASE WHEN stopped_at = 0 THEN ?1 ELSE stopped_at END"
                                    " WHERE id = ?2 AND token = ?3 RETURNING id",
                                    {now, worker_id, token}));
    if (w.empty()) return makeError(ErrorCode::NotFound, "unknown worker " + worker_id);
    // Its items go back to the queue as they are: a clean stop is not a lost lease.
    TESSERA_ASSIGN(released, requeueWorkerItems(tx, worker_id));
    return {};
  });
  if (!s.ok()) return s.takeError();
  return released;
}

Expected<SubmitResult> SqlJobQueue::submit(const JobSpec& job, const QueuePolicy& p) {
  SubmitResult res;
  Status s = engine_.transact(TxMode::Write, [&](SqlTx& tx, core::TouchedKeys&) -> Status {
    res = SubmitResult{};
    TESSERA_ASSIGN(const double now, tx.nowEpoch());
    // ON CONFLICT DO NOTHING: two submissions of one id racing on two replicas make one job.
    TESSERA_ASSIGN(auto ins, tx.query("INSERT INTO jobs(id, submitter, kind, key_id, key_json, target, arch, units,"
                                      " model, kernel, settings, rounds, first_trial, elapsed_s, state, items, created_at)"
                                      " VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,'open',?15,?16)"
                                      " ON CONFLICT(id) DO NOTHING RETURNING seq",
                                      {job.id, job.submitter, job.kind, keyIdOf(job.key),
                                       dumpJson(hardKeyToJson(job.key)), job.key.target, job.key.arch, job.key.units,
                                       job.model, job.kernel, job.settings, job.rounds, job.first_trial, job.elapsed_s,
                                       static_cast<int64_t>(job.items.size()), now}));
    res.created = !ins.empty();
    if (!res.created) {
      TESSERA_ASSIGN(auto owner, tx.query("SELECT submitter FROM jobs WHERE id = ?1", {job.id}));
      if (owner.empty() || owner[0].text(0) != job.submitter)
        return makeError(ErrorCode::InvalidArgument, "job id " + job.id + " belongs to another submitter");
    } else {
      for (size_t i = 0; i < job.items.size(); ++i)
        TESSERA_TRY(tx.run("INSERT INTO job_items(job_id, item, payload, state) VALUES(?1,?2,?3,'queued')",
                           {job.id, static_cast<int64_t>(i), job.items[i]}));
    }
    TESSERA_ASSIGN(res.live_workers, liveWorkersFor(tx, job.key, job.model, now, p));
    return {};
  });
  if (!s.ok()) return s.takeError();
  return res;
}

Expected<Lease> SqlJobQueue::lease(const std::string& worker_id, const std::string& token, int max_items,
                                   const QueuePolicy& p) {
  Lease out;
  Status s = engine_.transact(TxMode::Write, [&](SqlTx& tx, core::TouchedKeys&) -> Status {
    out = Lease{};
    TESSERA_TRY(lockToken(tx, token));
    TESSERA_ASSIGN(const double now, tx.nowEpoch());
    TESSERA_TRY(touchWorker(tx, worker_id, token, now));
    TESSERA_ASSIGN(auto w, tx.query("SELECT target, arch, units, model, slots,"
                                    " (SELECT count(*) FROM job_items WHERE worker_id = ?1 AND state = 'leased'"
                                    "  AND lease_expires >= ?3),"
                                    " (SELECT count(*) FROM job_items i JOIN workers o ON o.id = i.worker_id"
                                    "  WHERE o.token = ?2 AND i.state = 'leased' AND i.lease_expires >= ?3)"
                                    " FROM workers WHERE id = ?1",
                                    {worker_id, token, now}));
    if (w.empty()) return makeError(ErrorCode::NotFound, "unknown worker " + worker_id);
    const int64_t held_by_worker = w[0].i64(5);
    const int budget = leaseBudget(max_items, w[0].i64(4), held_by_worker, w[0].i64(6), p);
    // Candidates in submission order, this worker's own unanswered leases first, items held by
    // other live workers (to take over) last; items whose leases expired too often are failed on
    // the way and do not count. Locked rows (another transaction is leasing or reporting them right
    // now) are skipped, not waited for.
    const std::string cands_sql =
        "SELECT i.job_id, i.item, i.payload, i.state, i.worker_id, i.attempts, i.lost_workers,"
        " coalesce((SELECT h.token FROM workers h WHERE h.id = i.worker_id), ''), i.lost_tokens, i.refused_by,"
        " CASE WHEN i.lease_expires < " TESSERA_F(6) " THEN 1 ELSE 0 END, " TESSERA_F(6) " - i.leased_at, j.model,"
        " i.stolen_by"
        " FROM job_items i JOIN jobs j ON j.id = i.job_id"
        " WHERE j.state = 'open' AND j.target = ?1 AND j.arch = ?2 AND j.units = ?3 AND (j.model = '' OR j.model = ?4)"
        " AND (i.state = 'queued' OR (i.state = 'leased' AND (i.lease_expires < " TESSERA_F(6) " OR i.worker_id = ?5"
        "  OR (i.leased_at > 0 AND i.leased_at < " TESSERA_F(6) " - " TESSERA_F(8) "))))"
        " ORDER BY (i.state = 'leased' AND i.worker_id = ?5) DESC,"
        " (i.state = 'leased' AND i.worker_id != ?5 AND i.lease_expires >= " TESSERA_F(6) ") ASC, j.seq, i.item"
        " LIMIT ?7" + tx.dialect().lockRows("i", true);
    TESSERA_ASSIGN(auto cands, tx.query(cands_sql, {w[0].text(0), w[0].text(1), w[0].i64(2), w[0].text(3), worker_id,
                                                    now, static_cast<int64_t>(budget) + 64, p.steal_after_s}));
    const std::string take_sql =
        std::string("UPDATE job_items SET state = 'leased', worker_id = ?1, attempts = ?2, lost_workers = ?3,"
                    " lost_tokens = ?4, stolen_by = ?11,"
                    " leased_at = CASE WHEN ?5 = 1 AND leased_at > 0 THEN leased_at ELSE " TESSERA_F(6) " END,"
                    " lease_expires = ") +
        tx.dialect().least +
        "(" TESSERA_F(6) " + " TESSERA_F(7) ","
        " (CASE WHEN ?5 = 1 AND leased_at > 0 THEN leased_at ELSE " TESSERA_F(6) " END) + " TESSERA_F(8) ")"
        " WHERE job_id = ?9 AND item = ?10";
    std::vector<std::string> job_ids;
    for (const SqlRow& row : cands) {
      const std::string job_id = row.text(0), payload = row.text(2);
      const int64_t item = row.i64(1);
      LeaseCandidate c;
      c.state = row.text(3);
      c.holder = row.text(4);
      c.attempts = row.i64(5);
      c.lost_workers = row.text(6);
      c.holder_token = row.text(7);
      c.lost_tokens = row.text(8);
      c.refused_by = row.text(9);
      c.expired = row.i64(10) != 0;
      c.held_s = row.f64(11);
      c.stolen_by = row.text(13);
      // The live workers of other tokens that may take this item: not quarantined, not among its
      // refusers, of a token that has not spent its expiries of it (the refusal step's count, below).
      auto others_live = [&](const std::string& lost_tokens) -> int64_t {
        auto live = tx.query("SELECT id, token FROM workers WHERE target = ?1 AND arch = ?2 AND units = ?3"
                             " AND (?4 = '' OR model = ?4) AND last_seen >= ?5 AND quarantined = ''"
                             " AND stopped_at = 0 AND token != ?6",
                             {w[0].text(0), w[0].text(1), w[0].i64(2), row.text(12), now - p.worker_ttl_s, token});
        if (!live.ok()) return 0;
        int64_t n = 0;
        for (const SqlRow& o : *live)
          n += !refusedBy(c.refused_by, o.text(0)) && !tokenSpentItsExpiries(lost_tokens, o.text(1));
        return n;
      };
      const LeaseStep step = leaseStep(c, worker_id, token, held_by_worker, p, others_live);
      if (step.kind == LeaseStep::Skip) continue;
      if (step.kind == LeaseStep::GiveUp) {
        TESSERA_TRY(tx.run("UPDATE job_items SET state = 'done', worker_id = '', result = ?1, lost_workers = ?2,"
                           " lost_tokens = ?3 WHERE job_id = ?4 AND item = ?5",
                           {lostItemResult(step.attempts, step.lost_workers, step.total_bound), step.lost_workers, step.lost_tokens,
                            job_id, item}));
        TESSERA_TRY(itemChanged(tx, job_id, item));
        TESSERA_TRY(itemDone(tx, job_id, now));
        continue;
      }
      if (static_cast<int>(out.items.size()) >= budget) continue;
      TESSERA_TRY(tx.run(take_sql, {worker_id, step.attempts, step.lost_workers, step.lost_tokens,
                                    int64_t{step.mine ? 1 : 0}, now, p.lease_s, p.max_hold_s, job_id, item,
                                    step.stolen_by}));
      // Renewing its own unanswered lease changes nothing a poll shows.
      if (!step.mine) TESSERA_TRY(itemChanged(tx, job_id, item));
      out.items.push_back({job_id, item, payload, step.attempts});
      if (std::find(job_ids.begin(), job_ids.end(), job_id) == job_ids.end()) job_ids.push_back(job_id);
    }
    for (const std::string& id : job_ids) {
      TESSERA_ASSIGN(auto j, tx.query(kJobSelect, {id}));
      if (j.empty()) return makeError(ErrorCode::Internal, "leased item of a vanished job");
      TESSERA_ASSIGN(JobSpec spec, jobRow(j[0], nullptr));
      out.jobs.push_back(std::move(spec));
    }
    return {};
  });
  if (!s.ok()) return s.takeError();
  return out;
}

Expected<ReportResult> SqlJobQueue::report(const ItemReport& r, const PutOptions& put) {
  ReportResult res;
  const TxMode mode = r.record ? TxMode::WriteRecords : TxMode::Write;
  Status s = engine_.transact(mode, [&](SqlTx& tx, core::TouchedKeys& touched) -> Status {
    res = ReportResult{};
    TESSERA_ASSIGN(const double now, tx.nowEpoch());
    TESSERA_TRY(touchWorker(tx, r.worker_id, r.token, now));
    // The item's row is locked: a result that arrives twice at once is recorded once.
    TESSERA_ASSIGN(auto item, tx.query("SELECT state, worker_id, record_id, lost_workers FROM job_items WHERE job_id = ?1"
                                       " AND item = ?2" + tx.dialect().lockRows("", false),
                                       {r.job_id, r.item}));
    if (item.empty()) return makeError(ErrorCode::NotFound, "no item " + std::to_string(r.item) + " in job " + r.job_id);
    int64_t record_id = item[0].i64(2);
    if (auto settled = settledReport(item[0].text(0), item[0].text(1), r.worker_id, record_id, item[0].text(3))) {
      res = std::move(*settled);
      return {};
    }
    if (r.record) {
      TESSERA_ASSIGN(res.put, core::putRecord(tx, *r.record, put, touched));
      record_id = res.put.id;
    }
    // The reporter becomes the item's worker (a past holder's report names it, not the holder's).
    TESSERA_TRY(tx.run("UPDATE job_items SET state = 'done', result = ?1, record_id = ?2, worker_id = ?5"
                       " WHERE job_id = ?3 AND item = ?4",
                       {r.result, record_id, r.job_id, r.item, r.worker_id}));
    TESSERA_TRY(itemChanged(tx, r.job_id, r.item));
    TESSERA_TRY(itemDone(tx, r.job_id, now));
    res.outcome = ReportOutcome::Recorded;
    return {};
  });
  if (!s.ok()) return s.takeError();
  return res;
}

Expected<ReportOutcome> SqlJobQueue::refuse(const ItemReport& r, const QueuePolicy& p) {
  ReportOutcome outcome = ReportOutcome::NotLeased;
  Status s = engine_.transact(TxMode::Write, [&](SqlTx& tx, core::TouchedKeys&) -> Status {
    outcome = ReportOutcome::NotLeased;
    TESSERA_ASSIGN(const double now, tx.nowEpoch());
    TESSERA_TRY(touchWorker(tx, r.worker_id, r.token, now));
    TESSERA_ASSIGN(auto item, tx.query("SELECT i.state, i.worker_id, i.record_id, i.refused_by, j.target, j.arch,"
                                       " j.units, j.model FROM job_items i JOIN jobs j ON j.id = i.job_id"
                                       " WHERE i.job_id = ?1 AND i.item = ?2" + tx.dialect().lockRows("i", false),
                                       {r.job_id, r.item}));
    if (item.empty()) return makeError(ErrorCode::NotFound, "no item " + std::to_string(r.item) + " in job " + r.job_id);
    const std::string refused_by = item[0].text(3);
    if (auto settled = settledReport(item[0].text(0), item[0].text(1), r.worker_id, item[0].i64(2))) {
      outcome = settled->outcome;
      return {};
    }
    TESSERA_ASSIGN(auto live, tx.query("SELECT id FROM workers WHERE target = ?1 AND arch = ?2 AND units = ?3"
                                       " AND (?4 = '' OR model = ?4) AND last_seen >= ?5 AND quarantined = ''"
                                       " AND stopped_at = 0 AND id != ?6",
                                       {item[0].text(4), item[0].text(5), item[0].i64(6), item[0].text(7),
                                        now - p.worker_ttl_s, r.worker_id}));
    int64_t others = 0;
    for (const SqlRow& row : live) others += refusedBy(refused_by, row.text(0)) ? 0 : 1;
    const RefusalStep step = refusalStep(refused_by, r.token, r.worker_id, others, p);
    if (step.finished) {
      TESSERA_TRY(tx.run("UPDATE job_items SET state = 'done', result = ?1, refused_by = ?2 WHERE job_id = ?3"
                         " AND item = ?4",
                         {r.result, step.refused_by, r.job_id, r.item}));
      TESSERA_TRY(itemDone(tx, r.job_id, now));
    } else {
      TESSERA_TRY(tx.run("UPDATE job_items SET state = 'queued', worker_id = '', lease_expires = 0, refused_by = ?1"
                         " WHERE job_id = ?2 AND item = ?3",
                         {step.refused_by, r.job_id, r.item}));
    }
    TESSERA_TRY(itemChanged(tx, r.job_id, r.item));
    outcome = ReportOutcome::Recorded;
    return {};
  });
  if (!s.ok()) return s.takeError();
  return outcome;
}

Expected<std::vector<int64_t>> SqlJobQueue::quarantineWorker(const std::string& worker_id, const std::string& why,
                                                             const std::string& submitter) {
  std::vector<int64_t> records;
  Status s = engine_.transact(TxMode::Write, [&](SqlTx& tx, core::TouchedKeys&) -> Status {
    records.clear();
    TESSERA_ASSIGN(int64_t n, tx.run("UPDATE workers SET quarantined = ?1 WHERE id = ?2",
                                     {why.empty() ? std::string("quarantined") : why, worker_id}));
    if (n == 0) return makeError(ErrorCode::NotFound, "unknown worker " + worker_id);
    TESSERA_TRY(requeueWorkerItems(tx, worker_id));
    TESSERA_ASSIGN(auto rows, tx.query("SELECT i.record_id FROM job_items i JOIN jobs j ON j.id = i.job_id"
                                       " WHERE i.worker_id = ?1 AND i.state = 'done' AND i.record_id != 0"
                                       " AND j.submitter = ?2",
                                       {worker_id, submitter}));
    for (const SqlRow& row : rows) records.push_back(row.i64(0));
    return {};
  });
  if (!s.ok()) return s.takeError();
  return records;
}

Expected<std::optional<JobView>> SqlJobQueue::job(const std::string& job_id, const QueuePolicy& p, int64_t since) {
  std::optional<JobView> out;
  // One snapshot: the items agree with the job's state.
  Status s = engine_.transact(TxMode::Read, [&](SqlTx& tx, core::TouchedKeys&) -> Status {
    out.reset();
    TESSERA_ASSIGN(const double now, tx.nowEpoch());
    TESSERA_ASSIGN(auto j, tx.query(kJobSelect, {job_id}));
    if (j.empty()) return {};
    JobView v;
    TESSERA_ASSIGN(v.spec, jobRow(j[0], &v.state));
    v.done_items = j[0].i64(11);
    v.changes = j[0].i64(12);
    const bool all = since < 0;
    TESSERA_ASSIGN(auto items, tx.query(std::string("SELECT item, state, worker_id, result, attempts, record_id, ") +
                                            (all ? "payload" : "''") +
                                            " FROM job_items WHERE job_id = ?1 AND changed > ?2 ORDER BY item",
                                        {job_id, all ? int64_t{-1} : since}));
    for (const SqlRow& row : items) {
      v.items.push_back({row.i64(0), row.text(1), row.text(2), row.text(3), row.i64(4), row.i64(5)});
      if (all) v.spec.items.push_back(row.text(6));
    }
    TESSERA_ASSIGN(v.live_workers, liveWorkersFor(tx, v.spec.key, v.spec.model, now, p));
    out = std::move(v);
    return {};
  });
  if (!s.ok()) return s.takeError();
  return out;
}

Expected<bool> SqlJobQueue::cancel(const std::string& job_id) {
  bool cancelled = false;
  Status s = engine_.transact(TxMode::Write, [&](SqlTx& tx, core::TouchedKeys&) -> Status {
    TESSERA_ASSIGN(const double now, tx.nowEpoch());
    TESSERA_ASSIGN(int64_t n, tx.run("UPDATE jobs SET state = 'cancelled', finished_at = ?1 WHERE id = ?2"
                                     " AND state = 'open'",
                                     {now, job_id}));
    cancelled = n > 0;
    return {};
  });
  if (!s.ok()) return s.takeError();
  return cancelled;
}

Expected<int64_t> SqlJobQueue::purge(double keep_finished_s, double max_open_s) {
  int64_t removed = 0;
  Status s = engine_.transact(TxMode::Write, [&](SqlTx& tx, core::TouchedKeys&) -> Status {
    TESSERA_ASSIGN(const double now, tx.nowEpoch());
    TESSERA_TRY(tx.run("UPDATE jobs SET state = 'cancelled', finished_at = ?1 WHERE state = 'open' AND created_at < ?2",
                       {now, now - max_open_s}));
    TESSERA_TRY(tx.run("DELETE FROM job_items WHERE job_id IN (SELECT id FROM jobs WHERE state != 'open'"
                       " AND finished_at < ?1)",
                       {now - keep_finished_s}));
    TESSERA_ASSIGN(removed, tx.run("DELETE FROM jobs WHERE state != 'open' AND finished_at < ?1",
                                   {now - keep_finished_s}));
    TESSERA_TRY(tx.run("DELETE FROM workers WHERE last_seen < ?1", {now - max_open_s}));
    return {};
  });
  if (!s.ok()) return s.takeError();
  return removed;
}

Expected<JobList> SqlJobQueue::jobList(const std::string& submitter, int limit, const QueuePolicy&) {
  static const std::string jobs_sql = jobListSql(false), holders_sql = jobHoldersSql(false),
                           totals_sql = queueTotalsSql(false);
  JobList out;
  Status s = engine_.transact(TxMode::Read, [&](SqlTx& tx, core::TouchedKeys&) -> Status {
    out = {};
    TESSERA_ASSIGN(out.now, tx.nowEpoch());
    TESSERA_ASSIGN(auto rows, tx.query(jobs_sql, {out.now, submitter, int64_t{std::clamp(limit, 1, kMaxJobList)}}));
    for (const SqlRow& row : rows) {
      JobSummary j;
      TESSERA_TRY(jobHead(row, j));
      j.model = row.text(4);
      j.state = row.text(5);
      j.items = row.i64(6);
      j.done = row.i64(7);
      j.created_at = row.f64(8);
      j.finished_at = row.f64(9);
      j.leased = row.i64(10);
      j.queued = std::max<int64_t>(0, j.items - j.done - j.leased);
      out.jobs.push_back(std::move(j));
    }
    for (JobSummary& j : out.jobs) {
      if (j.leased == 0) continue;
      TESSERA_ASSIGN(auto holders, tx.query(holders_sql, {j.id, out.now}));
      for (const SqlRow& row : holders) j.holders.push_back(row.text(0));
    }
    TESSERA_ASSIGN(auto totals, tx.query(totals_sql, {out.now}));
    if (!totals.empty()) {
      out.totals.open_jobs = totals[0].i64(0);
      out.totals.leased = totals[0].i64(2);
      out.totals.done = totals[0].i64(3);
      out.totals.queued = std::max<int64_t>(0, totals[0].i64(1) - out.totals.done - out.totals.leased);
    }
    return {};
  });
  if (!s.ok()) return s.takeError();
  return out;
}

#undef TESSERA_F

}  // namespace tessera::cache
