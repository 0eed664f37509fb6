// Owns `tessera tune` over a range of M, rows or seq (tune_range.h): the range and the kernel at a
// point from the flags, the range tune asked of the session (session/range_tune.h: checks, one
// line and exit 2; every point tuned and stored like a single tune; the rule fitted), the rule
// printed (bucket, config, regret) and its file written.
#include "cli/tune_range.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/tune_common.h"
#include "session/range_tune.h"

namespace tessera::cli {

void addRangeTuneOptions(CLI::App* tune, RangeFlags* f) {
  tune->add_option("--dispatch-out", f->dispatchOut,
                   "with --m/--rows/--seq LO..HI or a list: the dispatch rule file (default <kernel>.dispatch.json)");
  tune->add_option("--max-kernels", f->maxKernels, "with --m/--rows/--seq LO..HI: kernels (configs) the rule may use at most")
      ->capture_default_str();
  tune->add_option("--points", f->points, "with --m/--rows/--seq LO..HI: training points tuned at most (log-spaced)")->capture_default_str();
  tune->add_option("--fixed-up-to", f->fixedUpTo,
                   "with --m LO..HI: M from LO up to this may each get a kernel of that shape alone (nvec, plain, kvec), where "
                   "measured faster than the shape-generic one (0: none)")
      ->capture_default_str();
}

bool wantsRangeTune(const KernelFlags& k) {
  return (k.family == "gemm" && session::asksForRange(k.mText)) || (k.family == "elementwise" && session::asksForRange(k.rowsText)) ||
         (k.family == "attention" && session::asksForRange(k.seqText));
}

const char* rangeFlagOf(const KernelFlags& k) {
  return k.family == "elementwise" ? "--rows" : k.family == "attention" ? "--seq" : "--m";
}

void tuneRangeCommand(const KernelFlags& kernel, const RangeFlags& flags, session::RangeTuneRequest rq, bool json) {
  const std::string& fam = kernel.family;
  const char* flag = rangeFlagOf(kernel);
  auto range = session::parseRange(fam == "elementwise" ? kernel.rowsText : fam == "attention" ? kernel.seqText : kernel.mText, flag);
  if (!range.ok()) fail(range.error().message, kExitBadInput);
  // One runtime length serves the query and the key length: both follow the range.
  if (fam == "attention" && kernel.seqKvOption && kernel.seqKvOption->count())
    fail("--seq LO..HI moves the query and key lengths together: drop --seq-kv", kExitBadInput);
  rq.kernelAt = [&](int64_t m) -> Expected<ir::Kernel> {
    KernelFlags k = kernel;
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
  rq.range = *range;
  rq.rangeOption = flag + 2;  // "--m" -> "m"
  rq.provenance = provenanceInputs();
  rq.callbacks.onProgress = [&](const std::string& l) {
    if (!json) std::printf("%s\n", l.c_str()), std::fflush(stdout);
  };
  rq.callbacks.onWarning = [](const std::string& w) { std::fprintf(stderr, "tessera: warning: %s\n", w.c_str()); };
  // The options' own errors are said as such (exit 2); what building, sizing or tuning refuses
  // keeps its category.
  if (Status bad = session::checkRangeTune(rq); !bad.ok()) fail(bad.error().message, kExitBadInput);
  auto tuned = session::runRangeTune(rq);
  if (!tuned.ok()) failWith(tuned.error());
  const TargetDesc* t = &tuned->target;
  const session::RangeTuneResult* res = &tuned->result;

  const std::string out = !flags.dispatchOut.empty() ? flags.dispatchOut : res->kernelName + ".dispatch.json";
  const std::string& text = tuned->ruleFile;
  {
    std::ofstream f(out, std::ios::binary | std::ios::trunc);
    f << text;
    if (!f.good()) fail("cannot write the dispatch rule to " + out, kExitFailure);
  }
  const bundle::DispatchRule& rule = res->rule;
  if (json) {
    std::printf("%s", text.c_str());
    return;
  }
  const char* dim = res->dim.c_str();
  std::printf("\ndispatch rule for %s on %s%s, %s %lld..%lld: %zu bucket(s), %zu kernel(s); geomean regret against the best "
              "candidate per point: %.1f%% on the %zu training points, %.1f%% on the %zu held-out points\n",
              res->kernelName.c_str(), t->name.c_str(), t->isGpu() ? " (ESTIMATED times: the analytic model, nothing ran)" : "", dim, (long long)rule.lo, (long long)rule.hi, rule.buckets.size(), rule.configs.size(),
              100 * rule.trainRegret, res->train.size(), 100 * rule.heldOutRegret, res->heldOut.size());
  for (size_t b = 0; b < rule.buckets.size(); ++b)
    std::printf("  bucket %zu  %s %6lld..%-6lld  kernel %d  %s%s\n", b, dim, (long long)rule.buckets[b].lo, (long long)rule.buckets[b].hi,
                rule.buckets[b].config, rule.configs[size_t(rule.buckets[b].config)].c_str(),
                rule.buckets[b].fixed ? "  (fixed: compiled for this size alone)" : "");
  std::printf("  %8s %9s %12s %12s %8s\n", dim, "", t->isGpu() ? "best est us" : "best us", t->isGpu() ? "rule est us" : "rule us", "regret");
  for (size_t p = 0; p < res->table.points.size(); ++p) {
    double best = INFINITY;
    for (const auto& row : res->table.times) best = std::min(best, row[p]);
    int bk = rule.bucketOf(res->table.points[p]);
    const std::string& cfg = rule.configs[size_t(rule.buckets[size_t(bk)].config)];
    size_t ci = size_t(std::find(res->table.configs.begin(), res->table.configs.end(), cfg) - res->table.configs.begin());
    double mine = ci < res->table.times.size() ? res->table.times[ci][p] : INFINITY;
    for (const auto& pr : res->probes)  // a fixed bucket's kernel was timed beside the generic one
      if (pr.fixed && pr.m == res->table.points[p] && pr.left == cfg) mine = pr.leftUs, best = std::min(best, mine);
    bool held = std::find(res->heldOut.begin(), res->heldOut.end(), p) != res->heldOut.end();
    std::printf("  %8lld %9s %12.2f %12.2f %7.1f%%\n", (long long)res->table.points[p], held ? "held-out" : "train", best, mine,
                100 * (mine / best - 1));
  }
  std::printf("wrote %s (bundle it: tessera bundle --dispatch %s --out DIR)\n", out.c_str(), out.c_str());
}

}  // namespace tessera::cli
