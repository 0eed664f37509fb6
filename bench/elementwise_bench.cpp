// Owns the elementwise benchmark: tessera's default-config fused kernels in GB/s next to a plain
// copy of the same bytes (memcpy of the input to the output) measured in the same run, with the
// kernel's compute roof beside the copy roof and which of the two binds; each kernel with
// approximated functions also with MATH=fast; on one thread and on all cores.
// Usage: elementwise_bench [--db tessera.db] [--dtype f32|bf16|f16] [--threads N] [--config K=V,...]
// [rows cols] (default 4096 4096, f32; without --threads: one thread, then all cores); with --db,
// kernels whose winner is stored (by `tessera tune`) run the tuned config.
//        elementwise_bench --roofs-of PRESET [--dtype T] [rows cols]: the compute roofs of the same
// kernels on a named host (targets/host_presets.cpp: zen1, zen4, ...) against its copy bandwidth,
// nothing timed: which one binds on a machine that is not this one.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bench/bench_util.h"
#include "store/store.h"
#include "codegen/codegen.h"
#include "ir/builders.h"
#include "ir/families.h"
#include "ir/reference.h"
#include "measure/records.h"
#include "search/space.h"

using namespace tessera;

namespace {

struct Case {
  const char* expr;
  std::vector<const char*> rowVectors;  // inputs of shape [cols] (bias-like); others are full-size
};

struct Row {
  double gbps = 0, copyGbps = 0, roofGbps = 0;
  bool ok = false;
  double maxRelErr = 0;
};

// One kernel under one config on `host`: timed against the copy of the same bytes on as many
// threads, interleaved in one run, and checked against the reference.
Row runOne(const ir::Kernel& k, const ir::Config& cfg, const TargetDesc& host, int threads,
           const codegen::HostExecutable& exe) {
  Row row;
  auto ins = ir::makeInputs(k, 1);
  auto outs = ir::makeOutputs(k);
  std::vector<void*> bufs;
  for (auto& b : ins) bufs.push_back(b.data());
  for (auto& b : outs) bufs.push_back(b.data());
  // The anchor moves the same number of bytes: every input read once, every output written.
  const double bytes = ir::kernelBytes(k);
  std::vector<char> src(size_t(bytes / 2)), dst(size_t(bytes / 2));
  std::memset(src.data(), 1, src.size());
  std::memset(dst.data(), 0, dst.size());
  auto tess = [&] { exe.run(bufs.data()); };
  auto copy = [&] {
    bench::onThreads(threads, [&](int i) {
      size_t lo = src.size() * size_t(i) / size_t(threads), hi = src.size() * size_t(i + 1) / size_t(threads);
      std::memcpy(dst.data() + lo, src.data() + lo, hi - lo);
    });
  };
  auto [tt, tc] = bench::interleave(tess, copy);
  std::vector<const ir::Buffer*> inPtrs, outPtrs;
  for (auto& b : ins) inPtrs.push_back(&b);
  for (auto& b : outs) outPtrs.push_back(&b);
  auto cmp = ir::compareOutputs(k, *ir::evaluateReference(k, inPtrs), outPtrs);
  row.gbps = bytes / tt.median_s * 1e-9;
  row.copyGbps = bytes / tc.median_s * 1e-9;
  row.ok = cmp.ok;
  row.maxRelErr = cmp.maxRelErr;
  // Compute roof: the expression's vector ops per element at one op per lane per cycle of the FMA
  // pipes (the FMA peak counts 2 flops an op), on `threads` cores, as bytes of the kernel.
  auto ops = codegen::elementwiseOpsPerElement(k, cfg);
  int64_t elements = 0;
  for (const auto* o : k.outputs()) elements = std::max(elements, o->numel());
  if (ops.ok() && *ops > 0 && elements > 0) {
    const double lanesPerSec = host.computePeakGflops(ir::ScalarType::F32, threads) * 1e9 / 2;
    row.roofGbps = lanesPerSec / *ops * (bytes / double(elements)) * 1e-9;
  }
  return row;
}

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {Case{"y = x * s + b", {"s", "b"}}, Case{"y = gelu(x * s + b)", {"s", "b"}},
                                      Case{"y = gelu_erf(x + b)", {"b"}}, Case{"y = silu(x) * z", {}}};
  return c;
}

ir::Kernel caseKernel(const Case& c, int64_t rows, int64_t cols, ir::ScalarType dtype) {
  ir::ElementwiseSpec s;
  s.expr = c.expr;
  s.shape = {rows, cols};
  s.dtype = dtype;
  for (const char* r : c.rowVectors) s.shapes[r] = {cols};
  return *ir::buildElementwise(s);
}

// --roofs-of PRESET: the roof of each kernel's default (and MATH=fast) on a named host, one thread.
int roofsOf(const std::string& preset, ir::ScalarType dtype, int64_t rows, int64_t cols) {
  auto t = hostPreset(preset);
  if (!t.ok()) {
    std::fprintf(stderr, "%s\n", t.error().str().c_str());
    return 2;
  }
  std::printf("compute roofs on %s, one thread: FMA peak %.0f GFLOP/s, copy %.0f GB/s (the preset's figures)\n\n",
              t->model.c_str(), t->peakGflopsF32, t->memBandwidthGBs);
  std::printf("%-24s %-8s %12s %10s %7s\n", "kernel", "MATH", "ops/element", "roof GB/s", "binds");
  for (const Case& c : cases()) {
    ir::Kernel k = caseKernel(c, rows, cols, dtype);
    auto space = search::makeSpace(k, *t);
    for (const char* math : {"precise", "fast"}) {
      ir::Config cfg = space->defaults();
      if (space->find("MATH")) cfg.set("MATH", std::string(math));
      else if (std::string(math) == "fast") continue;
      auto ops = codegen::elementwiseOpsPerElement(k, cfg);
      if (!ops.ok()) {
        std::printf("%-24s %s\n", c.expr, ops.error().str().c_str());
        continue;
      }
      int64_t elements = 0;
      for (const auto* o : k.outputs()) elements = std::max(elements, o->numel());
      double roof = t->peakGflopsF32 * 1e9 / 2 / *ops * (ir::kernelBytes(k) / double(elements)) * 1e-9;
      std::printf("%-24s %-8s %12.1f %10.1f %7s\n", c.expr, space->find("MATH") ? math : "-", *ops, roof,
                  roof < t->memBandwidthGBs ? "compute" : "copy");
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t rows = 4096, cols = 4096;
  std::string roofsPreset;
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (std::string(argv[i]) == "--roofs-of" && i + 1 < argc) roofsPreset = argv[++i];
    else rest.push_back(argv[i]);
  }
  argc = int(rest.size());
  argv = rest.data();
  bench::Args args;
  args.threads = 0;  // not given: one thread, then all cores
  if (int rc = 0; !bench::parseArgs(argc, argv, "[--db tessera.db] [--dtype f32|bf16|f16] [--threads N] [--config K=V,...] [rows cols]", &args, &rc))
    return rc;
  bench::LoadWatch load(args.threads);  // the load before and after, printed when the run ends
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
  std::vector<int> threadCounts = {args.threads};
  if (args.threads == 0) {
    threadCounts = {1};
    if (hostTarget().cores > 1) threadCounts.push_back(hostTarget().cores);
  }
  const ir::ScalarType dtype = *ir::parseDType(args.dtype);
  if (!roofsPreset.empty()) return roofsOf(roofsPreset, dtype, rows, cols);
  const TargetDesc& probe = hostTarget();
  std::printf("elementwise %s [%lld x %lld], %s (%s; L1d %lld KB, L2 %lld KB, L3 %lld MB)\n"
              "FMA peak (measured now, one core) %.1f GFLOP/s at %.2f GHz; copy %.1f GB/s one core, %.1f all cores\n\n",
              args.dtype.c_str(), (long long)rows, (long long)cols, probe.model.c_str(), probe.arch.c_str(),
              (long long)(probe.l1dBytes >> 10), (long long)(probe.l2Bytes >> 10), (long long)(probe.l3Bytes >> 20),
              probe.peakGflopsF32, probe.clockGHz, probe.memBandwidthGBs, probe.memBandwidthAllCoresGBs);
  std::printf("%-24s %3s %-40s %8s %9s %6s %9s %-7s  %s\n", "kernel", "T", "config", "GB/s", "copy GB/s", "ratio",
              "roof GB/s", "binds", "check");
  int bad = 0;
  for (int threads : threadCounts) {
    auto target = hostTargetWithThreads(threads);
    if (!target.ok()) {
      std::fprintf(stderr, "%s\n", target.error().str().c_str());
      return 2;
    }
    const TargetDesc& host = *target;
    for (const Case& c : cases()) {
      ir::Kernel k = caseKernel(c, rows, cols, dtype);
      auto space = search::makeSpace(k, host);
      ir::Config cfg = space->defaults();
      if (!args.config.empty()) {  // --config: knob overrides on every kernel's default
        auto over = ir::Config::parseAssignments(args.config);
        if (over.ok())
          for (auto it = over->values.begin(); it != over->values.end();)  // knobs this kernel lacks (MATH) are left out
            it = space->find(it->first) ? std::next(it) : over->values.erase(it);
        auto full = over.ok() ? space->complete(*over) : Expected<ir::Config>(over.takeError());
        if (!full.ok()) {
          std::fprintf(stderr, "--config: %s\n", full.error().str().c_str());
          return 2;
        }
        cfg = *full;
      }
      if (store) {
        auto b = store->best(cache::keyIdOf(measure::hardKeyFor(k, host)));
        if (b.ok() && *b) cfg = *ir::Config::fromJson((*b)->record.config);
      }
      std::vector<ir::Config> configs = {cfg};
      if (space->find("MATH") && args.config.find("MATH") == std::string::npos) {
        ir::Config fast = cfg;
        fast.set("MATH", std::string("fast"));
        if (!(fast == cfg)) configs.push_back(fast);
      }
      for (const ir::Config& run : configs) {
        auto exe = codegen::compileHost(k, run, host);
        if (!exe.ok()) {
          std::printf("%-24s compile failed: %s\n", c.expr, exe.error().str().c_str());
          ++bad;
          continue;
        }
        Row r = runOne(k, run, host, run.hostThreads(), **exe);
        std::string config = run.str();
        if (config.size() > 40) config = config.substr(0, 37) + "...";
        std::printf("%-24s %3d %-40s %8.1f %9.1f %5.2fx %9.1f %-7s  %s (%.1e)\n", c.expr, run.hostThreads(), config.c_str(),
                    r.gbps, r.copyGbps, r.gbps / r.copyGbps, r.roofGbps,
                    r.roofGbps > 0 && r.roofGbps < r.copyGbps ? "compute" : "copy", r.ok ? "ok" : "WRONG", r.maxRelErr);
        bad += !r.ok;
      }
    }
  }
  std::printf("\nGB/s = bytes of all inputs and outputs / median time; the copy moves the same bytes (half read,\n"
              "half written) with memcpy on as many threads (T), in interleaved rounds of the same run. roof: the\n"
              "expression's floating-point vector ops per element as lowered (a division 5, a reciprocal estimate 4)\n"
              "at one op per lane per cycle of the FMA pipes of T cores (the FMA peak / 2); binds: the lower of the\n"
              "roof and the copy. A kernel past its roof used other pipes too (compares, selects, integer ops).\n");
  return bad ? 1 : 0;
}
