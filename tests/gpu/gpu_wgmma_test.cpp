// Tests the Hopper GEMM strategy (strategy=wgmma: TMA, an mbarrier ring, warp-specialized wgmma)
// without a GPU: where the space offers it and makes it the default (sm_90a, f16/bf16 only), its
// legality rules, the instructions its PTX holds (wgmma m64nNk16, cp.async.bulk.tensor, mbarrier
// transactions, setmaxnreg, an external 1024-byte aligned dynamic shared window), the host wrapper
// (tensor maps over the operands, packed copies where TMA cannot read them) and the ptxas resource
// report of the defaults (no spills), and the mapped kernel on the mapped-kernel emulator (TMA,
// mbarriers and wgmma modelled) with negative controls. The device test runs it on an sm_90.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <regex>

#include "emulator/emu_runtime.h"
#include "codegen/gpu.h"
#include "gpu_check.h"
#include "ir/builders.h"
#include "measure/estimate.h"
#include "search/space.h"
#include "targets/gpu_skus.h"
#include "targets/kernel_io.h"

using namespace tessera;
using namespace tessera::ir;

namespace {

Kernel gemm(int64_t m, int64_t n, int64_t k, ScalarType t, int64_t batch = 0, bool ta = false, bool tb = false,
            const std::string& epi = "") {
  GemmSpec g;
  g.batch = batch; g.m = m; g.n = n; g.k = k; g.dtype = t; g.transA = ta; g.transB = tb; g.epilogue = epi;
  if (!epi.empty()) g.shapes["bias"] = {n};
  auto r = buildGemm(g);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().str());
  return *r;
}

std::string strategyOf(const Config& c) { return std::get<std::string>(c.values.at("strategy")); }

Config wgmmaCfg(std::initializer_list<std::pair<const char*, int64_t>> kv) {
  Config c;
  c.set("strategy", std::string("wgmma"));
  for (auto& [k, v] : kv) c.set(k, v);
  return c;
}

}  // namespace

// sm_90a's f16/bf16 GEMMs default to wgmma; sm_90 (no arch-specific instructions), sm_80 and
// f32 operands do not offer it.
TEST(GpuWgmma, TheSpaceOffersItOnSm90aOnly) {
  for (ScalarType dt : {ScalarType::F16, ScalarType::BF16}) {
    auto s = search::makeSpace(gemm(4096, 4096, 4096, dt), testutil::gpuTarget("sm_90a"));
    ASSERT_TRUE(s.ok()) << s.error().str();
    EXPECT_EQ(strategyOf(s->defaults()), "wgmma") << typeName(dt);
    EXPECT_FALSE(s->check(s->defaults()).has_value()) << *s->check(s->defaults());
  }
  for (const char* tn : {"sm_80", "sm_86", "sm_89", "sm_90"}) {
    auto s = search::makeSpace(gemm(4096, 4096, 4096, ScalarType::F16), testutil::gpuTarget(tn));
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(strategyOf(s->defaults()), "mma") << tn;
    for (const auto& kn : s->knobs)
      if (kn.name == "strategy")
        for (const auto& v : kn.domain) EXPECT_NE(std::get<std::string>(v), "wgmma") << tn;
  }
  auto f32 = search::makeSpace(gemm(512, 512, 512, ScalarType::F32), testutil::gpuTarget("sm_90a"));
  ASSERT_TRUE(f32.ok());
  EXPECT_NE(strategyOf(f32->defaults()), "wgmma");
}

// Configs the kernel cannot run are refused with the rule that fails, before any IR is built.
TEST(GpuWgmma, IllegalConfigsSayWhy) {
  const TargetDesc& t = testutil::gpuTarget("sm_90a");
  Kernel k = gemm(512, 512, 512, ScalarType::F16);
  struct Bad {
    Config c;
    std::string why;
  } bad[] = {
      {wgmmaCfg({{"BM", 128}, {"BN", 256}, {"BK", 32}, {"TM", 64}, {"TN", 256}, {"STAGES", 4}}), "BK must be 64"},
      {wgmmaCfg({{"BM", 128}, {"BN", 256}, {"BK", 64}, {"TM", 32}, {"TN", 256}, {"STAGES", 4}}), "TM"},
      {wgmmaCfg({{"BM", 128}, {"BN", 96}, {"BK", 64}, {"TM", 64}, {"TN", 96}, {"STAGES", 4}}), "TN"},
      {wgmmaCfg({{"BM", 128}, {"BN", 256}, {"BK", 64}, {"TM", 64}, {"TN", 256}, {"STAGES", 1}}), "STAGES"},
      {wgmmaCfg({{"BM", 128}, {"BN", 256}, {"BK", 64}, {"TM", 64}, {"TN", 256}, {"STAGES", 6}}), "shared memory"},
      {wgmmaCfg({{"BM", 128}, {"BN", 256}, {"BK", 64}, {"TM", 128}, {"TN", 256}, {"STAGES", 4}}), "accumulator"},
      {wgmmaCfg({{"BM", 128}, {"BN", 128}, {"BK", 64}, {"TM", 64}, {"TN", 128}, {"STAGES", 4}, {"SPLITK", 16}}), "SPLITK"},
      {wgmmaCfg({{"BM", 128}, {"BN", 256}, {"BK", 64}, {"TM", 128}, {"TN", 128}, {"STAGES", 4}}), "TN must equal BN"},
      // Found on an H200 (wrong results) and by the emulator (a race): see codegen/nvidia/gpu_wgmma.cpp.
      {wgmmaCfg({{"BM", 256}, {"BN", 64}, {"BK", 64}, {"TM", 128}, {"TN", 64}, {"STAGES", 5}, {"SPLITK", 2}}), "TM=128 needs TN=128"},
      {wgmmaCfg({{"BM", 128}, {"BN", 64}, {"BK", 64}, {"TM", 128}, {"TN", 64}, {"STAGES", 4}}), "TM=128 needs TN=128"},
  };
  for (auto& b : bad) {
    auto cfg = testutil::gpuConfig(k, t, b.c);
    ASSERT_FALSE(cfg.ok()) << b.c.str();
    EXPECT_NE(cfg.error().message.find(b.why), std::string::npos) << b.c.str() << ": " << cfg.error().message;
  }
  // Not on sm_90 / sm_80, not for f32 operands: the same one-line refusal.
  for (const char* tn : {"sm_80", "sm_90"}) {
    auto b = codegen::compileGpu(k, wgmmaCfg({{"BM", 128}, {"BN", 128}, {"BK", 64}, {"TM", 64}, {"TN", 128}, {"VEC", 8}, {"STAGES", 4}}),
                                 testutil::gpuTarget(tn), {.wantBinary = false});
    ASSERT_FALSE(b.ok()) << tn;
    EXPECT_NE(b.error().message.find("no wgmma"), std::string::npos) << b.error().message;
  }
}

// The PTX of the default: wgmma from descriptors, TMA copies completing on mbarrier transactions,
// the register split, and the dynamic window external and 1024-byte aligned (the 128B-swizzled
// tiles' descriptors assume it); ptxas compiles it without spills and with the shared memory the
// plan asked for.
TEST(GpuWgmma, DefaultsAssembleWithoutSpills) {
  const TargetDesc& t = testutil::gpuTarget("sm_90a");
  for (ScalarType dt : {ScalarType::F16, ScalarType::BF16})
    for (auto [m, n, kk] : {std::tuple{4096, 4096, 4096}, {1000, 1000, 1000}, {4096, 4096, 320}, {256, 256, 256}}) {
      Kernel k = gemm(m, n, kk, dt);
      auto b = testutil::compileFor(k, t);
      ASSERT_TRUE(b.ok()) << b.error().str();
      EXPECT_EQ(b->strategy, "wgmma");
      const std::string type = dt == ScalarType::F16 ? ".f32.f16.f16" : ".f32.bf16.bf16";
      EXPECT_NE(b->assembly.find("wgmma.mma_async.sync.aligned.m64n"), std::string::npos);
      EXPECT_NE(b->assembly.find(type), std::string::npos) << type;
      EXPECT_NE(b->assembly.find("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"), std::string::npos);
      EXPECT_NE(b->assembly.find("mbarrier.arrive.expect_tx"), std::string::npos);
      EXPECT_NE(b->assembly.find("mbarrier.try_wait.parity"), std::string::npos);
      EXPECT_NE(b->assembly.find("setmaxnreg.dec.sync.aligned.u32"), std::string::npos);
      EXPECT_NE(b->assembly.find("setmaxnreg.inc.sync.aligned.u32"), std::string::npos);
      EXPECT_NE(b->assembly.find(".extern .shared .align 1024 .b8 __dynamic_shmem__"), std::string::npos);
      EXPECT_GT(b->launch.dynamicSharedBytes, 48 * 1024);
      EXPECT_LE(b->launch.dynamicSharedBytes + b->resources.sharedBytes, t.smemPerBlockOptIn);
      int maps = 0;
      for (const auto& a : b->launch.args) maps += a.kind == codegen::GpuArg::Kind::TensorMap;
      EXPECT_EQ(maps, 2);
      if (b->binary.empty()) GTEST_SKIP() << "no ptxas: " << b->resources.summary();
      EXPECT_TRUE(b->resources.ok) << b->resources.summary();
      EXPECT_FALSE(b->resources.spills()) << m << "x" << n << "x" << kk << ": " << b->resources.summary();
    }
}

// Every case the device test runs is legal and assembles without spills (the device test once
// failed on a lent H200 at a split-K the space does not offer: caught here now, without a GPU).
TEST(GpuWgmma, EveryDeviceCaseAssembles) {
  const TargetDesc& t = testutil::gpuTarget("sm_90a");
  for (const auto& cs : testutil::wgmmaDeviceCases()) {
    auto b = testutil::compileFor(cs.kernel, t, cs.cfg);
    ASSERT_TRUE(b.ok()) << cs.kernel.name << " " << cs.cfg.str() << ": " << b.error().str();
    EXPECT_EQ(b->strategy, "wgmma");
    if (b->binary.empty()) continue;  // no ptxas here: legality and lowering are still checked
    EXPECT_TRUE(b->resources.ok) << cs.kernel.name << ": " << b->resources.summary();
    EXPECT_FALSE(b->resources.spills()) << cs.kernel.name << ": " << b->resources.summary();
  }
}

// Every legal corner of the space assembles without spills (the register split holds) or is
// refused by ptxas's report, never silently wrong.
TEST(GpuWgmma, KnobCornersAssemble) {
  const TargetDesc& t = testutil::gpuTarget("sm_90a");
  Kernel k = gemm(1024, 1024, 2048, ScalarType::BF16, 0, true, false, "gelu(acc + bias)");
  int built = 0;
  for (auto [bm, bn, tm, tn] : {std::tuple{64, 64, 64, 64}, {128, 128, 64, 128}, {128, 256, 64, 256}, {256, 128, 128, 128},
                                {256, 64, 64, 64}})
    for (int64_t st : {2, 4})
      for (int64_t sk : {1, 4}) {
        auto cfg = testutil::gpuConfig(k, t, wgmmaCfg({{"BM", bm}, {"BN", bn}, {"BK", 64}, {"TM", tm}, {"TN", tn}, {"STAGES", st}, {"SPLITK", sk}}));
        if (!cfg.ok()) {
          std::printf("refused: %s\n", cfg.error().message.c_str());
          continue;
        }
        auto b = codegen::compileGpu(k, *cfg, t);
        ASSERT_TRUE(b.ok()) << cfg->str() << ": " << b.error().str();
        ++built;
        if (b->binary.empty()) continue;
        EXPECT_FALSE(b->resources.spills()) << cfg->str() << ": " << b->resources.summary();
      }
  EXPECT_GE(built, 12);
}

// The host wrapper: a transposed operand and a row pitch TMA cannot read (K*2 bytes not a
// multiple of 16) are packed; batches run in the grid's z with 3-D tensor maps; split-K adds an
// f32 partials workspace and per-tile counters.
TEST(GpuWgmma, HostWrapperPacksWhatTmaCannotRead) {
  const TargetDesc& t = testutil::gpuTarget("sm_90a");
  auto b = codegen::compileGpu(gemm(200, 136, 70, ScalarType::F16, 3, true, false), *testutil::gpuConfig(gemm(200, 136, 70, ScalarType::F16, 3, true, false), t, wgmmaCfg({})), t,
                               {.wantBinary = false});
  ASSERT_TRUE(b.ok()) << b.error().str();
  const auto& args = b->launch.args;
  ASSERT_GE(args.size(), 5u);
  EXPECT_EQ(args[0].kind, codegen::GpuArg::Kind::Packed);  // A transposed
  EXPECT_TRUE(args[0].transposed);
  EXPECT_EQ(args[0].packBatches, 3);
  EXPECT_EQ(args[0].pcols % 8, 0);
  EXPECT_EQ(args[1].kind, codegen::GpuArg::Kind::Tensor);  // B [70][136]: 272-byte rows, read in place
  EXPECT_EQ(args[2].tensorMap.dims[2], 3);
  EXPECT_EQ(args[2].tensorMap.swizzleBytes, 128);
  auto odd = gemm(128, 100, 256, ScalarType::F16);  // N*2 = 200 bytes: B packed
  auto bo = codegen::compileGpu(odd, *testutil::gpuConfig(odd, t, wgmmaCfg({})), t, {.wantBinary = false});
  ASSERT_TRUE(bo.ok()) << bo.error().str();
  EXPECT_EQ(bo->launch.args[1].kind, codegen::GpuArg::Kind::Packed);
  auto sk = gemm(256, 256, 4096, ScalarType::F16);
  auto bs = codegen::compileGpu(sk, *testutil::gpuConfig(sk, t, wgmmaCfg({{"SPLITK", 4}})), t, {.wantBinary = false});
  ASSERT_TRUE(bs.ok()) << bs.error().str();
  int workspaces = 0;
  for (const auto& a : bs->launch.args) workspaces += a.kind == codegen::GpuArg::Kind::Workspace;
  EXPECT_EQ(workspaces, 2);
}

// The mapped kernel on the mapped-kernel emulator (TMA from the emulated device's tensor maps,
// the mbarrier ring, wgmma from 128B-swizzled descriptors, the consumers' release protocol) against
// the reference: ragged shapes past every box edge (zero fill), a packed operand, transposed
// operands, batches in the grid, split-K, each block shape, bf16 with a fused epilogue.
TEST(GpuWgmma, MappedKernelMatchesTheReferenceEmulated) {
  const TargetDesc& t = testutil::gpuTarget("sm_90a");
  struct Case {
    Kernel k;
    Config cfg;
  };
  std::vector<Case> cases = {
      {gemm(200, 136, 70, ScalarType::F16, 0, false, false, "relu(acc + bias)"), wgmmaCfg({})},
      {gemm(130, 260, 200, ScalarType::BF16, 0, true, true, "gelu(acc + bias)"), wgmmaCfg({})},
      {gemm(136, 72, 96, ScalarType::BF16, 3), wgmmaCfg({})},
      {gemm(128, 256, 600, ScalarType::F16), wgmmaCfg({{"SPLITK", 4}})},
      {gemm(100, 300, 200, ScalarType::F16), wgmmaCfg({{"BM", 64}, {"BN", 128}, {"TM", 64}, {"TN", 128}, {"STAGES", 3}})},
      {gemm(300, 130, 136, ScalarType::BF16), wgmmaCfg({{"BM", 256}, {"BN", 128}, {"TM", 128}, {"TN", 128}, {"STAGES", 4}})},
      {gemm(130, 200, 300, ScalarType::F16, 2, false, true),
       wgmmaCfg({{"BM", 128}, {"BN", 128}, {"TM", 64}, {"TN", 128}, {"STAGES", 2}, {"SPLITK", 2}})},
  };
  for (const auto& c : cases) {
    auto cfg = testutil::gpuConfig(c.k, t, c.cfg);
    ASSERT_TRUE(cfg.ok()) << c.k.name << ": " << cfg.error().str();
    auto r = testutil::checkMappedEmulated(c.k, t, *cfg);
    EXPECT_TRUE(r.correct) << c.k.name << " " << cfg->str() << ": " << r.error;
  }
}

// The wgmma accumulator layout the emulator uses, from the PTX ISA's figure for m64nNk16 (D):
// warp w of the warpgroup owns rows 16w..16w+15; lane l holds rows l/4 and l/4+8 at columns
// 8j + 2(l%4) and +1 of every 8-column block j; every element of a 64 x N tile exactly once.
TEST(GpuWgmma, AccumulatorLayoutCoversTheTileOnce) {
  for (int n : {8, 64, 256}) {
    std::vector<int> seen(size_t(64 * n), 0);
    for (int t = 0; t < 128; ++t)
      for (int r = 0; r < n / 2; ++r) {
        auto [m, c] = emu::layout::wgmmaD(t, r);
        ASSERT_TRUE(m >= 0 && m < 64 && c >= 0 && c < n) << t << " " << r;
        ++seen[size_t(m * n + c)];
      }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), 64 * n);
  }
  EXPECT_EQ(emu::layout::wgmmaD(37, 5), std::make_pair(16 + 1, 8 + 2 + 1));
  EXPECT_EQ(emu::layout::wgmmaD(37, 6), std::make_pair(16 + 1 + 8, 8 + 2));
  // 128B-swizzled K-major operand, descriptor start 1024 (>> 4 = 64), SBO 1024 (>> 4 = 64):
  // row 9, k 8 sits in row 1 of the second 1024-byte atom, chunk 1 XOR 1 = 0.
  const uint64_t desc = 64 | uint64_t(64) << 32 | uint64_t(1) << 62;
  EXPECT_EQ(emu::layout::wgmmaOperandAddress(desc, false, 2, 9, 8), 1024 + 1024 + 128 + 0);
  EXPECT_EQ(emu::layout::wgmmaOperandAddress(desc & ~(uint64_t(3) << 62), false, 2, 9, 8), -1);  // interleaved: not modelled
}

// A 128B-swizzled operand starting 128 bytes past a 1024-byte boundary: the hardware takes the
// swizzle's row from the absolute address with base_offset, so the descriptor needs base_offset 1
// (PTX ISA: (start >> 7) & 7); without it the emulator refuses it (the device would read rows the
// TMA did not put there). Its neighbours: the same start with base_offset 1 (read by absolute
// address), a start on the boundary with none, and k-steps inside a row (bits 7-9 unchanged).
TEST(GpuWgmmaControls, ASwizzledDescriptorOffThePatternBoundaryNeedsItsBaseOffset) {
  auto desc = [](int64_t start, int base, int mode) {
    return uint64_t(start >> 4) | uint64_t(64) << 32 | uint64_t(base) << 49 | uint64_t(mode) << 62;
  };
  int want = -1;
  EXPECT_FALSE(emu::layout::wgmmaBaseOffsetAgrees(desc(1024 + 128, 0, 1), &want));
  EXPECT_EQ(want, 1);
  EXPECT_FALSE(emu::layout::wgmmaBaseOffsetAgrees(desc(1024 + 3 * 128, 1, 1), &want));
  EXPECT_EQ(want, 3);
  EXPECT_TRUE(emu::layout::wgmmaBaseOffsetAgrees(desc(1024 + 128, 1, 1), &want));
  EXPECT_TRUE(emu::layout::wgmmaBaseOffsetAgrees(desc(2048, 0, 1), &want));
  EXPECT_TRUE(emu::layout::wgmmaBaseOffsetAgrees(desc(2048 + 32, 0, 1), &want));  // k 16 of a K-major row
  EXPECT_FALSE(emu::layout::wgmmaBaseOffsetAgrees(desc(2048, 2, 1), &want));      // an offset that is not there
  EXPECT_FALSE(emu::layout::wgmmaBaseOffsetAgrees(desc(512 + 128, 0, 2), &want));  // 64B: a 512-byte pattern
  EXPECT_EQ(want, 1);
  EXPECT_TRUE(emu::layout::wgmmaBaseOffsetAgrees(desc(512, 0, 2), &want));
  // Read with its base_offset, row 0 of the operand is the pattern's row 1: chunk k/8 XOR 1.
  EXPECT_EQ(emu::layout::wgmmaOperandAddress(desc(1024 + 128, 1, 1), false, 2, 0, 0), 1024 + 128 + 16);
  EXPECT_EQ(emu::layout::wgmmaOperandAddress(desc(1024 + 128, 1, 1), false, 2, 0, 8), 1024 + 128);
}

// The same rule over a whole kernel: its dynamic shared window declared 128-byte aligned instead of
// 1024 puts every stage's 128B-swizzled tile 128 bytes past a pattern boundary (the TMA still lands
// them, it swizzles by absolute address too), while its descriptors keep base_offset 0: refused,
// naming the descriptor, the thread and the wgmma. The control: the kernel as emitted passes.
TEST(GpuWgmmaControls, AKernelWhoseSwizzledTilesMissThePatternBoundaryIsRefused) {
  const TargetDesc& t = testutil::gpuTarget("sm_90a");
  Kernel k = gemm(64, 64, 128, ScalarType::F16);
  auto cfg = testutil::gpuConfig(k, t, wgmmaCfg({{"STAGES", 2}}));
  ASSERT_TRUE(cfg.ok()) << cfg.error().str();
  const testutil::EmuCheck asEmitted = testutil::checkMappedEmulated(k, t, *cfg, 5);
  EXPECT_TRUE(asEmitted.correct) << "the kernel as emitted must pass for the control below to mean anything: "
                                 << asEmitted.error;
  codegen::MappedEmuOptions misaligned;
  misaligned.deviceHook = [](std::string s) {
    const std::string from = "alignment = 1024", to = "alignment = 128";
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << "no 1024-byte aligned shared window in the kernel";
    if (at != std::string::npos) s.replace(at, from.size(), to);
    return s;
  };
  KernelIO io(k, 5);
  io.poisonOutputs();
  auto rep = testutil::runMapped(k, *cfg, t, io, misaligned);
  ASSERT_TRUE(rep.ok()) << rep.error().str();
  ASSERT_FALSE(rep->ok) << "swizzled tiles off the pattern boundary without base_offset, yet nothing reported";
  const std::string& e = rep->errors[0];
  EXPECT_NE(e.find("descriptor starts at shared offset"), std::string::npos) << e;
  EXPECT_NE(e.find("base_offset must be 1"), std::string::npos) << e;
  EXPECT_NE(e.find("thread ("), std::string::npos) << e;
  EXPECT_NE(e.find("wgmma"), std::string::npos) << e;
}

// Negative controls: the same kernel on an emulated GPU that ignores the swizzle computes wrong
// values; without the consumers' wait on the full barrier they read bytes no TMA has landed;
// without the wgmma wait before the release the producer overwrites a stage a wgmma may still read.
TEST(GpuWgmmaControls, AnIgnoredSwizzleAMissingWaitOrAnEarlyReleaseIsCaught) {
  const TargetDesc& t = testutil::gpuTarget("sm_90a");
  // Two stages over six k-steps: the producer refills each stage twice.
  Kernel k = gemm(72, 136, 384, ScalarType::F16);
  auto cfg = testutil::gpuConfig(k, t, wgmmaCfg({{"STAGES", 2}}));
  ASSERT_TRUE(cfg.ok()) << cfg.error().str();
  {
    KernelIO io(k, 5);
    io.poisonOutputs();
    auto rep = testutil::runMapped(k, *cfg, t, io);
    ASSERT_TRUE(rep.ok()) << rep.error().str();
    EXPECT_TRUE(rep->ok) << (rep->errors.empty() ? "" : rep->errors[0]);
    auto cmp = io.check();
    ASSERT_TRUE(cmp.ok()) << cmp.error().str();
    EXPECT_TRUE(cmp->ok) << "the unbroken kernel must pass for the controls below to mean anything";
  }
  {
    codegen::MappedEmuOptions noSwizzle;
    noSwizzle.run.fault = emu::HwFault::WgmmaNoSwizzle;
    KernelIO io(k, 5);
    io.poisonOutputs();
    auto rep = testutil::runMapped(k, *cfg, t, io, noSwizzle);
    ASSERT_TRUE(rep.ok()) << rep.error().str();
    auto cmp = io.check();
    ASSERT_TRUE(cmp.ok()) << cmp.error().str();
    EXPECT_FALSE(cmp->ok) << "an emulated GPU without the swizzle computed the same values";
  }
  auto dropLast = [](const std::string& s, const std::string& what) {
    size_t at = s.rfind(what);
    if (at == std::string::npos) return s;
    size_t begin = s.rfind('\n', at), end = s.find('\n', at);
    return s.substr(0, begin) + s.substr(end);
  };
  {
    codegen::MappedEmuOptions noWait;
    noWait.deviceHook = [&](const std::string& s) {
      EXPECT_NE(s.find("nvvm.mbarrier.try_wait.parity"), std::string::npos);
      return dropLast(s, "nvvm.mbarrier.try_wait.parity");  // the consumers' wait for a full stage
    };
    KernelIO io(k, 5);
    io.poisonOutputs();
    auto rep = testutil::runMapped(k, *cfg, t, io, noWait);
    ASSERT_TRUE(rep.ok()) << rep.error().str();
    EXPECT_FALSE(rep->ok) << "consumers that never wait for the TMA, yet nothing reported";
  }
  {
    codegen::MappedEmuOptions earlyRelease;
    earlyRelease.deviceHook = [&](const std::string& s) {
      EXPECT_NE(s.find("nvvm.wgmma.wait.group.sync.aligned 1"), std::string::npos);
      return dropLast(s, "nvvm.wgmma.wait.group.sync.aligned 1");
    };
    KernelIO io(k, 5);
    io.poisonOutputs();
    auto rep = testutil::runMapped(k, *cfg, t, io, earlyRelease);
    ASSERT_TRUE(rep.ok()) << rep.error().str();
    ASSERT_FALSE(rep->ok) << "a stage released before its wgmma retired, yet nothing reported";
    std::printf("%s\n", rep->errors[0].c_str());
  }
}

// Split-K's parallel reduction (each slice of a tile summed by the block that arrives last on it)
// at odd shapes (ragged tiles, a short last K range, batches, an epilogue), with the fibers of each
// block resumed in shuffled orders; the control: arrival counters that do not count (an exchange
// instead of an add) leave slices unsummed, and the poisoned output shows it.
TEST(GpuWgmma, SplitKReducesInParallelEmulated) {
  const TargetDesc& t = testutil::gpuTarget("sm_90a");
  struct Case {
    Kernel k;
    Config cfg;
  };
  std::vector<Case> cases = {
      {gemm(200, 136, 1000, ScalarType::F16), wgmmaCfg({{"BM", 64}, {"BN", 64}, {"TM", 64}, {"TN", 64}, {"STAGES", 2}, {"SPLITK", 8}})},
      {gemm(130, 260, 700, ScalarType::F16, 0, false, false, "gelu(acc + bias)"),
       wgmmaCfg({{"BM", 128}, {"BN", 128}, {"TM", 64}, {"TN", 128}, {"STAGES", 3}, {"SPLITK", 4}})},
      {gemm(72, 200, 330, ScalarType::F16, 2, true, false), wgmmaCfg({{"BM", 64}, {"BN", 128}, {"TM", 64}, {"TN", 128}, {"STAGES", 2}, {"SPLITK", 2}})},
  };
  // Every case with the default fiber orders, the first with a second seed's orders too.
  for (const auto& c : cases)
    for (uint64_t seed : {uint64_t(0), uint64_t(7)}) {
      if (seed && &c != &cases[0]) continue;
      auto cfg = testutil::gpuConfig(c.k, t, c.cfg);
      ASSERT_TRUE(cfg.ok()) << c.k.name << ": " << cfg.error().str();
      codegen::MappedEmuOptions o;
      o.run.seed = seed;
      KernelIO io(c.k, 3);
      io.poisonOutputs();
      auto rep = testutil::runMapped(c.k, *cfg, t, io, o);
      ASSERT_TRUE(rep.ok()) << rep.error().str();
      EXPECT_TRUE(rep->ok) << cfg->str() << ": " << (rep->errors.empty() ? "" : rep->errors[0]);
      auto cmp = io.check();
      ASSERT_TRUE(cmp.ok()) << cmp.error().str();
      EXPECT_TRUE(cmp->ok) << c.k.name << " " << cfg->str() << " seed " << seed;
    }
  const Case& c = cases[0];
  auto cfg = testutil::gpuConfig(c.k, t, c.cfg);
  ASSERT_TRUE(cfg.ok());
  codegen::MappedEmuOptions noCount;
  noCount.deviceHook = [](std::string s) {
    const std::string add = "llvm.atomicrmw add", xchg = "llvm.atomicrmw xchg";
    size_t at = s.find(add);
    EXPECT_NE(at, std::string::npos) << "no atomic add in the kernel";
    for (; at != std::string::npos; at = s.find(add, at)) s.replace(at, add.size(), xchg);
    return s;
  };
  KernelIO io(c.k, 3);
  io.poisonOutputs();
  auto rep = testutil::runMapped(c.k, *cfg, t, io, noCount);
  ASSERT_TRUE(rep.ok()) << rep.error().str();
  auto cmp = io.check();
  ASSERT_TRUE(cmp.ok()) << cmp.error().str();
  EXPECT_FALSE(cmp->ok) << "counters that do not count, yet every slice was summed";
}

// The staged C tile without bank conflicts: the sm_90a defaults an H200 starts from at the goal
// shapes (each on a small ragged problem) write the accumulators as 8-byte column pairs into rows
// BN + 8 floats apart and read them row-wise, and the emulator's counter sees no conflict in the
// whole kernel (the scalar fragment stores before were 2-way). Control: the same kernel with its
// staging rows unpadded (the pitch rewritten to BN, reads and writes alike: still correct) is
// conflicted, so the zero is not a counter that misses these stores.
TEST(GpuWgmma, TheStagedCTileIsStoredWithoutBankConflictsEmulated) {
  auto h200 = findGpu("H200");
  ASSERT_TRUE(h200.ok()) << h200.error().str();
  auto t = targetOfGpu(*h200);
  ASSERT_TRUE(t.ok()) << t.error().str();
  std::map<std::string, Config> defaults;
  for (auto [m, n, kk, batch] : {std::tuple{4096, 4096, 4096, 0}, {1000, 1000, 1000, 0}, {4096, 4096, 320, 0},
                                 {1024, 1024, 16384, 0}, {256, 256, 256, 64}}) {
    auto cfg = testutil::gpuConfig(gemm(m, n, kk, ScalarType::F16, batch), *t);
    ASSERT_TRUE(cfg.ok()) << cfg.error().str();
    ASSERT_EQ(strategyOf(*cfg), "wgmma") << cfg->str();
    defaults[cfg->str()] = *cfg;
  }
  ASSERT_GE(defaults.size(), 2u);
  auto run = [&](const Config& want, ScalarType dt, const codegen::MappedEmuOptions& o) {
    const int64_t split = want.has("SPLITK") ? std::get<int64_t>(want.values.at("SPLITK")) : 1;
    Kernel k = gemm(144, 300, 128 * split, dt);  // no dimension equal to a staging pitch (BN + 8)
    auto cfg = testutil::gpuConfig(k, *t, want);
    EXPECT_TRUE(cfg.ok()) << cfg.error().str();
    KernelIO io(k, 3);
    io.poisonOutputs();
    codegen::MappedEmuOptions once = o;
    once.run.schedules = 1;  // the fixed fiber order: the counters do not depend on it
    auto rep = testutil::runMapped(k, *cfg, *t, io, once);
    EXPECT_TRUE(rep.ok()) << rep.error().str();
    if (!rep.ok()) return emu::Counters{};
    EXPECT_TRUE(rep->ok) << cfg->str() << ": " << (rep->errors.empty() ? "" : rep->errors[0]);
    auto cmp = io.check();
    EXPECT_TRUE(cmp.ok() && cmp->ok) << cfg->str();
    return rep->counters;
  };
  ScalarType dt = ScalarType::F16;
  for (const auto& [name, cfg] : defaults) {
    emu::Counters c = run(cfg, dt, {});
    EXPECT_GT(c.sharedRequests, 0u) << name;
    EXPECT_EQ(c.bankConflicts, 0u) << name << ": " << c.sharedWavefronts << " wavefronts, ideal " << c.sharedIdealWavefronts;
    dt = dt == ScalarType::F16 ? ScalarType::BF16 : ScalarType::F16;
  }
  const Config& first = defaults.begin()->second;
  const int64_t BN = std::get<int64_t>(first.values.at("BN"));
  codegen::MappedEmuOptions unpadded;
  unpadded.deviceHook = [BN](std::string s) {
    const std::string pitch = "llvm.mlir.constant(" + std::to_string(BN + 8) + " : index)";
    size_t at = s.find(pitch);
    EXPECT_NE(at, std::string::npos) << "no staging pitch " << BN + 8 << " in the kernel";
    for (; at != std::string::npos; at = s.find(pitch, at))
      s.replace(at, pitch.size(), "llvm.mlir.constant(" + std::to_string(BN) + " : index)");
    return s;
  };
  emu::Counters c = run(first, ScalarType::F16, unpadded);
  EXPECT_GT(c.bankConflicts, 0u) << "unpadded staging rows, yet no bank conflict counted";
}

// The persistent scheduler (PERSIST=1) on a target of 3 SMs: 3 blocks loop over every work item
// (tiles x batch x SPLITK), the ring's slots and mbarrier phases carried from item to item (K tile
// counts that do not divide the ring, so an item starts mid-ring), at ragged shapes, batched,
// transposed, split-K, bf16 with a fused epilogue. Control: the ring position reset at every
// item (the carry rewritten to restart at slot 0, phase 0) is caught, while the same kernel
// without the rewrite (its neighbour) passes above.
TEST(GpuWgmma, PersistentBlocksLoopOverTheWorkEmulated) {
  TargetDesc t = testutil::gpuTarget("sm_90a");
  t.units = 3;
  struct Case {
    Kernel k;
    Config cfg;
  };
  std::vector<Case> cases = {
      {gemm(130, 200, 200, ScalarType::F16, 0, false, false, "relu(acc + bias)"),
       wgmmaCfg({{"BM", 64}, {"BN", 128}, {"TM", 64}, {"TN", 128}, {"STAGES", 3}, {"PERSIST", 1}})},
      {gemm(130, 136, 96, ScalarType::BF16, 2, false, true), wgmmaCfg({{"BM", 64}, {"BN", 64}, {"TM", 64}, {"TN", 64}, {"STAGES", 3}, {"PERSIST", 1}})},
      {gemm(72, 200, 330, ScalarType::F16, 2, true, false),
       wgmmaCfg({{"BM", 64}, {"BN", 128}, {"TM", 64}, {"TN", 128}, {"STAGES", 2}, {"SPLITK", 2}, {"PERSIST", 1}})},
  };
  auto run = [&](const Case& c, const codegen::MappedEmuOptions& o, bool& clean) {
    auto cfg = testutil::gpuConfig(c.k, t, c.cfg);
    EXPECT_TRUE(cfg.ok()) << c.k.name << ": " << cfg.error().str();
    if (!cfg.ok()) return false;
    KernelIO io(c.k, 3);
    io.poisonOutputs();
    auto rep = testutil::runMapped(c.k, *cfg, t, io, o);
    EXPECT_TRUE(rep.ok()) << rep.error().str();
    if (!rep.ok()) return false;
    clean = rep->ok;
    auto cmp = io.check();
    return cmp.ok() && cmp->ok;
  };
  auto b = testutil::compileFor(cases[1].k, t, cases[1].cfg);
  ASSERT_TRUE(b.ok()) << b.error().str();
  EXPECT_EQ(b->launch.grid, (std::array<int64_t, 3>{3, 1, 1}));  // 18 items
  for (const auto& c : cases) {
    bool clean = false;
    EXPECT_TRUE(run(c, {}, clean)) << c.k.name << " " << c.cfg.str();
    EXPECT_TRUE(clean) << c.k.name;
  }
  codegen::MappedEmuOptions reset;
  reset.run.schedules = 1;
  reset.deviceHook = [](std::string s) {
    // The only 32-bit adds of the kernel are the carries of the ring position (producer, consumers).
    static const std::regex carry(R"((%\d+) = llvm\.add (%\d+), (%\d+) : i32)");
    EXPECT_EQ(std::distance(std::sregex_iterator(s.begin(), s.end(), carry), std::sregex_iterator()), 2);
    return std::regex_replace(s, carry, "$1 = llvm.sub $2, $2 : i32");
  };
  bool clean = true;
  const bool correct = run(cases[1], reset, clean);
  EXPECT_FALSE(correct && clean) << "the ring restarted at every item, yet the output is right and the run clean";
}

// PERSIST is a knob of the sm_90a space (0 by default) that the legality rules, the model and
// ptxas all take: legal where the ring and a separate C tile fit (the 128x256 default's do not,
// and the refusal says so), refused for the other strategies; the model prices it below the
// one-block-per-item kernel when the items take several waves (its fills run under the previous
// epilogues) and not below it within one wave (its neighbour); the persistent kernels of the goal
// shapes' 64x128 and 128x128 tiles assemble without spills.
TEST(GpuWgmma, PersistIsAKnobTheRulesTheModelAndPtxasTake) {
  auto h200 = findGpu("H200");
  ASSERT_TRUE(h200.ok());
  auto t = targetOfGpu(*h200);
  ASSERT_TRUE(t.ok());
  Kernel wide = gemm(4096, 4096, 320, ScalarType::F16), cube = gemm(1000, 1000, 1000, ScalarType::F16);
  auto space = search::makeSpace(wide, *t);
  ASSERT_TRUE(space.ok());
  const ir::Knob* persist = space->find("PERSIST");
  ASSERT_NE(persist, nullptr);
  EXPECT_EQ(persist->domain.size(), 2u);
  EXPECT_EQ(std::get<int64_t>(space->defaults().values.at("PERSIST")), 0);
  Config big = space->defaults();
  big.set("PERSIST", int64_t(1));
  auto why = space->check(big);
  ASSERT_TRUE(why.has_value()) << big.str();
  EXPECT_NE(why->find("PERSIST=1"), std::string::npos) << *why;
  Config mma = big;
  for (auto [k, v] : {std::pair{"BM", 128}, {"BN", 128}, {"BK", 32}, {"TM", 64}, {"TN", 32}, {"STAGES", 3}}) mma.set(k, int64_t(v));
  mma.set("strategy", std::string("mma"));
  why = space->check(mma);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("PERSIST=1 needs strategy=wgmma"), std::string::npos) << *why;
  EXPECT_EQ(search::makeSpace(wide, testutil::gpuTarget("sm_80"))->find("PERSIST"), nullptr);

  auto estimate = [&](const Kernel& k, std::initializer_list<std::pair<const char*, int64_t>> kv) {
    auto cfg = testutil::gpuConfig(k, *t, wgmmaCfg(kv));
    EXPECT_TRUE(cfg.ok()) << cfg.error().str();
    auto e = measure::estimateKernel(k, *cfg, *t);
    EXPECT_TRUE(e.ok()) << e.error().str();
    return std::pair{e->model.timeUs, e->model.waves};
  };
  auto [wide0, waves] = estimate(wide, {{"BM", 128}, {"BN", 128}, {"TM", 64}, {"TN", 128}, {"STAGES", 4}, {"PERSIST", 0}});
  auto [wide1, waves1] = estimate(wide, {{"BM", 128}, {"BN", 128}, {"TM", 64}, {"TN", 128}, {"STAGES", 4}, {"PERSIST", 1}});
  EXPECT_GT(waves, 1);
  EXPECT_EQ(waves1, waves);
  EXPECT_LT(wide1, wide0);
  auto [cube0, w0] = estimate(cube, {{"BM", 64}, {"BN", 128}, {"TM", 64}, {"TN", 128}, {"STAGES", 4}, {"PERSIST", 0}});
  auto [cube1, w1] = estimate(cube, {{"BM", 64}, {"BN", 128}, {"TM", 64}, {"TN", 128}, {"STAGES", 4}, {"PERSIST", 1}});
  EXPECT_EQ(w0, 1);
  EXPECT_GE(cube1, cube0);  // no gain within one wave

  for (const Kernel* k : {&cube, &wide}) {
    const bool small = k == &cube;
    auto b = testutil::compileFor(*k, *t,
                                  wgmmaCfg({{"BM", small ? 64 : 128}, {"BN", 128}, {"TM", 64}, {"TN", 128}, {"STAGES", 4}, {"PERSIST", 1}}));
    ASSERT_TRUE(b.ok()) << b.error().str();
    EXPECT_EQ(b->launch.grid[0], small ? 128 : t->units);
    if (b->binary.empty()) GTEST_SKIP() << "no ptxas: " << b->resources.summary();
    EXPECT_TRUE(b->resources.ok) << b->resources.summary();
    EXPECT_FALSE(b->resources.spills()) << k->name << ": " << b->resources.summary();
  }
}
