// Tests the knob feature extractor: names match values, categorical knobs become domain indices,
// integer knobs get log2 / power-of-two / pairwise columns, and the layout depends on the knob
// names and types only.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "../common/ranking.h"
#include "costmodel/features.h"

using namespace tessera;
using namespace tessera::costmodel;

namespace {

ir::Space space(std::vector<int64_t> mcDomain) {
  ir::Space s;
  s.family = "test";
  std::vector<ir::KnobValue> mc(mcDomain.begin(), mcDomain.end());
  s.knobs = {{"schedule", {std::string("plain"), std::string("packed")}, std::string("plain"), ""},
             {"MC", mc, mc.front(), ""},
             {"NR", {int64_t(16), int64_t(32), int64_t(48)}, int64_t(16), ""},
             {"SA", {int64_t(0), int64_t(1)}, int64_t(0), ""}};
  return s;
}

float at(const FeatureExtractor& f, const std::vector<float>& v, const std::string& name) {
  auto n = f.names();
  auto it = std::find(n.begin(), n.end(), name);
  EXPECT_NE(it, n.end()) << name;
  return it == n.end() ? NAN : v[size_t(it - n.begin())];
}

}  // namespace

TEST(KnobFeatures, ValuesLogsPowersOfTwoAndPairs) {
  auto s = space({16, 64, 96});
  auto f = makeKnobFeatures(s, {.pairwise = true});
  ir::Config c;
  c.values = {{"schedule", std::string("packed")}, {"MC", int64_t(96)}, {"NR", int64_t(32)}, {"SA", int64_t(1)}};
  auto v = f->extract(c);
  ASSERT_EQ(v.size(), f->names().size());
  EXPECT_EQ(at(*f, v, "schedule"), 1.f);
  EXPECT_EQ(at(*f, v, "MC"), 96.f);
  EXPECT_FLOAT_EQ(at(*f, v, "log2_MC"), float(std::log2(96.0)));
  EXPECT_EQ(at(*f, v, "ctz_MC"), 5.f);   // 96 = 3 * 2^5
  EXPECT_EQ(at(*f, v, "pow2_MC"), 0.f);
  EXPECT_EQ(at(*f, v, "pow2_NR"), 1.f);
  EXPECT_FLOAT_EQ(at(*f, v, "log2_MC_over_NR"), float(std::log2(96.0 / 32.0)));
  EXPECT_FLOAT_EQ(at(*f, v, "log2_MC_times_NR"), float(std::log2(96.0 * 32.0)));
  // SA has a zero in its domain: no log-derived pair columns for it.
  for (const auto& n : f->names()) {
    EXPECT_EQ(n.find("SA_"), std::string::npos) << n;
    EXPECT_EQ(n.find("_over_SA"), std::string::npos) << n;
    EXPECT_EQ(n.find("_times_SA"), std::string::npos) << n;
  }
}

TEST(KnobFeatures, LayoutDependsOnKnobsNotDomains) {
  auto a = makeKnobFeatures(space({16, 64, 96}), {.pairwise = true});
  auto b = makeKnobFeatures(space({32}), {.pairwise = true});
  EXPECT_EQ(a->names(), b->names());
  auto plain = makeKnobFeatures(space({16}), {.powerOfTwo = false, .pairwise = false});
  EXPECT_LT(plain->names().size(), a->names().size());
  ir::Config missing;  // absent knobs still give a full-length vector
  EXPECT_EQ(a->extract(missing).size(), a->names().size());
}

namespace {

float named(const FeatureExtractor& f, const ir::Config& c, const std::string& name) {
  return at(f, f.extract(c), name);
}

ir::Space gemmKnobs() {
  ir::Space s;
  s.family = "gemm";
  s.knobs = {{"schedule", {std::string("plain"), std::string("packed")}, std::string("plain"), ""},
             {"MR", {int64_t(6), int64_t(8)}, int64_t(8), ""},
             {"NR", {int64_t(32), int64_t(64)}, int64_t(32), ""},
             {"KC", {int64_t(64), int64_t(256)}, int64_t(256), ""}};
  return s;
}


}  // namespace

// Derived features come from the key's description of the workload: register pressure, padding
// waste and trip counts follow the shape, so records of other shapes train the same model.
TEST(HostFeatures, GemmDerivedQuantitiesFollowTheShape) {
  auto f = makeHostFeatures({"gemm", {100, 64, 512}, "row", "f32"}, gemmKnobs(), testutil::avx512Host());
  ir::Config c;
  c.values = {{"schedule", std::string("plain")}, {"MR", int64_t(8)}, {"NR", int64_t(32)}, {"KC", int64_t(256)}};
  EXPECT_EQ(f->extract(c).size(), f->names().size());
  // 8x32 on 16 lanes: 8*2 accumulators + 2 B vectors + 1 broadcast = 19 of 32 registers.
  EXPECT_FLOAT_EQ(named(*f, c, "d6_vregs_ratio"), 19.f / 32.f);
  // M=100 padded to 104 rows of 8: 4 % waste; N=64 fits 32-wide tiles exactly.
  EXPECT_NEAR(named(*f, c, "d9_pad_waste"), 104.0 / 100.0 - 1.0, 1e-6);
  EXPECT_FLOAT_EQ(named(*f, c, "d11_kc_frac"), 0.5f);
  // A batched key ([batch,] M, N, K) reads its dims after the batch; f16 halves the footprints.
  auto batched = makeHostFeatures({"gemm", {4, 100, 64, 512}, "row", "f16"}, gemmKnobs(), testutil::avx512Host());
  EXPECT_NEAR(named(*batched, c, "d9_pad_waste"), 0.04, 1e-6);
  EXPECT_FLOAT_EQ(named(*batched, c, "d1_l1_ratio"), named(*f, c, "d1_l1_ratio") / 2);
  EXPECT_FLOAT_EQ(named(*batched, c, "d0_problem_log2"), named(*f, c, "d0_problem_log2") + 2);
}

// The elementwise trip count is per column block: a 256-column block walked by one 32x8 tile
// runs without a loop, which is what made it the bias+GELU winner.
TEST(HostFeatures, ElementwiseTripsArePerColumnBlock) {
  ir::Space s;
  s.family = "elementwise";
  s.knobs = {{"VW", {int64_t(16), int64_t(32)}, int64_t(16), ""},
             {"UNROLL", {int64_t(1), int64_t(8)}, int64_t(1), ""},
             {"CHUNK", {int64_t(0), int64_t(256)}, int64_t(0), ""},
             {"NT", {int64_t(0), int64_t(1)}, int64_t(0), ""}};
  auto f = makeHostFeatures({"elementwise", {4096, 4096}, "row", "f32"}, s, testutil::avx512Host());
  ir::Config rows, block;
  rows.values = {{"VW", int64_t(32)}, {"UNROLL", int64_t(8)}, {"CHUNK", int64_t(0)}, {"NT", int64_t(1)}};
  block = rows;
  block.values["CHUNK"] = int64_t(256);
  EXPECT_FLOAT_EQ(named(*f, rows, "d8_trips_inner_log2"), 4.f);  // 4096 / 256
  EXPECT_FLOAT_EQ(named(*f, block, "d8_trips_inner_log2"), 0.f);  // one tile per block
  EXPECT_FLOAT_EQ(named(*f, block, "d11_kc_frac"), 1.f);          // blocked
  EXPECT_FLOAT_EQ(named(*f, block, "d14_aux3"), 4.f);             // 16 blocks per row
  ir::Config tail = rows;
  tail.values["VW"] = int64_t(16);
  tail.values["UNROLL"] = int64_t(1);
  auto odd = makeHostFeatures({"elementwise", {8, 1000}, "row", "f32"}, s, testutil::avx512Host());
  EXPECT_NEAR(named(*odd, tail, "d9_pad_waste"), 1008.0 / 1000.0 - 1.0, 1e-6);  // masked tail
}

TEST(HostFeatures, EveryFamilyHasTheSameLayoutLength) {
  auto g = makeHostFeatures({"gemm", {64, 64, 64}, "row", "f32"}, gemmKnobs(), testutil::avx512Host());
  auto a = makeHostFeatures({"attention", {1, 8, 8, 512, 512, 64}, "causal", "f32"}, gemmKnobs(), testutil::avx512Host());
  auto e = makeHostFeatures({"elementwise", {1 << 20}, "row", "bf16"}, gemmKnobs(), testutil::avx512Host());
  ir::Config c;
  EXPECT_EQ(g->extract(c).size(), a->extract(c).size());
  EXPECT_EQ(g->extract(c).size(), e->extract(c).size());
  EXPECT_EQ(named(*a, c, "d10_packed"), 1.f);  // the causal flag
}

// Replayed host tables get the features of the machine that recorded them: the host seen as
// another ISA level keeps its caches and changes vector width and register count only.
TEST(HostFeatures, HostAsAnotherIsaLevel) {
  const TargetDesc& live = hostTarget();
  auto v4 = hostTargetAs("x86-64-v4"), v3 = hostTargetAs("x86-64-v3");
  ASSERT_TRUE(v4.ok() && v3.ok());
  EXPECT_EQ(v4->simdBits, 512);
  EXPECT_EQ(v4->vectorRegisters, 32);
  EXPECT_TRUE(v4->hasIsa("avx512f"));
  EXPECT_EQ(v3->simdBits, 256);
  EXPECT_EQ(v3->vectorRegisters, 16);
  EXPECT_FALSE(v3->hasIsa("avx512f"));
  EXPECT_TRUE(v3->hasIsa("avx2") && v3->hasIsa("fma"));
  EXPECT_EQ(v3->arch, "x86-64-v3");
  EXPECT_EQ(v3->l2Bytes, live.l2Bytes);
  // The same 8x32 register tile: 19 of 32 registers on AVX-512, 8*4 + 4 + 1 = 37 of 16 on AVX2.
  ir::Config c;
  c.values = {{"schedule", std::string("plain")}, {"MR", int64_t(8)}, {"NR", int64_t(32)}, {"KC", int64_t(256)}};
  WorkloadDesc w{"gemm", {128, 128, 128}, "row", "f32"};
  EXPECT_FLOAT_EQ(named(*makeHostFeatures(w, gemmKnobs(), *v4), c, "d6_vregs_ratio"), 19.f / 32.f);
  EXPECT_FLOAT_EQ(named(*makeHostFeatures(w, gemmKnobs(), *v3), c, "d6_vregs_ratio"), 37.f / 16.f);
  auto bad = hostTargetAs("armv9");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("x86-64-v3"), std::string::npos);
}
