// Tests every 16-bit float path of the host code generator compiled for an AVX2-only CPU
// (x86-64-v3: AVX2, FMA, F16C; no AVX-512, no avx512_bf16) and run here, whatever this host has:
// bf16 values that only move must not become calls of compiler-rt builtins the JIT cannot find
// ("Symbols not found: [ __truncsfbf2 ]" made every bf16 blis GEMM a compile error on AVX2 hosts),
// and the builtins LLVM does call must resolve.
#include <gtest/gtest.h>

#include "codegen/host_lowering.h"
#include "codegen/mlir_env.h"
#include "host_check.h"
#include "ir/builders.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "search/space.h"
#include "search/space_ops.h"

using namespace tessera;
using namespace tessera::ir;

namespace {

const char* kCpu = "x86-64-v3";

TargetDesc avx2Host() {
  auto t = hostTargetAs("x86-64-v3");
  EXPECT_TRUE(t.ok());
  EXPECT_FALSE(t->hasIsa("avx512_bf16"));
  return *t;
}

// The default config and `samples` legal configs sampled from the space, each compiled for the
// AVX2 CPU, run and compared with the reference.
void checkSamples(const Kernel& k, int samples, uint64_t seed) {
  const TargetDesc t = avx2Host();
  auto space = search::makeSpace(k, t);
  ASSERT_TRUE(space.ok()) << space.error().str();
  std::vector<Config> configs = {space->defaults()};
  search::Rng rng(seed);
  for (int i = 0; i < samples; ++i)
    if (auto c = search::sampleLegal(*space, rng)) configs.push_back(*c);
  for (const Config& c : configs) {
    auto r = testutil::checkHostOn(t, k, c, 1, kCpu);
    EXPECT_TRUE(r.compiled) << k.name << " " << c.str() << ": " << r.error;
    EXPECT_TRUE(r.correct) << k.name << " " << c.str() << ": " << r.error;
  }
  // Moving 16-bit values is bit moves, never a call per element (the builtins resolving in the
  // JIT is the safety net, not the path): no conversion builtin in the default's assembly.
  auto full = space->complete(configs.front());
  ASSERT_TRUE(full.ok());
  auto asmText = codegen::emitHost(k, *full, t, codegen::Emit::Asm, {.cpu = kCpu});
  ASSERT_TRUE(asmText.ok()) << asmText.error().str();
  for (const char* builtin : {"__truncsfbf2", "__truncsfhf2", "__extendhfsf2", "__extendbfsf2"})
    EXPECT_EQ(asmText->find(builtin), std::string::npos) << k.name << " calls " << builtin;
}

}  // namespace

TEST(HostIsaForced, HalfPrecisionGemmsOnAnAvx2Cpu) {
  for (ScalarType dt : {ScalarType::BF16, ScalarType::F16}) {
    // The shape of the original failure, a ragged one with a fused epilogue, and a tiny one.
    checkSamples(*buildGemm({.m = 129, .n = 7, .k = 200, .dtype = dt, .transB = true}), 3, 11);
    checkSamples(*buildGemm({.m = 17, .n = 33, .k = 5, .dtype = dt, .transA = true, .alpha = 0.5, .beta = 1.0,
                             .epilogue = "relu(acc + bias)", .shapes = {{"bias", {33}}}}),
                 3, 12);
    checkSamples(*buildGemm({.batch = 2, .m = 3, .n = 1, .k = 2, .dtype = dt}), 1, 13);
  }
}

// Few columns: the default is kvec (dot products along K) for both of these; with 8 lanes the K
// tail of 70 and 129 is masked, and the epilogue runs on 5 sums a row.
TEST(HostIsaForced, FewColumnGemmsOnAnAvx2Cpu) {
  checkSamples(*buildGemm({.m = 33, .n = 5, .k = 70, .alpha = 0.5, .beta = 1.0, .epilogue = "relu(acc + bias)",
                           .shapes = {{"bias", {5}}}}),
               3, 14);
  checkSamples(*buildGemm({.m = 64, .n = 8, .k = 129, .dtype = ScalarType::BF16}), 2, 15);
  auto space = search::makeSpace(*buildGemm({.m = 33, .n = 5, .k = 70}), avx2Host());
  ASSERT_TRUE(space.ok());
  EXPECT_EQ(knobValueStr(space->defaults().values.at("schedule")), "kvec");
}

// Few rows: the default is nvec (vectors along N) for both of these; with 8 lanes the last
// vector of 37 and 131 columns is masked, and the 16-bit output's partial vector stored by element.
TEST(HostIsaForced, FewRowGemmsOnAnAvx2Cpu) {
  checkSamples(*buildGemm({.m = 5, .n = 37, .k = 70, .dtype = ScalarType::F16, .transA = true,
                           .epilogue = "relu(acc + bias)", .shapes = {{"bias", {37}}}}),
               1, 16);
  checkSamples(*buildGemm({.m = 13, .n = 131, .k = 29, .dtype = ScalarType::BF16}), 1, 17);
  auto space = search::makeSpace(*buildGemm({.m = 5, .n = 37, .k = 70}), avx2Host());
  ASSERT_TRUE(space.ok());
  EXPECT_EQ(knobValueStr(space->defaults().values.at("schedule")), "nvec");
}

TEST(HostIsaForced, HalfPrecisionElementwiseOnAnAvx2Cpu) {
  for (ScalarType dt : {ScalarType::BF16, ScalarType::F16}) {
    checkSamples(*buildElementwise({.expr = "y = gelu(x * s + b)", .shape = {7, 1029},
                                    .shapes = {{"s", {1029}}, {"b", {1029}}}, .dtype = dt}),
                 3, 21);
    checkSamples(*buildElementwise({.expr = "y = f32(bf16(x)) * f32(f16(z)); w = x - z", .shape = {3, 37}, .dtype = dt}), 2,
                 22);
  }
  // f32 data rounded to both 16-bit formats inside one kernel.
  checkSamples(*buildElementwise({.expr = "y = f32(bf16(x * 3)) + f32(f16(z))", .shape = {5, 131}}), 2, 23);
}

TEST(HostIsaForced, HalfPrecisionAttentionOnAnAvx2Cpu) {
  for (ScalarType dt : {ScalarType::BF16, ScalarType::F16})
    checkSamples(*buildAttention({.heads = 2, .heads_kv = 1, .seq_q = 19, .seq_kv = 37, .head_dim = 24, .causal = true,
                                  .dtype = dt}),
                 2, 31);
}

// The second layer: whatever conversion LLVM still lowers to a compiler-rt call (here an f32 ->
// bf16 and f32 -> f16 truncation compiled for a CPU without those instructions) resolves in the
// JIT and rounds to nearest even.
TEST(HostIsaForced, JitResolvesTheConversionBuiltins) {
  auto ctx = codegen::makeContext();
  auto m = codegen::parseModule(ctx.get(), R"(
    llvm.func @kernel(%x: !llvm.ptr, %b: !llvm.ptr, %h: !llvm.ptr) attributes {llvm.emit_c_interface} {
      %v = llvm.load %x : !llvm.ptr -> f32
      %tb = llvm.fptrunc %v : f32 to bf16
      %th = llvm.fptrunc %v : f32 to f16
      %wb = llvm.fpext %tb : bf16 to f32
      %wh = llvm.fpext %th : f16 to f32
      llvm.store %wb, %b : f32, !llvm.ptr
      llvm.store %wh, %h : f32, !llvm.ptr
      llvm.return
    })");
  ASSERT_TRUE(m.ok()) << m.error().str();
  auto engine = codegen::jitHost(**m, "x86-64-v2");  // no F16C, no AVX-512: both are calls
  ASSERT_TRUE(engine.ok()) << engine.error().str();
  auto fn = (*engine)->lookupPacked("kernel");
  ASSERT_TRUE(bool(fn)) << llvm::toString(fn.takeError());
  // 1 + 2^-8 + 2^-9 rounds up to 1 + 2^-7 in bf16 (8 bits of mantissa), 1 + 2^-11 + 2^-13 to
  // 1 + 2^-10 in f16 (11 bits); 1 + 2^-8 is a tie and rounds to the even 1.0 in bf16.
  for (auto [x, wantB, wantH] : std::vector<std::tuple<float, float, float>>{
           {1.0f + 0x1p-8f + 0x1p-9f, 1.0f + 0x1p-7f, 1.0f + 0x1p-8f + 0x1p-9f},
           {1.0f + 0x1p-8f, 1.0f, 1.0f + 0x1p-8f},
           {1.0f + 0x1p-11f + 0x1p-13f, 1.0f, 1.0f + 0x1p-10f},
           {-3.0f, -3.0f, -3.0f}}) {
    float b = 0, h = 0;
    void* values[3] = {&x, &b, &h};
    void* slots[3] = {&values[0], &values[1], &values[2]};
    (*fn)(slots);
    EXPECT_EQ(b, wantB) << x;
    EXPECT_EQ(h, wantH) << x;
  }
}

// nvec's grouped last vector (host_gemm_nvec.cpp) with AVX2's 8 lanes: N = 4, 2 and 1 group 2, 4
// and 8 steps of K, 19 columns a grouped vector after two whole ones; f32 and bf16, a partial
// last group, several row tiles, compiled for the AVX2 CPU and checked.
TEST(HostIsaForced, NvecGroupedTailsOnAnAvx2Cpu) {
  const TargetDesc t = avx2Host();
  for (ScalarType dt : {ScalarType::F32, ScalarType::BF16})
    for (auto [s, c] : std::vector<std::pair<GemmSpec, const char*>>{{{.m = 8, .n = 4, .k = 37}, "MR=8,NV=1,KC=256,KU=2"},
                                                                     {{.m = 9, .n = 2, .k = 129}, "MR=4,NV=1,KC=32,KU=1"},
                                                                     {{.m = 5, .n = 1, .k = 70}, "MR=5,NV=1,KC=256,KU=4"},
                                                                     {{.m = 13, .n = 19, .k = 50}, "MR=4,NV=3,KC=16,KU=2"}}) {
      s.dtype = dt;
      Kernel g = *buildGemm(s);
      auto cf = *Config::parseAssignments(std::string("schedule=nvec,") + c);
      auto r = testutil::checkHostOn(t, g, cf, 1, kCpu);
      EXPECT_TRUE(r.correct) << g.name << " " << c << ": " << r.error;
    }
}
