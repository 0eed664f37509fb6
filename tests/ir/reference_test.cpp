// Tests the reference evaluator against hand-computed values, its fast paths against the generic
// interpreter, and the comparison's tolerances.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/builders.h"
#include "ir/reference.h"
#include "ir/text.h"

using namespace tessera;
using namespace tessera::ir;

namespace {

std::vector<const Buffer*> ptrs(const std::vector<Buffer>& v) {
  std::vector<const Buffer*> r;
  for (const auto& b : v) r.push_back(&b);
  return r;
}

}  // namespace

TEST(Reference, HandComputedGemm) {
  GemmSpec g;
  g.m = 2; g.n = 2; g.k = 3;
  Kernel k = *buildGemm(g);
  Buffer A(ScalarType::F32, {2, 3}), B(ScalarType::F32, {3, 2});
  double a[] = {1, 2, 3, 4, 5, 6}, b[] = {7, 8, 9, 10, 11, 12};
  for (int i = 0; i < 6; ++i) { A.set(i, a[i]); B.set(i, b[i]); }
  auto r = evaluateReference(k, {&A, &B});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outputs[0], (std::vector<double>{58, 64, 139, 154}));
  auto gen = evaluateReference(k, {&A, &B}, {.generic = true});
  EXPECT_EQ(gen->outputs[0], r->outputs[0]);
}

TEST(Reference, HandComputedElementwise) {
  ElementwiseSpec s;
  s.expr = "y = gelu_erf(x) + relu(x) * 2 - sigmoid(x)";
  s.shape = {3};
  Kernel k = *buildElementwise(s);
  Buffer x(ScalarType::F32, {3});
  x.set(0, 0.0); x.set(1, 1.0); x.set(2, -2.0);
  auto r = evaluateReference(k, {&x});
  ASSERT_TRUE(r.ok());
  auto f = [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))) + std::max(v, 0.0) * 2 - 1 / (1 + std::exp(-v)); };
  EXPECT_NEAR(r->outputs[0][0], -0.5, 1e-15);
  EXPECT_NEAR(r->outputs[0][1], f(1.0), 1e-15);
  EXPECT_NEAR(r->outputs[0][1], 0.8413447460685429 + 2 - 0.7310585786300049, 1e-12);
  EXPECT_NEAR(r->outputs[0][2], f(-2.0), 1e-15);
}

TEST(Reference, HandComputedAttention) {
  // One query, two keys with scores 0 and ln(3) (scale 1): weights 1/4 and 3/4.
  AttentionSpec a;
  a.heads = 1; a.seq_q = 1; a.seq_kv = 2; a.head_dim = 1; a.scale = 1.0;
  Kernel k = *buildAttention(a);
  Buffer Q(ScalarType::F32, {1, 1, 1, 1}), K(ScalarType::F32, {1, 1, 2, 1}), V(ScalarType::F32, {1, 1, 2, 1});
  Q.set(0, 1.0f);
  K.set(0, 0.0f); K.set(1, float(std::log(3.0)));
  V.set(0, 10.0f); V.set(1, 20.0f);
  auto r = evaluateReference(k, {&Q, &K, &V});
  ASSERT_TRUE(r.ok());
  double l3 = double(float(std::log(3.0)));
  double w1 = std::exp(l3) / (1 + std::exp(l3));
  EXPECT_NEAR(r->outputs[0][0], 10 * (1 - w1) + 20 * w1, 1e-12);
  EXPECT_NEAR(r->outputs[0][0], 17.5, 1e-6);
  auto gen = evaluateReference(k, {&Q, &K, &V}, {.generic = true});
  EXPECT_NEAR(gen->outputs[0][0], r->outputs[0][0], 1e-12);
}

TEST(Reference, FastPathsMatchGenericInterpreter) {
  std::vector<Kernel> ks;
  GemmSpec g;
  g.batch = 2; g.m = 9; g.n = 7; g.k = 13; g.transA = true; g.dtype = ScalarType::F16;
  g.alpha = 0.5; g.beta = -1.0; g.epilogue = "silu(acc) + bias"; g.shapes["bias"] = {7};
  ks.push_back(*buildGemm(g));
  AttentionSpec a;
  a.batch = 2; a.heads = 4; a.heads_kv = 2; a.seq_q = 6; a.seq_kv = 11; a.head_dim = 8; a.causal = true;
  ks.push_back(*buildAttention(a));
  a.causal = false; a.dtype = ScalarType::BF16;
  ks.push_back(*buildAttention(a));
  for (const Kernel& k : ks) {
    auto in = makeInputs(k, 7);
    auto fast = evaluateReference(k, ptrs(in));
    auto gen = evaluateReference(k, ptrs(in), {.generic = true});
    ASSERT_TRUE(fast.ok() && gen.ok());
    ASSERT_EQ(fast->outputs[0].size(), gen->outputs[0].size());
    for (size_t i = 0; i < gen->outputs[0].size(); ++i)
      EXPECT_NEAR(fast->outputs[0][i], gen->outputs[0][i], 1e-9 + 1e-9 * std::fabs(gen->outputs[0][i])) << k.name << " @" << i;
  }
}

TEST(Reference, RowSamplingKeepsEdgesAndChecksOnlySampledRows) {
  GemmSpec g;
  g.m = 100; g.n = 8; g.k = 8;
  Kernel k = *buildGemm(g);
  auto in = makeInputs(k, 1);
  auto r = evaluateReference(k, ptrs(in), {.maxWork = 1000});
  ASSERT_TRUE(r.ok());
  EXPECT_GT(r->rowStride, 1);
  EXPECT_NE(r->rowStride % 2, 0);
  EXPECT_TRUE(r->rowComputed(99, 100));
  EXPECT_TRUE(r->rowComputed(0, 100));
  auto full = evaluateReference(k, ptrs(in));
  Buffer out(ScalarType::F32, {100, 8});
  for (int64_t i = 0; i < out.numel(); ++i) out.set(i, full->outputs[0][size_t(i)]);
  auto c = compareOutputs(k, *r, {&out});
  EXPECT_TRUE(c.ok) << c.firstBad;
  EXPECT_LT(c.checked, 800);
  out.set(99 * 8 + 3, 1e3);  // corrupt an edge row: always checked
  EXPECT_FALSE(compareOutputs(k, *r, {&out}).ok);
}

TEST(Reference, ToleranceDependsOnDtype) {
  ElementwiseSpec s;
  s.expr = "y = x * 3";
  s.shape = {64};
  for (ScalarType t : {ScalarType::F32, ScalarType::F16, ScalarType::BF16}) {
    s.dtype = t;
    Kernel k = *buildElementwise(s);
    auto in = makeInputs(k, 3);
    auto r = evaluateReference(k, ptrs(in));
    Buffer out(t, {64});
    for (int64_t i = 0; i < 64; ++i) out.set(i, r->outputs[0][size_t(i)]);
    auto c = compareOutputs(k, *r, {&out});
    EXPECT_TRUE(c.ok) << typeName(t) << " " << c.maxRelErr;
    // A relative error of 1% passes bf16 but fails f32 and f16.
    for (int64_t i = 0; i < 64; ++i) out.set(i, r->outputs[0][size_t(i)] * 1.01);
    EXPECT_EQ(compareOutputs(k, *r, {&out}).ok, t == ScalarType::BF16) << typeName(t);
    out.set(5, NAN);
    EXPECT_FALSE(compareOutputs(k, *r, {&out}).ok);
  }
}

TEST(Reference, DtypeConversionsRoundToNearestEven) {
  EXPECT_EQ(f32ToF16(1.0f), 0x3c00);
  EXPECT_EQ(f16ToF32(0x3c00), 1.0f);
  EXPECT_EQ(f32ToF16(65504.0f), 0x7bff);
  EXPECT_EQ(f32ToF16(1e6f), 0x7c00);
  EXPECT_EQ(f16ToF32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f32ToF16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie -> even
  EXPECT_EQ(f32ToF16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(f32ToBF16(1.0f), 0x3f80);
  EXPECT_EQ(bf16ToF32(0x3f80), 1.0f);
  EXPECT_EQ(f32ToBF16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // tie -> even
  for (uint32_t h = 0; h < 0x7c00; h += 7) EXPECT_EQ(f32ToF16(f16ToF32(uint16_t(h))), h);
}

// A NaN reference never matches a NaN output: `--alpha nan` made every kernel "correct".
TEST(Reference, NanNeverMatchesNan) {
  GemmSpec g;
  g.m = 4; g.n = 4; g.k = 4;
  g.alpha = NAN;
  Kernel k = *buildGemm(g);
  auto in = makeInputs(k, 1);
  auto r = evaluateReference(k, ptrs(in));
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(std::isnan(r->outputs[0][0]));
  Buffer out(ScalarType::F32, {4, 4});
  for (int64_t i = 0; i < out.numel(); ++i) out.set(i, NAN);
  auto c = compareOutputs(k, *r, {&out});
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.firstBad.find("nan"), std::string::npos) << c.firstBad;
}
