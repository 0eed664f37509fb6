// Owns the write side of the SQLite RecordStore: group commit on the single writer connection,
// the best-wins upsert, staleness bookkeeping and keeping the winners index coherent.
#include <algorithm>

#include "cache_service/sqlite_store_impl.h"

namespace tessera::cache {

Status SqliteStore::write(WriteFn fn) {
  WriteJob job{std::move(fn), {}, false};
  std::unique_lock<std::mutex> lk(write_mu_);
  queue_.push_back(&job);
  // Leader/follower group commit: whoever finds the writer idle commits every queued job in one
  // transaction; the others sleep until their job is done. Under load this turns N fsyncs into 1.
  while (!job.done) {
    if (writing_) {
      write_cv_.wait(lk);
      continue;
    }
    writing_ = true;
    std::vector<WriteJob*> group;
    group.swap(queue_);
    lk.unlock();
    commitGroup(group);
    lk.lock();
    for (WriteJob* j : group) j->done = true;
    writing_ = false;
    write_cv_.notify_all();
  }
  return std::move(job.result);
}

void SqliteStore::commitGroup(std::vector<WriteJob*>& jobs) {
  sql::Db& db = *writer_;
  auto failAll = [&](const Error& e) {
    for (WriteJob* j : jobs) j->result = e;
  };
  if (Status s = db.exec("BEGIN IMMEDIATE"); !s.ok()) return failAll(s.error());
  // With the write lock held no one else can commit: a changed data_version means another
  // connection committed since our last look, and the index may miss its winners.
  auto version = db.scalar("PRAGMA data_version");
  if (!version.ok()) {
    (void)db.exec("ROLLBACK");
    return failAll(version.error());
  }
  const bool external = *version != data_version_;
  data_version_ = *version;

  Touched touched;
  for (WriteJob* j : jobs) {
    Touched mine;
    (void)db.exec("SAVEPOINT job");
    j->result = j->fn(db, mine);
    if (j->result.ok()) {
      (void)db.exec("RELEASE job");
      touched.merge(mine);
    } else {
      (void)db.exec("ROLLBACK TO job");
      (void)db.exec("RELEASE job");
    }
  }
  if (Status committed = db.exec("COMMIT"); !committed.ok()) {
    (void)db.exec("ROLLBACK");
    return failAll(committed.error());
  }
  if (!opts_.index_winners) return;
  if (external) {
    // Another process wrote: the index may miss its winners. Lookups read the database until that
    // process is quiet (refreshIfChangedExternally reloads the index then).
    index_live_.store(false, std::memory_order_release);
    last_external_ = std::chrono::steady_clock::now();
  }
  if (!index_live_.load(std::memory_order_acquire)) return;
  if (Status indexed = applyIndex(db, touched); !indexed.ok()) {
    // The data is committed; only the cache is behind: lookups read the database until the next
    // refresh reloads it.
    index_live_.store(false, std::memory_order_release);
  }
}

Status SqliteStore::applyIndex(sql::Db& db, const Touched& touched) {
  // Runs after COMMIT while this thread still holds the writer role, so index updates happen in
  // commit order and a lookup never sees a winner older than one already committed.
  std::vector<std::pair<std::string, ServedRecordPtr>> fresh;
  for (const auto& key : touched) {
    TESSERA_ASSIGN(ServedRecordPtr w, readWinner(db, key));
    fresh.emplace_back(key, std::move(w));
  }
  std::unique_lock<std::shared_mutex> g(index_mu_);
  for (auto& [key, w] : fresh) {
    if (w) winners_[key] = std::move(w);
    else winners_.erase(key);
  }
  return {};
}

Expected<PutResult> SqliteStore::putRecord(sql::Db& db, const Record& r, const PutOptions& opts,
                                           Touched& touched) {
  if (r.key_id.empty() || r.key_id != keyIdOf(r.key))
    return makeError(ErrorCode::InvalidArgument, "record not finalized (key_id missing or wrong)");
  PutResult res;
  res.key_id = r.key_id;
  // The fingerprint is of the record as submitted, so a retried submission is a duplicate even
  // when the store did not accept its re-measured claim.
  const std::string fp = fingerprint(r);
  const std::string shape = formatShape(r.key.shape);
  auto bindKey = [&](sql::Stmt& st) {
    st.bind(1, r.key_id).bind(2, r.key.family).bind(3, r.key.workload).bind(4, shape);
    st.bind(5, static_cast<int64_t>(r.key.shape.size())).bind(6, r.key.dtype).bind(7, r.key.layout);
    st.bind(8, r.key.target).bind(9, r.key.arch).bind(10, r.key.units);
  };
  const bool ok = r.status == RecordStatus::Ok;

  // 0. Who else measured this config of this key, and how fast (trust.h): the group the record
  // joins. A re-measurement claim from an untrusted writer stands only on its own earlier
  // measurement of the config.
  std::vector<Measurement> group;
  if (ok) {
    TESSERA_ASSIGN(sql::Stmt * st, db.cached(
        "SELECT id, writer, median_us, trust FROM records WHERE key_id = ? AND config = ? AND status = 'ok'"
        " AND quarantined = 0 ORDER BY id DESC LIMIT ?"));
    sql::Use use(*st);
    st->bind(1, r.key_id).bind(2, r.config).bind(3, int64_t{kTrustGroupLimit});
    for (;;) {
      TESSERA_ASSIGN(bool row, st->step());
      if (!row) break;
      group.push_back({st->i64(0), st->text(1), st->f64(2), static_cast<Trust>(st->i64(3))});
    }
  }
  bool remeasured = r.remeasured;
  if (remeasured && !opts.trusted)
    remeasured = std::any_of(group.begin(), group.end(), [&](const Measurement& m) { return m.writer == opts.writer; });
  // The new record's trust and what it changes for the others (the new record's id is not known
  // yet: -1 stands for it).
  Trust mine = opts.trusted && ok ? Trust::Vouched : Trust::Claim;
  std::vector<std::pair<int64_t, Trust>> others;
  if (ok) {
    group.push_back({-1, opts.writer, r.median_us, mine});
    for (const auto& [id, t] : settleTrust(group, opts.agree_factor)) {
      if (id == -1) mine = t;
      else others.emplace_back(id, t);
    }
  }

  // 1. The record itself; an identical one already stored makes this a duplicate.
  {
    TESSERA_ASSIGN(sql::Stmt * st, db.cached(
        "INSERT INTO records(key_id, fingerprint, status, config, n, median_us, p20_us, p80_us,"
        " gflops, gbps, peak_fraction, max_abs_err, max_rel_err, trials, tuning_seconds,"
        " tessera_version, llvm_version, cuda_version, cpu_model, host, user, created_at, pushed,"
        " remeasured, estimator, bound, writer, received_at, trust)"
        " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
        " ON CONFLICT(fingerprint) DO NOTHING RETURNING id"));
    sql::Use use(*st);
    const Provenance& p = r.provenance;
    st->bind(1, r.key_id).bind(2, fp).bind(3, recordStatusName(r.status)).bind(4, r.config);
    st->bind(5, r.n).bind(6, r.median_us).bind(7, r.p20_us).bind(8, r.p80_us).bind(9, r.gflops);
    st->bind(10, r.gbps).bind(11, r.peak_fraction).bind(12, r.max_abs_err).bind(13, r.max_rel_err);
    st->bind(14, r.trials).bind(15, r.tuning_seconds).bind(16, p.tessera_version);
    st->bind(17, p.llvm_version).bind(18, p.cuda_version).bind(19, p.cpu_model).bind(20, p.host);
    st->bind(21, p.user).bind(22, p.created_at).bind(23, opts.outbox ? 0 : 1);
    st->bind(24, int64_t(remeasured ? 1 : 0)).bind(25, r.estimator).bind(26, r.bound);
    st->bind(27, opts.writer).bind(28, utcNow()).bind(29, int64_t(static_cast<int>(mine)));
    TESSERA_ASSIGN(bool row, st->step());
    if (row) res.id = st->i64(0);
  }
  if (res.id == 0) {
    TESSERA_ASSIGN(sql::Stmt * st, db.cached("SELECT id, trust FROM records WHERE fingerprint = ?"));
    sql::Use use(*st);
    st->bind(1, fp);
    TESSERA_ASSIGN(bool row, st->step());
    if (!row) return makeError(ErrorCode::Internal, "duplicate record vanished");
    res.id = st->i64(0);
    res.trust = static_cast<Trust>(st->i64(1));
    res.duplicate = true;
    return res;
  }
  res.remeasured = remeasured;
  res.trust = mine;
  for (const auto& [id, t] : others) {
    TESSERA_ASSIGN(sql::Stmt * st, db.cached("UPDATE records SET trust = ? WHERE id = ?"));
    sql::Use use(*st);
    st->bind(1, int64_t(static_cast<int>(t))).bind(2, id);
    TESSERA_TRY(st->run());
  }

  // 2. Best-wins. When the record changed the trust of others, the key's winner is recomputed;
  // otherwise one upsert creates the key row or moves its winner, and only ever to a strictly
  // better record (winner_rank, then the lower median). RETURNING yields a row only when this
  // record became the winner. (Quarantined records never hold the winner: the admin action that
  // quarantines recomputes it.)
  const std::optional<int> rank = ok ? winnerRank(mine, remeasured) : std::nullopt;
  if (!others.empty()) {
    {
      TESSERA_ASSIGN(sql::Stmt * st, db.cached(
          "INSERT INTO keys(key_id, family, workload, shape, rank, dtype, layout, target, arch, units)"
          " VALUES(?,?,?,?,?,?,?,?,?,?) ON CONFLICT(key_id) DO NOTHING"));
      sql::Use use(*st);
      bindKey(*st);
      TESSERA_TRY(st->run());
    }
    int64_t before = 0, changes = 0;
    {
      TESSERA_ASSIGN(sql::Stmt * st, db.cached("SELECT coalesce(winner_id, 0), winner_changes FROM keys WHERE key_id = ?"));
      sql::Use use(*st);
      st->bind(1, r.key_id);
      TESSERA_ASSIGN(bool row, st->step());
      if (row) {
        before = st->i64(0);
        changes = st->i64(1);
      }
    }
    TESSERA_ASSIGN(int64_t after, recomputeWinner(db, r.key_id));
    if (after != before) touched.insert(r.key_id);
    if (after == res.id) res.outcome = before == 0 && changes == 0 ? PutOutcome::Inserted : PutOutcome::Improved;
  } else if (rank) {
    TESSERA_ASSIGN(sql::Stmt * st, db.cached(
        "INSERT INTO keys(key_id, family, workload, shape, rank, dtype, layout, target, arch, units,"
        " winner_id, winner_median_us, winner_remeasured, winner_rank, winner_changes)"
        " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,1)"
        " ON CONFLICT(key_id) DO UPDATE SET winner_id = excluded.winner_id,"
        " winner_median_us = excluded.winner_median_us, winner_remeasured = excluded.winner_remeasured,"
        " winner_rank = excluded.winner_rank, winner_changes = keys.winner_changes + 1"
        " WHERE keys.winner_id IS NULL OR excluded.winner_rank > keys.winner_rank"
        " OR (excluded.winner_rank = keys.winner_rank AND excluded.winner_median_us < keys.winner_median_us)"
        " RETURNING winner_changes"));
    sql::Use use(*st);
    bindKey(*st);
    st->bind(11, res.id).bind(12, r.median_us).bind(13, int64_t(remeasured ? 1 : 0)).bind(14, int64_t{*rank});
    TESSERA_ASSIGN(bool row, st->step());
    if (row) {
      res.outcome = st->i64(0) == 1 ? PutOutcome::Inserted : PutOutcome::Improved;
      touched.insert(r.key_id);
    }
  } else {
    TESSERA_ASSIGN(sql::Stmt * st, db.cached(
        "INSERT INTO keys(key_id, family, workload, shape, rank, dtype, layout, target, arch, units)"
        " VALUES(?,?,?,?,?,?,?,?,?,?) ON CONFLICT(key_id) DO NOTHING"));
    sql::Use use(*st);
    bindKey(*st);
    TESSERA_TRY(st->run());
  }
  // Staleness is computed per record when read (SqliteStore::readRow): nothing another record of
  // the key says can mark this one stale.
  return res;
}

Expected<int64_t> SqliteStore::recomputeWinner(sql::Db& db, const std::string& key_id) {
  static const std::string q = std::string("SELECT r.id, r.median_us, r.remeasured, ") + kRankSql +
                               " FROM records r WHERE r.key_id = ? AND " + kCandidateSql + " ORDER BY " +
                               kWinnerOrderSql + " LIMIT 1";
  TESSERA_ASSIGN(sql::Stmt * pick, db.cached(q));
  sql::Use use(*pick);
  pick->bind(1, key_id);
  TESSERA_ASSIGN(bool found, pick->step());
  if (found) {
    const int64_t id = pick->i64(0);
    TESSERA_ASSIGN(sql::Stmt * up, db.cached(
        "UPDATE keys SET winner_changes = CASE WHEN winner_id IS ?1 THEN max(winner_changes, 1) ELSE winner_changes + 1 END,"
        " winner_id = ?1, winner_median_us = ?2, winner_remeasured = ?3, winner_rank = ?4 WHERE key_id = ?5"));
    sql::Use use2(*up);
    up->bind(1, id).bind(2, pick->f64(1)).bind(3, pick->i64(2)).bind(4, pick->i64(3)).bind(5, key_id);
    TESSERA_TRY(up->run());
    return id;
  }
  // No winner left: the next ok record is the key's first winner again ("inserted").
  TESSERA_ASSIGN(sql::Stmt * none, db.cached(
      "UPDATE keys SET winner_id = NULL, winner_median_us = NULL, winner_remeasured = 0, winner_rank = 0,"
      " winner_changes = 0 WHERE key_id = ?"));
  sql::Use use3(*none);
  none->bind(1, key_id);
  TESSERA_TRY(none->run());
  TESSERA_ASSIGN(sql::Stmt * gone, db.cached(
      "DELETE FROM keys WHERE key_id = ?1 AND NOT EXISTS (SELECT 1 FROM records WHERE key_id = ?1)"));
  sql::Use use4(*gone);
  gone->bind(1, key_id);
  TESSERA_TRY(gone->run());
  return int64_t{0};
}

Status SqliteStore::resettleKey(sql::Db& db, const std::string& key_id, double agree_factor) {
  std::vector<ConfigMeasurement> records;
  {
    TESSERA_ASSIGN(sql::Stmt * st, db.cached(
        "SELECT id, config, writer, median_us, trust FROM records WHERE key_id = ? AND status = 'ok'"
        " AND quarantined = 0 ORDER BY id DESC LIMIT ?"));
    sql::Use use(*st);
    st->bind(1, key_id).bind(2, int64_t{kTrustKeyLimit});
    for (;;) {
      TESSERA_ASSIGN(bool row, st->step());
      if (!row) break;
      records.push_back({st->text(1), {st->i64(0), st->text(2), st->f64(3), static_cast<Trust>(st->i64(4))}});
    }
  }
  for (const auto& [id, t] : settleKey(records, agree_factor)) {
    TESSERA_ASSIGN(sql::Stmt * st, db.cached("UPDATE records SET trust = ? WHERE id = ?"));
    sql::Use use(*st);
    st->bind(1, int64_t(static_cast<int>(t))).bind(2, id);
    TESSERA_TRY(st->run());
  }
  return {};
}

namespace {
// WHERE clause (over `records r`) and its text parameters for a selector.
std::string selectorWhere(const RecordSelector& sel, std::vector<std::string>& texts) {
  std::string w = "1";
  if (!sel.ids.empty()) {
    w += " AND r.id IN (";
    for (size_t i = 0; i < sel.ids.size(); ++i) w += (i ? "," : "") + std::to_string(sel.ids[i]);
    w += ")";
  }
  const std::pair<const char*, const std::string*> fields[] = {
      {" AND r.key_id = ?", &sel.key_id}, {" AND r.writer = ?", &sel.writer},
      {" AND r.received_at >= ?", &sel.since}, {" AND r.received_at < ?", &sel.until}};
  for (auto [clause, v] : fields) {
    if (v->empty()) continue;
    w += clause;
    texts.push_back(*v);
  }
  return w;
}
}  // namespace

Expected<int64_t> SqliteStore::administer(const RecordSelector& sel, AdminAction action, double agree_factor) {
  if (sel.empty()) return int64_t{0};
  std::vector<std::string> texts;
  std::string where = selectorWhere(sel, texts);
  where += adminActionWhere(action);
  auto bindAll = [&](sql::Stmt& st) {
    for (size_t i = 0; i < texts.size(); ++i) st.bind(static_cast<int>(i + 1), texts[i]);
  };
  if (action == AdminAction::Count) {
    TESSERA_ASSIGN(Reader rd, reader());
    TESSERA_ASSIGN(sql::Stmt st, rd->prepare("SELECT count(*) FROM records r WHERE " + where));
    bindAll(st);
    TESSERA_ASSIGN(bool got, st.step());
    return got ? st.i64(0) : 0;
  }
  int64_t changed = 0;
  Status s = write([&](sql::Db& db, Touched& touched) -> Status {
    std::vector<std::string> keys;
    {
      TESSERA_ASSIGN(sql::Stmt st, db.prepare("SELECT DISTINCT r.key_id FROM records r WHERE " + where));
      bindAll(st);
      for (;;) {
        TESSERA_ASSIGN(bool row, st.step());
        if (!row) break;
        keys.push_back(st.text(0));
      }
    }
    {
      TESSERA_ASSIGN(sql::Stmt st, db.prepare(adminActionSql(action) + where));
      bindAll(st);
      TESSERA_TRY(st.run());
      changed = sqlite3_changes(db.handle());
    }
    for (const std::string& key : keys) {
      TESSERA_TRY(resettleKey(db, key, agree_factor));
      TESSERA_TRY(recomputeWinner(db, key));
      touched.insert(key);
    }
    return {};
  });
  if (!s.ok()) return s.takeError();
  return changed;
}

Expected<std::vector<PutResult>> SqliteStore::put(std::span<const Record> records,
                                                  const PutOptions& opts) {
  std::vector<PutResult> results;
  if (records.empty()) return results;
  Status s = write([&](sql::Db& db, Touched& touched) -> Status {
    results.clear();
    results.reserve(records.size());
    for (const Record& r : records) {
      TESSERA_ASSIGN(PutResult pr, putRecord(db, r, opts, touched));
      results.push_back(std::move(pr));
    }
    return {};
  });
  if (!s.ok()) return s.takeError();
  return results;
}

Status SqliteStore::markPushed(std::span<const int64_t> ids) {
  if (ids.empty()) return {};
  return write([&](sql::Db& db, Touched&) -> Status {
    TESSERA_ASSIGN(sql::Stmt * st, db.cached("UPDATE records SET pushed = 1 WHERE id = ?"));
    for (int64_t id : ids) {
      sql::Use use(*st);
      st->bind(1, id);
      TESSERA_TRY(st->run());
    }
    return {};
  });
}

Expected<bool> SqliteStore::refreshIfChangedExternally() {
  if (!opts_.index_winners) return false;
  // Take the writer role without opening a write transaction (an idle check must not fsync):
  // no commit of ours can interleave with the comparison.
  {
    std::unique_lock<std::mutex> lk(write_mu_);
    write_cv_.wait(lk, [&] { return !writing_; });
    writing_ = true;
  }
  auto check = [&]() -> Expected<bool> {
    TESSERA_ASSIGN(int64_t version, writer_->scalar("PRAGMA data_version"));
    const auto now = std::chrono::steady_clock::now();
    if (version != data_version_) {
      data_version_ = version;
      index_live_.store(false, std::memory_order_release);
      last_external_ = now;
      return true;  // noticed: lookups read the database from now on
    }
    // Reload once the other writers have been quiet for a second, not after each of their commits.
    if (index_live_.load(std::memory_order_acquire) || now - last_external_ < std::chrono::seconds(1)) return false;
    TESSERA_TRY(loadIndex(*writer_));
    index_live_.store(true, std::memory_order_release);
    return true;
  };
  auto result = check();
  {
    std::lock_guard<std::mutex> lk(write_mu_);
    writing_ = false;
  }
  write_cv_.notify_all();
  return result;
}

}  // namespace tessera::cache
