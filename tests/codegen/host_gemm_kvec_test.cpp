// Tests the host GEMM for few columns (schedule kvec, vectors along K): every dtype, partial row,
// column and depth tiles, B stored either way, batch, fused epilogues and two threads against the
// reference; what it refuses; and where the space offers it and makes it the default.
#include <gtest/gtest.h>

#include "codegen/codegen.h"
#include "hostgen/host_gemm_kvec.h"
#include "host_check.h"
#include "ir/builders.h"
#include "search/space.h"

using namespace tessera;
using namespace tessera::ir;

namespace {

Config cfg(const std::string& a) { return *Config::parseAssignments(a); }

std::string defaultSchedule(const Kernel& k, const TargetDesc& t) {
  auto s = search::makeSpace(k, t);
  EXPECT_TRUE(s.ok()) << s.error().str();
  return s.ok() ? knobValueStr(s->defaults().values.at("schedule")) : "";
}

bool offers(const Kernel& k, const TargetDesc& t, const std::string& sched) {
  auto s = search::makeSpace(k, t);
  if (!s.ok()) return false;
  const Knob* kn = s->find("schedule");
  return kn && kn->indexOf(sched) >= 0;
}

}  // namespace

TEST(HostGemmKvec, EveryDtypeOnOddShapesAndThreads) {
  struct Case {
    std::array<int64_t, 3> mnk;
    const char* config;
  };
  // K below, at and past whole vectors (masked tails); rows and columns past whole tiles.
  const std::vector<Case> cases = {{{1, 1, 1}, "MR=1,NJ=1,KU=1"},          {{129, 7, 200}, "MR=6,NJ=2,KU=1,THREADS=2"},
                                   {{13, 5, 37}, "MR=4,NJ=3,KU=2"},          {{64, 16, 9}, "MR=2,NJ=6,KU=4,THREADS=2"},
                                   {{7, 3, 8}, "MR=8,NJ=1,KU=1"},            {{33, 11, 100}, "MR=1,NJ=8,KU=2,THREADS=2"}};
  for (ScalarType t : {ScalarType::F32, ScalarType::F16, ScalarType::BF16})
    for (const Case& c : cases)
      for (bool transB : {false, true}) {
        Kernel g = *buildGemm({.m = c.mnk[0], .n = c.mnk[1], .k = c.mnk[2], .dtype = t, .transB = transB});
        auto r = testutil::checkHostOn(testutil::twoThreadHost(), g, cfg(std::string("schedule=kvec,") + c.config));
        EXPECT_TRUE(r.correct) << g.name << " transB=" << transB << " " << c.config << ": " << r.error;
      }
}

TEST(HostGemmKvec, BatchAndFusedEpilogues) {
  for (ScalarType t : {ScalarType::F32, ScalarType::BF16}) {
    GemmSpec s;
    s.batch = 2; s.m = 19; s.n = 6; s.k = 45; s.dtype = t; s.transB = t == ScalarType::BF16;
    // alpha, beta·Cin, a row-broadcast bias, a per-row scale and an activation on the row's sums.
    s.alpha = -0.5; s.beta = 1.5; s.epilogue = "gelu(acc * scale + bias)"; s.shapes["bias"] = {6}; s.shapes["scale"] = {2, 19, 1};
    Kernel k = *buildGemm(s);
    auto r = testutil::checkHostOn(testutil::twoThreadHost(), k, cfg("schedule=kvec,MR=4,NJ=2,KU=2,THREADS=2"));
    EXPECT_TRUE(r.correct) << k.name << ": " << r.error;
  }
}

// The sums of a tile are reduced a group of vector-width accumulators at a time: a row whose
// sums straddle two groups (3 x 6 tiles on 16 lanes: row 2 is accumulators 12..17; 3 x 3 on 8
// lanes: 6..8), a partial last group and a partial last tile, in f32 and bf16.
TEST(HostGemmKvec, SumsOfARowStraddlingTwoGroupsOfLanes) {
  const TargetDesc& t = testutil::twoThreadHost();
  const bool wide = t.simdBits >= 512 && t.vectorRegisters >= 32;
  const std::string c = wide ? "schedule=kvec,MR=3,NJ=6,KU=1" : "schedule=kvec,MR=3,NJ=3,KU=1";
  for (ScalarType dt : {ScalarType::F32, ScalarType::BF16}) {
    Kernel g = *buildGemm({.m = 11, .n = 13, .k = 70, .dtype = dt, .epilogue = "relu(acc + bias)", .shapes = {{"bias", {13}}}});
    auto r = testutil::checkHostOn(t, g, cfg(c));
    EXPECT_TRUE(r.correct) << g.name << " " << c << ": " << r.error;
  }
}

// Negative control for the checks above: a kvec kernel computing a neighbouring GEMM (alpha 1.01)
// is caught by the same comparison, on the shape and tiles of the headline case.
TEST(HostGemmKvec, ComparisonCatchesANeighbouringKernel) {
  Kernel want = *buildGemm({.m = 129, .n = 7, .k = 200});
  Kernel near = *buildGemm({.m = 129, .n = 7, .k = 200, .alpha = 1.01});
  Config c = testutil::spaceConfig(want, testutil::twoThreadHost(), "schedule=kvec,MR=6,NJ=2");
  auto exe = codegen::compileHost(near, c, testutil::twoThreadHost());
  ASSERT_TRUE(exe.ok()) << exe.error().str();
  EXPECT_FALSE(testutil::runAndCompare(want, **exe, c, 1).correct);
  auto same = codegen::compileHost(want, c, testutil::twoThreadHost());
  ASSERT_TRUE(same.ok()) << same.error().str();
  EXPECT_TRUE(testutil::runAndCompare(want, **same, c, 1).correct);
}

TEST(HostGemmKvec, RefusesWhatItCannotRun) {
  const TargetDesc& t = testutil::twoThreadHost();
  auto refused = [&](const Kernel& k, const std::string& c) {
    auto exe = codegen::compileHost(k, cfg(c), t);
    EXPECT_FALSE(exe.ok()) << k.name << " " << c;
    if (!exe.ok()) {
      EXPECT_EQ(exe.error().code, ErrorCode::InvalidConfig) << exe.error().str();
    }
  };
  const std::string base = "MC=64,NC=64,KC=64,NR=" + std::to_string(std::max(4, t.simdBits / 32)) + ",ORDER=ij,schedule=kvec,KU=1,";
  refused(*buildGemm({.m = 9, .n = 5, .k = 20, .transA = true}), base + "MR=2,NJ=2");   // A must be read along K
  refused(*buildGemm({.m = 9, .n = 17, .k = 20}), base + "MR=2,NJ=2");                   // more columns than kvec takes
  refused(*buildGemm({.m = 64, .n = 16, .k = 20}), base + "MR=14,NJ=8");                 // no register file holds 14x8
  // The space agrees: not offered for a transposed A or past kKvecMaxN columns, offered next to them.
  EXPECT_FALSE(offers(*buildGemm({.m = 9, .n = 5, .k = 20, .transA = true}), t, "kvec"));
  EXPECT_FALSE(offers(*buildGemm({.m = 9, .n = codegen::kKvecMaxN + 1, .k = 20}), t, "kvec"));
  EXPECT_TRUE(offers(*buildGemm({.m = 9, .n = codegen::kKvecMaxN, .k = 20}), t, "kvec"));
}

// The default: kvec where N is under one vector (or one, with AVX2) or an N-vector kernel would leave lanes idle, and
// K is deep, on every named host (each rule derived from that host's vector width); neighbours of
// two whole vectors or a shallow K keep the N-vector kernels.
TEST(HostGemmKvec, DefaultWhereLanesWouldIdle) {
  for (const auto& name : hostPresets()) {
    TargetDesc t = *hostPreset(name);
    const int64_t lanes = std::max(4, t.simdBits / 32);
    EXPECT_EQ(defaultSchedule(*buildGemm({.m = 129, .n = 7, .k = 200}), t), "kvec") << name;
    EXPECT_EQ(defaultSchedule(*buildGemm({.m = 4096, .n = lanes / 2, .k = 4096}), t), "kvec") << name;
    // One vector of B: kvec with AVX2; with 512-bit vectors nvec's one-vector tile, which runs at
    // the FMA pipes' rate where kvec reduces every element of C (search/space_gemm.cpp).
    EXPECT_EQ(defaultSchedule(*buildGemm({.m = 129, .n = lanes, .k = 200}), t), lanes >= 16 ? "nvec" : "kvec") << name;
    EXPECT_NE(defaultSchedule(*buildGemm({.m = 129, .n = 2 * lanes, .k = 200}), t), "kvec") << name;
    EXPECT_NE(defaultSchedule(*buildGemm({.m = 129, .n = 7, .k = 4 * lanes - 1}), t), "kvec") << name;
    EXPECT_NE(defaultSchedule(*buildGemm({.m = 256, .n = 256, .k = 256}), t), "kvec") << name;
  }
  // And the default of the headline shape runs correctly here.
  auto r = testutil::checkHost(*buildGemm({.m = 129, .n = 7, .k = 200}));
  EXPECT_TRUE(r.correct) << r.error;
}

// On an AVX-512 machine (compiled, not run, on any host): 16-lane dot products in zmm registers;
// the same kernel for an AVX2-only CPU has none (the control that the check reads the ISA).
TEST(HostGemmKvec, CompilesForAvx512AndAvx2Hosts) {
  Kernel k = *buildGemm({.m = 129, .n = 7, .k = 200, .epilogue = "relu(acc + bias)", .shapes = {{"bias", {7}}}});
  for (auto [preset, cpu, zmm] : std::vector<std::tuple<const char*, const char*, bool>>{{"zen4", "znver4", true},
                                                                                     {"zen4-avx2", "x86-64-v3", false}}) {
    TargetDesc t = *hostPreset(preset);
    auto sp = search::makeSpace(k, t);
    ASSERT_TRUE(sp.ok()) << sp.error().str();
    Config c = sp->defaults();
    ASSERT_EQ(knobValueStr(c.values.at("schedule")), "kvec") << preset;
    auto text = codegen::emitHost(k, c, t, codegen::Emit::Asm, {.cpu = cpu});
    ASSERT_TRUE(text.ok()) << preset << ": " << text.error().str();
    EXPECT_NE(text->find("vfmadd"), std::string::npos) << preset;
    EXPECT_EQ(text->find("zmm") != std::string::npos, zmm) << preset;
  }
}
