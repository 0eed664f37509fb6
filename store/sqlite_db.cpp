// Owns the SQLite RAII helpers: opening connections with the settings every store needs and
// turning SQLite result codes into Error values where they enter Tessera.
#include "store/sqlite_db.h"

#include "store/cpu_budget.h"

namespace tessera::cache::sql {

Error sqliteError(sqlite3* db, int rc, std::string_view what) {
  std::string msg = std::string(what) + ": " + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  // Busy/locked means another process holds the write lock past busy_timeout: an I/O condition
  // for the caller, not a bug.
  return makeError(ErrorCode::IOError, std::move(msg));
}

Expected<bool> Stmt::step() {
  if (CpuBudget::spent()) return CpuBudget::error();
  int rc = sqlite3_step(s_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  if ((rc & 0xff) == SQLITE_INTERRUPT && CpuBudget::active()) return CpuBudget::error();
  return sqliteError(sqlite3_db_handle(s_), rc, "sqlite step");
}

Status Stmt::run() {
  for (;;) {
    auto r = step();
    if (!r.ok()) return r.takeError();
    if (!*r) return {};
  }
}

Expected<std::unique_ptr<Db>> Db::open(const std::string& path, int flags) {
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  std::unique_ptr<Db> db(new Db(raw));
  if (rc != SQLITE_OK) return sqliteError(raw, rc, "cannot open " + path);
  sqlite3_extended_result_codes(raw, 1);
  // Concurrent writers from other processes (a second tuner on the same local DB) wait instead
  // of failing at once.
  sqlite3_busy_timeout(raw, 5000);
  // A statement of a request whose CPU budget is spent stops between VM steps (cpu_budget.h).
  sqlite3_progress_handler(raw, 4000, [](void*) { return CpuBudget::spent() ? 1 : 0; }, nullptr);
  return db;
}

Db::~Db() {
  cache_.clear();  // statements must be finalized before the connection closes
  sqlite3_close_v2(db_);
}

Error Db::error(std::string_view what) const { return sqliteError(db_, SQLITE_ERROR, what); }

Status Db::exec(std::string_view sql) {
  std::string s(sql);
  char* err = nullptr;
  int rc = sqlite3_exec(db_, s.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    return makeError(ErrorCode::IOError, "sqlite: " + msg);
  }
  return {};
}

Expected<Stmt> Db::prepare(std::string_view sql) {
  sqlite3_stmt* st = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &st, nullptr);
  if (rc != SQLITE_OK) return sqliteError(db_, rc, "sqlite prepare");
  return Stmt(st);
}

Expected<Stmt*> Db::cached(std::string_view sql) {
  auto it = cache_.find(std::string(sql));
  if (it != cache_.end()) return it->second.get();
  TESSERA_ASSIGN(Stmt st, prepare(sql));
  auto owned = std::make_unique<Stmt>(std::move(st));
  Stmt* p = owned.get();
  cache_.emplace(std::string(sql), std::move(owned));
  return p;
}

Expected<int64_t> Db::scalar(std::string_view sql) {
  TESSERA_ASSIGN(Stmt st, prepare(sql));
  TESSERA_ASSIGN(bool row, st.step());
  return row ? st.i64(0) : int64_t{0};
}

}  // namespace tessera::cache::sql
