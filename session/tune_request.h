// Owns one tune as every front end asks for it: the TuneRequest (kernel, target, where candidates
// are measured, budget, strategy, store, shared cache, threads, seed, callbacks), its checks, and
// the one call that opens and runs it (`tessera tune`, `compare --tune`, Python's tune). Front
// ends build a request, print or return what comes back, and map errors to their own idiom
// (an exit code, a Python exception); the words of every message name the options as the
// front end spells them (Dialect).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "client/client.h"
#include "store/store.h"
#include "ir/ir.h"
#include "measure/estimate.h"
#include "measure/measurer.h"
#include "measure/protocol_measurer.h"
#include "measure/records.h"
#include "session/tune_session.h"
#include "session/target_choice.h"
#include "support/status.h"
#include "targets/target_desc.h"

namespace tessera::session {

// Candidates a tune tries unless told: measured ones, and the model's top checked through the
// compiler when estimating (`--help` says both; a range tune takes them per point).
inline constexpr int kDefaultTrials = 200;
inline constexpr int kDefaultEstimateTrials = 32;

// Where a tune's candidates are measured: the host (forked children), a GPU of the target's
// architecture (the device measurer), the emulated device (the GPU kernels' emulated form on this
// CPU, timings labelled and never stored), the analytic model (nothing runs, records stored as
// estimated) or the live workers of the target through the shared service.
struct MeasureChoice {
  std::unique_ptr<measure::Measurer> measurer;
  std::string where;  // for the report: "host", "NVIDIA H100 80GB HBM3 (sm_90)", "emulated sm_80 (...)"
  bool emulated = false;
  bool estimated = false;
  // A device is attached and the GPU table knows its name: its product (SMs, clocks, peaks). An
  // unknown device keeps the target, with the device's name as its model.
  std::optional<TargetDesc> device;
  // Through workers: the spot check of their winner (SessionCallbacks). measureHere is
  // empty when this machine cannot measure the workers' hardware; reportSpotCheck tells the
  // service and returns the line the tune prints.
  std::function<std::optional<std::vector<measure::TrialResult>>(const std::vector<ir::Config>&)> measureHere;
  std::function<std::string(const measure::TrialResult&, const cache::Record&)> reportSpotCheck;
  std::function<double(int)> controlHere;  // the re-timing's control (SessionCallbacks)
  std::function<double(int)> loadControl;  // a tune measured on this machine's cores: the same control
  std::string whyNotHere;  // when measureHere is empty
  double spotAgreeFactor = 1.5;  // SessionCallbacks::spotAgreeFactor
};

// `device`: "" (the first device of the target's vendor), an index, "emulated" or
// "emulated-pre". Errors are InvalidArgument with the one-line message a user needs, Unsupported
// when the target's device is not here (with what to do instead).
Expected<MeasureChoice> chooseMeasurer(const ir::Kernel& k, const TargetDesc& t, const std::string& device, bool estimate,
                                       const measure::MeasureSettings& ms, const Dialect& d = {});
// Measuring through the live workers of `t` (the service of `service`, several URLs for
// replicas). Replaces `t` by the workers' hardware (the host: their ISA level, cores and CPU
// model), which is what the key and the space describe. Unavailable, in one line, when no live
// worker shows up within `wait_s`. `threads` (kAllCores or N): only host workers of that many
// threads answer.
Expected<MeasureChoice> chooseWorkers(const ir::Kernel& k, TargetDesc& t, const cache::CacheClientOptions& service,
                                      int threads, double wait_s, const measure::MeasureSettings& ms,
                                      const std::function<void(const std::string&)>& onWarning, const Dialect& d = {});

// Before a front end relies on the shared cache for `need` ("read" or "write"): a refusal (an
// unknown token, none where one is needed, a scope below `need`) is a PermissionDenied error; a
// service that does not answer is one warning ("tessera cache URL: why; continuing without it")
// and the command goes on without it.
Status checkCacheAccess(cache::CacheClient& c, const std::string& need, const std::string& what,
                        const std::function<void(const std::string&)>& onWarning);

struct TuneRequest {
  ir::Kernel kernel;
  TargetDesc target;
  std::string space;  // narrowed knob domains, e.g. "schedule=packed,MR=6|8"
  // Where candidates are measured (MeasureChoice).
  std::string device;
  bool estimate = false;
  bool estimateWithoutDevice = false;  // a GPU target with no device here is estimated (compare --tune)
  bool workers = false;
  double workerWait = 30;
  int threads = kAllCores;  // host kernels' threads, the key's units (already in `target`)
  // The target names one GPU product (--gpu): an attached device of another product is an error,
  // not a tune filed under the wrong key.
  bool productNamed = false;
  // An attached device's own product (its SMs, clocks, peaks) replaces the target's default one;
  // off: the tune is filed under `target` as given (compare --tune fills the row it shows).
  bool deviceProduct = true;
  // Budget and search.
  std::optional<int> trials;  // default: kDefaultTrials, kDefaultEstimateTrials when estimating
  double timeBudget = 0;      // seconds, 0: none
  int batch = search::SearchSettings{}.batchSize;
  int topK = 5;
  double timeout = 20, minTime = 0.05;  // per candidate: the watchdog and the timed runs
  std::string strategy;                 // default: evolutionary, ranked when estimating
  uint64_t seed = 0;
  // The store and the shared cache.
  std::string db;                    // a SQLite file; "" keeps the records in memory
  cache::RecordStore* store = nullptr;  // borrowed, instead of `db`: compare --tune writes where it reads
  cache::CacheClientOptions cache;  // base_url "" : no shared cache
  CachePolicy policy = CachePolicy::UseStored;
  bool warmStart = true, transfer = true;
  bool verifyTime = false;  // re-time every shared winner, not only claims
  bool checkAccess = true;  // the shared cache's read (required) and write (warned) access
  measure::ProvenanceInputs provenance;
  Dialect dialect;
  // The front end's callbacks (progress, warnings, stop, warm start, transfer); the tune adds
  // the verification of shared winners and the spot check of workers.
  SessionCallbacks callbacks;
};

// A tune opened: the flags checked, the space made, the measurer, the store and the shared cache
// chosen. run() runs the session once; the front end may print what was chosen in between (and
// install its interrupt handler for the search only).
class OpenTune {
 public:
  const TargetDesc& target() const { return target_; }  // as measured: the device's product, the workers'
  const TuneProblem& problem() const { return problem_; }
  const MeasureChoice& measure() const { return measure_; }
  const std::string& strategy() const { return strategy_; }
  int trials() const { return trials_; }
  cache::RecordStore* store() const { return store_; }
  const cache::CacheClient& client() const { return *client_; }
  const cache::Provenance& provenance() const { return provenance_; }
  const std::string& spotLine() const { return spotLine_; }  // after run(): the workers' spot check

  // The session (runTuneSession). A service or workers that stop answering mid-search
  // are an Unavailable error: what was measured is stored, `resume` continues.
  Expected<SessionResult> run();

 private:
  friend Expected<std::unique_ptr<OpenTune>> openTune(TuneRequest r);
  TuneRequest request_;
  TargetDesc target_;
  TuneProblem problem_;
  MeasureChoice measure_;
  std::string strategy_;
  int trials_ = 0;
  std::unique_ptr<cache::RecordStore> ownStore_;
  cache::RecordStore* store_ = nullptr;
  std::unique_ptr<cache::CacheClient> client_;
  cache::Provenance provenance_;
  std::string spotLine_;
};

// Checks the request (flag errors come before the store is consulted: a stored winner must not
// hide them), makes its space, chooses the measurer, opens the store and the client and checks
// the shared cache's access. Errors: InvalidArgument (the request), Unsupported (no device of
// the target here), PermissionDenied (the service refused the token), Unavailable (no live
// worker), or the space's and the store's own.
Expected<std::unique_ptr<OpenTune>> openTune(TuneRequest r);

// openTune + run, for front ends with nothing to do in between.
Expected<SessionResult> runTune(TuneRequest r);

// The estimate of a config in full, for the report of an estimating tune's winner: the analytic
// model's time, terms, occupancy and facts, with the compiler's resources of the config on `t`
// (compiled without a binary) in place of the model's guesses where the compile succeeds. Either
// part is absent when it cannot be had (nothing is measured or run).
struct EstimateDetail {
  std::optional<measure::KernelEstimate> estimate;
  std::optional<codegen::ResourceReport> resources;
};
EstimateDetail explainEstimate(const ir::Kernel& k, const ir::Config& c, const TargetDesc& t);

// This machine's provenance inputs for records (TuneRequest::provenance and every lookup by
// provenance): tessera's and LLVM's versions and the host name; `user` as the front end names
// its user (the CLI: the login, Python: "python").
measure::ProvenanceInputs provenanceInputs(std::string user);

}  // namespace tessera::session
