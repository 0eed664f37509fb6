// Owns the elementwise benchmark: tessera's default-config fused kernels in GB/s next to a
// plain copy of the same bytes (memcpy of the input to the output) measured in the same run, on
// one or several threads (the copy split in as many slices).
// Usage: elementwise_bench [--db tessera.db] [--dtype f32|bf16|f16] [--threads N] [rows cols]
// (default 4096 4096, f32, one thread); with --db, kernels whose winner is stored (by
// `tessera tune`) run the tuned config.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bench/bench_util.h"
#include "codegen/codegen.h"
#include "ir/builders.h"
#include "ir/families.h"
#include "ir/reference.h"
#include "cache_service/store.h"
#include "search/records.h"
#include "search/space.h"

using namespace tessera;

int main(int argc, char** argv) {
  int64_t rows = 4096, cols = 4096;
  bench::Args args;
  if (int rc = 0; !bench::parseArgs(argc, argv, "[--db tessera.db] [--dtype f32|bf16|f16] [--threads N] [--config K=V,...] [rows cols]", &args, &rc))
    return rc;
  std::unique_ptr<cache::RecordStore> store = std::move(args.store);
  const std::vector<int64_t>& dims = args.numbers;
  if (!dims.empty() && dims.size() != 2) {
    std::fprintf(stderr, "give both rows and cols, or neither\n");
    return 2;
  }
  if (dims.size() == 2) {
    rows = dims[0];
    cols = dims[1];
  }
  auto target = hostTargetWithThreads(args.threads);
  if (!target.ok()) {
    std::fprintf(stderr, "%s\n", target.error().str().c_str());
    return 2;
  }
  const TargetDesc& host = *target;
  const ir::ScalarType dtype = *ir::parseDType(args.dtype);
  std::printf("elementwise %s [%lld x %lld], %d thread%s, %s (%s; L1d %lld KB, L2 %lld KB, L3 %lld MB)\n\n",
              args.dtype.c_str(), (long long)rows, (long long)cols, args.threads, args.threads > 1 ? "s" : "",
              host.model.c_str(), host.arch.c_str(), (long long)(host.l1dBytes >> 10), (long long)(host.l2Bytes >> 10),
              (long long)(host.l3Bytes >> 20));
  std::printf("%-28s %-44s %9s %11s %7s  %s\n", "kernel", "config", "GB/s", "copy GB/s", "ratio", "check");
  int bad = 0;
  struct Case {
    const char* expr;
    std::vector<const char*> rowVectors;  // inputs of shape [cols] (bias-like); others are full-size
  };
  for (const Case& c : {Case{"y = x * s + b", {"s", "b"}}, Case{"y = gelu(x * s + b)", {"s", "b"}},
                        Case{"y = gelu_erf(x + b)", {"b"}}, Case{"y = silu(x) * z", {}}}) {
    const char* expr = c.expr;
    ir::ElementwiseSpec s;
    s.expr = expr;
    s.shape = {rows, cols};
    s.dtype = dtype;
    for (const char* r : c.rowVectors) s.shapes[r] = {cols};
    auto built = ir::buildElementwise(s);
    if (!built.ok()) {
      std::printf("%-28s %s\n", expr, built.error().str().c_str());
      ++bad;
      continue;
    }
    ir::Kernel k = *built;
    auto space = search::makeSpace(k, host);
    ir::Config cfg = space->defaults();
    if (!args.config.empty()) {  // --config: knob overrides on every kernel's default
      auto over = ir::Config::parseAssignments(args.config);
      auto full = over.ok() ? space->complete(*over) : Expected<ir::Config>(over.takeError());
      if (!full.ok()) {
        std::fprintf(stderr, "--config: %s\n", full.error().str().c_str());
        return 2;
      }
      cfg = *full;
    }
    if (store) {
      auto b = store->best(cache::keyIdOf(search::hardKeyFor(k, host)));
      if (b.ok() && *b) cfg = *ir::Config::fromJson((*b)->record.config);
    }
    auto exe = codegen::compileHost(k, cfg, host);
    if (!exe.ok()) {
      std::printf("%-28s compile failed: %s\n", expr, exe.error().str().c_str());
      ++bad;
      continue;
    }
    auto ins = ir::makeInputs(k, 1);
    auto outs = ir::makeOutputs(k);
    std::vector<void*> bufs;
    for (auto& b : ins) bufs.push_back(b.data());
    for (auto& b : outs) bufs.push_back(b.data());
    // The anchor moves the same number of bytes: every input read once, every output written.
    double bytes = ir::kernelBytes(k);
    std::vector<char> src(size_t(bytes / 2)), dst(size_t(bytes / 2));
    std::memset(src.data(), 1, src.size());
    std::memset(dst.data(), 0, dst.size());
    auto tess = [&] { (*exe)->run(bufs.data()); };
    const int T = args.threads;
    auto copy = [&] {
      bench::onThreads(T, [&](int i) {
        size_t lo = src.size() * size_t(i) / size_t(T), hi = src.size() * size_t(i + 1) / size_t(T);
        std::memcpy(dst.data() + lo, src.data() + lo, hi - lo);
      });
    };
    auto [tt, tc] = bench::interleave(tess, copy);
    std::vector<const ir::Buffer*> inPtrs, outPtrs;
    for (auto& b : ins) inPtrs.push_back(&b);
    for (auto& b : outs) outPtrs.push_back(&b);
    auto cmp = ir::compareOutputs(k, *ir::evaluateReference(k, inPtrs), outPtrs);
    double gt = bytes / tt.median_s * 1e-9, gc = bytes / tc.median_s * 1e-9;
    std::printf("%-28s %-44s %9.1f %11.1f %6.2fx  %s (%.1e)\n", expr, cfg.str().c_str(), gt, gc, gt / gc,
                cmp.ok ? "ok" : "WRONG", cmp.maxRelErr);
    bad += !cmp.ok;
  }
  std::printf("\nGB/s = bytes of all inputs and outputs / median time; the copy moves the same bytes\n"
              "(half read, half written) with memcpy, in interleaved rounds of the same run.\n");
  return bad ? 1 : 0;
}
