// Owns the record write rules of the SQL stores (store_core.h), once for SQLite and PostgreSQL,
// and the dialects and row conversions of sql_tx.h.
#include "store/store_core.h"

#include <algorithm>
#include <charconv>
#include <optional>

#include "store/trust.h"

namespace tessera::cache {

namespace {
template <typename T>
T parseNumber(const std::string& s) {
  T v{};
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}
}  // namespace

int64_t SqlRow::i64(size_t i) const {
  const SqlValue& v = cols.at(i);
  if (const auto* n = std::get_if<int64_t>(&v)) return *n;
  if (const auto* d = std::get_if<double>(&v)) return static_cast<int64_t>(*d);
  if (const auto* s = std::get_if<std::string>(&v)) return parseNumber<int64_t>(*s);
  return 0;
}

double SqlRow::f64(size_t i) const {
  const SqlValue& v = cols.at(i);
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* n = std::get_if<int64_t>(&v)) return static_cast<double>(*n);
  if (const auto* s = std::get_if<std::string>(&v)) return parseNumber<double>(*s);
  return 0;
}

std::string SqlRow::text(size_t i) const {
  const SqlValue& v = cols.at(i);
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  if (const auto* n = std::get_if<int64_t>(&v)) return std::to_string(*n);
  if (const auto* d = std::get_if<double>(&v)) return std::to_string(*d);
  return {};
}

std::string SqlDialect::configIs(int n) const {
  const std::string p = "?" + std::to_string(n);
  if (engine == Engine::Postgres) return "md5(config) = md5(" + p + ") AND config = " + p;
  return "config = " + p;
}

std::string SqlDialect::sql(const std::string& neutral) const {
  if (engine == Engine::Sqlite) return neutral;
  // ?N -> $N. Neutral statements hold no '?' inside string literals.
  std::string out = neutral;
  for (char& c : out)
    if (c == '?') c = '$';
  return out;
}

std::string SqlDialect::lockRows(const char* alias, bool skip_locked) const {
  if (engine == Engine::Sqlite) return "";
  std::string s = " FOR UPDATE";
  if (alias && *alias) s += std::string(" OF ") + alias;
  if (skip_locked) s += " SKIP LOCKED";
  return s;
}

const SqlDialect& SqlDialect::sqlite() {
  static const SqlDialect d{Engine::Sqlite, "user", nullptr, "min"};
  return d;
}

const SqlDialect& SqlDialect::postgres() {
  static const SqlDialect d{Engine::Postgres, "user_name",
                            "to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')", "least"};
  return d;
}

namespace core {

namespace {

int64_t flag(bool b) { return b ? 1 : 0; }
int64_t trustValue(Trust t) { return static_cast<int>(t); }

// The statements whose text depends on the dialect, built once per dialect.
struct WriteSql {
  std::string trust_group, insert_record;
  explicit WriteSql(const SqlDialect& d) {
    trust_group = std::string("SELECT id, writer, median_us, trust, ") + kByWorkerSql +
                  " FROM records WHERE key_id = ?1 AND " + d.configIs(2) +
                  " AND status = 'ok' AND quarantined = 0 ORDER BY id DESC LIMIT ?3";
    insert_record = std::string(
                        "INSERT INTO records(key_id, fingerprint, status, config, n, median_us, p20_us, p80_us,"
                        " gflops, gbps, peak_fraction, max_abs_err, max_rel_err, trials, tuning_seconds,"
                        " tessera_version, llvm_version, cuda_version, cpu_model, host, ") +
                    d.user_column +
                    ", created_at, pushed, remeasured, estimator, bound, writer, trust, driver_version,"
                    " runtime_version, measured_for, received_at)"
                    " VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20,?21,?22,"
                    "?23,?24,?25,?26,?27,?28,?29,?30,?31," +
                    (d.now_utc_sql ? std::string(d.now_utc_sql) : std::string("?32")) +
                    ") ON CONFLICT(fingerprint) DO NOTHING RETURNING id";
  }
  static const WriteSql& of(const SqlDialect& d) {
    static const WriteSql sqlite(SqlDialect::sqlite()), postgres(SqlDialect::postgres());
    return d.engine == SqlDialect::Engine::Postgres ? postgres : sqlite;
  }
};

const std::string kKeyColumns = "key_id, family, workload, shape, rank, dtype, layout, target, arch, units";

std::vector<SqlValue> keyParams(const Record& r) {
  return {r.key_id, r.key.family, r.key.workload, formatShape(r.key.shape), static_cast<int64_t>(r.key.shape.size()),
          r.key.dtype, r.key.layout, r.key.target, r.key.arch, r.key.units};
}

Status ensureKey(SqlTx& tx, const Record& r) {
  static const std::string q =
      "INSERT INTO keys(" + kKeyColumns + ") VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10) ON CONFLICT(key_id) DO NOTHING";
  TESSERA_TRY(tx.run(q, keyParams(r)));
  return {};
}

Status setTrust(SqlTx& tx, int64_t id, Trust t) {
  TESSERA_TRY(tx.run("UPDATE records SET trust = ?1 WHERE id = ?2", {trustValue(t), id}));
  return {};
}

}  // namespace

Admission admitRecord(const Record& r, std::vector<Measurement> group, const PutOptions& opts) {
  const bool ok = r.status == RecordStatus::Ok;
  Admission a;
  a.remeasured = r.remeasured;
  if (a.remeasured && !opts.trusted)
    a.remeasured = std::any_of(group.begin(), group.end(), [&](const Measurement& m) { return m.writer == opts.writer; });
  a.trust = opts.trusted && ok ? Trust::Vouched : Trust::Claim;
  if (ok) {
    group.push_back({kNewRecord, opts.writer, r.median_us, a.trust, !opts.measured_for.empty()});
    for (const auto& [id, t] : settleTrust(group, opts.agree_factor)) {
      if (id == kNewRecord) a.trust = t;
      else a.others.emplace_back(id, t);
    }
  }
  return a;
}

Expected<PutResult> putRecord(SqlTx& tx, const Record& r, const PutOptions& opts, TouchedKeys& touched) {
  if (r.key_id.empty() || r.key_id != keyIdOf(r.key))
    return makeError(ErrorCode::InvalidArgument, "record not finalized (key_id missing or wrong)");
  const WriteSql& w = WriteSql::of(tx.dialect());
  PutResult res;
  res.key_id = r.key_id;
  // The fingerprint is of the record as submitted, so a retried submission is a duplicate even
  // when the store did not accept its re-measured claim.
  const std::string fp = fingerprint(r);
  const bool ok = r.status == RecordStatus::Ok;

  // 0. Who else measured this config of this key, and how fast (trust.h): the group the record
  // joins. A re-measurement claim from an untrusted writer stands only on its own earlier
  // measurement of the config.
  std::vector<Measurement> group;
  if (ok) {
    TESSERA_ASSIGN(auto rows, tx.query(w.trust_group, {r.key_id, r.config, int64_t{kTrustGroupLimit}}));
    for (const SqlRow& row : rows)
      group.push_back({row.i64(0), row.text(1), row.f64(2), static_cast<Trust>(row.i64(3)), row.i64(4) != 0});
  }
  Admission admitted = admitRecord(r, std::move(group), opts);
  const bool remeasured = admitted.remeasured;
  const Trust mine = admitted.trust;
  const auto& others = admitted.others;

  // 1. The record itself; an identical one already stored makes this a duplicate.
  {
    const Provenance& p = r.provenance;
    std::vector<SqlValue> params = {
        r.key_id, fp, std::string(recordStatusName(r.status)), r.config, r.n, r.median_us, r.p20_us, r.p80_us,
        r.gflops, r.gbps, r.peak_fraction, r.max_abs_err, r.max_rel_err, r.trials, r.tuning_seconds,
        p.tessera_version, p.llvm_version, p.cuda_version, p.cpu_model, p.host, p.user, p.created_at,
        flag(!opts.outbox), flag(remeasured), r.estimator, r.bound, opts.writer, trustValue(mine),
        p.driver_version, p.runtime_version, opts.measured_for};
    if (!tx.dialect().now_utc_sql) params.emplace_back(utcNow());
    TESSERA_ASSIGN(auto rows, tx.query(w.insert_record, params));
    if (!rows.empty()) res.id = rows[0].i64(0);
  }
  if (res.id == 0) {
    TESSERA_ASSIGN(auto dup, tx.query("SELECT id, trust FROM records WHERE fingerprint = ?1", {fp}));
    if (dup.empty()) return makeError(ErrorCode::Internal, "duplicate record vanished");
    res.id = dup[0].i64(0);
    res.trust = static_cast<Trust>(dup[0].i64(1));
    res.duplicate = true;
    return res;
  }
  res.remeasured = remeasured;
  res.trust = mine;
  for (const auto& [id, t] : others) TESSERA_TRY(setTrust(tx, id, t));

  // 2. Best-wins. When the record changed the trust of others, the key's winner is recomputed;
  // otherwise one upsert creates the key row or moves its winner, and only ever to a strictly
  // better record (winner_rank, then the lower median). RETURNING yields a row only when this
  // record became the winner. (Quarantined records never hold the winner: the admin action that
  // quarantines recomputes it.)
  const std::optional<int> rank = ok ? winnerRank(mine, remeasured) : std::nullopt;
  if (!others.empty()) {
    TESSERA_TRY(ensureKey(tx, r));
    TESSERA_ASSIGN(auto was, tx.query("SELECT coalesce(winner_id, 0), winner_changes FROM keys WHERE key_id = ?1",
                                      {r.key_id}));
    const int64_t before = was.empty() ? 0 : was[0].i64(0), changes = was.empty() ? 0 : was[0].i64(1);
    TESSERA_ASSIGN(int64_t after, recomputeWinner(tx, r.key_id));
    if (after != before) touched.insert(r.key_id);
    if (after == res.id) res.outcome = before == 0 && changes == 0 ? PutOutcome::Inserted : PutOutcome::Improved;
  } else if (rank) {
    static const std::string q =
        "INSERT INTO keys(" + kKeyColumns +
        ", winner_id, winner_median_us, winner_remeasured, winner_rank, winner_changes)"
        " VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,1)"
        " ON CONFLICT(key_id) DO UPDATE SET winner_id = excluded.winner_id,"
        " winner_median_us = excluded.winner_median_us, winner_remeasured = excluded.winner_remeasured,"
        " winner_rank = excluded.winner_rank, winner_changes = keys.winner_changes + 1"
        " WHERE keys.winner_id IS NULL OR excluded.winner_rank > keys.winner_rank"
        " OR (excluded.winner_rank = keys.winner_rank AND excluded.winner_median_us < keys.winner_median_us)"
        " RETURNING winner_changes";
    std::vector<SqlValue> params = keyParams(r);
    params.insert(params.end(), {res.id, r.median_us, flag(remeasured), int64_t{*rank}});
    TESSERA_ASSIGN(auto up, tx.query(q, params));
    if (!up.empty()) {
      res.outcome = up[0].i64(0) == 1 ? PutOutcome::Inserted : PutOutcome::Improved;
      touched.insert(r.key_id);
    }
  } else {
    TESSERA_TRY(ensureKey(tx, r));
  }
  // Staleness is computed per record when read: nothing another record of the key says can mark
  // this one stale.
  return res;
}

Expected<std::vector<PutResult>> putRecords(SqlTxRunner& engine, std::span<const Record> records,
                                            const PutOptions& opts) {
  std::vector<PutResult> results;
  if (records.empty()) return results;
  Status s = engine.transact(TxMode::WriteRecords, [&](SqlTx& tx, TouchedKeys& touched) -> Status {
    results.clear();
    results.reserve(records.size());
    for (const Record& r : records) {
      TESSERA_ASSIGN(PutResult pr, putRecord(tx, r, opts, touched));
      results.push_back(std::move(pr));
    }
    return {};
  });
  if (!s.ok()) return s.takeError();
  return results;
}

Expected<int64_t> administerRecords(SqlTxRunner& engine, const RecordSelector& sel, AdminAction action,
                                    double agree_factor) {
  if (sel.empty()) return int64_t{0};
  int64_t n = 0;
  Status s;
  if (action == AdminAction::Count) {
    s = engine.transact(TxMode::Read, [&](SqlTx& tx, TouchedKeys&) -> Status {
      std::vector<SqlValue> params;
      const std::string where = selectorWhere(sel, action, params);
      TESSERA_ASSIGN(auto rows, tx.query("SELECT count(*) FROM records r WHERE " + where, params, true));
      n = rows.empty() ? 0 : rows[0].i64(0);
      return {};
    });
  } else {
    s = engine.transact(TxMode::WriteRecords, [&](SqlTx& tx, TouchedKeys& touched) -> Status {
      TESSERA_ASSIGN(n, administer(tx, sel, action, agree_factor, touched));
      return {};
    });
  }
  if (!s.ok()) return s.takeError();
  return n;
}

Expected<int64_t> recomputeWinner(SqlTx& tx, const std::string& key_id) {
  static const std::string pick_sql = std::string("SELECT r.id, r.median_us, r.remeasured, ") + kRankSql +
                                      " FROM records r WHERE r.key_id = ?1 AND " + kCandidateSql + " ORDER BY " +
                                      kWinnerOrderSql + " LIMIT 1";
  TESSERA_ASSIGN(auto pick, tx.query(pick_sql, {key_id}));
  if (!pick.empty()) {
    const int64_t id = pick[0].i64(0);
    // A winner that stays counts as one change at least (the key has had a winner); a new one adds one.
    TESSERA_TRY(tx.run("UPDATE keys SET winner_changes = CASE WHEN winner_id = ?1 THEN"
                       " (CASE WHEN winner_changes < 1 THEN 1 ELSE winner_changes END) ELSE winner_changes + 1 END,"
                       " winner_id = ?1, winner_median_us = ?2, winner_remeasured = ?3, winner_rank = ?4"
                       " WHERE key_id = ?5",
                       {id, pick[0].f64(1), pick[0].i64(2), pick[0].i64(3), key_id}));
    return id;
  }
  // No winner left: the next ok record is the key's first winner again ("inserted").
  TESSERA_TRY(tx.run("UPDATE keys SET winner_id = NULL, winner_median_us = NULL, winner_remeasured = 0,"
                     " winner_rank = 0, winner_changes = 0 WHERE key_id = ?1",
                     {key_id}));
  TESSERA_TRY(tx.run("DELETE FROM keys WHERE key_id = ?1 AND NOT EXISTS (SELECT 1 FROM records WHERE key_id = ?1)",
                     {key_id}));
  return int64_t{0};
}

Status resettleKey(SqlTx& tx, const std::string& key_id, double agree_factor) {
  TESSERA_ASSIGN(auto rows, tx.query(std::string("SELECT id, config, writer, median_us, trust, ") + kByWorkerSql +
                                         " FROM records WHERE key_id = ?1"
                                         " AND status = 'ok' AND quarantined = 0 ORDER BY id DESC LIMIT ?2",
                                     {key_id, int64_t{kTrustKeyLimit}}));
  std::vector<ConfigMeasurement> records;
  records.reserve(rows.size());
  for (const SqlRow& row : rows)
    records.push_back({row.text(1), {row.i64(0), row.text(2), row.f64(3), static_cast<Trust>(row.i64(4)), row.i64(5) != 0}});
  for (const auto& [id, t] : settleKey(records, agree_factor)) TESSERA_TRY(setTrust(tx, id, t));
  return {};
}

std::string selectorWhere(const RecordSelector& sel, AdminAction action, std::vector<SqlValue>& params) {
  std::string w = "TRUE";
  if (!sel.ids.empty()) {
    // Integers formatted here, never text from the request.
    w += " AND r.id IN (";
    for (size_t i = 0; i < sel.ids.size(); ++i) w += (i ? "," : "") + std::to_string(sel.ids[i]);
    w += ")";
  }
  const std::pair<const char*, const std::string*> fields[] = {
      {" AND r.key_id = ?", &sel.key_id}, {" AND r.writer = ?", &sel.writer},
      {" AND r.received_at >= ?", &sel.since}, {" AND r.received_at < ?", &sel.until},
      {" AND r.writer <> ?", &sel.except_writer}};
  for (auto [clause, v] : fields) {
    if (v->empty()) continue;
    params.emplace_back(*v);
    w += clause + std::to_string(params.size());
  }
  return w + adminActionWhere(action);
}

Expected<int64_t> administer(SqlTx& tx, const RecordSelector& sel, AdminAction action, double agree_factor,
                             TouchedKeys& touched) {
  if (sel.empty() || action == AdminAction::Count)
    return makeError(ErrorCode::Internal, "administer: an empty selector or a count changes nothing");
  std::vector<SqlValue> params;
  const std::string where = selectorWhere(sel, action, params);
  TESSERA_ASSIGN(auto keys, tx.query("SELECT DISTINCT r.key_id FROM records r WHERE " + where, params, true));
  TESSERA_ASSIGN(int64_t changed, tx.run(adminActionSql(action) + where, params, true));
  for (const SqlRow& key : keys) {
    const std::string key_id = key.text(0);
    TESSERA_TRY(resettleKey(tx, key_id, agree_factor));
    TESSERA_TRY(recomputeWinner(tx, key_id));
    touched.insert(key_id);
  }
  return changed;
}

std::string trustMigrationSql(const SqlDialect& d) {
  const bool pg = d.engine == SqlDialect::Engine::Postgres;
  const std::string real = pg ? "DOUBLE PRECISION" : "REAL";
  return std::string(R"sql(
ALTER TABLE records ADD COLUMN trust INTEGER NOT NULL DEFAULT 0;
UPDATE records SET trust = 2 WHERE writer = '';
CREATE INDEX records_by_key_config ON records(key_id, )sql") +
         (pg ? "md5(config)" : "config") + R"sql();
ALTER TABLE keys ADD COLUMN winner_rank INTEGER NOT NULL DEFAULT 0;
UPDATE keys SET winner_id = (SELECT r.id FROM records r WHERE r.key_id = keys.key_id AND r.status = 'ok'
  AND r.quarantined = 0 AND r.trust >= 0
  ORDER BY ((CASE WHEN r.trust > 0 THEN 2 ELSE 0 END) + r.remeasured) DESC, r.median_us ASC, r.id ASC LIMIT 1);
UPDATE keys SET winner_median_us = (SELECT median_us FROM records WHERE id = keys.winner_id),
  winner_rank = coalesce((SELECT (CASE WHEN trust > 0 THEN 2 ELSE 0 END) + remeasured FROM records
                          WHERE id = keys.winner_id), 0);
ALTER TABLE workers ADD COLUMN quarantined TEXT NOT NULL DEFAULT '';
ALTER TABLE job_items ADD COLUMN leased_at )sql" +
         real + R"sql( NOT NULL DEFAULT 0;
ALTER TABLE job_items ADD COLUMN lost_tokens TEXT NOT NULL DEFAULT '';
ALTER TABLE job_items ADD COLUMN refused_by TEXT NOT NULL DEFAULT '';
)sql";
}

std::string queueV7MigrationSql(const SqlDialect& d) {
  const bool pg = d.engine == SqlDialect::Engine::Postgres;
  return std::string("ALTER TABLE workers ADD COLUMN stopped_at ") + (pg ? "DOUBLE PRECISION" : "REAL") +
         " NOT NULL DEFAULT 0;\n"
         "ALTER TABLE jobs ADD COLUMN changes " + (pg ? "BIGINT" : "INTEGER") + " NOT NULL DEFAULT 0;\n"
         "ALTER TABLE job_items ADD COLUMN changed " + (pg ? "BIGINT" : "INTEGER") + " NOT NULL DEFAULT 0;\n"
         "ALTER TABLE workers ADD COLUMN runtime_version TEXT NOT NULL DEFAULT '';\n"
         "ALTER TABLE records ADD COLUMN driver_version TEXT NOT NULL DEFAULT '';\n"
         "ALTER TABLE records ADD COLUMN runtime_version TEXT NOT NULL DEFAULT '';\n";
}

namespace {
void replaceAll(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
}
}  // namespace

std::string queueTablesSql(const SqlDialect& d) {
  static const std::string sqlite = R"sql(CREATE TABLE workers(
  id TEXT PRIMARY KEY, token TEXT NOT NULL,
  target TEXT NOT NULL, arch TEXT NOT NULL, units INTEGER NOT NULL, model TEXT NOT NULL,
  device TEXT NOT NULL, host TEXT NOT NULL, tessera_version TEXT NOT NULL, llvm_version TEXT NOT NULL,
  toolkit_version TEXT NOT NULL, driver_version TEXT NOT NULL, slots INTEGER NOT NULL,
  registered_at REAL NOT NULL, last_seen REAL NOT NULL
) WITHOUT ROWID;
CREATE INDEX workers_by_hardware ON workers(target, arch, units, last_seen);

CREATE TABLE jobs(
  seq INTEGER PRIMARY KEY AUTOINCREMENT,     -- submission order: older jobs are leased first
  id TEXT NOT NULL UNIQUE, submitter TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('measure','remeasure')),
  key_id TEXT NOT NULL, key_json TEXT NOT NULL,
  target TEXT NOT NULL, arch TEXT NOT NULL, units INTEGER NOT NULL, model TEXT NOT NULL,
  kernel TEXT NOT NULL, settings TEXT NOT NULL,
  rounds INTEGER NOT NULL, first_trial INTEGER NOT NULL, elapsed_s REAL NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('open','done','cancelled')),
  items INTEGER NOT NULL, done_items INTEGER NOT NULL DEFAULT 0,
  created_at REAL NOT NULL, finished_at REAL NOT NULL DEFAULT 0
);
CREATE INDEX jobs_open ON jobs(state, target, arch, units, seq);

CREATE TABLE job_items(
  job_id TEXT NOT NULL, item INTEGER NOT NULL,
  payload TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('queued','leased','done')),
  worker_id TEXT NOT NULL DEFAULT '', lease_expires REAL NOT NULL DEFAULT 0,
  attempts INTEGER NOT NULL DEFAULT 0, lost_workers TEXT NOT NULL DEFAULT '',
  result TEXT NOT NULL DEFAULT '', record_id INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY(job_id, item)
) WITHOUT ROWID;
CREATE INDEX job_items_by_worker ON job_items(worker_id, state);
)sql";
  if (d.engine == SqlDialect::Engine::Sqlite) return sqlite;
  std::string pg = sqlite;
  replaceAll(pg, "seq INTEGER PRIMARY KEY AUTOINCREMENT,     -- submission order: older jobs are leased first",
             "seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,");
  replaceAll(pg, " INTEGER ", " BIGINT ");
  replaceAll(pg, " REAL ", " DOUBLE PRECISION ");
  replaceAll(pg, ") WITHOUT ROWID;", ");");
  return pg;
}

std::string kernelTextsSql() { return "\nCREATE TABLE kernel_texts (workload TEXT PRIMARY KEY, ir TEXT NOT NULL);\n"; }

std::string measuredForMigrationSql() {
  return "ALTER TABLE records ADD COLUMN measured_for TEXT NOT NULL DEFAULT '';\n";
}

std::string probeSignatureMigrationSql() {
  return "ALTER TABLE workers ADD COLUMN probe_signature TEXT NOT NULL DEFAULT '';\n"
         "ALTER TABLE job_items ADD COLUMN stolen_by TEXT NOT NULL DEFAULT '';\n";
}

std::string remeasuredClaimsMigrationSql() {
  return std::string("\nUPDATE keys SET winner_id = (SELECT r.id FROM records r WHERE r.key_id = keys.key_id AND ") +
         kCandidateSql + " ORDER BY " + kWinnerOrderSql +
         " LIMIT 1) WHERE winner_rank = 1;\n"
         "UPDATE keys SET winner_median_us = (SELECT median_us FROM records WHERE id = keys.winner_id),"
         " winner_remeasured = coalesce((SELECT remeasured FROM records WHERE id = keys.winner_id), 0),"
         " winner_rank = coalesce((SELECT " + kRankSql + " FROM records r WHERE r.id = keys.winner_id), 0)"
         " WHERE winner_rank = 1;\n";
}

}  // namespace core
}  // namespace tessera::cache
