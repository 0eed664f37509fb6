// Tests the family builders: broadcasting, outputs vs temporaries, epilogue inputs, names.
#include <gtest/gtest.h>

#include "ir/builders.h"
#include "ir/families.h"
#include "ir/text.h"
#include "ir/verifier.h"

using namespace tessera;
using namespace tessera::ir;

TEST(Builders, Broadcasting) {
  EXPECT_EQ(*broadcastShapes({4, 1, 3}, {5, 1}), (Shape{4, 5, 3}));
  EXPECT_EQ(*broadcastShapes({3}, {2, 3}), (Shape{2, 3}));
  auto bad = broadcastShapes({4, 3}, {4});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("not broadcastable"), std::string::npos);
}

TEST(Builders, ElementwiseOutputsAndTemps) {
  ElementwiseSpec s;
  s.expr = "t = x * s + b\ny = gelu(t)\nz = t * 2";
  s.shape = {8, 16};
  s.shapes["s"] = {16};
  s.shapes["b"] = {1, 16};
  auto k = buildElementwise(s);
  ASSERT_TRUE(k.ok()) << k.error().str();
  ASSERT_TRUE(verify(*k).ok()) << verify(*k).error().str();
  EXPECT_EQ(k->inputs().size(), 3u);
  ASSERT_EQ(k->outputs().size(), 2u);
  EXPECT_EQ(k->outputs()[0]->name, "y");
  EXPECT_EQ(k->find("t")->role, TensorRole::Temp);
  auto region = analyzeElementwise(*k);
  ASSERT_TRUE(region.ok()) << region.error().str();
  EXPECT_EQ(region->iter, (Shape{8, 16}));
  // b[1,16] reads its first dim as broadcast (-1), s[16] maps to iteration dim 1.
  bool sawB = false;
  for (const auto& op : region->operands)
    if (op.tensor == "b") {
      sawB = true;
      EXPECT_EQ(op.dims, (std::vector<int>{-1, 1}));
    }
  EXPECT_TRUE(sawB);
}

TEST(Builders, ElementwiseErrors) {
  ElementwiseSpec s;
  s.shape = {8, 16};
  s.expr = "y = x + w";
  s.shapes["w"] = {15};
  auto r = buildElementwise(s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("not broadcastable"), std::string::npos);
  s.shapes.clear();
  s.expr = "y = 1.0";
  EXPECT_FALSE(buildElementwise(s).ok());
  s.expr = "y x";
  EXPECT_EQ(buildElementwise(s).error().code, ErrorCode::ParseError);
  s.expr = "y = x; y = x * 2";
  EXPECT_FALSE(buildElementwise(s).ok());
  s.expr = "y = x";
  s.shape = {8, 0};
  EXPECT_FALSE(buildElementwise(s).ok());
}

TEST(Builders, GemmEpilogueAndAnalysis) {
  GemmSpec g;
  g.batch = 2; g.m = 5; g.n = 6; g.k = 7; g.transB = true;
  g.epilogue = "relu(acc + bias) + res";
  g.shapes["bias"] = {6};
  auto k = buildGemm(g);
  ASSERT_TRUE(k.ok()) << k.error().str();
  ASSERT_TRUE(verify(*k).ok()) << verify(*k).error().str() << printKernel(*k);
  auto info = analyzeGemm(*k);
  ASSERT_TRUE(info.ok()) << info.error().str();
  EXPECT_EQ(info->batch, 2);
  EXPECT_EQ(info->m, 5);
  EXPECT_EQ(info->n, 6);
  EXPECT_EQ(info->k, 7);
  EXPECT_FALSE(info->transA);
  EXPECT_TRUE(info->transB);
  EXPECT_TRUE(info->hasEpilogue);
  EXPECT_EQ(k->find("res")->shape, (Shape{2, 5, 6}));
  EXPECT_DOUBLE_EQ(kernelFlops(*k), 2.0 * 2 * 5 * 6 * 7);
  g.epilogue = "acc + A";
  EXPECT_FALSE(buildGemm(g).ok());
}

TEST(Builders, AttentionFlopsCountCausalPairs) {
  AttentionSpec a;
  a.heads = 1; a.seq_q = 4; a.head_dim = 16; a.causal = true;
  Kernel k = *buildAttention(a);
  EXPECT_DOUBLE_EQ(kernelFlops(k), 4.0 * (1 + 2 + 3 + 4) * 16);
  a.causal = false;
  EXPECT_DOUBLE_EQ(kernelFlops(*buildAttention(a)), 4.0 * 16 * 16);
}
