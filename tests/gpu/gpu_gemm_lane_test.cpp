// Tests the lane-level tensor-core GEMM (strategy=mma-lane: ldmatrix + mma.sync m16n8k16 fed by a
// cp.async ring, f16 and bf16, NVIDIA sm_80-90) without a GPU: its mapped kernel on the
// mapped-kernel emulator against the reference (odd shapes, transposed operands, batches in one
// launch, fused epilogues, every target, ring depths and warp layouts), the space's choice of it,
// the ptxas resource report of the defaults (no spills), and controls that must fail: a wrong
// fragment register, the ring's barrier removed, a cp.async wait one group short.
#include <gtest/gtest.h>

#include <regex>

#include "emulator/gpu_emu.h"
#include "codegen/gpu.h"
#include "codegen/gpu_runner.h"
#include "gpu_check.h"
#include "ir/builders.h"
#include "search/space.h"
#include "targets/kernel_io.h"

using namespace tessera;
using namespace tessera::ir;

namespace {

struct Prob {
  int64_t m, n, k;
  ScalarType t;
  bool ta = false, tb = false;
  int64_t batch = 0;
  bool epilogue = false;
};

Kernel gemmOf(const Prob& s) {
  GemmSpec g;
  g.m = s.m; g.n = s.n; g.k = s.k; g.dtype = s.t; g.transA = s.ta; g.transB = s.tb; g.batch = s.batch;
  if (s.epilogue) {
    g.alpha = 0.5; g.beta = 1.5; g.epilogue = "silu(acc) * scale + bias";
    g.shapes["bias"] = {s.n};
    g.shapes["scale"] = {s.m, 1};
  }
  auto k = buildGemm(g);
  EXPECT_TRUE(k.ok()) << (k.ok() ? "" : k.error().str());
  return *k;
}

std::string strategyOf(const Config& c) { return std::get<std::string>(c.values.at("strategy")); }

Config lane(const std::string& knobs) { return *Config::parseAssignments("strategy=mma-lane,VEC=8," + knobs); }

// The mapped kernel of `k` with `cfg` on `io` (seeded inputs, poisoned outputs); the emulation's report.
Expected<emu::Report> runMapped(const Kernel& k, const Config& cfg, const TargetDesc& t, KernelIO& io,
                                const codegen::MappedEmuOptions& o = {}) {
  TESSERA_ASSIGN(codegen::GpuBinary bin, codegen::compileGpu(k, cfg, t, {.wantBinary = false}));
  TESSERA_ASSIGN(auto mk, codegen::compileMapped(bin, t, o));
  auto report = std::make_shared<emu::Report>();
  auto runner = codegen::makeDeviceRunner(codegen::mappedEmulatedDevice(mk, t.name, report));
  auto ran = runner->run(bin, k, io.buffers(), 1);
  (void)ran;  // a launch the emulation faults fails; the report says why
  return *report;
}

}  // namespace

// bf16 on sm_80-90 (which `mma` cannot take) and batched f16 (which `mma` launches per batch)
// default to mma-lane; unbatched f16 keeps `mma`, f32 simt; sm_75 and AMD do not offer it.
TEST(GpuGemmLane, TheSpaceOffersItWhereMmaSyncTakesTheType) {
  struct Case { const char* target; Prob s; const char* def; bool offered; };
  for (const Case& c : std::vector<Case>{{"sm_80", {4096, 4096, 4096, ScalarType::BF16}, "mma-lane", true},
                                         {"sm_86", {1000, 1000, 1000, ScalarType::BF16}, "mma-lane", true},
                                         {"sm_89", {64, 64, 64, ScalarType::BF16}, "mma-lane", true},
                                         {"sm_90", {256, 256, 256, ScalarType::F16, false, false, 64}, "mma-lane", true},
                                         {"sm_90", {4096, 4096, 4096, ScalarType::F16}, "mma", true},
                                         {"sm_90a", {4096, 4096, 4096, ScalarType::BF16}, "wgmma", true},
                                         {"sm_80", {256, 256, 256, ScalarType::F32}, "simt", false},
                                         {"sm_75", {256, 256, 256, ScalarType::BF16}, "simt", false},
                                         {"gfx942", {256, 256, 256, ScalarType::BF16}, "mma", false}}) {
    Kernel k = gemmOf(c.s);
    auto space = search::makeSpace(k, testutil::gpuTarget(c.target));
    ASSERT_TRUE(space.ok()) << space.error().str();
    EXPECT_EQ(strategyOf(space->defaults()), c.def) << c.target << " " << k.name;
    bool offered = false;
    for (const auto& kn : space->knobs)
      if (kn.name == "strategy")
        for (const auto& v : kn.domain) offered |= std::get<std::string>(v) == "mma-lane";
    EXPECT_EQ(offered, c.offered) << c.target << " " << k.name;
  }
}

TEST(GpuGemmLane, MappedKernelMatchesTheReference) {
  struct Case { const char* target; Prob s; const char* knobs; };
  for (const Case& c : std::vector<Case>{
           {"sm_80", {1, 1, 1, ScalarType::BF16}, ""},                                  // one element
           {"sm_86", {17, 33, 65, ScalarType::F16}, ""},                                // odd: A and B packed
           {"sm_89", {130, 260, 200, ScalarType::BF16, true, true}, ""},                // both transposed, read in place
           {"sm_90", {130, 260, 200, ScalarType::F16, true, false}, ""},                // transposed A (ldmatrix.trans)
           {"sm_80", {40, 24, 72, ScalarType::BF16, true, true, 3}, ""},                // batch 3, one launch
           {"sm_90", {70, 90, 50, ScalarType::F16, false, true, 3, true}, ""},          // epilogue, batch, odd K (B packed)
           {"sm_86", {256, 128, 96, ScalarType::BF16, false, false, 0, true}, ""},      // epilogue, full tiles
           {"sm_80", {96, 80, 160, ScalarType::F16}, "BM=32,BN=64,BK=64,TM=16,TN=32,STAGES=4"}}) {
    Kernel k = gemmOf(c.s);
    const TargetDesc& t = testutil::gpuTarget(c.target);
    auto cfg = testutil::gpuConfig(k, t, *c.knobs ? lane(c.knobs) : Config());
    ASSERT_TRUE(cfg.ok()) << cfg.error().str();
    ASSERT_EQ(strategyOf(*cfg), c.s.t == ScalarType::F16 && c.s.batch == 0 && !*c.knobs ? "mma" : "mma-lane") << k.name;
    if (strategyOf(*cfg) != "mma-lane") {  // unbatched f16: the same tiles on mma-lane
      cfg->set("strategy", std::string("mma-lane"));
      cfg->set("STAGES", int64_t(3));
    }
    auto r = testutil::checkMappedEmulated(k, t, *cfg);
    EXPECT_TRUE(r.correct) << k.name << " on " << c.target << ": " << r.error;
  }
}

// Ring depths 2-4 and warp layouts 1x1 .. 2x4 on a ragged, transposed, batched bf16 problem.
TEST(GpuGemmLane, EveryRingDepthAndWarpLayout) {
  Kernel k = gemmOf({72, 100, 136, ScalarType::BF16, false, true, 2});
  const TargetDesc& t = testutil::gpuTarget("sm_80");
  int ran = 0;
  for (const char* knobs : {"BM=16,BN=16,BK=16,TM=16,TN=16,STAGES=2", "BM=64,BN=32,BK=32,TM=32,TN=16,STAGES=3",
                            "BM=32,BN=128,BK=32,TM=16,TN=32,STAGES=4", "BM=64,BN=64,BK=64,TM=32,TN=32,STAGES=2",
                            "BM=128,BN=64,BK=16,TM=64,TN=16,STAGES=3"}) {
    auto cfg = testutil::gpuConfig(k, t, lane(knobs));
    ASSERT_TRUE(cfg.ok()) << knobs << ": " << cfg.error().str();
    ++ran;
    auto r = testutil::checkMappedEmulated(k, t, *cfg);
    EXPECT_TRUE(r.correct) << knobs << ": " << r.error;
  }
  EXPECT_EQ(ran, 5);
}

// What the device test asks a GPU to run, run lane by lane here first.
TEST(GpuGemmLane, TheDeviceCasesPassOnTheEmulator) {
  for (const char* tn : {"sm_86"})
    for (auto& cs : testutil::laneMmaDeviceCases()) {
      const TargetDesc& t = testutil::gpuTarget(tn);
      auto cfg = testutil::gpuConfig(cs.kernel, t, cs.cfg);
      ASSERT_TRUE(cfg.ok()) << cs.kernel.name << ": " << cfg.error().str();
      auto r = testutil::checkMappedEmulated(cs.kernel, t, *cfg);
      EXPECT_TRUE(r.correct) << cs.kernel.name << " on " << tn << ": " << r.error;
    }
}

TEST(GpuGemmLane, IllegalConfigsSayWhy) {
  Kernel bf = gemmOf({256, 256, 256, ScalarType::BF16}), f32 = gemmOf({256, 256, 256, ScalarType::F32});
  struct Case { const Kernel* k; const char* target; const char* knobs; const char* why; };
  for (const Case& c : std::vector<Case>{{&f32, "sm_80", "BM=64,BN=64,BK=32,TM=32,TN=32,STAGES=2", "f16/bf16"},
                                         {&bf, "sm_75", "BM=64,BN=64,BK=32,TM=32,TN=32,STAGES=2", "sm_80 and later"},
                                         {&bf, "sm_80", "BM=64,BN=64,BK=32,TM=32,TN=24,STAGES=2", "TN"},
                                         {&bf, "sm_80", "BM=64,BN=64,BK=32,TM=32,TN=32,STAGES=1", "STAGES"},
                                         {&bf, "sm_80", "BM=64,BN=64,BK=8,TM=32,TN=32,STAGES=2", "BK"}}) {
    auto st = codegen::checkGpuConfig(*c.k, lane(c.knobs), testutil::gpuTarget(c.target));
    ASSERT_FALSE(st.ok()) << c.target << " " << c.knobs;
    EXPECT_NE(st.error().message.find(c.why), std::string::npos) << st.error().message;
  }
}

// Batched GEMMs run in one launch: the batch is the grid's z.
TEST(GpuGemmLane, BatchesAreTheGridsZ) {
  Kernel k = gemmOf({256, 256, 256, ScalarType::F16, false, false, 64});
  auto b = testutil::compileFor(k, testutil::gpuTarget("sm_90"));
  ASSERT_TRUE(b.ok()) << b.error().str();
  EXPECT_EQ(b->strategy, "mma-lane");
  EXPECT_EQ(b->launch.batches, 1);
  EXPECT_EQ(b->launch.grid[2], 64);
  EXPECT_EQ(b->launch.grid[0] * b->launch.grid[1], 4);
}

// The defaults assemble with ldmatrix, mma.sync bf16/f16 and cp.async, and ptxas does not spill.
TEST(GpuGemmLane, DefaultsAssembleWithoutSpills) {
  for (const char* tn : {"sm_80", "sm_86", "sm_89", "sm_90"})
    for (ScalarType dt : {ScalarType::BF16, ScalarType::F16}) {
      const TargetDesc& t = testutil::gpuTarget(tn);
      Kernel k = gemmOf({4096, 4096, 4096, dt, false, false, dt == ScalarType::F16 ? int64_t(2) : int64_t(0)});
      auto b = testutil::compileFor(k, t);
      ASSERT_TRUE(b.ok()) << b.error().str();
      EXPECT_EQ(b->strategy, "mma-lane") << tn;
      EXPECT_GT(testutil::countOccurrences(b->assembly, "ldmatrix.sync.aligned.m8n8.x4"), 0);
      EXPECT_GT(testutil::countOccurrences(b->assembly, dt == ScalarType::BF16 ? ".bf16.bf16.f32" : ".f16.f16.f32"), 0);
      EXPECT_GT(testutil::countOccurrences(b->assembly, "cp.async.cg.shared.global"), 0);
      if (b->binary.empty()) GTEST_SKIP() << "no ptxas: " << b->resources.summary();
      EXPECT_FALSE(b->resources.spills()) << tn << ": " << b->resources.summary();
      EXPECT_TRUE(b->resources.ok) << tn << ": " << b->resources.summary();
      EXPECT_LE(b->launch.dynamicSharedBytes, std::max(t.smemPerBlock, t.smemPerBlockOptIn));
    }
}

// A fragment register taken from the wrong place (the mma's first two A registers swapped: rows g
// and g+8 exchanged) is a wrong result, not a fault: the reference check must catch it.
TEST(GpuGemmLaneControls, AWrongFragmentRegisterFailsTheCheck) {
  for (ScalarType dt : {ScalarType::F16, ScalarType::BF16}) {
    Kernel k = gemmOf({64, 64, 64, dt});
    const TargetDesc& t = testutil::gpuTarget("sm_80");
    auto cfg = testutil::gpuConfig(k, t, lane("BM=64,BN=64,BK=32,TM=32,TN=32,STAGES=2"));
    ASSERT_TRUE(cfg.ok()) << cfg.error().str();
    codegen::MappedEmuOptions swap;
    int swapped = 0;
    swap.deviceHook = [&](const std::string& s) {
      std::regex a(R"(A\[(%[\w#]+), (%[\w#]+),)");
      std::string out = std::regex_replace(s, a, "A[$2, $1,");
      swapped = out != s;
      return out;
    };
    KernelIO io(k, 7);
    io.poisonOutputs();
    auto rep = runMapped(k, *cfg, t, io, swap);
    ASSERT_TRUE(rep.ok()) << rep.error().str();
    ASSERT_TRUE(swapped) << "no mma.sync operand list found in the device IR";
    auto cmp = io.check();
    ASSERT_TRUE(cmp.ok()) << cmp.error().str();
    EXPECT_FALSE(cmp->ok) << "swapped fragment registers passed (max rel err " << cmp->maxRelErr << ")";
    // The unmodified kernel passes the same check.
    KernelIO io2(k, 7);
    io2.poisonOutputs();
    auto rep2 = runMapped(k, *cfg, t, io2);
    ASSERT_TRUE(rep2.ok() && rep2->ok);
    auto cmp2 = io2.check();
    ASSERT_TRUE(cmp2.ok());
    EXPECT_TRUE(cmp2->ok);
  }
}

TEST(GpuGemmLaneControls, ARemovedBarrierOrAShortWaitIsReported) {
  Kernel k = gemmOf({128, 128, 256, ScalarType::BF16});
  const TargetDesc& t = testutil::gpuTarget("sm_80");
  auto cfg = testutil::gpuConfig(k, t, lane("BM=64,BN=64,BK=32,TM=32,TN=32,STAGES=3"));
  ASSERT_TRUE(cfg.ok()) << cfg.error().str();
  // Every barrier gone: a warp reads a slot another warp's copy has not landed, or refills one still read.
  codegen::MappedEmuOptions noBarrier;
  noBarrier.deviceHook = [](const std::string& s) { return std::regex_replace(s, std::regex(R"(\n\s*nvvm\.barrier0\n)"), "\n"); };
  KernelIO io(k, 5);
  io.poisonOutputs();
  auto rep = runMapped(k, *cfg, t, io, noBarrier);
  ASSERT_TRUE(rep.ok()) << rep.error().str();
  EXPECT_FALSE(rep->ok) << "no barrier, yet no race reported";
  // The ring's waits one group short: a slot is read while its copy is in flight.
  codegen::MappedEmuOptions shortWait;
  shortWait.deviceHook = [](const std::string& s) {
    std::string out;
    std::regex wait(R"(nvvm\.cp\.async\.wait\.group (\d+))");
    size_t last = 0;
    for (auto it = std::sregex_iterator(s.begin(), s.end(), wait); it != std::sregex_iterator(); ++it) {
      out += s.substr(last, size_t(it->position(0)) - last) + "nvvm.cp.async.wait.group " + std::to_string(std::stoi((*it)[1].str()) + 1);
      last = size_t(it->position(0) + it->length(0));
    }
    return out + s.substr(last);
  };
  KernelIO io2(k, 5);
  io2.poisonOutputs();
  auto rep2 = runMapped(k, *cfg, t, io2, shortWait);
  ASSERT_TRUE(rep2.ok()) << rep2.error().str();
  EXPECT_FALSE(rep2->ok) << "waits one group short, yet no async-copy misuse reported";
}
