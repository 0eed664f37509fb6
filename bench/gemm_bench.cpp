// Owns the GEMM benchmark: tessera's default-config f32 GEMM next to OpenBLAS sgemm (single
// thread) measured in the same run, 256³–2048³, with both results checked against the
// reference evaluator. Usage: gemm_bench [--db tessera.db] [sizes...]  (default 256 512 1024 2048)
// With --db, a size whose winner is stored (by `tessera tune`) runs the tuned config.
#include <cblas.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/bench_util.h"
#include "codegen/codegen.h"
#include "ir/builders.h"
#include "ir/reference.h"
#include "cache_service/store.h"
#include "search/records.h"
#include "search/space.h"

extern "C" void openblas_set_num_threads(int);

using namespace tessera;

int main(int argc, char** argv) {
  openblas_set_num_threads(1);
  bench::Args args;
  if (int rc = 0; !bench::parseArgs(argc, argv, "[--db tessera.db] [size...]", &args, &rc)) return rc;
  std::vector<int64_t> sizes = args.numbers;
  std::unique_ptr<cache::RecordStore> store = std::move(args.store);
  if (sizes.empty()) sizes = {256, 512, 1024, 2048};
  const TargetDesc& host = hostTarget();
  std::printf("GEMM f32, one thread, %s\n", host.model.c_str());
  std::printf("FMA peak (measured now): %.1f GFLOP/s\n\n", host.peakGflopsF32);
  std::printf("%6s  %-7s %-52s %9s %9s %9s %7s  %s\n", "size", "config", "", "tessera", "OpenBLAS", "ratio",
              "of peak", "check (tessera / OpenBLAS max rel err)");
  int bad = 0;
  for (int64_t n : sizes) {
    ir::GemmSpec s;
    s.m = s.n = s.k = n;
    ir::Kernel k = *ir::buildGemm(s);
    ir::Config cfg = search::makeSpace(k, host)->defaults();
    std::string which = "default";
    if (store) {
      auto b = store->best(cache::keyIdOf(search::hardKeyFor(k, host)));
      if (b.ok() && *b) {
        cfg = *ir::Config::fromJson((*b)->record.config);
        which = "tuned";
      }
    }
    auto exe = codegen::compileHost(k, cfg, host);
    if (!exe.ok()) {
      std::printf("%6lld  compile failed: %s\n", (long long)n, exe.error().str().c_str());
      ++bad;
      continue;
    }
    auto ins = ir::makeInputs(k, 1);
    ir::Buffer c1(ir::ScalarType::F32, {n, n}), c2(ir::ScalarType::F32, {n, n});
    void* bufs[3] = {ins[0].data(), ins[1].data(), c1.data()};
    auto* A = static_cast<float*>(ins[0].data());
    auto* B = static_cast<float*>(ins[1].data());
    auto* C2 = static_cast<float*>(c2.data());
    int ni = int(n);
    auto tess = [&] { (*exe)->run(bufs); };
    auto blas = [&] { cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, ni, ni, 1.0f, A, ni, B, ni, 0.0f, C2, ni); };
    auto [tt, tb] = bench::interleave(tess, blas);
    auto ref = ir::evaluateReference(k, {&ins[0], &ins[1]});
    auto e1 = ir::compareOutputs(k, *ref, {&c1}), e2 = ir::compareOutputs(k, *ref, {&c2});
    double flops = 2.0 * double(n) * double(n) * double(n);
    double gt = flops / tt.best_s * 1e-9, gb = flops / tb.best_s * 1e-9;
    std::string cs = cfg.str();
    std::printf("%6lld  %-7s %-52s %9.1f %9.1f %8.3fx %6.1f%%  %s %.1e / %.1e\n", (long long)n, which.c_str(),
                cs.c_str(), gt, gb,
                gt / gb, 100 * gt / host.peakGflopsF32, e1.ok ? "ok" : "WRONG", e1.maxRelErr, e2.maxRelErr);
    bad += !e1.ok;
  }
  std::printf("\nGFLOP/s from the fastest call of 5 interleaved rounds (>= 0.15 s each) per side.\n");
  return bad ? 1 : 0;
}
