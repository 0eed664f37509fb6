// Tests the knob feature extractor: names match values, categorical knobs become domain indices,
// integer knobs get log2 / power-of-two / pairwise columns, and the layout depends on the knob
// names and types only.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

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
