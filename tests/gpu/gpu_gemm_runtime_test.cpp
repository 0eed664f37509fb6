// Tests shape-generic GPU GEMM kernels (GpuCompileOptions::runtime) without a GPU: one kernel
// compiled for an upper bound of M (or of the batch count) runs every size up to it, odd ones and
// partial tiles included, on the mapped-kernel emulator (whose exact allocation sizes make any
// access past row M an error) behind the host wrapper, for the tensor-core strategies (mma-lane
// f16/bf16, mma f16) and simt f32, with and without a fused epilogue; ptxas accepts the PTX of
// the defaults without spills; negative controls: told one row fewer, the check fails; the
// strategies and layouts that cannot take runtime sizes are refused in one line.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "emulator/gpu_emu.h"
#include "codegen/gpu.h"
#include "codegen/gpu_runner.h"
#include "gpu_check.h"
#include "ir/builders.h"
#include "targets/kernel_io.h"

using namespace tessera;
using namespace tessera::ir;

namespace {

const std::vector<int64_t> kMs = {1, 2, 3, 17, 31, 64, 100};

GemmSpec spec(int64_t m, int64_t n, int64_t k, ScalarType t, bool epilogue) {
  GemmSpec s{.m = m, .n = n, .k = k, .dtype = t};
  if (epilogue) {
    s.alpha = 0.5;
    s.epilogue = "silu(acc) * scale + bias";
    s.shapes["bias"] = {n};
    s.shapes["scale"] = {m, 1};
  }
  return s;
}

using Generic = testutil::ShapeGeneric;

Expected<Generic> compileGeneric(const Kernel& maxK, const TargetDesc& t, const std::string& overrides,
                                 codegen::RuntimeDims rt, bool binary = false) {
  return testutil::compileShapeGeneric(maxK, t, overrides, rt, binary);
}

std::string runSized(const Generic& g, const TargetDesc& t, const Kernel& actual, int64_t m, int64_t batch,
                     int64_t spareRows = 0) {
  return testutil::runAtSizes(g, t, actual, m, batch, spareRows);
}

struct Case {
  const char* target;
  ScalarType dt;
  const char* config;
  int64_t n, k;
  bool epilogue;
};

// Every M of kMs on one kernel compiled for M = 100.
void checkRuntimeM(const Case& c) {
  const TargetDesc& t = testutil::gpuTarget(c.target);
  Kernel maxK = *buildGemm(spec(100, c.n, c.k, c.dt, c.epilogue));
  auto g = compileGeneric(maxK, t, c.config, {.m = true});
  ASSERT_TRUE(g.ok()) << c.config << ": " << g.error().str();
  EXPECT_TRUE(g->bin.launch.runtime.m);
  EXPECT_EQ(g->bin.launch.runtime.maxM, 100);
  for (int64_t m : kMs) {
    Kernel k = *buildGemm(spec(m, c.n, c.k, c.dt, c.epilogue));
    EXPECT_EQ(runSized(*g, t, k, m, 0, 100 - m + 3), "") << c.config << " " << typeName(c.dt) << " M=" << m;
  }
}

}  // namespace

// mma-lane reads A in place (K 40: rows of 16-byte chunks) or packs it (K 36), f16 and bf16, with
// and without the epilogue; two row blocks of 64 at M = 100, one partial at every other M.
TEST(GpuGemmRuntime, MmaLaneRuntimeMOddSizes) {
  const char* cfg = "strategy=mma-lane,VEC=8,BM=64,BN=64,BK=32,TM=32,TN=32,STAGES=3";
  for (ScalarType dt : {ScalarType::F16, ScalarType::BF16})
    for (bool epi : {false, true}) checkRuntimeM({"sm_80", dt, cfg, 72, epi ? 36 : 40, epi});
  checkRuntimeM({"sm_90", ScalarType::BF16, "strategy=mma-lane,VEC=8,BM=32,BN=64,BK=16,TM=16,TN=32,STAGES=2", 40, 48, false});
}

// mma (mma.sync through the transform schedules, f16): A padded at the upper bound, the grid's
// row blocks from M; simt f32 the same way (no f32 tensor-core path: mma.sync takes f16 here).
TEST(GpuGemmRuntime, MmaSyncAndSimtRuntimeMOddSizes) {
  checkRuntimeM({"sm_80", ScalarType::F16, "strategy=mma,BM=32,BN=32,BK=16,TM=16,TN=16,VEC=8,STAGES=1", 40, 48, false});
  checkRuntimeM({"sm_80", ScalarType::F16, "strategy=mma,BM=64,BN=64,BK=32,TM=32,TN=16,VEC=8,STAGES=2", 40, 48, true});
  checkRuntimeM({"sm_80", ScalarType::F32, "strategy=simt,BM=32,BN=32,BK=8,TM=4,TN=4,VEC=4,STAGES=1", 33, 20, true});
}

// The pre-mapping emulation (compileEmulated) takes the sizes after the tensors, as host kernels do.
TEST(GpuGemmRuntime, PreMappingEmulationTakesTheSizesPointer) {
  const TargetDesc& t = testutil::gpuTarget("sm_80");
  Kernel maxK = *buildGemm(spec(100, 40, 48, ScalarType::F16, true));
  auto c = testutil::gpuConfig(maxK, t, *Config::parseAssignments("strategy=mma,BM=32,BN=32,BK=16,TM=16,TN=16,VEC=8,STAGES=1"));
  ASSERT_TRUE(c.ok()) << c.error().str();
  auto exe = codegen::compileEmulated(maxK, *c, t, {.checkMapping = false, .runtime = {.m = true}});
  ASSERT_TRUE(exe.ok()) << exe.error().str();
  for (int64_t m : {1, 31, 100}) {
    Kernel k = *buildGemm(spec(m, 40, 48, ScalarType::F16, true));
    KernelIO io(k, 5);
    io.poisonOutputs();
    std::vector<void*> bufs(io.buffers(), io.buffers() + io.count());
    alignas(64) int64_t sizes[codegen::kRuntimeSizeCount] = {m, 0, 0};
    bufs.push_back(sizes);
    (*exe)->run(bufs.data());
    auto cmp = io.check();
    ASSERT_TRUE(cmp.ok()) << cmp.error().str();
    EXPECT_TRUE(cmp->ok) << "M=" << m << ": " << cmp->firstBad;
  }
}

// Negative control: the kernel told one row fewer than its buffers hold leaves the last row
// unwritten (poisoned), and the check says so; at the right M the same buffers pass.
TEST(GpuGemmRuntime, NegativeControlOneRowShort) {
  for (const char* cfg : {"strategy=mma-lane,VEC=8,BM=64,BN=64,BK=32,TM=32,TN=32,STAGES=3",
                          "strategy=mma,BM=32,BN=32,BK=16,TM=16,TN=16,VEC=8,STAGES=1"}) {
    const TargetDesc& t = testutil::gpuTarget("sm_80");
    Kernel maxK = *buildGemm(spec(100, 72, 40, ScalarType::F16, false));
    auto g = compileGeneric(maxK, t, cfg, {.m = true});
    ASSERT_TRUE(g.ok()) << g.error().str();
    for (int64_t m : {17, 65}) {
      Kernel k = *buildGemm(spec(m, 72, 40, ScalarType::F16, false));
      EXPECT_NE(runSized(*g, t, k, m - 1, 0), "") << cfg << " M=" << m << " told " << m - 1;
      EXPECT_EQ(runSized(*g, t, k, m, 0), "") << cfg << " M=" << m;
    }
  }
}

// A runtime batch count: mma-lane's grid.z, mma's launch count.
TEST(GpuGemmRuntime, RuntimeBatch) {
  const TargetDesc& t = testutil::gpuTarget("sm_80");
  for (const char* cfg : {"strategy=mma-lane,VEC=8,BM=32,BN=64,BK=16,TM=16,TN=32,STAGES=2",
                          "strategy=mma,BM=32,BN=32,BK=16,TM=16,TN=16,VEC=8,STAGES=1"}) {
    GemmSpec s{.batch = 5, .m = 33, .n = 40, .k = 36, .dtype = ScalarType::F16};
    Kernel maxK = *buildGemm(s);
    auto g = compileGeneric(maxK, t, cfg, {.batch = true});
    ASSERT_TRUE(g.ok()) << cfg << ": " << g.error().str();
    for (int64_t b : {1, 2, 5}) {
      s.batch = b;
      Kernel k = *buildGemm(s);
      EXPECT_EQ(runSized(*g, t, k, 0, b), "") << cfg << " batch=" << b;
    }
  }
}

// ptxas takes the runtime-M PTX of each tensor-core strategy's defaults (from the space) without
// spills; the launch reads the sizes argument where the kernel needs M.
TEST(GpuGemmRuntime, PtxasAcceptsTheDefaultsWithoutSpills) {
  struct P { const char* target; ScalarType dt; const char* overrides; bool epi; };
  for (const P& p : {P{"sm_80", ScalarType::F16, "strategy=mma-lane", false}, P{"sm_80", ScalarType::BF16, "strategy=mma-lane", true},
                     P{"sm_90", ScalarType::BF16, "strategy=mma-lane", false}, P{"sm_80", ScalarType::F16, "strategy=mma", true},
                     P{"sm_86", ScalarType::F16, "strategy=mma", false}}) {
    const TargetDesc& t = testutil::gpuTarget(p.target);
    Kernel maxK = *buildGemm(spec(4096, 1024, 1024, p.dt, p.epi));
    auto c = testutil::gpuConfig(maxK, t, *Config::parseAssignments(p.overrides));
    ASSERT_TRUE(c.ok()) << c.error().str();
    auto bin = codegen::compileGpu(maxK, *c, t, {.runtime = {.m = true}});
    ASSERT_TRUE(bin.ok()) << p.target << " " << p.overrides << ": " << bin.error().str();
    EXPECT_FALSE(bin->binary.empty());
    EXPECT_TRUE(bin->resources.ok) << c->str() << ": " << bin->resources.summary();
    EXPECT_FALSE(bin->resources.spills()) << c->str() << ": " << bin->resources.summary();
    const auto& l = bin->launch;
    bool sizesParam = false;
    for (int q : l.kernelParams) sizesParam |= l.args[size_t(q)].kind == codegen::GpuArg::Kind::Sizes;
    // mma-lane reads M in the kernel (A's rows, the stores); mma in its epilogue, which a half
    // precision output always has (the f32 accumulator converted under row < M).
    EXPECT_TRUE(sizesParam) << c->str() << ": " << l.str();
    auto at = codegen::launchAtSizes(l, std::vector<int64_t>{17, 0, 0}.data());
    ASSERT_TRUE(at.ok()) << at.error().str();
    EXPECT_EQ(at->grid[1], (17 + l.runtime.rowsPerBlock - 1) / l.runtime.rowsPerBlock);
    EXPECT_EQ(at->grid[0], l.grid[0]);
    EXPECT_NE(l.str().find("runtime M 1..4096"), std::string::npos) << l.str();
  }
}

// One line each for what cannot take runtime sizes, and for sizes outside the compiled range.
TEST(GpuGemmRuntime, Refusals) {
  auto refused = [](const Kernel& k, const char* target, const char* cfg, codegen::RuntimeDims rt) -> std::string {
    const TargetDesc& t = testutil::gpuTarget(target);
    auto c = testutil::gpuConfig(k, t, *Config::parseAssignments(cfg));
    if (!c.ok()) return "config: " + c.error().str();
    auto bin = codegen::compileGpu(k, *c, t, {.wantBinary = false, .runtime = rt});
    if (bin.ok()) return "";
    return bin.error().message;
  };
  auto oneLine = [](const std::string& s) { return !s.empty() && s.find('\n') == std::string::npos; };
  Kernel plain = *buildGemm(GemmSpec{.m = 256, .n = 256, .k = 256, .dtype = ScalarType::BF16});
  std::string w = refused(plain, "sm_90a", "strategy=wgmma", {.m = true});
  EXPECT_TRUE(oneLine(w) && w.find("wgmma") != std::string::npos && w.find("mma-lane") != std::string::npos) << w;
  Kernel ta = *buildGemm(GemmSpec{.m = 256, .n = 256, .k = 256, .dtype = ScalarType::F16, .transA = true});
  std::string a = refused(ta, "sm_80", "strategy=mma-lane", {.m = true});
  EXPECT_TRUE(oneLine(a) && a.find("transposed A") != std::string::npos) << a;
  Kernel batched = *buildGemm(GemmSpec{.batch = 4, .m = 64, .n = 64, .k = 64, .dtype = ScalarType::F16});
  std::string bm = refused(batched, "sm_80", "strategy=mma-lane", {.m = true});
  EXPECT_TRUE(oneLine(bm) && bm.find("batch") != std::string::npos) << bm;
  std::string nb = refused(plain, "sm_80", "strategy=mma-lane", {.batch = true});
  EXPECT_TRUE(oneLine(nb) && nb.find("batched") != std::string::npos) << nb;
  std::string kv = refused(plain, "sm_80", "strategy=mma-lane", {.kv = true});
  EXPECT_TRUE(oneLine(kv) && kv.find("key length") != std::string::npos) << kv;
  Kernel att = testutil::attentionKernel(4, 4, 128, 128, 64, false, ScalarType::F16);
  std::string at = refused(att, "sm_80", "", {.kv = true});  // attention's own refusals: gpu_runtime_sizes_test.cpp
  EXPECT_TRUE(oneLine(at) && at.find("key length") != std::string::npos) << at;

  // Sizes outside 1..the bound: the launch is refused, nothing runs.
  const TargetDesc& t = testutil::gpuTarget("sm_80");
  Kernel maxK = *buildGemm(spec(100, 72, 40, ScalarType::F16, false));
  auto g = compileGeneric(maxK, t, "strategy=mma-lane,VEC=8,BM=64,BN=64,BK=32,TM=32,TN=32,STAGES=3", {.m = true});
  ASSERT_TRUE(g.ok()) << g.error().str();
  for (int64_t m : {0, -3, 101}) {
    auto l = codegen::launchAtSizes(g->bin.launch, std::vector<int64_t>{m, 0, 0}.data());
    ASSERT_FALSE(l.ok()) << m;
    EXPECT_TRUE(oneLine(l.error().message) && l.error().message.find("outside 1..100") != std::string::npos) << l.error().message;
  }
  EXPECT_FALSE(codegen::launchAtSizes(g->bin.launch, nullptr).ok());
}
