// Tests the tensor-core attention strategy (flash-mma: FlashAttention-2 on mma.sync) without a GPU:
// its mapped kernel on the mapped-kernel emulator against the reference (dtypes, head dims 16-256,
// ragged and unequal sequence lengths, one query row, causal, GQA/MQA, every stage count), the
// ptxas resource report of the defaults (no spills, dynamic shared memory past 48 KB where the
// head dim needs it), the space's choice of strategy, and controls that must fail: a causal kernel
// run without its mask, a removed barrier, a cp.async wait one group short.
#include <gtest/gtest.h>

#include <regex>

#include "emulator/gpu_emu.h"
#include "codegen/gpu.h"
#include "codegen/gpu_runner.h"
#include "gpu_check.h"
#include "ir/builders.h"
#include "ir/reference.h"
#include "measure/estimate.h"
#include "search/space.h"
#include "targets/kernel_io.h"

using namespace tessera;
using namespace tessera::ir;

namespace {

Kernel attn(int64_t h, int64_t hkv, int64_t sq, int64_t skv, int64_t d, bool causal, ScalarType t, int64_t b = 1) {
  return testutil::attentionKernel(h, hkv, sq, skv, d, causal, t, b);
}

std::string strategyOf(const Config& c) { return std::get<std::string>(c.values.at("strategy")); }

}  // namespace

// Where mma.sync takes the type and the head dim is a multiple of 16 up to 256, the space's default
// is the tensor-core kernel; f32, odd head dims and RDNA keep flash-simt (CDNA: flash-mfma, its own test).
TEST(GpuAttentionMma, TheSpaceDefaultsToTensorCoresWhereTheyApply) {
  struct Case { const char* target; ScalarType t; int64_t d; bool mma; };
  for (const Case& c : std::vector<Case>{{"sm_80", ScalarType::F16, 64, true},
                                          {"sm_86", ScalarType::BF16, 128, true},
                                          {"sm_89", ScalarType::F16, 256, true},
                                          {"sm_90", ScalarType::BF16, 16, true},
                                          {"sm_80", ScalarType::F32, 64, false},
                                          {"sm_80", ScalarType::F16, 40, false},
                                          {"gfx1100", ScalarType::F16, 64, false}}) {
    Kernel k = attn(2, 2, 100, 100, c.d, false, c.t);
    auto cfg = testutil::gpuConfig(k, testutil::gpuTarget(c.target));
    ASSERT_TRUE(cfg.ok()) << cfg.error().str();
    EXPECT_EQ(strategyOf(*cfg), c.mma ? "flash-mma" : "flash-simt") << c.target << " " << k.name;
  }
}

TEST(GpuAttentionMma, MappedKernelMatchesTheReference) {
  struct Case { int64_t h, hkv, sq, skv, d; bool causal; ScalarType t; const char* target; };
  for (const Case& c : std::vector<Case>{
           {2, 2, 64, 64, 64, false, ScalarType::F16, "sm_80"},     // the FA2 shape
           {4, 1, 77, 130, 32, true, ScalarType::BF16, "sm_86"},    // MQA, ragged, Skv > Sq, causal
           {2, 1, 1, 200, 128, false, ScalarType::F16, "sm_90"},    // one query row (decode)
           {3, 3, 130, 45, 16, false, ScalarType::BF16, "sm_89"},   // Sq > Skv
           {2, 1, 40, 40, 256, true, ScalarType::F16, "sm_80"}}) {  // the largest head dim
    Kernel k = attn(c.h, c.hkv, c.sq, c.skv, c.d, c.causal, c.t);
    const TargetDesc& t = testutil::gpuTarget(c.target);
    auto cfg = testutil::gpuConfig(k, t);
    ASSERT_TRUE(cfg.ok()) << cfg.error().str();
    ASSERT_EQ(strategyOf(*cfg), "flash-mma") << k.name;
    auto r = testutil::checkMappedEmulated(k, t, *cfg);
    EXPECT_TRUE(r.correct) << k.name << " on " << c.target << ": " << r.error;
  }
}

// Every query block, key block and stage count the space offers at head dim 64 (f16, causal,
// ragged, batch 2) that it accepts.
TEST(GpuAttentionMma, EveryBlockShapeAndStageCount) {
  Kernel k = attn(2, 1, 70, 83, 64, true, ScalarType::F16);
  const TargetDesc& t = testutil::gpuTarget("sm_80");
  int ran = 0;
  for (int64_t bq : {16, 32, 64, 128})
    for (int64_t bk : {16, 64, 128})
      for (int64_t st : {1, 2}) {
        Config c;
        c.set("strategy", std::string("flash-mma"));
        c.set("BQ", bq);
        c.set("BK", bk);
        c.set("STAGES", st);
        auto cfg = testutil::gpuConfig(k, t, c);
        if (!cfg.ok()) continue;  // e.g. shared memory or registers for BQ=128, BK=128
        ++ran;
        auto r = testutil::checkMappedEmulated(k, t, *cfg);
        EXPECT_TRUE(r.correct) << cfg->str() << ": " << r.error;
      }
  EXPECT_GE(ran, 12);
}

// The defaults ptxas compiles without spills, and head dims whose K/V ring needs more than 48 KB
// ask for it as dynamic shared memory (within the opt-in limit).
TEST(GpuAttentionMma, DefaultsDoNotSpillAndSizeTheirSharedMemory) {
  for (const char* tn : {"sm_80", "sm_90"})
    for (int64_t d : {64, 128, 256}) {
      const TargetDesc& t = testutil::gpuTarget(tn);
      Kernel k = attn(16, 4, 4096, 4096, d, true, ScalarType::F16);
      auto b = testutil::compileFor(k, t);
      ASSERT_TRUE(b.ok()) << b.error().str();
      if (b->binary.empty()) GTEST_SKIP() << "no ptxas: " << b->resources.summary();
      EXPECT_FALSE(b->resources.spills()) << tn << " d" << d << ": " << b->resources.summary();
      EXPECT_GT(b->launch.dynamicSharedBytes, 0) << tn << " d" << d;
      EXPECT_LE(b->launch.dynamicSharedBytes, std::max(t.smemPerBlock, t.smemPerBlockOptIn)) << tn << " d" << d;
      if (d >= 128) EXPECT_GT(b->launch.dynamicSharedBytes, 48 * 1024) << tn << " d" << d;
    }
}

// The analytic model's registers of flash-mma (measure/estimate.cpp, used without the compiler's
// report: a tune's prior) follow ptxas's: within 30 of its count (its spills counted in), and a
// config ptxas spills, which Tessera refuses, is one the model takes for unlaunchable. The causal
// D128 BK128 kernels spill on both chips (the mask keeps S's element indices live), the non-causal
// ones fit (the control: a model blind to the mask would take both alike).
TEST(GpuAttentionMma, TheModelsRegistersFollowTheCompilers) {
  int spilled = 0, fitted = 0;
  for (const char* tn : {"sm_80", "sm_90"})
    for (bool causal : {false, true})
      for (int64_t bk : {32, 64, 128})
        for (int64_t bq : {16, 64}) {
          const TargetDesc& t = testutil::gpuTarget(tn);
          Kernel k = attn(16, 16, 1024, 1024, 128, causal, ScalarType::F16);
          auto space = search::makeSpace(k, t);
          ASSERT_TRUE(space.ok());
          Config c = space->defaults();
          c.set("strategy", std::string("flash-mma"));
          c.set("BK", bk);
          c.set("BQ", bq);
          c.set("STAGES", int64_t(1));
          c.set("DSPLIT", int64_t(1));
          const std::string what = std::string(tn) + (causal ? " causal" : "") + " BK" + std::to_string(bk) + " BQ" + std::to_string(bq);
          auto b = testutil::compileFor(k, t, c);
          ASSERT_TRUE(b.ok()) << what << ": " << b.error().str();
          if (b->binary.empty() && !b->resources.spills()) GTEST_SKIP() << "no ptxas: " << b->resources.summary();
          auto e = measure::estimateKernel(k, c, t);
          ASSERT_TRUE(e.ok()) << what;
          const int64_t compiler = b->resources.registers + b->resources.spillStoreBytes / 4;
          EXPECT_NEAR(double(e->workload.regsPerThread), double(compiler), 30.0) << what;
          EXPECT_EQ(e->workload.spills, b->resources.spills()) << what << ": " << b->resources.summary();
          EXPECT_EQ(e->model.fits, !b->resources.spills()) << what;
          (b->resources.spills() ? spilled : fitted)++;
        }
  EXPECT_GT(spilled, 0);  // the check saw both kinds
  EXPECT_GT(fitted, 0);
}

// A causal kernel's outputs replaced by the same shape's non-causal kernel's (each row also
// averages the keys after it): the comparison must fail, at every dtype's tolerance.
TEST(GpuAttentionMmaControls, AMissingCausalMaskFailsTheCheck) {
  for (ScalarType dt : {ScalarType::F16, ScalarType::BF16}) {
    Kernel causal = attn(2, 2, 96, 96, 64, true, dt), full = attn(2, 2, 96, 96, 64, false, dt);
    const TargetDesc& t = testutil::gpuTarget("sm_80");
    auto cfg = testutil::gpuConfig(full, t);
    ASSERT_TRUE(cfg.ok()) << cfg.error().str();
    KernelIO io(causal, 3);
    io.poisonOutputs();
    auto rep = testutil::runMapped(full, *cfg, t, io);
    ASSERT_TRUE(rep.ok()) << rep.error().str();
    EXPECT_TRUE(rep->ok);
    auto cmp = io.check();  // against the causal reference
    ASSERT_TRUE(cmp.ok()) << cmp.error().str();
    EXPECT_FALSE(cmp->ok) << "an unmasked causal attention passed (max rel err " << cmp->maxRelErr << ")";
  }
}

TEST(GpuAttentionMmaControls, ARemovedBarrierOrAShortWaitIsReported) {
  Kernel k = attn(1, 1, 128, 128, 64, false, ScalarType::F16);
  const TargetDesc& t = testutil::gpuTarget("sm_80");
  auto cfg = testutil::gpuConfig(k, t, *Config::parseAssignments("STAGES=2"));
  ASSERT_TRUE(cfg.ok()) << cfg.error().str();
  // Every barrier gone: a warp reads a K/V tile another warp's copy has not landed, or overwrites one
  // still being read.
  codegen::MappedEmuOptions noBarrier;
  noBarrier.deviceHook = [](const std::string& s) {
    return std::regex_replace(s, std::regex(R"(\n\s*nvvm\.barrier0\n)"), "\n");
  };
  KernelIO io(k, 5);
  io.poisonOutputs();
  auto rep = testutil::runMapped(k, *cfg, t, io, noBarrier);
  ASSERT_TRUE(rep.ok()) << rep.error().str();
  EXPECT_FALSE(rep->ok) << "no barrier, yet no race reported";
  // The ring's waits one group short: a tile is read while its copy is in flight.
  codegen::MappedEmuOptions shortWait;
  shortWait.deviceHook = [](const std::string& s) {
    std::string out;
    std::regex wait(R"(nvvm\.cp\.async\.wait\.group (\d+))");
    size_t last = 0;
    for (auto it = std::sregex_iterator(s.begin(), s.end(), wait); it != std::sregex_iterator(); ++it) {
      out += s.substr(last, size_t(it->position(0)) - last) + "nvvm.cp.async.wait.group " +
             std::to_string(std::stoi((*it)[1].str()) + 1);
      last = size_t(it->position(0) + it->length(0));
    }
    return out + s.substr(last);
  };
  KernelIO io2(k, 5);
  io2.poisonOutputs();
  auto rep2 = testutil::runMapped(k, *cfg, t, io2, shortWait);
  ASSERT_TRUE(rep2.ok()) << rep2.error().str();
  EXPECT_FALSE(rep2->ok) << "waits one group short, yet no async-copy misuse reported";
}
