// Owns the write side of the PostgreSQL RecordStore: the best-wins upsert, admin actions with
// winner recomputation, the outbox marks, and the store and token factories of the engine.
#include <algorithm>

#include "cache_service/pg_store_impl.h"
#include "support/hash.h"

namespace tessera::cache::pg {

namespace {
void lockRecordWrites(Conn& c, pqxx::transaction_base& t) {
  exec(c, t, "SELECT pg_advisory_xact_lock($1::bigint)", std::to_string(kRecordWriteLock));
}
}  // namespace

Expected<PutResult> PgStore::putRecord(Conn& c, pqxx::transaction_base& t, const Record& r, const PutOptions& opts) {
  if (r.key_id.empty() || r.key_id != keyIdOf(r.key))
    return makeError(ErrorCode::InvalidArgument, "record not finalized (key_id missing or wrong)");
  PutResult res;
  res.key_id = r.key_id;
  const std::string fp = fingerprint(r);
  const bool ok = r.status == RecordStatus::Ok;

  // 0. The group the record joins (trust.h; the SQLite engine's rule, sqlite_store_write.cpp): who
  // else measured this config of this key, and how fast. A re-measurement claim from an untrusted
  // writer stands only on its own earlier measurement of the config.
  std::vector<Measurement> group;
  if (ok)
    for (const auto& row : exec(c, t,
                                "SELECT id, writer, median_us, trust FROM records WHERE key_id = $1"
                                " AND md5(config) = md5($2) AND config = $2 AND status = 'ok' AND quarantined = 0"
                                " ORDER BY id DESC LIMIT $3::bigint",
                                r.key_id, r.config, std::to_string(kTrustGroupLimit)))
      group.push_back({asInt(row[0]), asText(row[1]), asDouble(row[2]), static_cast<Trust>(asInt(row[3]))});
  bool remeasured = r.remeasured;
  if (remeasured && !opts.trusted)
    remeasured = std::any_of(group.begin(), group.end(), [&](const Measurement& m) { return m.writer == opts.writer; });
  Trust mine = opts.trusted && ok ? Trust::Vouched : Trust::Claim;
  std::vector<std::pair<int64_t, Trust>> others;
  if (ok) {
    group.push_back({-1, opts.writer, r.median_us, mine});
    for (const auto& [id, tr] : settleTrust(group, opts.agree_factor)) {
      if (id == -1) mine = tr;
      else others.emplace_back(id, tr);
    }
  }

  // 1. The record; an identical one already stored makes this a duplicate.
  const Provenance& p = r.provenance;
  auto ins = exec(c, t,
                  std::string("INSERT INTO records(key_id, fingerprint, status, config, n, median_us, p20_us, p80_us,"
                              " gflops, gbps, peak_fraction, max_abs_err, max_rel_err, trials, tuning_seconds,"
                              " tessera_version, llvm_version, cuda_version, cpu_model, host, user_name, created_at,"
                              " pushed, remeasured, estimator, bound, writer, trust, received_at)"
                              " VALUES($1,$2,$3,$4,$5::bigint,$6::float8,$7::float8,$8::float8,$9::float8,$10::float8,"
                              "$11::float8,$12::float8,$13::float8,$14::bigint,$15::float8,$16,$17,$18,$19,$20,$21,$22,"
                              "$23::integer,$24::integer,$25,$26,$27,$28::integer,") +
                      kNowUtc + ") ON CONFLICT(fingerprint) DO NOTHING RETURNING id",
                  r.key_id, fp, std::string(recordStatusName(r.status)), r.config, std::to_string(r.n),
                  num(r.median_us), num(r.p20_us), num(r.p80_us), num(r.gflops), num(r.gbps), num(r.peak_fraction),
                  num(r.max_abs_err), num(r.max_rel_err), std::to_string(r.trials), num(r.tuning_seconds),
                  p.tessera_version, p.llvm_version, p.cuda_version, p.cpu_model, p.host, p.user, p.created_at,
                  std::string(opts.outbox ? "0" : "1"), std::string(remeasured ? "1" : "0"), r.estimator, r.bound,
                  opts.writer, std::to_string(static_cast<int>(mine)));
  if (ins.empty()) {
    auto dup = exec(c, t, "SELECT id, trust FROM records WHERE fingerprint = $1", fp);
    if (dup.empty()) return makeError(ErrorCode::Internal, "duplicate record vanished");
    res.id = asInt(dup[0][0]);
    res.trust = static_cast<Trust>(asInt(dup[0][1]));
    res.duplicate = true;
    return res;
  }
  res.id = asInt(ins[0][0]);
  res.remeasured = remeasured;
  res.trust = mine;
  for (const auto& [id, tr] : others)
    exec(c, t, "UPDATE records SET trust = $1::integer WHERE id = $2::bigint", std::to_string(static_cast<int>(tr)),
         std::to_string(id));

  // 2. Best-wins: recomputed when the record changed the trust of others; otherwise one upsert
  // creates the key or moves its winner, only ever to a strictly better record (winner_rank, then
  // the lower median); RETURNING yields a row only when this record became the winner.
  const std::string shape = formatShape(r.key.shape);
  const std::string rank = std::to_string(r.key.shape.size());
  const std::optional<int> wrank = ok ? winnerRank(mine, remeasured) : std::nullopt;
  if (wrank && others.empty()) {
    auto up = exec(c, t,
                   "INSERT INTO keys(key_id, family, workload, shape, rank, dtype, layout, target, arch, units,"
                   " winner_id, winner_median_us, winner_remeasured, winner_rank, winner_changes)"
                   " VALUES($1,$2,$3,$4,$5::integer,$6,$7,$8,$9,$10::bigint,$11::bigint,$12::float8,$13::integer,"
                   "$14::integer,1)"
                   " ON CONFLICT(key_id) DO UPDATE SET winner_id = excluded.winner_id,"
                   " winner_median_us = excluded.winner_median_us, winner_remeasured = excluded.winner_remeasured,"
                   " winner_rank = excluded.winner_rank, winner_changes = keys.winner_changes + 1"
                   " WHERE keys.winner_id IS NULL OR excluded.winner_rank > keys.winner_rank"
                   " OR (excluded.winner_rank = keys.winner_rank AND excluded.winner_median_us < keys.winner_median_us)"
                   " RETURNING winner_changes",
                   r.key_id, r.key.family, r.key.workload, shape, rank, r.key.dtype, r.key.layout, r.key.target,
                   r.key.arch, std::to_string(r.key.units), std::to_string(res.id), num(r.median_us),
                   std::string(remeasured ? "1" : "0"), std::to_string(*wrank));
    if (!up.empty()) res.outcome = asInt(up[0][0]) == 1 ? PutOutcome::Inserted : PutOutcome::Improved;
    return res;
  }
  exec(c, t,
       "INSERT INTO keys(key_id, family, workload, shape, rank, dtype, layout, target, arch, units)"
       " VALUES($1,$2,$3,$4,$5::integer,$6,$7,$8,$9,$10::bigint) ON CONFLICT(key_id) DO NOTHING",
       r.key_id, r.key.family, r.key.workload, shape, rank, r.key.dtype, r.key.layout, r.key.target, r.key.arch,
       std::to_string(r.key.units));
  if (!others.empty()) {
    auto was = exec(c, t, "SELECT coalesce(winner_id, 0), winner_changes FROM keys WHERE key_id = $1", r.key_id);
    const int64_t before = was.empty() ? 0 : asInt(was[0][0]), changes = was.empty() ? 0 : asInt(was[0][1]);
    const int64_t after = recomputeWinner(c, t, r.key_id);
    if (after == res.id) res.outcome = before == 0 && changes == 0 ? PutOutcome::Inserted : PutOutcome::Improved;
  }
  return res;
}

Expected<std::vector<PutResult>> PgStore::put(std::span<const Record> records, const PutOptions& opts) {
  std::vector<PutResult> results;
  if (records.empty()) return results;
  Status s = runTx(pool_, TxKind::Write, [&](Conn& c, pqxx::transaction_base& t) -> Status {
    results.clear();
    lockRecordWrites(c, t);
    for (const Record& r : records) {
      TESSERA_ASSIGN(PutResult pr, putRecord(c, t, r, opts));
      results.push_back(std::move(pr));
    }
    return {};
  });
  if (!s.ok()) return s.takeError();
  return results;
}

int64_t PgStore::recomputeWinner(Conn& c, pqxx::transaction_base& t, const std::string& key_id) {
  static const std::string q = std::string("SELECT r.id, r.median_us, r.remeasured, ") + kRankSql +
                               " FROM records r WHERE r.key_id = $1 AND " + kCandidateSql + " ORDER BY " +
                               kWinnerOrderSql + " LIMIT 1";
  auto pick = exec(c, t, q, key_id);
  if (!pick.empty()) {
    exec(c, t,
         "UPDATE keys SET winner_changes = CASE WHEN winner_id IS NOT DISTINCT FROM $1::bigint"
         " THEN greatest(winner_changes, 1) ELSE winner_changes + 1 END,"
         " winner_id = $1::bigint, winner_median_us = $2::float8, winner_remeasured = $3::integer,"
         " winner_rank = $4::integer WHERE key_id = $5",
         asText(pick[0][0]), num(asDouble(pick[0][1])), asText(pick[0][2]), asText(pick[0][3]), key_id);
    return asInt(pick[0][0]);
  }
  // No winner left: the next ok record is the key's first winner again ("inserted").
  exec(c, t,
       "UPDATE keys SET winner_id = NULL, winner_median_us = NULL, winner_remeasured = 0, winner_rank = 0,"
       " winner_changes = 0 WHERE key_id = $1",
       key_id);
  exec(c, t, "DELETE FROM keys WHERE key_id = $1 AND NOT EXISTS (SELECT 1 FROM records WHERE key_id = $1)", key_id);
  return 0;
}

void PgStore::resettleKey(Conn& c, pqxx::transaction_base& t, const std::string& key_id, double agree_factor) {
  std::vector<ConfigMeasurement> records;
  for (const auto& row : exec(c, t,
                              "SELECT id, config, writer, median_us, trust FROM records WHERE key_id = $1"
                              " AND status = 'ok' AND quarantined = 0 ORDER BY id DESC LIMIT $2::bigint",
                              key_id, std::to_string(kTrustKeyLimit)))
    records.push_back({asText(row[1]), {asInt(row[0]), asText(row[2]), asDouble(row[3]), static_cast<Trust>(asInt(row[4]))}});
  for (const auto& [id, tr] : settleKey(records, agree_factor))
    exec(c, t, "UPDATE records SET trust = $1::integer WHERE id = $2::bigint", std::to_string(static_cast<int>(tr)),
         std::to_string(id));
}

namespace {
// WHERE clause (over `records r`) and its parameters for a selector.
std::string selectorWhere(const RecordSelector& sel, std::vector<std::string>& params) {
  std::string w = "TRUE";
  if (!sel.ids.empty()) {
    params.push_back("");
    for (size_t i = 0; i < sel.ids.size(); ++i) params.back() += (i ? "," : "") + std::to_string(sel.ids[i]);
    params.back() = "{" + params.back() + "}";
    w += " AND r.id = ANY($" + std::to_string(params.size()) + "::bigint[])";
  }
  const std::pair<const char*, const std::string*> fields[] = {
      {" AND r.key_id = ", &sel.key_id}, {" AND r.writer = ", &sel.writer},
      {" AND r.received_at >= ", &sel.since}, {" AND r.received_at < ", &sel.until}};
  for (auto [clause, v] : fields) {
    if (v->empty()) continue;
    params.push_back(*v);
    w += clause + std::string("$") + std::to_string(params.size());
  }
  return w;
}
}  // namespace

Expected<int64_t> PgStore::administer(const RecordSelector& sel, AdminAction action, double agree_factor) {
  if (sel.empty()) return int64_t{0};
  std::vector<std::string> params;
  std::string where = selectorWhere(sel, params);
  where += adminActionWhere(action);
  auto dyn = pqxx::prepare::make_dynamic_params(params);
  int64_t changed = 0;
  if (action == AdminAction::Count) {
    Status s = runTx(pool_, TxKind::Single, [&](Conn& c, pqxx::transaction_base& t) -> Status {
      changed = asInt(exec(c, t, "SELECT count(*) FROM records r WHERE " + where, dyn)[0][0]);
      return {};
    });
    if (!s.ok()) return s.takeError();
    return changed;
  }
  Status s = runTx(pool_, TxKind::Write, [&](Conn& c, pqxx::transaction_base& t) -> Status {
    lockRecordWrites(c, t);
    std::vector<std::string> keys;
    for (const auto& row : exec(c, t, "SELECT DISTINCT r.key_id FROM records r WHERE " + where, dyn))
      keys.push_back(asText(row[0]));
    changed = static_cast<int64_t>(exec(c, t, adminActionSql(action) + where, dyn).affected_rows());
    for (const std::string& key : keys) {
      resettleKey(c, t, key, agree_factor);
      recomputeWinner(c, t, key);
    }
    return {};
  });
  if (!s.ok()) return s.takeError();
  return changed;
}

Status PgStore::markPushed(std::span<const int64_t> ids) {
  if (ids.empty()) return {};
  std::string list;
  for (size_t i = 0; i < ids.size(); ++i) list += (i ? "," : "") + std::to_string(ids[i]);
  return runTx(pool_, TxKind::Write, [&](Conn& c, pqxx::transaction_base& t) -> Status {
    exec(c, t, "UPDATE records SET pushed = 1 WHERE id = ANY($1::bigint[])", "{" + list + "}");
    return {};
  });
}

namespace {

// Tokens of a PostgreSQL store: the `tokens` table next to the records (hashes only).
class PgTokenStore final : public TokenStore {
 public:
  explicit PgTokenStore(const std::string& url) : pool_(url, 2, 30) {}
  Status init() {
    TESSERA_ASSIGN(auto conn, pool_.acquire());
    Status st = openSchema(*conn);
    pool_.release(std::move(conn), !st.ok());
    return st;
  }

  Expected<std::string> add(const std::string& name, Scope scope) override {
    TESSERA_TRY(checkTokenName(name));
    TESSERA_ASSIGN(std::string secret, generateTokenSecret());
    bool added = false;
    TESSERA_TRY(runTx(pool_, TxKind::Write, [&](Conn& c, pqxx::transaction_base& t) -> Status {
      auto r = exec(c, t,
                    std::string("INSERT INTO tokens(name, hash, scope, created_at) VALUES($1,$2,$3,") + kNowUtc +
                        ") ON CONFLICT(name) DO NOTHING",
                    name, sha256Hex(secret), std::string(scopeName(scope)));
      added = r.affected_rows() > 0;
      return {};
    }));
    if (!added) return nameTaken(name);
    return secret;
  }

  Expected<std::vector<TokenInfo>> list() override {
    std::vector<TokenInfo> out;
    TESSERA_TRY(runTx(pool_, TxKind::Single, [&](Conn& c, pqxx::transaction_base& t) -> Status {
      out.clear();
      for (const auto& row : exec(c, t, "SELECT name, scope, created_at, coalesce(revoked_at, ''), substr(hash, 1, 12)"
                                        " FROM tokens ORDER BY name")) {
        TokenInfo ti;
        ti.name = asText(row[0]);
        ti.scope = parseScope(asText(row[1])).value_or(Scope::Read);
        ti.created_at = asText(row[2]);
        ti.revoked_at = asText(row[3]);
        ti.hash_prefix = asText(row[4]);
        out.push_back(std::move(ti));
      }
      return {};
    }));
    return out;
  }

  Status revoke(const std::string& name) override {
    bool revoked = false;
    TESSERA_TRY(runTx(pool_, TxKind::Write, [&](Conn& c, pqxx::transaction_base& t) -> Status {
      revoked = exec(c, t, std::string("UPDATE tokens SET revoked_at = ") + kNowUtc +
                               " WHERE name = $1 AND revoked_at IS NULL",
                     name)
                    .affected_rows() > 0;
      return {};
    }));
    if (!revoked) return makeError(ErrorCode::NotFound, "no active token named '" + name + "'");
    return {};
  }

  Expected<bool> exists(const std::string& name) override {
    bool found = false;
    TESSERA_TRY(runTx(pool_, TxKind::Single, [&](Conn& c, pqxx::transaction_base& t) -> Status {
      found = !exec(c, t, "SELECT 1 FROM tokens WHERE name = $1", name).empty();
      return {};
    }));
    return found;
  }

  Expected<std::vector<ActiveToken>> active() override {
    std::vector<ActiveToken> out;
    TESSERA_TRY(runTx(pool_, TxKind::Single, [&](Conn& c, pqxx::transaction_base& t) -> Status {
      out.clear();
      for (const auto& row : exec(c, t, "SELECT hash, scope, name FROM tokens WHERE revoked_at IS NULL")) {
        auto scope = parseScope(asText(row[1]));
        if (scope) out.push_back({asText(row[0]), *scope, asText(row[2])});
      }
      return {};
    }));
    return out;
  }

 private:
  Pool pool_;
};

}  // namespace

Expected<std::unique_ptr<TokenStore>> openTokenStore(const std::string& url) {
  auto s = std::make_unique<PgTokenStore>(url);
  TESSERA_TRY(s->init());
  return std::unique_ptr<TokenStore>(std::move(s));
}

}  // namespace tessera::cache::pg
