// Tests shape-generic host GEMM kernels (and B read in place, PACKB=0) (CompileOptions::runtime): one kernel compiled for an
// upper bound of M (or of the batch count) runs every size up to it, odd ones included, for every
// dtype the host GEMM takes, with several row, column and depth blocks, epilogues, both loop
// orders and two threads; negative controls: a wrong runtime size fails the check, and the
// layouts and schedules that cannot take a runtime size are refused in one line.
#include <gtest/gtest.h>

#include <cstdint>
#include <array>
#include <vector>

#include "codegen/codegen.h"
#include "host_check.h"
#include "ir/builders.h"
#include "search/space.h"
#include "targets/kernel_io.h"

using namespace tessera;
using namespace tessera::ir;

namespace {

// The space's default with `overrides`; PACKB (not a knob of the search space) is added after.
Config cfg(const Kernel& k, const TargetDesc& t, std::string overrides) {
  bool inPlaceB = false;
  if (auto at = overrides.find(",PACKB=0"); at != std::string::npos) {
    overrides.erase(at, 8);
    inPlaceB = true;
  }
  Config c = testutil::spaceConfig(k, t, overrides);
  if (inPlaceB) {
    Config extra = *Config::parseAssignments("PACKB=0");
    c.values.insert(extra.values.begin(), extra.values.end());
  }
  return c;
}

// Runs `exe` (compiled with runtime sizes) on the kernel of the actual shape `actual`, with the
// sizes {m, batch}, and checks every output against the reference.
std::string runSized(const codegen::HostExecutable& exe, const Kernel& actual, int64_t m, int64_t batch) {
  return testutil::runWithSizes(exe, actual, 7, {m, batch});
}

const TargetDesc& twoThreads() { return testutil::twoThreadHost(); }

const std::vector<int64_t> kOddMs = {1, 2, 3, 5, 6, 7, 17, 31, 32, 33, 64, 97, 129, 160};

}  // namespace

TEST(HostGemmRuntime, RuntimeMEveryDtypeOddSizes) {
  const TargetDesc& t = twoThreads();
  // Small blocks: several row blocks (MC 32), partial micro-tiles (MR 6), several column and depth
  // blocks (K 45 over KC 16: the bf16/f16 outputs keep their partial sums in a runtime-sized scratch).
  for (ScalarType dt : {ScalarType::F32, ScalarType::F16, ScalarType::BF16})
    for (const char* extra : {"THREADS=1,ORDER=ij", "THREADS=2,ORDER=ji", "THREADS=2,ORDER=ij,PACKB=0"}) {
      GemmSpec s{.m = 160, .n = 33, .k = 45, .dtype = dt};
      Kernel maxK = *buildGemm(s);
      Config c = cfg(maxK, t, std::string("schedule=blis,MC=32,NC=32,KC=16,MR=6,NR=16,KU=2,") + extra);
      auto exe = codegen::compileHost(maxK, c, t, {.runtime = {.m = true}});
      ASSERT_TRUE(exe.ok()) << exe.error().str();
      for (int64_t m : kOddMs) {
        s.m = m;
        Kernel k = *buildGemm(s);
        EXPECT_EQ(runSized(**exe, k, m, 0), "") << typeName(dt) << " " << extra << " M=" << m;
      }
    }
}

TEST(HostGemmRuntime, RuntimeMWithEpilogueAndDefaultBlocks) {
  const TargetDesc& t = hostTarget();
  GemmSpec s{.m = 300, .n = 70, .k = 130, .dtype = ScalarType::F32, .transB = true, .alpha = 0.5, .beta = 1.5,
             .epilogue = "relu(acc * scale + bias)"};
  s.shapes["bias"] = {70};
  s.shapes["scale"] = {300, 1};
  Kernel maxK = *buildGemm(s);
  Config c = cfg(maxK, t, "schedule=blis");
  auto exe = codegen::compileHost(maxK, c, t, {.runtime = {.m = true}});
  ASSERT_TRUE(exe.ok()) << exe.error().str();
  for (int64_t m : {1, 3, 17, 129, 255, 300}) {
    s.m = m;
    s.shapes["scale"] = {m, 1};
    Kernel k = *buildGemm(s);
    EXPECT_EQ(runSized(**exe, k, m, 0), "") << "M=" << m;
  }
}

TEST(HostGemmRuntime, RuntimeBatch) {
  const TargetDesc& t = twoThreads();
  GemmSpec s{.batch = 5, .m = 19, .n = 21, .k = 23, .dtype = ScalarType::BF16};
  Kernel maxK = *buildGemm(s);
  Config c = cfg(maxK, t, "schedule=blis,MC=8,NC=16,KC=8,MR=4,NR=16,THREADS=2");
  auto exe = codegen::compileHost(maxK, c, t, {.runtime = {.batch = true}});
  ASSERT_TRUE(exe.ok()) << exe.error().str();
  for (int64_t b : {1, 2, 5}) {
    s.batch = b;
    Kernel k = *buildGemm(s);
    EXPECT_EQ(runSized(**exe, k, 0, b), "") << "batch=" << b;
  }
}

// Negative control: told one row fewer than the buffers hold, the kernel leaves the last row
// poisoned and the check fails (the runtime size is what the loops follow).
TEST(HostGemmRuntime, WrongRuntimeSizeFailsTheCheck) {
  const TargetDesc& t = hostTarget();
  GemmSpec s{.m = 64, .n = 17, .k = 9, .dtype = ScalarType::F32};
  Kernel maxK = *buildGemm(s);
  auto exe = codegen::compileHost(maxK, cfg(maxK, t, "schedule=blis,MR=6"), t, {.runtime = {.m = true}});
  ASSERT_TRUE(exe.ok()) << exe.error().str();
  s.m = 13;
  Kernel k = *buildGemm(s);
  EXPECT_EQ(runSized(**exe, k, 13, 0), "");
  EXPECT_NE(runSized(**exe, k, 12, 0), "");
}

TEST(HostGemmRuntime, RefusesWhatCannotTakeARuntimeSize) {
  const TargetDesc& t = hostTarget();
  Kernel trans = *buildGemm({.m = 64, .n = 16, .k = 16, .transA = true});
  auto e1 = codegen::compileHost(trans, cfg(trans, t, "schedule=blis"), t, {.runtime = {.m = true}});
  ASSERT_FALSE(e1.ok());
  EXPECT_NE(e1.error().str().find("not transposed"), std::string::npos) << e1.error().str();
  Kernel plain = *buildGemm({.m = 64, .n = 16, .k = 16});
  auto e2 = codegen::compileHost(plain, cfg(plain, t, "schedule=plain,THREADS=1"), t, {.runtime = {.m = true}});
  ASSERT_FALSE(e2.ok());
  EXPECT_NE(e2.error().str().find("blis family"), std::string::npos) << e2.error().str();
  auto e3 = codegen::compileHost(plain, cfg(plain, t, "schedule=blis"), t, {.runtime = {.batch = true}});
  EXPECT_FALSE(e3.ok());
  auto e4 = codegen::compileHost(plain, cfg(plain, t, "schedule=blis"), t, {.runtime = {.kv = true}});
  EXPECT_FALSE(e4.ok());
  // B read in place needs it stored K x N.
  Kernel tb = *buildGemm({.m = 64, .n = 16, .k = 16, .transB = true});
  EXPECT_TRUE(codegen::compileHost(tb, cfg(tb, t, "schedule=blis"), t).ok());
  EXPECT_FALSE(codegen::compileHost(tb, cfg(tb, t, "schedule=blis,PACKB=0"), t).ok());
}

// B read in place (PACKB=0) on static shapes: partial column tiles, several depth blocks (the last
// one short), a fused epilogue and the half-precision inputs.
TEST(HostGemmRuntime, InPlaceBOnOddShapes) {
  const TargetDesc& t = twoThreads();
  for (ScalarType dt : {ScalarType::F32, ScalarType::F16, ScalarType::BF16})
    for (auto [m, n, k] : std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {3, 33, 45}, {17, 129, 7}, {64, 40, 100}}) {
      GemmSpec s{.m = m, .n = n, .k = k, .dtype = dt, .beta = 0.5, .epilogue = "relu(acc + bias)"};
      s.shapes["bias"] = {n};
      Kernel g = *buildGemm(s);
      Config c = cfg(g, t, "schedule=blis,MC=32,NC=32,KC=16,MR=6,NR=16,KU=2,THREADS=2,PACKB=0");
      auto exe = codegen::compileHost(g, c, t);
      ASSERT_TRUE(exe.ok()) << exe.error().str();
      KernelIO io(g, 3);
      io.poisonOutputs();
      (*exe)->run(io.buffers());
      auto cmp = io.check();
      ASSERT_TRUE(cmp.ok()) << cmp.error().str();
      EXPECT_TRUE(cmp->ok) << g.name << ": " << cmp->firstBad;
    }
}

// The same shape-generic kernels compiled for an AVX2-only CPU (x86-64-v3: AVX2, FMA, F16C; no
// AVX-512, no avx512_bf16) and run here, whatever this host has: an AVX2 host's blocks, masks and
// 16-bit conversions, at odd sizes, with the in-place B variant and a runtime batch.
TEST(HostGemmRuntime, RuntimeSizesOnAnAvx2Cpu) {
  auto avx2 = hostTargetAs("x86-64-v3");
  ASSERT_TRUE(avx2.ok()) << avx2.error().str();
  ASSERT_FALSE(avx2->hasIsa("avx512f"));
  TargetDesc t = *avx2;
  t.units = 2;
  const codegen::CompileOptions o{.cpu = "x86-64-v3", .runtime = {.m = true}};
  for (ScalarType dt : {ScalarType::F32, ScalarType::F16, ScalarType::BF16})
    for (const char* extra : {"THREADS=1,ORDER=ij", "THREADS=2,ORDER=ji,PACKB=0"}) {
      GemmSpec s{.m = 97, .n = 33, .k = 45, .dtype = dt, .epilogue = "relu(acc + bias)"};
      s.shapes["bias"] = {33};
      Kernel maxK = *buildGemm(s);
      Config c = cfg(maxK, t, std::string("schedule=blis,MC=32,NC=32,KC=16,MR=6,NR=16,KU=2,") + extra);
      auto exe = codegen::compileHost(maxK, c, t, o);
      ASSERT_TRUE(exe.ok()) << exe.error().str();
      for (int64_t m : {1, 3, 7, 17, 32, 33, 97}) {
        s.m = m;
        EXPECT_EQ(runSized(**exe, *buildGemm(s), m, 0), "") << typeName(dt) << " " << extra << " M=" << m;
      }
    }
  GemmSpec b{.batch = 4, .m = 9, .n = 17, .k = 19, .dtype = ScalarType::BF16};
  Kernel maxB = *buildGemm(b);
  auto exe = codegen::compileHost(maxB, cfg(maxB, t, "schedule=blis,MC=8,NC=16,KC=8,MR=4,NR=16,THREADS=2"), t,
                                  {.cpu = "x86-64-v3", .runtime = {.batch = true}});
  ASSERT_TRUE(exe.ok()) << exe.error().str();
  for (int64_t n : {1, 3, 4}) {
    b.batch = n;
    EXPECT_EQ(runSized(**exe, *buildGemm(b), 0, n), "") << "batch=" << n;
  }
  // Negative control at this ISA too: one row short fails.
  GemmSpec s{.m = 40, .n = 17, .k = 9};
  Kernel maxK = *buildGemm(s);
  auto one = codegen::compileHost(maxK, cfg(maxK, t, "schedule=blis,MR=6,THREADS=1"), t, o);
  ASSERT_TRUE(one.ok()) << one.error().str();
  s.m = 13;
  EXPECT_EQ(runSized(**one, *buildGemm(s), 13, 0), "");
  EXPECT_NE(runSized(**one, *buildGemm(s), 12, 0), "");
}
