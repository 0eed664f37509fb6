// Owns the RecordStore interface: where tuning records are kept, how the winner of a key is
// chosen (best-wins merge), and the factories for the SQLite store and the in-memory test store.
//
// Rules every implementation follows:
//  * every submitted record is kept (a record with the same fingerprint is stored once, so
//    retries and re-imports are idempotent);
//  * every record carries its trust (trust.h), settled by the one rule of trust.cpp whenever a
//    record of its key and config arrives or an admin acts: a claim, confirmed by another
//    identity's agreeing measurement, refuted by another identity's slower one, or vouched (an
//    admin's pin, or a trusted put: the store's own machine);
//  * the winner of a key is its best `ok`, unrefuted record (isBetter): confirmed or vouched
//    records before claims, then a tuning run's re-measured winner (Record::remeasured) before
//    single measurements, then the lowest median_us; a worse record never replaces a better one,
//    and on a tie the earlier record stays;
//  * a record is stale when its toolchain (tessera/LLVM/CUDA versions) differs from the store's
//    current toolchain (options; none set: nothing is stale): per record, never decided by other
//    records of its key; stale winners are still served, flagged;
//  * quarantined records (an admin's decision) are kept but never win, and neither lists, exports
//    nor lookups return them unless asked.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "store/kernel_list.h"
#include "store/record.h"
#include "support/status.h"

namespace tessera::cache {

class JobQueue;  // jobs.h
class Outbox;    // outbox.h

// What a submission did to its key's winner. Every non-duplicate record is stored whatever the
// outcome.
enum class PutOutcome {
  Inserted,  // first winner of its key
  Improved,  // new winner, better than the previous one
  Kept,      // the existing winner stays (worse or equal, not ok, or a duplicate)
};
std::string_view putOutcomeName(PutOutcome o);

struct PutResult {
  PutOutcome outcome = PutOutcome::Kept;
  int64_t id = 0;          // the stored record's id (the existing one for a duplicate)
  bool duplicate = false;  // an identical record (same fingerprint) was already stored
  std::string key_id;
  bool remeasured = false;  // stored as re-measured (a claim the store accepted)
  Trust trust = Trust::Claim;  // the record's trust right after this put
};

struct PutOptions {
  // Remember new records as not yet pushed to a shared service (the local outbox: outbox.h, and
  // pushOutbox() in client.h).
  bool outbox = false;
  // The authenticated token that submits the records; a service sets it, never from the body.
  std::string writer;
  // The store's own machine measured these records (a tuner's local store, written by its own
  // tuner): they are vouched for and their `remeasured` taken as it comes. A service, and a local
  // store keeping another machine's records (a worker's, the shared cache's), pass false: the
  // records are claims of `writer` (trust.h), and a `remeasured` claim stands only when the key
  // already holds an ok, unquarantined measurement of the same config by the same writer (the
  // run's own earlier measurement of the winner it re-measured).
  bool trusted = true;
  // The token whose job a worker measured these records for (the job's submitter), when the writer
  // is a worker's token that is not a measuring identity: the trust rule keeps such records claims
  // that confirm nobody (trust.h, Measurement::by_worker).
  std::string measured_for;
  // Two measurements of a config by different writers agree within this factor (trust.h).
  double agree_factor = kDefaultAgreeFactor;
};

// A key's winner as served: the record plus its encoded JSON, shared so a lookup copies nothing.
struct ServedRecord {
  Record record;
  std::string json;  // encodeRecord(record)
};
using ServedRecordPtr = std::shared_ptr<const ServedRecord>;

// Filters are exact matches; empty strings / nullopt mean "any". Paging is by id: pass the
// previous page's next_after as after_id.
enum class QuarantineFilter { Exclude, Include, Only };

struct ListQuery {
  std::string key_id, family, workload, dtype, layout, target, arch, status;
  std::optional<int64_t> units;
  bool winners_only = false;
  std::string writer;        // token name
  std::string since, until;  // received_at in [since, until)
  QuarantineFilter quarantine = QuarantineFilter::Exclude;
  int64_t after_id = 0;
  int limit = 100;  // 1..kMaxListLimit
  // Descending ids (the audit trail reads the newest writes first): after_id is then the id the
  // page starts below (0: from the newest), and next_after the one the next page starts below.
  bool newest_first = false;
};
inline constexpr int kMaxListLimit = 1000;

struct ListPage {
  std::vector<Record> records;  // ascending id
  int64_t next_after = 0;       // 0 when this is the last page
};

struct NearestMatch {
  Record record;    // the winner of a nearby key
  double distance;  // shapeDistance(requested shape, record.key.shape)
};

// Orders nearby winners as RecordStore::nearest() promises (closest shape, then the same layout,
// then the lower median, then the older record) and keeps the first `limit`: one rule for every
// engine.
void rankNearest(const HardKey& key, std::vector<NearestMatch>& matches, int limit);

// Which records an admin action applies to: all criteria given must hold (an empty selector
// selects nothing, so a typo never deletes everything).
struct RecordSelector {
  std::vector<int64_t> ids;
  std::string key_id, writer;
  std::string since, until;  // received_at in [since, until)
  std::string except_writer;  // never records of this token (a reader disputes only others' claims)
  bool empty() const { return ids.empty() && key_id.empty() && writer.empty() && since.empty() && until.empty(); }
};
// Release never applies to records of a revoked token (what `token revoke --retract` set aside
// stays aside); Pin vouches for ok records (they outrank every claim), Unpin makes them claims
// again. Dispute (a reader's refutation, not an admin's) demotes ok, unquarantined claims below
// every other claim (trust.h: Trust::Disputed) until another identity reproduces them. Every action
// re-settles the trust of the keys it touched and recomputes their winners.
enum class AdminAction { Count, Quarantine, Release, Delete, Pin, Unpin, Dispute };

// An admin action in SQL over `records r`, the same for both SQL engines: the statement up to its
// WHERE, and the conditions the action adds to the selector's (Release skips records of revoked
// tokens; Pin takes ok, unquarantined records).
std::string adminActionSql(AdminAction a);
std::string adminActionWhere(AdminAction a);

struct StoreStats {
  int64_t records = 0, keys = 0, winners = 0, stale_winners = 0, outbox = 0, quarantined = 0;
  int64_t db_bytes = 0;  // main file + WAL (0 for the in-memory store)
  int schema_version = 0;
  int64_t last_id = 0;  // highest record id (the export cursor of "everything so far")
};

class RecordStore {
 public:
  virtual ~RecordStore() = default;

  // Stores records (each must have passed finalizeRecord/decodeRecord) in one transaction and
  // returns one result per record, in order. All or nothing: on error none is stored.
  virtual Expected<std::vector<PutResult>> put(std::span<const Record> records,
                                               const PutOptions& opts = {}) = 0;
  Expected<PutResult> putOne(const Record& r, const PutOptions& opts = {});

  // The kernel table (kernel_text.h): the canonical IR text of the kernel behind `workload`,
  // checked against it (checkKernelText) and kept once; storing it again is a no-op.
  virtual Status putKernelText(const std::string& workload, const std::string& text) = 0;
  // The text, or nullopt when the store has none for `workload`.
  virtual Expected<std::optional<std::string>> kernelText(const std::string& workload) = 0;
  // The workloads of the kernel table that start with `prefix` (lowercase hex, the caller checks),
  // in order, at most `limit`: a hash prefix is resolved in a store that holds texts and no records.
  virtual Expected<std::vector<std::string>> kernelTextWorkloads(const std::string& prefix, int limit) = 0;

  // The winner of a key, or nullptr when the key has no ok record.
  virtual Expected<ServedRecordPtr> best(std::string_view key_id) = 0;
  // The best ok, unquarantined record of a key whose provenance equals the non-empty toolchain
  // fields and cpu_model of `want` (what is fresh for an asker whose winner is stale); nullptr
  // when there is none.
  virtual Expected<ServedRecordPtr> bestMatching(std::string_view key_id, const Provenance& want) = 0;

  // Admin: counts, quarantines, releases, deletes, pins or unpins the selected records and
  // re-settles the trust and the winners of their keys in the same transaction. Returns how many
  // records it applied to (for Quarantine/Release/Pin/Unpin: how many changed).
  virtual Expected<int64_t> administer(const RecordSelector& sel, AdminAction action,
                                       double agree_factor = kDefaultAgreeFactor) = 0;

  virtual Expected<ListPage> list(const ListQuery& q) = 0;

  // The overview: one row per key, filtered, searched, ordered and paged by the store
  // (kernel_list.h says which record a key shows and what its label means).
  virtual Expected<KernelPage> kernels(const KernelQuery& q) = 0;

  // Winners of keys with the same family, dtype, target, arch and rank as `key`, closest shape
  // first (ties: same layout first, then lower median_us). Includes the key itself if it has a
  // winner (distance 0).
  virtual Expected<std::vector<NearestMatch>> nearest(const HardKey& key, int limit) = 0;

  // Records with id > after_id in id order: the export stream. Importing is put(): records are
  // re-validated and merged best-wins, duplicates skipped, so an export replayed into an empty
  // store yields the same winners.
  virtual Expected<std::vector<Record>> exportSince(int64_t after_id, int limit) = 0;

  virtual Expected<StoreStats> stats() = 0;

  // Consistent online copy to a new file (fails if dest exists); writers keep going meanwhile.
  virtual Status backup(const std::string& dest_path) = 0;

  // Cheap liveness check used by /readyz.
  virtual Status ping() = 0;

  // For stores that cache winners in memory: notices when another connection (another process, a
  // hand edit) committed to the file since this store last looked (lookups then read the file) and
  // reloads the cache once the other writer has been quiet for a second. Returns true when it
  // noticed a change or reloaded. Others: no-op.
  virtual Expected<bool> refreshIfChangedExternally() { return false; }

  // The measurement job queue kept in the same database (jobs.h), or nullptr (the in-memory store).
  virtual JobQueue* jobs() { return nullptr; }
  // The client side of a local store (outbox.h): records waiting for a shared service, or nullptr
  // for a store that keeps none.
  virtual Outbox* outbox() { return nullptr; }
};

struct SqliteStoreOptions {
  // fsync on every commit (power-loss safe). Off: WAL with synchronous=NORMAL, which still
  // survives a killed process.
  bool synchronous_full = true;
  // Keep every key's winner (and its JSON) in memory, updated under the writer lock so it never
  // disagrees with the database; lookups then never touch SQLite. For the server, whose process
  // is meant to be the records' only writer: commits by other connections are noticed before each
  // write and by refreshIfChangedExternally(), which reload the index.
  bool index_winners = false;
  // The toolchain fields (tessera_version, llvm_version, cuda_version) records are stale against;
  // empty fields are not compared.
  Provenance current;
};

Expected<std::unique_ptr<RecordStore>> openSqliteStore(const std::string& path,
                                                       const SqliteStoreOptions& opts = {});
// Small store for tests and tools: same rules, no persistence, backup unsupported.
std::unique_ptr<RecordStore> makeMemoryStore(const Provenance& current = {});

}  // namespace tessera::cache
