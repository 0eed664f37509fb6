// Owns opening and running one TuneRequest: the request's checks, the space, the measurer, the
// store and the shared cache, the session's settings and the callbacks every front end shares
// (verifying shared winners, the spot check of workers), and the full estimate of a winner.
#include <unistd.h>

#include <algorithm>
#include <limits>

#include "costmodel/gpu_model.h"
#include "measure/remote_measurer.h"
#include "search/strategy.h"
#include "search/space_ops.h"
#include "session/verify_hit.h"
#include "session/tune_request.h"

namespace tessera::session {

namespace {

using detail::bad;

// The comparisons are written so that a NaN fails them too.
Status checkBudget(const TuneRequest& r, const std::string& strategy, int trials, const TargetDesc& t) {
  const Dialect& d = r.dialect;
  if (r.trials && *r.trials < 0)
    return bad(d.option("trials") + " must be at least 0 (0: as many as " + d.option("time-budget") + " allows)");
  if (!(r.timeBudget >= 0)) return bad(d.option("time-budget") + " must be at least 0 seconds (0: none)");
  if (trials == 0 && r.timeBudget == 0) return bad("give " + d.given("trials", "N") + " and/or " + d.given("time-budget", "S"));
  if (r.batch < 1) return bad(d.option("batch") + " must be at least 1");
  if (r.topK < 0) return bad(d.option("top-k") + " must be at least 0 (0: no final re-measurement)");
  if (!(r.timeout > 0)) return bad(d.option("timeout") + " must be more than 0 seconds");
  if (!(r.minTime >= 0)) return bad(d.option("min-time") + " must be at least 0 seconds");
  if (std::find(std::begin(search::kStrategyNames), std::end(search::kStrategyNames), strategy) ==
      std::end(search::kStrategyNames))
    return bad("unknown strategy '" + strategy + "' (known: " + search::strategyNameList() + ")");
  if (strategy == "ranked" && !t.isGpu())
    return bad(d.given("strategy", "ranked") + " orders a GPU space by the analytic model; the host has none");
  if (r.workers && (r.estimate || !r.device.empty()))
    return bad(d.given("workers") + " measures on the workers' " +
               (r.estimate ? "hardware; " + d.option("estimate") + " measures nothing" : "devices; drop " + d.option("device")));
  return {};
}

}  // namespace

Expected<std::unique_ptr<OpenTune>> openTune(TuneRequest request) {
  auto open = std::unique_ptr<OpenTune>(new OpenTune());
  OpenTune& o = *open;
  // The measurers keep a reference to the kernel: it lives as long as the OpenTune.
  o.request_ = std::move(request);
  const TuneRequest& r = o.request_;
  o.target_ = r.target;
  TESSERA_ASSIGN(o.problem_, tuneProblem(r.kernel, o.target_, r.space));
  // Flag errors come before the store is consulted: a stored winner must not hide them.
  // Estimating ranks the space by the model and checks its top 32 through the compiler unless told
  // otherwise.
  o.strategy_ = !r.strategy.empty() ? r.strategy : r.estimate ? "ranked" : "evolutionary";
  o.trials_ = r.trials ? *r.trials : r.estimate ? kDefaultEstimateTrials : kDefaultTrials;
  TESSERA_TRY(checkBudget(r, o.strategy_, o.trials_, o.target_));
  measure::MeasureSettings ms;
  ms.timeoutSec = r.timeout;
  ms.measure.minTimeSec = r.minTime;
  auto warn = r.callbacks.onWarning;
  if (r.workers) {
    TESSERA_ASSIGN(o.measure_, chooseWorkers(r.kernel, o.target_, r.cache, r.threads, r.workerWait, ms, warn, r.dialect));
    // The key and the space are the workers' hardware, which may differ from this machine's.
    TESSERA_ASSIGN(o.problem_, tuneProblem(r.kernel, o.target_, r.space));
  } else {
    auto chosen = chooseMeasurer(r.kernel, o.target_, r.device, r.estimate, ms, r.dialect);
    if (!chosen.ok() && r.estimateWithoutDevice && o.target_.isGpu() && r.device.empty())
      chosen = chooseMeasurer(r.kernel, o.target_, "", true, ms, r.dialect);  // no device here: estimate
    if (!chosen.ok()) return chosen.takeError();
    o.measure_ = std::move(*chosen);
    if (o.measure_.estimated && r.strategy.empty()) o.strategy_ = "ranked";
  }
  if (const auto& device = o.measure_.device; device && r.deviceProduct) {
    // The attached device's own product (an H100 PCIe has 114 SMs, not the table's 132): its key,
    // space and peaks. A target naming another product would file its timings under the wrong key.
    if (r.productNamed && device->model != o.target_.model)
      return bad(r.dialect.option("gpu") + " names the " + o.target_.model + ", but the attached device is the " +
                 device->model + ": drop " + r.dialect.option("gpu") + " to tune it, or add " + r.dialect.given("estimate") +
                 " to predict the " + o.target_.model);
    const bool changed = device->units != o.target_.units || device->model != o.target_.model;
    o.target_ = *device;
    if (changed) {
      TESSERA_ASSIGN(o.problem_, tuneProblem(r.kernel, o.target_, r.space));
    }
  }
  // `exhaustive` means every legal config: without --trials, as many trials as the space has legal
  // configs (it stopped at the default 200 of a 1,920-config space without a word); with fewer
  // --trials, how many are skipped is said.
  if (o.strategy_ == "exhaustive")
    if (auto all = search::enumerateLegal(o.problem_.space, search::SearchSettings{}.exhaustiveLimit)) {
      const int legal = int(std::min<size_t>(all->size(), size_t(std::numeric_limits<int>::max())));
      if (!r.trials) o.trials_ = std::max(1, legal);
      else if (o.trials_ < legal && warn)
        warn("exhaustive with " + r.dialect.option("trials") + " " + std::to_string(o.trials_) + " measures " +
             std::to_string(o.trials_) + " of the " + std::to_string(legal) + " legal configs (" +
             std::to_string(legal - o.trials_) + " skipped; leave out " + r.dialect.option("trials") + " for all)");
    }
  // An emulation's timings are no device's: kept in memory for this run, never stored or shared.
  if (o.measure_.emulated || (r.db.empty() && !r.store)) {
    o.ownStore_ = cache::makeMemoryStore();
  } else if (!r.store) {
    TESSERA_ASSIGN(o.ownStore_, cache::openSqliteStore(r.db));
  }
  o.store_ = o.ownStore_ ? o.ownStore_.get() : r.store;
  o.client_ = std::make_unique<cache::CacheClient>(o.measure_.emulated ? cache::CacheClientOptions{} : r.cache);
  if (r.checkAccess) {
    // A refused token is an error; one that may read but not write is said once (nothing silent).
    TESSERA_TRY(checkCacheAccess(*o.client_, "read", "tune reads the shared winners", warn));
    if (o.client_->enabled()) {
      Status w = o.client_->checkAccess("write", "tune shares its results");
      if (!w.ok() && w.error().code == ErrorCode::PermissionDenied && warn)
        warn(w.error().message + "; what it measures stays in the local store");
    }
  }
  o.provenance_ = measure::provenanceFor(o.target_, r.provenance);
  return open;
}

Expected<SessionResult> OpenTune::run() {
  const TuneRequest& r = request_;
  SessionSettings ss;
  ss.loop.search.strategy = strategy_;
  ss.loop.search.seed = r.seed;
  ss.loop.search.batchSize = r.batch;
  ss.loop.trials = trials_ > 0 ? trials_ : 1000000;
  ss.loop.timeBudgetSec = r.timeBudget;
  ss.loop.topK = r.topK;
  if (measure_.estimated) ss.acceptEstimatesOf = costmodel::kGpuModelName;
  ss.cache = r.policy;
  ss.warmStart = r.warmStart;
  ss.transfer.enabled = r.transfer;
  ss.transfer.seed = r.seed;
  ss.warm.seed = r.seed;
  ss.model.seed = r.seed;

  SessionCallbacks cb = r.callbacks;
  // A winner from the shared cache is compiled, run and checked here before "already tuned";
  // --verify-time re-times every one, otherwise claims are re-timed and confirmed records trusted
  // for their time (verify_hit.h).
  const VerifyHitSettings verify{.time = r.verifyTime ? VerifyHitSettings::Time::Always
                                                              : VerifyHitSettings::Time::IfUnconfirmed};
  cb.verifySharedHit = [this, verify](const cache::Record& rec, HitCheck* check) {
    return verifySharedHit(rec, problem_.space, *measure_.measurer, verify, check);
  };
  // Through workers: their winner is checked here when this machine is their hardware.
  cb.measureHere = measure_.measureHere;
  cb.controlHere = measure_.controlHere;
  cb.spotAgreeFactor = measure_.spotAgreeFactor;
  cb.loadControl = measure_.loadControl;
  if (measure_.reportSpotCheck)
    cb.reportSpotCheck = [this](const measure::TrialResult& claimed, const cache::Record& mine) {
      spotLine_ = measure_.reportSpotCheck(claimed, mine);
    };
  // The workers or the service gone come back as the measurer's Unavailable error (measurer.h):
  // what was measured is stored, a resume continues.
  return runTuneSession(problem_, *measure_.measurer, store_, client_.get(), provenance_, ss, cb);
}

Expected<SessionResult> runTune(TuneRequest r) {
  TESSERA_ASSIGN(auto open, openTune(std::move(r)));
  return open->run();
}

EstimateDetail explainEstimate(const ir::Kernel& k, const ir::Config& c, const TargetDesc& t) {
  EstimateDetail d;
  auto bin = codegen::compileGpu(k, c, t, {.wantBinary = false});
  if (bin.ok()) d.resources = bin->resources;
  if (auto e = measure::estimateKernel(k, c, t, d.resources ? &*d.resources : nullptr); e.ok())
    d.estimate = std::move(*e);
  return d;
}

measure::ProvenanceInputs provenanceInputs(std::string user) {
  measure::ProvenanceInputs p;
  p.tesseraVersion = TESSERA_VERSION;
  p.llvmVersion = "22";
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  p.host = host;
  p.user = std::move(user);
  return p;
}

}  // namespace tessera::session
