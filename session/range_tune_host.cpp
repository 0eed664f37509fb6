// Owns tuning over a shape range on the host and the rule file it writes (range_tune.h): each
// training point tuned as its own kernel, the winners measured as shape-generic kernels at every
// point, the boundaries refined and the few-row fixed buckets pinned.
#include "session/range_tune.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "ir/families.h"
#include "ir/text.h"
#include "search/space.h"
#include "support/si_format.h"

namespace tessera::session {

using bundle::Bucket;
using bundle::DispatchRule;
using bundle::RangePoints;
using bundle::ShapeRange;
using bundle::SizedCompileCache;
using bundle::TimeTable;
using bundle::fitDispatchRule;
using bundle::makeSizedCompileCache;
using bundle::makeSizedHostMeasurer;
using bundle::pinFixedBucket;
using bundle::ruleToJson;

namespace {

constexpr int64_t kInPlaceBRows = 64;

bool blisFamily(const ir::Config& c) {
  auto s = c.getStr("schedule");
  return s.ok() && (*s == "blis" || *s == "bf16dot" || *s == "amx");
}

std::vector<size_t> allIndices(size_t n) {
  std::vector<size_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

std::string fmtFactor(double f) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", f);
  return b;
}

}  // namespace

// The candidates worth measuring at the point after `prev` (RangeTuneSettings' pruning): all while
// the best run at `prev` is short; once it is long, those within pruneFactor of that best, and at
// least the keepAtLeast fastest there. A candidate that failed at `prev` is not measured again.
std::vector<size_t> rangeCandidatesToMeasure(const TimeTable& t, size_t prev, const RangeTuneSettings& s) {
  const size_t n = t.configs.size();
  double best = std::numeric_limits<double>::infinity();
  for (size_t c = 0; c < n; ++c) best = std::min(best, t.times[c][prev]);
  if (s.pruneAboveUs <= 0 || !std::isfinite(best) || best < s.pruneAboveUs) return allIndices(n);
  std::vector<size_t> order = allIndices(n);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return t.times[a][prev] < t.times[b][prev]; });
  std::vector<size_t> keep;
  for (size_t i = 0; i < order.size(); ++i) {
    const double v = t.times[order[i]][prev];
    if (!std::isfinite(v)) break;
    if (int(i) < s.keepAtLeast || v <= best * s.pruneFactor) keep.push_back(order[i]);
  }
  std::sort(keep.begin(), keep.end());
  return keep;
}

namespace {

// The times of configs `a` and `b` at the point kernel `k` (sized measurer: runtime M), measured in
// two interleaved rounds; +inf where one failed.
std::pair<double, double> measurePair(const std::shared_ptr<SizedCompileCache>& cache, const ir::Kernel& k, const std::string& a,
                                      const std::string& b, const RangeTuneSettings& s) {
  const double inf = std::numeric_limits<double>::infinity();
  auto ca = ir::Config::parseAssignments(a), cb = ir::Config::parseAssignments(b);
  if (!ca.ok() || !cb.ok()) return {inf, inf};
  auto measured = makeSizedHostMeasurer(cache, k, s.measure)->remeasure({*ca, *cb}, 2);
  if (!measured.ok()) return {inf, inf};
  const std::vector<measure::TrialResult>& r = *measured;
  return {r[0].ok() ? r[0].samples.median_us : inf, r[1].ok() ? r[1].samples.median_us : inf};
}

void refineBoundaries(RangeTuneResult& out, const std::function<Expected<ir::Kernel>(int64_t)>& kernelAt,
                      const std::shared_ptr<SizedCompileCache>& cache, const RangeTuneSettings& s,
                      const std::function<void(const std::string&)>& progress) {
  DispatchRule& rule = out.rule;
  const auto& pts = out.table.points;
  for (size_t r = 0; s.boundarySteps > 0 && r + 1 < rule.buckets.size(); ++r) {
    Bucket& L = rule.buckets[r];
    Bucket& R = rule.buckets[r + 1];
    if (L.fixed || R.fixed || L.config == R.config) continue;
    // The measured points either side of the fitted boundary: the left kernel owns lo, the right hi.
    int64_t lo = L.lo, hi = R.hi;
    for (int64_t p : pts) {
      if (p >= L.lo && p <= L.hi) lo = p;
      if (p >= R.lo && p <= R.hi && hi == R.hi) hi = p;
    }
    const std::string& cl = rule.configs[size_t(L.config)];
    const std::string& cr = rule.configs[size_t(R.config)];
    int steps = 0;
    for (; steps < s.boundarySteps && hi - lo >= 2; ++steps) {
      const int64_t mid = std::clamp<int64_t>(std::llround(std::sqrt(double(lo) * double(hi))), lo + 1, hi - 1);
      auto k = kernelAt(mid);
      if (!k.ok()) break;
      auto [tl, tr] = measurePair(cache, *k, cl, cr, s);
      out.probes.push_back({mid, cl, cr, tl, tr, false});
      if (!std::isfinite(tl) || !std::isfinite(tr)) break;
      (tl <= tr ? lo : hi) = mid;
    }
    if (steps == 0) continue;
    const int64_t end = std::clamp<int64_t>(std::llround(std::floor(std::sqrt(double(lo) * double(hi)))), lo, hi - 1);
    if (progress)
      progress("boundary " + std::to_string(r) + "|" + std::to_string(r + 1) + ": " + out.dim + " " + std::to_string(L.hi) + " -> " +
               std::to_string(end) + " (" + std::to_string(steps) + " measured midpoints, the switch lies in " + std::to_string(lo) +
               ".." + std::to_string(hi) + ")");
    L.hi = end;
    R.lo = end + 1;
  }
}

void pinFewRowKernels(RangeTuneResult& out, const std::function<Expected<ir::Kernel>(int64_t)>& kernelAt,
                      const std::shared_ptr<SizedCompileCache>& cache, const ShapeRange& range, const TargetDesc& t,
                      const RangeTuneSettings& s, const std::function<void(const std::string&)>& progress) {
  const double inf = std::numeric_limits<double>::infinity();
  // Every M up to fixedUpTo: a loss does not end the walk (one Zen 5 core, N = K = 1024: nvec lost
  // at M = 2 and 3 and won by 18-22 % at 5, 8 and 12, which the walk stopping at two losses in a
  // row never offered).
  for (int64_t m = range.lo; m <= std::min(range.hi, s.fixedUpTo); ++m) {
    if (!range.list.empty() && !std::binary_search(range.list.begin(), range.list.end(), m)) continue;
    auto k = kernelAt(m);
    if (!k.ok()) return;
    auto space = search::makeSpace(*k, t);
    if (!space.ok()) return;
    const ir::Config def = space->defaults();
    const int b = out.rule.bucketOf(m);
    if (b < 0 || blisFamily(def)) return;  // the default is a shape-generic schedule from here up
    const std::string generic = out.rule.configs[size_t(out.rule.buckets[size_t(b)].config)];
    auto cg = ir::Config::parseAssignments(generic);
    if (!cg.ok()) return;
    // Interleaved: the fixed kernel and the rule's (runtime M) alternate, three rounds each; both
    // compiled once (the caches), each round a checked run and timed samples.
    auto fixedM = makeSizedHostMeasurer(makeSizedCompileCache(*k, t, /*runtimeM=*/false), *k, s.measure);
    auto sizedM = makeSizedHostMeasurer(cache, *k, s.measure);
    double tf = inf, tg = inf;
    for (int round = 0; round < 3; ++round) {
      auto rf = fixedM->remeasure({def}, 1);
      auto rg = sizedM->remeasure({*cg}, 1);
      if (rf.ok() && rf->front().ok()) tf = std::min(tf, rf->front().samples.median_us);
      if (rg.ok() && rg->front().ok()) tg = std::min(tg, rg->front().samples.median_us);
    }
    out.probes.push_back({m, def.str(), generic, tf, tg, true});
    const bool wins = std::isfinite(tf) && tf * (1 + s.fixedGain) <= tg;
    if (progress)
      progress(out.dim + "=" + std::to_string(m) + ": fixed " + def.str() + " " + formatMicros(tf) + " against the rule's " +
               formatMicros(tg) +
               (wins ? ": a fixed bucket" : ": shape-generic here"));
    if (!wins) continue;
    if (!pinFixedBucket(out.rule, m, def.str()).ok()) return;
  }
}

}  // namespace

Expected<RangeTuneResult> tuneRange(const std::function<Expected<ir::Kernel>(int64_t)>& kernelAt, const ShapeRange& range,
                                    const TargetDesc& t, cache::RecordStore* store, const cache::Provenance& prov,
                                    const RangeTuneSettings& s, const RangeTuneCallbacks& cb) {
  auto progress = [&](const std::string& l) {
    if (cb.onProgress) cb.onProgress(l);
  };
  auto warn = [&](const std::string& l) {
    if (cb.onWarning) cb.onWarning(l);
  };
  if (t.isGpu()) return makeError(ErrorCode::Unsupported, "tuning over a shape range runs on the host target");
  TESSERA_ASSIGN(ir::Kernel maxKernel, kernelAt(range.hi));
  RangeTuneResult out;
  TESSERA_ASSIGN(const RangePoints pts, startRangeTune(out, maxKernel, range, s.maxTrain));
  const bool gemm = maxKernel.family == ir::Family::Gemm;
  const std::string dim = out.dim;
  ir::GemmInfo g;
  std::string spec = s.spaceSpec;
  if (gemm) {
    TESSERA_ASSIGN(g, ir::analyzeGemm(maxKernel));
    // Shape-generic GEMMs are the explicit GEMM's: each point's search stays in its family.
    if (spec.find("schedule") == std::string::npos) spec = "schedule=blis" + (spec.empty() ? std::string() : "," + spec);
  }
  auto shapeGeneric = [&](const ir::Config& c) { return !gemm || blisFamily(c); };

  // 1. Each training point tuned as its own kernel.
  std::vector<ir::Config> candidates;
  std::set<std::string> seen;
  int64_t pointM = 0;
  auto addCandidate = [&](const ir::Config& c) {
    if (!shapeGeneric(c) || !seen.insert(c.str()).second) return;
    candidates.push_back(c);
    // At a few rows packing B costs as much as the product: such points' winners are offered
    // reading B in place too (PACKB=0, not a knob of the search space).
    auto sched = c.getStr("schedule");
    if (gemm && pointM <= kInPlaceBRows && sched.ok() && *sched == "blis" && !g.transB && !c.values.count("PACKB")) {
      ir::Config v = c;
      ir::Config extra = *ir::Config::parseAssignments("PACKB=0");
      v.values.insert(extra.values.begin(), extra.values.end());
      if (seen.insert(v.str()).second) candidates.push_back(v);
    }
  };
  for (int64_t m : pts.train) {
    pointM = m;
    if (cb.shouldStop && cb.shouldStop()) return makeError(ErrorCode::RuntimeError, "interrupted");
    TESSERA_ASSIGN(ir::Kernel k, kernelAt(m));
    TESSERA_ASSIGN(TuneProblem problem, tuneProblem(k, t, spec));
    auto measurer = measure::makeHostMeasurer(k, t, s.measure);
    SessionCallbacks scb;
    scb.onWarning = [&](const std::string& w) { warn(w); };
    TESSERA_ASSIGN(SessionResult res, runTuneSession(problem, *measurer, store, nullptr, prov, s.session, scb));
    if (res.outcome == SessionResult::Outcome::AlreadyTuned) {
      auto c = ir::Config::fromJson(res.cached->config);
      if (c.ok() && !shapeGeneric(*c))
        warn(dim + "=" + std::to_string(m) + ": the stored winner (" + c->str() +
             ") is not shape-generic; --force tunes the blis family there");
      if (c.ok()) addCandidate(*c);
      progress(dim + "=" + std::to_string(m) + ": stored winner " + (c.ok() ? c->str() : res.cached->config));
      continue;
    }
    if (res.outcome == SessionResult::Outcome::NothingCorrect) {
      warn(dim + "=" + std::to_string(m) + ": no candidate produced a correct result");
      continue;
    }
    std::vector<measure::TrialResult> top = res.tune.remeasured;
    std::sort(top.begin(), top.end(), [](const auto& a, const auto& b) {
      if (a.ok() != b.ok()) return a.ok();
      return a.samples.median_us < b.samples.median_us;
    });
    if (res.tune.best) addCandidate(res.tune.best->config);
    for (size_t i = 0; i < top.size() && int(i) < s.candidatesPerPoint; ++i)
      if (top[i].ok()) addCandidate(top[i].config);
    progress(dim + "=" + std::to_string(m) + ": tuned " + std::to_string(res.tune.trials.size()) + " candidates, best " +
             (res.tune.best ? res.tune.best->config.str() + " " + formatMicros(res.tune.best->samples.median_us) : "-"));
  }
  if (candidates.empty()) return makeError(ErrorCode::NotFound, "no point of the range produced a shape-generic winner");

  // 2. Every candidate as a shape-generic kernel at every point (training and held out).
  auto cache = makeSizedCompileCache(maxKernel, t);
  for (const auto& c : candidates) out.table.configs.push_back(c.str());
  out.table.times.assign(candidates.size(), std::vector<double>(out.table.points.size(), std::numeric_limits<double>::infinity()));
  for (size_t p = 0; p < out.table.points.size(); ++p) {
    if (cb.shouldStop && cb.shouldStop()) return makeError(ErrorCode::RuntimeError, "interrupted");
    TESSERA_ASSIGN(ir::Kernel k, kernelAt(out.table.points[p]));
    auto measurer = makeSizedHostMeasurer(cache, k, s.measure);
    const std::vector<size_t> chosen = p ? rangeCandidatesToMeasure(out.table, p - 1, s) : allIndices(candidates.size());
    std::vector<ir::Config> subset;
    for (size_t c : chosen) subset.push_back(candidates[c]);
    // Two interleaved rounds: a burst of load on a shared machine moves one sample, not the rule.
    TESSERA_ASSIGN(std::vector<measure::TrialResult> results, measurer->remeasure(subset, 2));
    int ok = 0;
    for (size_t i = 0; i < results.size(); ++i)
      if (results[i].ok()) {
        out.table.times[chosen[i]][p] = results[i].samples.median_us;
        ++ok;
      } else if (i == 0 || results[i].status != results[i - 1].status) {
        warn(dim + "=" + std::to_string(out.table.points[p]) + ": " + results[i].config.str() + ": " +
             measure::trialStatusName(results[i].status) + " " + results[i].message);
      }
    std::string line = dim + "=" + std::to_string(out.table.points[p]) + ": " + std::to_string(ok) + "/" +
                       std::to_string(candidates.size()) + " shape-generic candidates measured";
    if (chosen.size() < candidates.size())
      line += "; " + std::to_string(candidates.size() - chosen.size()) + " skipped (over " + fmtFactor(s.pruneFactor) +
              "x the best time at " + dim + "=" + std::to_string(out.table.points[p - 1]) + ")";
    progress(line);
  }

  // 3. The rule, its boundaries measured, and the few-row kernels below the generic ones.
  TESSERA_ASSIGN(out.rule, fitDispatchRule(out.table, out.train, out.heldOut, range.lo, range.hi, s.fit));
  out.rule.dim = dim;
  refineBoundaries(out, kernelAt, cache, s, progress);
  if (gemm) pinFewRowKernels(out, kernelAt, cache, range, t, s, progress);
  return out;
}

std::string rangeRuleFile(const RangeTuneResult& r, const TargetDesc& t) {
  nlohmann::json extra = {{"format", "tessera-dispatch-1"},
                          {"kernel", r.kernelName},
                          {"kernel_ir", r.kernelIr},
                          {"arch", t.arch},
                          {"threads", t.units},
                          {"times", t.isGpu() ? "estimated" : "measured"}};
  nlohmann::json pts = nlohmann::json::array();
  for (size_t p = 0; p < r.table.points.size(); ++p) {
    nlohmann::json row = {{"m", r.table.points[p]},
                          {"held_out", std::find(r.heldOut.begin(), r.heldOut.end(), p) != r.heldOut.end()}};
    nlohmann::json us = nlohmann::json::array();
    for (const auto& times : r.table.times) us.push_back(std::isfinite(times[p]) ? nlohmann::json(times[p]) : nlohmann::json());
    row["us"] = us;
    pts.push_back(row);
  }
  extra["candidates"] = r.table.configs;
  extra["measurements"] = pts;
  nlohmann::json probes = nlohmann::json::array();
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
  for (const auto& p : r.probes)
    probes.push_back({{"m", p.m}, {"kind", p.fixed ? "fixed" : "boundary"}, {"left", p.left}, {"right", p.right},
                      {"left_us", num(p.leftUs)}, {"right_us", num(p.rightUs)}});
  extra["probes"] = probes;
  return ruleToJson(r.rule, extra.dump());
}

}  // namespace tessera::session
