// Owns the mapped-kernel emulator's benchmark: how fast it runs GPU kernels on this CPU (lane
// instructions per second, next to the pre-mapping emulation of the same kernel timed in the same
// run), and what its bank-conflict counter says about the mma.sync GEMM with and without the XOR
// swizzle of its shared tiles, per ldmatrix, at the configuration the H100 profiler measured
// (f16, 128x256x16 tiles, 3 stages: 134 M conflicts for 12.6 M ldmatrix before, none after),
// scaled down to a grid the emulator runs in seconds.
// Usage: gpu_emulator_bench [--quick]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "emulator/gpu_emu.h"
#include "codegen/gpu.h"
#include "ir/builders.h"
#include "search/space.h"
#include "targets/kernel_io.h"

using namespace tessera;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Case {
  std::string what, target, config;
  ir::Kernel kernel;
};

// One mapped emulation: compile seconds, run seconds, its report, and whether it matched.
struct Result {
  double compileS = 0, runS = 0;
  emu::Report report;
  bool correct = false;
  std::string error;
};

Result emulate(const Case& c, bool swizzle = true) {
  Result r;
  TargetDesc t = *getTarget(c.target);
  auto space = search::makeSpace(c.kernel, t);
  auto cfg = space->complete(*ir::Config::parseAssignments(c.config));
  if (!cfg.ok()) {
    r.error = cfg.error().str();
    return r;
  }
  double t0 = now();
  auto bin = codegen::compileGpu(c.kernel, *cfg, t, {.wantBinary = false, .sharedSwizzle = swizzle});
  if (!bin.ok()) {
    r.error = bin.error().str();
    return r;
  }
  codegen::MappedEmuOptions o;
  o.run.countInstructions = true;
  auto mk = codegen::compileMapped(*bin, t, o);
  if (!mk.ok()) {
    r.error = mk.error().str();
    return r;
  }
  r.compileS = now() - t0;
  auto report = std::make_shared<emu::Report>();
  auto runner = codegen::makeDeviceRunner(codegen::mappedEmulatedDevice(*mk, t.name, report));
  KernelIO io(c.kernel, 1);
  io.poisonOutputs();
  double t1 = now();
  auto ran = runner->run(*bin, c.kernel, io.buffers(), 1);
  r.runS = now() - t1;
  r.report = *report;
  auto cmp = io.check();
  r.correct = ran.ok() && cmp.ok() && cmp->ok;
  if (!ran.ok()) r.error = ran.error().str();
  return r;
}

// The same kernel's pre-mapping emulation (the sequential run of the IR before mapping).
double preSeconds(const Case& c) {
  TargetDesc t = *getTarget(c.target);
  auto cfg = search::makeSpace(c.kernel, t)->complete(*ir::Config::parseAssignments(c.config));
  auto exe = codegen::compileEmulated(c.kernel, *cfg, t, {.checkMapping = false});
  if (!exe.ok()) return -1;
  KernelIO io(c.kernel, 1);
  double t0 = now();
  (*exe)->run(io.buffers());
  return now() - t0;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  std::printf("Mapped-kernel emulation on this CPU (%s, %d cores): each GPU thread a fiber, blocks across cores\n\n",
              hostTarget().model.c_str(), hostTarget().cores);
  std::printf("%-40s %-7s %9s %8s %12s %10s %9s  %s\n", "kernel", "target", "compile", "run", "lane instr", "M instr/s",
              "pre-map", "check");
  std::vector<Case> cases;
  auto gemm = [](int64_t m, int64_t n, int64_t k, ir::ScalarType dt) {
    return *ir::buildGemm({.m = m, .n = n, .k = k, .dtype = dt});
  };
  auto attn = [](int64_t h, int64_t s, int64_t d, ir::ScalarType dt) {
    return *ir::buildAttention({.heads = h, .seq_q = s, .head_dim = d, .dtype = dt});
  };
  cases.push_back({"GEMM f16 256^3 (mma.sync, cp.async x3)", "sm_80", "", gemm(256, 256, 256, ir::ScalarType::F16)});
  cases.push_back({"attention f16 H2 S256 D64", "sm_80", "", attn(2, 256, 64, ir::ScalarType::F16)});
  cases.push_back({"GEMM bf16 256^3 (MFMA 16x16x16)", "gfx942", "", gemm(256, 256, 256, ir::ScalarType::BF16)});
  cases.push_back({"attention f16 H2 S256 D64", "gfx942", "", attn(2, 256, 64, ir::ScalarType::F16)});
  if (!quick) {
    // Hopper attention: both products on wgmma (TMA-fed in fa3) next to mma.sync's, same shape.
    cases.push_back({"attention f16 H1 S1024 D128 flash-mma", "sm_90a", "strategy=flash-mma,BQ=64,BK=64",
                     attn(1, 1024, 128, ir::ScalarType::F16)});
    cases.push_back({"attention f16 H1 S1024 D128 flash-wgmma", "sm_90a", "strategy=flash-wgmma,BQ=64,BK=64,STAGES=2,DSPLIT=1",
                     attn(1, 1024, 128, ir::ScalarType::F16)});
    cases.push_back({"attention f16 H1 S1024 D128 wgmma fa3", "sm_90a", "strategy=flash-wgmma,PIPE=fa3,BQ=64,BK=64,STAGES=2,DSPLIT=1",
                     attn(1, 1024, 128, ir::ScalarType::F16)});
    cases.push_back({"elementwise gelu 1024x1024", "sm_80", "",
                     *ir::buildElementwise({.expr = "y = gelu(x * s + b)", .shape = {1024, 1024},
                                            .shapes = {{"s", {1024}}, {"b", {1024}}}})});
  }
  int bad = 0;
  for (const Case& c : cases) {
    Result r = emulate(c);
    if (!r.error.empty()) {
      std::printf("%-40s %-7s %s\n", c.what.c_str(), c.target.c_str(), r.error.c_str());
      ++bad;
      continue;
    }
    double pre = preSeconds(c);
    const auto& ct = r.report.counters;
    std::printf("%-40s %-7s %8.2fs %7.2fs %12llu %10.1f %8.3fs  %s\n", c.what.c_str(), c.target.c_str(), r.compileS,
                r.runS, (unsigned long long)ct.laneInstructions, double(ct.laneInstructions) / r.report.seconds * 1e-6, pre,
                r.correct ? "ok" : "WRONG");
    bad += !r.correct;
  }
  std::printf("\nlane instr: LLVM-dialect ops executed by all lanes (the mapped module's ops per basic block);\n"
              "run: the launch through the emulated device (fibers, checks and counters on); pre-map: the\n"
              "pre-mapping IR of the same kernel run sequentially, no checks (-1: not available).\n\n");

  // Bank conflicts of the mma.sync GEMM's ldmatrix with and without the XOR swizzle, at the tile
  // configuration profiled on the H100 (per-access figures: the grid is scaled down).
  Case g{"GEMM f16 256x512x128, 128x256x16 x3", "sm_90", "BM=128,BN=256,BK=16,STAGES=3,TM=64,TN=64",
         gemm(256, 512, 128, ir::ScalarType::F16)};
  std::printf("%-34s %10s %12s %12s %14s  %s\n", g.what.c_str(), "ldmatrix", "wavefronts", "conflicts", "per ldmatrix",
              "H100 ncu at 4096^3 (per ldmatrix)");
  for (bool swizzle : {false, true}) {
    Result r = emulate(g, swizzle);
    if (!r.error.empty()) {
      std::printf("%s: %s\n", swizzle ? "swizzled" : "unswizzled", r.error.c_str());
      ++bad;
      continue;
    }
    uint64_t ldm = 0, waves = 0, conf = 0;
    for (const auto& [site, v] : r.report.counters.sharedBySite) {
      (void)site;
      ldm += v[0], waves += v[1], conf += v[2];
    }
    std::printf("%-34s %10llu %12llu %12llu %14.2f  %s%s\n", swizzle ? "  with the XOR swizzle" : "  without it",
                (unsigned long long)ldm, (unsigned long long)waves, (unsigned long long)conf,
                ldm ? double(conf) / double(ldm) : 0.0, swizzle ? "0 (0 of 12.6 M)" : "10.6 (134 M of 12.6 M)",
                r.correct ? "" : "  WRONG RESULT");
    bad += !r.correct;
  }
  std::printf("\nper ldmatrix: bank conflicts (wavefronts beyond one per 8x8 matrix) over ldmatrix instructions;\n"
              "the shared requests of this kernel are its ldmatrix (its copies into shared memory are cp.async).\n");
  return bad ? 1 : 0;
}
