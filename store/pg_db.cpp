// Owns the plumbing of the PostgreSQL engine: the connection pool, the transaction runner (retries,
// exception-to-Error mapping), value conversions, URL redaction and the schema with its migrations.
#include <charconv>
#include <chrono>
#include <cstdio>
#include <thread>

#include "store/cpu_budget.h"
#include "store/pg_store_impl.h"
#include "store/store_core.h"
#include "store/url_redact.h"

namespace tessera::cache::pg {

std::string num(double v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

double asDouble(const pqxx::field& f) {
  if (f.is_null()) return 0;
  const char* s = f.c_str();
  double v = 0;
  std::from_chars(s, s + f.size(), v);
  return v;
}

int64_t asInt(const pqxx::field& f) {
  if (f.is_null()) return 0;
  const char* s = f.c_str();
  int64_t v = 0;
  std::from_chars(s, s + f.size(), v);
  return v;
}

std::string asText(const pqxx::field& f) { return f.is_null() ? std::string() : std::string(f.c_str(), f.size()); }

std::string redactUrl(const std::string& url) { return cache::redactUrl(url); }

Pool::~Pool() = default;

Expected<std::unique_ptr<Conn>> Pool::acquire() {
  std::unique_lock<std::mutex> lk(mu_);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s_);
  while (idle_.empty() && open_ >= max_) {
    if (cv_.wait_until(lk, deadline) == std::cv_status::timeout && idle_.empty() && open_ >= max_)
      return makeError(ErrorCode::IOError, "all " + std::to_string(max_) + " PostgreSQL connections stayed busy");
  }
  if (!idle_.empty()) {
    auto c = std::move(idle_.back());
    idle_.pop_back();
    return c;
  }
  ++open_;
  lk.unlock();
  try {
    auto conn = std::make_unique<Conn>();
    conn->c = std::make_unique<pqxx::connection>(url_);
    return conn;
  } catch (const std::exception& e) {
    lk.lock();
    --open_;
    cv_.notify_one();
    std::string msg = e.what();
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    // No URL here: this may reach an HTTP client (503 details); open() names the location.
    return makeError(ErrorCode::IOError, "cannot connect to PostgreSQL: " + msg);
  }
}

void Pool::release(std::unique_ptr<Conn> c, bool broken) {
  std::lock_guard<std::mutex> g(mu_);
  if (broken || !c || !c->c || !c->c->is_open()) {
    --open_;
  } else {
    idle_.push_back(std::move(c));
  }
  cv_.notify_one();
}

namespace {

std::string trimmed(const char* what) {
  std::string m = what;
  while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
  return m;
}

// One attempt; returns whether it may be retried (deadlock, serialization failure, a connection
// that broke before anything was committed).
struct Attempt {
  Status status;
  bool retry = false;
};

Attempt attempt(Pool& pool, TxKind kind, const std::function<Status(Conn&, pqxx::transaction_base&)>& fn) {
  if (CpuBudget::spent()) return {CpuBudget::error(), false};
  auto conn = pool.acquire();
  if (!conn.ok()) return {conn.takeError(), false};
  std::unique_ptr<Conn> c = std::move(*conn);
  bool broken = false;
  Attempt out;
  try {
    // Under a CPU budget a single statement runs in a transaction, which scopes its
    // statement_timeout (SET LOCAL) to it.
    if (kind == TxKind::Single && !CpuBudget::active()) {
      pqxx::nontransaction t(*c->c);
      out.status = fn(*c, t);
    } else if (kind == TxKind::ReadOnly) {
      pqxx::transaction<pqxx::repeatable_read, pqxx::read_only> t(*c->c);
      // A request under a CPU budget (a search): the database stops its statements when it is spent.
      if (CpuBudget::active()) t.exec("SET LOCAL statement_timeout = " + std::to_string(CpuBudget::remainingMs()));
      out.status = fn(*c, t);
      if (out.status.ok()) t.commit();
    } else {
      pqxx::work t(*c->c);
      if (kind == TxKind::Single) t.exec("SET LOCAL statement_timeout = " + std::to_string(CpuBudget::remainingMs()));
      out.status = fn(*c, t);
      if (out.status.ok()) t.commit();  // an error from fn aborts (the destructor rolls back)
    }
  } catch (const pqxx::in_doubt_error& e) {
    broken = true;
    out.status = makeError(ErrorCode::IOError, "PostgreSQL connection lost during commit: " + trimmed(e.what()));
  } catch (const pqxx::broken_connection& e) {
    broken = true;
    out = {makeError(ErrorCode::IOError, "PostgreSQL connection lost: " + trimmed(e.what())), true};
  } catch (const pqxx::transaction_rollback& e) {  // deadlock_detected, serialization_failure
    out = {makeError(ErrorCode::IOError, "PostgreSQL transaction rolled back: " + trimmed(e.what())), true};
  } catch (const pqxx::integrity_constraint_violation& e) {
    out.status = makeError(ErrorCode::InvalidArgument, "refused by the database: " + trimmed(e.what()));
  } catch (const pqxx::sql_error& e) {
    // 57014 query_canceled: a statement_timeout of the request's CPU budget.
    out.status = CpuBudget::active() && e.sqlstate() == "57014"
                     ? CpuBudget::error()
                     : makeError(ErrorCode::IOError, "PostgreSQL error: " + trimmed(e.what()));
  } catch (const std::exception& e) {
    broken = !c->c->is_open();
    out.status = makeError(ErrorCode::IOError, "PostgreSQL: " + trimmed(e.what()));
  }
  pool.release(std::move(c), broken);
  return out;
}

}  // namespace

Status runTx(Pool& pool, TxKind kind, const std::function<Status(Conn&, pqxx::transaction_base&)>& fn) {
  constexpr int kAttempts = 5;
  Status last;
  for (int i = 0; i < kAttempts; ++i) {
    Attempt a = attempt(pool, kind, fn);
    if (a.status.ok() || !a.retry) return std::move(a.status);
    last = std::move(a.status);
    std::this_thread::sleep_for(std::chrono::milliseconds(5 << i));
  }
  return last;
}

namespace {

// Version 1: the SQLite schema at its version 5 (schema.cpp), in PostgreSQL's types. `user` is a
// reserved word here, hence user_name. Flags stay 0/1 integers so both engines read alike.
constexpr const char* kPgRecordsV1 = R"sql(
CREATE TABLE tessera_meta(name TEXT PRIMARY KEY, value TEXT NOT NULL);

CREATE TABLE keys(
  key_id TEXT PRIMARY KEY,
  family TEXT NOT NULL, workload TEXT NOT NULL, shape TEXT NOT NULL, rank INTEGER NOT NULL,
  dtype TEXT NOT NULL, layout TEXT NOT NULL, target TEXT NOT NULL, arch TEXT NOT NULL,
  units BIGINT NOT NULL,
  winner_id BIGINT,
  winner_median_us DOUBLE PRECISION,
  winner_remeasured INTEGER NOT NULL DEFAULT 0,
  winner_changes BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX keys_near ON keys(family, dtype, target, arch, rank);

CREATE TABLE records(
  id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  key_id TEXT NOT NULL,
  fingerprint TEXT NOT NULL UNIQUE,
  status TEXT NOT NULL CHECK (status IN ('ok','invalid-config','compile-error','timeout','crash',
                                         'wrong-result','estimated')),
  config TEXT NOT NULL CHECK (config::json IS NOT NULL),
  n BIGINT NOT NULL, median_us DOUBLE PRECISION NOT NULL, p20_us DOUBLE PRECISION NOT NULL,
  p80_us DOUBLE PRECISION NOT NULL, gflops DOUBLE PRECISION NOT NULL, gbps DOUBLE PRECISION NOT NULL,
  peak_fraction DOUBLE PRECISION NOT NULL, max_abs_err DOUBLE PRECISION NOT NULL,
  max_rel_err DOUBLE PRECISION NOT NULL, trials BIGINT NOT NULL, tuning_seconds DOUBLE PRECISION NOT NULL,
  tessera_version TEXT NOT NULL, llvm_version TEXT NOT NULL, cuda_version TEXT NOT NULL,
  cpu_model TEXT NOT NULL, host TEXT NOT NULL, user_name TEXT NOT NULL, created_at TEXT NOT NULL,
  pushed INTEGER NOT NULL DEFAULT 1,
  remeasured INTEGER NOT NULL DEFAULT 0,
  estimator TEXT NOT NULL DEFAULT '', bound TEXT NOT NULL DEFAULT '',
  writer TEXT NOT NULL DEFAULT '', received_at TEXT NOT NULL DEFAULT '',
  quarantined INTEGER NOT NULL DEFAULT 0
);
-- The winner recomputation and bestMatching read a key's ok records best first.
CREATE INDEX records_by_key ON records(key_id, status, quarantined, remeasured DESC, median_us, id);
CREATE INDEX records_outbox ON records(id) WHERE pushed = 0;
CREATE INDEX records_by_writer ON records(writer, id);
CREATE INDEX records_by_received ON records(received_at);

CREATE TABLE tokens(
  name TEXT PRIMARY KEY,
  hash TEXT NOT NULL UNIQUE,
  scope TEXT NOT NULL CHECK (scope IN ('read','write','admin','worker')),
  created_at TEXT NOT NULL,
  revoked_at TEXT
);

)sql";
// The job queue's tables as SQLite's version 5 made them (store_core.cpp's queueTablesSql).
const std::string kPgMigrationV1 = kPgRecordsV1 + core::queueTablesSql(SqlDialect::postgres());

// Version 2: the SQLite schema's version 6 (schema.cpp): the trust of measurements (trust.h), the
// key's winner rank and the winners recomputed under it, quarantined workers, and the lease
// bookkeeping of fair leasing. Configs may be 16 KiB, past a btree entry's limit: the key-and-config
// index is over their md5.
const std::string kPgMigrationV2 = core::trustMigrationSql(SqlDialect::postgres());

// Version 3: the SQLite schema's version 7: a worker that stops says so; job polls follow a cursor.
const std::string kPgMigrationV3 = core::queueV7MigrationSql(SqlDialect::postgres());

// Version 4: the kernel table (kernel_text.h), as SQLite's version 8.
const std::string kPgMigrationV4 = core::kernelTextsSql();

// Version 5: the SQLite schema's version 9: winners that were re-measured claims recomputed.
const std::string kPgMigrationV5 = core::remeasuredClaimsMigrationSql();

// Version 6: the SQLite schema's version 10: a worker's probe signature kept, take-overs per token.
const std::string kPgMigrationV6 = core::probeSignatureMigrationSql();

// Version 7: the SQLite schema's version 11: the token a worker measured a record for.
const std::string kPgMigrationV7 = core::measuredForMigrationSql();

const char* const kPgMigrations[] = {kPgMigrationV1.c_str(), kPgMigrationV2.c_str(), kPgMigrationV3.c_str(),
                                     kPgMigrationV4.c_str(), kPgMigrationV5.c_str(), kPgMigrationV6.c_str(),
                                     kPgMigrationV7.c_str()};
static_assert(std::size(kPgMigrations) == kPgSchemaVersion);

}  // namespace

Status openSchema(Conn& conn) {
  try {
    pqxx::work t(*conn.c);
    // Replicas that start together: the first migrates, the others wait and find it done.
    t.exec("SELECT pg_advisory_xact_lock(" + std::to_string(kSchemaLock) + ")");
    const bool has_meta =
        t.exec1("SELECT to_regclass('tessera_meta') IS NOT NULL")[0].as<bool>();
    int64_t version = 0;
    if (has_meta) {
      auto app = t.exec("SELECT value FROM tessera_meta WHERE name = 'application'");
      if (app.empty() || asText(app[0][0]) != "tessera")
        return makeError(ErrorCode::InvalidArgument, "not a Tessera database (tessera_meta names another application)");
      auto v = t.exec("SELECT value FROM tessera_meta WHERE name = 'schema_version'");
      version = v.empty() ? 0 : std::stoll(asText(v[0][0]));
    } else {
      const int64_t tables = asInt(t.exec1(
          "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()")[0]);
      if (tables != 0)
        return makeError(ErrorCode::InvalidArgument,
                         "not a Tessera database (its schema has other tables); give an empty database");
    }
    if (version > kPgSchemaVersion)
      return makeError(ErrorCode::Unsupported, "database schema version " + std::to_string(version) +
                                                   " is newer than this tessera (" +
                                                   std::to_string(kPgSchemaVersion) + ")");
    for (int64_t v = version; v < kPgSchemaVersion; ++v) t.exec(kPgMigrations[v]);
    if (version < kPgSchemaVersion) {
      t.exec("INSERT INTO tessera_meta(name, value) VALUES('application', 'tessera') ON CONFLICT DO NOTHING");
      t.exec_params("INSERT INTO tessera_meta(name, value) VALUES('schema_version', $1)"
                    " ON CONFLICT(name) DO UPDATE SET value = excluded.value",
                    std::to_string(kPgSchemaVersion));
    }
    t.commit();
    return {};
  } catch (const std::exception& e) {
    return makeError(ErrorCode::IOError, "cannot open the PostgreSQL schema: " + trimmed(e.what()));
  }
}

}  // namespace tessera::cache::pg
