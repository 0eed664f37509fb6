// Tests the dimension a shape range runs over, per family (bundle/range_dims.h): its name, its
// extent, the key dimensions it moves (they must be where measure::hardKeyFor puts M, rows and the
// sequence lengths, or the bundle's runtime would compare the wrong ones) and the kernel at
// another size of the range (attention: both lengths, causal kept); refusals in one line.
#include <gtest/gtest.h>

#include <algorithm>

#include "bundle/range_dims.h"
#include "ir/builders.h"
#include "ir/families.h"
#include "ir/text.h"
#include "measure/records.h"
#include "targets/target_desc.h"

using namespace tessera;
using namespace tessera::bundle;

namespace {

// The key dimensions of `k` in rangeKeyDims all equal `v`; the others equal those of `top`.
void expectKeyAt(const ir::Kernel& top, const ir::Kernel& k, int64_t v) {
  const std::vector<int> dims = rangeKeyDims(top);
  const auto topKey = measure::hardKeyFor(top, hostTarget()).shape, key = measure::hardKeyFor(k, hostTarget()).shape;
  ASSERT_EQ(topKey.size(), key.size());
  for (size_t i = 0; i < key.size(); ++i) {
    const bool moves = std::find(dims.begin(), dims.end(), int(i)) != dims.end();
    EXPECT_EQ(key[i], moves ? v : topKey[i]) << k.name << " key dimension " << i;
  }
}

}  // namespace

TEST(RangeDims, GemmAndElementwiseMoveTheirFirstKeyDimension) {
  auto g = ir::buildGemm({.m = 96, .n = 33, .k = 20});
  ASSERT_TRUE(g.ok()) << g.error().str();
  EXPECT_STREQ(rangeDimName(*g), "M");
  EXPECT_EQ(rangeKeyDims(*g), std::vector<int>{0});
  EXPECT_EQ(*rangeExtent(*g), 96);
  auto g7 = kernelAtExtent(*g, 7);
  ASSERT_TRUE(g7.ok()) << g7.error().str();
  expectKeyAt(*g, *g7, 7);

  ir::ElementwiseSpec es;
  es.expr = "y = x * s + b";
  es.shape = {200, 40};
  es.shapes = {{"s", {40}}, {"b", {200, 1}}};
  auto e = ir::buildElementwise(es);
  ASSERT_TRUE(e.ok()) << e.error().str();
  EXPECT_STREQ(rangeDimName(*e), "rows");
  EXPECT_EQ(*rangeExtent(*e), 200);
  auto e13 = kernelAtExtent(*e, 13);
  ASSERT_TRUE(e13.ok()) << e13.error().str();
  expectKeyAt(*e, *e13, 13);
}

TEST(RangeDims, AttentionMovesBothSequenceLengths) {
  for (bool causal : {false, true}) {
    ir::AttentionSpec s{.batch = 2, .heads = 4, .heads_kv = 2, .seq_q = 200, .head_dim = 16, .causal = causal};
    auto top = ir::buildAttention(s);
    ASSERT_TRUE(top.ok()) << top.error().str();
    EXPECT_STREQ(rangeDimName(*top), "seq");
    EXPECT_EQ(rangeKeyDims(*top), (std::vector<int>{3, 4}));
    EXPECT_EQ(*rangeExtent(*top), 200);
    for (int64_t v : {int64_t(1), int64_t(17), int64_t(199)}) {
      auto k = kernelAtExtent(*top, v);
      ASSERT_TRUE(k.ok()) << k.error().str();
      expectKeyAt(*top, *k, v);
      // The same attention as one built at that length (masking included), under its own name.
      auto info = ir::analyzeAttention(*k);
      ASSERT_TRUE(info.ok()) << info.error().str();
      EXPECT_EQ(info->spec.causal, causal);
      EXPECT_EQ(info->spec.seq_q, v);
      EXPECT_EQ(info->spec.seq_kv, v);
      ir::AttentionSpec at = s;
      at.seq_q = v;
      at.name = k->name;
      auto want = ir::buildAttention(at);
      ASSERT_TRUE(want.ok());
      EXPECT_EQ(ir::printKernel(*k), ir::printKernel(*want));
    }
  }
  // Different lengths have no single sequence dimension: refused, saying so.
  auto apart = ir::buildAttention({.heads = 2, .seq_q = 64, .seq_kv = 96, .head_dim = 16});
  ASSERT_TRUE(apart.ok());
  auto e = rangeExtent(*apart);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("query and key lengths"), std::string::npos) << e.error().message;
  EXPECT_EQ(e.error().message.find('\n'), std::string::npos);
  EXPECT_FALSE(kernelAtExtent(*apart, 8).ok());
}
