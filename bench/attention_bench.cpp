// Owns the attention benchmark: tessera's default-config FlashAttention kernel next to the
// unfused OpenBLAS path of anchors/attn_unfused.c (sgemm Q·Kᵀ, row softmax, sgemm P·V; one
// thread), timed interleaved in the same run, both checked against the reference evaluator on
// sampled rows. Usage: attention_bench [--db tessera.db] [rounds]  (default 5); with --db, shapes
// whose winner is stored (by `tessera tune`) run the tuned config.
#include <cblas.h>
#include <math.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "codegen/codegen.h"
#include "ir/builders.h"
#include "ir/families.h"
#include "ir/reference.h"
#include "cache_service/store.h"
#include "search/records.h"
#include "search/space.h"

extern "C" void openblas_set_num_threads(int);

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
  openblas_set_num_threads(1);
  int rounds = 5;
  bench::Args args;
  if (int rc = 0; !bench::parseArgs(argc, argv, "[--db tessera.db] [rounds]", &args, &rc)) return rc;
  std::unique_ptr<cache::RecordStore> store = std::move(args.store);
  if (args.numbers.size() > 1) {
    std::fprintf(stderr, "one rounds count at most\n");
    return 2;
  }
  if (!args.numbers.empty()) rounds = int(args.numbers[0]);
  const TargetDesc& host = hostTarget();
  std::printf("Attention forward f32, batch 1, one thread, %s\n", host.model.c_str());
  std::printf("FMA peak (measured now): %.1f GFLOP/s\n\n", host.peakGflopsF32);
  std::printf("%-26s %8s %9s %8s %9s %8s %7s %8s  %s\n", "shape", "compile", "tessera", "GFLOP/s", "unfused", "GFLOP/s",
              "ratio", "of peak", "check (tessera / unfused max rel err)");
  int bad = 0;
  for (const Row& r : std::vector<Row>{{8, 2048, 64, false}, {8, 2048, 128, false}, {8, 2048, 64, true}}) {
    ir::AttentionSpec spec;
    spec.heads = r.heads;
    spec.seq_q = r.seq;
    spec.head_dim = r.dim;
    spec.causal = r.causal;
    ir::Kernel k = *ir::buildAttention(spec);
    const double scale = ir::analyzeAttention(k)->spec.scale;
    ir::Config cfg = search::makeSpace(k, host)->defaults();
    std::string name = "H" + std::to_string(r.heads) + " S" + std::to_string(r.seq) + " D" + std::to_string(r.dim) +
                       (r.causal ? " causal" : "");
    if (store) {
      auto b = store->best(cache::keyIdOf(search::hardKeyFor(k, host)));
      if (b.ok() && *b) {
        cfg = *ir::Config::fromJson((*b)->record.config);
        name += " (tuned)";
      }
    }
    auto exe = codegen::compileHost(k, cfg, host);
    if (!exe.ok()) {
      std::printf("%-26s compile failed: %s\n", name.c_str(), exe.error().str().c_str());
      ++bad;
      continue;
    }
    auto ins = ir::makeInputs(k, 1);
    ir::Buffer o1(ir::ScalarType::F32, {1, r.heads, r.seq, r.dim}), o2(ir::ScalarType::F32, {1, r.heads, r.seq, r.dim});
    std::vector<float> P(size_t(r.seq * r.seq));
    void* bufs[4] = {ins[0].data(), ins[1].data(), ins[2].data(), o1.data()};
    const auto* Q = static_cast<const float*>(ins[0].data());
    const auto* K = static_cast<const float*>(ins[1].data());
    const auto* V = static_cast<const float*>(ins[2].data());
    auto* O2 = static_cast<float*>(o2.data());
    auto tess = [&] { (*exe)->run(bufs); };
    auto blas = [&] { unfused(Q, K, V, O2, P.data(), int(r.heads), int(r.seq), int(r.dim), float(scale)); };
    auto [tt, tb] = bench::interleave(tess, blas, rounds, 0.15);
    ir::RefOptions ro;
    ro.maxWork = 4e8;  // sampled query rows (always including the last 8): seconds, not minutes
    auto ref = ir::evaluateReference(k, {&ins[0], &ins[1], &ins[2]}, ro);
    auto e1 = ir::compareOutputs(k, *ref, {&o1});
    double full = 4.0 * double(r.heads) * double(r.seq) * double(r.seq) * double(r.dim);
    double gt = ir::kernelFlops(k) / tt.best_s * 1e-9, gb = full / tb.best_s * 1e-9;
    std::string err2 = "n/a (causal)";
    if (!r.causal) {
      auto e2 = ir::compareOutputs(k, *ref, {&o2});
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.1e%s", e2.maxRelErr, e2.ok ? "" : " WRONG");
      err2 = buf;
    }
    std::printf("%-26s %7.2fs %7.1fms %8.1f %7.1fms %8.1f %6.2fx %7.1f%%  %s %.1e / %s\n", name.c_str(), (*exe)->compileSeconds,
                tt.best_s * 1e3, gt, tb.best_s * 1e3, gb, tb.best_s / tt.best_s, 100 * gt / host.peakGflopsF32,
                e1.ok ? "ok" : "WRONG", e1.maxRelErr, err2.c_str());
    std::printf("%-26s   config %s\n", "", cfg.str().c_str());
    bad += !e1.ok;
  }
  std::printf("\nms: fastest call of %d interleaved rounds (>= 0.15 s each) per side; ratio = unfused ms / tessera ms.\n"
              "GFLOP/s count matmul FLOPs 4·H·S²·D (causal tessera: the visible pairs only; the unfused path\n"
              "computes all S² either way, so its causal row is the non-causal anchor).\n",
              rounds);
  return bad ? 1 : 0;
}
