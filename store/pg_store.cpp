// Owns the read side of the PostgreSQL RecordStore: opening (schema), lookups, listing, nearest
// shapes, export, the outbox, stats and ping. Every read goes to the database (no replica cache).
#include <algorithm>

#include "store/pg_store_impl.h"

namespace tessera::cache::pg {

Expected<Record> PgStore::readRow(const pqxx::row& row) const {
  Record r;
  r.id = asInt(row[0]);
  r.key_id = asText(row[1]);
  r.key.family = asText(row[2]);
  r.key.workload = asText(row[3]);
  auto shape = parseShape(asText(row[4]));
  auto status = parseRecordStatus(asText(row[18]));
  if (!shape.ok() || !status)
    return makeError(ErrorCode::IOError, "corrupt row in records (id " + std::to_string(r.id) + ")");
  r.key.shape = std::move(*shape);
  r.key.dtype = asText(row[5]);
  r.key.layout = asText(row[6]);
  r.key.target = asText(row[7]);
  r.key.arch = asText(row[8]);
  r.key.units = asInt(row[9]);
  Provenance& p = r.provenance;
  p.tessera_version = asText(row[10]);
  p.llvm_version = asText(row[11]);
  p.cuda_version = asText(row[12]);
  p.cpu_model = asText(row[13]);
  p.host = asText(row[14]);
  p.user = asText(row[15]);
  p.created_at = asText(row[16]);
  r.config = asText(row[17]);
  r.status = *status;
  r.n = asInt(row[19]);
  r.median_us = asDouble(row[20]);
  r.p20_us = asDouble(row[21]);
  r.p80_us = asDouble(row[22]);
  r.gflops = asDouble(row[23]);
  r.gbps = asDouble(row[24]);
  r.peak_fraction = asDouble(row[25]);
  r.max_abs_err = asDouble(row[26]);
  r.max_rel_err = asDouble(row[27]);
  r.trials = asInt(row[28]);
  r.tuning_seconds = asDouble(row[29]);
  r.remeasured = asInt(row[30]) != 0;
  r.estimator = asText(row[31]);
  r.bound = asText(row[32]);
  r.writer = asText(row[33]);
  r.received_at = asText(row[34]);
  r.quarantined = asInt(row[35]) != 0;
  r.trust = static_cast<Trust>(std::clamp<int64_t>(asInt(row[36]), -1, 2));
  p.driver_version = asText(row[37]);
  p.runtime_version = asText(row[38]);
  r.stale = staleAgainst(r.provenance, opts_.current);
  return r;
}

Expected<std::unique_ptr<PgStore>> PgStore::open(const std::string& url, const EngineOptions& o) {
  std::unique_ptr<PgStore> s(new PgStore(url, o));
  auto conn = s->pool_.acquire();
  if (!conn.ok()) return makeError(conn.error().code, conn.error().message + " (" + redactUrl(url) + ")");
  Status st = openSchema(**conn);
  s->pool_.release(std::move(*conn), !st.ok());
  TESSERA_TRY(st);
  return s;
}

Expected<std::vector<Record>> PgStore::readRecords(const std::string& sql, const std::vector<std::string>& params) {
  std::vector<Record> out;
  Status s = runTx(pool_, TxKind::Single, [&](Conn& c, pqxx::transaction_base& t) -> Status {
    out.clear();
    pqxx::result res = exec(c, t, sql, pqxx::prepare::make_dynamic_params(params));
    for (const auto& row : res) {
      TESSERA_ASSIGN(Record r, readRow(row));
      out.push_back(std::move(r));
    }
    return {};
  });
  if (!s.ok()) return s.takeError();
  return out;
}

Expected<ServedRecordPtr> PgStore::best(std::string_view key_id) {
  static const std::string q = std::string("SELECT ") + kRecordColumns +
                               " FROM keys k JOIN records r ON r.id = k.winner_id WHERE k.key_id = $1";
  TESSERA_ASSIGN(auto rows, readRecords(q, {std::string(key_id)}));
  if (rows.empty()) return ServedRecordPtr{};
  return serve(std::move(rows.front()));
}

Expected<ServedRecordPtr> PgStore::bestMatching(std::string_view key_id, const Provenance& want) {
  static const std::string q =
      std::string("SELECT ") + kRecordColumns +
      " FROM records r JOIN keys k ON k.key_id = r.key_id"
      " WHERE r.key_id = $1 AND " + kCandidateSql +
      " AND ($2 = '' OR r.tessera_version = $2) AND ($3 = '' OR r.llvm_version = $3)"
      " AND ($4 = '' OR r.cuda_version = $4) AND ($5 = '' OR r.cpu_model = $5)"
      " ORDER BY " + kWinnerOrderSql + " LIMIT 1";
  TESSERA_ASSIGN(auto rows, readRecords(q, {std::string(key_id), want.tessera_version, want.llvm_version,
                                            want.cuda_version, want.cpu_model}));
  if (rows.empty()) return ServedRecordPtr{};
  return serve(std::move(rows.front()));
}

Expected<ListPage> PgStore::list(const ListQuery& q) {
  const int limit = std::clamp(q.limit, 1, kMaxListLimit);
  std::vector<std::string> params{std::to_string(q.newest_first && q.after_id <= 0 ? INT64_MAX : q.after_id)};
  auto param = [&](std::string v) {
    params.push_back(std::move(v));
    return "$" + std::to_string(params.size());
  };
  std::string sql = std::string("SELECT ") + kRecordColumns +
                    " FROM records r JOIN keys k ON k.key_id = r.key_id WHERE r.id " +
                    (q.newest_first ? "< $1::bigint" : "> $1::bigint");
  // Column names come from this fixed table, never from the request.
  const std::pair<const char*, const std::string*> filters[] = {
      {"r.key_id", &q.key_id}, {"k.family", &q.family}, {"k.workload", &q.workload},
      {"k.dtype", &q.dtype},   {"k.layout", &q.layout}, {"k.target", &q.target},
      {"k.arch", &q.arch},     {"r.status", &q.status}, {"r.writer", &q.writer}};
  for (auto [col, val] : filters)
    if (!val->empty()) sql += std::string(" AND ") + col + " = " + param(*val);
  if (!q.since.empty()) sql += " AND r.received_at >= " + param(q.since);
  if (!q.until.empty()) sql += " AND r.received_at < " + param(q.until);
  if (q.quarantine == QuarantineFilter::Exclude) sql += " AND r.quarantined = 0";
  if (q.quarantine == QuarantineFilter::Only) sql += " AND r.quarantined = 1";
  if (q.units) sql += " AND k.units = " + param(std::to_string(*q.units)) + "::bigint";
  if (q.winners_only) sql += " AND r.id = k.winner_id";
  sql += std::string(q.newest_first ? " ORDER BY r.id DESC" : " ORDER BY r.id") + " LIMIT " +
         param(std::to_string(limit + 1)) + "::bigint";
  TESSERA_ASSIGN(auto rows, readRecords(sql, params));
  ListPage page;
  if (static_cast<int>(rows.size()) > limit) {
    rows.resize(static_cast<size_t>(limit));
    page.next_after = rows.back().id;
  }
  page.records = std::move(rows);
  return page;
}

Expected<std::vector<NearestMatch>> PgStore::nearest(const HardKey& key, int limit) {
  static const std::string q =
      std::string("SELECT ") + kRecordColumns +
      " FROM keys k JOIN records r ON r.id = k.winner_id"
      " WHERE k.family = $1 AND k.dtype = $2 AND k.target = $3 AND k.arch = $4 AND k.rank = $5::integer";
  TESSERA_ASSIGN(auto rows, readRecords(q, {key.family, key.dtype, key.target, key.arch,
                                            std::to_string(key.shape.size())}));
  return nearestOf(key, std::move(rows), limit);
}

Expected<std::vector<Record>> PgStore::exportSince(int64_t after_id, int limit) {
  static const std::string q = std::string("SELECT ") + kRecordColumns +
                               " FROM records r JOIN keys k ON k.key_id = r.key_id"
                               " WHERE r.id > $1::bigint AND r.quarantined = 0 ORDER BY r.id LIMIT $2::bigint";
  return readRecords(q, {std::to_string(after_id), std::to_string(std::max(limit, 0))});
}

Expected<std::vector<Record>> PgStore::pending(int limit) {
  static const std::string q = std::string("SELECT ") + kRecordColumns +
                               " FROM records r JOIN keys k ON k.key_id = r.key_id"
                               " WHERE r.pushed = 0 ORDER BY r.id LIMIT $1::bigint";
  return readRecords(q, {std::to_string(std::max(limit, 0))});
}

Expected<StoreStats> PgStore::stats() {
  StoreStats s;
  Status st = runTx(pool_, TxKind::ReadOnly, [&](Conn& c, pqxx::transaction_base& t) -> Status {
    // One snapshot, so the counts agree with each other.
    auto row = exec(c, t,
                    "SELECT (SELECT count(*) FROM records), (SELECT count(*) FROM keys),"
                    " (SELECT count(*) FROM keys WHERE winner_id IS NOT NULL),"
                    " (SELECT count(*) FROM keys k JOIN records r ON r.id = k.winner_id"
                    "   WHERE ($1 != '' AND r.tessera_version != $1) OR ($2 != '' AND r.llvm_version != $2)"
                    "   OR ($3 != '' AND r.cuda_version != $3)),"
                    " (SELECT count(*) FROM records WHERE quarantined = 1),"
                    " (SELECT count(*) FROM records WHERE pushed = 0),"
                    " (SELECT coalesce(max(id), 0) FROM records),"
                    " (SELECT value FROM tessera_meta WHERE name = 'schema_version'),"
                    // Tables with their indexes and TOAST: what the records cost on disk.
                    " (SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
                    "   JOIN pg_namespace n ON n.oid = c.relnamespace"
                    "   WHERE n.nspname = current_schema() AND c.relkind = 'r'"
                    "   AND c.relname IN ('tessera_meta','keys','records','tokens','workers','jobs','job_items'))",
                    opts_.current.tessera_version, opts_.current.llvm_version, opts_.current.cuda_version)[0];
    s.records = asInt(row[0]);
    s.keys = asInt(row[1]);
    s.winners = asInt(row[2]);
    s.stale_winners = asInt(row[3]);
    s.quarantined = asInt(row[4]);
    s.outbox = asInt(row[5]);
    s.last_id = asInt(row[6]);
    s.schema_version = static_cast<int>(asInt(row[7]));
    s.db_bytes = asInt(row[8]);
    return {};
  });
  if (!st.ok()) return st.takeError();
  return s;
}

Status PgStore::backup(const std::string&) {
  return makeError(ErrorCode::Unsupported,
                   "a PostgreSQL store is backed up by PostgreSQL's own tools (pg_dump, or pg_basebackup with WAL "
                   "archiving; docs/team.md), not by the service");
}

Status PgStore::ping() {
  return runTx(pool_, TxKind::Single, [&](Conn& c, pqxx::transaction_base& t) -> Status {
    exec(c, t, "SELECT 1 FROM tessera_meta LIMIT 1");
    return {};
  });
}

}  // namespace tessera::cache::pg
