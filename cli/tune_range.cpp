// Owns `tessera tune` over a range of M, rows or seq (tune_range.h): flags checked first (one line, exit 2), each
// training point tuned and stored like a single tune, the winners measured as shape-generic
// kernels at every point, the fitted rule printed (bucket, config, regret) and written.
#include "cli/tune_range.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "bundle/dispatch_rule.h"
#include "bundle/range_tune.h"
#include "cache_service/store.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/tune_common.h"
#include "measure/records.h"

namespace tessera::cli {

void addRangeTuneOptions(CLI::App* tune, RangeFlags* f) {
  tune->add_option("--dispatch-out", f->dispatchOut,
                   "with --m/--rows/--seq LO..HI or a list: the dispatch rule file (default <kernel>.dispatch.json)");
  tune->add_option("--max-kernels", f->maxKernels, "with --m/--rows/--seq LO..HI: kernels (configs) the rule may use at most")
      ->capture_default_str();
  tune->add_option("--points", f->points, "with --m/--rows/--seq LO..HI: training points tuned at most (log-spaced)")->capture_default_str();
}

bool wantsRangeTune(const KernelFlags& k) {
  return (k.family == "gemm" && bundle::isRangeText(k.mText)) || (k.family == "elementwise" && bundle::isRangeText(k.rowsText)) ||
         (k.family == "attention" && bundle::isRangeText(k.seqText));
}

const char* rangeFlagOf(const KernelFlags& k) {
  return k.family == "elementwise" ? "--rows" : k.family == "attention" ? "--seq" : "--m";
}

void tuneRangeCommand(const RangeTuneRequest& r) {
  const std::string& fam = r.kernel.family;
  const char* flag = rangeFlagOf(r.kernel);
  auto range = bundle::parseShapeRange(fam == "elementwise" ? r.kernel.rowsText : fam == "attention" ? r.kernel.seqText : r.kernel.mText, flag);
  if (!range.ok()) fail(range.error().message, kExitBadInput);
  // One runtime length serves the query and the key length: both follow the range.
  if (fam == "attention" && r.kernel.seqKvOption && r.kernel.seqKvOption->count())
    fail("--seq LO..HI moves the query and key lengths together: drop --seq-kv", kExitBadInput);
  if (r.range.maxKernels < 1 || r.range.maxKernels > 64) fail("--max-kernels must be 1 to 64", kExitBadInput);
  if (r.range.points < 2 || r.range.points > 64) fail("--points must be 2 to 64", kExitBadInput);
  if (r.trials < 1) fail(std::string("--trials must be at least 1 per point with ") + flag + " LO..HI", kExitBadInput);
  if (!(r.timeBudget >= 0)) fail("--time-budget must be at least 0 seconds (0: none)", kExitBadInput);
  if (!(r.timeout > 0)) fail("--timeout must be more than 0 seconds", kExitBadInput);
  if (!(r.minTime >= 0)) fail("--min-time must be at least 0 seconds", kExitBadInput);
  if (r.batch < 1) fail("--batch must be at least 1", kExitBadInput);
  if (r.topK < 0) fail("--top-k must be at least 0 (0: no final re-measurement)", kExitBadInput);
  auto kernelAt = [&](int64_t m) -> Expected<ir::Kernel> {
    KernelFlags k = r.kernel;
    if (fam == "elementwise") {
      k.rowsText = std::to_string(m);
    } else if (fam == "attention") {
      k.seqText = std::to_string(m);
    } else {
      k.mText.clear();
      k.m = m;
    }
    return buildKernel(k);
  };
  // The range's top is the largest kernel: its size decides (and is refused in one line).
  auto top = kernelAt(range->hi);
  if (!top.ok()) failWith(top.error());
  if (Status big = session::checkKernelSize(*top, r.maxElements); !big.ok()) failWith(big.error());
  auto t = session::targetFor(r.target, r.threads);
  if (!t.ok()) failWith(t.error());
  if (t->isGpu() && !r.estimate)
    fail(std::string(flag) + " LO..HI on a GPU target: through the estimate only (--estimate; nothing runs); "
         "measured ranges tune on --target host", kExitBadInput);
  if (!t->isGpu() && r.estimate) fail("--estimate predicts GPU targets; a range on the host is measured (drop --estimate)", kExitBadInput);
  auto store = cache::openSqliteStore(r.db);
  if (!store.ok()) failWith(store.error());

  bundle::RangeTuneSettings s;
  s.spaceSpec = r.spaceSpec;
  s.measure.timeoutSec = r.timeout;
  s.measure.measure.minTimeSec = r.minTime;
  s.session.loop.search.strategy = "evolutionary";
  s.session.loop.search.seed = r.seed;
  s.session.loop.search.batchSize = r.batch;
  s.session.loop.trials = r.trials;
  s.session.loop.timeBudgetSec = r.timeBudget;
  s.session.loop.topK = r.topK;
  s.session.cache = r.force ? search::CachePolicy::Force : r.resume ? search::CachePolicy::Resume : search::CachePolicy::UseStored;
  s.session.warmStart = !r.noWarmStart;
  s.session.transfer.enabled = false;
  s.session.pushToCache = false;
  s.fit.maxKernels = r.range.maxKernels;
  s.fit.maxBuckets = std::min(16, r.range.maxKernels * 2);
  s.maxTrain = r.range.points;
  bundle::RangeTuneCallbacks cb;
  cb.onProgress = [&](const std::string& l) {
    if (!r.json) std::printf("%s\n", l.c_str()), std::fflush(stdout);
  };
  cb.onWarning = [](const std::string& w) { std::fprintf(stderr, "tessera: warning: %s\n", w.c_str()); };
  cache::Provenance prov = search::provenanceFor(*t, provenanceInputs());
  auto res = t->isGpu() ? bundle::tuneRangeGpuEstimate(kernelAt, *range, *t, store->get(), prov, s, cb)
                        : bundle::tuneRange(kernelAt, *range, *t, store->get(), prov, s, cb);
  if (!res.ok()) failWith(res.error());

  const std::string out = !r.range.dispatchOut.empty() ? r.range.dispatchOut : res->kernelName + ".dispatch.json";
  const std::string text = bundle::rangeRuleFile(*res, *t);
  {
    std::ofstream f(out, std::ios::binary | std::ios::trunc);
    f << text;
    if (!f.good()) fail("cannot write the dispatch rule to " + out, kExitFailure);
  }
  const bundle::DispatchRule& rule = res->rule;
  if (r.json) {
    std::printf("%s", text.c_str());
    return;
  }
  const char* dim = res->dim.c_str();
  std::printf("\ndispatch rule for %s on %s%s, %s %lld..%lld: %zu bucket(s), %zu kernel(s); geomean regret against the best "
              "candidate per point: %.1f%% on the %zu training points, %.1f%% on the %zu held-out points\n",
              res->kernelName.c_str(), t->name.c_str(), t->isGpu() ? " (ESTIMATED times: the analytic model, nothing ran)" : "", dim, (long long)rule.lo, (long long)rule.hi, rule.buckets.size(), rule.configs.size(),
              100 * rule.trainRegret, res->train.size(), 100 * rule.heldOutRegret, res->heldOut.size());
  for (size_t b = 0; b < rule.buckets.size(); ++b)
    std::printf("  bucket %zu  %s %6lld..%-6lld  kernel %d  %s\n", b, dim, (long long)rule.buckets[b].lo, (long long)rule.buckets[b].hi,
                rule.buckets[b].config, rule.configs[size_t(rule.buckets[b].config)].c_str());
  std::printf("  %8s %9s %12s %12s %8s\n", dim, "", t->isGpu() ? "best est us" : "best us", t->isGpu() ? "rule est us" : "rule us", "regret");
  for (size_t p = 0; p < res->table.points.size(); ++p) {
    double best = INFINITY;
    for (const auto& row : res->table.times) best = std::min(best, row[p]);
    int bk = rule.bucketOf(res->table.points[p]);
    const std::string& cfg = rule.configs[size_t(rule.buckets[size_t(bk)].config)];
    size_t ci = size_t(std::find(res->table.configs.begin(), res->table.configs.end(), cfg) - res->table.configs.begin());
    double mine = ci < res->table.times.size() ? res->table.times[ci][p] : INFINITY;
    bool held = std::find(res->heldOut.begin(), res->heldOut.end(), p) != res->heldOut.end();
    std::printf("  %8lld %9s %12.2f %12.2f %7.1f%%\n", (long long)res->table.points[p], held ? "held-out" : "train", best, mine,
                100 * (mine / best - 1));
  }
  std::printf("wrote %s (bundle it: tessera bundle --dispatch %s --out DIR)\n", out.c_str(), out.c_str());
}

}  // namespace tessera::cli
