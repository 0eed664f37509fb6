// Owns the GEMM benchmark: tessera's default-config GEMM next to OpenBLAS measured in the same run
// (interleaved), on one or several threads (the same count for both), 256³–2048³, every result
// checked against the reference evaluator. Anchors per dtype: f32 — sgemm; bf16 — sbgemm (bf16
// inputs, f32 output) where the OpenBLAS build exports it, else sgemm on the same values in f32
// (Debian 12's OpenBLAS 0.3.21 declares cblas_sbgemm in cblas.h but is built without
// BUILD_BFLOAT16: the symbol is missing, so it is looked up at run time); f16 — sgemm on the same
// values in f32 (OpenBLAS has no f16 GEMM: the goal there is f16 at least at f32 speed). With bench/.venv (bench/torch_venv.sh) a torch.matmul
// column in the same dtype is added; without it the column is skipped.
// Usage: gemm_bench [--db tessera.db] [--dtype f32|bf16|f16] [--threads N] [--config K=V,..] [--json FILE] [sizes...]
// With --db, a size whose winner is stored (by `tessera tune`) runs the tuned config; with --json the
// run is also written as data (host, peak, load, every row), which bench/results_page.py draws.
#include <cblas.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "bench/bench_util.h"
#include "codegen/codegen.h"
#include "ir/builders.h"
#include "ir/reference.h"
#include "store/store.h"
#include "measure/records.h"
#include "search/space.h"

extern "C" void openblas_set_num_threads(int);
extern "C" char* openblas_get_corename(void);

using namespace tessera;

int main(int argc, char** argv) {
  bench::Args args;
  if (int rc = 0; !bench::parseArgs(argc, argv, "[--db tessera.db] [--dtype f32|bf16|f16] [--threads N] [--config K=V,...] [--json FILE] [size...]",
                                    &args, &rc))
    return rc;
  bench::openblasAsShipped(argv, args.threads);
  bench::LoadWatch load(args.threads);  // the load before and after, printed when the run ends
  openblas_set_num_threads(args.threads);
  std::vector<int64_t> sizes = args.numbers;
  std::unique_ptr<cache::RecordStore> store = std::move(args.store);
  if (sizes.empty()) sizes = {256, 512, 1024, 2048};
  auto target = hostTargetWithThreads(args.threads);
  if (!target.ok()) {
    std::fprintf(stderr, "%s\n", target.error().str().c_str());
    return 2;
  }
  const TargetDesc& host = *target;
  auto dt = ir::parseDType(args.dtype);
  const ir::ScalarType dtype = *dt;
  using Sbgemm = void (*)(CBLAS_ORDER, CBLAS_TRANSPOSE, CBLAS_TRANSPOSE, blasint, blasint, blasint, float, const bfloat16*,
                         blasint, const bfloat16*, blasint, float, float*, blasint);
  auto sbgemm = reinterpret_cast<Sbgemm>(dlsym(RTLD_DEFAULT, "cblas_sbgemm"));
  const bool useSb = dtype == ir::ScalarType::BF16 && sbgemm;
  const char* anchor = useSb ? "sbgemm" : "sgemm";
  std::printf("GEMM %s, %d thread%s, %s (%s; L1d %lld KB, L2 %lld KB, L3 %lld MB; OpenBLAS core %s)\n", args.dtype.c_str(),
              args.threads, args.threads > 1 ? "s" : "", host.model.c_str(), host.arch.c_str(),
              (long long)(host.l1dBytes >> 10), (long long)(host.l2Bytes >> 10), (long long)(host.l3Bytes >> 20),
              openblas_get_corename());
  std::string isa;
  for (const auto& f : host.isa) isa += " " + f;
  std::printf("ISA:%s\nFMA peak (measured now, one core): %.1f GFLOP/s f32 at %.2f GHz\n", isa.c_str(), host.peakGflopsF32,
              host.clockGHz);
  if (dtype != ir::ScalarType::F32 && !useSb)
    std::printf("anchor: OpenBLAS sgemm on the same values in f32 (%s)\n",
                dtype == ir::ScalarType::BF16 ? "this OpenBLAS exports no cblas_sbgemm" : "OpenBLAS has no f16 GEMM");
  // torch.matmul in the same dtype and thread count, when bench/.venv exists (one process, all sizes).
  std::map<int64_t, double> torchSec;
  {
    std::string list;
    for (int64_t n : sizes) list += (list.empty() ? "" : ",") + std::to_string(n);
    for (const auto& l : bench::torchAnchor("matmul --dtype " + args.dtype + " --threads " + std::to_string(args.threads) +
                                            " --sizes " + list)) {
      long long n = 0;
      double s = 0;
      if (std::sscanf(l.c_str(), "%lld %lf", &n, &s) == 2 && s > 0) torchSec[n] = s;
    }
  }
  const bool torch = !torchSec.empty();
  std::printf("torch.matmul column: %s\n\n", torch ? "bench/.venv (same run, separate process)" : "skipped (no bench/.venv with torch)");
  std::printf("%6s  %-7s %9s %9s %7s", "size", "config", "tessera", anchor, "ratio");
  if (torch) std::printf(" %9s %7s", "torch", "ratio");
  std::printf(" %7s  %s\n", "of peak", "check (tessera / anchor max rel err)");
  int bad = 0;
  bool above = false;
  std::vector<std::string> configs;
  nlohmann::json rows = nlohmann::json::array();
  for (int64_t n : sizes) {
    ir::GemmSpec s;
    s.m = s.n = s.k = n;
    s.dtype = dtype;
    ir::Kernel k = *ir::buildGemm(s);
    auto space = search::makeSpace(k, host);
    ir::Config cfg = space->defaults();
    std::string which = "default";
    if (!args.config.empty()) {
      auto over = ir::Config::parseAssignments(args.config);
      auto full = over.ok() ? space->complete(*over) : Expected<ir::Config>(over.takeError());
      if (!full.ok()) {
        std::fprintf(stderr, "--config: %s\n", full.error().str().c_str());
        return 2;
      }
      cfg = *full;
      which = "config";
    }
    if (store) {
      auto b = store->best(cache::keyIdOf(measure::hardKeyFor(k, host)));
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
    auto outs = ir::makeOutputs(k);
    ir::Buffer c2(ir::ScalarType::F32, {n, n});
    void* bufs[3] = {ins[0].data(), ins[1].data(), outs[0].data()};
    // The anchor's operands: the same values, in f32 for sgemm (f16 included), bf16 for sbgemm.
    std::vector<float> a32, b32;
    if (dtype != ir::ScalarType::F32 && !useSb) {
      a32.resize(size_t(n * n));
      b32.resize(size_t(n * n));
      for (int64_t i = 0; i < n * n; ++i) {
        a32[size_t(i)] = float(ins[0].get(i));
        b32[size_t(i)] = float(ins[1].get(i));
      }
    }
    const int ni = int(n);
    auto* C2 = static_cast<float*>(c2.data());
    auto tess = [&] { (*exe)->run(bufs); };
    auto blas = [&] {
      if (useSb)
        sbgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, ni, ni, 1.0f, static_cast<const bfloat16*>(ins[0].data()), ni,
               static_cast<const bfloat16*>(ins[1].data()), ni, 0.0f, C2, ni);
      else if (dtype != ir::ScalarType::F32)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, ni, ni, 1.0f, a32.data(), ni, b32.data(), ni, 0.0f, C2, ni);
      else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, ni, ni, 1.0f, static_cast<const float*>(ins[0].data()), ni,
                    static_cast<const float*>(ins[1].data()), ni, 0.0f, C2, ni);
    };
    auto [tt, tb] = bench::interleave(tess, blas);
    auto ref = ir::evaluateReference(k, {&ins[0], &ins[1]});
    // The anchor's f32 output checked against the same reference: through a copy in C's dtype.
    ir::Buffer c2t(outs[0].dtype(), {n, n});
    for (int64_t i = 0; i < n * n; ++i) c2t.set(i, C2[i]);
    auto e1 = ir::compareOutputs(k, *ref, {&outs[0]}), e2 = ir::compareOutputs(k, *ref, {&c2t});
    double flops = 2.0 * double(n) * double(n) * double(n);
    double gt = flops / tt.best_s * 1e-9, gb = flops / tb.best_s * 1e-9;
    std::printf("%6lld  %-7s %9.1f %9.1f %6.3fx", (long long)n, which.c_str(), gt, gb, gt / gb);
    nlohmann::json row = {{"m", n}, {"n", n}, {"k", n}, {"config_kind", which}, {"config", cfg.str()},
                          {"tessera_gflops", gt}, {"anchor_gflops", gb}, {"tessera_median_gflops", flops / tt.median_s * 1e-9},
                          {"anchor_median_gflops", flops / tb.median_s * 1e-9},
                          {"peak_gflops", host.computePeakGflops(dtype, cfg.hostThreads())},
                          {"checked", e1.ok}, {"anchor_checked", e2.ok}};
    if (torch) {
      auto it = torchSec.find(n);
      if (it != torchSec.end()) {
        std::printf(" %9.1f %6.3fx", flops / it->second * 1e-9, gt / (flops / it->second * 1e-9));
        row["torch_gflops"] = flops / it->second * 1e-9;
      } else {
        std::printf(" %9s %7s", "-", "-");
      }
    }
    rows.push_back(std::move(row));
    std::printf(" %7s  %s %.1e / %.1e%s\n", bench::ofPeak(gt / host.computePeakGflops(dtype, cfg.hostThreads()), &above).c_str(),
                e1.ok ? "ok" : "WRONG",
                e1.maxRelErr, e2.maxRelErr, e2.ok ? "" : " (anchor WRONG)");
    configs.push_back(std::to_string(n) + ": " + cfg.str());
    bad += !e1.ok;
  }
  std::printf("\nGFLOP/s from the fastest call of 5 interleaved rounds (>= 0.15 s each) per side; torch: its fastest of as\n"
              "many calls, timed in its own process right before. Peak: the one-core peak of the dtype (f32 FMAs;\n"
              "bf16 twice that with vdpbf16ps, AMX's 1024 flops a cycle) x the threads the kernel ran on (its THREADS).\n");
  bench::peakFootnote(above);
  std::printf("configs:\n");
  for (const auto& c : configs) std::printf("  %s\n", c.c_str());
  const bench::LoadSummary& ld = load.finish();
  if (!args.json.empty()) {
    nlohmann::json doc = {{"bench", "gemm"}, {"dtype", args.dtype}, {"threads", args.threads}, {"host", host.model},
                          {"arch", host.arch}, {"isa", host.isa}, {"fma_peak_gflops_f32_one_core", host.peakGflopsF32},
                          {"clock_ghz", host.clockGHz}, {"anchor", std::string(anchor) + " (OpenBLAS " + openblas_get_corename() + ")"},
                          {"load", {{"before", ld.before}, {"after", ld.after}, {"cores", ld.cores}, {"steal_pct", ld.stealPct},
                                    {"control", std::max(ld.control0, ld.control1)}, {"worst_p80_p20", ld.spread},
                                    {"busy", ld.busy}}},
                          {"rows", rows}};
    if (!bench::writeText(args.json, doc.dump(1) + "\n", "gemm_bench")) return 2;
  }
  return bad ? 1 : 0;
}
