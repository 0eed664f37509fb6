// Owns `tessera tune` (search for the fastest config of one kernel on the host, store every
// measured candidate, share the winner) and `tessera best` (the stored winner, without tuning).
// Environment variables are read here, at the edge: TESSERA_CACHE_URL, TESSERA_TOKEN, USER.
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "client/client.h"
#include "client/endpoints.h"
#include "store/list_all.h"
#include "store/record_json.h"
#include "store/store.h"
#include "cli/commands.h"
#include "cli/gpu_flags.h"
#include "cli/kernel_flags.h"
#include "cli/report.h"
#include "cli/tune_common.h"
#include "cli/tune_range.h"
#include "ir/families.h"
#include "ir/text.h"
#include "measure/protocol_measurer.h"
#include "session/tune_session.h"
#include "session/verify_hit.h"
#include "measure/records.h"
#include "search/space.h"
#include "search/strategy.h"
#include "search/tuner.h"
#include "search/warm_start.h"
#include "session/tune_request.h"
#include "support/progress.h"
#include "support/si_format.h"

namespace tessera::cli {

namespace {

// --verify-time re-times every shared winner; without it, claims are re-timed and confirmed
// records trusted for their time (verify_hit.h).
session::VerifyHitSettings::Time verifyTiming(bool always) {
  return always ? session::VerifyHitSettings::Time::Always : session::VerifyHitSettings::Time::IfUnconfirmed;
}

// Ctrl-C during `tessera tune`: the first one ends the search after the batch in flight (every
// measured candidate is already stored), the top candidates are still re-measured and the winner
// stored and printed, and the exit code is 130; `--resume` continues from there. The handler is
// one-shot (SA_RESETHAND): a second Ctrl-C ends the process at once, and the measuring children
// die with it (PR_SET_PDEATHSIG). Those children ignore SIGINT, which the terminal sends to the
// whole process group, so an interrupt is never recorded as a crashing candidate.
volatile std::sig_atomic_t gInterrupted = 0;

extern "C" void onInterrupt(int) {
  gInterrupted = 1;
  static const char msg[] =
      "\ntessera: interrupted: stopping after the batch in flight; the best candidates are re-measured and "
      "stored (Ctrl-C again to quit now)\n";
  ssize_t n = write(STDERR_FILENO, msg, sizeof msg - 1);
  (void)n;
}

struct InterruptScope {  // the handler is in place for the search only
  struct sigaction previous {};
  InterruptScope() {
    gInterrupted = 0;
    struct sigaction sa {};
    sa.sa_handler = onInterrupt;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND | SA_RESTART;
    sigaction(SIGINT, &sa, &previous);
  }
  ~InterruptScope() { sigaction(SIGINT, &previous, nullptr); }
};

struct TuneFlags {
  KernelFlags kernel;
  std::string target = "host", strategy, db = "tessera.db", spaceSpec, device;
  CacheFlags cache;
  int trials = session::kDefaultTrials, batch = search::SearchSettings{}.batchSize, topK = 5, threads = kAllCores;
  bool estimate = false;
  const CLI::Option* trialsOption = nullptr;  // was --trials given?
  double timeBudget = 0, timeout = 20, minTime = 0.05;
  uint64_t seed = 0;
  bool resume = false, force = false, json = false, noWarmStart = false, verifyTime = false;
  bool workers = false, noTransfer = false;
  double workerWait = 30;
  GpuFlags gpu;
  int64_t maxElements = kDefaultMaxElements;
  RangeFlags range;
};

session::CachePolicy cachePolicy(const TuneFlags& f) {
  return f.force ? session::CachePolicy::Force : f.resume ? session::CachePolicy::Resume : session::CachePolicy::UseStored;
}

// --trials as given, else the request's default (200 measured, 32 estimated).
std::optional<int> trialsGiven(const TuneFlags& f) {
  if (f.trialsOption && f.trialsOption->count()) return f.trials;
  return std::nullopt;
}

// `--m LO..HI` (GEMM) / `--rows LO..HI` (elementwise) / `--seq LO..HI` (attention) or a list: tuned point by point into a
// dispatch rule (tune_range.cpp).
void tuneRange(const TuneFlags& f) {
  const std::string flag = rangeFlagOf(f.kernel);
  if (f.workers || !f.device.empty() || !f.gpu.gpus.empty())
    fail(flag + " LO..HI tunes shape-generic kernels on this host (or, with --estimate, through the GPU model): drop --workers, "
         "--device and --gpu", kExitBadInput);
  if (!f.strategy.empty() && f.strategy != "evolutionary")
    fail(flag + " LO..HI tunes each point with the evolutionary search: drop --strategy", kExitBadInput);
  tuneRangeCommand(f.kernel, f.range,
                   {.target = f.target, .threads = f.threads, .maxElements = f.maxElements, .estimate = f.estimate,
                    .space = f.spaceSpec, .trials = trialsGiven(f), .batch = f.batch, .topK = f.topK, .timeBudget = f.timeBudget,
                    .timeout = f.timeout, .minTime = f.minTime, .seed = f.seed, .maxKernels = f.range.maxKernels,
                    .points = f.range.points, .fixedUpTo = f.range.fixedUpTo, .db = f.db, .policy = cachePolicy(f), .warmStart = !f.noWarmStart},
                   f.json);
}

nlohmann::json trialJson(const measure::TrialResult& r) {
  return {{"config", nlohmann::json::parse(r.config.toJson())},
          {"status", measure::trialStatusName(r.status)},
          {"median_us", r.samples.median_us},
          {"p20_us", r.samples.p20_us},
          {"p80_us", r.samples.p80_us},
          {"n", r.samples.n},
          {"gflops", r.gflops},
          {"gbps", r.gbps},
          {"peak_fraction", r.peakFraction},
          {"max_rel_err", r.maxRelErr},
          {"estimated", r.estimated},
          {"estimator", r.estimator},
          {"bound", r.bound}};
}

// Said of a stored winner without the re-measured mark: a tune under load stores its winner so
// (search/timing_load.h), and it must not read later as a winner tuned on a quiet machine.
constexpr const char* kNotRemeasured =
    "; not re-measured: a single measurement, or timed under load (--force tunes it again)";

// What the run sent to the shared cache, in one line ("" when no shared cache was asked).
// A failed candidate's reason: the first line of its message, at most 200 characters.
std::string failedWhy(const measure::TrialResult& tr) {
  return tr.message.substr(0, std::min({tr.message.find('\n'), tr.message.size(), size_t(200)}));
}

// Each failed candidate by its config and reason (a few; the records keep them all), whatever ran
// them: measured, emulated or estimated (ptxas's invalid-config).
void printFailed(const session::SessionResult& res) {
  int named = 0, failed = 0;
  for (const auto& tr : res.tune.trials) {
    if (tr.ok()) continue;
    if (++failed > 8) continue;
    const std::string why = failedWhy(tr);
    std::printf("failed       %s: %s%s%s\n", measure::trialStatusName(tr.status), tr.config.str().c_str(),
                why.empty() ? "" : " (", why.empty() ? "" : (why + ")").c_str());
    ++named;
  }
  if (failed > named) std::printf("failed       ... and %d more (the store keeps each one's record)\n", failed - named);
}

// Every failed candidate of the run, for --json.
nlohmann::json failedJson(const session::SessionResult& res) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& tr : res.tune.trials)
    if (!tr.ok())
      out.push_back({{"config", nlohmann::json::parse(tr.config.toJson(), nullptr, false)},
                     {"status", measure::trialStatusName(tr.status)},
                     {"reason", failedWhy(tr)}});
  return out;
}

// Why a share of the roof passes 100 %: a memory-bound host kernel whose data fit in the caches
// beats the copy, which is measured past them, and says so; anything else, the probe read it low.
std::string aboveWhy(const ir::Kernel& k, const TargetDesc& t) {
  return ir::isComputeBound(k) || t.isGpu() ? kProbeReadLow : whyAboveBandwidth(t, ir::kernelBytes(k));
}

std::string pushedLine(const session::SessionResult::Pushed& p) {
  if (p.to.empty()) return "";
  std::string s = "shared cache " + std::to_string(p.records) + " record" + (p.records == 1 ? "" : "s") + " pushed to " +
                  cache::redactUrl(p.to);
  if (p.rejected) s += ", " + std::to_string(p.rejected) + " refused as invalid";
  if (p.remaining) s += ", " + std::to_string(p.remaining) + " waiting (pushed by a later run)";
  return s;
}

nlohmann::json pushedJson(const session::SessionResult::Pushed& p) {
  if (p.to.empty()) return nullptr;
  return {{"to", cache::redactUrl(p.to)}, {"records", p.records}, {"rejected", p.rejected}, {"remaining", p.remaining}};
}

// The estimate of the winner in full: its predicted time and bound, the model's terms, the tile
// choices and the compiler's resources. Nothing ran: every number is labelled a prediction.
void printEstimateSummary(const ir::Kernel& k, const TargetDesc& t, const session::SessionResult& res,
                          const std::string& db) {
  const auto& b = *res.tune.best;
  std::printf("\nkernel       %s  (key %.12s, store %s)\n", k.name.c_str(), res.keyId.c_str(), db.c_str());
  std::printf("best config  %s\n", b.config.str().c_str());
  const session::EstimateDetail detail = session::explainEstimate(k, b.config, t);
  // The bound by the term that decides it, with the rate the model holds that term to (an
  // L2-bound kernel is not called DRAM-bound, nor cited with DRAM's bandwidth).
  std::string bound = b.bound + "-bound";
  if (detail.estimate && !detail.estimate->model.bindingRate.empty())
    bound += ": " + detail.estimate->model.bindingRate;
  std::printf("estimate     %s  (%s, %s; predicted, nothing ran; stored as estimated)\n",
              fmtTime(b.samples.median_us).c_str(), b.estimator.c_str(), bound.c_str());
  std::printf("gpu          %s: %s, %s FP32, %s %s, DRAM %s, L2 %s\n", targetLabel(t).c_str(),
              formatSi(t.clockGHz * 1e9, "Hz").c_str(), formatSi(t.peakGflopsF32 * 1e9, "FLOP/s").c_str(),
              formatSi(t.computePeakGflops(ir::kernelInputType(k)) * 1e9, "FLOP/s").c_str(),
              std::string(ir::typeName(ir::kernelInputType(k))).c_str(), formatSi(t.memBandwidthGBs * 1e9, "B/s").c_str(),
              formatSi(double(t.l2Bytes_gpu), "B").c_str());
  std::printf("throughput   %s  (%.1f%% of the %s's %s, predicted)\n", fmtThroughput(k, b.throughput).c_str(),
              100 * b.peakFraction, t.model.c_str(), ir::isComputeBound(k) ? "compute peak" : "memory bandwidth");
  if (const auto& e = detail.estimate) {
    std::string terms;
    for (const auto& term : e->model.terms)
      if (term.us >= 0.05 * e->model.timeUs)
        terms += (terms.empty() ? "" : ", ") + term.name + " " + fmtTime(term.us) + " (" + term.detail + ")";
    std::printf("terms        %s\n", terms.c_str());
    std::printf("occupancy    %d blocks per %s (%s), %lld wave%s at %.0f%% fill\n", e->model.blocksPerUnit,
                t.words().unit, e->model.occupancyLimiter.c_str(), (long long)e->model.waves,
                e->model.waves == 1 ? "" : "s", 100 * e->model.waveEfficiency);
    for (const auto& [name, value] : e->facts) std::printf("%-12s %s\n", name.c_str(), value.c_str());
  }
  if (detail.resources) std::printf("resources    %s\n", detail.resources->summary().c_str());
  if (const auto& d = res.tune.defaultConfig; d && d->ok() && res.speedupOverDefault > 0)
    std::printf("vs default   %s predicted  (default %s: %s)\n", formatRatio(res.speedupOverDefault).c_str(), d->config.str().c_str(),
                fmtTime(d->samples.median_us).c_str());
}

void tuneCommand(const TuneFlags& f) {
  if (wantsRangeTune(f.kernel)) return tuneRange(f);
  loadGpuFacts(f.gpu);
  auto k = buildKernel(f.kernel);
  if (!k.ok()) failWith(k.error());
  if (Status big = session::checkKernelSize(*k, f.maxElements); !big.ok()) failWith(big.error());
  auto target = session::targetWithGpu(f.target, f.gpu.gpus, f.threads);
  if (!target.ok()) failWith(target.error());

  session::TuneRequest rq;
  rq.kernel = *k;
  rq.target = *target;
  rq.space = f.spaceSpec;
  rq.device = f.device;
  rq.estimate = f.estimate;
  rq.workers = f.workers;
  rq.workerWait = f.workerWait;
  rq.threads = f.threads;
  rq.productNamed = !f.gpu.gpus.empty();
  rq.trials = trialsGiven(f);
  rq.timeBudget = f.timeBudget;
  rq.batch = f.batch;
  rq.topK = f.topK;
  rq.timeout = f.timeout;
  rq.minTime = f.minTime;
  rq.strategy = f.strategy;
  rq.seed = f.seed;
  rq.db = f.db;
  rq.cache = clientOptions(f.cache);
  rq.policy = cachePolicy(f);
  rq.warmStart = !f.noWarmStart;
  rq.transfer = !f.noTransfer;
  rq.verifyTime = f.verifyTime;
  rq.provenance = provenanceInputs();

  ProgressLine progress;
  const ir::Kernel& kernel = *k;
  bool emulated = false;
  session::SessionCallbacks& cb = rq.callbacks;
  cb.onWarning = [](const std::string& w) { std::fprintf(stderr, "tessera: warning: %s\n", w.c_str()); };
  cb.onWarmStart = [&](const search::WarmStart& w) {
    if (f.json) return;
    std::printf("cost model warm-started from %zu stored results of %d other workload%s\n", w.samples.size(), w.workloads,
                w.workloads == 1 ? "" : "s");
  };
  cb.onTransfer = [&](const search::Transfer& t) {
    if (f.json) return;
    std::string from;
    for (const auto& x : t.from) from += (from.empty() ? "" : "; ") + x;
    std::printf("transfer     this kernel measured on %d other GPU%s (%s): their model picks the first batch and is "
                "a feature of the cost model, until this GPU's own results rank unlike theirs; --no-transfer turns it "
                "off\n",
                t.gpus, t.gpus == 1 ? "" : "s", from.c_str());
  };
  cb.onTransferLed = [&](const std::vector<std::string>& led) {
    if (f.json) return;
    std::string names;
    for (const auto& x : led) names += (names.empty() ? "" : "; ") + x.substr(0, x.find(':'));
    std::printf("transfer     led by %zu GPU%s: %s\n", led.size(), led.size() == 1 ? "" : "s", names.c_str());
  };
  cb.onTransferDropped = [&](double rho) {
    if (f.json) return;
    std::printf("transfer     dropped: the other GPUs' ranking disagrees with this one's results (Spearman %.2f); "
                "the search goes on without them\n",
                rho);
  };
  cb.onTrial = [&](const measure::TrialResult& r, const search::TuneProgress& p) {
    if (f.json) return;
    char line[512];
    std::string best = p.best ? fmtThroughput(kernel, p.best->throughput) : "-";
    double frac = p.best ? 100 * p.best->peakFraction : 0;
    std::string last = r.ok() ? fmtThroughput(kernel, r.throughput) : measure::trialStatusName(r.status);
    // Never a bare share above 100 % (the summary's throughput line says why), nor "0%" for none known.
    char share[96] = "predicted, emulator-checked";
    if (!emulated && frac <= 0) std::snprintf(share, sizeof share, "share of peak not known");
    else if (!emulated) std::snprintf(share, sizeof share, "%.0f%% of peak%s", frac, frac > 100 ? ": why below" : "");
    std::snprintf(line, sizeof line, "trial %d/%d  best %s (%s)  last %s  elapsed %s  ETA %s", p.trial, p.trials,
                  best.c_str(), share, last.c_str(), fmtDuration(p.elapsedSec).c_str(), fmtDuration(p.etaSec).c_str());
    progress.update(line);
  };
  cb.shouldStop = [](const search::TuneProgress&) { return gInterrupted != 0; };

  auto open = session::openTune(std::move(rq));
  // No live worker came, or the service had no one to answer: exit 7.
  if (!open.ok() && open.error().code == ErrorCode::Unavailable) fail(open.error().message, kExitUnreachable);
  if (!open.ok()) failWith(open.error());
  session::OpenTune& tune = **open;
  const session::MeasureChoice& measure = tune.measure();
  const TargetDesc* t = &tune.target();
  emulated = measure.emulated;
  if (f.workers && !f.json) std::printf("measuring on %s\n", measure.where.c_str());
  if (measure.emulated && !f.json)
    std::printf("ranking by the analytic model's prediction for %s; the emulator (this CPU) refuses wrong or racy "
                "candidates; nothing is stored\n",
                t->name.c_str());
  Expected<session::SessionResult> session = makeError(ErrorCode::Internal, "no session");
  {
    InterruptScope interruptible;
    session = tune.run();
  }
  if (!session.ok() && session.error().code == ErrorCode::Unavailable) {
    // The workers or the service are gone: what was measured is stored, --resume continues.
    progress.finish();
    fail(session.error().message, kExitUnreachable);
  }
  const std::string& spotLine = tune.spotLine();
  const bool interrupted = gInterrupted != 0;
  progress.finish();
  if (!session.ok()) failWith(session.error());
  const session::SessionResult& res = *session;
  if (res.outcome == session::SessionResult::Outcome::AlreadyTuned) {
    const cache::Record& hit = *res.cached;
    if (f.json) {
      nlohmann::json j = {{"kernel", k->name},
                          {"workload", res.key.workload},
                          {"key_id", res.keyId},
                          {"target", targetJson(*t)},
                          {"outcome", hit.status == cache::RecordStatus::Estimated ? "already-estimated" : "already-tuned"},
                          {"from", res.cachedFrom},
                          {"record", nlohmann::json::parse(cache::encodeRecord(hit))},
                          {"pushed", pushedJson(res.pushed)}};
      std::printf("%s\n", j.dump(2).c_str());
      return;
    }
    // An answer from the store pushes only what earlier runs left waiting: said when there was any.
    if (const auto& p = res.pushed; p.records + p.rejected + p.remaining > 0) std::printf("%s\n", pushedLine(p).c_str());
    if (hit.status == cache::RecordStatus::Estimated)
      std::printf("already estimated: %s on %s -> %s (%s predicted by %s, %s-bound; no measurement yet)\n",
                  k->name.c_str(), t->name.c_str(), hit.config.c_str(), fmtTime(hit.median_us).c_str(),
                  hit.estimator.c_str(), hit.bound.c_str());
    else
      std::printf("already tuned: %s on %s -> %s (%s median, %s)%s\n", k->name.c_str(), t->name.c_str(),
                  hit.config.c_str(), fmtTime(hit.median_us).c_str(),
                  fmtThroughput(*k, ir::isComputeBound(*k) ? hit.gflops : hit.gbps).c_str(),
                  hit.remeasured ? "" : kNotRemeasured);
    std::printf("use --resume to continue the search or --force to start over\n");
    return;
  }
  if (res.outcome == session::SessionResult::Outcome::NothingCorrect) {
    std::string why;
    for (const auto& [s, n] : res.statusCounts) why += " " + s + "=" + std::to_string(n);
    // The first failure by its config and reason (the store keeps every one's record).
    std::string first;
    if (!res.tune.trials.empty()) {
      const auto& tr = res.tune.trials.front();
      first = "; first: " + std::string(measure::trialStatusName(tr.status)) + " " + tr.config.str() +
              (failedWhy(tr).empty() ? "" : " (" + failedWhy(tr) + ")");
    }
    const std::string msg =
        "no candidate produced a correct result (" + countOf(int64_t(res.tune.trials.size()), "trial") + ":" + why + first + ")";
    if (!f.json) fail(msg, kExitFailure);
    // --json: the error every failure has, with each failed candidate's config and reason.
    std::fprintf(stderr, "tessera: error: %s\n", msg.c_str());
    const nlohmann::json j = {{"error", msg}, {"exit_code", kExitFailure}, {"failed", failedJson(res)}};
    std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    throw CLI::RuntimeError(kExitFailure);
  }
  const auto& b = *res.tune.best;
  const double speedup = res.speedupOverDefault;
  if (f.json) {
    nlohmann::json j = {{"kernel", k->name},
                        {"workload", res.key.workload},
                        {"key_id", res.keyId},
                        {"target", targetJson(*t)},
                        {"outcome", "tuned"},
                        {"best", trialJson(b)},
                        {"trials", res.tune.trials.size()},
                        {"seconds", res.tune.seconds},
                        {"statuses", res.statusCounts},
                        {"failed", failedJson(res)},
                        {"speedup_over_default", speedup},
                        {"warm_start", {{"samples", res.warm.samples.size()}, {"workloads", res.warm.workloads},
                                        {"from", res.warm.from}}},
                        {"transfer",
                         {{"gpus", res.transferGpus},
                          {"from", res.transferFrom},
                          {"led", res.transferLed},
                          {"dropped", res.transferDropped}}},
                        {"interrupted", interrupted},
                        {"measured_on", measure.where},
                        {"emulated", measure.emulated},
                        {"estimated", measure.estimated},
                        {"pushed", pushedJson(res.pushed)}};
    // "winner": the key's winner after this run, what `best` serves (this run's, or an earlier
    // run's record that stays faster: then "best" is only this run's).
    if (res.served) j["winner"] = nlohmann::json::parse(cache::encodeRecord(*res.served));
    else if (res.winner) j["winner"] = nlohmann::json::parse(cache::encodeRecord(*res.winner));
    if (res.tune.defaultConfig) j["default"] = trialJson(*res.tune.defaultConfig);
    if (const auto& tl = res.timing; tl.watched)
      j["timing"] = {{"load_before", tl.before.loadavg1}, {"load_after", tl.after.loadavg1}, {"cores", tl.after.cores},
                     {"steal_pct", tl.after.stealPct}, {"control", tl.control}, {"winner_p80_over_p20", tl.spread},
                     {"remeasures", tl.remeasures}, {"busy", tl.busy}};
    std::printf("%s\n", j.dump(2).c_str());
    if (interrupted) throw CLI::RuntimeError(kExitInterrupted);
    return;
  }
  std::string statuses;
  for (const auto& [s, n] : res.statusCounts)
    statuses += (statuses.empty() ? "" : ", ") + (measure.estimated && s == "ok" ? std::string("estimated") : s) + " " +
                std::to_string(n);
  if (measure.estimated) {
    printEstimateSummary(*k, *t, res, f.db);
    std::printf("search       %s of the space's top checked through %s in %s (%s)\n",
                countOf(int64_t(res.tune.trials.size()), "config").c_str(),
                t->words().deviceCompiler, fmtDuration(res.tune.seconds).c_str(),
                statuses.c_str());
    printFailed(res);
    if (const std::string line = pushedLine(res.pushed); !line.empty()) std::printf("%s\n", line.c_str());
    return;
  }
  std::printf("\nkernel       %s  (key %.12s, store %s)\n", k->name.c_str(), res.keyId.c_str(),
              measure.emulated ? "none: emulated runs are not stored" : f.db.c_str());
  if (const auto& s = res.served) {
    // The store keeps an earlier winner: shown as the winner, since `best` serves it.
    auto shown = ir::Config::fromJson(s->config);
    std::printf("best config  %s  (the store's winner, measured before this run; `best` serves it)\n",
                shown.ok() ? shown->str().c_str() : s->config.c_str());
    std::printf("time         %s  (p20 %s, p80 %s, n=%lld)\n", fmtTime(s->median_us).c_str(),
                fmtTimeNumber(s->p20_us, s->median_us).c_str(), fmtTimeNumber(s->p80_us, s->median_us).c_str(),
                (long long)s->n);
    std::printf("this run     %s: %s  (top-%d re-measured; slower than the store's winner)\n", b.config.str().c_str(),
                fmtTime(b.samples.median_us).c_str(), f.topK);
  } else {
    std::printf("best config  %s\n", b.config.str().c_str());
    if (measure.emulated && b.estimated)
      std::printf("time         %s  (the analytic model's prediction for %s, not a measurement)\n",
                  fmtTime(b.samples.median_us).c_str(), t->name.c_str());
    else
      std::printf("time         %s  (p20 %s, p80 %s, n=%lld, top-%d re-measured)\n", fmtTime(b.samples.median_us).c_str(),
                  fmtTimeNumber(b.samples.p20_us, b.samples.median_us).c_str(),
                  fmtTimeNumber(b.samples.p80_us, b.samples.median_us).c_str(), (long long)b.samples.n, f.topK);
  }
  if (measure.emulated)
    std::printf("throughput   %s  (predicted; checked on the emulator, whose CPU time is not %s's speed)\n",
                fmtThroughput(*k, b.throughput).c_str(), t->name.c_str());
  else
    std::printf("throughput   %s  (%s)\n", fmtThroughput(*k, b.throughput).c_str(),
                !ir::isComputeBound(*k) && !t->isGpu()
                    ? bandwidthShareText(*t, b.peakFraction, "the copy bandwidth", ir::kernelBytes(*k)).c_str()
                    : peakShareText(b.peakFraction, !ir::isComputeBound(*k) ? "memory bandwidth"
                                                    : t->isGpu()            ? "the compute peak"
                                                                            : "the FMA peak of its threads",
                                    aboveWhy(*k, *t))
                          .c_str());
  if (t->isGpu() || f.workers) std::printf("measured on  %s\n", measure.where.c_str());
  if (res.spot.ran && !res.spot.judged)
    std::printf("unconfirmed  the winner is a claim of worker %s (token %s): this machine was busy in every re-timing "
                "(first %s, %s the claim), so it was not judged and nothing was reported\n",
                b.origin ? b.origin->workerId.c_str() : "?", b.origin ? b.origin->writer.c_str() : "?",
                fmtTime(res.spot.first_us).c_str(),
                formatRatio(res.spot.claimed_us > 0 ? res.spot.first_us / res.spot.claimed_us : 0.0).c_str());
  else if (res.spot.ran)
    std::printf("checked      %s%s\n", spotLine.c_str(),
                res.spot.agreed ? "" : res.spot.remeasuredHere ? "; the top candidates re-measured here" : "");
  else if (res.winner && b.origin)
    std::printf("unconfirmed  the winner is a claim of worker %s (token %s): %s, so it stays unconfirmed until another "
                "identity measures it\n",
                b.origin->workerId.c_str(), b.origin->writer.c_str(),
                measure.whyNotHere.empty() ? "it was not re-measured here" : measure.whyNotHere.c_str());
  if (const auto& d = res.tune.defaultConfig) {
    if (d->ok())
      std::printf("vs default   %s  (default %s: %s)\n", formatRatio(speedup).c_str(), d->config.str().c_str(),
                  fmtTime(d->samples.median_us).c_str());
    else
      std::printf("vs default   default config failed: %s\n", measure::trialStatusName(d->status));
  }
  std::printf("search       %s in %s (%s)\n", countOf(int64_t(res.tune.trials.size()), "trial").c_str(),
              fmtDuration(res.tune.seconds).c_str(),
              statuses.c_str());
  printFailed(res);
  if (const std::string line = pushedLine(res.pushed); !line.empty()) std::printf("%s\n", line.c_str());
  if (interrupted) {
    std::printf("interrupted  the search stopped early; --resume continues from the store\n");
    std::fflush(stdout);
    throw CLI::RuntimeError(kExitInterrupted);
  }
}

struct BestFlags {
  KernelFlags kernel;
  std::string target = "host", db = "tessera.db";
  CacheFlags cache;
  int threads = kAllCores;
  bool json = false, noVerify = false, verifyTime = false;
  std::string trust = "any";  // "reproduced": never serve a claim (cache/trust.h, Tier)
  GpuFlags gpu;
};

// A winner from the shared cache, checked on this machine before it is shown as usable: "" when it
// passed, else why not (`unverifiable` set when this machine cannot run it: no device).
std::string checkSharedWinner(const ir::Kernel& k, const TargetDesc& t, const cache::Record& rec, const BestFlags& f,
                              bool* unverifiable, double* retimed) {
  *unverifiable = false;
  *retimed = 0;
  if (t.isGpu()) {
    *unverifiable = true;
    return "not verified: checking a " + t.name + " winner needs that device (tessera tune --target " + t.name + ")";
  }
  auto problem = session::tuneProblem(k, t);
  if (!problem.ok()) return problem.error().message;
  measure::MeasureSettings ms;
  ms.measure.minTimeSec = f.verifyTime || !cache::isConfirmed(rec.trust) ? 0.05 : 0.005;
  auto measurer = measure::makeHostMeasurer(k, t, ms);
  session::HitCheck check;
  Status s = session::verifySharedHit(rec, problem->space, *measurer, {.time = verifyTiming(f.verifyTime)}, &check);
  if (s.ok() && check.timed) *retimed = check.measured_us;
  return s.ok() ? "" : s.error().message;
}

// Whose word a winner stands on (cache/trust.h), for `tessera best`.
std::string trustLine(const cache::Record& r) {
  switch (r.trust) {
    case cache::Trust::Vouched:
      return r.writer.empty() ? "reproduced (vouched): measured by this machine"
                              : "reproduced (vouched): pinned by an admin, or a measuring identity the admin named";
    case cache::Trust::Confirmed: return "reproduced (confirmed): another identity's measurement of this config agrees";
    case cache::Trust::Refuted: return "refuted: another identity measured this config much slower";
    case cache::Trust::Disputed:
      return "a disputed claim of " + (r.writer.empty() ? std::string("an unnamed writer") : "token " + r.writer) +
             ": a reader's run refuted it, and no other identity reproduced it";
    case cache::Trust::Claim: break;
  }
  return "a claim of " + (r.writer.empty() ? std::string("an unnamed writer") : "token " + r.writer) +
         ", not confirmed by another identity (re-timed before it is used)";
}

void bestCommand(const BestFlags& f) {
  loadGpuFacts(f.gpu);
  auto k = buildKernel(f.kernel);
  if (!k.ok()) failWith(k.error());
  auto t = session::targetWithGpu(f.target, f.gpu.gpus, f.threads);
  if (!t.ok()) failWith(t.error());
  cache::HardKey key = measure::hardKeyFor(*k, *t);
  std::string keyId = cache::keyIdOf(key);
  std::optional<cache::Record> rec;
  std::string source;
  // A lookup only reads: a missing store file is not created (a mistyped --db would otherwise
  // leave an empty store behind and answer as if nothing were stored there). The shared cache
  // may still answer.
  Expected<std::unique_ptr<cache::RecordStore>> store = makeError(ErrorCode::NotFound, "no store at " + f.db);
  if (std::filesystem::exists(f.db)) store = cache::openSqliteStore(f.db);
  if (!store.ok()) std::fprintf(stderr, "tessera: warning: %s\n", store.error().message.c_str());
  cache::CacheClient client(clientOptions(f.cache));
  requireCacheAccess(client, "read", "best reads the shared winners");
  std::vector<cache::NearestMatch> nearest;
  std::string verification;  // checked winners: "verified", "not verified: ..." or why it failed
  double retimed = 0;        // what a claim's re-timing here measured
  const bool reproducedOnly = f.trust == "reproduced";
  std::vector<std::string> skipped;  // candidates refused here, one line each
  // A winner is shown as usable once it passed here: a shared one always, a stored one when it is
  // a claim (another machine's, a worker's) rather than this machine's or a confirmed measurement.
  // One that fails is skipped for the next candidate, saying so, and (shared) disputed: the reader's
  // refutation demotes the claim for every reader (cache/trust.h).
  auto accept = [&](const cache::Record& r, const std::string& from, const char* whose, bool shared) {
    bool unverifiable = false;
    std::string why = f.noVerify ? "not verified (--no-verify)" : checkSharedWinner(*k, *t, r, f, &unverifiable, &retimed);
    if (why.empty() || unverifiable || f.noVerify) {
      rec = r;
      source = from;
      verification = why.empty() ? "verified" : why;
      return true;
    }
    std::fprintf(stderr, "tessera: skipped %s candidate (config %s, %s %s, written by %s): failed verification: %s\n",
                 whose, r.config.c_str(), std::string(cache::trustName(r.trust)).c_str(), fmtTime(r.median_us).c_str(),
                 r.writer.empty() ? "?" : r.writer.c_str(), why.c_str());
    skipped.push_back(r.config + ": " + why);
    verification = "failed: " + why;
    if (shared && r.id > 0 && !cache::isConfirmed(r.trust)) {
      auto d = client.dispute(r.id, why, retimed);
      if (!d.ok()) std::fprintf(stderr, "tessera: warning: the refutation was not recorded: %s\n", d.error().message.c_str());
    }
    return false;
  };
  auto wanted = [&](const cache::Record& r) { return !reproducedOnly || cache::isConfirmed(r.trust); };
  if (store.ok()) {
    auto b = (*store)->best(keyId);
    if (b.ok() && *b && wanted((*b)->record)) {
      if (cache::isConfirmed((*b)->record.trust)) {
        rec = (*b)->record;
        source = f.db;
      } else {
        accept((*b)->record, f.db, "the stored", false);
      }
    }
  }
  if (!rec && client.enabled()) {
    auto r = client.best(key, measure::provenanceFor(*t, provenanceInputs()), true);
    if (!r.warning.empty()) std::fprintf(stderr, "tessera: warning: %s\n", r.warning.c_str());
    if (r.refused()) fail(r.warning, kExitRefused);
    const std::string url = client.options().base_url;
    std::vector<int64_t> tried;
    if (r.kind == cache::LookupResult::Kind::Hit && wanted(*r.record)) {
      tried.push_back(r.record->id);
      accept(*r.record, url, "the shared cache's", true);
    }
    // The winner refuted here (or a claim where only reproduced records are taken): the next
    // candidates in the winner order (trust, then time), a few at most, each checked alike.
    constexpr int kMaxFallbacks = 8;
    if (!rec && r.kind == cache::LookupResult::Kind::Hit) {
      auto more = client.candidates(keyId);
      if (!more.ok()) std::fprintf(stderr, "tessera: warning: no further candidates: %s\n", more.error().message.c_str());
      int left = kMaxFallbacks;
      for (const cache::Record& c : more.ok() ? *more : std::vector<cache::Record>{}) {
        if (rec || left == 0) break;
        if (!wanted(c) || std::find(tried.begin(), tried.end(), c.id) != tried.end()) continue;
        tried.push_back(c.id);
        --left;
        accept(c, url, "the shared cache's next", true);
      }
    }
    if (!rec && r.kind == cache::LookupResult::Kind::Hit && reproducedOnly && skipped.empty())
      std::fprintf(stderr, "tessera: the shared cache has no reproduced record of this key (--trust reproduced)\n");
    if (r.kind == cache::LookupResult::Kind::Nearest) nearest = r.nearest;
  }
  // A winner shown, its store gets the kernel's text (printed here from the kernel named, so it
  // hashes to the key's workload by construction): `compare ... key HASH` and the dashboard can
  // then rebuild it from this store alone, whoever measured it. Only the content-addressed text is
  // written; a lookup never adds records.
  if (rec && store.ok())
    if (Status kept = (*store)->putKernelText(key.workload, ir::printKernel(*k, {.anonymize = true})); !kept.ok())
      std::fprintf(stderr, "tessera: warning: could not keep the kernel's text in %s: %s\n", f.db.c_str(),
                   kept.error().message.c_str());
  if (!rec && store.ok() && nearest.empty()) {
    auto near = (*store)->nearest(key, 3);
    if (near.ok()) nearest = *near;
  }
  // Without a measured winner, the best stored estimate is shown, labelled: never as the winner.
  std::optional<cache::Record> estimate;
  if (!rec && store.ok()) {
    auto all = cache::listAll(**store, {.key_id = keyId});
    if (all.ok())
      for (const auto& r : *all)
        if (r.status == cache::RecordStatus::Estimated && (!estimate || r.median_us < estimate->median_us)) estimate = r;
  }
  if (f.json) {
    nlohmann::json j = {{"kernel", k->name}, {"key_id", keyId}, {"key", cache::hardKeyToJson(key)}};
    if (rec) {
      j["source"] = source;
      j["record"] = nlohmann::json::parse(cache::encodeRecord(*rec));
    } else {
      j["error"] = "no stored winner";  // the same "error" field every --json failure has
      j["exit_code"] = int(kExitNotFound);
    }
    if (!verification.empty()) j["verification"] = verification;
    if (retimed > 0) j["retimed_us"] = retimed;
    for (const auto& sk : skipped) j["skipped"].push_back(sk);
    for (const auto& n : nearest)
      j["nearest"].push_back({{"distance", n.distance},
                              {"differs_in", cache::keyDifferences(key, n.record.key)},
                              {"record", nlohmann::json::parse(cache::encodeRecord(n.record))}});
    if (estimate) j["estimate"] = nlohmann::json::parse(cache::encodeRecord(*estimate));
    std::printf("%s\n", j.dump(2).c_str());
    if (!rec) throw CLI::RuntimeError(kExitNotFound);
    return;
  }
  if (rec) {
    std::printf("%s on %s (key %.12s, from %s)%s\n", k->name.c_str(), t->name.c_str(), keyId.c_str(), source.c_str(),
                rec->stale ? "  [stale: measured with another toolchain]" : "");
    std::printf("config      %s\n", rec->config.c_str());
    std::printf("time        %s median (p20 %s, p80 %s, n=%lld%s)\n", fmtTime(rec->median_us).c_str(),
                fmtTimeNumber(rec->p20_us, rec->median_us).c_str(), fmtTimeNumber(rec->p80_us, rec->median_us).c_str(),
                (long long)rec->n, rec->remeasured ? ", re-measured at the end of its run" : "");
    // A winner never confirmed by its run's quiet re-measurement is not served as a tuned one.
    if (!rec->remeasured && rec->status == cache::RecordStatus::Ok) std::printf("caution     %s\n", kNotRemeasured + 2);
    std::printf("throughput  %s (%s)\n", fmtThroughput(*k, ir::isComputeBound(*k) ? rec->gflops : rec->gbps).c_str(),
                peakShareText(rec->peak_fraction, "peak", aboveWhy(*k, *t)).c_str());
    std::printf("measured    %s by %s@%s, tessera %s, LLVM %s; %lld trials, %.0f s of tuning\n",
                rec->provenance.created_at.c_str(), rec->provenance.user.c_str(), rec->provenance.host.c_str(),
                rec->provenance.tessera_version.c_str(), rec->provenance.llvm_version.c_str(), (long long)rec->trials,
                rec->tuning_seconds);
    if (!rec->writer.empty()) std::printf("written by  token %s\n", rec->writer.c_str());
    std::printf("trust       %s\n", trustLine(*rec).c_str());
    if (!skipped.empty())
      std::printf("skipped     %zu better-ranked candidate%s refuted here (stderr says which)\n", skipped.size(),
                  skipped.size() == 1 ? "" : "s");
    if (!verification.empty()) {
      char timed[96] = "";
      if (retimed > 0) std::snprintf(timed, sizeof timed, "; re-timed here at %s, within the noise", fmtTime(retimed).c_str());
      std::printf("checked     %s%s\n",
                  verification == "verified" ? "compiled, run and matches the reference here" : verification.c_str(),
                  verification == "verified" ? timed : "");
    }
    return;
  }
  std::printf("no stored winner for %s on %s (key %.12s)\n", k->name.c_str(), t->name.c_str(), keyId.c_str());
  if (estimate)
    std::printf("  estimated (not measured): %s, %s predicted by %s, %s-bound; a measurement replaces it\n",
                estimate->config.c_str(), fmtTime(estimate->median_us).c_str(), estimate->estimator.c_str(),
                estimate->bound.c_str());
  for (const auto& n : nearest)
    std::printf("  nearest: shape %s (distance %.2f): %s, %s; differs in %s\n",
                cache::formatShape(n.record.key.shape).c_str(), n.distance, n.record.config.c_str(),
                fmtTime(n.record.median_us).c_str(), missReason(key, n.record.key).c_str());
  throw CLI::RuntimeError(kExitNotFound);
}

}  // namespace

void addTuneCommands(CLI::App& app) {
  auto f = std::make_shared<TuneFlags>();
  auto* t = app.add_subcommand("tune", "search for the fastest config of a kernel; every candidate is stored");
  t->add_option("--target", f->target, "target")->capture_default_str();
  addGpuFlags(t, &f->gpu);
  f->trialsOption = t->add_option("--trials", f->trials, "measured candidates at most (--estimate: 32)")->capture_default_str();
  addThreadsOption(t, &f->threads);
  addRangeTuneOptions(t, &f->range);
  t->add_option("--time-budget", f->timeBudget, "seconds of tuning at most (0: none)");
  t->add_option("--strategy", f->strategy,
                "evolutionary | ga | random | exhaustive | ranked (default: evolutionary; ranked with --estimate)");
  t->add_option("--seed", f->seed, "search seed")->capture_default_str();
  t->add_option("--space", f->spaceSpec, "narrow knob domains, e.g. 'schedule=packed,MR=6|8,NR=32'");
  t->add_option("--batch", f->batch, "candidates measured per round")->capture_default_str();
  t->add_option("--top-k", f->topK, "best candidates re-measured interleaved at the end")->capture_default_str();
  t->add_option("--timeout", f->timeout, "seconds a candidate may run before it is killed")->capture_default_str();
  t->add_option("--min-time", f->minTime, "seconds of timed runs per candidate")->capture_default_str();
  t->add_option("--db", f->db, "local SQLite store")->capture_default_str();
  t->add_option("--device", f->device,
                "GPU targets: the device index (default 0), or 'emulated' to run the loop on this CPU's emulation of the "
                "kernels (timings labelled, not stored)");
  addCacheFlags(t, &f->cache);
  t->add_flag("--workers", f->workers,
              "measure on the live workers of the target through the shared service (--cache); several share a batch");
  t->add_option("--worker-wait", f->workerWait,
                "seconds to wait for a live worker (before the tune and while a batch waits) before failing")
      ->capture_default_str();
  t->add_flag("--resume", f->resume, "continue from what the store has for this kernel");
  t->add_flag("--force", f->force, "tune even when a fresh winner is stored");
  t->add_flag("--json", f->json, "machine-readable summary");
  t->add_flag("--estimate", f->estimate,
              "GPU targets without the device: rank the space by the analytic model, check the top candidates "
              "through ptxas / the AMDGPU backend, store them as estimated");
  t->add_flag("--verify-time", f->verifyTime,
              "re-time every shared-cache winner before trusting it (claims are always re-timed; every winner is compiled and checked)");
  addMaxElementsOption(t, &f->maxElements);
  t->add_flag("--no-warm-start", f->noWarmStart,
              "do not pre-train the cost model on the store's results for other shapes of this family");
  t->add_flag("--no-transfer", f->noTransfer,
              "do not warm-start from the store's and the shared cache's results of this kernel on other GPUs");
  addKernelSubcommands(t, &f->kernel, [f] { tuneCommand(*f); });

  auto b = std::make_shared<BestFlags>();
  auto* best = app.add_subcommand("best", "print the stored winner for a kernel (exit 5 when there is none)");
  best->add_option("--target", b->target, "target")->capture_default_str();
  addGpuFlags(best, &b->gpu);
  best->add_option("--db", b->db, "local SQLite store")->capture_default_str();
  addThreadsOption(best, &b->threads);
  addCacheFlags(best, &b->cache);
  best->add_flag("--json", b->json, "machine-readable output");
  best->add_flag("--no-verify", b->noVerify, "show a shared-cache winner without compiling and checking it here");
  best->add_option("--trust", b->trust,
                   "any: the best record of the highest tier there is, labelled; reproduced: never a claim (one "
                   "token's word)")
      ->check(CLI::IsMember({"any", "reproduced"}))
      ->capture_default_str();
  best->add_flag("--verify-time", b->verifyTime, "also re-time a confirmed shared-cache winner (claims always are; refused when more than 2.25x slower than claimed)");
  addKernelSubcommands(best, &b->kernel, [b] { bestCommand(*b); });
}

}  // namespace tessera::cli
