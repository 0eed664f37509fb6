// The host probe's clock: the FMA pipes of each host kind and the clock settled from the integer
// chain and the FMA peak, with fixed inputs (the machine running the tests decides nothing here but
// in the last test, which derives its bound the way the probe does).
#include <gtest/gtest.h>

#include "targets/target_desc.h"

namespace tessera {
namespace {

// A host of `simdBits` wide vectors with its pipes set from /proc/cpuinfo's identity.
TargetDesc hostKind(const std::string& vendor, int family, int model, int simdBits) {
  TargetDesc t;
  t.simdBits = simdBits;
  setFmaPipes(t, vendor, family, model);
  return t;
}

TEST(HostClock, FlopsPerCycleOfEachHostKind) {
  // Intel Sapphire Rapids (family 6 model 143; VMs show other models): two zmm FMAs a cycle.
  EXPECT_EQ(flopsPerCycleF32(hostKind("GenuineIntel", 6, 143, 512)), 64);
  EXPECT_EQ(flopsPerCycleF32(hostKind("GenuineIntel", 6, 167, 512)), 64);
  // Zen 4 (family 25): one zmm FMA a cycle, or two ymm ones with AVX-512 hidden: 32 either way.
  EXPECT_EQ(flopsPerCycleF32(hostKind("AuthenticAMD", 25, 17, 512)), 32);
  EXPECT_EQ(flopsPerCycleF32(hostKind("AuthenticAMD", 25, 17, 256)), 32);
  // Family 23, AVX2 only: Zen 1 one ymm FMA a cycle (two 128-bit pipes), Zen 2 two.
  EXPECT_EQ(flopsPerCycleF32(hostKind("AuthenticAMD", 23, 1, 256)), 16);
  EXPECT_EQ(flopsPerCycleF32(hostKind("AuthenticAMD", 23, 0x31, 256)), 32);
  // The presets agree with the table.
  for (const char* p : {"zen4", "zen4-avx2", "sapphire-rapids", "zen1"}) {
    auto t = hostPreset(p);
    ASSERT_TRUE(t.ok()) << p;
    const bool amd = std::string(p).rfind("zen", 0) == 0;
    TargetDesc k = hostKind(amd ? "AuthenticAMD" : "GenuineIntel", amd ? (std::string(p) == "zen1" ? 23 : 25) : 6,
                            std::string(p) == "zen1" ? 1 : 17, t->simdBits);
    EXPECT_EQ(k.fmaPerCycle, t->fmaPerCycle) << p;
  }
}

TEST(HostClock, TheChainReadingStandsWhenThePeakAgrees) {
  // Zen 4 AVX-512: 118 GFLOP/s at 3.7 GHz (32 a cycle); the same with AVX-512 hidden.
  EXPECT_DOUBLE_EQ(settleClockGHz(3.7, 118, 32), 3.7);
  // Sapphire Rapids: 230.2 GFLOP/s; the chain 3.63 GHz (the zmm FMAs may run a lower clock).
  EXPECT_DOUBLE_EQ(settleClockGHz(3.63, 230.2, 64), 3.63);
  // Zen 1: 42 GFLOP/s at 16 a cycle, chain 2.8 GHz.
  EXPECT_DOUBLE_EQ(settleClockGHz(2.8, 42, 16), 2.8);
  // An Intel part with one zmm FMA port (the table says two): the peak implies half; the chain stands.
  EXPECT_DOUBLE_EQ(settleClockGHz(3.0, 96, 64), 3.0);
}

TEST(HostClock, AShortenedOrSlowedChainGivesWayToThePeak) {
  // Golden Cove folded an add-immediate chain: 21.1 GHz read on a 3.6 GHz Sapphire Rapids.
  EXPECT_NEAR(settleClockGHz(21.1, 230.2, 64), 3.597, 0.001);
  // A chain that shared its core reads below what the FMA peak proves.
  EXPECT_NEAR(settleClockGHz(1.9, 118, 32), 3.6875, 1e-9);
  EXPECT_NEAR(settleClockGHz(1.2, 51.2, 16), 3.2, 1e-9);
  // No vector peak (SSE only): the chain as read, unless impossible.
  EXPECT_DOUBLE_EQ(settleClockGHz(3.1, 0, 16), 3.1);
  EXPECT_DOUBLE_EQ(settleClockGHz(19.0, 0, 16), 0);
}

TEST(HostClock, TheProbedClockIsOneACoreCanRun) {
  const TargetDesc& h = hostTarget();
  if (h.peakGflopsF32 <= 0 || h.clockGHz <= 0) GTEST_SKIP() << "no FMA peak or clock probed on this host";
  EXPECT_LE(h.clockGHz, kMaxCoreGHz) << h.model;
  // The FMA peak cannot beat the clock times the flops a cycle (within the probe's own noise).
  EXPECT_GE(h.clockGHz * flopsPerCycleF32(h) * 1.02, h.peakGflopsF32) << h.model;
}

}  // namespace
}  // namespace tessera
