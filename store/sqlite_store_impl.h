// Owns the layout of the SQLite RecordStore (private to store/): one writer connection
// shared by group commit, a pool of reader connections, and the optional in-memory winners index.
// The in-memory store (makeMemoryStore) is this store on a private database in memory: one
// connection that readers and the writer take in turn, no job queue, no backup. Reads are in
// sqlite_store.cpp, writes in sqlite_store_write.cpp; the job queue is sql_job_queue.cpp's, on
// this engine's transactions.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

#include "store/jobs.h"
#include "store/sql_store.h"
#include "store/sqlite_db.h"
#include "store/store.h"
#include "store/store_core.h"

namespace tessera::cache {

// Record columns selected by every read, in the order rowToRecord expects; `r` is records and
// `k` is keys.
inline constexpr const char* kRecordColumns =
    "r.id, r.key_id, k.family, k.workload, k.shape, k.dtype, k.layout, k.target, k.arch, k.units, "
    "r.tessera_version, r.llvm_version, r.cuda_version, r.cpu_model, r.host, r.user, r.created_at, "
    "r.config, r.status, r.n, r.median_us, r.p20_us, r.p80_us, r.gflops, r.gbps, r.peak_fraction, "
    "r.max_abs_err, r.max_rel_err, r.trials, r.tuning_seconds, r.stale, r.remeasured, r.estimator, r.bound, "
    "r.writer, r.received_at, r.quarantined, r.trust, r.driver_version, r.runtime_version";
inline constexpr int kRecordColumnCount = 40;
// The row as stored; `stale` is the store's to compute (SqliteStore::readRow).
Expected<Record> rowToRecord(const sql::Stmt& st);

// A statement of the store core (store_core.h) or the job queue on one SQLite connection.
class SqliteTx final : public SqlTx {
 public:
  explicit SqliteTx(sql::Db& db) : db_(db) {}
  const SqlDialect& dialect() const override { return SqlDialect::sqlite(); }
  Expected<std::vector<SqlRow>> query(const std::string& sql, const std::vector<SqlValue>& params,
                                      bool once) override;
  Expected<int64_t> run(const std::string& sql, const std::vector<SqlValue>& params, bool once) override;
  Expected<double> nowEpoch() override { return epochSeconds(); }
  Status lockName(const std::string&) override { return {}; }  // the single writer holds the database

 private:
  Status each(const std::string& sql, const std::vector<SqlValue>& params, bool once,
              const std::function<void(sql::Stmt&)>& onRow);
  sql::Db& db_;
};

class SqliteStore final : public SqlRecordStore {
 public:
  static Expected<std::unique_ptr<SqliteStore>> open(const std::string& path,
                                                     const SqliteStoreOptions& opts);
  // A store on a private database in memory (makeMemoryStore): the same rules, nothing persists.
  static Expected<std::unique_ptr<SqliteStore>> openInMemory(const Provenance& current);

  // put, administer, the outbox and the job queue: SqlRecordStore's, on this engine's transactions.
  Expected<ServedRecordPtr> best(std::string_view key_id) override;
  Expected<ServedRecordPtr> bestMatching(std::string_view key_id, const Provenance& want) override;
  Expected<ListPage> list(const ListQuery& q) override;
  Expected<KernelPage> kernels(const KernelQuery& q) override;  // sqlite_kernels.cpp
  Expected<std::vector<NearestMatch>> nearest(const HardKey& key, int limit) override;
  Expected<std::vector<Record>> exportSince(int64_t after_id, int limit) override;
  Expected<std::vector<Record>> pending(int limit) override;
  Status markPushed(std::span<const int64_t> ids) override;
  Expected<StoreStats> stats() override;
  Status backup(const std::string& dest_path) override;
  Status ping() override;
  Expected<bool> refreshIfChangedExternally() override;
  Status putKernelText(const std::string& workload, const std::string& text) override;  // sqlite_kernel_texts.cpp
  Expected<std::optional<std::string>> kernelText(const std::string& workload) override;
  Expected<std::vector<std::string>> kernelTextWorkloads(const std::string& prefix, int limit) override;
  // The job queue's writes go through the group commit (BEGIN IMMEDIATE). The in-memory store
  // keeps none (workers reach a service's queue, never a tool's memory).
  JobQueue* jobs() override { return in_memory_ ? nullptr : SqlRecordStore::jobs(); }


 private:
  SqliteStore(std::string path, SqliteStoreOptions opts, bool in_memory = false)
      : path_(std::move(path)), opts_(opts), in_memory_(in_memory) {}

  // --- readers (sqlite_store.cpp) ---
  // A reader connection checked out of the pool for one call; returned on destruction. In memory
  // there is one connection: the reader borrows it and holds conn_mu_ meanwhile.
  class Reader {
   public:
    Reader(SqliteStore* s, std::unique_ptr<sql::Db> db) : s_(s), owned_(std::move(db)), db_(owned_.get()) {}
    Reader(SqliteStore* s, sql::Db& shared, std::unique_lock<std::mutex> lock)
        : s_(s), db_(&shared), lock_(std::move(lock)) {}
    Reader(Reader&&) = default;
    ~Reader();
    sql::Db& operator*() { return *db_; }
    sql::Db* operator->() { return db_; }

   private:
    SqliteStore* s_;
    std::unique_ptr<sql::Db> owned_;
    sql::Db* db_;
    std::unique_lock<std::mutex> lock_;
  };
  Expected<Reader> reader();
  Expected<Record> readRow(const sql::Stmt& st) const;  // rowToRecord + staleness against opts_.current
  Expected<ServedRecordPtr> readWinner(sql::Db& db, std::string_view key_id);
  // Every record a statement selects (kRecordColumns), on a pooled reader; `bind` binds its
  // parameters.
  Expected<std::vector<Record>> readRecords(const std::string& sql, const std::function<void(sql::Stmt&)>& bind);
  Status loadIndex(sql::Db& db);

  // --- writer (sqlite_store_write.cpp) ---
  // Keys whose served answer (winner or its stale flag) may have changed in a transaction.
  using Touched = core::TouchedKeys;
  using WriteFn = std::function<Status(sql::Db&, Touched&)>;
  // Runs fn inside the next group transaction (BEGIN IMMEDIATE ... COMMIT) and waits for the
  // commit. Concurrent callers share one transaction and one fsync; each fn runs inside its own
  // SAVEPOINT so one failing fn does not undo the others.
  Status write(WriteFn fn);
  struct WriteJob {
    WriteFn fn;
    Status result;
    bool done = false;
  };
  void commitGroup(std::vector<WriteJob*>& jobs);
  Status applyIndex(sql::Db& db, const Touched& touched);
  // The job queue's transactions: reads on a pooled reader, writes in the group commit.
  Status transact(TxMode mode, const std::function<Status(SqlTx&, core::TouchedKeys&)>& fn) override;

  std::string path_;
  SqliteStoreOptions opts_;
  // A private database in memory: writer_ is its only connection, taken under conn_mu_ by the
  // committing writer and by each reader in turn.
  bool in_memory_ = false;
  std::mutex conn_mu_;

  std::mutex write_mu_;
  std::condition_variable write_cv_;
  bool writing_ = false;
  std::vector<WriteJob*> queue_;
  std::unique_ptr<sql::Db> writer_;  // used only by the thread that holds the writer role
  // PRAGMA data_version of the writer as last seen: it changes only when another connection (another
  // process, or a hand edit) commits, which the winners index would otherwise miss.
  int64_t data_version_ = 0;
  // Whether lookups may use winners_. Another process's commit makes the index unknown; rather
  // than reloading every winner after each such commit (with two replicas writing in turn that was
  // nearly every commit: 6-13 writes/s at 100k keys), lookups then read the database until the
  // other process has been quiet for a refresh interval, when refreshIfChangedExternally()
  // reloads the index once.
  std::atomic<bool> index_live_{true};
  std::chrono::steady_clock::time_point last_external_{};

  std::mutex readers_mu_;
  std::vector<std::unique_ptr<sql::Db>> idle_readers_;

  std::shared_mutex index_mu_;
  std::unordered_map<std::string, ServedRecordPtr> winners_;
};

}  // namespace tessera::cache
