// Tests the GPU GEMM strategies (simt, mma.sync, mfma) through their CPU emulation (the
// pre-mapping IR behind the padding host wrapper, @map and the target lowering run as well) on
// odd shapes, every dtype, transposes, batch, epilogues and the extremes of every knob; plus
// illegal configs, spilling configs and the negative control of a broken tile copy.
#include <gtest/gtest.h>

#include "gpu_check.h"
#include "ir/builders.h"
#include "search/space.h"

using namespace tessera;
using namespace tessera::ir;

namespace {

Kernel gemm(int64_t m, int64_t n, int64_t k, ScalarType t = ScalarType::F32) {
  GemmSpec s;
  s.m = m; s.n = n; s.k = k; s.dtype = t;
  return *buildGemm(s);
}

Config cfg(const std::string& a) { return *Config::parseAssignments(a); }

// Small tiles keep the fully unrolled warp tiles quick to JIT for the CPU.
const char* kSmallMma = "strategy=mma,BM=32,BN=32,BK=16,TM=16,TN=16,VEC=8,STAGES=1";
const char* kSimt16 = "strategy=simt,BM=64,BN=64,BK=16,TM=4,TN=4,VEC=8,STAGES=1";

}  // namespace

TEST(GpuGemm, EmulatedSimtOddShapes) {
  for (auto [m, n, k] : std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {7, 9, 13}, {100, 75, 130}, {64, 64, 64}, {129, 1, 33}}) {
    auto r = testutil::checkEmulated(gemm(m, n, k), testutil::gpuTarget("sm_80"));
    EXPECT_TRUE(r.correct) << m << "x" << n << "x" << k << ": " << r.error;
  }
}

TEST(GpuGemm, EmulatedBatchedWithoutPadding) {
  // f32, tile-aligned, no epilogue: C is the user's output itself, zeroed per batch.
  GemmSpec s;
  s.batch = 3; s.m = 64; s.n = 128; s.k = 32;
  auto r = testutil::checkEmulated(*buildGemm(s), testutil::gpuTarget("gfx90a"));
  EXPECT_TRUE(r.correct) << r.error;
}

TEST(GpuGemm, EmulatedEveryDtypeAndStrategy) {
  struct Case { const char* target; ScalarType t; const char* over; };
  for (const Case& c : std::vector<Case>{{"sm_80", ScalarType::F16, ""},            // default: mma.sync, 3 cp.async stages
                                         {"sm_90", ScalarType::F16, kSimt16},
                                         {"sm_80", ScalarType::BF16, ""},           // mma-lane (the transform-built mma.sync takes f16 only)
                                         {"gfx942", ScalarType::BF16, kSmallMma},
                                         {"gfx90a", ScalarType::F16, kSimt16},
                                         {"gfx942", ScalarType::F32, ""}}) {
    auto r = testutil::checkEmulated(gemm(77, 50, 41, c.t), testutil::gpuTarget(c.target), cfg(c.over));
    EXPECT_TRUE(r.correct) << c.target << " " << typeName(c.t) << " " << c.over << ": " << r.error;
  }
}

TEST(GpuGemm, EmulatedDefaultMfma) {
  auto r = testutil::checkEmulated(gemm(130, 70, 40, ScalarType::F16), testutil::gpuTarget("gfx90a"));
  EXPECT_TRUE(r.correct) << r.error;
}

TEST(GpuGemm, EmulatedEpilogueTransposeBatch) {
  struct Case { const char* target; ScalarType t; const char* over; };
  for (const Case& c : std::vector<Case>{{"sm_80", ScalarType::F16, kSmallMma}, {"gfx942", ScalarType::BF16, kSmallMma},
                                         {"sm_90", ScalarType::F32, ""}})
    for (int trans = 0; trans < 4; ++trans) {
      GemmSpec s;
      s.m = 37; s.n = 45; s.k = 19; s.dtype = c.t;
      s.transA = trans & 1; s.transB = trans & 2;
      s.batch = trans == 3 ? 2 : 0;
      if (trans >= 2) {
        s.alpha = -0.5; s.beta = 1.5; s.epilogue = "silu(acc) * scale + bias"; s.shapes["bias"] = {45}; s.shapes["scale"] = {37, 1};
      }
      Kernel k = *buildGemm(s);
      auto r = testutil::checkEmulated(k, testutil::gpuTarget(c.target), cfg(c.over));
      EXPECT_TRUE(r.correct) << c.target << " " << k.name << ": " << r.error;
    }
}

TEST(GpuGemm, EmulatedExtremesOfEveryKnob) {
  struct Case { const char* target; ScalarType t; const char* base; };
  for (const Case& c : std::vector<Case>{{"sm_80", ScalarType::F32, "strategy=simt"},
                                         {"sm_80", ScalarType::F16, kSmallMma},
                                         {"sm_90", ScalarType::F16, kSimt16},
                                         {"gfx942", ScalarType::F16, kSmallMma}}) {
    Kernel k = gemm(70, 40, 50, c.t);
    const TargetDesc& t = testutil::gpuTarget(c.target);
    auto space = search::makeSpace(k, t);
    ASSERT_TRUE(space.ok()) << space.error().str();
    // Extremes around `base` (the knobs' own defaults replaced by it).
    ir::Space s = *space;
    for (auto& kn : s.knobs)
      if (cfg(c.base).has(kn.name)) kn.def = cfg(c.base).values.at(kn.name);
    auto configs = testutil::knobExtremes(s);
    EXPECT_GE(configs.size(), 4u) << c.target;
    for (const Config& x : configs) {
      auto r = testutil::checkEmulated(k, t, x);
      EXPECT_TRUE(r.correct) << c.target << " " << x.str() << ": " << r.error;
    }
  }
}

TEST(GpuGemm, IllegalConfigsAreRejectedBeforeCompiling) {
  Kernel f16 = gemm(256, 256, 256, ScalarType::F16), f32 = gemm(256, 256, 256), bf16 = gemm(256, 256, 256, ScalarType::BF16);
  struct Case { const Kernel* k; const char* target; const char* config; };
  for (const Case& c : std::vector<Case>{
           {&f32, "sm_80", "strategy=simt,BM=256,BN=256,BK=8,TM=1,TN=1,VEC=1,STAGES=1"},   // 65536 threads
           {&f16, "sm_80", "strategy=mma,BM=256,BN=256,BK=64,TM=64,TN=64,VEC=8,STAGES=1"},  // 64 KB of smem
           {&f16, "sm_80", "strategy=mma,BM=128,BN=128,BK=32,TM=64,TN=32,VEC=8,STAGES=4"},  // 64 KB: > 48 KB static
           {&f32, "sm_80", "strategy=mma,BM=128,BN=128,BK=32,TM=64,TN=32,VEC=4,STAGES=1"},  // no f32 mma.sync
           {&bf16, "sm_90", "strategy=mma,BM=128,BN=128,BK=32,TM=64,TN=32,VEC=8,STAGES=1"}, // no bf16 nvgpu.mma.sync
           {&f16, "gfx942", "strategy=mma,BM=128,BN=128,BK=32,TM=64,TN=32,VEC=8,STAGES=2"}, // no cp.async on AMD
           {&f16, "gfx1100", "strategy=mma,BM=64,BN=64,BK=32,TM=32,TN=32,VEC=8,STAGES=1"},  // RDNA3: WMMA, no MFMA
           {&f32, "sm_80", "strategy=simt,BM=64,BN=64,BK=16,TM=4,TN=4,VEC=8,STAGES=1"},     // 32-byte copies
           {&f32, "sm_80", "strategy=simt,BM=64,BN=64,BK=16,TM=3,TN=4,VEC=4,STAGES=1"}}) {  // BM % TM
    const TargetDesc& t = testutil::gpuTarget(c.target);
    auto b = codegen::compileGpu(*c.k, cfg(c.config), t);
    ASSERT_FALSE(b.ok()) << c.target << " " << c.config;
    EXPECT_EQ(b.error().code, ErrorCode::InvalidConfig) << b.error().str();
    auto space = search::makeSpace(*c.k, t);
    ASSERT_TRUE(space.ok());
    EXPECT_TRUE(space->check(cfg(c.config)).has_value()) << "the space must reject " << c.config;
  }
}

TEST(GpuGemm, SpillingConfigIsMarkedAndRejectedByTheSpace) {
  // 16x16 f32 accumulators per thread cannot fit 255 registers.
  Kernel k = gemm(512, 512, 512);
  Config c = cfg("strategy=simt,BM=128,BN=128,BK=8,TM=16,TN=16,VEC=4,STAGES=1");
  const TargetDesc& t = testutil::gpuTarget("sm_80");
  auto b = codegen::compileGpu(k, c, t);
  ASSERT_TRUE(b.ok()) << b.error().str();
  EXPECT_TRUE(b->resources.spills()) << b->resources.summary();
  EXPECT_FALSE(b->resources.ok) << b->resources.summary();
  EXPECT_TRUE(search::makeSpace(k, t)->check(c).has_value());
}

TEST(GpuGemm, PipelinedMmaSyncUsesCpAsyncLdmatrixAndMma) {
  Kernel k = gemm(512, 512, 512, ScalarType::F16);
  for (const char* tn : {"sm_80", "sm_90"})
    for (const char* st : {"STAGES=1", "STAGES=2", "STAGES=3"}) {
      auto b = testutil::compileFor(k, testutil::gpuTarget(tn), cfg(std::string("strategy=mma,") + st));
      ASSERT_TRUE(b.ok()) << tn << " " << st << ": " << b.error().str();
      const std::string& ptx = b->assembly;
      EXPECT_GT(testutil::countOccurrences(ptx, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"), 0) << st;
      EXPECT_GT(testutil::countOccurrences(ptx, "ldmatrix"), 0) << st;
      bool async = std::string(st) != "STAGES=1";
      // The cp.async tiles' accesses are XOR-swizzled (ldmatrix bank conflicts; gpu_gemm.cpp).
      if (async) EXPECT_GT(testutil::countOccurrences(ptx, "xor.b"), 0) << st;
      EXPECT_EQ(testutil::countOccurrences(ptx, "cp.async.cg.shared.global") > 0, async) << st;
      EXPECT_FALSE(b->resources.spills()) << b->resources.summary();
      EXPECT_TRUE(b->resources.ok) << b->resources.summary();
    }
}

TEST(GpuGemm, PtxasMayUseMoreRegistersRatherThanSpill) {
  // ptxas caps this 256-thread block at 128 registers (two blocks per SM) and spills 4 bytes; the
  // NVIDIA backend then allows one block per SM (.minnctapersm 1) and takes the spill-free result.
  Kernel k = gemm(256, 256, 256, ScalarType::F16);
  auto b = testutil::compileFor(k, testutil::gpuTarget("sm_90"), cfg("strategy=mma,BM=128,BN=128,BK=32,TM=64,TN=32,VEC=8,STAGES=3"));
  ASSERT_TRUE(b.ok()) << b.error().str();
  EXPECT_FALSE(b->resources.spills()) << b->resources.summary();
  EXPECT_GT(b->resources.registers, 128) << b->resources.summary();
  EXPECT_GT(testutil::countOccurrences(b->assembly, ".minnctapersm 1"), 0);
}

TEST(GpuGemm, MfmaConfigsUseMfmaOnCdna) {
  for (const char* tn : {"gfx90a", "gfx942"})
    for (ScalarType dt : {ScalarType::F16, ScalarType::BF16})
      for (const char* over : {"", "BM=64,BN=64,TM=32,TN=32", kSmallMma}) {
        auto b = testutil::compileFor(gemm(256, 256, 256, dt), testutil::gpuTarget(tn), cfg(over));
        ASSERT_TRUE(b.ok()) << tn << " " << over << ": " << b.error().str();
        EXPECT_EQ(b->strategy, "mfma");
        EXPECT_GT(testutil::countOccurrences(b->assembly, "v_mfma_f32_16x16x16"), 0) << tn << " " << over;
        EXPECT_TRUE(b->resources.ok) << b->resources.summary();
      }
}

TEST(GpuGemm, NegativeControlBrokenTileCopyIsCaught) {
  // The A copy forall (the block forall is the first 2-D one) over half its thread rows: half of
  // the shared A tile keeps its NaN fill, and the emulation must see it.
  codegen::EmulateOptions o;
  o.preHook = [](const std::string& pre) { return testutil::breakNthForall(pre, 1, 2); };
  for (auto [tn, dt] : std::vector<std::pair<const char*, ScalarType>>{{"sm_80", ScalarType::F32}, {"gfx942", ScalarType::F16}}) {
    auto r = testutil::checkEmulated(gemm(64, 64, 64, dt), testutil::gpuTarget(tn), {}, 1, o);
    EXPECT_TRUE(r.compiled) << r.error;
    EXPECT_FALSE(r.correct) << tn << ": a broken copy must not pass";
  }
}
