// Tests that the spaces only offer what the code generator can build correctly: candidates
// sampled uniformly from each family's space, on odd shapes, all compile and match the reference.
#include <gtest/gtest.h>

#include "../codegen/host_check.h"
#include "ir/builders.h"
#include "search/space.h"
#include "search/space_ops.h"

using namespace tessera;
using namespace tessera::ir;

namespace {

void sampleAndCheck(const Kernel& k, int n, uint64_t seed) {
  auto space = search::makeSpace(k, hostTarget());
  ASSERT_TRUE(space.ok()) << space.error().str();
  search::Rng rng(seed);
  for (int i = 0; i < n; ++i) {
    auto c = search::sampleLegal(*space, rng);
    ASSERT_TRUE(c.has_value());
    auto r = testutil::checkHost(k, *c);
    EXPECT_TRUE(r.correct) << k.name << " " << c->str() << ": " << r.error;
  }
}

}  // namespace

TEST(SpaceLegality, GemmSamplesCompileAndAreCorrect) {
  GemmSpec g;
  g.m = 37; g.n = 129; g.k = 13;
  sampleAndCheck(*buildGemm(g), 12, 1);
  g.m = 129; g.n = 7; g.k = 200; g.dtype = ScalarType::BF16; g.transB = true;
  sampleAndCheck(*buildGemm(g), 8, 2);
}

TEST(SpaceLegality, ElementwiseSamplesCompileAndAreCorrect) {
  ElementwiseSpec e;
  e.expr = "y = gelu(x * s + b)";
  e.shape = {7, 1029};
  e.shapes["s"] = {1029};
  e.shapes["b"] = {1029};
  sampleAndCheck(*buildElementwise(e), 12, 3);
}

TEST(SpaceLegality, AttentionSamplesCompileAndAreCorrect) {
  AttentionSpec a;
  a.heads = 4; a.heads_kv = 2; a.seq_q = 77; a.seq_kv = 130; a.head_dim = 40; a.causal = true;
  sampleAndCheck(*buildAttention(a), 8, 4);
}
