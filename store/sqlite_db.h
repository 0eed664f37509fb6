// Owns the thin RAII layer over the SQLite C API used by the stores: connections, prepared
// statements that are always reset after use, and translation of SQLite errors into Error.
#pragma once

#include <sqlite3.h>

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "support/status.h"

namespace tessera::cache::sql {

class Stmt {
 public:
  explicit Stmt(sqlite3_stmt* s = nullptr) : s_(s) {}
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(Stmt&& o) noexcept : s_(o.s_) { o.s_ = nullptr; }
  Stmt& operator=(Stmt&& o) noexcept {
    std::swap(s_, o.s_);
    return *this;
  }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  // Parameters are 1-based as in SQLite. Text is copied (SQLITE_TRANSIENT) so callers may pass
  // temporaries.
  Stmt& bind(int i, int64_t v) { sqlite3_bind_int64(s_, i, v); return *this; }
  Stmt& bind(int i, int v) { sqlite3_bind_int64(s_, i, v); return *this; }
  Stmt& bind(int i, double v) { sqlite3_bind_double(s_, i, v); return *this; }
  Stmt& bind(int i, std::string_view v) {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& bindNull(int i) { sqlite3_bind_null(s_, i); return *this; }

  // true: a row is available; false: done. Errors carry SQLite's message.
  Expected<bool> step();
  Status run();  // step to completion, ignoring rows

  int64_t i64(int col) const { return sqlite3_column_int64(s_, col); }
  double f64(int col) const { return sqlite3_column_double(s_, col); }
  bool isNull(int col) const { return sqlite3_column_type(s_, col) == SQLITE_NULL; }
  std::string text(int col) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s_, col));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(s_, col))) : std::string();
  }
  void reset() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  sqlite3_stmt* get() const { return s_; }

 private:
  sqlite3_stmt* s_;
};

// Resets a cached statement when the scope ends, so a statement never holds a read snapshot or
// a lock past its use (an un-reset SELECT pins the WAL and blocks checkpoints).
class Use {
 public:
  explicit Use(Stmt& s) : s_(s) {}
  ~Use() { s_.reset(); }
  Stmt* operator->() { return &s_; }
  Stmt& operator*() { return s_; }

 private:
  Stmt& s_;
};

class Db {
 public:
  // flags: SQLITE_OPEN_* ; SQLITE_OPEN_NOMUTEX is always added because every connection is used
  // by one thread at a time (the writer under its lock, readers checked out of a pool).
  static Expected<std::unique_ptr<Db>> open(const std::string& path, int flags);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  Status exec(std::string_view sql);
  Expected<Stmt> prepare(std::string_view sql);
  // Prepared once per connection and reused; the pointer stays valid for the connection's life.
  Expected<Stmt*> cached(std::string_view sql);
  // First column of the first row as an integer (for PRAGMAs and counts).
  Expected<int64_t> scalar(std::string_view sql);

  sqlite3* handle() const { return db_; }
  Error error(std::string_view what) const;

 private:
  explicit Db(sqlite3* db) : db_(db) {}
  sqlite3* db_;
  std::unordered_map<std::string, std::unique_ptr<Stmt>> cache_;
};

Error sqliteError(sqlite3* db, int rc, std::string_view what);

}  // namespace tessera::cache::sql
