// Owns the client side of the measurement job protocol (jobs.h, api_jobs.cpp), for both ends: a
// worker registers, heartbeats, leases and reports; a tuner submits jobs, follows their items and
// cancels them. Unlike the fail-open CacheClient, errors here are real (a tune that measures
// through workers cannot go on without the service), but transient ones are retried: every call
// goes through the replicas' URL list (endpoints.h) and is repeated, with a short backoff, while
// no replica answers, for up to `patience_s`. All calls are idempotent, so a repeat is safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "client/endpoints.h"
#include "store/jobs.h"
#include "store/record.h"
#include "support/status.h"

namespace tessera::cache {

struct JobClientOptions {
  std::vector<std::string> urls;
  std::string token;
  std::string ca_cert;
  double timeout_s = 10;   // one request
  double patience_s = 30;  // retrying while no replica answers
};

// What the service grants a registered worker.
struct WorkerGrant {
  double lease_s = 60, heartbeat_s = 10, worker_ttl_s = 30;
};

// A worker's result for one item, as the submitter reads it back.
struct ItemResult {
  std::string worker;
  std::string token;                  // the worker's token: whose word its records are (trust.h)
  std::vector<Record> records;        // measure: one (stored); remeasure: one per config (not stored)
  std::vector<std::string> messages;  // why a candidate failed (one per record, may be empty)
  double compile_s = 0, run_s = 0;
  int64_t lost = 0;  // >0: the queue gave up on the item after this many lost leases (no records)
  std::string lost_message;
  std::string refused;  // non-empty: the worker refused the job (why) and no other worker took it; no records
};

// The service's verdict on the submitter's own measurement of a config a worker measured
// (POST /v1/jobs/{id}/check).
struct CheckVerdict {
  bool agrees = true;  // the worker's time is not contradicted (trust.h)
  std::string worker;
  double claimed_us = 0, measured_us = 0;
  bool quarantined = false;  // the worker was set aside, and this many of its records with it
  int64_t quarantined_records = 0;
};

struct JobItemProgress {
  int64_t item = 0;
  std::string state;  // queued | leased | done
  int64_t attempts = 0;
  std::string worker;
  std::optional<ItemResult> result;  // done items
};

struct JobProgress {
  std::string state;  // open | done | cancelled
  int64_t live_workers = 0;
  std::vector<JobItemProgress> items;
};

// A lease as the worker receives it: items, and the jobs they belong to.
struct LeaseGrant {
  std::vector<LeasedItem> items;  // payload: canonical JSON text
  std::vector<JobSpec> jobs;      // settings: JSON text
};

// Errors: NotFound (unknown worker or job: register again / the job is gone), InvalidArgument
// (refused: the message says why), Unsupported (lease lost: 409), IOError (no replica answered
// within patience_s).
class JobClient {
 public:
  explicit JobClient(JobClientOptions o);
  const JobClientOptions& options() const { return o_; }
  std::string currentUrl() const { return endpoints_.current(); }

  // Worker side.
  // `probe_json`: what the worker's start probed of its machine (jobs.h checkWorkerProbe), a JSON
  // object the service checks the registered hardware against; "" sends none.
  Expected<WorkerGrant> registerWorker(const WorkerInfo& w, const std::string& probe_json = "");
  Expected<int64_t> heartbeat(const std::string& worker_id);
  // The worker stops: no longer live at once, its leased items back in the queue (how many).
  Expected<int64_t> deregister(const std::string& worker_id);
  Expected<LeaseGrant> lease(const std::string& worker_id, int max_items);
  // `records`: record JSON objects (text) for the item; `messages`: one per record or none.
  // Returns "recorded" or "duplicate".
  Expected<std::string> report(const std::string& worker_id, const std::string& job_id, int64_t item,
                               const std::vector<Record>& records, const std::vector<std::string>& messages,
                               double compile_s, double run_s);

  // The worker will not run this item's job (why): reported instead of a measurement.
  Expected<std::string> refuse(const std::string& worker_id, const std::string& job_id, int64_t item,
                               const std::string& why);

  // Submitter side. `configs`: config JSON objects (text).
  Expected<SubmitResult> submit(const JobSpec& job, const std::vector<std::string>& configs);
  // Every item of the job. While a job is open the client remembers what it last saw and asks only
  // for the items changed since (the answer's cursor); a service that has no cursor answers in full.
  Expected<JobProgress> progress(const std::string& job_id);
  Status cancel(const std::string& job_id);
  // The spot check: this machine's measurement of the config of an item of one of its jobs.
  Expected<CheckVerdict> check(const std::string& job_id, int64_t item, const Record& here);
  Expected<std::vector<WorkerInfo>> workers(const WorkerFilter& f);

 private:
  struct Answer {
    int status = 0;
    std::string body;
  };
  Expected<Answer> call(const char* method, const std::string& path, const std::string& body);
  Error refusal(const std::string& what, const Answer& a) const;

  // Open jobs this client follows: the cursor and the progress of its last answer (at most
  // kMaxFollowed jobs; shared by copies of the client).
  struct Followed {
    int64_t cursor = 0;
    JobProgress progress;
  };
  struct FollowState {
    std::mutex mu;
    std::map<std::string, Followed> jobs;
  };
  static constexpr size_t kMaxFollowed = 64;
  Expected<JobProgress> fetchProgress(const std::string& job_id, std::optional<int64_t> since, int64_t& cursor);

  JobClientOptions o_;
  ServiceEndpoints endpoints_;
  std::shared_ptr<FollowState> follow_ = std::make_shared<FollowState>();
};

// 32 lowercase hex digits from the OS random source: job and worker ids.
Expected<std::string> newJobId();

}  // namespace tessera::cache
