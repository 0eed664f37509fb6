// Owns the small-shape default bench: for a grid of small and awkward shapes (every dimension in
// 1-512) of the three host families, the untuned default config against the best config a short
// sweep finds in the same run (coordinate descent over every knob from the default, restarted from
// each GEMM schedule; every candidate checked against the reference), and the worst
// default/best ratio. The rules in search/space_*.cpp promise that no default is more than 2x
// slower than that best; this is where the promise is measured. GEMM rows also time the default
// and the best against OpenBLAS sgemm in this process (interleaved rounds, A/B/A/B), and the
// machine's load is printed before and after.
// Usage: small_shapes_bench [--threads N] [--isa x86-64-v3] [--family gemm|elementwise|attention] [--quick]
//                           [--skinny] [--shapes MxNxK,...] [--max-configs N] [--json FILE]
// --skinny: only the skinny GEMMs (M or N in 1..16, and the few-column shapes of issue 53).
// --shapes MxNxK[,MxNxK...]: only these GEMMs.
// --json FILE: the rows as data (times, ratios, configs, the host and its load), which
// bench/results_page.py turns into a section of docs/results.md and a plot.
// --isa compiles and derives the defaults for that ISA level of this CPU (an AVX2 host's rules on an
// AVX-512 machine: its vector width and registers, this machine's caches).
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#if TESSERA_BENCH_OPENBLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
extern "C" char* openblas_get_corename(void);
#endif

#include "bench/bench_util.h"
#include "codegen/codegen.h"
#include "ir/builders.h"
#include "ir/families.h"
#include "ir/reference.h"
#include "search/space.h"

using namespace tessera;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Seconds per call: calls are batched to at least ~0.5 ms per timed batch (a 1x1x1 GEMM takes
// nanoseconds), and the fastest batch of `rounds` is taken.
double timeCall(const std::function<void()>& fn, int rounds = 7) {
  fn();
  int reps = 1;
  for (;;) {
    double t0 = now();
    for (int i = 0; i < reps; ++i) fn();
    double dt = now() - t0;
    if (dt > 5e-4 || reps >= (1 << 20)) break;
    reps *= 4;
  }
  double best = 1e30;
  for (int r = 0; r < rounds; ++r) {
    double t0 = now();
    for (int i = 0; i < reps; ++i) fn();
    best = std::min(best, (now() - t0) / reps);
  }
  return best;
}

struct Case {
  std::string family, label;
  ir::Kernel kernel;
};

struct Measured {
  double sec = 0;
  bool ok = false;
  std::string why;
};

class Runner {
 public:
  Runner(const ir::Kernel& k, const TargetDesc& t) : k_(k), t_(t) {
    ins_ = ir::makeInputs(k, 1);
    outs_ = ir::makeOutputs(k);
    std::vector<const ir::Buffer*> in;
    for (auto& b : ins_) in.push_back(&b);
    auto r = ir::evaluateReference(k, in);
    if (r.ok()) ref_ = std::move(*r);
    for (auto& b : ins_) bufs_.push_back(b.data());
    for (auto& b : outs_) bufs_.push_back(b.data());
  }
  Measured measure(const ir::Config& c) {
    auto key = c.str();
    if (auto it = seen_.find(key); it != seen_.end()) return it->second;
    Measured m;
    auto exe = codegen::compileHost(k_, c, t_);
    if (!exe.ok()) {
      m.why = exe.error().str();
    } else {
      for (auto& o : outs_) std::memset(o.data(), 0xff, size_t(o.numel()) * ir::byteSize(o.dtype()));
      (*exe)->run(bufs_.data());
      std::vector<const ir::Buffer*> out;
      for (auto& b : outs_) out.push_back(&b);
      auto cmp = ir::compareOutputs(k_, ref_, out);
      if (!cmp.ok) {
        m.why = "wrong result";
      } else {
        m.ok = true;
        m.sec = timeCall([&] { (*exe)->run(bufs_.data()); });
      }
    }
    ++compiled_;
    seen_[key] = m;
    return m;
  }
  int compiled() const { return compiled_; }

 private:
  const ir::Kernel& k_;
  const TargetDesc& t_;
  std::vector<ir::Buffer> ins_, outs_;
  std::vector<void*> bufs_;
  ir::Reference ref_;
  std::map<std::string, Measured> seen_;
  int compiled_ = 0;
};

// Coordinate descent from `start`: every value of every knob with the others fixed, keeping the
// best, `passes` times; legal configs only, at most `*budget` new measurements.
ir::Config descend(const ir::Space& s, ir::Config start, Runner& run, int passes, int* budget, double* bestSec) {
  ir::Config best = start;
  Measured m0 = run.measure(best);
  *bestSec = m0.ok ? m0.sec : 1e30;
  for (int p = 0; p < passes; ++p) {
    bool moved = false;
    for (const auto& knob : s.knobs) {
      for (const auto& v : knob.domain) {
        if (*budget <= 0) return best;
        ir::Config c = best;
        c.values[knob.name] = v;
        if (s.check(c)) continue;
        --*budget;
        Measured m = run.measure(c);
        if (m.ok && m.sec < *bestSec * 0.98) {
          *bestSec = m.sec;
          best = c;
          moved = true;
        }
      }
    }
    if (!moved) break;
  }
  return best;
}

ir::Kernel gemm(int64_t m, int64_t n, int64_t k) {
  ir::GemmSpec s;
  s.m = m;
  s.n = n;
  s.k = k;
  return *ir::buildGemm(s);
}

ir::Kernel elementwise(const std::string& expr, int64_t rows, int64_t cols) {
  ir::ElementwiseSpec s;
  s.expr = expr;
  s.shape = rows > 0 ? ir::Shape{rows, cols} : ir::Shape{cols};
  if (rows > 0) s.shapes["b"] = ir::Shape{cols};
  if (rows > 0 && expr.find(" s ") != std::string::npos) s.shapes["s"] = ir::Shape{cols};
  return *ir::buildElementwise(s);
}

ir::Kernel attention(int64_t heads, int64_t seq, int64_t dim, bool causal) {
  ir::AttentionSpec s;
  s.heads = heads;
  s.seq_q = seq;
  s.head_dim = dim;
  s.causal = causal;
  return *ir::buildAttention(s);
}

// Skinny GEMMs: one of M or N in 1..16 (a vector-width N wastes no lanes; 7 and 12 do), and the
// shapes OpenBLAS was measured well ahead at (129x7x200, a matrix-vector product, N = 8 deep).
const std::vector<std::array<int64_t, 3>> kSkinny = {{129, 7, 200},  {1, 4096, 4096}, {4096, 8, 4096}, {2, 1024, 1024},
                                                     {16, 1024, 1024}, {1024, 2, 1024}, {1024, 16, 1024}, {2048, 4, 256},
                                                     {200, 12, 300},  {300, 3, 1000},  {8, 8, 2048},     {1000, 1, 1000},
                                                     {64, 4096, 4096}, {5, 1000, 700}, {13, 1024, 1024}, {3, 4096, 1024},
                                                     {11, 2048, 256}, {257, 13, 511}};

std::string mnk(int64_t m, int64_t n, int64_t k) { return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k); }

std::vector<Case> cases(const std::string& only, bool quick, bool skinnyOnly,
                        const std::vector<std::array<int64_t, 3>>& shapes) {
  std::vector<Case> out;
  auto add = [&](const std::string& fam, const std::string& label, ir::Kernel k) {
    if (only.empty() || only == fam) out.push_back({fam, label, std::move(k)});
  };
  if (!shapes.empty()) {
    for (auto [m, n, k] : shapes) add("gemm", mnk(m, n, k), gemm(m, n, k));
    return out;
  }
  if (skinnyOnly) {
    for (auto [m, n, k] : kSkinny) add("gemm", mnk(m, n, k), gemm(m, n, k));
    return out;
  }
  std::vector<int64_t> cubes = quick ? std::vector<int64_t>{1, 7, 40, 56, 100, 256}
                                     : std::vector<int64_t>{1, 2, 3, 5, 8, 13, 16, 24, 32, 40, 48, 56, 64, 72, 96, 100,
                                                            127, 128, 160, 200, 255, 256, 320, 384, 500, 512};
  for (int64_t n : cubes) add("gemm", std::to_string(n) + "^3", gemm(n, n, n));
  // Awkward: skinny, a vector, odd sizes, and one dimension of 1.
  std::vector<std::array<int64_t, 3>> odd = {{1, 512, 512}, {512, 1, 512}, {512, 512, 1}, {7, 512, 64},
                                             {512, 7, 64},  {33, 65, 17},  {100, 300, 50}, {256, 16, 256},
                                             {16, 256, 256}, {500, 37, 129}};
  if (quick) odd.resize(4);
  for (auto [m, n, k] : odd) add("gemm", mnk(m, n, k), gemm(m, n, k));
  if (!quick)
    for (auto [m, n, k] : kSkinny) add("gemm", mnk(m, n, k), gemm(m, n, k));
  std::vector<std::pair<int64_t, int64_t>> ew = {{0, 1},    {0, 7},     {0, 100},  {0, 512},  {1, 512},  {7, 13},
                                                 {13, 7},   {40, 40},   {56, 56},  {64, 100}, {100, 64}, {128, 128},
                                                 {255, 257}, {512, 3},  {3, 512},  {512, 512}};
  if (quick) ew = {{0, 7}, {56, 56}, {512, 3}, {512, 512}};
  for (auto [r, c] : ew) {
    std::string shape = r > 0 ? std::to_string(r) + "x" + std::to_string(c) : std::to_string(c);
    add("elementwise", "x*s+b " + shape, elementwise(r > 0 ? "y = x * s + b" : "y = x * 2 + 1", r, c));
    add("elementwise", "gelu(x+b) " + shape, elementwise(r > 0 ? "y = gelu(x + b)" : "y = gelu(x)", r, c));
  }
  std::vector<std::array<int64_t, 3>> at = {{1, 1, 16}, {1, 7, 64},   {2, 56, 64},  {1, 64, 100}, {2, 100, 32},
                                            {1, 128, 64}, {2, 256, 64}, {1, 512, 128}, {4, 512, 64}};
  if (quick) at = {{1, 7, 64}, {2, 56, 64}, {1, 512, 128}};
  for (auto [h, s, d] : at)
    for (bool causal : {false, true})
      add("attention",
          "H" + std::to_string(h) + " S" + std::to_string(s) + " D" + std::to_string(d) + (causal ? " causal" : ""),
          attention(h, s, d, causal));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, maxConfigs = 60;
  std::string only, isa, jsonPath;
  bool quick = false, skinny = false;
  std::vector<std::array<int64_t, 3>> shapes;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (a == "--family" && i + 1 < argc) only = argv[++i];
    else if (a == "--isa" && i + 1 < argc) isa = argv[++i];
    else if (a == "--max-configs" && i + 1 < argc) maxConfigs = std::atoi(argv[++i]);
    else if (a == "--json" && i + 1 < argc) jsonPath = argv[++i];
    else if (a == "--quick") quick = true;
    else if (a == "--skinny") skinny = true;
    else if (a == "--shapes" && i + 1 < argc) {
      std::string list = argv[++i];
      for (size_t at = 0; at <= list.size();) {
        size_t end = list.find(',', at);
        if (end == std::string::npos) end = list.size();
        long long m = 0, n = 0, k = 0;
        char tail = 0;
        if (std::sscanf(list.substr(at, end - at).c_str(), "%lldx%lldx%lld%c", &m, &n, &k, &tail) != 3 || m < 1 || n < 1 ||
            k < 1 || m * n > (1LL << 26) || m * k > (1LL << 26) || n * k > (1LL << 26)) {
          std::fprintf(stderr, "%s: --shapes takes MxNxK[,MxNxK...] of positive sizes (each operand at most 2^26 elements)\n",
                       argv[0]);
          return 2;
        }
        shapes.push_back({m, n, k});
        at = end + 1;
      }
    }
    else {
      std::printf("usage: %s [--threads N] [--isa x86-64-v3] [--family gemm|elementwise|attention] [--quick] [--skinny]"
                  " [--shapes MxNxK,...] [--max-configs N] [--json FILE]\n",
                  argv[0]);
      return a == "-h" || a == "--help" ? 0 : 2;
    }
  }
  if (!only.empty() && only != "gemm" && only != "elementwise" && only != "attention") {
    std::fprintf(stderr, "%s: --family must be gemm, elementwise or attention\n", argv[0]);
    return 2;
  }
  if (maxConfigs < 1) {
    std::fprintf(stderr, "%s: --max-configs must be at least 1\n", argv[0]);
    return 2;
  }
  auto target = hostTargetWithThreads(threads);
  if (target.ok() && !isa.empty()) {
    target = hostTargetAs(isa);
    if (target.ok()) target->units = threads;
  }
  if (!target.ok()) {
    std::fprintf(stderr, "%s\n", target.error().str().c_str());
    return 2;
  }
  const TargetDesc& host = *target;
  bench::openblasAsShipped(argv, threads);
#if TESSERA_BENCH_OPENBLAS
  openblas_set_num_threads(threads);
#endif
  std::printf("load before: %s\n", bench::loadAverage().c_str());
  bench::LoadWatch load(threads);
  nlohmann::json rows = nlohmann::json::array();
  std::string anchorName;
#if TESSERA_BENCH_OPENBLAS
  anchorName = std::string("sgemm (OpenBLAS ") + openblas_get_corename() + ")";
#endif
  std::printf("small-shape defaults, %d thread%s, %s (%s, %d-bit vectors, %d vector registers, L1d %lld KB, L2 %lld KB)\n",
              threads, threads > 1 ? "s" : "", host.model.c_str(), host.arch.c_str(), host.simdBits,
              host.vectorRegisters, (long long)(host.l1dBytes >> 10), (long long)(host.l2Bytes >> 10));
  std::printf("best: coordinate descent over every knob from the default (GEMM: restarted from each schedule), at most %d\n"
              "configs per kernel, each checked against the reference; default and best re-timed back to back.\n\n",
              maxConfigs);
#if TESSERA_BENCH_OPENBLAS
  std::printf("GEMM rows: OpenBLAS sgemm on %d thread%s, interleaved with the default and then with the best (fastest call\n"
              "of 5 rounds each); x blas = sgemm time / ours (above 1: ours is faster).\n\n",
              threads, threads > 1 ? "s" : "");
#endif
  std::printf("%-11s %-24s %11s %11s %7s %11s %7s %7s  %s\n", "family", "kernel", "default", "best", "ratio", "openblas",
              "def x", "best x", "default -> best config");
  const double t0 = now();
  std::map<std::string, std::pair<double, std::string>> worst;  // family -> (ratio, kernel)
  std::vector<double> logs;
  int bad = 0, over2 = 0;
  std::vector<double> blasLogs;
  double worstBlas = 1e30;
  std::string worstBlasKernel;
  for (const Case& c : cases(only, quick, skinny, shapes)) {
    auto space = search::makeSpace(c.kernel, host);
    if (!space.ok()) {
      std::printf("%-11s %-24s space: %s\n", c.family.c_str(), c.label.c_str(), space.error().str().c_str());
      ++bad;
      continue;
    }
    Runner run(c.kernel, host);
    const ir::Config def = space->defaults();
    Measured md = run.measure(def);
    if (!md.ok) {
      std::printf("%-11s %-24s default failed: %s\n", c.family.c_str(), c.label.c_str(), md.why.c_str());
      ++bad;
      continue;
    }
    int budget = maxConfigs;
    double bestSec = md.sec;
    ir::Config best = def;
    std::vector<ir::Config> starts = {def};
    if (const ir::Knob* sched = space->find("schedule"))
      for (const auto& v : sched->domain) {
        ir::Config s = def;
        s.values["schedule"] = v;
        if (s.values == def.values) continue;
        if (!space->check(s)) starts.push_back(s);
      }
    for (const auto& s : starts) {
      double sec = 0;
      int share = std::max(1, budget / int(starts.size()));
      int before = share;
      ir::Config b = descend(*space, s, run, 2, &share, &sec);
      budget -= before - share;
      if (sec < bestSec) bestSec = sec, best = b;
    }
    // The two re-timed back to back: the ratio is from one moment of this machine.
    double dSec = md.sec, bSec = bestSec;
    if (best.values != def.values) {
      auto exeD = codegen::compileHost(c.kernel, def, host), exeB = codegen::compileHost(c.kernel, best, host);
      if (exeD.ok() && exeB.ok()) {
        auto ins = ir::makeInputs(c.kernel, 1);
        auto outs = ir::makeOutputs(c.kernel);
        std::vector<void*> bufs;
        for (auto& b : ins) bufs.push_back(b.data());
        for (auto& b : outs) bufs.push_back(b.data());
        dSec = 1e30, bSec = 1e30;
        for (int r = 0; r < 3; ++r) {
          dSec = std::min(dSec, timeCall([&] { (*exeD)->run(bufs.data()); }, 3));
          bSec = std::min(bSec, timeCall([&] { (*exeB)->run(bufs.data()); }, 3));
        }
      }
    }
    // OpenBLAS on the same operands, each side interleaved with it (A/B/A/B in one process).
    std::string blasCol = "-", defX = "-", bestX = "-";
    double anchorSec = 0, anchorDefX = 0, anchorBestX = 0;
#if TESSERA_BENCH_OPENBLAS
    if (c.family == "gemm") {
      auto g = ir::analyzeGemm(c.kernel);
      auto exeD = codegen::compileHost(c.kernel, def, host), exeB = codegen::compileHost(c.kernel, best, host);
      if (g.ok() && !g->transA && !g->transB && g->batch == 0 && !g->hasEpilogue && exeD.ok() && exeB.ok()) {
        auto ins = ir::makeInputs(c.kernel, 1);
        auto outs = ir::makeOutputs(c.kernel);
        std::vector<float> c2(size_t(g->m * g->n));
        std::vector<void*> bufs;
        for (auto& b : ins) bufs.push_back(b.data());
        for (auto& b : outs) bufs.push_back(b.data());
        const int M = int(g->m), N = int(g->n), K = int(g->k);
        auto blas = [&] {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, static_cast<const float*>(ins[0].data()), K,
                      static_cast<const float*>(ins[1].data()), N, 0.0f, c2.data(), N);
        };
        auto [td, tb1] = bench::interleave([&] { (*exeD)->run(bufs.data()); }, blas, 5, 0.04);
        auto [tbest, tb2] = bench::interleave([&] { (*exeB)->run(bufs.data()); }, blas, 5, 0.04);
        const double blasSec = std::min(tb1.best_s, tb2.best_s);
        char b1[32], b2[32], b3[32];
        std::snprintf(b1, sizeof b1, blasSec < 1e-3 ? "%.3g us" : "%.4g us", blasSec * 1e6);
        std::snprintf(b2, sizeof b2, "%.2fx", tb1.best_s / td.best_s);
        std::snprintf(b3, sizeof b3, "%.2fx", tb2.best_s / tbest.best_s);
        blasCol = b1, defX = b2, bestX = b3;
        anchorSec = blasSec, anchorDefX = tb1.best_s / td.best_s, anchorBestX = tb2.best_s / tbest.best_s;
        blasLogs.push_back(std::log(tb1.best_s / td.best_s));
        if (tb1.best_s / td.best_s < worstBlas) worstBlas = tb1.best_s / td.best_s, worstBlasKernel = c.label;
      }
    }
#endif
    const double ratio = bSec > 0 ? std::max(1.0, dSec / bSec) : 1.0;
    logs.push_back(std::log(ratio));
    over2 += ratio > 2.0;
    auto& w = worst[c.family];
    if (ratio > w.first) w = {ratio, c.label};
    auto us = [](double s) {
      char b[32];
      std::snprintf(b, sizeof b, s < 1e-3 ? "%.3g us" : "%.4g us", s * 1e6);
      return std::string(b);
    };
    std::string change;
    for (const auto& [name, v] : best.values)
      if (def.values.at(name) != v) change += (change.empty() ? "" : ",") + name + "=" + ir::knobValueStr(v);
    std::printf("%-11s %-24s %11s %11s %6.2fx %11s %7s %7s  %s%s\n", c.family.c_str(), c.label.c_str(), us(dSec).c_str(),
                us(bSec).c_str(), ratio, blasCol.c_str(), defX.c_str(), bestX.c_str(), def.str().c_str(),
                change.empty() ? " (the default is the best found)" : (" -> " + change).c_str());
    std::fflush(stdout);
    nlohmann::json row = {{"family", c.family}, {"kernel", c.label}, {"default_us", dSec * 1e6}, {"best_us", bSec * 1e6},
                          {"default_config", def.str()}, {"best_change", change}};
    if (anchorSec > 0) row.update({{"anchor_us", anchorSec * 1e6}, {"default_x_anchor", anchorDefX}, {"best_x_anchor", anchorBestX}});
    rows.push_back(row);
  }
  double gm = 0;
  for (double l : logs) gm += l;
  gm = logs.empty() ? 1 : std::exp(gm / double(logs.size()));
  std::printf("\n");
  for (const auto& [fam, w] : worst) std::printf("worst default/best, %-11s %.2fx (%s)\n", fam.c_str(), w.first, w.second.c_str());
  std::printf("geometric mean default/best %.2fx over %zu kernels; %d above 2x; %.0f s\n", gm, logs.size(), over2, now() - t0);
  if (!blasLogs.empty()) {
    double gb = 0;
    for (double l : blasLogs) gb += l;
    std::printf("default against OpenBLAS: geometric mean %.2fx over %zu GEMMs, worst %.2fx (%s)\n",
                std::exp(gb / double(blasLogs.size())), blasLogs.size(), worstBlas, worstBlasKernel.c_str());
  }
  std::printf("load after: %s\n", bench::loadAverage().c_str());
  const bench::LoadSummary& ld = load.finish();
  if (!jsonPath.empty()) {
    nlohmann::json doc = {{"bench", "small_shapes"}, {"threads", threads}, {"host", host.model}, {"arch", host.arch},
                          {"family", only.empty() ? "all" : only}, {"skinny", skinny}, {"max_configs", maxConfigs},
                          {"load", {{"before", ld.before}, {"after", ld.after}, {"cores", ld.cores}, {"steal_pct", ld.stealPct},
                                    {"control", std::max(ld.control0, ld.control1)}, {"worst_p80_p20", ld.spread},
                                    {"busy", ld.busy}}},
                          {"rows", rows}};
    if (!anchorName.empty()) doc["anchor"] = anchorName;
    if (!bench::writeText(jsonPath, doc.dump(1) + "\n", "small_shapes_bench")) return 2;
  }
  return bad ? 1 : 0;
}
