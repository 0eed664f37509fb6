// Owns the job queue of the PostgreSQL engine (jobs.h). Workers on many replicas lease at once:
// a lease locks the items it takes with FOR UPDATE SKIP LOCKED, so two leases never wait on or
// take the same item; a report locks its item (FOR UPDATE) so a result that arrives twice is
// recorded once, and stores the record in the same transaction. Times are the database's clock.
#include <algorithm>

#include "cache_service/pg_store_impl.h"
#include "cache_service/record_json.h"

namespace tessera::cache::pg {

namespace {

constexpr const char* kWorkerColumns =
    "w.id, w.token, w.target, w.arch, w.units, w.model, w.device, w.host, w.tessera_version, w.llvm_version,"
    " w.toolkit_version, w.driver_version, w.slots, w.registered_at, w.last_seen,"
    " (SELECT count(*) FROM job_items i WHERE i.worker_id = w.id AND i.state = 'leased'), w.quarantined";

WorkerInfo workerRow(const pqxx::row& row, double now, const QueuePolicy& p) {
  WorkerInfo w;
  w.id = asText(row[0]);
  w.token = asText(row[1]);
  w.target = asText(row[2]);
  w.arch = asText(row[3]);
  w.units = asInt(row[4]);
  w.model = asText(row[5]);
  w.device = asText(row[6]);
  w.host = asText(row[7]);
  w.tessera_version = asText(row[8]);
  w.llvm_version = asText(row[9]);
  w.toolkit_version = asText(row[10]);
  w.driver_version = asText(row[11]);
  w.slots = asInt(row[12]);
  w.registered_at = asDouble(row[13]);
  w.last_seen = asDouble(row[14]);
  w.leased = asInt(row[15]);
  w.quarantined = asText(row[16]);
  w.live = w.last_seen >= now - p.worker_ttl_s && w.quarantined.empty();
  return w;
}

constexpr const char* kJobColumns =
    "id, submitter, kind, key_json, model, kernel, settings, rounds, first_trial, elapsed_s, state";

Expected<JobSpec> jobRow(const pqxx::row& row, std::string* state) {
  JobSpec j;
  j.id = asText(row[0]);
  j.submitter = asText(row[1]);
  j.kind = asText(row[2]);
  TESSERA_ASSIGN(auto key_json, parseJson(asText(row[3])));
  TESSERA_ASSIGN(j.key, hardKeyFromJson(key_json, "key"));
  j.key_id = keyIdOf(j.key);
  j.model = asText(row[4]);
  j.kernel = asText(row[5]);
  j.settings = asText(row[6]);
  j.rounds = asInt(row[7]);
  j.first_trial = asInt(row[8]);
  j.elapsed_s = asDouble(row[9]);
  if (state) *state = asText(row[10]);
  return j;
}

double dbNow(Conn& c, pqxx::transaction_base& t) {
  return asDouble(exec(c, t, std::string("SELECT ") + kNowEpoch)[0][0]);
}

int64_t liveWorkersFor(Conn& c, pqxx::transaction_base& t, const HardKey& key, const std::string& model, double now,
                       const QueuePolicy& p) {
  return asInt(exec(c, t,
                    "SELECT count(*) FROM workers WHERE target = $1 AND arch = $2 AND units = $3::bigint"
                    " AND ($4 = '' OR model = $4) AND last_seen >= $5::float8 AND quarantined = ''",
                    key.target, key.arch, std::to_string(key.units), model, num(now - p.worker_ttl_s))[0][0]);
}

// One more item of a job is done; the job is done with its last item.
void itemDone(Conn& c, pqxx::transaction_base& t, const std::string& job_id, double now) {
  exec(c, t,
       "UPDATE jobs SET done_items = done_items + 1,"
       " state = CASE WHEN state = 'open' AND done_items + 1 >= items THEN 'done' ELSE state END,"
       " finished_at = CASE WHEN state = 'open' AND done_items + 1 >= items THEN $2::float8 ELSE finished_at END"
       " WHERE id = $1",
       job_id, num(now));
}

// The per-token limits (live ids, items held) are counted and then acted on: two replicas, or two
// connections of one, doing that for one token at once would both see room. A transaction-level
// advisory lock per token serializes them (the SQLite engine has one writer anyway).
void lockToken(Conn& c, pqxx::transaction_base& t, const std::string& token) {
  exec(c, t, "SELECT pg_advisory_xact_lock(1414746962, hashtext($1))", token);
}

// Marks a worker of `token` as seen now (the SQLite engine's touchWorker).
Status touchWorker(Conn& c, pqxx::transaction_base& t, const std::string& worker_id, const std::string& token,
                   double now) {
  auto w = exec(c, t, "UPDATE workers SET last_seen = $1::float8 WHERE id = $2 AND token = $3 RETURNING quarantined",
                num(now), worker_id, token);
  if (w.empty()) return makeError(ErrorCode::NotFound, "unknown worker " + worker_id);
  if (!asText(w[0][0]).empty())
    return makeError(ErrorCode::Unsupported, "worker " + worker_id + " is quarantined: " + asText(w[0][0]));
  return {};
}

}  // namespace

Status PgStore::registerWorker(const WorkerInfo& w, const QueuePolicy& p) {
  return runTx(pool_, TxKind::Write, [&](Conn& c, pqxx::transaction_base& t) -> Status {
    lockToken(c, t, w.token);
    const double now_s = dbNow(c, t);
    const std::string now = num(now_s);
    auto was = exec(c, t, "SELECT quarantined FROM workers WHERE id = $1 AND token = $2", w.id, w.token);
    if (!was.empty() && !asText(was[0][0]).empty())
      return makeError(ErrorCode::Unsupported, "worker " + w.id + " is quarantined: " + asText(was[0][0]));
    const int64_t live = asInt(exec(c, t,
                                    "SELECT count(*) FROM workers WHERE token = $1 AND id != $2 AND last_seen >= $3::float8"
                                    " AND quarantined = ''",
                                    w.token, w.id, num(now_s - p.worker_ttl_s))[0][0]);
    if (live >= p.max_workers_per_token)
      return makeError(ErrorCode::RuntimeError, "token '" + w.token + "' already has " + std::to_string(live) +
                                                    " live workers (at most " + std::to_string(p.max_workers_per_token) +
                                                    ")");
    auto r = exec(c, t,
                  "INSERT INTO workers(id, token, target, arch, units, model, device, host, tessera_version,"
                  " llvm_version, toolkit_version, driver_version, slots, registered_at, last_seen)"
                  " VALUES($1,$2,$3,$4,$5::bigint,$6,$7,$8,$9,$10,$11,$12,$13::bigint,$14::float8,$14::float8)"
                  " ON CONFLICT(id) DO UPDATE SET target = excluded.target, arch = excluded.arch,"
                  " units = excluded.units, model = excluded.model, device = excluded.device, host = excluded.host,"
                  " tessera_version = excluded.tessera_version, llvm_version = excluded.llvm_version,"
                  " toolkit_version = excluded.toolkit_version, driver_version = excluded.driver_version,"
                  " slots = excluded.slots, last_seen = excluded.last_seen WHERE workers.token = excluded.token",
                  w.id, w.token, w.target, w.arch, std::to_string(w.units), w.model, w.device, w.host,
                  w.tessera_version, w.llvm_version, w.toolkit_version, w.driver_version, std::to_string(w.slots),
                  now);
    if (r.affected_rows() == 0)
      return makeError(ErrorCode::InvalidArgument, "worker id " + w.id + " belongs to another token");
    return {};
  });
}

Expected<int64_t> PgStore::heartbeat(const std::string& worker_id, const std::string& token, const QueuePolicy& p) {
  int64_t renewed = 0;
  Status s = runTx(pool_, TxKind::Write, [&](Conn& c, pqxx::transaction_base& t) -> Status {
    const double now = dbNow(c, t);
    TESSERA_TRY(touchWorker(c, t, worker_id, token, now));
    // Renewed for at most max_hold_s after the lease was taken (the SQLite engine's rule).
    renewed = static_cast<int64_t>(
        exec(c, t,
             "UPDATE job_items SET lease_expires = least($1::float8,"
             " CASE WHEN leased_at > 0 THEN leased_at + $2::float8 ELSE $1::float8 END)"
             " WHERE worker_id = $3 AND state = 'leased'",
             num(now + p.lease_s), num(p.max_hold_s), worker_id)
            .affected_rows());
    return {};
  });
  if (!s.ok()) return s.takeError();
  return renewed;
}

Expected<std::vector<WorkerInfo>> PgStore::workers(const WorkerFilter& f, const QueuePolicy& p) {
  std::vector<WorkerInfo> out;
  Status s = runTx(pool_, TxKind::Single, [&](Conn& c, pqxx::transaction_base& t) -> Status {
    out.clear();
    const double now = dbNow(c, t);
    std::vector<std::string> params;
    auto param = [&](std::string v) {
      params.push_back(std::move(v));
      return "$" + std::to_string(params.size());
    };
    std::string q = std::string("SELECT ") + kWorkerColumns + " FROM workers w WHERE TRUE";
    for (auto [col, v] : {std::pair<const char*, const std::string*>{"w.target", &f.target}, {"w.arch", &f.arch},
                          {"w.model", &f.model}})
      if (!v->empty()) q += std::string(" AND ") + col + " = " + param(*v);
    if (f.units) q += " AND w.units = " + param(std::to_string(*f.units)) + "::bigint";
    if (f.live_only) q += " AND w.last_seen >= " + param(num(now - p.worker_ttl_s)) + "::float8";
    q += " ORDER BY w.target, w.arch, w.id LIMIT 10000";
    for (const auto& row : exec(c, t, q, pqxx::prepare::make_dynamic_params(params)))
      out.push_back(workerRow(row, now, p));
    return {};
  });
  if (!s.ok()) return s.takeError();
  return out;
}

Expected<SubmitResult> PgStore::submit(const JobSpec& job, const QueuePolicy& p) {
  SubmitResult res;
  Status s = runTx(pool_, TxKind::Write, [&](Conn& c, pqxx::transaction_base& t) -> Status {
    res = SubmitResult{};
    const double now = dbNow(c, t);
    // ON CONFLICT DO NOTHING: two submissions of one id racing on two replicas make one job.
    auto ins = exec(c, t,
                    "INSERT INTO jobs(id, submitter, kind, key_id, key_json, target, arch, units, model, kernel,"
                    " settings, rounds, first_trial, elapsed_s, state, items, created_at)"
                    " VALUES($1,$2,$3,$4,$5,$6,$7,$8::bigint,$9,$10,$11,$12::bigint,$13::bigint,$14::float8,'open',"
                    "$15::bigint,$16::float8) ON CONFLICT(id) DO NOTHING RETURNING seq",
                    job.id, job.submitter, job.kind, keyIdOf(job.key), dumpJson(hardKeyToJson(job.key)),
                    job.key.target, job.key.arch, std::to_string(job.key.units), job.model, job.kernel, job.settings,
                    std::to_string(job.rounds), std::to_string(job.first_trial), num(job.elapsed_s),
                    std::to_string(job.items.size()), num(now));
    res.created = !ins.empty();
    if (!res.created) {
      auto owner = exec(c, t, "SELECT submitter FROM jobs WHERE id = $1", job.id);
      if (owner.empty() || asText(owner[0][0]) != job.submitter)
        return makeError(ErrorCode::InvalidArgument, "job id " + job.id + " belongs to another submitter");
    } else {
      for (size_t i = 0; i < job.items.size(); ++i)
        exec(c, t, "INSERT INTO job_items(job_id, item, payload, state) VALUES($1,$2::bigint,$3,'queued')", job.id,
             std::to_string(i), job.items[i]);
    }
    res.live_workers = liveWorkersFor(c, t, job.key, job.model, now, p);
    return {};
  });
  if (!s.ok()) return s.takeError();
  return res;
}

Expected<Lease> PgStore::lease(const std::string& worker_id, const std::string& token, int max_items,
                               const QueuePolicy& p) {
  Lease out;
  Status s = runTx(pool_, TxKind::Write, [&](Conn& c, pqxx::transaction_base& t) -> Status {
    out = Lease{};
    lockToken(c, t, token);
    const double now = dbNow(c, t);
    TESSERA_TRY(touchWorker(c, t, worker_id, token, now));
    auto w = exec(c, t,
                  "SELECT target, arch, units, model, slots,"
                  " (SELECT count(*) FROM job_items WHERE worker_id = $1 AND state = 'leased'"
                  "  AND lease_expires >= $3::float8),"
                  " (SELECT count(*) FROM job_items i JOIN workers o ON o.id = i.worker_id WHERE o.token = $2"
                  "  AND i.state = 'leased' AND i.lease_expires >= $3::float8)"
                  " FROM workers WHERE id = $1",
                  worker_id, token, num(now));
    if (w.empty()) return makeError(ErrorCode::NotFound, "unknown worker " + worker_id);
    const std::string target = asText(w[0][0]), arch = asText(w[0][1]), model = asText(w[0][3]);
    const std::string units = asText(w[0][2]);
    const int budget = leaseBudget(max_items, asInt(w[0][4]), asInt(w[0][5]), asInt(w[0][6]), p);
    // Candidates in submission order, this worker's own unanswered leases first. SKIP LOCKED: an
    // item another replica's transaction is leasing or reporting right now is not waited for.
    auto cands = exec(c, t,
                      "SELECT i.job_id, i.item, i.payload, i.state, i.worker_id, i.attempts, i.lost_workers,"
                      " coalesce((SELECT h.token FROM workers h WHERE h.id = i.worker_id), ''), i.lost_tokens,"
                      " i.refused_by, i.lease_expires < $6::float8, $6::float8 - i.leased_at"
                      " FROM job_items i JOIN jobs j ON j.id = i.job_id"
                      " WHERE j.state = 'open' AND j.target = $1 AND j.arch = $2 AND j.units = $3::bigint"
                      " AND (j.model = '' OR j.model = $4)"
                      " AND (i.state = 'queued' OR (i.state = 'leased' AND (i.lease_expires < $6::float8"
                      " OR i.worker_id = $5 OR (i.leased_at > 0 AND i.leased_at < $6::float8 - $8::float8))))"
                      " ORDER BY (i.state = 'leased' AND i.worker_id = $5) DESC,"
                      " (i.state = 'leased' AND i.worker_id != $5 AND i.lease_expires >= $6::float8) ASC, j.seq, i.item"
                      " LIMIT $7::bigint FOR UPDATE OF i SKIP LOCKED",
                      target, arch, units, model, worker_id, num(now), std::to_string(budget + 64), num(p.steal_after_s));
    std::vector<std::string> job_ids;
    for (const auto& row : cands) {
      const std::string job_id = asText(row[0]), payload = asText(row[2]);
      const int64_t item = asInt(row[1]);
      LeaseCandidate cand;
      cand.state = asText(row[3]);
      cand.holder = asText(row[4]);
      cand.attempts = asInt(row[5]);
      cand.lost_workers = asText(row[6]);
      cand.holder_token = asText(row[7]);
      cand.lost_tokens = asText(row[8]);
      cand.refused_by = asText(row[9]);
      cand.expired = row[10].as<bool>();
      cand.held_s = asDouble(row[11]);
      const LeaseStep step = leaseStep(cand, worker_id, token, asInt(w[0][5]), p);
      if (step.kind == LeaseStep::Skip) continue;
      if (step.kind == LeaseStep::GiveUp) {
        exec(c, t,
             "UPDATE job_items SET state = 'done', worker_id = '', result = $1, lost_workers = $2, lost_tokens = $3"
             " WHERE job_id = $4 AND item = $5::bigint",
             lostItemResult(step.attempts, step.lost_workers), step.lost_workers, step.lost_tokens, job_id,
             std::to_string(item));
        itemDone(c, t, job_id, now);
        continue;
      }
      if (static_cast<int>(out.items.size()) >= budget) continue;
      exec(c, t,
           "UPDATE job_items SET state = 'leased', worker_id = $1, attempts = $2::bigint, lost_workers = $3,"
           " lost_tokens = $4,"
           " leased_at = CASE WHEN $5::boolean AND leased_at > 0 THEN leased_at ELSE $6::float8 END,"
           " lease_expires = least($6::float8 + $7::float8,"
           "   (CASE WHEN $5::boolean AND leased_at > 0 THEN leased_at ELSE $6::float8 END) + $8::float8)"
           " WHERE job_id = $9 AND item = $10::bigint",
           worker_id, std::to_string(step.attempts), step.lost_workers, step.lost_tokens,
           std::string(step.mine ? "true" : "false"), num(now), num(p.lease_s), num(p.max_hold_s), job_id,
           std::to_string(item));
      out.items.push_back({job_id, item, payload, step.attempts});
      if (std::find(job_ids.begin(), job_ids.end(), job_id) == job_ids.end()) job_ids.push_back(job_id);
    }
    for (const std::string& id : job_ids) {
      auto j = exec(c, t, std::string("SELECT ") + kJobColumns + " FROM jobs WHERE id = $1", id);
      if (j.empty()) return makeError(ErrorCode::Internal, "leased item of a vanished job");
      TESSERA_ASSIGN(JobSpec spec, jobRow(j[0], nullptr));
      out.jobs.push_back(std::move(spec));
    }
    return {};
  });
  if (!s.ok()) return s.takeError();
  return out;
}

Expected<ReportResult> PgStore::report(const ItemReport& r, const PutOptions& put) {
  ReportResult res;
  Status s = runTx(pool_, TxKind::Write, [&](Conn& c, pqxx::transaction_base& t) -> Status {
    res = ReportResult{};
    // Records commit in id order (pg_store_impl.h); taken first, before any row lock.
    if (r.record) exec(c, t, "SELECT pg_advisory_xact_lock($1::bigint)", std::to_string(kRecordWriteLock));
    const double now = dbNow(c, t);
    TESSERA_TRY(touchWorker(c, t, r.worker_id, r.token, now));
    auto item = exec(c, t,
                     "SELECT state, worker_id, record_id FROM job_items WHERE job_id = $1 AND item = $2::bigint"
                     " FOR UPDATE",
                     r.job_id, std::to_string(r.item));
    if (item.empty()) return makeError(ErrorCode::NotFound, "no item " + std::to_string(r.item) + " in job " + r.job_id);
    const std::string state = asText(item[0][0]), holder = asText(item[0][1]);
    int64_t record_id = asInt(item[0][2]);
    if (auto settled = settledReport(state, holder, r.worker_id, record_id)) {
      res = std::move(*settled);
      return {};
    }
    if (r.record) {
      TESSERA_ASSIGN(res.put, putRecord(c, t, *r.record, put));
      record_id = res.put.id;
    }
    exec(c, t,
         "UPDATE job_items SET state = 'done', result = $1, record_id = $2::bigint WHERE job_id = $3 AND item = $4::bigint",
         r.result, std::to_string(record_id), r.job_id, std::to_string(r.item));
    itemDone(c, t, r.job_id, now);
    res.outcome = ReportOutcome::Recorded;
    return {};
  });
  if (!s.ok()) return s.takeError();
  return res;
}

Expected<ReportOutcome> PgStore::refuse(const ItemReport& r, const QueuePolicy& p) {
  ReportOutcome outcome = ReportOutcome::NotLeased;
  Status s = runTx(pool_, TxKind::Write, [&](Conn& c, pqxx::transaction_base& t) -> Status {
    const double now = dbNow(c, t);
    TESSERA_TRY(touchWorker(c, t, r.worker_id, r.token, now));
    auto item = exec(c, t,
                     "SELECT i.state, i.worker_id, i.record_id, i.refused_by, j.target, j.arch, j.units, j.model"
                     " FROM job_items i JOIN jobs j ON j.id = i.job_id WHERE i.job_id = $1 AND i.item = $2::bigint"
                     " FOR UPDATE OF i",
                     r.job_id, std::to_string(r.item));
    if (item.empty()) return makeError(ErrorCode::NotFound, "no item " + std::to_string(r.item) + " in job " + r.job_id);
    const std::string refused_by = asText(item[0][3]);
    if (auto settled = settledReport(asText(item[0][0]), asText(item[0][1]), r.worker_id, asInt(item[0][2]))) {
      outcome = settled->outcome;
      return {};
    }
    int64_t others = 0;
    for (const auto& row : exec(c, t,
                                "SELECT id FROM workers WHERE target = $1 AND arch = $2 AND units = $3::bigint"
                                " AND ($4 = '' OR model = $4) AND last_seen >= $5::float8 AND quarantined = ''"
                                " AND id != $6",
                                asText(item[0][4]), asText(item[0][5]), asText(item[0][6]), asText(item[0][7]),
                                num(now - p.worker_ttl_s), r.worker_id))
      others += listHas(refused_by, asText(row[0])) ? 0 : 1;
    const RefusalStep step = refusalStep(refused_by, r.worker_id, others, p);
    if (step.finished) {
      exec(c, t, "UPDATE job_items SET state = 'done', result = $1, refused_by = $2 WHERE job_id = $3 AND item = $4::bigint",
           r.result, step.refused_by, r.job_id, std::to_string(r.item));
      itemDone(c, t, r.job_id, now);
    } else {
      exec(c, t,
           "UPDATE job_items SET state = 'queued', worker_id = '', lease_expires = 0, refused_by = $1"
           " WHERE job_id = $2 AND item = $3::bigint",
           step.refused_by, r.job_id, std::to_string(r.item));
    }
    outcome = ReportOutcome::Recorded;
    return {};
  });
  if (!s.ok()) return s.takeError();
  return outcome;
}

Expected<std::vector<int64_t>> PgStore::quarantineWorker(const std::string& worker_id, const std::string& why) {
  std::vector<int64_t> records;
  Status s = runTx(pool_, TxKind::Write, [&](Conn& c, pqxx::transaction_base& t) -> Status {
    records.clear();
    if (exec(c, t, "UPDATE workers SET quarantined = $1 WHERE id = $2", why.empty() ? std::string("quarantined") : why,
             worker_id)
            .affected_rows() == 0)
      return makeError(ErrorCode::NotFound, "unknown worker " + worker_id);
    exec(c, t, "UPDATE job_items SET state = 'queued', worker_id = '', lease_expires = 0 WHERE worker_id = $1 AND state = 'leased'",
         worker_id);
    for (const auto& row : exec(c, t, "SELECT record_id FROM job_items WHERE worker_id = $1 AND state = 'done' AND record_id != 0",
                                worker_id))
      records.push_back(asInt(row[0]));
    return {};
  });
  if (!s.ok()) return s.takeError();
  return records;
}

Expected<std::optional<JobView>> PgStore::job(const std::string& job_id, const QueuePolicy& p) {
  std::optional<JobView> out;
  Status s = runTx(pool_, TxKind::ReadOnly, [&](Conn& c, pqxx::transaction_base& t) -> Status {
    out.reset();
    const double now = dbNow(c, t);
    auto j = exec(c, t, std::string("SELECT ") + kJobColumns + " FROM jobs WHERE id = $1", job_id);
    if (j.empty()) return {};
    JobView v;
    TESSERA_ASSIGN(v.spec, jobRow(j[0], &v.state));
    for (const auto& row : exec(c, t,
                                "SELECT item, state, worker_id, result, attempts, record_id, payload FROM job_items"
                                " WHERE job_id = $1 ORDER BY item",
                                job_id)) {
      v.items.push_back({asInt(row[0]), asText(row[1]), asText(row[2]), asText(row[3]), asInt(row[4]), asInt(row[5])});
      v.spec.items.push_back(asText(row[6]));
    }
    v.live_workers = liveWorkersFor(c, t, v.spec.key, v.spec.model, now, p);
    out = std::move(v);
    return {};
  });
  if (!s.ok()) return s.takeError();
  return out;
}

Expected<bool> PgStore::cancel(const std::string& job_id) {
  bool cancelled = false;
  Status s = runTx(pool_, TxKind::Write, [&](Conn& c, pqxx::transaction_base& t) -> Status {
    const double now = dbNow(c, t);
    cancelled = exec(c, t, "UPDATE jobs SET state = 'cancelled', finished_at = $1::float8 WHERE id = $2 AND state = 'open'",
                     num(now), job_id)
                    .affected_rows() > 0;
    return {};
  });
  if (!s.ok()) return s.takeError();
  return cancelled;
}

Expected<int64_t> PgStore::purge(double keep_finished_s, double max_open_s) {
  int64_t removed = 0;
  Status s = runTx(pool_, TxKind::Write, [&](Conn& c, pqxx::transaction_base& t) -> Status {
    const double now = dbNow(c, t);
    exec(c, t, "UPDATE jobs SET state = 'cancelled', finished_at = $1::float8 WHERE state = 'open' AND created_at < $2::float8",
         num(now), num(now - max_open_s));
    exec(c, t,
         "DELETE FROM job_items WHERE job_id IN (SELECT id FROM jobs WHERE state != 'open' AND finished_at < $1::float8)",
         num(now - keep_finished_s));
    removed = static_cast<int64_t>(
        exec(c, t, "DELETE FROM jobs WHERE state != 'open' AND finished_at < $1::float8", num(now - keep_finished_s))
            .affected_rows());
    exec(c, t, "DELETE FROM workers WHERE last_seen < $1::float8", num(now - max_open_s));
    return {};
  });
  if (!s.ok()) return s.takeError();
  return removed;
}

}  // namespace tessera::cache::pg
