// Tests tessera_cuda_launch, the bundle runtime's launch on a caller's stream and device memory
// (what tessera.torch uses for CUDA tensors), against the stand-in CUDA driver (fake_cuda.c): the
// launch's results (the GPU kernel's emulated form as the device kernel) match the reference
// evaluator with operands packed and transposed, workspaces zeroed and copied back on the device;
// every operation goes to the caller's stream, with no synchronisation, host copy or allocation;
// and the call records into a stream capture that, replayed, gives the same bytes. Negative
// controls: the host-memory path (tessera_cuda_run) is caught by the same counters and refused
// during capture, and swapped K and V buffers give results the reference rejects.
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "bundle/bundle.h"
#include "bundle/runtime/tessera_bundle.h"
#include "bundle_runtime_loader.h"
#include "emulated_launch.h"
#include "emulator/gpu_emu.h"
#include "codegen/gpu.h"
#include "ir/buffer.h"
#include "ir/builders.h"
#include "ir/reference.h"
#include "measure/records.h"
#include "search/space.h"

using namespace tessera;
namespace fs = std::filesystem;

namespace {

std::vector<ir::Kernel> streamKernels() {
  std::vector<ir::Kernel> v;
  ir::GemmSpec l;  // nn.Linear + GELU: B is the weight [N, K], transposed (packed row by row)
  l.m = 64; l.n = 96; l.k = 40; l.transB = true; l.epilogue = "gelu(acc + bias)"; l.shapes["bias"] = {96};
  v.push_back(*ir::buildGemm(l));
  ir::GemmSpec w;  // batched, A transposed (packed column by column), a workspace copied back per batch
  w.batch = 2; w.m = 100; w.n = 72; w.k = 48; w.transA = true;
  v.push_back(*ir::buildGemm(w));
  ir::AttentionSpec a;
  a.heads = 2; a.heads_kv = 1; a.seq_q = 48; a.head_dim = 32; a.causal = true;
  v.push_back(*ir::buildAttention(a));
  ir::ElementwiseSpec e;
  e.expr = "y = gelu(x + b)"; e.shape = {33, 64}; e.shapes = {{"b", {64}}};
  v.push_back(*ir::buildElementwise(e));
  return v;
}

using bundle_test::callEmulated;
using bundle_test::Emulated;

using test::sym;

}  // namespace

TEST(BundleGpuStream, LaunchesOnTheCallersStreamAndRecordsIntoACapture) {
  if (std::system("cc --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "no C compiler";
  auto fake = test::loadFakeCuda(FAKE_CUDA_PATH);
  ASSERT_NE(fake.lib, nullptr) << dlerror();
  auto memAlloc = sym<int (*)(unsigned long long*, size_t)>(fake.lib, "cuMemAlloc_v2");
  auto memFree = sym<int (*)(unsigned long long)>(fake.lib, "cuMemFree_v2");
  auto expectStream = sym<void (*)(void*)>(fake.lib, "fake_cuda_expect_stream");
  auto capture = sym<void (*)(int)>(fake.lib, "fake_cuda_capture");
  auto replay = sym<int (*)()>(fake.lib, "fake_cuda_replay");
  auto counts = sym<void (*)(int*)>(fake.lib, "fake_cuda_counts");
  ASSERT_TRUE(memAlloc && memFree && expectStream && capture && replay && counts && fake.setKernel);

  const TargetDesc t = *getTarget("sm_90");
  const fs::path dir = fs::temp_directory_path() / ("tessera_gpu_stream_" + std::to_string(getpid()));
  fs::remove_all(dir);
  std::vector<bundle::KernelRequest> reqs;
  for (auto& k : streamKernels()) reqs.push_back({k, "test"});
  bundle::BundleSettings s;
  s.targets = {t};
  s.outDir = (dir / "b").string();
  auto sum = bundle::writeBundle(reqs, s, {});
  ASSERT_TRUE(sum.ok()) << sum.error().str();
  void* lib = test::loadBundleRuntime(s.outDir, (dir / "libbundle.so").string());
  ASSERT_NE(lib, nullptr);
  auto findDims = sym<const tessera_kernel* (*)(const char*, const int64_t*, int, const char*, const char*)>(lib, "tessera_find_dims");
  auto info = sym<tessera_status (*)(const tessera_kernel*, tessera_kernel_info*)>(lib, "tessera_info");
  auto wsBytes = sym<tessera_status (*)(const tessera_kernel*, const int64_t*, int, size_t*)>(lib, "tessera_cuda_workspace_bytes");
  auto launch = sym<tessera_status (*)(const tessera_kernel*, const int64_t*, int, void* const*, void*, void*, int)>(lib, "tessera_cuda_launch");
  auto cudaRun = sym<tessera_status (*)(const tessera_kernel*, void* const*, int, float*)>(lib, "tessera_cuda_run");
  auto message = sym<const char* (*)()>(lib, "tessera_last_message");
  auto transposedOperand =
      sym<tessera_status (*)(const tessera_kernel*, const int64_t*, int, int, int64_t*)>(lib, "tessera_cuda_transposed_operand");
  auto launchPacked = sym<tessera_status (*)(const tessera_kernel*, const int64_t*, int, void* const*, void* const*, void*, void*, int)>(
      lib, "tessera_cuda_launch_packed");
  auto streamOps = sym<int (*)()>(fake.lib, "fake_cuda_stream_ops");
  ASSERT_TRUE(findDims && info && wsBytes && launch && cudaRun && message && transposedOperand && launchPacked && streamOps);
  int callerTransposed = 0;
  auto ctxRetains = sym<int (*)()>(fake.lib, "fake_cuda_ctx_retains");
  ASSERT_TRUE(ctxRetains);
  const int retainsBefore = ctxRetains();

  void* const stream = reinterpret_cast<void*>(uintptr_t(0x5eed0));
  expectStream(stream);
  auto device = [&](size_t n) {
    unsigned long long p = 0;
    EXPECT_EQ(memAlloc(&p, n), 0);
    return p;
  };
  auto delta = [&](const int* before) {
    int now[5];
    counts(now);
    std::vector<int> d;
    for (int i = 0; i < 5; ++i) d.push_back(now[i] - before[i]);
    return d;  // syncs, host copies, allocations, wrong stream, refused in capture
  };
  bool transposed = false, copyBack = false;
  for (const auto& req : reqs) {
    const ir::Kernel& k = req.kernel;
    SCOPED_TRACE(k.name);
    auto bin = codegen::compileGpu(k, search::makeSpace(k, t)->defaults(), t);
    ASSERT_TRUE(bin.ok()) << bin.error().str();
    for (const auto& a : bin->launch.args) {
      transposed |= a.kind == codegen::GpuArg::Kind::Packed && a.transposed;
      copyBack |= a.copyBack;
    }
    fake.setParams(int(bin->launch.kernelParams.size()));
    const cache::HardKey key = measure::hardKeyFor(k, t);
    const std::vector<int64_t> dims = key.shape;
    const tessera_kernel* ck = findDims(k.name.c_str(), dims.data(), int(dims.size()),
                                        std::string(ir::typeName(k.inputs()[0]->dtype)).c_str(), "sm_90");
    ASSERT_NE(ck, nullptr) << message();
    size_t ws = 0;
    ASSERT_EQ(wsBytes(ck, dims.data(), int(dims.size()), &ws), TESSERA_OK) << message();

    auto ins = ir::makeInputs(k, 11);
    auto outs = ir::makeOutputs(k);
    std::vector<unsigned long long> dev;
    std::vector<void*> bufs;
    for (auto& x : ins) {
      dev.push_back(device(x.bytes()));
      std::memcpy(reinterpret_cast<void*>(dev.back()), x.data(), x.bytes());  // the stand-in's memory is the host's
    }
    for (auto& x : outs) {
      dev.push_back(device(x.bytes()));
      std::memset(reinterpret_cast<void*>(dev.back()), 0x7f, x.bytes());
    }
    for (auto p : dev) bufs.push_back(reinterpret_cast<void*>(p));
    const unsigned long long wsRaw = ws ? device(ws + 256) : 0, wsp = (wsRaw + 255) / 256 * 256;  // the runtime asks 256-byte alignment

    Emulated ctx{nullptr, nullptr, bin->launch.kernelParams, std::vector<unsigned char>(1 << 22, 0), fake.bytesFrom, {}};
    auto em = codegen::compileEmulatedKernel(k, search::makeSpace(k, t)->defaults(), t);
    if (em.ok()) {
      ctx.kernel = *em;
    } else {
      auto mk = codegen::compileMapped(*bin, t);
      ASSERT_TRUE(mk.ok()) << em.error().str() << "; mapped: " << mk.error().str();
      ctx.mapped = *mk;
    }
    fake.setKernel(callEmulated, &ctx);
    std::vector<const ir::Buffer*> inPtrs;
    for (auto& x : ins) inPtrs.push_back(&x);
    auto ref = ir::evaluateReference(k, inPtrs);
    ASSERT_TRUE(ref.ok());
    auto matches = [&]() {
      std::vector<const ir::Buffer*> outPtrs;
      for (size_t i = 0; i < outs.size(); ++i) {
        std::memcpy(outs[i].data(), bufs[ins.size() + i], outs[i].bytes());
        outPtrs.push_back(&outs[i]);
      }
      return ir::compareOutputs(k, *ref, outPtrs).ok;
    };

    // Eagerly on the stream: the reference's results, nothing but stream operations.
    int before[5];
    counts(before);
    ASSERT_EQ(launch(ck, dims.data(), int(dims.size()), bufs.data(), reinterpret_cast<void*>(wsp), stream, 0), TESSERA_OK) << message();
    EXPECT_EQ(delta(before), (std::vector<int>{0, 0, 0, 0, 0}));
    EXPECT_TRUE(matches());
    EXPECT_TRUE(ctx.problems.empty()) << ctx.problems.front();
    std::vector<std::vector<unsigned char>> eager;
    for (size_t i = 0; i < outs.size(); ++i) {
      auto* p = static_cast<unsigned char*>(bufs[ins.size() + i]);
      eager.emplace_back(p, p + outs[i].bytes());
      std::memset(p, 0x7f, outs[i].bytes());
    }
    // Captured: nothing runs until the replay, which writes the eager bytes.
    counts(before);
    capture(1);
    tessera_status st = launch(ck, dims.data(), int(dims.size()), bufs.data(), reinterpret_cast<void*>(wsp), stream, 0);
    capture(0);
    ASSERT_EQ(st, TESSERA_OK) << message();
    EXPECT_EQ(delta(before), (std::vector<int>{0, 0, 0, 0, 0}));
    EXPECT_EQ(static_cast<unsigned char*>(bufs[ins.size()])[0], 0x7f) << "a captured launch ran at capture";
    EXPECT_GT(replay(), 0);
    for (size_t i = 0; i < outs.size(); ++i)
      EXPECT_EQ(std::memcmp(bufs[ins.size() + i], eager[i].data(), eager[i].size()), 0) << "replayed output " << i << " differs";

    // The caller's transposed copies (tessera_cuda_launch_packed): the reference's results with
    // none of the runtime's strided copies (one stream operation per copied row or column).
    std::vector<void*> packed(bufs.size(), nullptr);
    std::vector<unsigned long long> packedDev;
    std::vector<size_t> packedElem;
    int64_t copies = 0;
    for (size_t ti = 0; ti < bufs.size(); ++ti) {
      int64_t lay[5] = {-1, -1, -1, -1, -1};
      ASSERT_EQ(transposedOperand(ck, dims.data(), int(dims.size()), int(ti), lay), TESSERA_OK) << message();
      if (lay[0] == 0) continue;
      ASSERT_LT(ti, ins.size()) << "an output read transposed";
      const int64_t S = lay[0], rows = lay[1], cols = lay[2], prows = lay[3], pcols = lay[4];
      ASSERT_TRUE(S > 0 && rows > 0 && cols > 0 && prows >= rows && pcols >= cols) << S << " " << rows << " " << cols;
      const size_t es = ins[ti].bytes() / size_t(S * rows * cols);
      ASSERT_EQ(ins[ti].bytes(), size_t(S * rows * cols) * es);
      const unsigned long long p = device(size_t(S * prows * pcols) * es);
      auto* dst = reinterpret_cast<unsigned char*>(p);
      const auto* src = static_cast<const unsigned char*>(ins[ti].data());
      std::memset(dst, 0, size_t(S * prows * pcols) * es);
      for (int64_t b = 0; b < S; ++b)
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < cols; ++c)
            std::memcpy(dst + size_t((b * prows + r) * pcols + c) * es, src + size_t((b * cols + c) * rows + r) * es, es);
      packed[ti] = dst;
      packedDev.push_back(p);
      packedElem.push_back(es);
      copies += S * std::min(rows, cols) + S;  // and the memset zeroing each launch's copy (one slice each here)
    }
    if (copies > 0) {
      ++callerTransposed;
      for (size_t i = 0; i < outs.size(); ++i) std::memset(bufs[ins.size() + i], 0x7f, outs[i].bytes());
      int ops = streamOps();
      ASSERT_EQ(launch(ck, dims.data(), int(dims.size()), bufs.data(), reinterpret_cast<void*>(wsp), stream, 0), TESSERA_OK) << message();
      const int runtimeCopies = streamOps() - ops;
      for (size_t i = 0; i < outs.size(); ++i) std::memset(bufs[ins.size() + i], 0x7f, outs[i].bytes());
      counts(before);
      ops = streamOps();
      ASSERT_EQ(launchPacked(ck, dims.data(), int(dims.size()), bufs.data(), packed.data(), reinterpret_cast<void*>(wsp), stream, 0),
                TESSERA_OK) << message();
      EXPECT_EQ(runtimeCopies - (streamOps() - ops), copies) << runtimeCopies << " operations, " << streamOps() - ops << " with the copies given";
      EXPECT_EQ(delta(before), (std::vector<int>{0, 0, 0, 0, 0}));
      EXPECT_TRUE(matches());
      // Negative control: a transposed copy of other data gives results the reference rejects.
      for (size_t i = 0; i < packedDev.size(); ++i) reinterpret_cast<unsigned char*>(packedDev[i])[packedElem[i] - 1] ^= 0x40;  // an exponent bit
      ASSERT_EQ(launchPacked(ck, dims.data(), int(dims.size()), bufs.data(), packed.data(), reinterpret_cast<void*>(wsp), stream, 0),
                TESSERA_OK) << message();
      EXPECT_FALSE(matches());
      // A copy the kernel's 16-byte reads cannot use: one error naming it.
      std::vector<void*> skewed = packed;
      for (auto& q : skewed)
        if (q) q = static_cast<unsigned char*>(q) + 4;
      EXPECT_EQ(launchPacked(ck, dims.data(), int(dims.size()), bufs.data(), skewed.data(), reinterpret_cast<void*>(wsp), stream, 0),
                TESSERA_ERR_ARGUMENT);
      EXPECT_NE(std::string(message()).find("16-byte aligned"), std::string::npos) << message();
    }
    for (auto p : packedDev) memFree(p);

    // Negative controls: the host-memory path is caught by the counters and refused in a capture.
    std::vector<void*> host;
    for (auto& x : ins) host.push_back(x.data());
    for (auto& x : outs) host.push_back(x.data());
    counts(before);
    ASSERT_EQ(cudaRun(ck, host.data(), 0, nullptr), TESSERA_OK) << message();
    auto d = delta(before);
    EXPECT_TRUE(d[0] > 0 && d[1] > 0 && d[2] > 0 && d[3] > 0) << d[0] << d[1] << d[2] << d[3];
    capture(1);
    EXPECT_NE(cudaRun(ck, host.data(), 0, nullptr), TESSERA_OK);
    capture(0);
    if (ws) {  // a launch that needs a workspace refuses to run without one, or on a misaligned one
      EXPECT_EQ(launch(ck, dims.data(), int(dims.size()), bufs.data(), nullptr, stream, 0), TESSERA_ERR_ARGUMENT);
      EXPECT_NE(std::string(message()).find("workspace"), std::string::npos) << message();
      EXPECT_EQ(launch(ck, dims.data(), int(dims.size()), bufs.data(), reinterpret_cast<void*>(wsp + 64), stream, 0),
                TESSERA_ERR_ARGUMENT);
    }
    if (key.family == "attention") {  // K and V swapped: the reference rejects the result
      std::vector<void*> swapped = bufs;
      std::swap(swapped[1], swapped[2]);
      ASSERT_EQ(launch(ck, dims.data(), int(dims.size()), swapped.data(), reinterpret_cast<void*>(wsp), stream, 0), TESSERA_OK);
      EXPECT_FALSE(matches());
    }
    fake.setKernel(nullptr, nullptr);
    for (auto p : dev) memFree(p);
    if (wsRaw) memFree(wsRaw);
  }
  EXPECT_TRUE(transposed && copyBack) << transposed << copyBack;
  EXPECT_EQ(callerTransposed, 2);  // the linear's weight and the batched GEMM's A
  // The primary context is retained once by this runtime, not once per launch (dozens above).
  EXPECT_EQ(ctxRetains() - retainsBefore, 1);
  EXPECT_EQ(fake.live(), 0);
  expectStream(nullptr);
  dlclose(lib);
  fs::remove_all(dir);
}
