// Owns one tuning session of one workload on one target (ARCHITECTURE.md §2), in order: the cache
// first (a fresh winner in the local store or the shared cache ends the session), the store's
// results as seeds (or all of them with --resume), the cost model warm-started from other
// workloads of the family, the strategy, measurement through a Measurer backend, every record
// committed as it is measured, the interleaved top-k re-measurement and the stored winner.
// Front ends (`tessera tune`, the replay benchmark, later Python and workers) build the typed
// settings, pick a Measurer and print what the named callbacks report; nothing here prints.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client/client.h"
#include "store/record.h"
#include "store/store.h"
#include "costmodel/cost_model.h"
#include "costmodel/features.h"
#include "ir/ir.h"
#include "ir/schedule.h"
#include "measure/measurer.h"
#include "search/strategy.h"
#include "search/transfer.h"
#include "search/timing_load.h"
#include "search/tuner.h"
#include "session/verify_hit.h"
#include "search/warm_start.h"
#include "support/status.h"
#include "targets/target_desc.h"

namespace tessera::session {

// What a session tunes: the workload's key, the space searched, the target, and how the cost
// model sees a config of a workload of this family (this one, or a stored sibling's for the warm
// start).
struct TuneProblem {
  cache::HardKey key;
  ir::Space space;
  TargetDesc target;
  std::function<std::unique_ptr<costmodel::FeatureExtractor>(const cache::HardKey&)> features;
  // GPU targets: the analytic model's predicted time of a config. The evolutionary search's first
  // batch comes from its top and the cost model sees it as a feature; `ranked` orders by it.
  search::Prior prior;
  // The kernel's canonical text (store/kernel_text.h): filed in the store's kernel table
  // under key.workload, so that the store's winners can be compiled again (bundle --all-winners).
  std::string kernelText;  // empty: none kept
};

// The problem of tuning `k` on `t`: its key, its space (narrowed by `spaceSpec`, e.g.
// "MR=6|8,schedule=packed") and the target's features (derived host features on the host).
Expected<TuneProblem> tuneProblem(const ir::Kernel& k, const TargetDesc& t, const std::string& spaceSpec = "");

// The analytic prior of one key's records of a GPU target (a record export, a replay table): the
// kernel parsed back from the first record that carries its text, on the product the records'
// provenance names when the GPU table knows it (a device's own row), else the target's default
// product; as tuneProblem makes it for a tune on that device. Empty when no record carries the
// text or the target is no GPU.
search::Prior recordsPrior(const std::vector<cache::Record>& recs);

enum class CachePolicy {
  UseStored,  // a fresh stored winner ends the session; stored ok results seed the search
  Resume,     // continue: every stored result of the key is known, nothing is re-measured
  Force,      // start over: the store is neither asked nor used as seeds
};

struct SessionSettings {
  search::TuneSettings loop;  // strategy, seed and batch (loop.search), trials, time budget, top-k
  CachePolicy cache = CachePolicy::UseStored;
  bool warmStart = true;  // evolutionary only: pre-train the model on stored sibling workloads
  search::WarmStartSettings warm;
  // Evolutionary only, GPU keys: learn from this kernel's records on other GPUs (the store's and
  // the shared cache's, or the given warm records).
  search::TransferSettings transfer;
  size_t warmScanLimit = 50000;  // records of other workloads read for the warm start at most
  size_t transferPages = 5;      // pages of 1000 records of this kernel on other GPUs asked of the shared cache
  costmodel::ModelSettings model;
  // Records go to the shared cache's outbox too (pushed when the session ends).
  bool pushToCache = true;
  // Estimating (the estimate measurer): a stored estimate of this model (estimator name) counts
  // as done, unless a measurement exists, which always wins. Empty: estimates never end a session.
  std::string acceptEstimatesOf;
};

// Named callbacks (style.md 3). Any may be empty.
struct SessionCallbacks {
  std::function<void(const measure::TrialResult&, const search::TuneProgress&)> onTrial;  // progress
  std::function<void(const std::vector<cache::Record>&)> onRecordsCommitted;     // after each batch
  std::function<void(const std::string&)> onWarning;                             // one line, no prefix
  std::function<bool(const search::TuneProgress&)> shouldStop;                   // e.g. Ctrl-C
  std::function<void(const search::WarmStart&)> onWarmStart;                     // before the first batch
  std::function<void(const search::Transfer&)> onTransfer;                       // before the first batch
  std::function<void(double)> onTransferDropped;  // the other GPUs disagreed (their rank correlation)
  // The probe found these other GPUs (Transfer::from's lines) ranking this one alike: they lead.
  std::function<void(const std::vector<std::string>&)> onTransferLed;
  // A winner from the shared cache, or a stored winner this machine did not measure and nobody
  // confirmed (a worker's claim), is used only when this accepts it (verify_hit.h: compiled,
  // checked against the reference, and a claim re-timed by the front end); a rejected hit is
  // reported, not used, and the session tunes. What `check` measured here is stored as this
  // machine's measurement and shared: a second identity's word on the claim (trust.h).
  std::function<Status(const cache::Record&, HitCheck* check)> verifySharedHit;
  // Measured through workers (their results carry an origin): the spot check of the winner. This
  // machine measures the given configs itself when it can (interleaved when there are several;
  // nullopt when it cannot: no device of the target, another CPU) ...
  std::function<std::optional<std::vector<measure::TrialResult>>(const std::vector<ir::Config>&)> measureHere;
  // ... the control of a re-timing on the host: how much slower than on free cores a kernel of that
  // many threads runs here now (support/load.h coreShareSlowdown; empty: no control, a device) ...
  std::function<double(int threads)> controlHere;
  // A tune measured on this machine's cores: the same control around the final interleaved
  // re-measurement (search/timing_load.h; empty: measured elsewhere, on a device or estimated).
  std::function<double(int threads)> loadControl;
  // ... and the front end reports that measurement of a worker's result to the service (which
  // quarantines the worker when it is contradicted).
  std::function<void(const measure::TrialResult& claimed, const cache::Record& here)> reportSpotCheck;
  // The factor the spot check judges with (cache::spotCheckFactor: the noise's when this machine
  // is the workers' model, more room when it is another CPU of their ISA level and threads).
  double spotAgreeFactor = 1.5;
};

// The spot check of a tune measured by workers (SessionCallbacks::measureHere).
struct SpotCheck {
  bool ran = false;      // this machine measured the workers' winner itself
  bool agreed = true;    // its time did not contradict the worker's claim
  double claimed_us = 0, here_us = 0;
  std::string writer, worker;  // whose claim (token, worker id)
  bool remeasuredHere = false;  // contradicted: the top candidates were re-measured here
  // The first re-timing contradicted the claim: best of `rounds` more, each between two readings
  // of the control; only quiet ones (the control at most kQuietSlowdown) count.
  double first_us = 0;          // that first re-timing
  int rounds = 0, quiet = 0;    // re-timings, and how many of them were quiet
  double busiest = 1;           // the control's largest slowdown over the re-timings
  bool judged = true;           // false: no quiet re-timing; nothing reported, the claim kept unconfirmed
};

struct SessionResult {
  enum class Outcome {
    AlreadyTuned,     // a fresh winner was stored: `cached`, from `cachedFrom` (with acceptEstimatesOf,
                      // possibly an estimate: cached->status == estimated)
    Tuned,            // `tune.best` is the winner, stored as `winner`
    NothingCorrect,   // every candidate failed (statusCounts says how)
  };
  Outcome outcome = Outcome::NothingCorrect;
  cache::HardKey key;
  std::string keyId;
  std::optional<cache::Record> cached;
  std::string cachedFrom;  // "local" or the service URL
  search::TuneResult tune;
  std::map<std::string, int> statusCounts;
  search::WarmStart warm;
  int transferGpus = 0;                  // other GPUs this run learned from
  std::vector<std::string> transferFrom;  // one line per GPU
  std::vector<std::string> transferLed;  // the other GPUs that led the search (all of them, from the first batch)
  bool transferDropped = false;           // they disagreed with this GPU's measurements
  double transferAgreement = 0;           // the rank correlation that dropped them
  std::optional<cache::Record> winner;
  // Set when the store's winner of the key after this run is not `winner` (an earlier run's record
  // stays faster): what `best` serves, and so what the front end shows as the winner.
  std::optional<cache::Record> served;
  double speedupOverDefault = 0;  // same-run medians of the default and the winner (0: unknown)
  bool stopped = false;           // shouldStop ended the search early
  SpotCheck spot;                 // a tune through workers: what this machine found
  search::TimingLoad timing;      // a tune measured here: the load around it and the verdict
  // AlreadyTuned: the hit is a claim this machine verified (re-timed) rather than a confirmed record.
  bool cachedWasClaim = false;
  // What this run sent to the shared cache (its outbox, earlier runs' leftovers included): records
  // the service acknowledged, refused as invalid, and still waiting; `to` is "" when none was asked.
  struct Pushed {
    std::string to;
    size_t records = 0, rejected = 0, remaining = 0;
  } pushed;
};

// Runs the session. `store` may be null (nothing looked up or committed: replay), `client` null or
// disabled (no shared cache). `warmRecords`, when given, replaces the store as the warm start's
// source (the replay benchmark's sibling tables).
Expected<SessionResult> runTuneSession(const TuneProblem& p, measure::Measurer& measurer, cache::RecordStore* store,
                             cache::CacheClient* client, const cache::Provenance& provenance,
                             const SessionSettings& s, const SessionCallbacks& cb,
                             const std::vector<cache::Record>* warmRecords = nullptr);

}  // namespace tessera::session
