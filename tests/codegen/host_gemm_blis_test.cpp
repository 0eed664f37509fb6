// Tests the explicit host GEMM (schedules blis, bf16dot, amx): every dtype, edge tiles of every
// loop, several K blocks, transposes, batch, fused epilogues, two threads; vdpbf16ps where the
// host has avx512_bf16; AMX compiled for a Sapphire Rapids and checked in its assembly (run only
// where the host has amx_bf16); the half-precision operands converted with vector instructions.
#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>

#include "codegen/codegen.h"
#include "host_check.h"
#include "ir/builders.h"
#include "ir/text.h"
#include "ir/reference.h"
#include "search/space.h"
#include "targets/kernel_io.h"

using namespace tessera;
using namespace tessera::ir;

namespace {

Config cfg(const std::string& a) { return *Config::parseAssignments(a); }

const TargetDesc& twoThreads() {
  static TargetDesc t = *hostTargetWithThreads(2);
  return t;
}

// In a payload's last parallel loop (blis's column blocks; the first packs A's panels), the
// constant operand (", %cN") of the first op after each of `marks` in turn: 0 when there is no
// parallel loop, -1 when a mark is missing.
int64_t constantInLastParallelLoop(const std::string& payload, std::initializer_list<const char*> marks) {
  size_t at = payload.rfind("scf.parallel");
  if (at == std::string::npos) return 0;
  for (const char* m : marks)
    if ((at = payload.find(m, at)) == std::string::npos) return -1;
  at = payload.find(", %c", at);
  return at == std::string::npos ? -1 : std::atoll(payload.c_str() + at + 4);
}

// Small blocks: several row, column and depth blocks, partial ones at every level.
const char* kSmallBlocks = "MC=32,NC=32,KC=16,MR=6,NR=16,KU=2";

}  // namespace

TEST(HostGemmBlis, EveryDtypeOnOddShapesAndThreads) {
  struct Case {
    std::array<int64_t, 3> mnk;
    const char* config;
  };
  for (ScalarType t : {ScalarType::F32, ScalarType::F16, ScalarType::BF16})
    for (const Case& c : std::vector<Case>{{{1, 1, 1}, "THREADS=2"},
                                           {{97, 61, 45}, "THREADS=2"},
                                           {{7, 129, 33}, "THREADS=1"},
                                           {{129, 1, 7}, "THREADS=2,ORDER=ji"}}) {
      Kernel g = *buildGemm({.m = c.mnk[0], .n = c.mnk[1], .k = c.mnk[2], .dtype = t});
      auto r = testutil::checkHostOn(twoThreads(), g, cfg(std::string("schedule=blis,") + kSmallBlocks + "," + c.config));
      EXPECT_TRUE(r.correct) << g.name << " " << c.config << ": " << r.error;
    }
  // The default blocks (one block per level at this size).
  auto d = testutil::checkHostOn(twoThreads(), *buildGemm({.m = 100, .n = 70, .k = 130, .dtype = ScalarType::F16}), cfg("schedule=blis"));
  EXPECT_TRUE(d.correct) << d.error;
}

// B stored N x K is packed in squares of one vector's width, read along K and transposed in
// registers (the rest element by element): at this host's width and at AVX2's (8 lanes), f32 and
// f16, with depth and column tails in every block (K 83 in blocks of 32 and 64: 2 and 3 squares
// and a tail; N 75: a partial panel), one and two threads, a batch. The control: the same shapes
// with B untransposed, packed by plain row copies, through the same check.
// A 16-bit C over several K blocks keeps its f32 partial sums in a buffer the kernel holds from
// call to call once they reach 32 MiB (2048 x 4096 f32 here): the LLVM IR has the global, a kernel
// of half the rows allocates per call as before. Two threads call the one kernel at once, three
// times each, on tensors of their own: one takes the kept buffer, the other allocates its own;
// every result matches the reference. Control (checked by hand): a kernel whose flag never turns
// a second call away gives both the one buffer, and this test fails.
TEST(HostGemmBlis, LargeSixteenBitSumsKeepTheirScratchAcrossCalls) {
  const TargetDesc& host = hostTarget();
  Kernel big = *buildGemm({.m = 2048, .n = 4096, .k = 40, .dtype = ScalarType::BF16});
  Kernel half = *buildGemm({.m = 1024, .n = 4096, .k = 40, .dtype = ScalarType::BF16});
  const std::string knobs = "schedule=blis,KC=16,KU=1,THREADS=1";
  Config c = testutil::spaceConfig(big, host, knobs);
  auto irBig = codegen::emitHost(big, c, host, codegen::Emit::LLVMIR);
  ASSERT_TRUE(irBig.ok()) << irBig.error().str();
  EXPECT_NE(irBig->find("tessera_kept_cacc"), std::string::npos);
  auto irHalf = codegen::emitHost(half, testutil::spaceConfig(half, host, knobs), host, codegen::Emit::LLVMIR);
  ASSERT_TRUE(irHalf.ok()) << irHalf.error().str();
  EXPECT_EQ(irHalf->find("tessera_kept_cacc"), std::string::npos);

  auto exe = codegen::compileHost(big, c, host);
  ASSERT_TRUE(exe.ok()) << exe.error().str();
  KernelIO first(big, 1), second(big, 2);
  auto calls = [&](KernelIO& io) {
    for (int i = 0; i < 3; ++i) {
      io.poisonOutputs();
      (*exe)->run(io.buffers());
    }
  };
  std::thread other([&] { calls(second); });
  calls(first);
  other.join();
  for (KernelIO* io : {&first, &second}) {
    auto cmp = io->check();
    ASSERT_TRUE(cmp.ok()) << cmp.error().str();
    EXPECT_TRUE(cmp->ok) << cmp->firstBad;
  }
}

TEST(HostGemmBlis, TransposedBIsPackedInRegisterSquares) {
  std::vector<std::pair<TargetDesc, std::string>> hosts = {{twoThreads(), ""}};
  if (auto avx2 = hostTargetAs("x86-64-v3"); avx2.ok()) {
    TargetDesc t = hostAtLevel(*avx2);
    t.units = 2;
    hosts.push_back({t, "x86-64-v3"});
  }
  for (const auto& [t, cpu] : hosts)
    for (ScalarType dt : {ScalarType::F32, ScalarType::F16})
      for (bool tb : {true, false})
        for (const char* c : {"KC=32,THREADS=1", "KC=64,THREADS=2,ORDER=ji"}) {
          GemmSpec s{.batch = tb && dt == ScalarType::F32 ? 2 : 0, .m = 37, .n = 75, .k = 83, .dtype = dt, .transB = tb};
          Kernel k = *buildGemm(s);
          auto r = testutil::checkHostOn(t, k, cfg(std::string("schedule=blis,MC=32,NC=64,MR=6,NR=32,") + c), 1, cpu);
          EXPECT_TRUE(r.correct) << k.name << " " << c << " " << (cpu.empty() ? "this host" : cpu) << ": " << r.error;
        }
}

// Two threads split the column blocks; where blocks of NC columns would not share out evenly
// (96 columns in blocks of 32: 2 for one thread, 1 for the other) the blocks narrow to whole NR
// panels that do (6 of 16). The payload shows the parallel loop's trip count; the results are
// checked against the reference on ragged shapes, several K blocks, one and two threads.
TEST(HostGemmBlis, ColumnBlocksShareEvenlyOverTheThreads) {
  Kernel g = *buildGemm({.m = 37, .n = 96, .k = 45});
  auto zen4 = *hostPreset("zen4");
  zen4.units = 2;
  // The count of column blocks: the last parallel loop (the first packs A's panels) runs over
  // the workers, each over its run of blocks up to min(its end, the count); 0 when there is none.
  auto columnBlocks = [&](const std::string& config) -> int64_t {
    auto p = codegen::emitHost(g, cfg("schedule=blis,MC=48,KC=16,MR=6,NR=16,KU=2,ORDER=ij," + config), zen4, codegen::Emit::Payload);
    EXPECT_TRUE(p.ok()) << p.error().str();
    return p.ok() ? constantInLastParallelLoop(*p, {"arith.minui"}) : -1;
  };
  EXPECT_EQ(columnBlocks("NC=32,THREADS=2"), 6);
  // Negative controls: blocks that already share out evenly keep NC's width (96 = 2 x 48), and
  // one thread has no parallel loop.
  EXPECT_EQ(columnBlocks("NC=48,THREADS=2"), 2);
  EXPECT_EQ(columnBlocks("NC=32,THREADS=1"), 0);
  for (std::array<int64_t, 3> mnk : std::vector<std::array<int64_t, 3>>{{37, 96, 45}, {37, 90, 45}, {13, 200, 70}, {50, 33, 17}})
    for (const char* threads : {"THREADS=1", "THREADS=2"}) {
      Kernel k = *buildGemm({.m = mnk[0], .n = mnk[1], .k = mnk[2]});
      auto r = testutil::checkHostOn(twoThreads(), k, cfg(std::string("schedule=blis,MC=48,NC=32,KC=16,MR=6,NR=16,KU=2,") + threads));
      EXPECT_TRUE(r.correct) << k.name << " " << threads << ": " << r.error;
    }
}

// Column blocks are whole vectors, not whole NR panels: 200 columns at NR = 32 (two 16-lane
// vectors) split 112 + 88 over two threads, where whole panels split 128 + 72. The block width is
// what the column-block loop multiplies its index by; the results are checked on this host with
// blocks that end inside a panel (N = 200, 140, 1028 at NR = 32; several K blocks, an epilogue).
TEST(HostGemmBlis, ColumnBlocksAreWholeVectorsNotWholePanels) {
  auto zen5 = *hostPreset("zen5");
  zen5.units = 2;
  auto blockWidth = [&](int64_t n, const std::string& config) -> int64_t {
    Kernel g = *buildGemm({.m = 64, .n = n, .k = 64});
    auto p = codegen::emitHost(g, cfg("schedule=blis,MC=64,KC=64,MR=8,KU=1,ORDER=ij,NC=512," + config), zen5, codegen::Emit::Payload);
    EXPECT_TRUE(p.ok()) << p.error().str();
    // The worker's loop over its blocks, then the block's first column: index * width.
    return p.ok() ? constantInLastParallelLoop(*p, {"scf.for %arg", "arith.muli %arg"}) : -1;
  };
  EXPECT_EQ(blockWidth(200, "NR=32,THREADS=2"), 112);
  EXPECT_EQ(blockWidth(140, "NR=32,THREADS=2"), 80);
  // Controls: a width whose half is whole panels keeps them (256 -> 128), and one thread has no
  // parallel loop.
  EXPECT_EQ(blockWidth(256, "NR=32,THREADS=2"), 128);
  EXPECT_EQ(blockWidth(200, "NR=32,THREADS=1"), 0);
  const int64_t nr = 2 * std::max<int64_t>(4, twoThreads().simdBits / 32);
  for (std::array<int64_t, 3> mnk : std::vector<std::array<int64_t, 3>>{{37, 200, 45}, {13, 140, 70}, {20, 1028, 33}})
    for (const char* threads : {"THREADS=1", "THREADS=2"}) {
      GemmSpec s;
      s.m = mnk[0], s.n = mnk[1], s.k = mnk[2];
      s.epilogue = "relu(acc + bias)";
      s.shapes["bias"] = {mnk[1]};
      Kernel k = *buildGemm(s);
      auto r = testutil::checkHostOn(twoThreads(), k,
                                     cfg("schedule=blis,MC=32,NC=512,KC=16,MR=6,KU=2,NR=" + std::to_string(nr) + "," + threads));
      EXPECT_TRUE(r.correct) << k.name << " " << threads << ": " << r.error;
    }
}

TEST(HostGemmBlis, TransposesBatchAndFusedEpilogues) {
  for (ScalarType t : {ScalarType::F32, ScalarType::BF16})
    for (int trans = 0; trans < 4; ++trans) {
      GemmSpec s;
      s.m = 37; s.n = 45; s.k = 35; s.dtype = t;
      s.transA = trans & 1; s.transB = trans & 2;
      s.batch = trans == 3 ? 2 : 0;
      if (trans >= 1) {
        // alpha, beta·Cin, a row-broadcast bias, a per-row scale and an activation, written in the
        // micro-kernel's write-back on vectors.
        s.alpha = -0.5; s.beta = 1.5; s.epilogue = "gelu(acc * scale + bias)"; s.shapes["bias"] = {45}; s.shapes["scale"] = {37, 1};
        if (s.batch) s.shapes["scale"] = {2, 37, 1};
      }
      Kernel k = *buildGemm(s);
      const char* threads = trans % 2 ? "THREADS=1" : "THREADS=2";
      auto r = testutil::checkHostOn(twoThreads(), k, cfg(std::string("schedule=blis,") + kSmallBlocks + "," + threads));
      EXPECT_TRUE(r.correct) << k.name << " " << threads << ": " << r.error;
    }
  // An epilogue that reads another tensor transposed cannot be fused: blis is not offered, and a
  // config asking for it is an invalid config, not a crash.
  auto tr = parseKernel(
      "kernel t : gemm {\n in A: f32[8, 4]\n in B: f32[4, 8]\n in R: f32[8, 8]\n tmp acc: f32[8, 8]\n out C: f32[8, 8]\n"
      " acc[i, j] = sum(k < 4: A[i, k] * B[k, j])\n C[i, j] = acc[i, j] + R[j, i]\n}");
  ASSERT_TRUE(tr.ok()) << tr.error().str();
  {
    auto sp = search::makeSpace(*tr, twoThreads());
    ASSERT_TRUE(sp.ok());
    for (const auto& kn : sp->knobs)
      if (kn.name == "schedule") EXPECT_EQ(kn.indexOf(std::string("blis")), -1);
    auto exe = codegen::compileHost(*tr, cfg("schedule=blis,MC=8,NC=8,KC=4,MR=4,NR=16,KU=1,ORDER=ij"), twoThreads());
    ASSERT_FALSE(exe.ok());
    EXPECT_EQ(exe.error().code, ErrorCode::InvalidConfig) << exe.error().str();
  }
}

TEST(HostGemmBlis, Bf16PairDotProductsWhereTheHostHasThem) {
  if (!hostTarget().hasIsa("avx512_bf16") || hostTarget().simdBits < 512) GTEST_SKIP() << "no avx512_bf16 on this host";
  struct Case {
    std::array<int64_t, 3> mnk;
    const char* config;
  };
  for (const Case& c : std::vector<Case>{{{1, 1, 1}, "schedule=bf16dot,THREADS=1"},
                                         {{97, 61, 45}, "schedule=bf16dot,MC=32,NC=32,KC=16,MR=6,NR=16,KU=2,THREADS=2"},
                                         {{7, 129, 33}, "schedule=bf16dot,ORDER=ji,KC=32,THREADS=2"},
                                         {{64, 96, 128}, "schedule=bf16dot,THREADS=2"}}) {
    Kernel g = *buildGemm({.m = c.mnk[0], .n = c.mnk[1], .k = c.mnk[2], .dtype = ScalarType::BF16});
    auto r = testutil::checkHostOn(twoThreads(), g, cfg(c.config));
    EXPECT_TRUE(r.correct) << g.name << " " << c.config << ": " << r.error;
  }
  GemmSpec s;
  s.m = 40; s.n = 33; s.k = 27; s.dtype = ScalarType::BF16; s.transA = true; s.transB = true;
  s.epilogue = "relu(acc + bias)"; s.shapes["bias"] = {33};
  auto r = testutil::checkHostOn(twoThreads(), *buildGemm(s), cfg("schedule=bf16dot,KC=16,THREADS=2"));
  EXPECT_TRUE(r.correct) << r.error;
  // Regression: a bf16 output whose last column vector holds one element (33 columns), after a
  // relu: the partial vector's store must not touch the next row.
  for (const char* sched : {"schedule=blis", "schedule=bf16dot"}) {
    auto e = testutil::checkHostOn(twoThreads(), *buildGemm({.m = 8, .n = 33, .k = 16, .dtype = ScalarType::BF16, .epilogue = "relu(acc)"}),
                                   cfg(std::string(sched) + ",THREADS=1"));
    EXPECT_TRUE(e.correct) << sched << ": " << e.error;
  }
}

// The space offers bf16dot and amx only where the ISA has them, and only for bf16 inputs.
TEST(HostGemmBlis, HalfPrecisionSchedulesFollowTheIsa) {
  auto schedules = [](const TargetDesc& t, ScalarType dt) {
    auto sp = search::makeSpace(*buildGemm({.m = 512, .n = 512, .k = 512, .dtype = dt}), t);
    std::string d;
    for (const auto& kn : sp->knobs)
      if (kn.name == "schedule") {
        for (const auto& v : kn.domain) d += knobValueStr(v) + "|";
        d += " default " + knobValueStr(kn.def);
      }
    return d;
  };
  // (Half precision leaves out the transform schedules: they convert element by element.)
  EXPECT_EQ(schedules(*hostPreset("zen4"), ScalarType::BF16), "blis|bf16dot| default bf16dot");
  EXPECT_EQ(schedules(*hostPreset("zen4"), ScalarType::F16), "blis| default blis");
  EXPECT_EQ(schedules(*hostPreset("zen4-avx2"), ScalarType::BF16), "blis| default blis");
  EXPECT_EQ(schedules(*hostPreset("sapphire-rapids"), ScalarType::BF16), "blis|bf16dot|amx| default amx");
  EXPECT_EQ(schedules(*hostPreset("sapphire-rapids"), ScalarType::F32), "plain|packed|blis| default blis");
}

// Assembly for named machines, whatever this host is: vdpbf16ps for a Zen 4, AMX tile ops (with
// the tile configuration LLVM inserts) for a Sapphire Rapids, and f16 operands converted by
// vector instructions while packing.
TEST(HostGemmBlis, AssemblyOfTheHalfPrecisionKernels) {
  Kernel g = *buildGemm({.m = 64, .n = 64, .k = 64, .dtype = ScalarType::BF16});
  auto zen4 = *hostPreset("zen4");
  auto dot = codegen::emitHost(g, cfg("schedule=bf16dot,MC=64,NC=64,KC=64,MR=8,NR=32,KU=1,ORDER=ij,THREADS=1"), zen4,
                               codegen::Emit::Asm, {.cpu = hostPresetCpu("zen4")});
  ASSERT_TRUE(dot.ok()) << dot.error().str();
  EXPECT_NE(dot->find("vdpbf16ps"), std::string::npos);
  auto spr = *hostPreset("sapphire-rapids");
  auto amx = codegen::emitHost(g, cfg("schedule=amx,MC=64,NC=64,KC=64,MR=32,NR=32,KU=1,ORDER=ij,THREADS=1"), spr,
                               codegen::Emit::Asm, {.cpu = hostPresetCpu("sapphire-rapids")});
  ASSERT_TRUE(amx.ok()) << amx.error().str();
  for (const char* insn : {"tdpbf16ps", "tileloadd", "tilestored", "ldtilecfg"})
    EXPECT_NE(amx->find(insn), std::string::npos) << insn;
  // amx is refused for a host without amx_bf16 (and bf16dot for one without avx512_bf16).
  auto noAmx = codegen::emitHost(g, cfg("schedule=amx,MC=64,NC=64,KC=64,MR=32,NR=32,KU=1,ORDER=ij,THREADS=1"), zen4,
                                 codegen::Emit::Asm, {.cpu = hostPresetCpu("zen4")});
  ASSERT_FALSE(noAmx.ok());
  EXPECT_EQ(noAmx.error().code, ErrorCode::InvalidConfig);
  auto noDot = codegen::emitHost(g, cfg("schedule=bf16dot,MC=64,NC=64,KC=64,MR=6,NR=16,KU=1,ORDER=ij,THREADS=1"),
                                 *hostPreset("zen4-avx2"), codegen::Emit::Asm, {.cpu = hostPresetCpu("zen4-avx2")});
  ASSERT_FALSE(noDot.ok());
  Kernel h = *buildGemm({.m = 64, .n = 64, .k = 64, .dtype = ScalarType::F16});
  auto f16 = codegen::emitHost(h, cfg("schedule=blis,MC=64,NC=64,KC=64,MR=8,NR=32,KU=1,ORDER=ij,THREADS=1"), zen4,
                               codegen::Emit::Asm, {.cpu = hostPresetCpu("zen4")});
  ASSERT_TRUE(f16.ok()) << f16.error().str();
  // 16 halves at a time into a zmm register (a register or a memory source).
  bool wide = false;
  for (size_t at = f16->find("vcvtph2ps"); at != std::string::npos; at = f16->find("vcvtph2ps", at + 1))
    wide = wide || f16->substr(at, f16->find('\n', at) - at).find("%zmm") != std::string::npos;
  EXPECT_TRUE(wide);
}

TEST(HostGemmBlis, AmxRunsWhereTheHostHasIt) {
  if (!hostTarget().hasIsa("amx_bf16")) GTEST_SKIP() << "no amx_bf16 on this host (AMX code is checked in its assembly)";
  for (auto [m, n, k] : std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {33, 70, 45}, {64, 64, 128}, {100, 40, 300}}) {
    Kernel g = *buildGemm({.m = m, .n = n, .k = k, .dtype = ScalarType::BF16});
    auto r = testutil::checkHostOn(twoThreads(), g, cfg("schedule=amx,MR=32,NR=32,KC=64,THREADS=2"));
    EXPECT_TRUE(r.correct) << g.name << ": " << r.error;
  }
}
