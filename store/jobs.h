// Owns the contract of the measurement job queue (ARCHITECTURE.md §2.10, issue 16): workers register the
// hardware they measure on; a tuner submits a job (a kernel's IR text, candidate configs, the
// measurement settings) for one hard key; workers whose target, arch and units equal the key's
// (and whose model equals the job's, when it names one) lease its items, renew their leases by
// heartbeats, and report one result per item. The queue lives in the same database as the
// records, so a measure item's result and its record commit in one transaction: a result that
// arrives twice is stored once, and an item whose lease expired (a killed worker) goes to another
// worker. It is written once for both engines (sql_job_queue.cpp, on SQLite's one BEGIN IMMEDIATE
// writer or PostgreSQL's leases with FOR UPDATE SKIP LOCKED); times are the store's clock
// (PostgreSQL: the database's).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "store/record.h"
#include "store/store.h"
#include "support/status.h"

namespace tessera::cache {

// Item payloads and results are opaque to the queue (the API validates them): a measure item's
// payload is one config (a JSON object), a remeasure item's is an array of configs measured in
// interleaved rounds on one worker (ARCHITECTURE.md §2.7: the final ranking must not mix machines).
inline constexpr const char* kJobMeasure = "measure";
inline constexpr const char* kJobRemeasure = "remeasure";

struct WorkerInfo {
  std::string id;     // chosen by the worker (32 lowercase hex digits): re-registering is idempotent
  std::string token;  // name of the token that registered it (set by the service, never the body)
  std::string target, arch;
  int64_t units = 1;
  std::string model;   // CPU model or device name: what a job may require
  std::string device;  // device index ("" on the host)
  std::string host, tessera_version, llvm_version, toolkit_version, driver_version;
  // What runs the kernels besides the driver: the GPU runtime where the worker has one, else the
  // OS kernel and C library ("Linux 6.1.0, glibc 2.36").
  std::string runtime_version;
  int64_t slots = 1;  // items it leases at once at most
  // Read back only: the store's clock in seconds since the epoch, liveness against the policy.
  double registered_at = 0, last_seen = 0;
  bool live = false;
  int64_t leased = 0;  // items it holds now
  // Why it was set aside ("" while it is not): its measurements contradicted its submitter's own
  // (POST /v1/jobs/{id}/check). A quarantined worker may not lease, heartbeat or report again.
  std::string quarantined;
  // The signature of the probe it registered with (checkWorkerProbe; "" without one), kept in the
  // store: the id re-registers only with the same probe, across restarts (issue 47).
  std::string probe_signature;
};

// A worker's wire form, every field: what GET /v1/workers answers and `tessera workers --json`
// prints (one function, so neither drops a field the other has).
nlohmann::json workerInfoToJson(const WorkerInfo& w);

struct WorkerFilter {
  std::string target, arch, model;  // empty: any
  std::optional<int64_t> units;
  bool live_only = true;
};

// The service's timing rules, passed to every call (the store keeps no configuration).
// Fair leasing (issue 25): one token's workers hold at most max_leased_per_token items and each
// worker at most its slots; a token registers at most max_workers_per_token live ids; a heartbeat
// renews a lease for at most max_hold_s after it was taken; an idle worker of another token takes
// over an item held (and renewed) for longer than steal_after_s, so a token that leases and never
// reports delays a tune by that long, not forever (a slow honest holder loses only the race to
// report: the first report of any worker that held the item is recorded, a later one is refused;
// a token that spent its expiries of an item takes it over no more). An expired lease counts against its
// item once per token (a token whose ids vanish one after another costs the item one attempt), and
// an item is given up as a crash once max_attempts tokens lost it; one token's expiries of an item
// are bounded (kExpiriesPerToken): past them its workers leave the item to other tokens' live
// workers, and it is given up only when there are none (a candidate that takes every worker down
// with it). Whatever the tokens, an item leased leasesPerItem times without a report is given up.
// A refused item goes to another worker; it is finished as refused once max_attempts
// tokens refused it or no other live worker may take it.
struct QueuePolicy {
  double lease_s = 60;       // a lease not renewed by a heartbeat for this long expires
  double worker_ttl_s = 30;  // a worker not heard from for this long is not live
  int max_attempts = 3;      // tokens whose leases of one item may expire before it fails as a crash
  int max_workers_per_token = 64;
  int max_leased_per_token = 64;
  double max_hold_s = 3600;
  double steal_after_s = 120;
};

struct JobSpec {
  std::string id;         // chosen by the submitter (32 lowercase hex digits): a retried submission is the same job
  std::string submitter;  // token name (set by the service)
  std::string kind = kJobMeasure;
  HardKey key;
  std::string key_id;    // keyIdOf(key), set by the service
  std::string model;     // required worker model; "" = any worker of the key's target/arch/units
  std::string kernel;    // the kernel's IR text
  std::string settings;  // measurement settings, a JSON object (the worker's business)
  std::vector<std::string> items;  // payloads, canonical JSON
  int64_t rounds = 0;              // remeasure: interleaved rounds
  int64_t first_trial = 0;         // tuning cost of the records: item i is trial first_trial + i + 1
  double elapsed_s = 0;            // tuning seconds spent when the job was submitted
};

struct SubmitResult {
  bool created = false;  // false: a job with this id (and submitter) already existed
  int64_t live_workers = 0;
};

struct LeasedItem {
  std::string job_id;
  int64_t item = 0;
  std::string payload;
  int64_t attempt = 0;  // 1 for the first lease
};
struct Lease {
  std::vector<LeasedItem> items;
  std::vector<JobSpec> jobs;  // the jobs of those items
};

struct ItemReport {
  std::string worker_id, token, job_id;
  int64_t item = 0;
  std::string result;            // JSON the submitter reads back
  std::optional<Record> record;  // measure items: the measurement, stored with the result
};
enum class ReportOutcome {
  Recorded,   // stored now
  Duplicate,  // this worker reported it before: nothing changed (a retry)
  NotLeased,  // the item is not leased to this worker (its lease expired and another worker has it or did it)
};
struct ReportResult {
  ReportOutcome outcome = ReportOutcome::NotLeased;
  PutResult put;  // Recorded measure items: the record's put
};

struct JobItemView {
  int64_t item = 0;
  std::string state;  // queued | leased | done
  std::string worker_id, result;
  int64_t attempts = 0, record_id = 0;
};
struct JobView {
  JobSpec spec;
  std::string state;  // open | done | cancelled
  std::vector<JobItemView> items;  // all, or those changed since the cursor asked for
  int64_t live_workers = 0;        // live workers that may lease it
  int64_t done_items = 0;          // of all its items
  int64_t changes = 0;             // the cursor: changes of its items so far
};

// Errors of the queue's calls: NotFound (an unknown worker, job or item), InvalidArgument (an id of
// another token or submitter), Unsupported (a quarantined worker), RuntimeError (a fairness limit:
// too many live workers for one token).
// The dashboard's view of the queue (issue 28): recent jobs with how many of their items are
// queued, leased (a lease that has not expired) and done, and the totals over open jobs.
struct JobSummary {
  std::string id, submitter, kind, model, state;  // state: open | done | cancelled
  HardKey key;
  std::string key_id;
  int64_t items = 0, queued = 0, leased = 0, done = 0;
  double created_at = 0, finished_at = 0;  // the store's clock; finished_at 0 while open
  std::vector<std::string> holders;        // workers holding live leases on its items
};
struct QueueTotals {
  int64_t open_jobs = 0, queued = 0, leased = 0, done = 0;  // items of open jobs
};
struct JobList {
  std::vector<JobSummary> jobs;  // newest first
  QueueTotals totals;            // over every submitter's open jobs
  double now = 0;                // the store's clock when read
};
inline constexpr int kMaxJobList = 500;
// The SQL both engines run for jobList(): `numbered` picks $n placeholders (PostgreSQL) over ?n.
// jobs: (now, submitter or '', limit); holders: (job id, now); totals: (now).
std::string jobListSql(bool numbered);
std::string jobHoldersSql(bool numbered);
std::string queueTotalsSql(bool numbered);

class JobQueue {
 public:
  virtual ~JobQueue() = default;
  // Inserts or refreshes a worker (live from now on). InvalidArgument when the id belongs to
  // another token; RuntimeError when the token has max_workers_per_token other live workers.
  virtual Status registerWorker(const WorkerInfo& w, const QueuePolicy& p) = 0;
  // Marks the worker live and renews every lease it holds. NotFound for an unknown worker or
  // another token's: it registers again.
  virtual Expected<int64_t> heartbeat(const std::string& worker_id, const std::string& token, const QueuePolicy& p) = 0;
  virtual Expected<std::vector<WorkerInfo>> workers(const WorkerFilter& f, const QueuePolicy& p) = 0;
  // A worker of `token` stops (a clean exit): it is no longer live from now on, whatever its TTL,
  // and the items it holds go back to the queue at once. Returns how many items it gave back.
  // NotFound for an unknown worker or another token's; a stopped worker that beats or leases is
  // unknown until it registers again.
  virtual Expected<int64_t> deregisterWorker(const std::string& worker_id, const std::string& token) = 0;
  // Queues a job (all or nothing). A job with the same id and submitter is the same job (a retry);
  // another submitter's is InvalidArgument.
  virtual Expected<SubmitResult> submit(const JobSpec& job, const QueuePolicy& p) = 0;
  // Up to max_items items of open jobs that match the worker: queued ones, ones whose lease
  // expired, and ones still leased to this worker (a lease whose answer was lost). Marks the worker
  // live. Items whose leases expired max_attempts times are failed instead (a result naming the
  // lost workers, no record).
  virtual Expected<Lease> lease(const std::string& worker_id, const std::string& token, int max_items,
                                const QueuePolicy& p) = 0;
  // Completes an item leased to the worker: the result and (measure items) the record in one
  // transaction, the record stored with `put` (its writer: the worker's token).
  virtual Expected<ReportResult> report(const ItemReport& r, const PutOptions& put) = 0;
  // The worker will not run the item's job (r.result says why, a JSON object): the item returns
  // to the queue for another worker, or is finished with that result (refusalStep).
  virtual Expected<ReportOutcome> refuse(const ItemReport& r, const QueuePolicy& p) = 0;
  // Sets a worker aside (WorkerInfo::quarantined = why) and returns its leases to the queue; the
  // ids of the records it reported that the queue still knows (jobs of the last keep_finished_s),
  // which the caller quarantines. NotFound for an unknown worker.
  // `submitter`: only the records of that token's jobs are returned to be set aside (issue 47: one
  // write token's false check on its own job set aside an honest worker's records of everyone's).
  virtual Expected<std::vector<int64_t>> quarantineWorker(const std::string& worker_id, const std::string& why,
                                                          const std::string& submitter) = 0;
  // since >= 0: only the items changed after the cursor `since` (JobView::changes of an earlier
  // answer), without their payloads (spec.items stays empty); since < 0: every item.
  virtual Expected<std::optional<JobView>> job(const std::string& job_id, const QueuePolicy& p,
                                               int64_t since = -1) = 0;
  // Queued items are never leased afterwards (leased ones may still report). false: no such open job.
  virtual Expected<bool> cancel(const std::string& job_id) = 0;
  // Deletes finished (done or cancelled) jobs older than keep_finished_s and cancels open jobs
  // older than max_open_s; workers not seen for max_open_s are forgotten. Returns the jobs removed.
  virtual Expected<int64_t> purge(double keep_finished_s, double max_open_s) = 0;
  // Jobs of `submitter` ("" = everyone's), newest first, at most `limit` (1..kMaxJobList), with
  // the totals of the queue, in one snapshot.
  virtual Expected<JobList> jobList(const std::string& submitter, int limit, const QueuePolicy& p) = 0;
};

// The part of a report both engines decide alike from the item's row (its state, holder, record
// and `past_holders`, the workers whose leases of it expired or were taken over): NotLeased when
// the item is not this worker's to report, Duplicate when it is done already (the earlier record's
// id); nullopt when the report is to be recorded now (the holder's, or a past holder's while the
// item is open: the first report wins).
std::optional<ReportResult> settledReport(const std::string& state, const std::string& holder,
                                          const std::string& worker_id, int64_t record_id,
                                          const std::string& past_holders = "");

// One candidate item of a lease as both engines read it: its state, its holder and the holder's
// token, the workers and tokens that lost it before, the workers that refused it, its leases so far.
struct LeaseCandidate {
  std::string state, holder, holder_token, lost_workers, lost_tokens, refused_by;
  std::string stolen_by;  // the tokens that took it over from a live holder, once per take-over
  int64_t attempts = 0;
  bool expired = false;  // leased, and its lease expired
  double held_s = 0;     // leased: seconds since the lease was taken
};
struct LeaseStep {
  enum Kind { Take, Skip, GiveUp } kind = Skip;
  bool mine = false;                      // the worker's own unanswered lease (not a new one)
  bool total_bound = false;               // GiveUp: the item reached leasesPerItem
  int64_t attempts = 0;                   // Take: leases of the item with this one
  std::string lost_workers, lost_tokens;  // with the holder whose lease expired or was taken over
  std::string stolen_by;                  // with the token of this take-over of a live holder's lease
};
// What the lease of `worker_id` (of `token`, holding `held` items) does with one candidate
// (QueuePolicy's rules), for both engines. `others_live` counts the live workers of other tokens
// that may still take the item given its lost tokens (asked only when `token` spent its expiries).
LeaseStep leaseStep(const LeaseCandidate& c, const std::string& worker_id, const std::string& token, int64_t held,
                    const QueuePolicy& p, const std::function<int64_t(const std::string&)>& others_live);
// Leases of one item by one token's workers that may expire before that token leaves it to others.
inline constexpr int64_t kExpiriesPerToken = 4;
// Take-overs of a live (heartbeating) holder's lease of one item by one token's workers: charged to
// the token that takes over, as expiries are to the token that lets them lapse (issue 47: two
// tokens' renewing workers took one item from each other until the total bound gave it up).
inline constexpr int64_t kTakeOversPerToken = kExpiriesPerToken;
// Whether `token` lost its leases of an item kExpiriesPerToken times (`lost_tokens` of the item).
bool tokenSpentItsExpiries(const std::string& lost_tokens, const std::string& token);
// Leases of one item, whatever their tokens, per max_attempts: each token's bounded expiries, each
// after at most one take-over of a live holder's lease.
inline constexpr int64_t kLeasesPerAttempt = 2 * kExpiriesPerToken;
// The total bound on an item's leases (first leases, take-overs, steals): at it the item is given
// up, so no item is leased unboundedly and a tune always ends (issue 47: a hoarding token's steals
// and expiries of a slow candidate leased it 87 times while the tune waited).
int64_t leasesPerItem(const QueuePolicy& p);
// How many items a lease may hand out: what the worker asked for, within its slots and what its
// token may still hold (held_by_token counts the worker's own live leases too, which the lease
// hands out again first).
int leaseBudget(int requested, int64_t slots, int64_t held_by_worker, int64_t held_by_token, const QueuePolicy& p);
// After worker `worker_id` of `token` refused an item that `refused_by` (a comma list of
// "token:worker_id") names the refusals of so far, and `others_live` other live workers (not
// quarantined, not among the refusers) could take it. The item is finished as refused when no one
// else could, or once max_attempts distinct tokens refused it: refusals count per token (issue 47:
// three ids of one token refusing ended every item while an honest worker of another token was
// live), while another worker of the refuser's token may still take it (a limit of that worker's).
struct RefusalStep {
  std::string refused_by;
  bool finished = false;
};
RefusalStep refusalStep(const std::string& refused_by, const std::string& token, const std::string& worker_id,
                        int64_t others_live, const QueuePolicy& p);
// Whether `worker_id` is among the refusals of `refused_by`.
bool refusedBy(const std::string& refused_by, const std::string& worker_id);
bool listHas(const std::string& comma_list, const std::string& item);

// Issue 47: a worker's registered hardware checked against the probe it reports (`probe`: the
// CPU's model string, cores, ISA flags and cache sizes as the worker's start probed them): the
// registered model must be the probed one, the threads at most its cores, and a host ISA level one
// its flags carry. An error names the field; otherwise the probe's signature (16 hex digits of the
// SHA-256 of its canonical JSON), which two workers of one kind of machine share.
Expected<std::string> checkWorkerProbe(const WorkerInfo& w, const nlohmann::json& probe);

bool isJobId(std::string_view s);  // 32 lowercase hex digits (also worker ids)
// The result the queue stores for an item it failed after `attempts` expired leases: a JSON object
// {"lost": attempts, "message": ...} (a candidate that takes its worker down with it, or a fleet
// that keeps dying, costs that one item, not the tune).
std::string lostItemResult(int64_t attempts, const std::string& lost_workers, bool total_bound = false);
// Seconds since the epoch on this machine's clock (the SQLite engine's clock).
double epochSeconds();

}  // namespace tessera::cache
