// Tests the GPU FlashAttention strategy: CPU emulation of its pre-mapping IR against the reference
// (dtypes, ragged and unequal sequence lengths, causal, GQA, batch, odd head_dims, knob extremes)
// and PTX/cubin + hsaco with resource reports.
#include <gtest/gtest.h>

#include "gpu_check.h"
#include "ir/builders.h"
#include "search/space.h"

using namespace tessera;
using namespace tessera::ir;

namespace {

Kernel attn(int64_t b, int64_t h, int64_t hkv, int64_t sq, int64_t skv, int64_t d, bool causal, ScalarType t) {
  AttentionSpec s;
  s.batch = b; s.heads = h; s.heads_kv = hkv; s.seq_q = sq; s.seq_kv = skv; s.head_dim = d; s.causal = causal; s.dtype = t;
  auto k = buildAttention(s);
  EXPECT_TRUE(k.ok()) << (k.ok() ? "" : k.error().str());
  return *k;
}

}  // namespace

TEST(GpuAttention, EmulatedShapesAndDtypes) {
  struct Case { int64_t b, h, hkv, sq, skv, d; bool causal; ScalarType t; const char* target; };
  for (const Case& c : std::vector<Case>{
           {1, 2, 2, 64, 64, 64, false, ScalarType::F32, "sm_80"},
           {2, 4, 2, 37, 53, 32, false, ScalarType::F16, "sm_90"},     // GQA, ragged, Sq != Skv
           {1, 3, 1, 45, 45, 40, true, ScalarType::BF16, "gfx942"},    // causal, MQA
           {1, 2, 2, 20, 77, 16, true, ScalarType::F32, "gfx90a"},     // causal with Skv > Sq
           {1, 1, 1, 9, 9, 6, false, ScalarType::F32, "sm_80"}}) {     // head_dim not a multiple of 4
    Kernel k = attn(c.b, c.h, c.hkv, c.sq, c.skv, c.d, c.causal, c.t);
    auto r = testutil::checkEmulated(k, testutil::gpuTarget(c.target));
    EXPECT_TRUE(r.correct) << k.name << " on " << c.target << ": " << r.error;
  }
}

TEST(GpuAttention, EmulatedExtremesOfEveryKnob) {
  for (auto [tn, dt] : std::vector<std::pair<const char*, ScalarType>>{{"sm_80", ScalarType::F16}, {"gfx942", ScalarType::F32}}) {
    Kernel k = attn(1, 2, 1, 70, 70, 64, true, dt);
    const TargetDesc& t = testutil::gpuTarget(tn);
    auto space = search::makeSpace(k, t);
    ASSERT_TRUE(space.ok()) << space.error().str();
    auto configs = testutil::knobExtremes(*space);
    EXPECT_GE(configs.size(), 3u) << tn;
    for (const Config& c : configs) {
      auto r = testutil::checkEmulated(k, t, c);
      EXPECT_TRUE(r.correct) << tn << " " << c.str() << ": " << r.error;
    }
  }
}

TEST(GpuAttention, IllegalConfigsAreRejectedBeforeCompiling) {
  Kernel k = attn(1, 2, 2, 128, 128, 128, false, ScalarType::F32);
  for (auto [tn, c] : std::vector<std::pair<const char*, const char*>>{
           {"sm_80", "BQ=128,BK=64,DSPLIT=1"},   // K/V tiles + accumulators: > 48 KB
           {"sm_80", "BQ=128,BK=32,DSPLIT=16"},  // 2048 threads
           {"gfx942", "BQ=16,BK=32,DSPLIT=1"},   // 16 threads: not a whole wave64
           {"sm_80", "BQ=64,BK=32,DSPLIT=3"}}) { // head_dim/4 = 32 chunks do not split 3 ways
    auto b = codegen::compileGpu(k, *Config::parseAssignments(c), testutil::gpuTarget(tn));
    ASSERT_FALSE(b.ok()) << tn << " " << c;
    EXPECT_EQ(b.error().code, ErrorCode::InvalidConfig) << b.error().str();
  }
}

TEST(GpuAttention, NegativeControlBrokenKvCopyIsCaught) {
  // The K/V copy phase (the second 1-D thread forall) over half the threads: half the staged
  // chunks keep their NaN fill.
  codegen::EmulateOptions o;
  o.preHook = [](const std::string& pre) { return testutil::breakNthForall(pre, 1, 1); };
  auto r = testutil::checkEmulated(attn(1, 1, 1, 64, 64, 32, false, ScalarType::F32), testutil::gpuTarget("sm_80"), {}, 1, o);
  EXPECT_TRUE(r.compiled) << r.error;
  EXPECT_FALSE(r.correct) << "a broken K/V copy must not pass";
}

TEST(GpuAttention, HeadDimSplitAndLargeHeadDim) {
  // DSPLIT > 1 exchanges partial scores through shared memory.
  for (auto [tn, c] : std::vector<std::pair<const char*, const char*>>{{"sm_90", "strategy=flash-simt,STAGES=1,BQ=32,BK=16,DSPLIT=2"},
                                                                     {"gfx90a", "strategy=flash-simt,STAGES=1,BQ=16,BK=16,DSPLIT=4"}}) {
    auto r = testutil::checkEmulated(attn(1, 2, 1, 50, 61, 128, true, ScalarType::F16), testutil::gpuTarget(tn),
                                     *Config::parseAssignments(c));
    EXPECT_TRUE(r.correct) << tn << " " << c << ": " << r.error;
  }
}
