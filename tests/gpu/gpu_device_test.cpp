// Runs GPU binaries on a real device through the dlopen'd CUDA / HIP runners and checks them
// against the reference, and tunes on it through the device measurer (events, L2 flush, a child
// per candidate) with the analytic model as the search's prior (ctest label `gpu`). Without a
// driver or a device every test skips.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>

#include "codegen/gpu_runner.h"
#include "gpu_check.h"
#include "ir/builders.h"
#include "ir/reference.h"
#include "measure/device_measurer.h"
#include "session/tune_session.h"

using namespace tessera;
using namespace tessera::ir;

namespace {

std::vector<Kernel> kernels() {
  std::vector<Kernel> v;
  for (ScalarType t : {ScalarType::F32, ScalarType::F16}) {
    GemmSpec g;
    g.m = 200; g.n = 136; g.k = 70; g.dtype = t; g.epilogue = "relu(acc + bias)"; g.shapes["bias"] = {136};
    v.push_back(*buildGemm(g));
    AttentionSpec a;
    a.batch = 1; a.heads = 4; a.heads_kv = 2; a.seq_q = 100; a.seq_kv = 100; a.head_dim = 64; a.causal = true; a.dtype = t;
    v.push_back(*buildAttention(a));
    ElementwiseSpec e;
    e.expr = "y = gelu(x * s + b)"; e.shape = {33, 64}; e.shapes = {{"s", {64}}, {"b", {64}}}; e.dtype = t;
    v.push_back(*buildElementwise(e));
  }
  return v;
}

void runOn(Vendor vendor) {
  std::unique_ptr<codegen::GpuRunner> runner;
  std::vector<std::string> targets;
  for (const auto& n : knownTargets()) {
    auto t = getTarget(n);
    if (t.ok() && t->vendor == vendor) targets.push_back(n);
  }
  auto r = codegen::openRunnerFor(testutil::gpuTarget(targets.front()));
  if (!r.ok()) GTEST_SKIP() << r.error().str();
  runner = std::move(*r);
  // NVIDIA: the device's own chip; AMD: the first table entry whose code object loads.
  if (std::find(targets.begin(), targets.end(), runner->arch()) != targets.end()) targets = {runner->arch()};
  for (const Kernel& k : kernels()) {
    bool ran = false;
    for (const auto& tn : targets) {
      auto bin = testutil::compileFor(k, testutil::gpuTarget(tn));
      ASSERT_TRUE(bin.ok()) << bin.error().str();
      auto ins = makeInputs(k, 1);
      auto outs = makeOutputs(k);
      std::vector<void*> bufs;
      std::vector<const Buffer*> inPtrs, outPtrs;
      for (auto& b : ins) { bufs.push_back(b.data()); inPtrs.push_back(&b); }
      for (auto& b : outs) { bufs.push_back(b.data()); outPtrs.push_back(&b); }
      auto us = runner->run(*bin, k, bufs.data());
      if (!us.ok()) continue;  // a code object for another chip
      auto ref = evaluateReference(k, inPtrs);
      ASSERT_TRUE(ref.ok());
      auto cmp = compareOutputs(k, *ref, outPtrs);
      EXPECT_TRUE(cmp.ok) << k.name << " on " << runner->device() << " (" << tn << "): " << cmp.firstBad;
      ran = true;
      break;
    }
    EXPECT_TRUE(ran) << k.name << ": no target of the table runs on " << runner->device();
  }
}

// One case of the strategy tests below: compiled for `t` with its config (its resources within the
// chip's), run on the device on inputs of `seed`, checked against the reference; one line printed.
// A compile or run failure is fatal (the caller stops at HasFatalFailure) unless `runErrorsGoOn`.
void checkOnDevice(codegen::GpuRunner& r, const TargetDesc& t, const testutil::WgmmaCase& cs, uint64_t seed,
                   const std::string& label, bool runErrorsGoOn = false) {
  const Kernel& k = cs.kernel;
  auto bin = testutil::compileFor(k, t, cs.cfg);
  ASSERT_TRUE(bin.ok()) << k.name << ": " << bin.error().str();
  EXPECT_TRUE(bin->resources.ok) << k.name << ": " << bin->resources.summary();
  auto ins = makeInputs(k, seed);
  auto outs = makeOutputs(k);
  std::vector<void*> bufs;
  std::vector<const Buffer*> inPtrs, outPtrs;
  for (auto& b : ins) { bufs.push_back(b.data()); inPtrs.push_back(&b); }
  for (auto& b : outs) { bufs.push_back(b.data()); outPtrs.push_back(&b); }
  auto us = r.run(*bin, k, bufs.data());
  if (runErrorsGoOn) {
    EXPECT_TRUE(us.ok()) << k.name << " " << cs.cfg.str() << ": " << (us.ok() ? "" : us.error().str());
    if (!us.ok()) return;
  } else {
    ASSERT_TRUE(us.ok()) << k.name << ": " << us.error().str();
  }
  auto ref = evaluateReference(k, inPtrs);
  ASSERT_TRUE(ref.ok());
  auto cmp = compareOutputs(k, *ref, outPtrs);
  EXPECT_TRUE(cmp.ok) << k.name << " " << cs.cfg.str() << ": " << cmp.firstBad;
  std::printf("[%s] %s %s: %s, %.1f us\n", label.c_str(), k.name.c_str(), cs.cfg.str().c_str(), cmp.ok ? "ok" : "WRONG", *us);
}

}  // namespace

TEST(GpuDevice, NvidiaBinariesMatchTheReference) { runOn(Vendor::Nvidia); }

// A short tuning session on the attached device: every candidate is measured (or categorized), the
// winner is correct, its time comes from device events, and an illegal config costs only itself.
TEST(GpuDevice, TunesOnTheAttachedDevice) {
  std::optional<TargetDesc> target;
  for (const auto& n : knownTargets()) {
    auto t = getTarget(n);
    if (!t.ok() || !t->isGpu()) continue;
    auto d = measure::probeDevice(*t, 0);
    if (d.ok()) {
      target = *t;
      break;
    }
  }
  if (!target) GTEST_SKIP() << "no GPU of a table architecture attached";
  GemmSpec g;
  g.m = 1000;
  g.n = 1000;
  g.k = 1000;
  g.dtype = ScalarType::F16;
  Kernel k = *buildGemm(g);
  auto problem = session::tuneProblem(k, *target);
  ASSERT_TRUE(problem.ok()) << problem.error().message;
  auto measurer = measure::makeDeviceMeasurer(k, *target, {}, {});
  session::SessionSettings s;
  s.loop.trials = 12;
  s.loop.topK = 3;
  auto r = session::runTuneSession(*problem, *measurer, nullptr, nullptr, {}, s, {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->outcome, session::SessionResult::Outcome::Tuned);
  const auto& best = *r->tune.best;
  EXPECT_FALSE(best.emulated);
  EXPECT_GT(best.samples.n, 0);
  EXPECT_GT(best.gflops, 0);
  EXPECT_LT(best.maxRelErr, 5e-2);
  std::printf("[%s] best %s: %.1f us, %.1f TFLOP/s (%d trials)\n", target->name.c_str(), best.config.str().c_str(),
              best.samples.median_us, best.gflops / 1e3, int(r->tune.trials.size()));
}
TEST(GpuDevice, AmdBinariesMatchTheReference) { runOn(Vendor::Amd); }

// The Hopper GEMM (strategy=wgmma: TMA into 128B-swizzled shared memory, an mbarrier ring,
// warp-specialized wgmma) on an sm_90 device against the reference: ragged shapes (the TMA boxes
// cross the edges: zero fill), a pitch TMA cannot read (packed copy), transposed operands, batches in
// the grid, split-K, every block shape the space offers, bf16 with a fused epilogue.
TEST(GpuDevice, WgmmaGemmMatchesTheReference) {
  const TargetDesc& t = testutil::gpuTarget("sm_90a");
  auto r = codegen::openRunnerFor(t);
  if (!r.ok()) GTEST_SKIP() << r.error().str();
  if ((*r)->arch() != "sm_90" && (*r)->arch() != "sm_90a") GTEST_SKIP() << "wgmma needs an sm_90 device, not " << (*r)->arch();
  for (auto& cs : testutil::wgmmaDeviceCases()) {
    checkOnDevice(**r, t, cs, 7, "sm_90a wgmma");
    if (HasFatalFailure()) return;
  }
}

// The Hopper attention (strategy=flash-wgmma: fa3's TMA producer and register-A P·V, and fa2) on an
// sm_90 device against the reference: ragged sequences, causal, GQA, Skv > Sq, a batch, and the
// launch whose 48 KB of dynamic shared memory plus its static mbarriers needs the opt-in.
TEST(GpuDevice, FlashWgmmaAttentionMatchesTheReference) {
  const TargetDesc& t = testutil::gpuTarget("sm_90a");
  auto r = codegen::openRunnerFor(t);
  if (!r.ok()) GTEST_SKIP() << r.error().str();
  if ((*r)->arch() != "sm_90" && (*r)->arch() != "sm_90a") GTEST_SKIP() << "wgmma needs an sm_90 device, not " << (*r)->arch();
  for (auto& cs : testutil::flashWgmmaDeviceCases()) {
    checkOnDevice(**r, t, cs, 11, "sm_90a flash-wgmma", /*runErrorsGoOn=*/true);
    if (HasFatalFailure()) return;
  }
}

// The lane-level mma.sync GEMM (strategy=mma-lane, f16/bf16, sm_80 and later) on the attached
// device against the reference: odd shapes (zero-filled edges), transposed operands read in place,
// batches in the grid's z, fused epilogues, two ring depths.
TEST(GpuDevice, LaneMmaGemmMatchesTheReference) {
  auto r = codegen::openRunnerFor(testutil::gpuTarget("sm_80"));
  if (!r.ok()) GTEST_SKIP() << r.error().str();
  auto target = getTarget((*r)->arch());
  if (!target.ok() || target->vendor != Vendor::Nvidia || !target->findMma("bf16", "mma.sync"))
    GTEST_SKIP() << "mma-lane needs an sm_80 or later device, not " << (*r)->arch();
  for (auto& cs : testutil::laneMmaDeviceCases()) {
    checkOnDevice(**r, *target, cs, 7, (*r)->arch() + " mma-lane");
    if (HasFatalFailure()) return;
  }
}
