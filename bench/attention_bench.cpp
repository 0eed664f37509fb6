// Owns the attention benchmark: tessera's default-config FlashAttention kernel next to the
// unfused OpenBLAS path of anchors/attn_unfused.c (sgemm Q·Kᵀ, row softmax, sgemm P·V; on N
// threads the heads are split among them, OpenBLAS on one thread each), timed interleaved in the
// same run, both checked against the reference evaluator on sampled rows; with bench/.venv
// (bench/torch_venv.sh) torch's scaled_dot_product_attention on the same thread count and dtype.
// Usage: attention_bench [--db tessera.db] [--dtype f32|bf16|f16] [--threads N] [--json FILE] [rounds]
// (default 5 rounds); with --db, shapes whose winner is stored (by `tessera tune`) run the tuned
// config. The unfused anchor always computes in f32 (the same values). With --json the run is also
// written as data (the host, its ISA and load, per row Tessera's time, the unfused anchor's and
// torch's where it ran), which bench/results_page.py draws.
#include <cblas.h>
#include <math.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "codegen/codegen.h"
#include "ir/builders.h"
#include "ir/families.h"
#include "ir/reference.h"
#include "store/store.h"
#include "measure/records.h"
#include "search/space.h"

extern "C" void openblas_set_num_threads(int);
extern "C" char* openblas_get_corename(void);

using namespace tessera;

namespace {

// anchors/attn_unfused.c, per head: P = scale·Q·Kᵀ (sgemm), softmax per row, O = P·V (sgemm).
// The row loops vectorize (libmvec expf) because this file is built with -O3 -ffast-math, as the
// anchor is. A BLAS path has no causal shortcut: it always computes the full S x S.
void unfused(const float* Q, const float* K, const float* V, float* O, float* P, int H, int S, int D, float scale) {
  for (int h = 0; h < H; h++) {
    const float *q = Q + (long)h * S * D, *k = K + (long)h * S * D, *v = V + (long)h * S * D;
    float* o = O + (long)h * S * D;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, S, S, D, scale, q, D, k, D, 0, P, S);
    for (int i = 0; i < S; i++) {
      float* p = P + (long)i * S;
      float m = -INFINITY;
      for (int j = 0; j < S; j++) m = p[j] > m ? p[j] : m;
      float s = 0;
      for (int j = 0; j < S; j++) {
        p[j] = expf(p[j] - m);
        s += p[j];
      }
      float inv = 1.f / s;
      for (int j = 0; j < S; j++) p[j] *= inv;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, S, D, S, 1, P, S, v, D, 0, o, D);
  }
}

struct Row {
  int64_t heads, seq, dim;
  bool causal;
};

}  // namespace

int main(int argc, char** argv) {
  int rounds = 5;
  bench::Args args;
  if (int rc = 0; !bench::parseArgs(argc, argv, "[--db tessera.db] [--dtype f32|bf16|f16] [--threads N] [--json FILE] [rounds]", &args, &rc))
    return rc;
  bench::openblasAsShipped(argv, args.threads);
  openblas_set_num_threads(1);
  bench::LoadWatch load(args.threads);  // the load before and after, printed when the run ends
  std::unique_ptr<cache::RecordStore> store = std::move(args.store);
  if (args.numbers.size() > 1) {
    std::fprintf(stderr, "one rounds count at most\n");
    return 2;
  }
  if (!args.numbers.empty()) rounds = int(args.numbers[0]);
  auto target = hostTargetWithThreads(args.threads);
  if (!target.ok()) {
    std::fprintf(stderr, "%s\n", target.error().str().c_str());
    return 2;
  }
  const TargetDesc& host = *target;
  const int T = args.threads;
  const ir::ScalarType dtype = *ir::parseDType(args.dtype);
  std::printf("Attention forward %s, batch 1, %d thread%s, %s (%s; L1d %lld KB, L2 %lld KB)\n", args.dtype.c_str(), T,
              T > 1 ? "s" : "", host.model.c_str(), host.arch.c_str(), (long long)(host.l1dBytes >> 10),
              (long long)(host.l2Bytes >> 10));
  std::printf("FMA peak (measured now, one core): %.1f GFLOP/s at %.2f GHz\n", host.peakGflopsF32, host.clockGHz);
  const std::vector<Row> rowsToRun = {{8, 2048, 64, false}, {8, 2048, 128, false}, {8, 2048, 64, true}, {8, 2048, 128, true}};
  std::map<std::string, double> torchSec;
  {
    std::string list;
    for (const Row& r : rowsToRun)
      list += (list.empty() ? "" : ",") + std::to_string(r.heads) + ":" + std::to_string(r.seq) + ":" + std::to_string(r.dim) +
              ":" + (r.causal ? "1" : "0");
    for (const auto& l : bench::torchAnchor("sdpa --dtype " + args.dtype + " --threads " + std::to_string(T) + " --shapes " + list)) {
      char key[64];
      double sec = 0;
      if (std::sscanf(l.c_str(), "%63s %lf", key, &sec) == 2 && sec > 0) torchSec[key] = sec;
    }
  }
  const bool torch = !torchSec.empty();
  std::printf("torch SDPA column: %s\n\n", torch ? "bench/.venv (same run, separate process)" : "skipped (no bench/.venv with torch)");
  std::printf("%-26s %8s %9s %8s %9s %8s %7s", "shape", "compile", "tessera", "GFLOP/s", "unfused", "GFLOP/s", "ratio");
  if (torch) std::printf(" %9s %7s", "torch", "ratio");
  std::printf(" %8s  %s\n", "of peak", "check (tessera / unfused max rel err)");
  int bad = 0;
  bool above = false;
  nlohmann::json rows = nlohmann::json::array();
  for (const Row& r : rowsToRun) {
    ir::AttentionSpec spec;
    spec.dtype = dtype;
    spec.heads = r.heads;
    spec.seq_q = r.seq;
    spec.head_dim = r.dim;
    spec.causal = r.causal;
    ir::Kernel k = *ir::buildAttention(spec);
    const double scale = ir::analyzeAttention(k)->spec.scale;
    ir::Config cfg = search::makeSpace(k, host)->defaults();
    std::string name = "H" + std::to_string(r.heads) + " S" + std::to_string(r.seq) + " D" + std::to_string(r.dim) +
                       (r.causal ? " causal" : "");
    std::string kind = "default";
    if (store) {
      auto b = store->best(cache::keyIdOf(measure::hardKeyFor(k, host)));
      if (b.ok() && *b) {
        cfg = *ir::Config::fromJson((*b)->record.config);
        name += " (tuned)";
        kind = "tuned";
      }
    }
    auto exe = codegen::compileHost(k, cfg, host);
    if (!exe.ok()) {
      std::printf("%-26s compile failed: %s\n", name.c_str(), exe.error().str().c_str());
      ++bad;
      continue;
    }
    auto ins = ir::makeInputs(k, 1);
    ir::Buffer o1(dtype, {1, r.heads, r.seq, r.dim}), o2(ir::ScalarType::F32, {1, r.heads, r.seq, r.dim});
    std::vector<float> P(size_t(T) * size_t(r.seq * r.seq));
    void* bufs[4] = {ins[0].data(), ins[1].data(), ins[2].data(), o1.data()};
    // The anchor reads the same values in f32.
    std::vector<std::vector<float>> f32(3);
    for (int i = 0; i < 3; ++i) {
      f32[size_t(i)].resize(size_t(ins[size_t(i)].numel()));
      for (int64_t j = 0; j < ins[size_t(i)].numel(); ++j) f32[size_t(i)][size_t(j)] = float(ins[size_t(i)].get(j));
    }
    const float *Q = f32[0].data(), *K = f32[1].data(), *V = f32[2].data();
    auto* O2 = static_cast<float*>(o2.data());
    auto tess = [&] { (*exe)->run(bufs); };
    const long hs = long(r.seq) * long(r.dim);
    auto blas = [&] {
      bench::onThreads(T, [&](int t) {
        int h0 = int(r.heads * t / T), h1 = int(r.heads * (t + 1) / T);
        unfused(Q + h0 * hs, K + h0 * hs, V + h0 * hs, O2 + h0 * hs, P.data() + size_t(t) * size_t(r.seq * r.seq), h1 - h0,
                int(r.seq), int(r.dim), float(scale));
      });
    };
    auto [tt, tb] = bench::interleave(tess, blas, rounds, 0.15);
    ir::RefOptions ro;
    ro.maxWork = 4e8;  // sampled query rows (always including the last 8): seconds, not minutes
    auto ref = ir::evaluateReference(k, {&ins[0], &ins[1], &ins[2]}, ro);
    auto e1 = ir::compareOutputs(k, *ref, {&o1});
    double full = 4.0 * double(r.heads) * double(r.seq) * double(r.seq) * double(r.dim);
    double gt = ir::kernelFlops(k) / tt.best_s * 1e-9, gb = full / tb.best_s * 1e-9;
    std::string err2 = "n/a (causal)";
    nlohmann::json row = {{"shape", name}, {"heads", r.heads}, {"seq", r.seq}, {"dim", r.dim}, {"causal", r.causal},
                          {"config_kind", kind},
                          {"config", cfg.str()}, {"compile_s", (*exe)->compileSeconds}, {"tessera_ms", tt.best_s * 1e3},
                          {"tessera_gflops", gt}, {"anchor_ms", tb.best_s * 1e3}, {"anchor_gflops", gb},
                          {"anchor_x_tessera", tb.best_s / tt.best_s},
                          {"peak_gflops", host.computePeakGflops(dtype, cfg.hostThreads())}, {"checked", e1.ok}};
    if (!r.causal) {
      auto e2 = ir::compareOutputs(k, *ref, {&o2});
      row["anchor_checked"] = e2.ok;
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.1e%s", e2.maxRelErr, e2.ok ? "" : " WRONG");
      err2 = buf;
    }
    std::printf("%-26s %7.2fs %7.1fms %8.1f %7.1fms %8.1f %6.2fx", name.c_str(), (*exe)->compileSeconds, tt.best_s * 1e3, gt,
                tb.best_s * 1e3, gb, tb.best_s / tt.best_s);
    if (torch) {
      std::string key = std::to_string(r.heads) + ":" + std::to_string(r.seq) + ":" + std::to_string(r.dim) + ":" + (r.causal ? "1" : "0");
      auto it = torchSec.find(key);
      if (it != torchSec.end()) {
        std::printf(" %7.1fms %6.2fx", it->second * 1e3, it->second / tt.best_s);
        row["torch_ms"] = it->second * 1e3;
      } else std::printf(" %9s %7s", "-", "-");
    }
    std::printf(" %8s  %s %.1e / %s\n", bench::ofPeak(gt / host.computePeakGflops(dtype, cfg.hostThreads()), &above).c_str(),
                e1.ok ? "ok" : "WRONG", e1.maxRelErr, err2.c_str());
    std::printf("%-26s   config %s\n", "", cfg.str().c_str());
    bad += !e1.ok;
    rows.push_back(std::move(row));
  }
  std::printf("\nms: fastest call of %d interleaved rounds (>= 0.15 s each) per side; ratio = unfused ms / tessera ms\n"
              "(torch: its ms / tessera ms, its fastest call over 0.75 s in its own process right before).\n"
              "GFLOP/s count matmul FLOPs 4·H·S²·D (causal tessera: the visible pairs only; the unfused path\n"
              "computes all S² either way, so its causal row is the non-causal anchor).\n",
              rounds);
  bench::peakFootnote(above);
  const bench::LoadSummary& ld = load.finish();
  if (!args.json.empty()) {
    nlohmann::json doc = {{"bench", "attention"}, {"dtype", args.dtype}, {"threads", T}, {"rounds", rounds}, {"host", host.model},
                          {"arch", host.arch}, {"isa", host.isa}, {"fma_peak_gflops_f32_one_core", host.peakGflopsF32},
                          {"clock_ghz", host.clockGHz},
                          {"anchor", std::string("unfused: sgemm, softmax, sgemm (OpenBLAS ") + openblas_get_corename() + ")"},
                          {"torch", torch},
                          {"load", {{"before", ld.before}, {"after", ld.after}, {"cores", ld.cores}, {"steal_pct", ld.stealPct},
                                    {"control", std::max(ld.control0, ld.control1)}, {"worst_p80_p20", ld.spread},
                                    {"busy", ld.busy}}},
                          {"rows", rows}};
    if (!bench::writeText(args.json, doc.dump(1) + "\n", "attention_bench")) return 2;
  }
  return bad ? 1 : 0;
}
