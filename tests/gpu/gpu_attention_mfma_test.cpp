// Tests the matrix-core attention strategy for AMD CDNA (flash-mfma: FlashAttention-2 on MFMA)
// without a GPU: its mapped kernel on the mapped-kernel emulator against the reference (gfx90a
// and gfx942, f16/bf16, head dims 16-256, both MFMA shapes, ragged and unequal sequence lengths,
// one query row, causal, GQA/MQA, waves, query groups per wave and LDS buffers), the AMDGPU
// resource report of the defaults (no spills, no scratch, LDS within 64 KB), the space's choice,
// and controls that must fail: an MFMA whose accumulator comes back transposed, every LDS barrier
// removed, the cross-lane sum reduced over the wrong lanes.
#include <gtest/gtest.h>

#include <regex>

#include "emulator/gpu_emu.h"
#include "codegen/gpu.h"
#include "codegen/gpu_runner.h"
#include "gpu_check.h"
#include "ir/builders.h"
#include "ir/reference.h"
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

std::string strategyOf(const Config& c) { return std::get<std::string>(c.values.at("strategy")); }

// The mapped kernel of `k` compiled with `cfg`, run on `io` (seeded inputs, poisoned outputs);
// the emulation's report.
Expected<emu::Report> runMapped(const Kernel& k, const Config& cfg, const TargetDesc& t, KernelIO& io,
                                const codegen::MappedEmuOptions& o = {}) {
  TESSERA_ASSIGN(codegen::GpuBinary bin, codegen::compileGpu(k, cfg, t, {.wantBinary = false}));
  TESSERA_ASSIGN(auto mk, codegen::compileMapped(bin, t, o));
  auto report = std::make_shared<emu::Report>();
  auto runner = codegen::makeDeviceRunner(codegen::mappedEmulatedDevice(mk, t.name, report));
  auto ran = runner->run(bin, k, io.buffers(), 1);
  (void)ran;  // a launch the emulation faults fails; the report says why
  return *report;
}

}  // namespace

// On wave64 CDNA, f16/bf16 with a head dim that is a multiple of 16 up to 256 defaults to the
// matrix-core kernel; f32, odd head dims, RDNA (wave32, no MFMA) and NVIDIA do not offer it, and
// the 32x32x8 shape is offered only where the head dim is a multiple of 32.
TEST(GpuAttentionMfma, TheSpaceDefaultsToMatrixCoresOnCdna) {
  struct Case { const char* target; ScalarType t; int64_t d; const char* strategy; };
  for (const Case& c : std::vector<Case>{{"gfx942", ScalarType::F16, 64, "flash-mfma"},
                                          {"gfx90a", ScalarType::BF16, 128, "flash-mfma"},
                                          {"gfx942", ScalarType::BF16, 16, "flash-mfma"},
                                          {"gfx90a", ScalarType::F16, 256, "flash-mfma"},
                                          {"gfx942", ScalarType::F32, 64, "flash-simt"},
                                          {"gfx942", ScalarType::F16, 40, "flash-simt"},
                                          {"gfx1100", ScalarType::F16, 64, "flash-simt"},
                                          {"sm_80", ScalarType::F16, 64, "flash-mma"}}) {
    Kernel k = attn(2, 2, 100, 100, c.d, false, c.t);
    const TargetDesc& t = testutil::gpuTarget(c.target);
    auto cfg = testutil::gpuConfig(k, t);
    ASSERT_TRUE(cfg.ok()) << cfg.error().str();
    EXPECT_EQ(strategyOf(*cfg), c.strategy) << c.target << " " << k.name;
    auto space = search::makeSpace(k, t);
    ASSERT_TRUE(space.ok()) << space.error().str();
    const Knob* shape = space->find("MFMA");
    EXPECT_EQ(shape != nullptr, std::string(c.strategy) == "flash-mfma") << c.target << " " << k.name;
    if (shape) {
      EXPECT_EQ(shape->domain.size(), c.d % 32 == 0 ? 2u : 1u) << k.name;
    }
  }
}

TEST(GpuAttentionMfma, MappedKernelMatchesTheReference) {
  struct Case { int64_t h, hkv, sq, skv, d; bool causal; ScalarType t; const char* target; };
  for (const Case& c : std::vector<Case>{
           {2, 2, 64, 64, 64, false, ScalarType::F16, "gfx942"},     // one block
           {4, 1, 77, 130, 32, true, ScalarType::BF16, "gfx942"},    // MQA, ragged, Skv > Sq, causal
           {2, 1, 1, 200, 128, false, ScalarType::F16, "gfx90a"},    // one query row (decode)
           {3, 3, 130, 45, 16, false, ScalarType::BF16, "gfx90a"},   // Sq > Skv
           {4, 2, 100, 100, 128, true, ScalarType::BF16, "gfx942"},  // GQA, causal, D128
           {2, 1, 40, 40, 256, true, ScalarType::F16, "gfx942"}}) {  // the largest head dim
    Kernel k = attn(c.h, c.hkv, c.sq, c.skv, c.d, c.causal, c.t);
    const TargetDesc& t = testutil::gpuTarget(c.target);
    auto cfg = testutil::gpuConfig(k, t);
    ASSERT_TRUE(cfg.ok()) << cfg.error().str();
    ASSERT_EQ(strategyOf(*cfg), "flash-mfma") << k.name;
    auto r = testutil::checkMappedEmulated(k, t, *cfg);
    EXPECT_TRUE(r.correct) << k.name << " on " << c.target << ": " << r.error;
  }
}

// Both MFMA shapes, 1-4 waves, 1-4 query groups per wave, every key block and both LDS buffer
// counts at head dim 64 (f16 and bf16, causal, ragged, GQA, batch 2).
TEST(GpuAttentionMfma, ShapesWavesGroupsAndBuffers) {
  const TargetDesc& t = testutil::gpuTarget("gfx942");
  struct Cfg { const char* shape; int64_t bq, waves, bk, stages; };
  int ran = 0;
  for (ScalarType dt : {ScalarType::F16, ScalarType::BF16}) {
    Kernel k = attn(2, 1, 70, 83, 64, true, dt, 2);
    for (const Cfg& c : std::vector<Cfg>{{"16x16x16", 16, 1, 16, 1},
                                         {"16x16x16", 32, 1, 32, 2},   // two groups per wave
                                         {"16x16x16", 64, 1, 64, 1},   // four groups per wave
                                         {"16x16x16", 64, 4, 128, 1},
                                         {"16x16x16", 128, 4, 32, 2},
                                         {"16x16x16", 128, 8, 64, 2},
                                         {"32x32x8", 32, 1, 32, 1},
                                         {"32x32x8", 64, 2, 64, 2},
                                         {"32x32x8", 64, 1, 32, 2},    // two groups of 32
                                         {"32x32x8", 128, 4, 64, 1}}) {
      Config o;
      o.set("strategy", std::string("flash-mfma"));
      o.set("MFMA", std::string(c.shape));
      o.set("BQ", c.bq);
      o.set("WAVES", c.waves);
      o.set("BK", c.bk);
      o.set("STAGES", c.stages);
      auto cfg = testutil::gpuConfig(k, t, o);
      ASSERT_TRUE(cfg.ok()) << o.str() << ": " << cfg.error().str();
      ++ran;
      auto r = testutil::checkMappedEmulated(k, t, *cfg);
      EXPECT_TRUE(r.correct) << cfg->str() << " " << k.name << ": " << r.error;
    }
  }
  EXPECT_EQ(ran, 20);
}

// The space refuses what the kernel cannot do, with the reason.
TEST(GpuAttentionMfma, IllegalConfigsAreRefusedWithTheReason) {
  const TargetDesc& t = testutil::gpuTarget("gfx942");
  Kernel k = attn(2, 2, 100, 100, 48, false, ScalarType::F16);
  auto c32 = testutil::gpuConfig(k, t, *Config::parseAssignments("MFMA=32x32x8"));
  EXPECT_FALSE(c32.ok());  // 48 is not a multiple of 32: outside the knob's domain
  Kernel k256 = attn(2, 2, 100, 100, 256, false, ScalarType::F16);
  auto big = testutil::gpuConfig(k256, t, *Config::parseAssignments("BK=128,STAGES=2"));
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.error().str().find("LDS"), std::string::npos) << big.error().str();
  auto groups = testutil::gpuConfig(k, t, *Config::parseAssignments("BQ=128,WAVES=1"));
  ASSERT_FALSE(groups.ok());
  EXPECT_NE(groups.error().str().find("query groups"), std::string::npos) << groups.error().str();
  Kernel nv = attn(2, 2, 100, 100, 64, false, ScalarType::F16);
  auto onNvidia = codegen::checkGpuConfig(nv, *Config::parseAssignments("strategy=flash-mfma,BQ=64,BK=64"),
                                          testutil::gpuTarget("sm_80"));
  ASSERT_FALSE(onNvidia.ok());
  EXPECT_NE(onNvidia.error().str().find("AMD"), std::string::npos) << onNvidia.error().str();
}

// The defaults the AMDGPU backend compiles without spills or scratch, within the architectural
// VGPRs and the 64 KB of LDS, for both CDNA chips and the head dims of the issue's rows.
TEST(GpuAttentionMfma, DefaultsDoNotSpill) {
  for (const char* tn : {"gfx90a", "gfx942"})
    for (int64_t d : {64, 128, 256})
      for (bool causal : {false, true}) {
        const TargetDesc& t = testutil::gpuTarget(tn);
        Kernel k = attn(16, 4, 4096, 4096, d, causal, ScalarType::F16);
        auto b = testutil::compileFor(k, t);
        ASSERT_TRUE(b.ok()) << b.error().str();
        EXPECT_EQ(b->strategy, "flash-mfma");
        const auto& r = b->resources;
        EXPECT_FALSE(r.spills()) << tn << " d" << d << ": " << r.summary();
        EXPECT_EQ(r.scratchBytes, 0) << tn << " d" << d << ": " << r.summary();
        EXPECT_GT(r.vgprs, 0) << r.summary();
        EXPECT_LE(r.vgprs, t.operandRegsPerThread) << r.summary();
        EXPECT_GT(r.sharedBytes, 0) << r.summary();
        EXPECT_LE(r.sharedBytes, t.smemPerBlock) << r.summary();
        EXPECT_TRUE(r.problems.empty()) << r.summary();
        EXPECT_GE(testutil::countOccurrences(b->assembly, "v_mfma_f32_16x16x16"), 2) << tn << " d" << d;
      }
}

// An MFMA whose accumulator comes back transposed (the layout the kernel relies on to keep P in
// registers is then wrong): the comparison must fail, for both shapes and both dtypes.
TEST(GpuAttentionMfmaControls, ATransposedMfmaAccumulatorFailsTheCheck) {
  const TargetDesc& t = testutil::gpuTarget("gfx942");
  for (ScalarType dt : {ScalarType::F16, ScalarType::BF16})
    for (const char* shape : {"16x16x16", "32x32x8"}) {
      Kernel k = attn(2, 2, 64, 64, 64, false, dt);
      Config o;
      o.set("MFMA", std::string(shape));
      o.set("BQ", int64_t(64));
      o.set("WAVES", int64_t(2));
      auto cfg = testutil::gpuConfig(k, t, o);
      ASSERT_TRUE(cfg.ok()) << cfg.error().str();
      // The same run without the fault passes (the control's baseline).
      KernelIO good(k, 3);
      good.poisonOutputs();
      auto rep0 = runMapped(k, *cfg, t, good);
      ASSERT_TRUE(rep0.ok()) << rep0.error().str();
      auto cmp0 = good.check();
      ASSERT_TRUE(cmp0.ok()) << cmp0.error().str();
      EXPECT_TRUE(cmp0->ok) << shape << " without the fault";
      codegen::MappedEmuOptions o2;
      o2.run.fault = emu::HwFault::MfmaTransposeD;
      KernelIO io(k, 3);
      io.poisonOutputs();
      auto rep = runMapped(k, *cfg, t, io, o2);
      ASSERT_TRUE(rep.ok()) << rep.error().str();
      auto cmp = io.check();
      ASSERT_TRUE(cmp.ok()) << cmp.error().str();
      EXPECT_FALSE(cmp->ok) << shape << ": a transposed MFMA accumulator passed (max rel err " << cmp->maxRelErr << ")";
    }
}

TEST(GpuAttentionMfmaControls, ARemovedBarrierOrAWrongLaneReductionIsCaught) {
  Kernel k = attn(1, 1, 128, 128, 64, false, ScalarType::F16);
  const TargetDesc& t = testutil::gpuTarget("gfx942");
  for (int64_t stages : {1, 2}) {
    Config o;
    o.set("STAGES", stages);
    auto cfg = testutil::gpuConfig(k, t, o);
    ASSERT_TRUE(cfg.ok()) << cfg.error().str();
    // Every LDS barrier gone: a wave reads K/V another wave has not stored yet, or overwrites a
    // buffer still being read.
    codegen::MappedEmuOptions noBarrier;
    noBarrier.deviceHook = [](const std::string& s) {
      return std::regex_replace(s, std::regex(R"(\n\s*rocdl\.(s\.)?barrier\n)"), "\n");
    };
    KernelIO io(k, 5);
    io.poisonOutputs();
    auto rep = runMapped(k, *cfg, t, io, noBarrier);
    ASSERT_TRUE(rep.ok()) << rep.error().str();
    EXPECT_FALSE(rep->ok) << "STAGES=" << stages << ": no barrier, yet no race reported";
  }
  // ds_swizzle's xor 16 made xor 8: a query's max and sum then mix in other queries' lanes.
  auto cfg = testutil::gpuConfig(k, t);
  ASSERT_TRUE(cfg.ok()) << cfg.error().str();
  codegen::MappedEmuOptions wrongLanes;
  int replaced = 0;
  wrongLanes.deviceHook = [&replaced](const std::string& s) {
    const std::string from = "llvm.mlir.constant(" + std::to_string(0x1f | (16 << 10)) + " : i32)";
    const std::string to = "llvm.mlir.constant(" + std::to_string(0x1f | (8 << 10)) + " : i32)";
    std::string out = s;
    for (size_t at = out.find(from); at != std::string::npos; at = out.find(from, at + to.size())) {
      out.replace(at, from.size(), to);
      ++replaced;
    }
    return out;
  };
  KernelIO io(k, 5);
  io.poisonOutputs();
  auto rep = runMapped(k, *cfg, t, io, wrongLanes);
  ASSERT_TRUE(rep.ok()) << rep.error().str();
  EXPECT_GT(replaced, 0) << "no ds_swizzle offset found in the ROCDL text";
  auto cmp = io.check();
  ASSERT_TRUE(cmp.ok()) << cmp.error().str();
  EXPECT_FALSE(cmp->ok) << "a reduction over the wrong lanes passed";
}
