// Owns the schema migrations of a Tessera database. Each entry of kMigrations takes user_version
// from its index to index+1; migrations only ever append.
#include "store/schema.h"

#include <string>

#include "store/store_core.h"

namespace tessera::cache {

namespace {

// Version 1 (ARCHITECTURE.md §2.9). Hard-key columns live on `keys` (one row per key_id, which also holds
// the winner pointer so best-wins is a single upsert); every measured record lives in `records`.
constexpr const char* kMigrationV1 = R"sql(
CREATE TABLE keys(
  key_id TEXT PRIMARY KEY,
  family TEXT NOT NULL, workload TEXT NOT NULL, shape TEXT NOT NULL, rank INTEGER NOT NULL,
  dtype TEXT NOT NULL, layout TEXT NOT NULL, target TEXT NOT NULL, arch TEXT NOT NULL,
  units INTEGER NOT NULL,
  winner_id INTEGER,                          -- best ok record; NULL while the key has none
  winner_median_us REAL,
  winner_changes INTEGER NOT NULL DEFAULT 0,  -- 1 after the first winner, +1 per improvement
  newest_created_at TEXT NOT NULL DEFAULT '', -- created_at of the newest record of the key
  newest_toolchain TEXT NOT NULL DEFAULT ''   -- its toolchain; records with another one are stale
) WITHOUT ROWID;
CREATE INDEX keys_near ON keys(family, dtype, target, arch, rank);

-- AUTOINCREMENT: ids are never reused, so an export cursor (the last id seen) stays valid.
CREATE TABLE records(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  key_id TEXT NOT NULL,
  fingerprint TEXT NOT NULL UNIQUE,
  status TEXT NOT NULL CHECK (status IN ('ok','invalid-config','compile-error','timeout','crash',
                                         'wrong-result','estimated')),
  config TEXT NOT NULL CHECK (json_valid(config)),
  n INTEGER NOT NULL, median_us REAL NOT NULL, p20_us REAL NOT NULL, p80_us REAL NOT NULL,
  gflops REAL NOT NULL, gbps REAL NOT NULL, peak_fraction REAL NOT NULL,
  max_abs_err REAL NOT NULL, max_rel_err REAL NOT NULL,
  trials INTEGER NOT NULL, tuning_seconds REAL NOT NULL,
  tessera_version TEXT NOT NULL, llvm_version TEXT NOT NULL, cuda_version TEXT NOT NULL,
  cpu_model TEXT NOT NULL, host TEXT NOT NULL, user TEXT NOT NULL, created_at TEXT NOT NULL,
  stale INTEGER NOT NULL DEFAULT 0,
  pushed INTEGER NOT NULL DEFAULT 1           -- 0: waiting in the local outbox for a service
);
CREATE INDEX records_by_key ON records(key_id);
CREATE INDEX records_outbox ON records(id) WHERE pushed = 0;

-- Bearer tokens, stored as SHA-256 hashes only.
CREATE TABLE tokens(
  name TEXT PRIMARY KEY,
  hash TEXT NOT NULL UNIQUE,
  scope TEXT NOT NULL CHECK (scope IN ('read','write','admin')),
  created_at TEXT NOT NULL,
  revoked_at TEXT
);


)sql";

// Version 2: a tuning run's final, interleaved re-measurement of its winner is marked, and such a
// record outranks single measurements in best-wins (record.h: Record::remeasured). Keys keep the
// rank of their winner next to its median so the upsert still compares one row. Existing winners
// stay as they are (unmarked).
constexpr const char* kMigrationV2 = R"sql(
ALTER TABLE records ADD COLUMN remeasured INTEGER NOT NULL DEFAULT 0;
ALTER TABLE keys ADD COLUMN winner_remeasured INTEGER NOT NULL DEFAULT 0;
)sql";

// Version 3: estimated records (status 'estimated', never a winner) name the analytic model that
// produced them and the bound it predicts (record.h: Record::estimator, Record::bound).
constexpr const char* kMigrationV3 = R"sql(
ALTER TABLE records ADD COLUMN estimator TEXT NOT NULL DEFAULT '';
ALTER TABLE records ADD COLUMN bound TEXT NOT NULL DEFAULT '';
)sql";

// Version 4: the trust model (issue 15). Every record remembers the token that stored it on a
// service (writer; '' for local and older records) and when the store received it (received_at;
// created_at, which the client asserted, is the best older records have). An admin can quarantine
// records: kept, never served or a winner. `stale` is now computed per record against the store's
// current toolchain when read, and keys' newest_* columns (which let one future-dated record mark
// a whole key stale) are no longer used.
constexpr const char* kMigrationV4 = R"sql(
ALTER TABLE records ADD COLUMN writer TEXT NOT NULL DEFAULT '';
ALTER TABLE records ADD COLUMN received_at TEXT NOT NULL DEFAULT '';
ALTER TABLE records ADD COLUMN quarantined INTEGER NOT NULL DEFAULT 0;
UPDATE records SET received_at = created_at, stale = 0;
CREATE INDEX records_by_writer ON records(writer, id);
CREATE INDEX records_by_received ON records(received_at);
)sql";

// Version 5: measurement workers and their job queue (issue 16, jobs.h), in the same file as the
// records so that a result and its record commit together. Tokens gain the `worker` scope
// (lease and report only); SQLite cannot change a CHECK constraint, so the table is rebuilt.
// Times are seconds since the epoch (REAL).
constexpr const char* kTokensV5 = R"sql(
CREATE TABLE tokens_v5(
  name TEXT PRIMARY KEY,
  hash TEXT NOT NULL UNIQUE,
  scope TEXT NOT NULL CHECK (scope IN ('read','write','admin','worker')),
  created_at TEXT NOT NULL,
  revoked_at TEXT
);
INSERT INTO tokens_v5(name, hash, scope, created_at, revoked_at)
  SELECT name, hash, scope, created_at, revoked_at FROM tokens;
DROP TABLE tokens;
ALTER TABLE tokens_v5 RENAME TO tokens;

)sql";
// The job queue's tables: store_core.cpp's queueTablesSql, shared with the PostgreSQL schema.
const std::string kMigrationV5 = kTokensV5 + core::queueTablesSql(SqlDialect::sqlite());

// Version 6: the trust of measurements (issue 25, trust.h). Every record holds its trust: what a
// machine stored itself (writer '': a tuner's local store, and service records older than writers)
// is vouched for; everything else starts as a claim and is settled when its key and config next
// get a record. Keys rank their winner (winner_rank: confirmed before claims, then re-measured);
// the winners are recomputed under the new order. Workers can be quarantined (their lies were
// caught); an item's leases record when they began (a heartbeat renews one only so long), the
// tokens whose workers lost it and the workers that refused it.
// (The statements are store_core.cpp's trustMigrationSql, shared with the PostgreSQL schema.)
const std::string kMigrationV6 = core::trustMigrationSql(SqlDialect::sqlite());

// Version 7: a worker that stops says so (issue 26): it is no longer live at once, not only after
// its TTL (store_core.cpp's queueV7MigrationSql, shared with the PostgreSQL schema).
const std::string kMigrationV7 = core::queueV7MigrationSql(SqlDialect::sqlite());

// Version 8: the kernel table (kernel_text.h): every kernel's canonical IR text under its workload
// hash, so that any winner can be compiled again from the store.
const std::string kMigrationV8 = core::kernelTextsSql();

// Version 9: re-measured claims no longer outrank other claims (issue 47, trust.h): the winners
// that did are recomputed (store_core.cpp's remeasuredClaimsMigrationSql, shared with PostgreSQL).
const std::string kMigrationV9 = core::remeasuredClaimsMigrationSql();

// Version 10 (issue 47): a worker's probe signature is kept, so that its id re-registers only as
// the machine it was, and an item's take-overs of live holders are counted per token
// (store_core.cpp's probeSignatureMigrationSql, shared with PostgreSQL).
const std::string kMigrationV10 = core::probeSignatureMigrationSql();

// Version 11 (issue 47): the token a worker measured a record for, whose identity the record
// counts as in the trust rule (store_core.cpp's measuredForMigrationSql, shared with PostgreSQL).
const std::string kMigrationV11 = core::measuredForMigrationSql();

const char* const kMigrations[] = {kMigrationV1,         kMigrationV2,         kMigrationV3,
                                   kMigrationV4,         kMigrationV5.c_str(), kMigrationV6.c_str(),
                                   kMigrationV7.c_str(), kMigrationV8.c_str(), kMigrationV9.c_str(),
                                   kMigrationV10.c_str(), kMigrationV11.c_str()};
static_assert(std::size(kMigrations) == kSchemaVersion);

}  // namespace

Status openSchema(sql::Db& db, bool synchronous_full, bool in_memory) {
  // journal_mode cannot change inside a transaction; WAL persists in the file once set.
  if (!in_memory) {
    TESSERA_ASSIGN(sql::Stmt wal, db.prepare("PRAGMA journal_mode=WAL"));
    TESSERA_ASSIGN(bool row, wal.step());
    if (!row || wal.text(0) != "wal")
      return makeError(ErrorCode::IOError, "cannot switch the database to WAL mode");
  }  // finalized here: an open statement would block COMMIT below
  TESSERA_TRY(db.exec(synchronous_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL"));

  TESSERA_TRY(db.exec("BEGIN IMMEDIATE"));
  auto body = [&]() -> Status {
    TESSERA_ASSIGN(int64_t app, db.scalar("PRAGMA application_id"));
    TESSERA_ASSIGN(int64_t version, db.scalar("PRAGMA user_version"));
    if (app != 0 && app != kApplicationId)
      return makeError(ErrorCode::InvalidArgument, "not a Tessera database (application_id differs)");
    if (app == 0) {
      TESSERA_ASSIGN(int64_t tables, db.scalar("SELECT count(*) FROM sqlite_master"));
      if (tables != 0)
        return makeError(ErrorCode::InvalidArgument, "not a Tessera database (it has other tables)");
    }
    if (version > kSchemaVersion)
      return makeError(ErrorCode::Unsupported,
                       "database schema version " + std::to_string(version) +
                           " is newer than this tessera (" + std::to_string(kSchemaVersion) + ")");
    for (int64_t v = version; v < kSchemaVersion; ++v) TESSERA_TRY(db.exec(kMigrations[v]));
    TESSERA_TRY(db.exec("PRAGMA application_id=" + std::to_string(kApplicationId)));
    TESSERA_TRY(db.exec("PRAGMA user_version=" + std::to_string(kSchemaVersion)));
    return {};
  };
  Status st = body();
  if (!st.ok()) {
    (void)db.exec("ROLLBACK");
    return st;
  }
  return db.exec("COMMIT");
}

}  // namespace tessera::cache
