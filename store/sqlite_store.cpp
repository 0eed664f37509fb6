// Owns the read side of the SQLite RecordStore: opening (schema, index load; a file, or a private
// database in memory for makeMemoryStore), pooled reader connections, lookups, listing, nearest
// shapes, export, stats and online backup.
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "store/location.h"
#include "store/schema.h"
#include "store/sqlite_store_impl.h"

namespace tessera::cache {

namespace {
int64_t fileSize(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
}
constexpr size_t kMaxIdleReaders = 256;
}  // namespace

Expected<Record> rowToRecord(const sql::Stmt& st) {
  Record r;
  r.id = st.i64(0);
  r.key_id = st.text(1);
  r.key.family = st.text(2);
  r.key.workload = st.text(3);
  auto shape = parseShape(st.text(4));
  auto status = parseRecordStatus(st.text(18));
  if (!shape.ok() || !status)
    return makeError(ErrorCode::IOError, "corrupt row in records (id " + std::to_string(r.id) + ")");
  r.key.shape = std::move(*shape);
  r.key.dtype = st.text(5);
  r.key.layout = st.text(6);
  r.key.target = st.text(7);
  r.key.arch = st.text(8);
  r.key.units = st.i64(9);
  Provenance& p = r.provenance;
  p.tessera_version = st.text(10);
  p.llvm_version = st.text(11);
  p.cuda_version = st.text(12);
  p.cpu_model = st.text(13);
  p.host = st.text(14);
  p.user = st.text(15);
  p.created_at = st.text(16);
  r.config = st.text(17);
  r.status = *status;
  r.n = st.i64(19);
  r.median_us = st.f64(20);
  r.p20_us = st.f64(21);
  r.p80_us = st.f64(22);
  r.gflops = st.f64(23);
  r.gbps = st.f64(24);
  r.peak_fraction = st.f64(25);
  r.max_abs_err = st.f64(26);
  r.max_rel_err = st.f64(27);
  r.trials = st.i64(28);
  r.tuning_seconds = st.f64(29);
  r.remeasured = st.i64(31) != 0;
  r.estimator = st.text(32);
  r.bound = st.text(33);
  r.writer = st.text(34);
  r.received_at = st.text(35);
  r.quarantined = st.i64(36) != 0;
  r.trust = static_cast<Trust>(std::clamp<int64_t>(st.i64(37), -1, 2));
  p.driver_version = st.text(38);
  p.runtime_version = st.text(39);
  return r;
}

Expected<Record> SqliteStore::readRow(const sql::Stmt& st) const {
  TESSERA_ASSIGN(Record r, rowToRecord(st));
  r.stale = staleAgainst(r.provenance, opts_.current);
  return r;
}

Expected<std::unique_ptr<SqliteStore>> SqliteStore::open(const std::string& path,
                                                         const SqliteStoreOptions& opts) {
  std::unique_ptr<SqliteStore> s(new SqliteStore(path, opts));
  TESSERA_ASSIGN(s->writer_, sql::Db::open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE));
  TESSERA_TRY(openSchema(*s->writer_, opts.synchronous_full));
  TESSERA_ASSIGN(s->data_version_, s->writer_->scalar("PRAGMA data_version"));
  if (opts.index_winners) TESSERA_TRY(s->loadIndex(*s->writer_));
  return s;
}

Expected<std::unique_ptr<SqliteStore>> SqliteStore::openInMemory(const Provenance& current) {
  SqliteStoreOptions opts;
  opts.synchronous_full = false;  // nothing to fsync
  opts.current = current;
  std::unique_ptr<SqliteStore> s(new SqliteStore(":memory:", opts, /*in_memory=*/true));
  TESSERA_ASSIGN(s->writer_, sql::Db::open(":memory:", SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE));
  TESSERA_TRY(openSchema(*s->writer_, opts.synchronous_full, /*in_memory=*/true));
  TESSERA_ASSIGN(s->data_version_, s->writer_->scalar("PRAGMA data_version"));
  return s;
}

SqliteStore::Reader::~Reader() {
  if (!owned_) return;  // the in-memory store's one connection (or moved from)
  std::lock_guard<std::mutex> g(s_->readers_mu_);
  if (s_->idle_readers_.size() < kMaxIdleReaders) s_->idle_readers_.push_back(std::move(owned_));
}

Expected<SqliteStore::Reader> SqliteStore::reader() {
  if (in_memory_) return Reader(this, *writer_, std::unique_lock<std::mutex>(conn_mu_));
  {
    std::lock_guard<std::mutex> g(readers_mu_);
    if (!idle_readers_.empty()) {
      auto db = std::move(idle_readers_.back());
      idle_readers_.pop_back();
      return Reader(this, std::move(db));
    }
  }
  // One connection per concurrently reading thread: WAL lets them all read while the writer
  // commits, and a connection is never shared between threads at the same time.
  TESSERA_ASSIGN(auto db, sql::Db::open(path_, SQLITE_OPEN_READWRITE));
  TESSERA_TRY(db->exec("PRAGMA query_only=1"));
  return Reader(this, std::move(db));
}

Expected<ServedRecordPtr> SqliteStore::readWinner(sql::Db& db, std::string_view key_id) {
  static const std::string q = std::string("SELECT ") + kRecordColumns +
                               " FROM keys k JOIN records r ON r.id = k.winner_id WHERE k.key_id = ?";
  TESSERA_ASSIGN(sql::Stmt * st, db.cached(q));
  sql::Use use(*st);
  st->bind(1, key_id);
  TESSERA_ASSIGN(bool row, st->step());
  if (!row) return ServedRecordPtr{};
  TESSERA_ASSIGN(Record r, readRow(*st));
  return serve(std::move(r));
}

Status SqliteStore::loadIndex(sql::Db& db) {
  static const std::string q = std::string("SELECT ") + kRecordColumns +
                               " FROM keys k JOIN records r ON r.id = k.winner_id";
  TESSERA_ASSIGN(sql::Stmt st, db.prepare(q));
  std::unordered_map<std::string, ServedRecordPtr> fresh;
  for (;;) {
    TESSERA_ASSIGN(bool row, st.step());
    if (!row) break;
    TESSERA_ASSIGN(Record r, readRow(st));
    std::string key_id = r.key_id;
    fresh.emplace(std::move(key_id), serve(std::move(r)));
  }
  std::unique_lock<std::shared_mutex> g(index_mu_);
  winners_.swap(fresh);
  return {};
}

Expected<ServedRecordPtr> SqliteStore::best(std::string_view key_id) {
  if (opts_.index_winners && index_live_.load(std::memory_order_acquire)) {
    std::shared_lock<std::shared_mutex> g(index_mu_);
    auto it = winners_.find(std::string(key_id));
    return it == winners_.end() ? ServedRecordPtr{} : it->second;
  }
  TESSERA_ASSIGN(Reader rd, reader());
  return readWinner(*rd, key_id);
}

Expected<ServedRecordPtr> SqliteStore::bestMatching(std::string_view key_id, const Provenance& want) {
  static const std::string q =
      std::string("SELECT ") + kRecordColumns +
      " FROM records r JOIN keys k ON k.key_id = r.key_id"
      " WHERE r.key_id = ?1 AND " + kCandidateSql +
      " AND (?2 = '' OR r.tessera_version = ?2) AND (?3 = '' OR r.llvm_version = ?3)"
      " AND (?4 = '' OR r.cuda_version = ?4) AND (?5 = '' OR r.cpu_model = ?5)"
      " ORDER BY " + kWinnerOrderSql + " LIMIT 1";
  TESSERA_ASSIGN(Reader rd, reader());
  TESSERA_ASSIGN(sql::Stmt * st, rd->cached(q));
  sql::Use use(*st);
  st->bind(1, key_id).bind(2, want.tessera_version).bind(3, want.llvm_version).bind(4, want.cuda_version);
  st->bind(5, want.cpu_model);
  TESSERA_ASSIGN(bool found, st->step());
  if (!found) return ServedRecordPtr{};
  TESSERA_ASSIGN(Record r, readRow(*st));
  return serve(std::move(r));
}

Expected<ListPage> SqliteStore::list(const ListQuery& q) {
  const int limit = std::clamp(q.limit, 1, kMaxListLimit);
  std::string sqltext = std::string("SELECT ") + kRecordColumns +
                        " FROM records r JOIN keys k ON k.key_id = r.key_id WHERE r.id " +
                        (q.newest_first ? "< ?" : "> ?");
  std::vector<std::string> texts;
  // Column names come from this fixed table, never from the request.
  const std::pair<const char*, const std::string*> filters[] = {
      {"r.key_id", &q.key_id}, {"k.family", &q.family}, {"k.workload", &q.workload},
      {"k.dtype", &q.dtype},   {"k.layout", &q.layout}, {"k.target", &q.target},
      {"k.arch", &q.arch},     {"r.status", &q.status}};
  for (auto [col, val] : filters) {
    if (val->empty()) continue;
    sqltext += std::string(" AND ") + col + " = ?";
    texts.push_back(*val);
  }
  if (!q.writer.empty()) {
    sqltext += " AND r.writer = ?";
    texts.push_back(q.writer);
  }
  if (!q.since.empty()) {
    sqltext += " AND r.received_at >= ?";
    texts.push_back(q.since);
  }
  if (!q.until.empty()) {
    sqltext += " AND r.received_at < ?";
    texts.push_back(q.until);
  }
  if (q.quarantine == QuarantineFilter::Exclude) sqltext += " AND r.quarantined = 0";
  if (q.quarantine == QuarantineFilter::Only) sqltext += " AND r.quarantined = 1";
  if (q.units) sqltext += " AND k.units = ?";
  if (q.winners_only) sqltext += " AND r.id = k.winner_id";
  sqltext += q.newest_first ? " ORDER BY r.id DESC LIMIT ?" : " ORDER BY r.id LIMIT ?";

  TESSERA_ASSIGN(Reader rd, reader());
  TESSERA_ASSIGN(sql::Stmt * st, rd->cached(sqltext));
  sql::Use use(*st);
  int i = 1;
  st->bind(i++, q.newest_first && q.after_id <= 0 ? INT64_MAX : q.after_id);
  for (const auto& t : texts) st->bind(i++, t);
  if (q.units) st->bind(i++, *q.units);
  st->bind(i++, limit + 1);  // one extra row tells whether another page exists
  ListPage page;
  for (;;) {
    TESSERA_ASSIGN(bool row, st->step());
    if (!row) break;
    if (static_cast<int>(page.records.size()) == limit) {
      page.next_after = page.records.back().id;
      break;
    }
    TESSERA_ASSIGN(Record r, readRow(*st));
    page.records.push_back(std::move(r));
  }
  return page;
}

Expected<std::vector<Record>> SqliteStore::readRecords(const std::string& sql, const std::function<void(sql::Stmt&)>& bind) {
  TESSERA_ASSIGN(Reader rd, reader());
  TESSERA_ASSIGN(sql::Stmt * st, rd->cached(sql));
  sql::Use use(*st);
  bind(*st);
  std::vector<Record> out;
  for (;;) {
    TESSERA_ASSIGN(bool row, st->step());
    if (!row) break;
    TESSERA_ASSIGN(Record r, readRow(*st));
    out.push_back(std::move(r));
  }
  return out;
}

Expected<std::vector<NearestMatch>> SqliteStore::nearest(const HardKey& key, int limit) {
  static const std::string q =
      std::string("SELECT ") + kRecordColumns +
      " FROM keys k JOIN records r ON r.id = k.winner_id"
      " WHERE k.family = ? AND k.dtype = ? AND k.target = ? AND k.arch = ? AND k.rank = ?";
  TESSERA_ASSIGN(auto rows, readRecords(q, [&](sql::Stmt& st) {
                   st.bind(1, key.family).bind(2, key.dtype).bind(3, key.target).bind(4, key.arch);
                   st.bind(5, static_cast<int64_t>(key.shape.size()));
                 }));
  return nearestOf(key, std::move(rows), limit);
}

Expected<std::vector<Record>> SqliteStore::exportSince(int64_t after_id, int limit) {
  static const std::string q = std::string("SELECT ") + kRecordColumns +
                               " FROM records r JOIN keys k ON k.key_id = r.key_id"
                               " WHERE r.id > ? AND r.quarantined = 0 ORDER BY r.id LIMIT ?";
  return readRecords(q, [&](sql::Stmt& st) { st.bind(1, after_id).bind(2, std::max(limit, 0)); });
}

Expected<std::vector<Record>> SqliteStore::pending(int limit) {
  static const std::string q = std::string("SELECT ") + kRecordColumns +
                               " FROM records r JOIN keys k ON k.key_id = r.key_id"
                               " WHERE r.pushed = 0 ORDER BY r.id LIMIT ?";
  return readRecords(q, [&](sql::Stmt& st) { st.bind(1, std::max(limit, 0)); });
}

Expected<StoreStats> SqliteStore::stats() {
  TESSERA_ASSIGN(Reader rd, reader());
  // One read transaction so the counts agree with each other.
  TESSERA_TRY(rd->exec("BEGIN"));
  auto body = [&]() -> Expected<StoreStats> {
    StoreStats s;
    TESSERA_ASSIGN(s.records, rd->scalar("SELECT count(*) FROM records"));
    TESSERA_ASSIGN(s.keys, rd->scalar("SELECT count(*) FROM keys"));
    TESSERA_ASSIGN(s.winners, rd->scalar("SELECT count(*) FROM keys WHERE winner_id IS NOT NULL"));
    {
      TESSERA_ASSIGN(sql::Stmt stale, rd->prepare(
          "SELECT count(*) FROM keys k JOIN records r ON r.id = k.winner_id"
          " WHERE (?1 != '' AND r.tessera_version != ?1) OR (?2 != '' AND r.llvm_version != ?2)"
          " OR (?3 != '' AND r.cuda_version != ?3)"));
      stale.bind(1, opts_.current.tessera_version).bind(2, opts_.current.llvm_version);
      stale.bind(3, opts_.current.cuda_version);
      TESSERA_ASSIGN(bool got, stale.step());
      s.stale_winners = got ? stale.i64(0) : 0;
    }
    TESSERA_ASSIGN(s.quarantined, rd->scalar("SELECT count(*) FROM records WHERE quarantined = 1"));
    TESSERA_ASSIGN(s.outbox, rd->scalar("SELECT count(*) FROM records WHERE pushed = 0"));
    TESSERA_ASSIGN(s.last_id, rd->scalar("SELECT coalesce(max(id), 0) FROM records"));
    TESSERA_ASSIGN(int64_t pages, rd->scalar("PRAGMA page_count"));
    TESSERA_ASSIGN(int64_t page_size, rd->scalar("PRAGMA page_size"));
    TESSERA_ASSIGN(int64_t version, rd->scalar("PRAGMA user_version"));
    s.schema_version = static_cast<int>(version);
    s.db_bytes = in_memory_ ? 0 : pages * page_size + fileSize(path_ + "-wal");
    return s;
  };
  auto s = body();
  (void)rd->exec("COMMIT");
  return s;
}

Status SqliteStore::backup(const std::string& dest_path) {
  if (in_memory_) return makeError(ErrorCode::Unsupported, "the in-memory store has no backup");
  struct stat st {};
  if (::stat(dest_path.c_str(), &st) == 0)
    return makeError(ErrorCode::InvalidArgument, "backup target exists: " + dest_path);
  // VACUUM INTO copies one read snapshot (writers continue) into a compact new file; writing to
  // a temporary name and renaming means a crash never leaves a half-written backup behind.
  const std::string partial = dest_path + ".partial";
  std::remove(partial.c_str());
  TESSERA_ASSIGN(auto db, sql::Db::open(path_, SQLITE_OPEN_READWRITE));
  TESSERA_ASSIGN(sql::Stmt vac, db->prepare("VACUUM INTO ?"));
  vac.bind(1, partial);
  Status s = vac.run();
  if (!s.ok()) {
    std::remove(partial.c_str());
    return s;
  }
  if (std::rename(partial.c_str(), dest_path.c_str()) != 0) {
    std::remove(partial.c_str());
    return makeError(ErrorCode::IOError, "cannot rename backup to " + dest_path);
  }
  return {};
}

Status SqliteStore::ping() {
  TESSERA_ASSIGN(Reader rd, reader());
  TESSERA_ASSIGN(int64_t v, rd->scalar("SELECT count(*) FROM sqlite_master"));
  (void)v;
  return {};
}

Expected<std::unique_ptr<RecordStore>> openSqliteStore(const std::string& path,
                                                       const SqliteStoreOptions& opts) {
  // Never a SQLite file named like a URL: a tuner's local store is a file; a PostgreSQL store is
  // a service's (`tessera serve --store URL`), which tuners reach with --cache.
  if (isPostgresLocation(path))
    return makeError(ErrorCode::InvalidArgument,
                     "a local store is a SQLite file; a PostgreSQL store is served by `tessera serve --store URL` "
                     "and reached with --cache");
  TESSERA_ASSIGN(auto s, SqliteStore::open(path, opts));
  return std::unique_ptr<RecordStore>(std::move(s));
}

std::unique_ptr<RecordStore> makeMemoryStore(const Provenance& current) {
  auto s = SqliteStore::openInMemory(current);
  // Only an allocation can fail here (no file, no other connection): nothing a caller could mend.
  if (!s.ok()) {
    std::fprintf(stderr, "tessera: fatal: cannot open the in-memory store: %s\n", s.error().message.c_str());
    std::abort();
  }
  return std::unique_ptr<RecordStore>(std::move(*s));
}

}  // namespace tessera::cache
