// Owns the record write rules of the stores, written once for every engine (the in-memory store is
// the SQLite engine in memory): what a new record's arrival decides (admitRecord: its re-measured
// claim, its trust and its group's), the best-wins put of the SQL engines (the trust group a
// record joins, the duplicate check, the winner upsert), the recomputation of a key's winner, the
// re-settling of a key's trust and an admin action's effect on its keys. The SQL engines
// (sqlite_store_write.cpp, pg_store_write.cpp) supply only the transaction (sql_tx.h) and their
// locking.
#pragma once

#include <functional>
#include <set>
#include <span>
#include <string>

#include "store/sql_tx.h"
#include "store/store.h"
#include "store/trust.h"

namespace tessera::cache::core {

// Keys whose served winner (or its absence) may have changed in a transaction.
using TouchedKeys = std::set<std::string>;

// What a new record's arrival decides before it is stored (store.h's rules, trust.h). `group`: the
// ok, unquarantined records of its key and config that the engine read. A re-measured claim from an
// untrusted writer stands only on that writer's own earlier measurement of the config; the record
// starts vouched when a trusted put stores an ok record, else as a claim; an ok record then joins
// the group and the group is settled. The new record's id is not known yet: kNewRecord stands for it.
inline constexpr int64_t kNewRecord = -1;
struct Admission {
  bool remeasured = false;
  Trust trust = Trust::Claim;                      // the new record's
  std::vector<std::pair<int64_t, Trust>> others;  // the group's records whose trust changes
};
Admission admitRecord(const Record& r, std::vector<Measurement> group, const PutOptions& opts);

// Stores one finalized record best-wins (store.h's rules) inside `tx`, which the engine opened
// with its record-write lock held; adds the key to `touched` when its winner moved.
Expected<PutResult> putRecord(SqlTx& tx, const Record& r, const PutOptions& opts, TouchedKeys& touched);

// Points the key at its best remaining candidate (trust.h; none: no winner; no records left: the
// key row goes too) and returns it (0: none).
Expected<int64_t> recomputeWinner(SqlTx& tx, const std::string& key_id);

// Settles the trust of every config of a key again (after an admin action).
Status resettleKey(SqlTx& tx, const std::string& key_id, double agree_factor);

// The condition over `records r` an admin action applies to (the selector's criteria and the
// action's own, adminActionWhere), neutral, with its parameters appended to `params`.
std::string selectorWhere(const RecordSelector& sel, AdminAction action, std::vector<SqlValue>& params);

// Applies an admin action other than Count to the selected records, re-settles the trust and
// recomputes the winner of every key it touched. Returns how many records changed.
Expected<int64_t> administer(SqlTx& tx, const RecordSelector& sel, AdminAction action, double agree_factor,
                             TouchedKeys& touched);

// The schema step that brought in the trust of measurements (issue 25, trust.h): SQLite's version 6
// and PostgreSQL's version 2. Every record holds its trust: what a machine stored itself (writer
// '': a tuner's local store, and service records older than writers) is vouched for; everything
// else starts as a claim and is settled when its key and config next get a record. Keys rank their
// winner (winner_rank: confirmed before claims, then re-measured); the winners are recomputed
// under the new order. Workers can be quarantined (their lies were caught); an item's leases
// record when they began (a heartbeat renews one only so long), the tokens whose workers lost it
// and the workers that refused it. PostgreSQL indexes the md5 of a config (configs may be 16 KiB,
// past a btree entry's limit).
std::string trustMigrationSql(const SqlDialect& d);

// The schema step of SQLite's version 7 and PostgreSQL's version 3. A worker can say it stopped:
// workers.stopped_at, 0 while it runs (a stopped worker is not live and must register again). Job
// polls follow a cursor: jobs.changes counts the changes of a job's items, and each item keeps the
// count of its last change (job_items.changed), so a poll returns only the items changed since.
// Workers register their GPU runtime's version, and records keep the driver and runtime versions
// they were measured with (records.driver_version, records.runtime_version; '' where unknown).
std::string queueV7MigrationSql(const SqlDialect& d);

// The job queue's tables (workers, jobs, job_items) as they were created: SQLite's version 5 and
// the end of PostgreSQL's version 1 (later steps alter them). PostgreSQL's types: 64-bit integers,
// double precision, an identity column for the submission order.
std::string queueTablesSql(const SqlDialect& d);

// The kernel table (kernel_text.h): SQLite's version 8, PostgreSQL's version 4.
std::string kernelTextsSql();

// SQLite's version 9, PostgreSQL's version 5 (issue 47): among claims `remeasured` no longer
// ranks (trust.h, winnerRank), so the keys whose winner held the old rank of a re-measured claim
// (1, a rank nothing has now) get their winner recomputed under today's order.
std::string remeasuredClaimsMigrationSql();
// SQLite's version 10, PostgreSQL's 6 (issue 47): a worker's probe signature kept, and the tokens
// that took an item over from a live holder.
std::string probeSignatureMigrationSql();
// SQLite's version 11, PostgreSQL's 7 (issue 47): the token a worker measured a record for.
std::string measuredForMigrationSql();

}  // namespace tessera::cache::core

namespace tessera::cache {

enum class TxMode {
  Read,          // one consistent, read-only snapshot
  Write,         // a write transaction
  WriteRecords,  // a write transaction that may store records (takes the record-write lock first)
};

// What an engine gives the store core's batch writes and the job queue: its transactions. fn may
// run more than once (an engine may retry a transaction that lost a race); touched collects keys
// whose winners moved.
class SqlTxRunner {
 public:
  virtual ~SqlTxRunner() = default;
  virtual Status transact(TxMode mode, const std::function<Status(SqlTx&, core::TouchedKeys&)>& fn) = 0;
};

namespace core {
// RecordStore::put of every SQL engine: the records stored best-wins (putRecord), in order, in one
// WriteRecords transaction of the engine; all or nothing.
Expected<std::vector<PutResult>> putRecords(SqlTxRunner& engine, std::span<const Record> records,
                                            const PutOptions& opts);
// RecordStore::administer of every SQL engine: a count in a read transaction, any other action
// (administer above) in one WriteRecords transaction; an empty selector applies to nothing.
Expected<int64_t> administerRecords(SqlTxRunner& engine, const RecordSelector& sel, AdminAction action,
                                    double agree_factor);
}  // namespace core

}  // namespace tessera::cache
