// Tests sm_90a's wgmma attention (strategy=flash-wgmma, codegen/nvidia/gpu_attention_wgmma.cpp) without a
// GPU: the mapped kernel on the mapped-kernel emulator against the reference (f16/bf16, head_dim
// 64..256, causal, GQA, Sq = 1, Sq > Skv, ragged lengths, one and two warpgroups, one and two
// stages), ptxas's resource report (no spills), where the space offers it, and negative controls
// (a missing warpgroup barrier before the P·V wgmma, every block barrier removed); PIPE=fa3 (TMA
// producer warpgroup, mbarrier ring, register-A wgmma) the same way, with its own controls (an
// emulated GPU with another register-A fragment, slots released before the wgmmas retired them).
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>

#include "emulator/emu_runtime.h"
#include "codegen/gpu.h"
#include "codegen/gpu_backend.h"
#include "codegen/nvidia/wgmma_ptx.h"
#include "gpu_check.h"
#include "ir/builders.h"
#include "search/space.h"
#include "targets/kernel_io.h"

using namespace tessera;
using namespace tessera::ir;

namespace {

Kernel attn(int64_t h, int64_t hkv, int64_t sq, int64_t skv, int64_t d, bool causal, ScalarType t, int64_t b = 1) {
  return testutil::attentionKernel(h, hkv, sq, skv, d, causal, t, b);
}

Config wgmmaCfg(int64_t bq, int64_t bk, int64_t stages) {
  Config c;
  c.set("strategy", std::string("flash-wgmma"));
  c.set("BQ", bq);
  c.set("BK", bk);
  c.set("STAGES", stages);
  c.set("DSPLIT", int64_t(1));
  c.set("PIPE", std::string("fa2"));  // the space's default may be fa3 (measured defaults)
  return c;
}

}  // namespace

TEST(GpuAttentionWgmma, TheSpaceOffersItOnSm90aAtWholePanels) {
  auto offers = [](const char* target, int64_t d, ScalarType t) {
    auto space = search::makeSpace(attn(2, 2, 256, 256, d, false, t), testutil::gpuTarget(target));
    EXPECT_TRUE(space.ok());
    for (const auto& knob : space->knobs)
      if (knob.name == "strategy")
        for (const auto& v : knob.domain)
          if (std::get<std::string>(v) == "flash-wgmma") return true;
    return false;
  };
  EXPECT_TRUE(offers("sm_90a", 64, ScalarType::F16));
  EXPECT_TRUE(offers("sm_90a", 128, ScalarType::BF16));
  EXPECT_FALSE(offers("sm_90a", 96, ScalarType::F16));  // not whole 128-byte panels
  EXPECT_FALSE(offers("sm_90a", 64, ScalarType::F32));
  EXPECT_FALSE(offers("sm_90", 64, ScalarType::F16));   // no wgmma without the arch-specific target
  EXPECT_FALSE(offers("sm_80", 64, ScalarType::F16));
}

TEST(GpuAttentionWgmma, MappedKernelMatchesTheReference) {
  const TargetDesc& t = testutil::gpuTarget("sm_90a");
  struct Case {
    Kernel k;
    Config cfg;
  };
  std::vector<Case> cases = {
      {attn(2, 2, 100, 100, 64, false, ScalarType::F16), wgmmaCfg(64, 64, 2)},
      {attn(2, 1, 150, 200, 128, true, ScalarType::BF16), wgmmaCfg(128, 64, 2)},  // GQA, Skv > Sq causal
      {attn(2, 1, 1, 130, 64, true, ScalarType::F16), wgmmaCfg(64, 128, 1)},      // one query row
      {attn(1, 1, 200, 70, 256, false, ScalarType::F16, 2), wgmmaCfg(64, 64, 2)}, // Sq > Skv, D 256, batch 2
      {attn(2, 2, 130, 130, 192, true, ScalarType::BF16), wgmmaCfg(128, 64, 1)},
  };
  for (const auto& c : cases) {
    auto cfg = testutil::gpuConfig(c.k, t, c.cfg);
    ASSERT_TRUE(cfg.ok()) << c.k.name << ": " << cfg.error().str();
    auto r = testutil::checkMappedEmulated(c.k, t, *cfg);
    EXPECT_TRUE(r.correct) << c.k.name << " " << cfg->str() << ": " << r.error;
  }
}

TEST(GpuAttentionWgmma, AssemblesWithoutSpills) {
  const TargetDesc& t = testutil::gpuTarget("sm_90a");
  for (int64_t d : {64, 128, 256})
    for (auto [bq, bk] : {std::pair<int64_t, int64_t>{64, 64}, {128, 64}, {64, 128}}) {
      Kernel k = attn(16, 16, 4096, 4096, d, true, ScalarType::F16);
      auto cfg = testutil::gpuConfig(k, t, wgmmaCfg(bq, bk, 2));
      if (!cfg.ok()) continue;  // shared memory: refused with a reason, checked by the space
      auto b = codegen::compileGpu(k, *cfg, t);
      ASSERT_TRUE(b.ok()) << b.error().str();
      EXPECT_NE(b->assembly.find("wgmma.mma_async.sync.aligned.m64n" + std::to_string(bk) + "k16"), std::string::npos);
      EXPECT_NE(b->assembly.find("wgmma.mma_async.sync.aligned.m64n" + std::to_string(d) + "k16"), std::string::npos);
      EXPECT_NE(b->assembly.find("fence.proxy.async.shared::cta"), std::string::npos);
      if (b->binary.empty()) continue;  // no ptxas here
      EXPECT_TRUE(b->resources.ok) << b->resources.summary();
      EXPECT_FALSE(b->resources.spills()) << d << " " << bq << "x" << bk << ": " << b->resources.summary();
    }
}

TEST(GpuAttentionWgmmaControls, AMissingBarrierIsReported) {
  const TargetDesc& t = testutil::gpuTarget("sm_90a");
  Kernel k = attn(1, 1, 128, 192, 64, false, ScalarType::F16);
  auto cfg = testutil::gpuConfig(k, t, wgmmaCfg(128, 64, 2));
  ASSERT_TRUE(cfg.ok()) << cfg.error().str();
  {
    KernelIO io(k, 5);
    io.poisonOutputs();
    auto rep = testutil::runMapped(k, *cfg, t, io);
    ASSERT_TRUE(rep.ok()) << rep.error().str();
    EXPECT_TRUE(rep->ok) << (rep->errors.empty() ? "" : rep->errors[0]);
    auto cmp = io.check();
    ASSERT_TRUE(cmp.ok());
    EXPECT_TRUE(cmp->ok) << "the unbroken kernel must pass for the controls to mean anything";
  }
  // The warpgroup's named barrier between the P stores and the P·V wgmma: a lane's wgmma reads the
  // P its quad-mates stored, unordered.
  codegen::MappedEmuOptions noNamed;
  noNamed.deviceHook = [](const std::string& s) {
    EXPECT_NE(s.find("nvvm.barrier id"), std::string::npos);
    return std::regex_replace(s, std::regex(R"(\n\s*nvvm\.barrier id = [^\n]*\n)"), "\n");
  };
  KernelIO io(k, 5);
  io.poisonOutputs();
  auto rep = testutil::runMapped(k, *cfg, t, io, noNamed);
  ASSERT_TRUE(rep.ok()) << rep.error().str();
  EXPECT_FALSE(rep->ok) << "P read by the wgmma without the warpgroup barrier, yet no race reported";
  // Every block barrier gone: a stage is refilled while the other warpgroup's wgmma reads it.
  codegen::MappedEmuOptions noBarrier;
  noBarrier.deviceHook = [](const std::string& s) {
    return std::regex_replace(s, std::regex(R"(\n\s*nvvm\.barrier0\n)"), "\n");
  };
  KernelIO io2(k, 5);
  io2.poisonOutputs();
  auto rep2 = testutil::runMapped(k, *cfg, t, io2, noBarrier);
  ASSERT_TRUE(rep2.ok()) << rep2.error().str();
  EXPECT_FALSE(rep2->ok) << "no block barrier, yet no race reported";
}

// ---- PIPE=fa3: a TMA producer warpgroup, an mbarrier ring, P·V with P from registers

namespace {

Config fa3Cfg(int64_t bq, int64_t bk, int64_t stages) {
  Config c = wgmmaCfg(bq, bk, stages);
  c.set("PIPE", std::string("fa3"));
  return c;
}

}  // namespace

TEST(GpuAttentionWgmma, RegisterAWgmmaTextIsReadBackExactly) {
  for (int n : {8, 64, 128, 256})
    for (bool bf16 : {false, true})
      for (bool mn : {false, true}) {
        const codegen::WgmmaRegA w{n, bf16, mn};
        auto back = codegen::parseWgmmaRegAPtx(codegen::wgmmaRegAPtx(w));
        ASSERT_TRUE(back.has_value()) << n;
        EXPECT_EQ(back->n, n);
        EXPECT_EQ(back->bf16, bf16);
        EXPECT_EQ(back->bMnMajor, mn);
      }
  std::string text = codegen::wgmmaRegAPtx({64, false, true});
  EXPECT_EQ(std::count(text.begin(), text.end(), '$'), 32 + 4 + 1);
  // Anything else is not recognised: another immediate, another operand, a descriptor-A wgmma.
  EXPECT_FALSE(codegen::parseWgmmaRegAPtx(std::regex_replace(text, std::regex("p, 1, 1, 1"), "p, 1, -1, 1")));
  EXPECT_FALSE(codegen::parseWgmmaRegAPtx(std::regex_replace(text, std::regex(R"(\$33)"), "$34")));
  EXPECT_FALSE(codegen::parseWgmmaRegAPtx("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {$0}, $1, $2, p, 1, 1, 0, 1;"));
  EXPECT_EQ(codegen::wgmmaRegAConstraints(16).substr(0, 24), "=f,=f,=f,=f,=f,=f,=f,=f,");
}

TEST(GpuAttentionWgmma, Fa3IsOfferedAndChecked) {
  const TargetDesc& t = testutil::gpuTarget("sm_90a");
  auto space = search::makeSpace(attn(2, 2, 256, 256, 128, false, ScalarType::F16), t);
  ASSERT_TRUE(space.ok());
  bool pipe = false;
  for (const auto& knob : space->knobs) pipe |= knob.name == "PIPE" && knob.domain.size() == 4;
  EXPECT_TRUE(pipe);
  Kernel k = attn(2, 2, 256, 256, 128, false, ScalarType::F16);
  auto refused = [&](Config c) {
    auto cfg = testutil::gpuConfig(k, t, c);
    return !cfg.ok() || space->check(*cfg).has_value();
  };
  EXPECT_FALSE(refused(fa3Cfg(128, 64, 2)));
  EXPECT_FALSE(refused(fa3Cfg(64, 64, 4)));
  EXPECT_TRUE(refused(fa3Cfg(64, 64, 1)));  // a ring needs two slots
  for (const char* pipe : {"fa3-overlap", "fa3-pingpong"}) {
    Config c = fa3Cfg(128, 64, 3);
    c.set("PIPE", std::string(pipe));
    EXPECT_FALSE(refused(c)) << pipe;
  }
  Config lonePingPong = fa3Cfg(64, 64, 2);  // one consumer warpgroup has nobody to take turns with
  lonePingPong.set("PIPE", std::string("fa3-pingpong"));
  EXPECT_TRUE(refused(lonePingPong));
  Config mmaFa3 = fa3Cfg(64, 64, 2);
  mmaFa3.set("strategy", std::string("flash-mma"));
  EXPECT_TRUE(refused(mmaFa3));  // PIPE is flash-wgmma's
  // sm_90 (no wgmma) has no PIPE knob at all.
  auto plain = search::makeSpace(k, testutil::gpuTarget("sm_90"));
  ASSERT_TRUE(plain.ok());
  for (const auto& knob : plain->knobs) EXPECT_NE(knob.name, "PIPE");
}

TEST(GpuAttentionWgmma, Fa3MappedKernelMatchesTheReference) {
  const TargetDesc& t = testutil::gpuTarget("sm_90a");
  struct Case {
    Kernel k;
    Config cfg;
  };
  std::vector<Case> cases = {
      {attn(2, 2, 100, 100, 64, false, ScalarType::F16), fa3Cfg(64, 64, 2)},
      {attn(2, 1, 150, 200, 128, true, ScalarType::BF16), fa3Cfg(128, 64, 2)},  // GQA, Skv > Sq causal, 2 consumers
      {attn(2, 1, 1, 130, 64, true, ScalarType::F16), fa3Cfg(64, 128, 3)},      // one query row, 3 slots
      {attn(1, 1, 200, 70, 256, false, ScalarType::F16, 2), fa3Cfg(64, 64, 2)}, // Sq > Skv, D 256, batch 2
      {attn(1, 1, 130, 330, 192, true, ScalarType::BF16), fa3Cfg(128, 64, 3)},  // 6 key blocks through 3 slots
      {attn(1, 1, 70, 400, 64, false, ScalarType::F16), fa3Cfg(64, 64, 4)},     // 7 key blocks through 4 slots
  };
  for (const auto& c : cases) {
    auto cfg = testutil::gpuConfig(c.k, t, c.cfg);
    ASSERT_TRUE(cfg.ok()) << c.k.name << ": " << cfg.error().str();
    auto r = testutil::checkMappedEmulated(c.k, t, *cfg);
    EXPECT_TRUE(r.correct) << c.k.name << " " << cfg->str() << ": " << r.error;
  }
}

// FlashAttention-3's intra-warpgroup overlap (S of block j issued with P·V of block j - 1) and
// ping-pong (the two consumer warpgroups take turns at the tensor cores): the same odd shapes,
// a single key block (the loop never runs: block 0's S, then its P·V), every slot count.
TEST(GpuAttentionWgmma, Fa3OverlapAndPingPongMatchTheReference) {
  const TargetDesc& t = testutil::gpuTarget("sm_90a");
  auto cfgOf = [](const char* pipe, int64_t bq, int64_t bk, int64_t stages) {
    Config c = fa3Cfg(bq, bk, stages);
    c.set("PIPE", std::string(pipe));
    return c;
  };
  struct Case {
    Kernel k;
    Config cfg;
  };
  std::vector<Case> cases = {
      {attn(2, 2, 100, 100, 64, false, ScalarType::F16), cfgOf("fa3-overlap", 64, 64, 2)},
      {attn(2, 1, 150, 200, 128, true, ScalarType::BF16), cfgOf("fa3-pingpong", 128, 64, 2)},  // GQA, causal, Skv > Sq
      {attn(2, 1, 1, 130, 64, true, ScalarType::F16), cfgOf("fa3-overlap", 64, 128, 3)},       // one query row
      {attn(1, 1, 200, 70, 128, false, ScalarType::F16, 2), cfgOf("fa3-overlap", 64, 64, 2)},  // Sq > Skv, batch 2
      {attn(1, 1, 130, 330, 128, true, ScalarType::BF16), cfgOf("fa3-pingpong", 128, 64, 3)},  // 6 key blocks, 3 slots
      {attn(1, 1, 70, 400, 64, false, ScalarType::F16), cfgOf("fa3-pingpong", 128, 64, 4)},    // 7 key blocks, 4 slots
      {attn(1, 1, 40, 50, 128, false, ScalarType::F16), cfgOf("fa3-pingpong", 128, 64, 2)},    // one key block
      {attn(1, 1, 64, 64, 128, true, ScalarType::F16), cfgOf("fa3-overlap", 64, 64, 2)},       // causal, one block
      {attn(1, 1, 130, 200, 64, true, ScalarType::F16), cfgOf("fa3-pingpong", 128, 128, 2)},   // D 64, BK 128
  };
  Config d256 = cfgOf("fa3-pingpong", 128, 64, 2);  // O's 128 registers leave too few beside two Ps
  EXPECT_FALSE(testutil::gpuConfig(attn(1, 1, 130, 200, 256, true, ScalarType::F16), t, d256).ok());
  for (const auto& c : cases) {
    auto cfg = testutil::gpuConfig(c.k, t, c.cfg);
    ASSERT_TRUE(cfg.ok()) << c.k.name << ": " << cfg.error().str();
    auto r = testutil::checkMappedEmulated(c.k, t, *cfg);
    EXPECT_TRUE(r.correct) << c.k.name << " " << cfg->str() << ": " << r.error;
  }
}

// Every case the device test runs is legal and assembles without spills; the first asks for
// 48 KB of dynamic shared memory beside its static mbarriers (the launch's opt-in case).
TEST(GpuAttentionWgmma, EveryDeviceCaseAssembles) {
  const TargetDesc& t = testutil::gpuTarget("sm_90a");
  auto cases = testutil::flashWgmmaDeviceCases();
  for (const auto& cs : cases) {
    auto b = testutil::compileFor(cs.kernel, t, cs.cfg);
    ASSERT_TRUE(b.ok()) << cs.kernel.name << " " << cs.cfg.str() << ": " << b.error().str();
    EXPECT_EQ(b->strategy, "flash-wgmma");
    if (b->binary.empty()) continue;  // no ptxas here: legality and lowering are still checked
    EXPECT_TRUE(b->resources.ok) << cs.kernel.name << ": " << b->resources.summary();
    EXPECT_FALSE(b->resources.spills()) << cs.kernel.name << ": " << b->resources.summary();
  }
  auto first = testutil::compileFor(cases[0].kernel, t, cases[0].cfg);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->launch.dynamicSharedBytes, 48 * 1024);
}

TEST(GpuAttentionWgmma, Fa3AssemblesWithoutSpills) {
  const TargetDesc& t = testutil::gpuTarget("sm_90a");
  for (const char* pipe : {"fa3", "fa3-overlap", "fa3-pingpong"})
  for (int64_t d : {64, 128, 256})
    for (auto [bq, bk] : {std::pair<int64_t, int64_t>{64, 64}, {128, 64}, {128, 128}}) {
      Kernel k = attn(16, 16, 4096, 4096, d, true, ScalarType::BF16);
      Config c = fa3Cfg(bq, bk, 2);
      c.set("PIPE", std::string(pipe));
      auto cfg = testutil::gpuConfig(k, t, c);
      if (!cfg.ok()) continue;  // registers or shared memory: refused with a reason
      SCOPED_TRACE(std::string(pipe) + " D" + std::to_string(d) + " " + std::to_string(bq) + "x" + std::to_string(bk));
      auto b = codegen::compileGpu(k, *cfg, t);
      ASSERT_TRUE(b.ok()) << b.error().str();
      EXPECT_NE(b->assembly.find("cp.async.bulk.tensor"), std::string::npos);
      EXPECT_NE(b->assembly.find("setmaxnreg.dec"), std::string::npos);
      EXPECT_NE(b->assembly.find("setmaxnreg.inc"), std::string::npos);
      // P·V from registers: the A operand is a brace list of four registers.
      EXPECT_TRUE(std::regex_search(b->assembly, std::regex("wgmma\\.mma_async\\.sync\\.aligned\\.m64n" + std::to_string(d) +
                                                            "k16\\.f32\\.bf16\\.bf16 \\{[^}]*\\}, \\{%r\\d+, %r\\d+, %r\\d+, %r\\d+\\}")));
      // The overlap waits for S with P·V still in flight; ping-pong takes turns by named barriers.
      const bool overlap = std::string(pipe) != "fa3", pingpong = std::string(pipe) == "fa3-pingpong";
      EXPECT_EQ(std::regex_search(b->assembly, std::regex(R"(wgmma\.wait_group\.sync\.aligned\s+1;)")), overlap);
      EXPECT_EQ(b->assembly.find("bar.arrive") != std::string::npos, pingpong);
      if (b->binary.empty()) continue;  // no ptxas here
      EXPECT_TRUE(b->resources.ok) << b->resources.summary() << " " << (b->resources.problems.empty() ? "" : b->resources.problems[0]);
      EXPECT_FALSE(b->resources.spills()) << d << " " << bq << "x" << bk << ": " << b->resources.summary();
      // P is packed before the P·V chain's fence: ptxas fences none of its wgmmas (it fenced 7 of
      // 8 per key block when the packing sat between them); head_dim 256 packs step by step.
      if (d <= 128) EXPECT_EQ(b->resources.wgmmaArrivesInjected, 0) << b->resources.summary();
      EXPECT_FALSE(b->resources.wgmmaSerialized) << b->resources.summary();
    }
}

// ptxas's notes on wgmma are read from its log and shown in the resources line.
TEST(GpuAttentionWgmma, PtxasWgmmaNotesAreRead) {
  const codegen::GpuBackend* nv = codegen::gpuBackend(Vendor::Nvidia);
  ASSERT_NE(nv, nullptr);
  codegen::GpuObjects o;
  o.toolLog =
      "ptxas info    : (C7519) warpgroup.arrive is injected in around line 1126 by compiler to allow use of registers in GMMA in function 'k'\n"
      "ptxas info    : (C7519) warpgroup.arrive is injected in around line 1142 by compiler to allow use of registers in GMMA in function 'k'\n"
      "ptxas info    : Used 168 registers, used 1 barriers, 1024 bytes smem\n";
  codegen::ResourceReport r;
  r.vendor = Vendor::Nvidia;
  nv->readResources(o, r);
  EXPECT_EQ(r.registers, 168);
  EXPECT_EQ(r.wgmmaArrivesInjected, 2);
  EXPECT_FALSE(r.wgmmaSerialized);
  EXPECT_NE(r.summary().find("ptxas fenced 2 wgmmas"), std::string::npos) << r.summary();
  o.toolLog += "ptxas warning : Potential Performance Loss: wgmma.mma_async instructions are serialized due to the presence of Extern calls in the function 'k'.\n";
  nv->readResources(o, r);
  EXPECT_TRUE(r.wgmmaSerialized);
  EXPECT_NE(r.summary().find("ptxas serialized the wgmmas"), std::string::npos) << r.summary();
  o.toolLog = "ptxas info    : Used 96 registers, 1024 bytes smem\n";  // a clean log: no note
  nv->readResources(o, r);
  EXPECT_EQ(r.wgmmaArrivesInjected, 0);
  EXPECT_FALSE(r.wgmmaSerialized);
  EXPECT_EQ(r.summary().find("ptxas"), std::string::npos) << r.summary();
}

TEST(GpuAttentionWgmmaControls, Fa3BrokenFragmentsOrReleasesAreCaught) {
  const TargetDesc& t = testutil::gpuTarget("sm_90a");
  Kernel k = attn(1, 1, 64, 256, 64, false, ScalarType::F16);  // 4 key blocks through 2 slots
  auto cfg = testutil::gpuConfig(k, t, fa3Cfg(64, 64, 2));
  ASSERT_TRUE(cfg.ok()) << cfg.error().str();
  {
    KernelIO io(k, 5);
    io.poisonOutputs();
    auto rep = testutil::runMapped(k, *cfg, t, io);
    ASSERT_TRUE(rep.ok()) << rep.error().str();
    EXPECT_TRUE(rep->ok) << (rep->errors.empty() ? "" : rep->errors[0]);
    auto cmp = io.check();
    ASSERT_TRUE(cmp.ok());
    EXPECT_TRUE(cmp->ok) << "the unbroken kernel must pass for the controls to mean anything";
  }
  // An emulated GPU whose register-A fragment differs from mma.sync's (registers 1 and 2
  // exchanged): the kernel's P pairing is wrong for it, and the check sees it.
  {
    codegen::MappedEmuOptions swapped;
    swapped.run.fault = emu::HwFault::WgmmaSwapA;
    KernelIO io(k, 5);
    io.poisonOutputs();
    auto rep = testutil::runMapped(k, *cfg, t, io, swapped);
    ASSERT_TRUE(rep.ok()) << rep.error().str();
    auto cmp = io.check();
    ASSERT_TRUE(cmp.ok());
    EXPECT_FALSE(cmp->ok) << "register-A fragments exchanged, yet the output matched";
  }
  // The consumers release a slot before their wgmmas retired it (every wait_group dropped): the
  // producer's next TMA into the slot races with the reads in flight.
  {
    codegen::MappedEmuOptions noWait;
    noWait.deviceHook = [](const std::string& s) {
      EXPECT_NE(s.find("nvvm.wgmma.wait.group.sync.aligned"), std::string::npos);
      return std::regex_replace(s, std::regex(R"(\n\s*nvvm\.wgmma\.wait\.group\.sync\.aligned [^\n]*\n)"), "\n");
    };
    KernelIO io(k, 5);
    io.poisonOutputs();
    auto rep = testutil::runMapped(k, *cfg, t, io, noWait);
    ASSERT_TRUE(rep.ok()) << rep.error().str();
    EXPECT_FALSE(rep->ok) << "slots released with wgmmas in flight, yet nothing reported";
  }
}

// The overlap's order and the ping-pong's turns are what the emulator checks: waiting for all but
// two wgmma groups before reading S reads it in flight (the P·V group was issued after it), and
// without the turns' arrivals the warpgroups wait for each other forever.
TEST(GpuAttentionWgmmaControls, Fa3OverlapOrderAndPingPongTurnsAreChecked) {
  const TargetDesc& t = testutil::gpuTarget("sm_90a");
  Kernel k = attn(1, 1, 128, 256, 64, false, ScalarType::F16);  // 4 key blocks through 2 slots
  Config c = fa3Cfg(128, 64, 2);
  c.set("PIPE", std::string("fa3-pingpong"));
  auto cfg = testutil::gpuConfig(k, t, c);
  ASSERT_TRUE(cfg.ok()) << cfg.error().str();
  auto run = [&](const std::function<std::string(const std::string&)>& hook) {
    codegen::MappedEmuOptions o;
    o.deviceHook = hook;
    KernelIO io(k, 5);
    io.poisonOutputs();
    auto rep = testutil::runMapped(k, *cfg, t, io, o);
    EXPECT_TRUE(rep.ok()) << rep.error().str();
    auto cmp = io.check();
    return std::pair{rep.ok() ? *rep : emu::Report{}, cmp.ok() && cmp->ok};
  };
  auto errors = [](const emu::Report& r) {
    std::string s;
    for (const auto& e : r.errors) s += "\n  " + e;
    return s;
  };
  {
    auto [rep, correct] = run({});
    EXPECT_TRUE(rep.ok) << errors(rep);
    EXPECT_TRUE(correct) << "the unbroken kernel must pass for the controls to mean anything";
  }
  {
    auto [rep, correct] = run([](const std::string& s) {
      EXPECT_NE(s.find("nvvm.wgmma.wait.group.sync.aligned 1"), std::string::npos);
      return std::regex_replace(s, std::regex(R"(nvvm\.wgmma\.wait\.group\.sync\.aligned 1\b)"), "nvvm.wgmma.wait.group.sync.aligned 2");
    });
    bool named = false;
    for (const auto& e : rep.errors) named |= e.find("wgmma accumulator read before its wgmma.wait_group") != std::string::npos;
    EXPECT_TRUE(named) << "S read with two groups in flight, yet not reported:" << errors(rep);
  }
  {
    auto [rep, correct] = run([](const std::string& s) {
      EXPECT_NE(s.find("nvvm.barrier.arrive"), std::string::npos);
      return std::regex_replace(s, std::regex(R"(\n\s*nvvm\.barrier\.arrive [^\n]*\n)"), "\n");
    });
    bool deadlock = false;
    for (const auto& e : rep.errors) deadlock |= e.find("deadlock") != std::string::npos;
    EXPECT_TRUE(deadlock) << "no turn was ever granted, yet no deadlock reported:" << errors(rep);
  }
}
