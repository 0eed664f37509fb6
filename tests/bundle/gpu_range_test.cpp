// Tests a GPU dispatch rule end to end without a GPU: `bundle --dispatch` for sm_90 writes one
// shape-generic GEMM (runtime M: cubin + PTX) per config of the rule, the bundle's C runtime built
// with a plain `cc` answers every M of the range with its bucket's kernel (and says which), and
// tessera_run_dims launches it through the stand-in CUDA driver (fake_cuda.c) with the grid's row
// blocks computed from M and the sizes argument in device memory; the launched "kernel" is the
// mapped kernel on the emulator (exact allocation sizes: nothing may be touched past row M), whose
// outputs must match the reference. Outside the range: NULL and a message; no allocation leaks.
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "bundle/bundle.h"
#include "bundle_runtime_loader.h"
#include "bundle/range_dims.h"
#include "bundle/runtime/tessera_bundle.h"
#include "emulator/gpu_emu.h"
#include "codegen/gpu.h"
#include "ir/builders.h"
#include "ir/text.h"
#include "measure/records.h"
#include "targets/kernel_io.h"

using namespace tessera;
namespace fs = std::filesystem;

namespace {

using test::sym;

// The stand-in driver's kernel: records what the launch passed (the grid, a 24-byte device buffer
// holding the sizes) and runs the mapped kernel on the emulator with that grid.
struct Launched {
  std::shared_ptr<const codegen::MappedKernel> mapped;
  size_t (*bytesFrom)(const void*) = nullptr;
  void (*lastGrid)(unsigned*) = nullptr;
  std::vector<int64_t> sizesSeen;
  std::array<int64_t, 3> grid{};
  std::vector<std::string> problems;
};

extern "C" void runLaunched(void* ctx, void** params, int n) {
  auto* e = static_cast<Launched*>(ctx);
  unsigned g[3];
  e->lastGrid(g);
  e->grid = {int64_t(g[0]), int64_t(g[1]), int64_t(g[2])};
  const codegen::GpuLaunch& l = e->mapped->launch();
  std::vector<uint64_t> args(l.args.size(), 0);
  std::vector<emu::Extent> extents;
  for (int p = 0; p < n && p < int(l.kernelParams.size()); ++p) {
    args[size_t(l.kernelParams[size_t(p)])] = uint64_t(uintptr_t(params[p]));
    extents.push_back({params[p], e->bytesFrom(params[p]), "bundle buffer"});
    if (l.args[size_t(l.kernelParams[size_t(p)])].kind == codegen::GpuArg::Kind::Sizes && e->bytesFrom(params[p]) == 24) {
      const auto* s = static_cast<const int64_t*>(params[p]);
      e->sizesSeen.assign(s, s + 3);
    }
  }
  emu::Report r = e->mapped->run(args, extents, &e->grid);
  for (const auto& m : r.errors) e->problems.push_back(m);
  if (!r.ok && r.errors.empty()) e->problems.push_back("emulation failed");
}

}  // namespace

TEST(BundleGpuRange, DispatchRuleRunsEveryMThroughTheCRuntime) {
  if (std::system("cc --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "no C compiler";
  auto [setParams, setKernel, live, launches, bytesFrom, lastGrid, fake] = test::loadFakeCuda(FAKE_CUDA_PATH);
  ASSERT_NE(fake, nullptr) << dlerror();
  ASSERT_TRUE(setParams && setKernel && live && bytesFrom && lastGrid);

  const TargetDesc t = *getTarget("sm_90");
  ir::GemmSpec gs{.m = 100, .n = 72, .k = 40, .dtype = ir::ScalarType::F16, .epilogue = "relu(acc + bias)"};
  gs.shapes["bias"] = {72};
  ir::Kernel maxK = *ir::buildGemm(gs);
  // Two buckets, one per tensor-core strategy: mma-lane (32-row blocks) below 41, mma (64) above.
  bundle::RangeRuleFile f;
  f.rule.lo = 1;
  f.rule.hi = 100;
  f.rule.configs = {"BK=16,BM=32,BN=64,STAGES=2,TM=16,TN=32,VEC=8,strategy=mma-lane",
                    "BK=16,BM=64,BN=32,STAGES=1,TM=32,TN=16,VEC=8,strategy=mma"};
  f.rule.buckets = {{1, 40, 0}, {41, 100, 1}};
  f.kernelIr = ir::printKernel(maxK);
  f.kernelName = maxK.name;
  f.arch = "sm_90";
  const fs::path dir = fs::temp_directory_path() / ("tessera_gpu_range_" + std::to_string(getpid()));
  fs::remove_all(dir);
  bundle::BundleSettings s;
  s.targets = {t};
  s.outDir = (dir / "b").string();
  s.dispatch = {f};
  auto sum = bundle::writeBundle({}, s, {});
  ASSERT_TRUE(sum.ok()) << sum.error().str();
  EXPECT_EQ(sum->entries, 2);
  for (const std::string& file : {"gpu/" + maxK.name + "_range0.sm_90.cubin", "gpu/" + maxK.name + "_range1.sm_90.ptx"})
    EXPECT_TRUE(fs::exists(fs::path(s.outDir) / file)) << file;
  void* lib = test::loadBundleRuntime(s.outDir, (dir / "libbundle.so").string());
  ASSERT_NE(lib, nullptr);
  auto findDims = sym<const tessera_kernel* (*)(const char*, const int64_t*, int, const char*, const char*)>(lib, "tessera_find_dims");
  auto runDims = sym<tessera_status (*)(const tessera_kernel*, const int64_t*, int, void* const*)>(lib, "tessera_run_dims");
  auto cudaRun = sym<tessera_status (*)(const tessera_kernel*, void* const*, int, float*)>(lib, "tessera_cuda_run");
  auto lastDispatch = sym<tessera_status (*)(tessera_dispatch_info*)>(lib, "tessera_last_dispatch");
  auto message = sym<const char* (*)()>(lib, "tessera_last_message");
  ASSERT_TRUE(findDims && runDims && cudaRun && lastDispatch && message);

  // The launches the bundle holds, compiled the same way here (kernel parameters, the emulation).
  std::vector<codegen::GpuBinary> bins;
  std::vector<std::shared_ptr<const codegen::MappedKernel>> mapped;
  for (const auto& text : f.rule.configs) {
    auto bin = codegen::compileGpu(maxK, *ir::Config::parseAssignments(text), t, {.wantBinary = false, .runtime = {.m = true}});
    ASSERT_TRUE(bin.ok()) << bin.error().str();
    auto mk = codegen::compileMapped(*bin, t);
    ASSERT_TRUE(mk.ok()) << mk.error().str();
    bins.push_back(*bin);
    mapped.push_back(*mk);
  }
  for (int64_t m : {1, 2, 3, 17, 31, 40, 41, 64, 100}) {
    SCOPED_TRACE("M=" + std::to_string(m));
    const int64_t dims[3] = {m, 72, 40};
    const tessera_kernel* ck = findDims("gemm", dims, 3, "f16", "cuda");
    ASSERT_NE(ck, nullptr) << message();
    const int bucket = m <= 40 ? 0 : 1;
    tessera_dispatch_info info{};
    ASSERT_EQ(lastDispatch(&info), TESSERA_OK);
    EXPECT_EQ(info.in_range, 1);
    EXPECT_EQ(info.bucket, bucket);
    EXPECT_NE(std::string(message()).find("bucket " + std::to_string(bucket) + " of 2"), std::string::npos) << message();
    EXPECT_NE(std::string(message()).find(bucket ? "\"mma\"" : "\"mma-lane\""), std::string::npos) << message();
    ir::Kernel k = *bundle::kernelAtExtent(maxK, m);
    KernelIO io(k, 9);
    io.poisonOutputs();
    Launched ctx{mapped[size_t(bucket)], bytesFrom, lastGrid, {}, {}, {}};
    setParams(int(bins[size_t(bucket)].launch.kernelParams.size()));
    setKernel(runLaunched, &ctx);
    tessera_status st = runDims(ck, dims, 3, io.buffers());
    setKernel(nullptr, nullptr);
    ASSERT_EQ(st, TESSERA_OK) << message();
    EXPECT_TRUE(ctx.problems.empty()) << ctx.problems.front();
    const int64_t bm = bucket ? 64 : 32, bn = bucket ? 32 : 64;
    EXPECT_EQ(ctx.grid[0], (72 + bn - 1) / bn);
    EXPECT_EQ(ctx.grid[1], (m + bm - 1) / bm) << "the grid's row blocks follow the runtime M";
    EXPECT_EQ(ctx.sizesSeen, (std::vector<int64_t>{m, 0, 0})) << "the sizes argument reaches the kernel";
    auto cmp = io.check();
    ASSERT_TRUE(cmp.ok()) << cmp.error().str();
    EXPECT_TRUE(cmp->ok) << cmp->firstBad;
    EXPECT_EQ(live(), 0) << "device allocations leaked";
  }
  // Outside the range: no kernel, and the message says so; a run outside it is refused too.
  const int64_t out[3] = {101, 72, 40};
  EXPECT_EQ(findDims("gemm", out, 3, "f16", "cuda"), nullptr);
  EXPECT_NE(std::string(message()).find("outside the range"), std::string::npos) << message();
  const int64_t in[3] = {5, 72, 40};
  const tessera_kernel* ck = findDims("gemm", in, 3, "f16", "cuda");
  ASSERT_NE(ck, nullptr) << message();
  KernelIO io(maxK, 1);
  EXPECT_EQ(runDims(ck, out, 3, io.buffers()), TESSERA_ERR_ARGUMENT);
  EXPECT_NE(std::string(message()).find("outside its range"), std::string::npos) << message();
  // Without its M a shape-generic kernel does not run.
  EXPECT_EQ(cudaRun(ck, io.buffers(), 0, nullptr), TESSERA_ERR_ARGUMENT);
  EXPECT_NE(std::string(message()).find("shape-generic"), std::string::npos) << message();
  EXPECT_EQ(live(), 0);
  dlclose(lib);
  fs::remove_all(dir);
}

// The same for elementwise rows and attention's sequence length: one-bucket rules for sm_80 in one
// bundle; the C runtime finds each size's kernel, sizes its buffers from the runtime size, and
// launches it with the grid's blocks from it (elementwise: blocks of TPB*EPT vectors on grid.x;
// attention: query blocks on grid.x), the emulated kernel matching the reference.
TEST(BundleGpuRange, ElementwiseRowsAndAttentionSeqThroughTheCRuntime) {
  if (std::system("cc --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "no C compiler";
  auto [setParams, setKernel, live, launches, bytesFrom, lastGrid, fake] = test::loadFakeCuda(FAKE_CUDA_PATH);
  ASSERT_NE(fake, nullptr) << dlerror();
  ASSERT_TRUE(setParams && setKernel && live && bytesFrom && lastGrid);

  const TargetDesc t = *getTarget("sm_80");
  ir::ElementwiseSpec es;
  es.expr = "y = gelu(x * s + b)";
  es.shape = {90, 40};
  es.shapes = {{"s", {40}}, {"b", {90, 1}}};
  es.dtype = ir::ScalarType::F16;
  es.name = "ew_rows";
  ir::AttentionSpec as{.batch = 2, .heads = 2, .heads_kv = 1, .seq_q = 80, .seq_kv = 80, .head_dim = 32, .causal = true,
                       .dtype = ir::ScalarType::F16, .name = "attn_seq"};
  struct Rule {
    ir::Kernel maxK;
    const char* config;
    std::vector<int64_t> sizes;
  };
  std::vector<Rule> rules = {{*ir::buildElementwise(es), "EPT=2,GRID=0,TPB=32,VW=4", {1, 2, 3, 17, 33, 90}},
                             {*ir::buildAttention(as), "BK=16,BQ=32,STAGES=2,strategy=flash-mma", {1, 2, 17, 31, 33, 80}}};
  bundle::BundleSettings s;
  s.targets = {t};
  const fs::path dir = fs::temp_directory_path() / ("tessera_gpu_range2_" + std::to_string(getpid()));
  fs::remove_all(dir);
  s.outDir = (dir / "b").string();
  for (const Rule& r : rules) {
    bundle::RangeRuleFile f;
    f.rule.lo = 1;
    f.rule.hi = r.sizes.back();
    f.rule.dim = bundle::rangeDimName(r.maxK);
    f.rule.configs = {r.config};
    f.rule.buckets = {{1, r.sizes.back(), 0}};
    f.kernelIr = ir::printKernel(r.maxK);
    f.kernelName = r.maxK.name;
    f.arch = "sm_80";
    s.dispatch.push_back(f);
  }
  auto sum = bundle::writeBundle({}, s, {});
  ASSERT_TRUE(sum.ok()) << sum.error().str();
  EXPECT_EQ(sum->entries, 2);
  void* lib = test::loadBundleRuntime(s.outDir, (dir / "libbundle.so").string());
  ASSERT_NE(lib, nullptr);
  auto findDims = sym<const tessera_kernel* (*)(const char*, const int64_t*, int, const char*, const char*)>(lib, "tessera_find_dims");
  auto runDims = sym<tessera_status (*)(const tessera_kernel*, const int64_t*, int, void* const*)>(lib, "tessera_run_dims");
  auto message = sym<const char* (*)()>(lib, "tessera_last_message");
  ASSERT_TRUE(findDims && runDims && message);

  for (const Rule& r : rules) {
    auto bin = codegen::compileGpu(r.maxK, *ir::Config::parseAssignments(r.config), t, {.wantBinary = false, .runtime = {.m = true}});
    ASSERT_TRUE(bin.ok()) << bin.error().str();
    auto mk = codegen::compileMapped(*bin, t);
    ASSERT_TRUE(mk.ok()) << mk.error().str();
    const codegen::GpuLaunch::Runtime& rt = bin->launch.runtime;
    for (int64_t m : r.sizes) {
      SCOPED_TRACE(r.maxK.name + " size " + std::to_string(m));
      ir::Kernel k = *bundle::kernelAtExtent(r.maxK, m);
      const cache::HardKey key = measure::hardKeyFor(k, t);
      const tessera_kernel* ck = findDims(key.family.c_str(), key.shape.data(), int(key.shape.size()), key.dtype.c_str(), "cuda");
      ASSERT_NE(ck, nullptr) << message();
      KernelIO io(k, 9);
      io.poisonOutputs();
      Launched ctx{*mk, bytesFrom, lastGrid, {}, {}, {}};
      setParams(int(bin->launch.kernelParams.size()));
      setKernel(runLaunched, &ctx);
      tessera_status st = runDims(ck, key.shape.data(), int(key.shape.size()), io.buffers());
      setKernel(nullptr, nullptr);
      ASSERT_EQ(st, TESSERA_OK) << message();
      EXPECT_TRUE(ctx.problems.empty()) << ctx.problems.front();
      auto expect = codegen::launchAtSizes(bin->launch, std::vector<int64_t>{m, 0, 0}.data());
      ASSERT_TRUE(expect.ok());
      EXPECT_EQ(ctx.grid, expect->grid) << "the C runtime's grid is the code generator's at this size";
      EXPECT_EQ(ctx.grid[size_t(rt.rowAxis)], std::min(bin->launch.grid[size_t(rt.rowAxis)],
                                                        (m * rt.unitsPerRow + rt.rowsPerBlock - 1) / rt.rowsPerBlock));
      EXPECT_EQ(ctx.sizesSeen.empty() ? -1 : ctx.sizesSeen[0], m) << "the sizes argument reaches the kernel";
      auto cmp = io.check();
      ASSERT_TRUE(cmp.ok()) << cmp.error().str();
      EXPECT_TRUE(cmp->ok) << cmp->firstBad;
      EXPECT_EQ(live(), 0) << "device allocations leaked";
    }
  }
  dlclose(lib);
  fs::remove_all(dir);
}
