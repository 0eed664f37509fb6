// Owns the write side of the SQLite RecordStore: group commit on the single writer connection,
// the SQLite transaction of the store core (store_core.h: the best-wins put and admin actions)
// and keeping the winners index coherent.
#include <type_traits>
#include <variant>

#include "store/sqlite_store_impl.h"
#include "store/store_core.h"

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
  // In memory the writer's connection is also the readers': take it from them for the commit.
  std::unique_lock<std::mutex> conn;
  if (in_memory_) conn = std::unique_lock<std::mutex>(conn_mu_);
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

Expected<std::vector<SqlRow>> SqliteTx::query(const std::string& sql, const std::vector<SqlValue>& params,
                                               bool once) {
  std::vector<SqlRow> rows;
  TESSERA_TRY(each(sql, params, once, [&](sql::Stmt& st) {
    SqlRow row;
    const int n = sqlite3_column_count(st.get());
    for (int i = 0; i < n; ++i) {
      switch (sqlite3_column_type(st.get(), i)) {
        case SQLITE_NULL: row.cols.emplace_back(); break;
        case SQLITE_INTEGER: row.cols.emplace_back(st.i64(i)); break;
        case SQLITE_FLOAT: row.cols.emplace_back(st.f64(i)); break;
        default: row.cols.emplace_back(st.text(i));
      }
    }
    rows.push_back(std::move(row));
  }));
  return rows;
}

Expected<int64_t> SqliteTx::run(const std::string& sql, const std::vector<SqlValue>& params, bool once) {
  TESSERA_TRY(each(sql, params, once, [](sql::Stmt&) {}));
  return int64_t{sqlite3_changes(db_.handle())};
}

Status SqliteTx::each(const std::string& sql, const std::vector<SqlValue>& params, bool once,
                      const std::function<void(sql::Stmt&)>& onRow) {
  sql::Stmt fresh;
  sql::Stmt* st = nullptr;
  if (once) {
    TESSERA_ASSIGN(fresh, db_.prepare(sql));
    st = &fresh;
  } else {
    TESSERA_ASSIGN(st, db_.cached(sql));
  }
  sql::Use use(*st);
  for (size_t i = 0; i < params.size(); ++i) {
    const int at = static_cast<int>(i + 1);
    std::visit(
        [&](const auto& v) {
          if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::monostate>) st->bindNull(at);
          else st->bind(at, v);
        },
        params[i]);
  }
  for (;;) {
    TESSERA_ASSIGN(bool row, st->step());
    if (!row) return {};
    onRow(*st);
  }
}

Status SqliteStore::transact(TxMode mode, const std::function<Status(SqlTx&, core::TouchedKeys&)>& fn) {
  if (mode != TxMode::Read)
    return write([&](sql::Db& db, Touched& touched) -> Status {
      SqliteTx tx(db);
      return fn(tx, touched);
    });
  TESSERA_ASSIGN(Reader rd, reader());
  TESSERA_TRY(rd->exec("BEGIN"));
  SqliteTx tx(*rd);
  Touched none;
  Status s = fn(tx, none);
  (void)rd->exec("COMMIT");
  return s;
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
