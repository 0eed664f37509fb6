// Tests that a candidate runs isolated: a crashing or hanging kernel costs only itself (status
// crash / timeout, the tuner process survives), outputs written in the child reach the parent,
// and a wrong output is caught by the correctness gate.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>

#include "ir/builders.h"
#include "ir/reference.h"
#include "codegen/codegen.h"
#include "measure/isolation.h"
#include "measure/protocol_measurer.h"
#include "targets/kernel_io.h"

using namespace tessera;
using namespace tessera::measure;

namespace {

MeasureOptions quick() { return MeasureOptions{.minTimeSec = 0.005, .minRuns = 3, .maxRuns = 100, .warmup = 0}; }

ir::Kernel axpy() {
  ir::ElementwiseSpec s;
  s.expr = "y = x * 2 + z";
  s.shape = {1000};
  return *ir::buildElementwise(s);
}

}  // namespace

TEST(Isolation, CrashingCandidateIsACrash) {
  auto r = runIsolated([] { std::raise(SIGSEGV); }, quick(), 5);
  EXPECT_EQ(r.status, TrialStatus::Crash);
  EXPECT_NE(r.message.find("Segmentation"), std::string::npos) << r.message;
  auto abortRun = runIsolated([] { std::abort(); }, quick(), 5);
  EXPECT_EQ(abortRun.status, TrialStatus::Crash);
  volatile int* null = nullptr;
  auto deref = runIsolated([&] { *null = 1; }, quick(), 5);
  EXPECT_EQ(deref.status, TrialStatus::Crash);
}

TEST(Isolation, HangingCandidateTimesOut) {
  auto t0 = std::chrono::steady_clock::now();
  auto r = runIsolated([] { for (volatile int i = 0;; i = i + 1) {} }, quick(), 1.0);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.status, TrialStatus::Timeout);
  EXPECT_GE(s, 0.9);
  EXPECT_LT(s, 5.0);
  // A candidate that only gets slow during timing is also stopped.
  int calls = 0;
  auto slow = runIsolated([&] { if (++calls > 1) for (volatile int i = 0;; i = i + 1) {} }, quick(), 1.0);
  EXPECT_EQ(slow.status, TrialStatus::Timeout);
}

TEST(Isolation, HealthyCandidateReportsSamplesAndOutputs) {
  ir::Kernel k = axpy();
  KernelIO bufs(k, 3, KernelIO::Outputs::Shared);
  bufs.poisonOutputs();
  void* const* p = bufs.buffers();
  auto r = runIsolated(
      [&] {
        auto* x = static_cast<const float*>(p[0]);
        auto* z = static_cast<const float*>(p[1]);
        auto* y = static_cast<float*>(p[2]);
        for (int i = 0; i < 1000; ++i) y[i] = x[i] * 2 + z[i];
      },
      quick(), 5);
  ASSERT_EQ(r.status, TrialStatus::Ok) << r.message;
  EXPECT_GE(r.samples_us.size(), 3u);
  auto cmp = bufs.check();
  ASSERT_TRUE(cmp.ok());
  EXPECT_TRUE(cmp->ok);
}

TEST(Isolation, WrongOutputIsCaughtByTheGate) {
  ir::Kernel k = axpy();
  KernelIO bufs(k, 3, KernelIO::Outputs::Shared);
  bufs.poisonOutputs();
  void* const* p = bufs.buffers();
  // Writes every element but one: the poisoned element must fail the comparison.
  auto r = runIsolated(
      [&] {
        auto* x = static_cast<const float*>(p[0]);
        auto* z = static_cast<const float*>(p[1]);
        auto* y = static_cast<float*>(p[2]);
        for (int i = 0; i < 999; ++i) y[i] = x[i] * 2 + z[i];
      },
      quick(), 5);
  ASSERT_EQ(r.status, TrialStatus::Ok);
  auto cmp = bufs.check();
  ASSERT_TRUE(cmp.ok());
  EXPECT_FALSE(cmp->ok);
  EXPECT_NE(cmp->firstBad.find("y[999]"), std::string::npos) << cmp->firstBad;
}

// Kernels on several threads (OpenMP) measured in forked children: the child gets a working
// thread pool whether or not the parent has started one (libomp re-initializes after fork), and
// the results are checked like any other candidate's.
TEST(Isolation, ThreadedKernelsRunInForkedChildren) {
  auto target = hostTargetWithThreads(2);
  ASSERT_TRUE(target.ok());
  auto g = ir::buildGemm({.m = 96, .n = 200, .k = 64});
  ASSERT_TRUE(g.ok());
  ir::Config gc = *ir::Config::parseAssignments("schedule=blis,MC=96,NC=128,KC=64,MR=8,NR=16,KU=1,ORDER=ij,THREADS=2");
  auto e = ir::buildElementwise({.expr = "y = gelu(x * s + b)", .shape = {64, 300}, .shapes = {{"s", {300}}, {"b", {300}}}});
  ASSERT_TRUE(e.ok());
  ir::Config ec = *ir::Config::parseAssignments("VW=16,UNROLL=2,NT=0,CHUNK=0,ROWS=1,THREADS=2");
  for (auto [k, c] : {std::pair{*g, gc}, std::pair{*e, ec}}) {
    MeasureSettings s;
    s.measure = quick();
    auto m = makeHostMeasurer(k, *target, s);
    // Twice: the second child forks from a parent whose JIT has loaded the runtime already.
    for (int round = 0; round < 2; ++round) {
      auto r = *m->measure({c});
      ASSERT_EQ(r.size(), 1u);
      EXPECT_EQ(r[0].status, TrialStatus::Ok) << k.name << ": " << r[0].message;
    }
    // The parent runs the kernel itself (its own OpenMP pool starts), then a child again.
    auto exe = codegen::compileHost(k, c, *target);
    ASSERT_TRUE(exe.ok()) << exe.error().str();
    KernelIO bufs(k, 5, KernelIO::Outputs::Shared);
    (*exe)->run(bufs.buffers());
    bufs.poisonOutputs();
    auto raw = (*exe)->raw();
    void* const* p = bufs.buffers();
    size_t n = bufs.count();
    auto r = runIsolated([&] { codegen::invokeRaw(raw, p, n); }, quick(), 20);
    ASSERT_EQ(r.status, TrialStatus::Ok) << r.message;
    auto cmp = bufs.check();
    ASSERT_TRUE(cmp.ok());
    EXPECT_TRUE(cmp->ok) << k.name << ": " << cmp->firstBad;
  }
}
