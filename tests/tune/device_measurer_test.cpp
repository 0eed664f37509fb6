// Tests the device measurer on the emulated device (host memory; a launch runs the GPU kernel's
// emulated form): the whole protocol for a GPU target — builds with ptxas resources, the host
// wrapper (padded operands, workspaces, copy-back), the correctness gate, statistics — and that a
// wrong, a crashing and a hanging GPU candidate each cost only themselves. The faults are injected
// into the device the measuring child opens, per config.
#include <gtest/gtest.h>

#include <chrono>
#include <algorithm>
#include <csignal>

#include "ir/builders.h"
#include "measure/device_measurer.h"
#include "measure/estimate.h"
#include "search/space.h"

using namespace tessera;
using namespace tessera::search;
using namespace tessera::measure;

namespace {

ir::Kernel smallGemm() {
  ir::GemmSpec g;
  g.m = 100;  // not a multiple of the block tile: the wrapper pads A and copies C back
  g.n = 72;
  g.k = 48;
  g.dtype = ir::ScalarType::F16;
  return *ir::buildGemm(g);
}

MeasureSettings quick(double timeout) {
  MeasureSettings s;
  s.timeoutSec = timeout;
  s.measure = {.minTimeSec = 0.002, .minRuns = 2, .maxRuns = 20, .warmup = 0};
  return s;
}

}  // namespace

TEST(DeviceMeasurer, EmulatedDeviceRunsTheWholeProtocol) {
  ir::Kernel k = smallGemm();
  const TargetDesc t = *getTarget("sm_80");
  auto space = makeSpace(k, t);
  ASSERT_TRUE(space.ok()) << space.error().message;
  auto m = makeDeviceMeasurer(k, t, {.emulated = true}, quick(60));
  ir::Config simt = space->defaults();
  simt.set("strategy", std::string("simt"));
  simt.set("BM", int64_t(64));
  simt.set("BN", int64_t(64));
  simt.set("BK", int64_t(16));
  simt.set("TM", int64_t(4));
  simt.set("TN", int64_t(4));
  simt.set("STAGES", int64_t(1));
  ASSERT_FALSE(space->check(simt)) << *space->check(simt);
  auto rs = *m->measure({space->defaults(), simt});
  ASSERT_EQ(rs.size(), 2u);
  for (const auto& r : rs) {
    EXPECT_EQ(r.status, TrialStatus::Ok) << r.config.str() << ": " << r.message;
    EXPECT_TRUE(r.emulated);
    EXPECT_GE(r.samples.n, 2);
    EXPECT_GT(r.gflops, 0);
    EXPECT_LT(r.maxRelErr, 1e-2);
  }
}

// Over the target's limits: rejected at build time from ptxas's report, never run.
TEST(DeviceMeasurer, ConfigsOverTheTargetsLimitsAreRejectedWhenBuilt) {
  ir::Kernel k = smallGemm();
  const TargetDesc t = *getTarget("sm_80");
  auto space = makeSpace(k, t);
  ASSERT_TRUE(space.ok());
  ir::Config illegal = space->defaults();
  illegal.set("BM", int64_t(256));
  illegal.set("BN", int64_t(256));
  illegal.set("BK", int64_t(64));  // 2 x 3 stages x 32 KB of operand tiles: over 48 KB of static smem
  auto m = makeDeviceMeasurer(k, t, {.emulated = true}, quick(30));
  auto rs = *m->measure({illegal});
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].status, TrialStatus::InvalidConfig) << rs[0].message;
}

TEST(DeviceMeasurer, WrongCrashingAndHangingCandidatesCostOnlyThemselves) {
  ir::Kernel k = smallGemm();
  const TargetDesc t = *getTarget("sm_80");
  auto space = makeSpace(k, t);
  ASSERT_TRUE(space.ok());
  // Five legal configs: the default and four others.
  std::vector<ir::Config> configs = {space->defaults()};
  for (int64_t bk : {16, 64})
    for (int64_t vec : {4, 8}) {
      ir::Config c = space->defaults();
      c.set("BK", bk);
      c.set("VEC", vec);
      c.set("STAGES", int64_t(1));
      if (!space->check(c) && std::find(configs.begin(), configs.end(), c) == configs.end()) configs.push_back(c);
    }
  ASSERT_GE(configs.size(), 5u);
  configs.resize(5);
  const ir::Config wrong = configs[1], crash = configs[2], hang = configs[3];
  DeviceSettings d{.emulated = true};
  d.wrapDevice = [=](codegen::DeviceApi api, const ir::Config& c) {
    auto launch = api.launch;
    if (c == wrong)  // the launch writes nothing: the outputs keep their poison
      api.launch = [](void*, const codegen::GpuLaunch&, const std::vector<uint64_t>&) -> Expected<float> { return 0.1f; };
    if (c == crash)  // an illegal address
      api.launch = [](void*, const codegen::GpuLaunch&, const std::vector<uint64_t>&) -> Expected<float> {
        std::raise(SIGSEGV);
        return 0.f;
      };
    if (c == hang)
      api.launch = [](void*, const codegen::GpuLaunch&, const std::vector<uint64_t>&) -> Expected<float> {
        for (volatile int i = 0;; i = i + 1) {
        }
      };
    return api;
  };
  auto m = makeDeviceMeasurer(k, t, d, quick(3));
  auto t0 = std::chrono::steady_clock::now();
  auto rs = *m->measure(configs);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(rs.size(), 5u);
  EXPECT_EQ(rs[0].status, TrialStatus::Ok) << rs[0].message;
  EXPECT_EQ(rs[1].status, TrialStatus::WrongResult) << rs[1].message;
  EXPECT_EQ(rs[2].status, TrialStatus::Crash) << rs[2].message;
  EXPECT_EQ(rs[3].status, TrialStatus::Timeout) << rs[3].message;
  EXPECT_EQ(rs[4].status, TrialStatus::Ok) << rs[4].message;  // after a crash and a hang: unaffected
  EXPECT_LT(seconds, 60);
  // The top-k re-measurement keeps failures as failures.
  auto again = *m->remeasure({configs[0], wrong, configs[4]}, 2);
  EXPECT_TRUE(again[0].ok());
  EXPECT_EQ(again[1].status, TrialStatus::WrongResult);
  EXPECT_TRUE(again[2].ok());
}

// Tuning on the emulated device: each candidate's time is the analytic model's prediction for the
// target (estimated, labelled emulated), never the CPU's emulation time; the emulator only refuses
// the candidate whose outputs are wrong.
TEST(DeviceMeasurer, TuningOnTheEmulatorRanksByTheModelAndTheEmulatorOnlyRefuses) {
  ir::Kernel k = smallGemm();
  const TargetDesc t = *getTarget("sm_80");
  auto space = makeSpace(k, t);
  ASSERT_TRUE(space.ok());
  std::vector<ir::Config> configs = {space->defaults()};
  for (int64_t bk : {16, 64}) {
    ir::Config c = space->defaults();
    c.set("BK", bk);
    c.set("STAGES", int64_t(1));
    if (!space->check(c) && std::find(configs.begin(), configs.end(), c) == configs.end()) configs.push_back(c);
  }
  ASSERT_GE(configs.size(), 3u);
  configs.resize(3);
  const ir::Config wrong = configs[1];
  DeviceSettings d{.emulated = true};
  d.wrapDevice = [=](codegen::DeviceApi api, const ir::Config& c) {
    if (c == wrong)  // the launch writes nothing, and claims to be fast
      api.launch = [](void*, const codegen::GpuLaunch&, const std::vector<uint64_t>&) -> Expected<float> { return 1e-6f; };
    return api;
  };
  auto m = makeEmulatorCheckedMeasurer(k, t, d, quick(60));
  auto rs = *m->measure(configs);
  auto model = *makeEstimateMeasurer(k, t)->measure(configs);
  ASSERT_EQ(rs.size(), 3u);
  ASSERT_EQ(model.size(), 3u);
  for (size_t i : {size_t(0), size_t(2)}) {
    ASSERT_TRUE(rs[i].ok()) << rs[i].config.str() << ": " << rs[i].message;
    ASSERT_TRUE(model[i].ok()) << model[i].message;
    EXPECT_TRUE(rs[i].emulated && rs[i].estimated);
    EXPECT_EQ(rs[i].estimator, model[i].estimator);
    EXPECT_DOUBLE_EQ(rs[i].samples.median_us, model[i].samples.median_us);  // the model's time, not the CPU's
    EXPECT_DOUBLE_EQ(rs[i].throughput, model[i].throughput);
    EXPECT_LT(rs[i].maxRelErr, 1e-2);  // the emulator checked the outputs
  }
  EXPECT_EQ(rs[1].status, TrialStatus::WrongResult) << rs[1].message;
  EXPECT_NE(rs[1].message.find("refused by the emulator"), std::string::npos) << rs[1].message;
  EXPECT_TRUE(rs[1].emulated);
  auto again = *m->remeasure(configs, 2);  // checked once: the same answers
  EXPECT_DOUBLE_EQ(again[0].samples.median_us, rs[0].samples.median_us);
  EXPECT_EQ(again[1].status, TrialStatus::WrongResult);
}

// Without a device of the target's vendor, the probe says so (and names what was looked for).
TEST(DeviceMeasurer, ProbeWithoutADeviceIsUnsupported) {
  auto d = probeDevice(*getTarget("sm_90"), 0);
  if (d.ok()) GTEST_SKIP() << "a device is attached: " << d->name;
  EXPECT_TRUE(d.error().code == ErrorCode::Unsupported || d.error().code == ErrorCode::InvalidArgument)
      << d.error().message;
  EXPECT_FALSE(d.error().message.empty());
}
