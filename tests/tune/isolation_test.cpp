// Tests that a candidate runs isolated: a crashing or hanging kernel costs only itself (status
// crash / timeout, the tuner process survives), outputs written in the child reach the parent,
// and a wrong output is caught by the correctness gate.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>

#include "ir/builders.h"
#include "ir/reference.h"
#include "search/isolation.h"
#include "targets/kernel_io.h"

using namespace tessera;
using namespace tessera::search;

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
