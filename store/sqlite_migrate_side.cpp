// Owns the SQLite side of a store migration (migrate_side.h): a source file read in one snapshot
// on a query-only connection (never written, never upgraded), or a destination file created or
// brought up to this tessera's schema and written in BEGIN IMMEDIATE transactions.
#include <sys/stat.h>

#include <climits>
#include <cstdlib>

#include "store/migrate_side.h"
#include "store/schema.h"
#include "store/sqlite_store_impl.h"

namespace tessera::cache::migrate {

namespace {

// The file's real path (the same file named two ways is one identity), or the path as given.
std::string realPath(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf)) return buf;
  return path;
}

class SqliteScan final : public Scan {
 public:
  // first: the first page's statement (limit ?1); rest: a page after a key (?1.. the key, then the limit).
  SqliteScan(SqlTx& tx, std::string first, std::string rest, std::vector<size_t> key_at, std::vector<SqlValue> after)
      : tx_(tx), first_(std::move(first)), rest_(std::move(rest)), key_at_(std::move(key_at)), after_(std::move(after)) {}

  // Keyset pages: each page starts after the last key of the one before (the key's index serves
  // it; an OFFSET would re-read every row before the page).
  Expected<std::vector<SqlRow>> next(int n) override {
    std::vector<SqlValue> params = after_;
    params.emplace_back(int64_t{n});
    TESSERA_ASSIGN(auto rows, tx_.query(after_.empty() ? first_ : rest_, params));
    if (!rows.empty()) {
      after_.clear();
      for (size_t at : key_at_) after_.push_back(rows.back().cols.at(at));
    }
    return rows;
  }

 private:
  SqlTx& tx_;
  std::string first_, rest_;
  std::vector<size_t> key_at_;
  std::vector<SqlValue> after_;
};

class SqliteSide final : public Side {
 public:
  SqliteSide(std::string path, Role role, std::unique_ptr<sql::Db> db)
      : path_(std::move(path)), role_(role), db_(std::move(db)), identity_("sqlite:" + realPath(path_)) {}

  SqlDialect::Engine engine() const override { return SqlDialect::Engine::Sqlite; }
  const std::string& identity() const override { return identity_; }
  const std::string& shown() const override { return path_; }

  Status prepareDestination() override {
    // synchronous=NORMAL: a killed migration loses nothing (WAL), and each batch commits without
    // an fsync; makeDurable() syncs before the migration is marked done.
    TESSERA_TRY(openSchema(*db_, /*synchronous_full=*/false));
    // Room for the indexes' pages while millions of rows go in (64 MiB; the default is 2 MiB), and
    // checkpoints (each syncs the file) every 64 MiB of log instead of every 4 MiB.
    TESSERA_TRY(db_->exec("PRAGMA cache_size=-65536"));
    TESSERA_TRY(db_->exec("PRAGMA wal_autocheckpoint=16384"));
    identity_ = "sqlite:" + realPath(path_);
    return {};
  }

  Status read(const std::function<Status(SqlTx&)>& fn) override { return inTx("BEGIN", fn); }
  Status write(const std::function<Status(SqlTx&)>& fn) override {
    if (role_ != Role::Destination) return makeError(ErrorCode::Internal, "a migration never writes its source");
    return inTx("BEGIN IMMEDIATE", fn);
  }

  Expected<std::map<std::string, std::vector<std::string>>> layout(SqlTx& tx) override {
    // SQLite's own tables (sqlite_sequence, the sqlite_stat* of an ANALYZE) are the engine's, not
    // the schema's: the identity counters are carried by highWater().
    TESSERA_ASSIGN(auto rows, tx.query("SELECT m.name, p.name FROM sqlite_master m, pragma_table_info(m.name) p "
                                       "WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite\\_%' ESCAPE '\\' "
                                       "ORDER BY m.name, p.cid",
                                       {}));
    std::map<std::string, std::vector<std::string>> out;
    for (const SqlRow& r : rows) out[r.text(0)].push_back(r.text(1));
    return out;
  }

  Expected<std::unique_ptr<Scan>> scan(SqlTx& tx, const Table& t, const std::vector<std::string>& columns,
                                       const std::vector<SqlValue>& after) override {
    std::string list;
    for (const std::string& c : columns) list += (list.empty() ? "" : ", ") + c;
    std::vector<size_t> key_at;
    for (const std::string& k : t.key)
      for (size_t i = 0; i < columns.size(); ++i)
        if (columns[i] == t.column(k).sqlite) key_at.push_back(i);
    if (key_at.size() != t.key.size())
      return makeError(ErrorCode::Internal, "migrate: a scan of " + t.name + " must select its key");
    const std::string order = " ORDER BY " + keyOrder(t, engine());
    std::vector<std::string> marks;
    for (size_t i = 0; i < t.key.size(); ++i) marks.push_back("?" + std::to_string(i + 1));
    const std::string limit = " LIMIT ?" + std::to_string(t.key.size() + 1);
    return std::unique_ptr<Scan>(std::make_unique<SqliteScan>(
        tx, "SELECT " + list + " FROM " + t.name + order + " LIMIT ?1",
        "SELECT " + list + " FROM " + t.name + " WHERE " + keyAfter(t, engine(), marks) + order + limit, key_at, after));
  }

  Expected<int64_t> highWater(SqlTx& tx, const Table& t) override {
    // sqlite_sequence exists once any AUTOINCREMENT table has had a row.
    TESSERA_ASSIGN(auto has, tx.query("SELECT count(*) FROM sqlite_master WHERE name = 'sqlite_sequence'", {}));
    int64_t seq = 0;
    if (has.at(0).i64(0) > 0) {
      TESSERA_ASSIGN(auto rows, tx.query("SELECT seq FROM sqlite_sequence WHERE name = ?1", {t.name}));
      if (!rows.empty()) seq = rows[0].i64(0);
    }
    TESSERA_ASSIGN(auto top, tx.query("SELECT coalesce(max(" + t.identity + "), 0) FROM " + t.name, {}));
    return std::max(seq, top.at(0).i64(0));
  }

  Status setHighWater(SqlTx& tx, const Table& t, int64_t value) override {
    TESSERA_ASSIGN(int64_t now, highWater(tx, t));
    if (now == value) return {};
    // Inserting explicit ids created the counter row (AUTOINCREMENT); an empty table has none yet.
    TESSERA_ASSIGN(int64_t changed, tx.run("UPDATE sqlite_sequence SET seq = ?1 WHERE name = ?2", {value, t.name}));
    if (changed == 0) {
      TESSERA_ASSIGN(changed, tx.run("INSERT INTO sqlite_sequence(name, seq) VALUES(?1, ?2)", {t.name, value}));
    }
    return {};
  }

  Status insertRows(SqlTx& tx, const Table& t, const std::vector<const Column*>& columns,
                    const std::vector<SqlValue>& values) override {
    // Many rows per statement, within SQLite's 32766 parameters.
    std::string head = "INSERT INTO " + t.name + "(";
    for (size_t c = 0; c < columns.size(); ++c) head += (c ? ", " : "") + columns[c]->sqlite;
    head += ") VALUES ";
    const size_t width = columns.size(), rows = values.size() / width;
    const size_t per_statement = std::max<size_t>(1, 30000 / width);
    for (size_t first = 0; first < rows; first += per_statement) {
      const size_t n = std::min(per_statement, rows - first);
      std::string sql = head;
      int mark = 0;
      for (size_t r = 0; r < n; ++r) {
        sql += r ? ",(" : "(";
        for (size_t c = 0; c < width; ++c) sql += (c ? ",?" : "?") + std::to_string(++mark);
        sql += ")";
      }
      std::vector<SqlValue> params(values.begin() + static_cast<ptrdiff_t>(first * width),
                                   values.begin() + static_cast<ptrdiff_t>((first + n) * width));
      TESSERA_ASSIGN(int64_t inserted, tx.run(sql, params));
      (void)inserted;
    }
    return {};
  }

  Status makeDurable() override {
    if (role_ != Role::Destination) return {};
    TESSERA_TRY(db_->exec("PRAGMA synchronous=FULL"));
    return db_->exec("PRAGMA wal_checkpoint(TRUNCATE)");  // syncs the database file
  }

 private:
  Status inTx(const char* begin, const std::function<Status(SqlTx&)>& fn) {
    TESSERA_TRY(db_->exec(begin));
    SqliteTx tx(*db_);
    Status s = fn(tx);
    if (!s.ok()) {
      (void)db_->exec("ROLLBACK");
      return s;
    }
    return db_->exec("COMMIT");
  }

  std::string path_;
  Role role_;
  std::unique_ptr<sql::Db> db_;
  std::string identity_;
};

Expected<int64_t> pragma(sql::Db& db, const char* name) { return db.scalar(std::string("PRAGMA ") + name); }

}  // namespace

Expected<std::unique_ptr<Side>> openSqliteSide(const std::string& path, Role role) {
  struct stat st{};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (role == Role::Source) {
    if (!exists) return makeError(ErrorCode::InvalidArgument, "no SQLite store at " + path + " (the file is missing)");
    if (!S_ISREG(st.st_mode)) return makeError(ErrorCode::InvalidArgument, path + " is not a SQLite store file");
    // Read-write without create, but query-only: WAL readers need the shared-memory file; nothing is
    // ever written (a read-only file is opened read-only).
    auto db = sql::Db::open(path, SQLITE_OPEN_READWRITE);
    if (!db.ok()) db = sql::Db::open(path, SQLITE_OPEN_READONLY);
    if (!db.ok()) return db.takeError();
    TESSERA_TRY((*db)->exec("PRAGMA query_only=1"));
    auto app = pragma(**db, "application_id");
    if (!app.ok()) return makeError(ErrorCode::InvalidArgument, path + " is not a SQLite store: " + app.error().message);
    TESSERA_ASSIGN(int64_t version, pragma(**db, "user_version"));
    if (*app != kApplicationId) return makeError(ErrorCode::InvalidArgument, path + " is not a Tessera store");
    if (version > kSchemaVersion)
      return makeError(ErrorCode::Unsupported, "the source's schema (version " + std::to_string(version) +
                                                   ") is newer than this tessera's (" +
                                                   std::to_string(kSchemaVersion) +
                                                   "): migrate with the tessera that wrote it");
    if (version < kSchemaVersion)
      return makeError(ErrorCode::Unsupported,
                       "the source's schema (version " + std::to_string(version) + ") is older than this tessera's (" +
                           std::to_string(kSchemaVersion) +
                           "); migrate never writes its source: upgrade it first by opening it once with this tessera "
                           "(e.g. tessera serve token list --store " + path + ")");
    return std::unique_ptr<Side>(new SqliteSide(path, role, std::move(*db)));
  }
  if (exists && !S_ISREG(st.st_mode)) return makeError(ErrorCode::InvalidArgument, path + " is not a file");
  TESSERA_ASSIGN(auto db, sql::Db::open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE));
  return std::unique_ptr<Side>(new SqliteSide(path, role, std::move(db)));
}

}  // namespace tessera::cache::migrate
