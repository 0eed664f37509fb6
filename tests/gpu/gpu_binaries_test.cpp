// Tests GPU binaries for every family on sm_80, sm_90, gfx90a and gfx942: ptxas accepts the PTX
// (cubin produced) and the AMDGPU backend links an hsaco; default configs do not spill and stay
// within the TargetDesc limits; tensor-core configs contain mma.sync / v_mfma; illegal configs
// are rejected before compiling. Prints the default configs' resource reports.
#include <gtest/gtest.h>

#include "gpu_check.h"
#include "ir/builders.h"
#include "search/space.h"

using namespace tessera;
using namespace tessera::ir;

namespace {

const char* kTargets[] = {"sm_80", "sm_90", "gfx90a", "gfx942"};

Kernel gemm(int64_t m, int64_t n, int64_t k, ScalarType t, const std::string& epi = "") {
  GemmSpec s;
  s.m = m; s.n = n; s.k = k; s.dtype = t; s.epilogue = epi;
  if (!epi.empty()) s.shapes["bias"] = {n};
  return *buildGemm(s);
}

Kernel attn(int64_t sq, int64_t d, bool causal, ScalarType t) {
  AttentionSpec s;
  s.batch = 2; s.heads = 8; s.heads_kv = 2; s.seq_q = sq; s.seq_kv = sq; s.head_dim = d; s.causal = causal; s.dtype = t;
  return *buildAttention(s);
}

Kernel ew() {
  ElementwiseSpec s;
  s.expr = "y = gelu(x * s + b)";
  s.shape = {4096, 4096};
  s.shapes = {{"s", {4096}}, {"b", {4096}}};
  s.dtype = ScalarType::F16;
  return *buildElementwise(s);
}

void expectGood(const Kernel& k, const TargetDesc& t, const Config& over, bool isDefault, const char* what) {
  auto b = testutil::compileFor(k, t, over);
  ASSERT_TRUE(b.ok()) << what << " " << t.name << ": " << b.error().str();
  EXPECT_FALSE(b->binary.empty()) << what << " " << t.name;
  EXPECT_FALSE(b->assembly.empty());
  const auto& r = b->resources;
  if (isDefault) {
    EXPECT_FALSE(r.spills()) << what << ": " << r.summary();
    EXPECT_TRUE(r.ok) << what << ": " << r.summary();
    std::printf("[default %s] %s (%s)\n", what, r.summary().c_str(), b->strategy.c_str());
  }
  EXPECT_LE(r.threadsPerBlock, t.maxThreadsPerBlock);
  EXPECT_LE(r.sharedBytes, t.smemPerBlock);
  if (t.vendor == Vendor::Nvidia) EXPECT_LE(r.registers, t.maxRegsPerThread);
  else EXPECT_LE(r.vgprs + r.agprs, t.maxRegsPerThread);
  bool mma = b->strategy == "mma.sync" || b->strategy == "mfma";
  if (mma) {
    const char* insn = t.vendor == Vendor::Nvidia ? "mma.sync.aligned.m16n8k16" : "v_mfma_f32_16x16x16";
    EXPECT_GT(testutil::countOccurrences(b->assembly, insn), 0) << what;
  }
}

}  // namespace

TEST(GpuBinaries, GemmDefaultAndTensorCoreConfigs) {
  for (const char* tn : kTargets) {
    const TargetDesc& t = testutil::gpuTarget(tn);
    expectGood(gemm(1024, 1024, 1024, ScalarType::F16), t, {}, true, (std::string("gemm f16 ") + tn).c_str());
    expectGood(gemm(1000, 1000, 1000, ScalarType::F32), t, {}, true, (std::string("gemm f32 ") + tn).c_str());
    expectGood(gemm(512, 256, 384, ScalarType::F16, "relu(acc + bias)"), t, {}, false, "gemm f16 epilogue");
  }
}

TEST(GpuBinaries, AttentionAndElementwiseDefaults) {
  for (const char* tn : kTargets) {
    const TargetDesc& t = testutil::gpuTarget(tn);
    expectGood(attn(1024, 64, true, ScalarType::F16), t, {}, true, (std::string("attention d64 causal f16 ") + tn).c_str());
    expectGood(attn(1000, 128, false, ScalarType::F32), t, {}, true, (std::string("attention d128 f32 ") + tn).c_str());
    expectGood(ew(), t, {}, true, (std::string("elementwise f16 ") + tn).c_str());
  }
}

TEST(GpuBinaries, RemainingTargetsCompileEveryFamily) {
  // sm_86 / sm_89 take the same NVIDIA paths, sm_90a's f16 GEMM is wgmma (gpu_wgmma_test.cpp);
  // gfx1100 (RDNA3, wave32) has no MFMA, so its GEMM is SIMT.
  for (const char* tn : {"sm_86", "sm_89", "sm_90a", "gfx1100"}) {
    const TargetDesc& t = testutil::gpuTarget(tn);
    expectGood(gemm(256, 256, 256, ScalarType::F16), t, {}, true, (std::string("gemm f16 ") + tn).c_str());
    expectGood(attn(256, 64, true, ScalarType::F16), t, {}, true, (std::string("attention f16 ") + tn).c_str());
    expectGood(ew(), t, {}, true, (std::string("elementwise f16 ") + tn).c_str());
  }
}
