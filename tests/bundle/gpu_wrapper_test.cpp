// Tests the GPU launch path of a bundle's C runtime (tessera_cuda_run: upload, padded and
// transposed copies, zeroed workspaces, one launch per batch, copy-back, download) without a GPU,
// against a stand-in CUDA driver (fake_cuda.c, loaded under the soname libcuda.so.1) whose memory
// is host memory:
//  * with the GPU kernel's emulated form as the "kernel" (codegen::compileEmulatedKernel: the same
//    kernel body, run on this CPU), the bundle's outputs must match the reference evaluator;
//  * with a "kernel" that rewrites every byte its parameters can see from a hash of all of them,
//    the bundle's outputs must be byte-identical to Tessera's own C++ runner's
//    (codegen::openCudaRunner through the same stand-in): the two wrappers behave alike.
// The stand-in counts allocations: none may leak. What only hardware shows (the driver's module
// loading of real cubins, launch limits) stays for a machine with a GPU.
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "bundle/bundle.h"
#include "bundle_runtime_loader.h"
#include "emulated_launch.h"
#include "bundle/runtime/tessera_bundle.h"
#include "emulator/gpu_emu.h"
#include "codegen/gpu.h"
#include "codegen/gpu_runner.h"
#include "ir/buffer.h"
#include "ir/builders.h"
#include "ir/reference.h"
#include "measure/records.h"
#include "search/space.h"

using namespace tessera;
namespace fs = std::filesystem;

namespace {

std::vector<ir::Kernel> kernels() {
  std::vector<ir::Kernel> v;
  ir::GemmSpec g;
  g.m = 200; g.n = 136; g.k = 70; g.epilogue = "relu(acc + bias)"; g.shapes["bias"] = {136};
  v.push_back(*ir::buildGemm(g));
  ir::GemmSpec t;
  t.batch = 3; t.m = 65; t.n = 33; t.k = 40; t.transA = true; t.transB = true; t.dtype = ir::ScalarType::F16;
  v.push_back(*ir::buildGemm(t));
  ir::GemmSpec b;
  b.m = 64; b.n = 64; b.k = 64; b.beta = 0.5; b.batch = 2;
  v.push_back(*ir::buildGemm(b));
  ir::GemmSpec w;  // no epilogue, padded: a workspace copied back per batch
  w.batch = 2; w.m = 100; w.n = 72; w.k = 48; w.transA = true;
  v.push_back(*ir::buildGemm(w));
  ir::GemmSpec z;  // no epilogue, no padding: the output itself, zeroed first
  z.m = 64; z.n = 64; z.k = 64;
  v.push_back(*ir::buildGemm(z));
  ir::AttentionSpec a;
  a.batch = 2; a.heads = 4; a.heads_kv = 2; a.seq_q = 100; a.head_dim = 64; a.causal = true;
  v.push_back(*ir::buildAttention(a));
  ir::AttentionSpec h;  // f16, head_dim 128: tensor-core attention with > 48 KB of dynamic shared memory
  h.heads = 2; h.heads_kv = 1; h.seq_q = 70; h.head_dim = 128; h.dtype = ir::ScalarType::F16;
  v.push_back(*ir::buildAttention(h));
  ir::ElementwiseSpec e;
  e.expr = "y = gelu(x * s + b)"; e.shape = {33, 64}; e.shapes = {{"s", {64}}, {"b", {64}}};
  v.push_back(*ir::buildElementwise(e));
  return v;
}

using test::sym;

using bundle_test::callEmulated;
using bundle_test::Emulated;

}  // namespace

TEST(BundleGpuWrapper, CRuntimeDrivesTheDriverLikeTheCxxRunner) {
  if (std::system("cc --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "no C compiler";
  // The stand-in driver first: later dlopen("libcuda.so.1") calls find it by its soname.
  auto [setParams, setKernel, live, launches, bytesFrom, lastGrid, fake] = test::loadFakeCuda(FAKE_CUDA_PATH);
  ASSERT_NE(fake, nullptr) << dlerror();
  ASSERT_TRUE(setParams && setKernel && live && launches && bytesFrom);

  const TargetDesc t = *getTarget("sm_90");
  const fs::path dir = fs::temp_directory_path() / ("tessera_gpu_wrapper_" + std::to_string(getpid()));
  fs::remove_all(dir);
  std::vector<bundle::KernelRequest> reqs;
  for (auto& k : kernels()) reqs.push_back({k, "test"});
  bundle::BundleSettings s;
  s.targets = {t};
  s.outDir = (dir / "b").string();
  auto sum = bundle::writeBundle(reqs, s, {});
  ASSERT_TRUE(sum.ok()) << sum.error().str();
  ASSERT_EQ(sum->entries, int(reqs.size()));
  void* lib = test::loadBundleRuntime(s.outDir, (dir / "libbundle.so").string());
  ASSERT_NE(lib, nullptr);
  auto find = sym<const tessera_kernel* (*)(const char*, const char*, const char*, const char*)>(lib, "tessera_find");
  auto cudaRun = sym<tessera_status (*)(const tessera_kernel*, void* const*, int, float*)>(lib, "tessera_cuda_run");
  auto message = sym<const char* (*)()>(lib, "tessera_last_message");
  ASSERT_TRUE(find && cudaRun && message);

  auto runner = codegen::openCudaRunner();
  ASSERT_TRUE(runner.ok()) << runner.error().str();
  EXPECT_EQ((*runner)->arch(), "sm_90");
  bool packed = false, transposed = false, copyBack = false, batched = false, zeroFirst = false, bigShared = false;
  for (const auto& req : reqs) {
    const ir::Kernel& k = req.kernel;
    SCOPED_TRACE(k.name);
    // The config the bundle compiled (no store: the space's default).
    auto bin = codegen::compileGpu(k, search::makeSpace(k, t)->defaults(), t);
    ASSERT_TRUE(bin.ok()) << bin.error().str();
    for (const auto& a : bin->launch.args) {
      packed |= a.kind == codegen::GpuArg::Kind::Packed;
      transposed |= a.transposed;
      copyBack |= a.copyBack;
      zeroFirst |= a.zeroFirst;
    }
    batched |= bin->launch.batches > 1;
    bigShared |= bin->launch.dynamicSharedBytes > 48 * 1024;  // the driver's opt-in, and the launch's size
    setParams(int(bin->launch.kernelParams.size()));
    auto ins = ir::makeInputs(k, 7);
    auto outsCxx = ir::makeOutputs(k), outsC = ir::makeOutputs(k);
    std::vector<void*> bufCxx, bufC;
    for (auto& x : ins) { bufCxx.push_back(x.data()); bufC.push_back(x.data()); }
    for (size_t i = 0; i < outsCxx.size(); ++i) {
      std::memset(outsCxx[i].data(), 0x7f, outsCxx[i].bytes());
      std::memset(outsC[i].data(), 0x7f, outsC[i].bytes());
      bufCxx.push_back(outsCxx[i].data());
      bufC.push_back(outsC[i].data());
    }
    int before = launches();
    auto us = (*runner)->run(*bin, k, bufCxx.data(), 1);
    ASSERT_TRUE(us.ok()) << us.error().str();
    const std::string shape = cache::formatShape(measure::hardKeyFor(k, t).shape);
    const tessera_kernel* ck = find(k.name.c_str(), shape.c_str(), std::string(ir::typeName(k.inputs()[0]->dtype)).c_str(), "cuda");
    ASSERT_NE(ck, nullptr) << message();
    float ms = 0;
    ASSERT_EQ(cudaRun(ck, bufC.data(), 0, &ms), TESSERA_OK) << message();
    EXPECT_EQ(launches() - before, 2 * bin->launch.batches);
    EXPECT_FLOAT_EQ(ms, float(bin->launch.batches));  // 1 ms per launch from the stand-in's events
    for (size_t i = 0; i < outsCxx.size(); ++i) {
      EXPECT_EQ(std::memcmp(outsCxx[i].data(), outsC[i].data(), outsCxx[i].bytes()), 0) << "output " << i << " differs";
      std::vector<unsigned char> poison(outsC[i].bytes(), 0x7f);
      EXPECT_NE(std::memcmp(outsC[i].data(), poison.data(), poison.size()), 0) << "output " << i << " never written";
    }
    EXPECT_EQ(live(), 0) << "device allocations leaked";

    // The kernel's emulated form as the device kernel: the bundle's results against the reference.
    Emulated ctx{nullptr, nullptr, bin->launch.kernelParams, std::vector<unsigned char>(1 << 22, 0), bytesFrom, {}};
    auto em = codegen::compileEmulatedKernel(k, search::makeSpace(k, t)->defaults(), t);
    if (em.ok()) {
      ctx.kernel = *em;
    } else {
      auto mk = codegen::compileMapped(*bin, t);
      ASSERT_TRUE(mk.ok()) << em.error().str() << "; mapped: " << mk.error().str();
      ctx.mapped = *mk;
    }
    ASSERT_EQ((ctx.kernel ? ctx.kernel->launch() : ctx.mapped->launch()).args.size(), bin->launch.args.size());
    setKernel(callEmulated, &ctx);
    auto outs = ir::makeOutputs(k);
    std::vector<void*> bufs;
    std::vector<const ir::Buffer*> inPtrs, outPtrs;
    for (auto& x : ins) { bufs.push_back(x.data()); inPtrs.push_back(&x); }
    for (auto& x : outs) { std::memset(x.data(), 0x7f, x.bytes()); bufs.push_back(x.data()); outPtrs.push_back(&x); }
    ASSERT_EQ(cudaRun(ck, bufs.data(), 0, nullptr), TESSERA_OK) << message();
    setKernel(nullptr, nullptr);
    EXPECT_TRUE(ctx.problems.empty()) << ctx.problems.front();
    auto ref = ir::evaluateReference(k, inPtrs);
    ASSERT_TRUE(ref.ok());
    auto cmp = ir::compareOutputs(k, *ref, outPtrs);
    EXPECT_TRUE(cmp.ok) << "max rel err " << cmp.maxRelErr << ", first bad " << cmp.firstBad;
    EXPECT_EQ(live(), 0) << "device allocations leaked";
  }
  // The kernels above must exercise every step of the wrapper.
  EXPECT_TRUE(packed && transposed && copyBack && batched && zeroFirst && bigShared)
      << packed << transposed << copyBack << batched << zeroFirst << bigShared;
  dlclose(lib);
  fs::remove_all(dir);
}

namespace {

Emulated* encoding = nullptr;  // the emulated launch whose maps are being encoded

// The stand-in driver's tensor-map encoder for emulated launches: the emulated device's own form.
extern "C" int encodeForEmulator(void* out, int type, unsigned rank, void* global, const unsigned long long* dims,
                                 const unsigned long long* strides, const unsigned* box, int swizzle) {
  codegen::TensorMapSpec m;
  m.rank = int(rank);
  for (unsigned d = 0; d < rank && d < 3; ++d) {
    m.dims[d] = int64_t(dims[d]);
    m.box[d] = int64_t(box[d]);
    if (d > 0) m.strides[d - 1] = int64_t(strides[d - 1]);
  }
  m.swizzleBytes = swizzle == 3 ? 128 : swizzle == 2 ? 64 : swizzle == 1 ? 32 : 0;
  const ir::ScalarType dt = type == 6 ? ir::ScalarType::F16 : type == 9 ? ir::ScalarType::BF16 : ir::ScalarType::F32;
  if (encoding) encoding->mapGlobals.push_back(global);
  return codegen::encodeEmulatedTensorMap(m, dt, uint64_t(uintptr_t(global)), out).ok() ? 0 : 1;
}

}  // namespace

// sm_90a's GEMM default is the wgmma kernel fed by TMA: its launch takes tensor maps, which the C
// runtime encodes per launch (cuTensorMapEncodeTiled, after the buffers they describe are
// placed) and passes as 128-byte device copies. Through the stand-in driver: byte-identical to the
// C++ runner's behaviour, and with the emulated device's map form, the reference's results.
TEST(BundleGpuWrapper, CRuntimeEncodesTensorMapsForTmaKernels) {
  if (std::system("cc --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "no C compiler";
  auto [setParams, setKernel, live, launches, bytesFrom, lastGrid, fake] = test::loadFakeCuda(FAKE_CUDA_PATH);
  ASSERT_NE(fake, nullptr) << dlerror();
  auto setEncoder = sym<void (*)(decltype(&encodeForEmulator))>(fake, "fake_cuda_set_encoder");
  auto mapsEncoded = sym<int (*)()>(fake, "fake_cuda_maps_encoded");
  ASSERT_TRUE(setParams && setKernel && setEncoder && mapsEncoded && live && bytesFrom);

  const TargetDesc t = *getTarget("sm_90a");
  std::vector<ir::Kernel> ks;
  ir::GemmSpec g;
  g.m = 200; g.n = 136; g.k = 72; g.dtype = ir::ScalarType::F16; g.epilogue = "relu(acc + bias)"; g.shapes["bias"] = {136};
  ks.push_back(*ir::buildGemm(g));
  ir::GemmSpec bb;  // batched bf16, transposed B: packed before TMA reads it
  bb.batch = 2; bb.m = 64; bb.n = 80; bb.k = 64; bb.transB = true; bb.dtype = ir::ScalarType::BF16;
  ks.push_back(*ir::buildGemm(bb));
  const fs::path dir = fs::temp_directory_path() / ("tessera_gpu_tma_" + std::to_string(getpid()));
  fs::remove_all(dir);
  std::vector<bundle::KernelRequest> reqs;
  for (auto& k : ks) reqs.push_back({k, "test"});
  bundle::BundleSettings s;
  s.targets = {t};
  s.outDir = (dir / "b").string();
  auto sum = bundle::writeBundle(reqs, s, {});
  ASSERT_TRUE(sum.ok()) << sum.error().str();
  void* lib = test::loadBundleRuntime(s.outDir, (dir / "libbundle.so").string());
  ASSERT_NE(lib, nullptr);
  auto find = sym<const tessera_kernel* (*)(const char*, const char*, const char*, const char*)>(lib, "tessera_find");
  auto cudaRun = sym<tessera_status (*)(const tessera_kernel*, void* const*, int, float*)>(lib, "tessera_cuda_run");
  auto message = sym<const char* (*)()>(lib, "tessera_last_message");
  ASSERT_TRUE(find && cudaRun && message);
  auto runner = codegen::openCudaRunner();
  ASSERT_TRUE(runner.ok()) << runner.error().str();
  for (const auto& k : ks) {
    SCOPED_TRACE(k.name);
    auto bin = codegen::compileGpu(k, search::makeSpace(k, t)->defaults(), t);
    ASSERT_TRUE(bin.ok()) << bin.error().str();
    int maps = 0;
    for (const auto& a : bin->launch.args) maps += a.kind == codegen::GpuArg::Kind::TensorMap;
    ASSERT_EQ(maps, 2) << "sm_90a's default GEMM is expected to be the TMA-fed wgmma kernel";
    setParams(int(bin->launch.kernelParams.size()));
    const std::string shape = cache::formatShape(measure::hardKeyFor(k, t).shape);
    const tessera_kernel* ck = find(k.name.c_str(), shape.c_str(), std::string(ir::typeName(k.inputs()[0]->dtype)).c_str(), "cuda");
    ASSERT_NE(ck, nullptr) << message();
    auto ins = ir::makeInputs(k, 7);
    // Hash kernel: the C runtime and the C++ runner pass the same maps (geometry and buffers).
    {
      auto outsCxx = ir::makeOutputs(k), outsC = ir::makeOutputs(k);
      std::vector<void*> bufCxx, bufC;
      for (auto& x : ins) { bufCxx.push_back(x.data()); bufC.push_back(x.data()); }
      for (size_t i = 0; i < outsCxx.size(); ++i) { bufCxx.push_back(outsCxx[i].data()); bufC.push_back(outsC[i].data()); }
      auto us = (*runner)->run(*bin, k, bufCxx.data(), 1);
      ASSERT_TRUE(us.ok()) << us.error().str();
      const int before = mapsEncoded();
      ASSERT_EQ(cudaRun(ck, bufC.data(), 0, nullptr), TESSERA_OK) << message();
      EXPECT_EQ(mapsEncoded() - before, 2 * int(bin->launch.batches));
      for (size_t i = 0; i < outsCxx.size(); ++i)
        EXPECT_EQ(std::memcmp(outsCxx[i].data(), outsC[i].data(), outsCxx[i].bytes()), 0) << "output " << i << " differs";
      EXPECT_EQ(live(), 0) << "device allocations leaked";
    }
    // The mapped kernel on the emulator, its maps in the emulated device's form: the reference.
    auto mk = codegen::compileMapped(*bin, t);
    ASSERT_TRUE(mk.ok()) << mk.error().str();
    Emulated ctx{nullptr, *mk, bin->launch.kernelParams, std::vector<unsigned char>(1 << 22, 0), bytesFrom, {}};
    setKernel(callEmulated, &ctx);
    setEncoder(encodeForEmulator);
    encoding = &ctx;
    auto outs = ir::makeOutputs(k);
    std::vector<void*> bufs;
    std::vector<const ir::Buffer*> inPtrs, outPtrs;
    for (auto& x : ins) { bufs.push_back(x.data()); inPtrs.push_back(&x); }
    for (auto& x : outs) { std::memset(x.data(), 0x7f, x.bytes()); bufs.push_back(x.data()); outPtrs.push_back(&x); }
    tessera_status st = cudaRun(ck, bufs.data(), 0, nullptr);
    setKernel(nullptr, nullptr);
    setEncoder(nullptr);
    encoding = nullptr;
    ASSERT_EQ(st, TESSERA_OK) << message();
    EXPECT_TRUE(ctx.problems.empty()) << ctx.problems.front();
    auto ref = ir::evaluateReference(k, inPtrs);
    ASSERT_TRUE(ref.ok());
    auto cmp = ir::compareOutputs(k, *ref, outPtrs);
    EXPECT_TRUE(cmp.ok) << "max rel err " << cmp.maxRelErr << ", first bad " << cmp.firstBad;
    EXPECT_EQ(live(), 0) << "device allocations leaked";
  }
  dlclose(lib);
  fs::remove_all(dir);
}
