// Owns running one RangeTuneRequest: its checks, the kernel at the range's top, the target, the
// store and the per-point settings handed to tuneRange (or its GPU estimate); and the start both
// range tunes share.
#include "session/range_tune.h"

#include <algorithm>
#include <set>

#include "ir/families.h"
#include "ir/text.h"
#include "store/store.h"
#include "session/tune_request.h"

namespace tessera::session {

namespace {

using detail::bad;

// A GPU range goes through the estimate only; a host range is measured.
Status checkMeasurement(const RangeTuneRequest& r, const TargetDesc& t) {
  const Dialect& d = r.dialect;
  if (t.isGpu() && !r.estimate)
    return bad(d.option(r.rangeOption) + " LO..HI on a GPU target: through the estimate only (" + d.given("estimate") +
               "; nothing runs); measured ranges tune on " + d.given("target", "host"));
  if (!t.isGpu() && r.estimate)
    return bad(d.option("estimate") + " predicts GPU targets; a range on the host is measured (drop " + d.given("estimate") + ")");
  return {};
}

}  // namespace

Expected<bundle::RangePoints> startRangeTune(RangeTuneResult& r, const ir::Kernel& top, const bundle::ShapeRange& range,
                                             int maxTrain) {
  if (top.family == ir::Family::Gemm) {
    TESSERA_ASSIGN(ir::GemmInfo g, ir::analyzeGemm(top));
    if (g.transA) return makeError(ErrorCode::InvalidArgument, "a range of M needs A stored M x K: drop --trans-a");
    if (g.batch > 0) return makeError(ErrorCode::InvalidArgument, "a range of M takes no --batch");
  }
  TESSERA_TRY(bundle::rangeExtent(top));  // attention: equal lengths
  r.kernelIr = ir::printKernel(top);
  r.kernelName = top.name;
  r.dim = bundle::rangeDimName(top);
  bundle::RangePoints pts = bundle::rangePoints(range, maxTrain);
  std::set<int64_t> all(pts.train.begin(), pts.train.end());
  all.insert(pts.heldOut.begin(), pts.heldOut.end());
  r.table.points.assign(all.begin(), all.end());
  auto indexOf = [&](int64_t v) { return size_t(std::lower_bound(r.table.points.begin(), r.table.points.end(), v) - r.table.points.begin()); };
  for (int64_t v : pts.train) r.train.push_back(indexOf(v));
  for (int64_t v : pts.heldOut) r.heldOut.push_back(indexOf(v));
  return pts;
}

// The comparisons are written so that a NaN fails them too.
bool asksForRange(const std::string& text) { return bundle::isRangeText(text); }

Expected<bundle::ShapeRange> parseRange(const std::string& text, const std::string& flag) {
  return bundle::parseShapeRange(text, flag);
}

Status checkRangeTune(const RangeTuneRequest& r) {
  const Dialect& d = r.dialect;
  if (r.maxKernels < 1 || r.maxKernels > 64) return bad(d.option("max-kernels") + " must be 1 to 64");
  if (r.points < 2 || r.points > 64) return bad(d.option("points") + " must be 2 to 64");
  if (r.fixedUpTo < 0 || r.fixedUpTo > 64) return bad(d.option("fixed-up-to") + " must be 0 to 64");
  if (r.trials && *r.trials < 1) return bad(d.option("trials") + " must be at least 1 per point with " + d.option(r.rangeOption) + " LO..HI");
  if (!(r.timeBudget >= 0)) return bad(d.option("time-budget") + " must be at least 0 seconds (0: none)");
  if (!(r.timeout > 0)) return bad(d.option("timeout") + " must be more than 0 seconds");
  if (!(r.minTime >= 0)) return bad(d.option("min-time") + " must be at least 0 seconds");
  if (r.batch < 1) return bad(d.option("batch") + " must be at least 1");
  if (r.topK < 0) return bad(d.option("top-k") + " must be at least 0 (0: no final re-measurement)");
  // What the target allows comes after the kernel at the range's top, its size and the target
  // itself: those are runRangeTune's errors, in their turn.
  auto top = r.kernelAt(r.range.hi);
  if (!top.ok() || !checkKernelSize(*top, r.maxElements, d).ok()) return {};
  if (auto t = targetFor(r.target, r.threads, d); t.ok()) return checkMeasurement(r, *t);
  return {};
}

Expected<RangeTuneOutcome> runRangeTune(const RangeTuneRequest& r) {
  const Dialect& d = r.dialect;
  TESSERA_TRY(checkRangeTune(r));
  // The range's top is the largest kernel: its size decides (and is refused in one line).
  TESSERA_ASSIGN(ir::Kernel top, r.kernelAt(r.range.hi));
  TESSERA_TRY(checkKernelSize(top, r.maxElements, d));
  RangeTuneOutcome out;
  TESSERA_ASSIGN(out.target, targetFor(r.target, r.threads, d));
  const TargetDesc& t = out.target;
  TESSERA_TRY(checkMeasurement(r, t));
  TESSERA_ASSIGN(auto store, cache::openSqliteStore(r.db));

  RangeTuneSettings s;
  s.spaceSpec = r.space;
  s.measure.timeoutSec = r.timeout;
  s.measure.measure.minTimeSec = r.minTime;
  s.session.loop.search.strategy = "evolutionary";
  s.session.loop.search.seed = r.seed;
  s.session.loop.search.batchSize = r.batch;
  s.session.loop.trials = r.trials ? *r.trials : r.estimate ? kDefaultEstimateTrials : kDefaultTrials;
  s.session.loop.timeBudgetSec = r.timeBudget;
  s.session.loop.topK = r.topK;
  s.session.cache = r.policy;
  s.session.warmStart = r.warmStart;
  s.session.transfer.enabled = false;
  s.session.pushToCache = false;
  s.fit.maxKernels = r.maxKernels;
  s.fit.maxBuckets = std::min(16, r.maxKernels * 2);
  s.maxTrain = r.points;
  s.fixedUpTo = r.fixedUpTo;
  cache::Provenance prov = measure::provenanceFor(t, r.provenance);
  TESSERA_ASSIGN(out.result, t.isGpu() ? tuneRangeGpuEstimate(r.kernelAt, r.range, t, store.get(), prov, s, r.callbacks)
                                       : tuneRange(r.kernelAt, r.range, t, store.get(), prov, s, r.callbacks));
  out.ruleFile = rangeRuleFile(out.result, t);
  return out;
}

}  // namespace tessera::session
