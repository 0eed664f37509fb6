// Owns the layout of the PostgreSQL store engine (private to store/; only the pg_*.cpp files
// include libpqxx): a bounded pool of connections with per-connection prepared statements, the
// transaction runner that retries deadlocks and serialization failures, and the PgStore class
// (records in pg_store.cpp and pg_store_write.cpp; the job queue is sql_job_queue.cpp's, on this
// engine's transactions).
//
// Several `tessera serve` replicas may share one database, so nothing is cached in a replica's
// memory: every lookup reads PostgreSQL, and any replica answers what any other just
// acknowledged. Record ids must commit in id order for the export cursor (exportSince) to stay
// valid, so every transaction that inserts records first takes one transaction-level advisory
// lock (kRecordWriteLock): writes are serialized across replicas, as SQLite's single writer does.
#pragma once

#include <pqxx/pqxx>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "store/engine.h"
#include "store/jobs.h"
#include "store/sql_store.h"
#include "store/store.h"

namespace tessera::cache::pg {

// pg_advisory_xact_lock keys (arbitrary 64-bit constants: "TSSR" + a purpose).
inline constexpr int64_t kSchemaLock = 0x5453535200000001LL;
inline constexpr int64_t kRecordWriteLock = 0x5453535200000002LL;

inline constexpr int kPgSchemaVersion = 7;

// One pooled connection and the statements prepared on it.
struct Conn {
  std::unique_ptr<pqxx::connection> c;
  std::unordered_set<std::string> prepared;
};

// Runs `sql` as a statement prepared on this connection (prepared on first use).
template <typename... Args>
pqxx::result exec(Conn& conn, pqxx::transaction_base& t, const std::string& sql, Args&&... args) {
  const std::string name = "s" + std::to_string(std::hash<std::string>{}(sql));
  if (!conn.prepared.count(name)) {
    conn.c->prepare(name, sql);
    conn.prepared.insert(name);
  }
  return t.exec_prepared(name, std::forward<Args>(args)...);
}

// Doubles travel as shortest round-trip text (never through a locale or a fixed precision).
std::string num(double v);
double asDouble(const pqxx::field& f);
int64_t asInt(const pqxx::field& f);
std::string asText(const pqxx::field& f);

// A bounded pool: at most `max` connections; callers wait (up to wait_s) for a free one.
class Pool {
 public:
  Pool(std::string url, int max, double wait_s) : url_(std::move(url)), max_(max), wait_s_(wait_s) {}
  ~Pool();
  Expected<std::unique_ptr<Conn>> acquire();
  // broken: the connection failed; it is closed instead of returned.
  void release(std::unique_ptr<Conn> c, bool broken);

 private:
  std::string url_;
  int max_;
  double wait_s_;
  std::mutex mu_;
  std::condition_variable cv_;
  int open_ = 0;
  std::vector<std::unique_ptr<Conn>> idle_;
};

enum class TxKind {
  Single,    // one statement, autocommit (pqxx::nontransaction)
  ReadOnly,  // a consistent snapshot (REPEATABLE READ, READ ONLY)
  Write,     // READ COMMITTED read-write; retried on deadlock / serialization failure
};

// Runs fn in a transaction of that kind on a pooled connection and commits; maps libpqxx's
// exceptions to Errors (IOError for a lost connection or server error, InvalidArgument for
// constraint violations the caller did not handle). fn may run more than once (retries).
Status runTx(Pool& pool, TxKind kind, const std::function<Status(Conn&, pqxx::transaction_base&)>& fn);

// Creates or migrates the schema under kSchemaLock; refuses a database that holds other tables or
// a newer Tessera schema.
Status openSchema(Conn& conn);
// The connection URL with its password (if any) replaced by "***", for messages and logs.
std::string redactUrl(const std::string& url);

// A statement of the store core (store_core.h) or the job queue in a PostgreSQL transaction.
// Parameters travel as text (doubles as shortest round-trip text); rows come back as text.
class PgTx final : public SqlTx {
 public:
  PgTx(Conn& c, pqxx::transaction_base& t) : c_(c), t_(t) {}
  const SqlDialect& dialect() const override { return SqlDialect::postgres(); }
  Expected<std::vector<SqlRow>> query(const std::string& sql, const std::vector<SqlValue>& params,
                                      bool once) override;
  Expected<int64_t> run(const std::string& sql, const std::vector<SqlValue>& params, bool once) override;
  Expected<double> nowEpoch() override;
  Status lockName(const std::string& name) override;  // a transaction-level advisory lock

 private:
  Expected<pqxx::result> execNeutral(const std::string& neutral, const std::vector<SqlValue>& params, bool once);
  Conn& c_;
  pqxx::transaction_base& t_;
};

class PgStore final : public SqlRecordStore {
 public:
  static Expected<std::unique_ptr<PgStore>> open(const std::string& url, const EngineOptions& o);

  // put, administer, the outbox and the job queue (leases take items with FOR UPDATE SKIP
  // LOCKED): SqlRecordStore's, on this engine's transactions.
  Expected<ServedRecordPtr> best(std::string_view key_id) override;
  Expected<ServedRecordPtr> bestMatching(std::string_view key_id, const Provenance& want) override;
  Expected<ListPage> list(const ListQuery& q) override;
  Expected<KernelPage> kernels(const KernelQuery& q) override;  // pg_kernels.cpp
  Expected<std::vector<NearestMatch>> nearest(const HardKey& key, int limit) override;
  Expected<std::vector<Record>> exportSince(int64_t after_id, int limit) override;
  Expected<std::vector<Record>> pending(int limit) override;
  Status markPushed(std::span<const int64_t> ids) override;
  Expected<StoreStats> stats() override;
  Status backup(const std::string& dest_path) override;
  Status ping() override;
  Status putKernelText(const std::string& workload, const std::string& text) override;  // pg_kernel_texts.cpp
  Expected<std::optional<std::string>> kernelText(const std::string& workload) override;
  Expected<std::vector<std::string>> kernelTextWorkloads(const std::string& prefix, int limit) override;

  Expected<Record> readRow(const pqxx::row& row) const;  // + staleness against the current toolchain

 private:
  PgStore(const std::string& url, const EngineOptions& o) : pool_(url, o.max_connections, 30), opts_(o) {}
  Expected<std::vector<Record>> readRecords(const std::string& sql, const std::vector<std::string>& params);

  // The job queue's transactions (WriteRecords takes kRecordWriteLock first).
  Status transact(TxMode mode, const std::function<Status(SqlTx&, core::TouchedKeys&)>& fn) override;

  Pool pool_;
  EngineOptions opts_;
};

// Record columns selected by every read, in the order PgStore::readRow expects; `r` is records and
// `k` is keys.
inline constexpr const char* kRecordColumns =
    "r.id, r.key_id, k.family, k.workload, k.shape, k.dtype, k.layout, k.target, k.arch, k.units, "
    "r.tessera_version, r.llvm_version, r.cuda_version, r.cpu_model, r.host, r.user_name, r.created_at, "
    "r.config, r.status, r.n, r.median_us, r.p20_us, r.p80_us, r.gflops, r.gbps, r.peak_fraction, "
    "r.max_abs_err, r.max_rel_err, r.trials, r.tuning_seconds, r.remeasured, r.estimator, r.bound, "
    "r.writer, r.received_at, r.quarantined, r.trust, r.driver_version, r.runtime_version";

// The database clock, as the queue's seconds since the epoch and as a record's received_at: one
// clock for every replica, whatever their machines' clocks say.
inline constexpr const char* kNowEpoch = "extract(epoch from clock_timestamp())::double precision";
inline constexpr const char* kNowUtc =
    "to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')";

Expected<std::unique_ptr<TokenStore>> openTokenStore(const std::string& url);

}  // namespace tessera::cache::pg
