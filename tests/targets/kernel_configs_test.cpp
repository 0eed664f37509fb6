// Tests the typed configs (targets/kernel_configs.h): each family's knobs read once, with the
// defaults of the knobs a config may leave out, and a missing or mistyped knob named in the error.
#include <gtest/gtest.h>

#include "targets/kernel_configs.h"

namespace {

using tessera::ir::Config;

Config configOf(std::initializer_list<std::pair<const char*, tessera::ir::KnobValue>> knobs) {
  Config c;
  for (const auto& [k, v] : knobs) c.set(k, v);
  return c;
}

TEST(KernelConfigs, AGpuGemmConfigReadsEveryKnobAndDefaultsItsOptionalOnes) {
  Config c = configOf({{"strategy", std::string("wgmma")}, {"BM", int64_t(128)}, {"BN", int64_t(256)}, {"BK", int64_t(64)},
                       {"TM", int64_t(64)}, {"TN", int64_t(256)}, {"VEC", int64_t(8)}, {"STAGES", int64_t(4)}});
  auto g = tessera::readGpuGemmConfig(c);
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->strategy, "wgmma");
  EXPECT_EQ(g->BM, 128);
  EXPECT_EQ(g->BN, 256);
  EXPECT_EQ(g->BK, 64);
  EXPECT_EQ(g->TM, 64);
  EXPECT_EQ(g->TN, 256);
  EXPECT_EQ(g->VEC, 8);
  EXPECT_EQ(g->STAGES, 4);
  EXPECT_EQ(g->SPLITK, 1);
  EXPECT_EQ(g->PERSIST, 0);
  c.set("SPLITK", int64_t(3));
  c.set("PERSIST", int64_t(1));
  g = tessera::readGpuGemmConfig(c);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->SPLITK, 3);
  EXPECT_EQ(g->PERSIST, 1);
  // A missing required knob and a mistyped optional one are errors naming them.
  c.values.erase("TN");
  g = tessera::readGpuGemmConfig(c);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().message.find("'TN'"), std::string::npos) << g.error().message;
  c.set("TN", int64_t(256));
  c.set("SPLITK", std::string("two"));
  g = tessera::readGpuGemmConfig(c);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().message.find("'SPLITK' must be an integer"), std::string::npos) << g.error().message;
}

TEST(KernelConfigs, AGpuAttentionConfigNeedsDsplitOnlyForFlashSimt) {
  // A config stored before the strategy knob existed is flash-simt, which needs DSPLIT.
  Config c = configOf({{"BQ", int64_t(64)}, {"BK", int64_t(32)}});
  auto a = tessera::readGpuAttentionConfig(c);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.error().message.find("'DSPLIT'"), std::string::npos) << a.error().message;
  c.set("DSPLIT", int64_t(2));
  a = tessera::readGpuAttentionConfig(c);
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(a->strategy, "flash-simt");
  EXPECT_EQ(a->DSPLIT, 2);
  // The tensor-core families: DSPLIT 1, STAGES 2, PIPE fa2, WAVES 0 (the plan's), MFMA 16x16x16 when absent.
  Config m = configOf({{"strategy", std::string("flash-mfma")}, {"BQ", int64_t(64)}, {"BK", int64_t(32)}});
  a = tessera::readGpuAttentionConfig(m);
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(a->DSPLIT, 1);
  EXPECT_EQ(a->STAGES, 2);
  EXPECT_EQ(a->PIPE, "fa2");
  EXPECT_EQ(a->WAVES, 0);
  EXPECT_EQ(a->MFMA, "16x16x16");
  EXPECT_EQ(a->wavesFor(16), 4) << "BQ 64 in groups of 16 rows: four waves";
  EXPECT_EQ(a->wavesFor(128), 1) << "at least one wave";
  m.set("MFMA", std::string("32x32x8"));
  m.set("WAVES", int64_t(2));
  m.set("STAGES", int64_t(1));
  a = tessera::readGpuAttentionConfig(m);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->MFMA, "32x32x8");
  EXPECT_EQ(a->WAVES, 2);
  EXPECT_EQ(a->STAGES, 1);
  m.set("PIPE", int64_t(3));
  EXPECT_FALSE(tessera::readGpuAttentionConfig(m).ok()) << "PIPE must be a string";
  m.values.erase("BQ");
  m.set("PIPE", std::string("fa3"));
  a = tessera::readGpuAttentionConfig(m);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.error().message.find("'BQ'"), std::string::npos) << a.error().message;
}

TEST(KernelConfigs, AGpuElementwiseConfigNeedsItsFourKnobs) {
  Config c = configOf({{"TPB", int64_t(256)}, {"VW", int64_t(4)}, {"EPT", int64_t(2)}, {"GRID", int64_t(0)}});
  auto e = tessera::readGpuElementwiseConfig(c);
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_EQ(e->TPB, 256);
  EXPECT_EQ(e->VW, 4);
  EXPECT_EQ(e->EPT, 2);
  EXPECT_EQ(e->GRID, 0);
  c.values.erase("GRID");
  e = tessera::readGpuElementwiseConfig(c);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("'GRID'"), std::string::npos) << e.error().message;
}

}  // namespace

namespace {

TEST(KernelConfigs, AHostGemmConfigNeedsWhatItsScheduleReads) {
  // kvec reads MR, NJ and KU only: a kvec config without MC is whole.
  Config k = configOf({{"schedule", std::string("kvec")}, {"MR", int64_t(4)}, {"NJ", int64_t(4)}, {"KU", int64_t(2)}});
  auto g = tessera::readHostGemmConfig(k);
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->NJ, 4);
  EXPECT_EQ(g->THREADS, 1);
  EXPECT_EQ(g->PACKB, 1);
  EXPECT_FALSE(g->blisFamily());
  // The blis family reads the cache blocks and ORDER: the same knobs are not enough there.
  k.set("schedule", std::string("blis"));
  g = tessera::readHostGemmConfig(k);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().message.find("'MC'"), std::string::npos) << g.error().message;
  Config b = configOf({{"schedule", std::string("bf16dot")}, {"MC", int64_t(96)}, {"NC", int64_t(512)}, {"KC", int64_t(256)},
                       {"MR", int64_t(8)}, {"NR", int64_t(32)}, {"KU", int64_t(4)}, {"ORDER", std::string("ji")},
                       {"THREADS", int64_t(2)}, {"PACKB", int64_t(0)}});
  g = tessera::readHostGemmConfig(b);
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_TRUE(g->blisFamily());
  EXPECT_EQ(g->ORDER, "ji");
  EXPECT_EQ(g->KC, 256);
  EXPECT_EQ(g->THREADS, 2);
  EXPECT_EQ(g->PACKB, 0);
  b.set("ORDER", int64_t(1));
  g = tessera::readHostGemmConfig(b);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().message.find("'ORDER' must be a string"), std::string::npos) << g.error().message;
  // nvec needs KC (its K block) and NV.
  Config n = configOf({{"schedule", std::string("nvec")}, {"MR", int64_t(2)}, {"NV", int64_t(4)}, {"KU", int64_t(1)}});
  g = tessera::readHostGemmConfig(n);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().message.find("'KC'"), std::string::npos) << g.error().message;
}

TEST(KernelConfigs, HostAttentionAndElementwiseConfigsDefaultTheirLaterKnobs) {
  Config a = configOf({{"BQ", int64_t(48)}, {"BK", int64_t(128)}, {"MR1", int64_t(8)}, {"NR1", int64_t(32)}, {"MR2", int64_t(8)},
                       {"NR2", int64_t(32)}, {"U1", int64_t(1)}, {"U2", int64_t(1)}, {"VW", int64_t(16)}});
  auto at = tessera::readHostAttentionConfig(a);
  ASSERT_TRUE(at.ok()) << at.error().message;
  EXPECT_EQ(at->BQ, 48);
  EXPECT_EQ(at->NR2, 32);
  EXPECT_EQ(at->THREADS, 1);
  a.values.erase("U2");
  at = tessera::readHostAttentionConfig(a);
  ASSERT_FALSE(at.ok());
  EXPECT_NE(at.error().message.find("'U2'"), std::string::npos) << at.error().message;
  // Configs stored before ROWS, THREADS and MATH mean one row, one thread, the precise forms.
  Config e = configOf({{"VW", int64_t(16)}, {"UNROLL", int64_t(4)}, {"NT", int64_t(0)}, {"CHUNK", int64_t(0)}});
  auto ew = tessera::readHostElementwiseConfig(e);
  ASSERT_TRUE(ew.ok()) << ew.error().message;
  EXPECT_EQ(ew->ROWS, 1);
  EXPECT_EQ(ew->THREADS, 1);
  EXPECT_EQ(ew->MATH, "precise");
  e.set("MATH", std::string("fast"));
  e.set("ROWS", int64_t(4));
  ew = tessera::readHostElementwiseConfig(e);
  ASSERT_TRUE(ew.ok());
  EXPECT_EQ(ew->MATH, "fast");
  EXPECT_EQ(ew->ROWS, 4);
}

}  // namespace
