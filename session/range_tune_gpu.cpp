// Owns tuning a GPU kernel over a range through the estimate (`tessera tune gemm --m LO..HI
// --target sm_80 --estimate`, likewise elementwise --rows and attention --seq; range_tune.h): each
// training point tuned as its own kernel with the estimate measurer (ptxas resources + the
// analytic model; records stored as estimates), the points' best shape-generic configs (GEMM:
// strategies simt, mma, mma-lane; attention: flash-simt, flash-mma; elementwise: any) compiled
// once with the runtime size at the range's top (ptxas: a config that spills or exceeds a limit
// there is dropped), each then estimated at every training and held-out point with that kernel's
// resources, and the dispatch rule fitted to those estimates. Nothing runs: the rule's times are
// the model's, not a device's.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <limits>
#include <set>

#include "session/range_tune.h"
#include "codegen/gpu.h"
#include "costmodel/gpu_model.h"
#include "ir/families.h"
#include "ir/text.h"
#include "measure/estimate.h"
#include "support/si_format.h"

namespace tessera::session {

using bundle::RangePoints;
using bundle::ShapeRange;
using bundle::fitDispatchRule;
using bundle::rangeDimName;

namespace {

// Whether `c` builds a kernel that takes its size at run time (codegen/gpu.h RuntimeDims).
bool shapeGenericOnGpu(const ir::Config& c, ir::Family f) {
  if (f == ir::Family::Elementwise) return true;
  if (f == ir::Family::Attention && !c.has("strategy")) return true;  // flash-simt
  auto s = c.getStr("strategy");
  if (f == ir::Family::Attention) return s.ok() && (*s == "flash-simt" || *s == "flash-mma");
  return s.ok() && (*s == "simt" || *s == "mma" || *s == "mma-lane");
}

const char* genericStrategies(ir::Family f) {
  return f == ir::Family::Gemm ? "simt, mma, mma-lane" : f == ir::Family::Attention ? "flash-simt, flash-mma" : "elementwise";
}

}  // namespace

Expected<RangeTuneResult> tuneRangeGpuEstimate(const std::function<Expected<ir::Kernel>(int64_t)>& kernelAt,
                                               const ShapeRange& range, const TargetDesc& t, cache::RecordStore* store,
                                               const cache::Provenance& prov, const RangeTuneSettings& s,
                                               const RangeTuneCallbacks& cb) {
  auto progress = [&](const std::string& l) {
    if (cb.onProgress) cb.onProgress(l);
  };
  auto warn = [&](const std::string& l) {
    if (cb.onWarning) cb.onWarning(l);
  };
  TESSERA_ASSIGN(ir::Kernel maxKernel, kernelAt(range.hi));
  const ir::Family fam = maxKernel.family;
  const std::string dim = rangeDimName(maxKernel);
  if (t.vendor != Vendor::Nvidia)
    return makeError(ErrorCode::Unsupported, "a range of " + dim + " on a GPU target: NVIDIA targets only, not " + t.name);
  RangeTuneResult out;
  TESSERA_ASSIGN(const RangePoints pts, startRangeTune(out, maxKernel, range, s.maxTrain));

  // 1. Each training point tuned through the estimate.
  std::vector<ir::Config> candidates;
  std::set<std::string> seen;
  auto addCandidate = [&](const ir::Config& c) {
    if (shapeGenericOnGpu(c, fam) && seen.insert(c.str()).second) candidates.push_back(c);
  };
  SessionSettings session = s.session;
  session.acceptEstimatesOf = costmodel::kGpuModelName;
  // Progress across the points, not only within one: which point of how many, and the time so far.
  const auto started = std::chrono::steady_clock::now();
  progress(std::to_string(pts.train.size()) + " training points of " + dim + " " + std::to_string(range.lo) + ".." +
           std::to_string(range.hi) + ", each: the model's top " + std::to_string(session.loop.trials) +
           " configs checked through " + t.name + "'s compiler");
  size_t done = 0;
  auto at = [&](int64_t m) {
    double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    char buf[96];
    std::snprintf(buf, sizeof buf, "[%zu/%zu %.0f s] ", ++done, pts.train.size(), sec);
    return buf + dim + "=" + std::to_string(m);
  };
  for (int64_t m : pts.train) {
    if (cb.shouldStop && cb.shouldStop()) return makeError(ErrorCode::RuntimeError, "interrupted");
    TESSERA_ASSIGN(ir::Kernel k, kernelAt(m));
    TESSERA_ASSIGN(TuneProblem problem, tuneProblem(k, t, s.spaceSpec));
    auto measurer = measure::makeEstimateMeasurer(k, t);
    SessionCallbacks scb;
    scb.onWarning = [&](const std::string& w) { warn(w); };
    TESSERA_ASSIGN(SessionResult res, runTuneSession(problem, *measurer, store, nullptr, prov, session, scb));
    if (res.outcome == SessionResult::Outcome::AlreadyTuned) {
      auto c = ir::Config::fromJson(res.cached->config);
      if (c.ok() && !shapeGenericOnGpu(*c, fam))
        warn(dim + "=" + std::to_string(m) + ": the stored winner (" + c->str() + ") takes no runtime " + dim + "; --force tunes again");
      if (c.ok()) addCandidate(*c);
      progress(at(m) + ": stored winner " + (c.ok() ? c->str() : res.cached->config));
      continue;
    }
    if (res.outcome == SessionResult::Outcome::NothingCorrect) {
      warn(at(m) + ": no candidate compiled within the target's limits");
      continue;
    }
    std::vector<measure::TrialResult> ranked;
    for (const auto& r : res.tune.trials)
      if (r.ok() && shapeGenericOnGpu(r.config, fam)) ranked.push_back(r);
    std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.samples.median_us < b.samples.median_us; });
    if (res.tune.best) addCandidate(res.tune.best->config);
    for (size_t i = 0; i < ranked.size() && int(i) < s.candidatesPerPoint; ++i) addCandidate(ranked[i].config);
    progress(at(m) + ": estimated " + std::to_string(res.tune.trials.size()) + " candidates, best " +
             (res.tune.best ? res.tune.best->config.str() + " " + formatMicros(res.tune.best->samples.median_us) + " (estimate)" : "-"));
  }
  if (candidates.empty())
    return makeError(ErrorCode::NotFound, std::string("no point of the range produced a shape-generic winner (") + genericStrategies(fam) + ")");

  // 2. Each candidate compiled once with the runtime size (its resources), estimated at every point.
  std::vector<ir::Config> kept;
  std::vector<codegen::ResourceReport> resources;
  for (const auto& c : candidates) {
    auto bin = codegen::compileGpu(maxKernel, c, t, {.runtime = {.m = true}});
    if (!bin.ok()) {
      warn(c.str() + ": no runtime-" + dim + " kernel: " + bin.error().message);
      continue;
    }
    if (!bin->resources.ok || bin->resources.spills()) {
      warn(c.str() + ": the runtime-" + dim + " kernel is over the limits: " + bin->resources.summary());
      continue;
    }
    kept.push_back(c);
    resources.push_back(bin->resources);
  }
  if (kept.empty()) return makeError(ErrorCode::NotFound, "no candidate compiled with runtime " + dim + " within " + t.name + "'s limits");
  for (const auto& c : kept) out.table.configs.push_back(c.str());
  out.table.times.assign(kept.size(), std::vector<double>(out.table.points.size(), std::numeric_limits<double>::infinity()));
  for (size_t p = 0; p < out.table.points.size(); ++p) {
    TESSERA_ASSIGN(ir::Kernel k, kernelAt(out.table.points[p]));
    for (size_t c = 0; c < kept.size(); ++c) {
      auto e = measure::estimateKernel(k, kept[c], t, &resources[c]);
      if (e.ok() && std::isfinite(e->model.timeUs) && e->model.timeUs > 0) out.table.times[c][p] = e->model.timeUs;
    }
  }
  progress(std::to_string(kept.size()) + " shape-generic candidates estimated at " + std::to_string(out.table.points.size()) + " points");

  // 3. The rule.
  TESSERA_ASSIGN(out.rule, fitDispatchRule(out.table, out.train, out.heldOut, range.lo, range.hi, s.fit));
  out.rule.dim = dim;
  return out;
}

}  // namespace tessera::session
