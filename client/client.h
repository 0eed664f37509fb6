// Owns the C++ client of the shared tuning cache, used by `tessera tune` and `tessera cache`.
// It fails open: a service that is down, slow, or refuses us is a miss plus a warning, never an
// error that could fail a tuning run. Results tuned while the service was unreachable wait in the
// local store's outbox and are pushed by pushOutbox() on the next run.
//
// Typical tuner use:
//   CacheClient cache({.base_url = url, .token = token});          // from --cache/TESSERA_*
//   auto local = openSqliteStore("tessera.db");                      // --db
//   pushOutbox(**local, cache);                                      // leftovers of earlier runs
//   LookupResult hit = cache.best(key, my_provenance);
//   if (hit.kind == LookupResult::Kind::Hit && !hit.stale) { ...compile hit.record->config... }
//   if (!hit.warning.empty()) log(hit.warning);
//   ... tune ...
//   (*local)->put(records, {.outbox = true});                        // every measured candidate
//   OutboxReport rep = pushOutbox(**local, cache);                   // best effort
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "store/record.h"
#include "store/store.h"

namespace tessera::cache {

class ServiceEndpoints;

struct CacheClientOptions {
  // http://host:port[/prefix]; empty = no shared cache (silent misses). Several URLs separated by
  // commas (replicas, or nginx fronts): a request that gets no answer goes to the next one.
  std::string base_url;
  std::string token;     // bearer token; empty = anonymous
  std::string ca_cert;   // https: PEM file the service's certificate must chain to (empty: system CAs)
  double timeout_s = 1.0;        // connect + lookup timeout
  double write_timeout_s = 5.0;  // record submission
  double bulk_timeout_s = 60.0;  // export / import pages
  // After a transport failure, calls are skipped (instant miss) for this long, so a tuner that
  // looks up many kernels pays the timeout once, not per kernel.
  double backoff_s = 30.0;
};

struct LookupResult {
  enum class Kind { Hit, Nearest, Miss };
  Kind kind = Kind::Miss;
  std::optional<Record> record;             // Hit: the key's winner (record->id/stale filled)
  bool stale = false;                       // Hit: measured with another toolchain or CPU
  std::vector<std::string> stale_reasons;   // e.g. "toolchain_superseded", "llvm_version"
  std::vector<NearestMatch> nearest;        // Nearest: winners of the closest shapes, closest first
  std::string warning;                      // non-empty when the service could not answer
  int http_status = 0;                      // with a warning: the refusing answer's status (0: no answer)
  std::string raw_json;                     // the service's answer, for printing
  // The service refused the credentials (401 unknown token, 403 scope): callers treat this as an
  // error, not as a miss, since nothing the user meant to share or read happens.
  bool refused() const { return http_status == 401 || http_status == 403; }
};

// Who the service takes the configured token for (GET /v1/whoami): its name and scope ("read",
// "write", "admin", "worker"; "anonymous" without a token where anonymous reads are allowed,
// "none" without one where they are not).
struct Identity {
  std::string name, scope;
};

struct PushResult {
  bool ok = false;                  // every record acknowledged
  std::vector<PutResult> results;   // one per record when ok
  int http_status = 0;              // of the failing request; 0 = no answer (down, slow)
  std::string warning;
};

struct ExportPage {
  std::string jsonl;       // one record per line
  int64_t next_since = 0;  // pass as `since` for the next page
  bool more = false;
};

class CacheClient {
 public:
  explicit CacheClient(CacheClientOptions opts);
  ~CacheClient();
  CacheClient(const CacheClient&) = delete;
  CacheClient& operator=(const CacheClient&) = delete;

  bool enabled() const { return !opts_.base_url.empty(); }
  const CacheClientOptions& options() const { return opts_; }

  // Exact winner for a hard key; without one, the nearest tuned shapes when allow_nearest.
  // `current` (optional fields) is the caller's own provenance: differences flag the hit stale.
  LookupResult best(const HardKey& key, const Provenance& current = {}, bool allow_nearest = true);
  LookupResult bestById(const std::string& key_id, const Provenance& current = {});

  // One page of GET /v1/records (ascending id; quarantined records are never listed). Records a
  // tuner learns from (a warm start): an error, never a crash, whatever the service sends.
  Expected<ListPage> list(const ListQuery& q);

  // Submits records (sent in chunks of at most 500); ok only if every record was acknowledged.
  PushResult put(std::span<const Record> records);

  // Bulk and admin calls: real errors here, since a person is waiting for the answer.
  Expected<ExportPage> exportPage(int64_t since, int limit = 10000);
  Expected<std::string> importLines(const std::string& jsonl, bool partial);  // report JSON
  Expected<std::string> status();                                             // /status JSON
  // Keys of the service whose key id or workload hash starts with `prefix` (4-64 lowercase hex:
  // the 12 characters `tessera run` and `tessera tune` print), at most `limit`, through the
  // dashboard's search (GET /v1/kernels?q=). Real errors, like the bulk calls.
  struct KeyMatch {
    std::string key_id;
    HardKey key;
  };
  Expected<std::vector<KeyMatch>> findKeys(const std::string& prefix, int limit = 50);
  // The canonical IR text filed under a workload hash (GET /v1/kernel-texts/{workload}), checked
  // here before it is returned: nothing the service sends is trusted, so a text that does not hash
  // to `workload`, is over 64 KiB or is not printable ASCII is an error naming the service
  // (kernel_text.h). nullopt when the service has no text for it (404). Real errors otherwise.
  Expected<std::optional<std::string>> kernelText(const std::string& workload);
  // The token's identity. PermissionDenied for a token the service does not know (401);
  // Unavailable when no URL answers; NotFound from a service too old to have the route.
  Expected<Identity> whoami();
  // Before a command relies on the shared cache: may the configured token do `need` ("read" or
  // "write")? PermissionDenied, saying what to do, for an unknown token, no token where one is
  // needed, or a scope below `need`; Unavailable when the service does not answer (callers go on
  // without it, with a warning: a cache that is down is a miss). OK when the service predates
  // /v1/whoami. `what` names the command in the message ("tune shares its results").
  Status checkAccess(const std::string& need, const std::string& what);
  Expected<std::string> backup(const std::string& label = "");               // admin scope
  // Admin scope: GET /v1/admin/records?<query> (a page of records JSON) and POST
  // /v1/admin/records/<action> with a selector body (quarantine, release, delete).
  Expected<std::string> adminRecords(const std::string& query);
  Expected<std::string> adminAction(const std::string& action, const std::string& selector_json);
  // A reader's refutation of record `id` (POST /v1/records/{id}/dispute, read scope): true when
  // the service demoted it (another token's claim). Errors: no answer, 429 past the token's rate.
  Expected<bool> dispute(int64_t id, const std::string& why, double measured_us = 0);
  // Every candidate of a key the service lists (ok, unquarantined, not refuted), at most `limit`,
  // in the winner order of trust.h (isBetter): what a reader falls back to when it refutes one.
  Expected<std::vector<Record>> candidates(const std::string& key_id, int limit = 200);

 private:
  struct Reply {
    int status = 0;
    std::string body;
    std::string next_since, more;  // export headers
  };
  // Transport-level result; an Error means no HTTP answer arrived (or backoff is active).
  Expected<Reply> call(const char* method, const std::string& path, const std::string& body,
                       const std::string& content_type, double timeout_s);
  LookupResult lookup(const std::string& path_and_query);
  std::string describe(const Reply& r) const;  // "HTTP 401 (unknown or revoked token)"
  // A non-200 answer as an error: 401/403 PermissionDenied (with what to do), others `other`.
  Error replyError(const std::string& what, const Reply& r, ErrorCode other = ErrorCode::RuntimeError) const;

  CacheClientOptions opts_;
  std::mutex mu_;
  std::unique_ptr<ServiceEndpoints> endpoints_;
  std::chrono::steady_clock::time_point skip_until_{};
};

struct OutboxReport {
  size_t pushed = 0;     // acknowledged by the service and marked pushed
  size_t rejected = 0;   // refused as invalid by the service (dropped from the outbox, warned)
  size_t remaining = 0;  // still waiting (service down/slow); pushed on a later run
  std::string warning;
};
// Pushes `local`'s outbox in batches, marking each acknowledged batch pushed. Submissions are
// idempotent on the service (same fingerprint = same record), so a batch whose answer was lost
// is simply pushed again next time.
OutboxReport pushOutbox(RecordStore& local, CacheClient& client, size_t max_records = SIZE_MAX);

// Files in `local`'s kernel table the texts of `records`' kernels that it lacks, fetched from the
// service and checked by kernelText(), so that winners pulled from a shared cache can be compiled
// again (bundle --all-winners). Each workload is asked for once. Returns how many texts were filed;
// the first refusal (a text that does not hash to its workload) or failure goes to `warning`.
struct KernelTextReport {
  size_t filed = 0, missing = 0, refused = 0;
  std::string warning;
};
KernelTextReport fetchKernelTexts(RecordStore& local, CacheClient& client, std::span<const Record> records);

}  // namespace tessera::cache
