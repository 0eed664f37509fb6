// Tests sm_90a's wgmma attention (strategy=flash-wgmma, codegen/gpu_attention_wgmma.cpp) without a
// GPU: the mapped kernel on the mapped-kernel emulator against the reference (f16/bf16, head_dim
// 64..256, causal, GQA, Sq = 1, Sq > Skv, ragged lengths, one and two warpgroups, one and two
// stages), ptxas's resource report (no spills), where the space offers it, and negative controls
// (a missing warpgroup barrier before the P·V wgmma, every block barrier removed).
#include <gtest/gtest.h>

#include <regex>

#include "codegen/gpu.h"
#include "gpu_check.h"
#include "ir/builders.h"
#include "search/space.h"
#include "targets/kernel_io.h"

using namespace tessera;
using namespace tessera::ir;

namespace {

Kernel attn(int64_t h, int64_t hkv, int64_t sq, int64_t skv, int64_t d, bool causal, ScalarType t, int64_t b = 1) {
  AttentionSpec s;
  s.batch = b; s.heads = h; s.heads_kv = hkv; s.seq_q = sq; s.seq_kv = skv; s.head_dim = d; s.causal = causal; s.dtype = t;
  auto k = buildAttention(s);
  EXPECT_TRUE(k.ok()) << (k.ok() ? "" : k.error().str());
  return *k;
}

Config wgmmaCfg(int64_t bq, int64_t bk, int64_t stages) {
  Config c;
  c.set("strategy", std::string("flash-wgmma"));
  c.set("BQ", bq);
  c.set("BK", bk);
  c.set("STAGES", stages);
  c.set("DSPLIT", int64_t(1));
  return c;
}

}  // namespace

TEST(GpuAttentionWgmma, TheSpaceOffersItOnSm90aAtWholePanels) {
  auto offers = [](const char* target, int64_t d, ScalarType t) {
    auto space = search::makeSpace(attn(2, 2, 256, 256, d, false, t), testutil::gpuTarget(target));
    EXPECT_TRUE(space.ok());
    for (const auto& knob : space->knobs)
      if (knob.name == "strategy")
        for (const auto& v : knob.domain)
          if (std::get<std::string>(v) == "flash-wgmma") return true;
    return false;
  };
  EXPECT_TRUE(offers("sm_90a", 64, ScalarType::F16));
  EXPECT_TRUE(offers("sm_90a", 128, ScalarType::BF16));
  EXPECT_FALSE(offers("sm_90a", 96, ScalarType::F16));  // not whole 128-byte panels
  EXPECT_FALSE(offers("sm_90a", 64, ScalarType::F32));
  EXPECT_FALSE(offers("sm_90", 64, ScalarType::F16));   // no wgmma without the arch-specific target
  EXPECT_FALSE(offers("sm_80", 64, ScalarType::F16));
}

TEST(GpuAttentionWgmma, MappedKernelMatchesTheReference) {
  const TargetDesc& t = testutil::gpuTarget("sm_90a");
  struct Case {
    Kernel k;
    Config cfg;
  };
  std::vector<Case> cases = {
      {attn(2, 2, 100, 100, 64, false, ScalarType::F16), wgmmaCfg(64, 64, 2)},
      {attn(4, 2, 150, 200, 128, true, ScalarType::BF16), wgmmaCfg(128, 64, 2)},  // GQA, Skv > Sq causal
      {attn(2, 1, 1, 130, 64, true, ScalarType::F16), wgmmaCfg(64, 128, 1)},      // one query row
      {attn(1, 1, 200, 70, 256, false, ScalarType::F16, 2), wgmmaCfg(64, 64, 2)}, // Sq > Skv, D 256, batch 2
      {attn(2, 2, 130, 130, 192, true, ScalarType::BF16), wgmmaCfg(128, 64, 1)},
  };
  for (const auto& c : cases) {
    auto cfg = testutil::gpuConfig(c.k, t, c.cfg);
    ASSERT_TRUE(cfg.ok()) << c.k.name << ": " << cfg.error().str();
    auto r = testutil::checkMappedEmulated(c.k, t, *cfg);
    EXPECT_TRUE(r.correct) << c.k.name << " " << cfg->str() << ": " << r.error;
  }
}

TEST(GpuAttentionWgmma, AssemblesWithoutSpills) {
  const TargetDesc& t = testutil::gpuTarget("sm_90a");
  for (int64_t d : {64, 128, 256})
    for (auto [bq, bk] : {std::pair<int64_t, int64_t>{64, 64}, {128, 64}, {64, 128}}) {
      Kernel k = attn(16, 16, 4096, 4096, d, true, ScalarType::F16);
      auto cfg = testutil::gpuConfig(k, t, wgmmaCfg(bq, bk, 2));
      if (!cfg.ok()) continue;  // shared memory: refused with a reason, checked by the space
      auto b = codegen::compileGpu(k, *cfg, t);
      ASSERT_TRUE(b.ok()) << b.error().str();
      EXPECT_NE(b->assembly.find("wgmma.mma_async.sync.aligned.m64n" + std::to_string(bk) + "k16"), std::string::npos);
      EXPECT_NE(b->assembly.find("wgmma.mma_async.sync.aligned.m64n" + std::to_string(d) + "k16"), std::string::npos);
      EXPECT_NE(b->assembly.find("fence.proxy.async.shared::cta"), std::string::npos);
      if (b->binary.empty()) continue;  // no ptxas here
      EXPECT_TRUE(b->resources.ok) << b->resources.summary();
      EXPECT_FALSE(b->resources.spills()) << d << " " << bq << "x" << bk << ": " << b->resources.summary();
    }
}

TEST(GpuAttentionWgmmaControls, AMissingBarrierIsReported) {
  const TargetDesc& t = testutil::gpuTarget("sm_90a");
  Kernel k = attn(1, 1, 128, 192, 64, false, ScalarType::F16);
  auto cfg = testutil::gpuConfig(k, t, wgmmaCfg(128, 64, 2));
  ASSERT_TRUE(cfg.ok()) << cfg.error().str();
  {
    KernelIO io(k, 5);
    io.poisonOutputs();
    auto rep = testutil::runMapped(k, *cfg, t, io);
    ASSERT_TRUE(rep.ok()) << rep.error().str();
    EXPECT_TRUE(rep->ok) << (rep->errors.empty() ? "" : rep->errors[0]);
    auto cmp = io.check();
    ASSERT_TRUE(cmp.ok());
    EXPECT_TRUE(cmp->ok) << "the unbroken kernel must pass for the controls to mean anything";
  }
  // The warpgroup's named barrier between the P stores and the P·V wgmma: a lane's wgmma reads the
  // P its quad-mates stored, unordered.
  codegen::MappedEmuOptions noNamed;
  noNamed.deviceHook = [](const std::string& s) {
    EXPECT_NE(s.find("nvvm.barrier id"), std::string::npos);
    return std::regex_replace(s, std::regex(R"(\n\s*nvvm\.barrier id = [^\n]*\n)"), "\n");
  };
  KernelIO io(k, 5);
  io.poisonOutputs();
  auto rep = testutil::runMapped(k, *cfg, t, io, noNamed);
  ASSERT_TRUE(rep.ok()) << rep.error().str();
  EXPECT_FALSE(rep->ok) << "P read by the wgmma without the warpgroup barrier, yet no race reported";
  // Every block barrier gone: a stage is refilled while the other warpgroup's wgmma reads it.
  codegen::MappedEmuOptions noBarrier;
  noBarrier.deviceHook = [](const std::string& s) {
    return std::regex_replace(s, std::regex(R"(\n\s*nvvm\.barrier0\n)"), "\n");
  };
  KernelIO io2(k, 5);
  io2.poisonOutputs();
  auto rep2 = testutil::runMapped(k, *cfg, t, io2, noBarrier);
  ASSERT_TRUE(rep2.ok()) << rep2.error().str();
  EXPECT_FALSE(rep2->ok) << "no block barrier, yet no race reported";
}
