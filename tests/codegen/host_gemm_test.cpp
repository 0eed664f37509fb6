// Tests host GEMM codegen against the reference on odd shapes, every dtype, transposes, batch,
// epilogues and the extremes of every knob; invalid configs are rejected cleanly.
#include <gtest/gtest.h>

#include "codegen/codegen.h"
#include "host_check.h"
#include "ir/builders.h"
#include "search/space.h"

using namespace tessera;
using namespace tessera::ir;

namespace {

Kernel gemm(int64_t m, int64_t n, int64_t k, ScalarType t = ScalarType::F32) {
  GemmSpec s;
  s.m = m; s.n = n; s.k = k; s.dtype = t;
  return *buildGemm(s);
}

Config cfg(const std::string& a) { return *Config::parseAssignments(a); }

// The host on one thread: the transform schedules (plain, packed) run on one.
const TargetDesc& oneThread() {
  static TargetDesc t = *hostTargetWithThreads(1);
  return t;
}

}  // namespace

TEST(HostGemm, DefaultConfigOnOddShapes) {
  for (auto [m, n, k] : std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {7, 7, 7}, {129, 7, 33}, {1, 129, 1000},
                                                            {64, 64, 64}, {100, 70, 130}, {1000, 9, 1}}) {
    auto r = testutil::checkHost(gemm(m, n, k));
    EXPECT_TRUE(r.correct) << m << "x" << n << "x" << k << ": " << r.error;
  }
}

TEST(HostGemm, BothSchedulesOnOddShapes) {
  for (const char* sched : {"schedule=plain", "schedule=packed"})
    for (auto [m, n, k] : std::vector<std::array<int64_t, 3>>{{7, 129, 33}, {129, 1, 7}, {33, 65, 1}, {96, 64, 128}}) {
      auto r = testutil::checkHostOn(oneThread(), gemm(m, n, k), cfg(sched));
      EXPECT_TRUE(r.correct) << sched << " " << m << "x" << n << "x" << k << ": " << r.error;
    }
}

TEST(HostGemm, EveryDtypeTransposeBatchAndEpilogue) {
  for (ScalarType t : {ScalarType::F32, ScalarType::F16, ScalarType::BF16})
    for (int trans = 0; trans < 4; ++trans) {
      GemmSpec s;
      s.m = 37; s.n = 45; s.k = 19; s.dtype = t;
      s.transA = trans & 1; s.transB = trans & 2;
      s.batch = trans == 3 ? 2 : 0;
      if (trans == 2) {
        s.alpha = -0.5; s.beta = 1.5; s.epilogue = "silu(acc) * scale + bias"; s.shapes["bias"] = {45}; s.shapes["scale"] = {37, 1};
      }
      Kernel k = *buildGemm(s);
      for (const char* sched : {"schedule=plain", "schedule=packed"}) {
        auto r = testutil::checkHostOn(oneThread(), k, cfg(sched));
        EXPECT_TRUE(r.correct) << k.name << " " << sched << ": " << r.error;
      }
    }
}

TEST(HostGemm, PackedPeelsPartialRowAndColumnBlocks) {
  // Packed peels the last row block (M % MC) and column block (N % NC) so full blocks run
  // unmasked micro-tiles; both loops share the packed B panel. Several full blocks plus a tail on
  // each side, with transposes, a batch, an epilogue and bf16 inputs through the peeled loops.
  for (int variant = 0; variant < 5; ++variant) {
    GemmSpec s;
    s.m = 100; s.n = 70; s.k = 45;
    s.transA = variant == 1; s.transB = variant == 2;
    s.batch = variant == 3 ? 3 : 0;
    if (variant == 4) s.dtype = ScalarType::BF16;
    if (variant == 2) {
      s.epilogue = "relu(acc) + bias"; s.shapes["bias"] = {70};
    }
    Kernel k = *buildGemm(s);
    for (const char* c : {"schedule=packed,MC=24,MR=6,NC=32,NR=16,KC=16,KU=2,ORDER=ij",
                          "schedule=packed,MC=32,MR=4,NC=64,NR=8,KC=64,KU=1,ORDER=ji"}) {
      auto r = testutil::checkHostOn(oneThread(), k, cfg(c));
      EXPECT_TRUE(r.correct) << k.name << " " << c << ": " << r.error;
    }
  }
  // The schedule peels exactly the partial loops (96 = 4 x 24 rows, 64 = 2 x 32 columns): 100
  // rows peel the row blocks and, as 100 % 24 = 4 is no multiple of MR=6, the remainder's tiles.
  auto peels = [](int64_t m, int64_t n) {
    auto sched = codegen::emitHost(gemm(m, n, 32), cfg("schedule=packed,MC=24,MR=6,NC=32,NR=16,KC=16,KU=1,ORDER=ij"),
                                   hostTarget(), codegen::Emit::Schedule);
    EXPECT_TRUE(sched.ok());
    int count = 0;
    for (size_t at = sched.ok() ? sched->find("transform.loop.peel") : std::string::npos; at != std::string::npos;
         at = sched->find("transform.loop.peel", at + 1))
      ++count;
    return count;
  };
  EXPECT_EQ(peels(96, 64), 0);
  EXPECT_EQ(peels(100, 64), 2);
  EXPECT_EQ(peels(96, 70), 1);
}

TEST(HostGemm, ExtremesOfEveryKnob) {
  // Every knob at the smallest and the largest value of its domain, the others at their
  // defaults (values the space's constraint rejects are skipped: they are not in the space).
  Kernel k = gemm(97, 83, 71);
  auto space = search::makeSpace(k, hostTarget());
  ASSERT_TRUE(space.ok());
  int checked = 0;
  for (const auto& knob : space->knobs)
    for (const auto& v : {knob.domain.front(), knob.domain.back()})
      for (const char* sched : {"plain", "packed"}) {
        Config c = space->defaults();
        c.set("schedule", std::string(sched));
        // The transform schedules run on one thread (the default may be nvec on two).
        if (space->find("THREADS")) c.set("THREADS", int64_t(1));
        c.set(knob.name, v);
        if (space->check(c)) continue;
        auto r = testutil::checkHost(k, c);
        EXPECT_TRUE(r.correct) << knob.name << "=" << knobValueStr(v) << " " << sched << ": " << r.error;
        ++checked;
      }
  EXPECT_GE(checked, 20);
}

TEST(HostGemm, InvalidConfigsAreRejectedCleanly) {
  Kernel k = gemm(16, 16, 16);
  const TargetDesc& host = hostTarget();
  auto space = search::makeSpace(k, host);
  // The transform schedules' knobs (16^3 defaults to nvec, which reads none of MC, NR or ORDER),
  // then nvec's own.
  for (const char* bad : {"MR=0", "NR=-4", "schedule=blocked", "ORDER=kij", "KU=64", "MR=64,NR=256", "MC=8,MR=16",
                          "schedule=nvec,NV=0", "schedule=nvec,KC=-1", "schedule=nvec,KU=64"}) {
    Config c = space->defaults();
    c.set("schedule", std::string("plain"));
    Config extra = *Config::parseAssignments(bad);
    for (const auto& [n, v] : extra.values) c.set(n, v);
    auto exe = codegen::compileHost(k, c, host);
    ASSERT_FALSE(exe.ok()) << bad;
    EXPECT_EQ(exe.error().code, ErrorCode::InvalidConfig) << bad << ": " << exe.error().str();
  }
  {
    // A register tile past any host's vector registers: 16 rows x 8 vectors needs 137 of them, and
    // N = 512 keeps NV = 8 at every vector width (at N = 16 an AVX-512 host clamps it to one vector,
    // which fits).
    Kernel wide = gemm(16, 512, 16);
    auto wideSpace = search::makeSpace(wide, host);
    ASSERT_TRUE(wideSpace.ok());
    Config c = wideSpace->defaults();
    const Config tile = *Config::parseAssignments("schedule=nvec,MR=16,NV=8");
    for (const auto& [n, v] : tile.values) c.set(n, v);
    auto exe = codegen::compileHost(wide, c, host);
    ASSERT_FALSE(exe.ok());
    EXPECT_EQ(exe.error().code, ErrorCode::InvalidConfig) << exe.error().str();
    EXPECT_NE(exe.error().message.find("vector registers"), std::string::npos) << exe.error().str();
  }
  Config missing = space->defaults();
  missing.values.erase("KC");
  auto exe = codegen::compileHost(k, missing, host);
  ASSERT_FALSE(exe.ok());
  EXPECT_NE(exe.error().message.find("KC"), std::string::npos);
  // The space explains why a config is outside it.
  space = search::makeSpace(gemm(256, 256, 256), host);
  Config over = space->defaults();
  over.set("MR", int64_t(14));
  for (const auto& knob : space->knobs)  // the widest register tile of this host (64 on AVX-512, 32 on AVX2)
    if (knob.name == "NR") over.set("NR", knob.domain.back());
  auto why = space->check(over);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("vector registers"), std::string::npos) << *why;
}

TEST(HostGemm, DefaultConfigIsInsideTheSpace) {
  for (auto [m, n, k] : std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {7, 1000, 3}, {2048, 2048, 2048}, {1, 4096, 64}}) {
    auto space = search::makeSpace(gemm(m, n, k), hostTarget());
    ASSERT_TRUE(space.ok());
    auto why = space->check(space->defaults());
    EXPECT_FALSE(why.has_value()) << m << "x" << n << "x" << k << ": " << why.value_or("");
  }
}

TEST(HostGemm, EmitsEveryStage) {
  // A transform schedule (plain), so that the Schedule stage has text: 64^3's default is nvec
  // on hosts whose L1 holds its operands (built without one).
  Kernel k = gemm(64, 64, 64);
  auto c = search::makeSpace(k, hostTarget())->defaults();
  c.values["schedule"] = std::string("plain");
  for (codegen::Emit e : {codegen::Emit::Payload, codegen::Emit::Schedule, codegen::Emit::Scheduled,
                          codegen::Emit::LLVMDialect, codegen::Emit::LLVMIR, codegen::Emit::Asm, codegen::Emit::Object}) {
    auto out = codegen::emitHost(k, c, hostTarget(), e);
    ASSERT_TRUE(out.ok()) << codegen::emitName(e) << ": " << out.error().str();
    EXPECT_GT(out->size(), 100u) << codegen::emitName(e);
  }
  // Vector FMAs must actually be emitted (not scalar loops).
  auto as = codegen::emitHost(k, c, hostTarget(), codegen::Emit::Asm);
  EXPECT_NE(as->find("vfmadd"), std::string::npos);
  auto obj = codegen::emitHost(k, c, hostTarget(), codegen::Emit::Object);
  EXPECT_EQ(obj->substr(0, 4), std::string("\x7f" "ELF"));
}

TEST(HostGemm, ManyEdgeTilesDoNotGrowTheStack) {
  // Regression: stack-promoted pad buffers inside loops overflowed the stack at 1024³ with MC=48
  // (found by the tuner as crashes); they must be allocated once per call.
  auto r = testutil::checkHostOn(*hostTargetWithThreads(1), gemm(1024, 1024, 1024),
                                 cfg("schedule=plain,KC=128,KU=2,MC=48,MR=4,NC=1024,NR=32,ORDER=ij"));
  EXPECT_TRUE(r.correct) << r.error;
}
