// Owns the shape-range benchmark: one dispatch rule (`tessera tune --m 1..HI`: at most 16
// shape-generic kernels, and fixed-shape few-row kernels for the smallest M where they measured
// faster) against a GEMM tuned for each shape on its own, and against OpenBLAS
// sgemm, over M = 1 .. HI log-spaced with odd values, N and K fixed, f32, all measured in this run.
// Regret = rule time / per-shape tuned time - 1 (its geometric mean is the headline); the OpenBLAS
// ratio is sgemm time / rule time (above 1: the rule's kernel is faster).
//
//   shape_range_bench [--quick] [--n N] [--k K] [--hi HI] [--threads T] [--trials T] [--points P] [--runs R]
//                     [--fixed-up-to F] [--json FILE]
//     --quick: N = K = 1024, HI = 1024, 12 trials per tune (minutes on 2 cores); default: the full
//     N = K = 4096, HI = 8192, 32 trials (hours on 2 cores; `--trials 12 --runs 3` about one hour
//     on one core of a 2-core Zen 4). --runs: timed runs per trial at least (default 5).
//     --fixed-up-to: the rule's fixed buckets may answer M 1..F (default 16; 0: shape-generic only).
//     --json FILE: the run as data as well (the host, its ISA and load, the rule, and per M the rule's
//     kernel time, the per-shape best, OpenBLAS's and the regret), which bench/results_page.py draws.
// The rule's kernels are JIT-compiled here with runtime M, the same lowering `tessera bundle
// --dispatch` writes as objects; the per-shape kernels are static-shape kernels of that shape's
// own tune (same search, same trial budget).
#include <cblas.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "session/range_tune.h"
#include "codegen/codegen.h"
#include "ir/builders.h"
#include "ir/reference.h"
#include "measure/protocol_measurer.h"
#include "session/tune_session.h"
#include "measure/records.h"

extern "C" void openblas_set_num_threads(int);
extern "C" char* openblas_get_corename(void);

using namespace tessera;

namespace {

struct Opts {
  int64_t n = 4096, k = 4096, hi = 8192;
  int threads = 0, trials = 32, points = 14, runs = 5, fixedUpTo = 16;
  std::string json;  // --json FILE
};

bool parse(int argc, char** argv, Opts* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick") {
      o->n = o->k = o->hi = 1024;
      o->trials = 12;
      continue;
    }
    if (i + 1 >= argc) return false;
    if (a == "--json") {
      o->json = argv[++i];
      continue;
    }
    char* end = nullptr;
    long long v = std::strtoll(argv[++i], &end, 10);
    if (!end || *end || v < 0 || v > (1 << 20) || (v == 0 && a != "--fixed-up-to")) return false;
    if (a == "--n") o->n = v;
    else if (a == "--k") o->k = v;
    else if (a == "--hi") o->hi = v;
    else if (a == "--threads") o->threads = int(v);
    else if (a == "--trials") o->trials = int(v);
    else if (a == "--points") o->points = int(v);
    else if (a == "--runs") o->runs = int(v);
    else if (a == "--fixed-up-to") o->fixedUpTo = int(v);
    else return false;
  }
  return true;
}

// M = 1, 2, 3, then about x1.5 each step, odd values kept odd, and HI.
std::vector<int64_t> grid(int64_t hi) {
  std::vector<int64_t> g;
  for (int64_t m = 1; m <= hi; m = std::max(m + 1, int64_t(std::llround(double(m) * 1.5)))) g.push_back(m);
  if (g.back() != hi) g.push_back(hi);
  return g;
}

Expected<ir::Kernel> gemmAt(int64_t m, const Opts& o) { return ir::buildGemm({.m = m, .n = o.n, .k = o.k}); }

}  // namespace

int main(int argc, char** argv) {
  Opts o;
  if (!parse(argc, argv, &o)) {
    std::fprintf(stderr, "usage: %s [--quick] [--n N] [--k K] [--hi HI] [--threads T] [--trials T] [--points P] [--runs R] [--fixed-up-to F] [--json FILE]\n", argv[0]);
    return 2;
  }
  auto target = o.threads ? hostTargetWithThreads(o.threads) : Expected<TargetDesc>(hostTarget());
  if (!target.ok()) {
    std::fprintf(stderr, "%s\n", target.error().str().c_str());
    return 2;
  }
  const TargetDesc& t = *target;
  bench::openblasAsShipped(argv, t.units);
  openblas_set_num_threads(t.units);
  std::printf("load before: %s\n", bench::loadAverage().c_str());
  bench::LoadWatch load(t.units);  // the load before and after, with the control, for --json
  std::printf("shape range GEMM f32: M 1..%lld, N %lld, K %lld; %d thread%s; %s (%s); OpenBLAS core %s\n", (long long)o.hi,
              (long long)o.n, (long long)o.k, t.units, t.units > 1 ? "s" : "", t.model.c_str(), t.arch.c_str(),
              openblas_get_corename());
  std::string isa;
  for (const auto& f : t.isa) isa += " " + f;
  std::printf("ISA:%s\n", isa.c_str());
  std::printf("tuning: %d trials per tuned shape (at least %d timed runs each), rule from at most %d training points\n\n", o.trials,
              o.runs, o.points);

  session::RangeTuneSettings s;
  s.session.loop.search.strategy = "evolutionary";
  s.session.loop.trials = o.trials;
  s.session.loop.topK = 3;
  s.session.cache = session::CachePolicy::Force;
  s.session.warmStart = false;
  s.session.transfer.enabled = false;
  s.session.pushToCache = false;
  s.measure.measure.minTimeSec = 0.02;
  s.measure.measure.minRuns = o.runs;
  s.maxTrain = o.points;
  s.fit.maxKernels = 16;
  s.fit.maxBuckets = 16;
  s.fixedUpTo = o.fixedUpTo;
  auto kernelAt = [&](int64_t m) { return gemmAt(m, o); };
  auto ruleStore = cache::makeMemoryStore();
  cache::Provenance prov;
  auto range = bundle::parseShapeRange("1.." + std::to_string(o.hi), "--hi");
  if (!range.ok()) {
    std::fprintf(stderr, "%s\n", range.error().str().c_str());
    return 2;
  }
  auto res = session::tuneRange(kernelAt, *range, t, ruleStore.get(), prov, s,
                               {.onProgress = [](const std::string& l) { std::fprintf(stderr, "  %s\n", l.c_str()); }});
  if (!res.ok()) {
    std::fprintf(stderr, "range tune: %s\n", res.error().str().c_str());
    return 1;
  }
  const bundle::DispatchRule& rule = res->rule;
  std::printf("rule: %zu bucket(s), %zu kernel(s)\n", rule.buckets.size(), rule.configs.size());
  for (size_t b = 0; b < rule.buckets.size(); ++b)
    std::printf("  bucket %zu  M %lld..%lld  kernel %d  %s%s\n", b, (long long)rule.buckets[b].lo, (long long)rule.buckets[b].hi,
                rule.buckets[b].config, rule.configs[size_t(rule.buckets[b].config)].c_str(), rule.buckets[b].fixed ? "  (fixed)" : "");
  for (const auto& p : res->probes)
    std::printf("  %s M=%lld: %s %.2f us, %s %.2f us\n", p.fixed ? "fixed trial" : "boundary probe", (long long)p.m, p.left.c_str(),
                p.leftUs, p.right.c_str(), p.rightUs);
  // The rule's kernels, as the bundle compiles them: shape-generic ones once each with runtime M,
  // a fixed bucket's for its M alone.
  auto maxK = gemmAt(o.hi, o);
  std::vector<std::unique_ptr<codegen::HostExecutable>> ruleExe(rule.configs.size());
  std::vector<std::unique_ptr<codegen::HostExecutable>> bucketExe(rule.buckets.size());
  for (size_t b = 0; b < rule.buckets.size(); ++b) {
    const auto& bk = rule.buckets[b];
    const std::string& c = rule.configs[size_t(bk.config)];
    if (!bk.fixed && ruleExe[size_t(bk.config)]) continue;
    auto exe = bk.fixed ? codegen::compileHost(*gemmAt(bk.lo, o), *ir::Config::parseAssignments(c), t)
                        : codegen::compileHost(*maxK, *ir::Config::parseAssignments(c), t, {.runtime = {.m = true}});
    if (!exe.ok()) {
      std::fprintf(stderr, "rule kernel %s: %s\n", c.c_str(), exe.error().str().c_str());
      return 1;
    }
    (bk.fixed ? bucketExe[b] : ruleExe[size_t(bk.config)]) = std::move(*exe);
  }

  std::printf("\n%6s %7s %11s %11s %8s %11s %9s  %s\n", "M", "bucket", "rule us", "shape us", "regret", "OpenBLAS us",
              "BLAS/rule", "per-shape config");
  nlohmann::json points = nlohmann::json::array();
  double logRegret = 0, logBlas = 0, worstRegret = -1e9, worstBlas = 1e9;
  int rows = 0, bad = 0, over10 = 0, underBlas = 0;
  for (int64_t m : grid(o.hi)) {
    auto k = gemmAt(m, o);
    // The per-shape tuned kernel: this shape's own search, same budget.
    auto store = cache::makeMemoryStore();
    auto problem = session::tuneProblem(*k, t, "");
    auto measurer = measure::makeHostMeasurer(*k, t, s.measure);
    auto sess = session::runTuneSession(*problem, *measurer, store.get(), nullptr, prov, s.session, {});
    if (!sess.ok() || !sess->tune.best) {
      std::printf("%6lld  per-shape tune failed\n", (long long)m);
      points.push_back({{"m", m}, {"failed", "per-shape tune"}});
      ++bad;
      continue;
    }
    ir::Config best = sess->tune.best->config;
    auto shapeExe = codegen::compileHost(*k, best, t);
    const int bk = rule.bucketOf(m);
    const bool fixed = rule.buckets[size_t(bk)].fixed;
    const auto& rexe = fixed ? *bucketExe[size_t(bk)] : *ruleExe[size_t(rule.buckets[size_t(bk)].config)];
    if (!shapeExe.ok()) {
      std::printf("%6lld  per-shape compile failed\n", (long long)m);
      points.push_back({{"m", m}, {"failed", "per-shape compile"}});
      ++bad;
      continue;
    }
    auto ins = ir::makeInputs(*k, 1);
    auto outs = ir::makeOutputs(*k);
    ir::Buffer c2(ir::ScalarType::F32, {m, o.n});
    alignas(64) int64_t sizes[codegen::kRuntimeSizeCount] = {m, 0};
    void* rbufs[4] = {ins[0].data(), ins[1].data(), outs[0].data(), fixed ? nullptr : sizes};
    void* sbufs[3] = {ins[0].data(), ins[1].data(), c2.data()};
    auto ruleRun = [&] { rexe.run(rbufs); };
    auto shapeRun = [&] { (*shapeExe)->run(sbufs); };
    auto blas = [&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(m), int(o.n), int(o.k), 1.0f,
                  static_cast<const float*>(ins[0].data()), int(o.k), static_cast<const float*>(ins[1].data()), int(o.n), 0.0f,
                  static_cast<float*>(c2.data()), int(o.n));
    };
    // Correctness first: the rule's kernel against OpenBLAS on the same inputs (relative to the
    // largest magnitude of the result; the reference evaluator is too slow at these sizes).
    blas();
    ruleRun();
    const float* cr = static_cast<const float*>(outs[0].data());
    const float* cb = static_cast<const float*>(c2.data());
    double maxAbs = 0, maxDiff = 0;
    for (int64_t i = 0; i < m * o.n; ++i) {
      maxAbs = std::max(maxAbs, double(std::fabs(cb[i])));
      double d = std::fabs(double(cr[i]) - double(cb[i]));
      if (!(d <= maxDiff)) maxDiff = d;  // NaN counts as the worst
    }
    const bool ok = maxDiff <= 1e-4 * (maxAbs + 1e-30) * std::sqrt(double(o.k));
    auto [tr, ts] = bench::interleave(ruleRun, shapeRun, 3, 0.1);
    auto [tr2, tb] = bench::interleave(ruleRun, blas, 3, 0.1);
    const double rUs = std::min(tr.median_s, tr2.median_s) * 1e6, sUs = ts.median_s * 1e6, bUs = tb.median_s * 1e6;
    const double regret = rUs / sUs - 1;
    logRegret += std::log(rUs / sUs);
    logBlas += std::log(bUs / rUs);
    worstRegret = std::max(worstRegret, regret);
    worstBlas = std::min(worstBlas, bUs / rUs);
    over10 += regret > 0.10 ? 1 : 0;
    underBlas += bUs / rUs < 1.0 ? 1 : 0;
    ++rows;
    if (!ok) ++bad;
    std::printf("%6lld %6d%s %11.2f %11.2f %7.1f%% %11.2f %8.2fx  %s%s\n", (long long)m, bk, fixed ? "f" : " ", rUs, sUs, 100 * regret, bUs,
                bUs / rUs, best.str().c_str(), ok ? "" : "  WRONG RESULT");
    std::fflush(stdout);
    points.push_back({{"m", m}, {"bucket", bk}, {"fixed", fixed}, {"rule_us", rUs}, {"shape_us", sUs}, {"blas_us", bUs},
                    {"regret", regret}, {"blas_x_rule", bUs / rUs}, {"shape_config", best.str()}, {"checked", ok}});
  }
  if (rows)
    std::printf("\ngeomean over %d shapes: regret %.1f%% (goal: within 10%%), OpenBLAS/rule %.2fx; %zu kernel(s) in the rule\n",
                rows, 100 * (std::exp(logRegret / rows) - 1), std::exp(logBlas / rows), rule.configs.size());
  if (rows)
    std::printf("worst row: regret %.1f%% (%d row(s) over 10%%), OpenBLAS/rule %.2fx (%d row(s) below 1.0x)\n", 100 * worstRegret, over10,
                worstBlas, underBlas);
  std::printf("load after: %s\n", bench::loadAverage().c_str());
  const bench::LoadSummary& ld = load.finish();
  if (!o.json.empty()) {
    nlohmann::json buckets = nlohmann::json::array();
    for (const auto& b : rule.buckets)
      buckets.push_back({{"lo", b.lo}, {"hi", b.hi}, {"config", b.config}, {"fixed", b.fixed}});
    nlohmann::json doc = {{"bench", "shape_range"}, {"dtype", "f32"}, {"n", o.n}, {"k", o.k}, {"hi", o.hi},
                          {"threads", t.units}, {"trials", o.trials}, {"points", o.points}, {"runs", o.runs},
                          {"fixed_up_to", o.fixedUpTo}, {"host", t.model}, {"arch", t.arch}, {"isa", t.isa},
                          {"anchor", std::string("sgemm (OpenBLAS ") + openblas_get_corename() + ")"},
                          {"rule", {{"buckets", buckets}, {"configs", rule.configs}}},
                          {"load", {{"before", ld.before}, {"after", ld.after}, {"cores", ld.cores}, {"steal_pct", ld.stealPct},
                                    {"control", std::max(ld.control0, ld.control1)}, {"worst_p80_p20", ld.spread},
                                    {"busy", ld.busy}}},
                          {"rows", points}};
    if (!bench::writeText(o.json, doc.dump(1) + "\n", "shape_range_bench")) return 2;
  }
  return bad ? 1 : 0;
}
