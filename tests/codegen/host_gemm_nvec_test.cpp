// Tests the host GEMM for few rows (schedule nvec, vectors along N, every row of a strip in
// registers): every dtype, A stored either way, one and several row tiles, K blocks with a partial
// last one, partial (masked) last strips, batch, fused epilogues and two threads against the
// reference; what it refuses; and where the space offers it and makes it the default.
#include <gtest/gtest.h>

#include "codegen/codegen.h"
#include "hostgen/host_gemm_nvec.h"
#include "host_check.h"
#include "ir/builders.h"
#include "search/space.h"

using namespace tessera;
using namespace tessera::ir;

namespace {

Config cfg(const std::string& a) { return *Config::parseAssignments(a); }

std::string defaultSchedule(const Kernel& k, const TargetDesc& t) {
  auto s = search::makeSpace(k, t);
  EXPECT_TRUE(s.ok()) << s.error().str();
  return s.ok() ? knobValueStr(s->defaults().values.at("schedule")) : "";
}

bool offers(const Kernel& k, const TargetDesc& t, const std::string& sched) {
  auto s = search::makeSpace(k, t);
  if (!s.ok()) return false;
  const Knob* kn = s->find("schedule");
  return kn && kn->indexOf(sched) >= 0;
}

}  // namespace

TEST(HostGemmNvec, EveryDtypeOnOddShapesAndThreads) {
  struct Case {
    std::array<int64_t, 3> mnk;
    const char* config;
  };
  // One row and prime sizes; one row tile (all of K in registers) and several (K blocks of KC
  // with a partial last block; the loop over full row tiles and the partial last; at 9x83x129 a
  // B past half the L1, so the copied strip of B); N below, at and past whole strips.
  const std::vector<Case> cases = {{{1, 1, 1}, "MR=1,NV=1,KC=16,KU=1"},
                                   {{1, 67, 129}, "MR=1,NV=3,KC=16,KU=4"},
                                   {{13, 37, 37}, "MR=4,NV=2,KC=16,KU=2,THREADS=2"},
                                   {{16, 100, 3}, "MR=8,NV=1,KC=16,KU=1,THREADS=2"},
                                   {{9, 83, 129}, "MR=2,NV=1,KC=32,KU=2"},
                                   {{2, 17, 37}, "MR=2,NV=2,KC=16,KU=4"},
                                   // An even and an odd count of K blocks (the sums take turns
                                   // between two copies), the second with the rows split.
                                   {{16, 40, 64}, "MR=4,NV=2,KC=16,KU=1"},
                                   {{24, 20, 96}, "MR=4,NV=1,KC=32,KU=1,THREADS=2"},
                                   {{24, 20, 64}, "MR=8,NV=3,KC=16,KU=2,THREADS=2"}};
  int i = 0;
  for (ScalarType t : {ScalarType::F32, ScalarType::F16, ScalarType::BF16})
    for (const Case& c : cases) {
      const bool transA = (i++ % 2) == 1;
      Kernel g = *buildGemm({.m = c.mnk[0], .n = c.mnk[1], .k = c.mnk[2], .dtype = t, .transA = transA});
      auto r = testutil::checkHostOn(testutil::twoThreadHost(), g, cfg(std::string("schedule=nvec,") + c.config));
      EXPECT_TRUE(r.correct) << g.name << " transA=" << transA << " " << c.config << ": " << r.error;
    }
}

TEST(HostGemmNvec, BatchAndFusedEpilogues) {
  for (ScalarType t : {ScalarType::F32, ScalarType::BF16}) {
    GemmSpec s;
    s.batch = 2; s.m = 6; s.n = 37; s.k = 45; s.dtype = t; s.transA = t == ScalarType::BF16;
    // alpha, beta·Cin, a row-broadcast bias (read only to column 37), a per-row scale, an activation.
    s.alpha = -0.5; s.beta = 1.5; s.epilogue = "gelu(acc * scale + bias)"; s.shapes["bias"] = {37}; s.shapes["scale"] = {2, 6, 1};
    Kernel k = *buildGemm(s);
    auto r = testutil::checkHostOn(testutil::twoThreadHost(), k, cfg("schedule=nvec,MR=4,NV=2,KC=16,KU=2,THREADS=2"));
    EXPECT_TRUE(r.correct) << k.name << ": " << r.error;
  }
}

// One row tile over a B past the L2: the K blocks run outside the strips, the sums kept between
// blocks in an f32 copy of C. A host with a 1 KiB L2 takes that path at sizes a test affords: two
// blocks (the first and the last), several (a loop between them, a partial last), two threads,
// a masked last strip, bf16 with A transposed and a fused epilogue. Breaking the carried sums
// (the middle blocks' loads) fails it.
TEST(HostGemmNvec, KBlocksOutsideTheStripsForABPastTheL2) {
  TargetDesc t = testutil::twoThreadHost();
  t.l2Bytes = 1024;
  struct Case {
    GemmSpec s;
    const char* config;
  };
  GemmSpec fused{.m = 3, .n = 67, .k = 129, .dtype = ScalarType::BF16, .transA = true};
  fused.epilogue = "relu(acc + bias)";
  fused.shapes["bias"] = {67};
  const std::vector<Case> cases = {{{.m = 2, .n = 20, .k = 33}, "MR=2,NV=2,KC=32,KU=2"},
                                   {{.m = 1, .n = 37, .k = 40}, "MR=1,NV=3,KC=16,KU=1"},
                                   {{.m = 3, .n = 67, .k = 129}, "MR=4,NV=2,KC=16,KU=4,THREADS=2"},
                                   {fused, "MR=4,NV=2,KC=16,KU=2,THREADS=2"}};
  for (const Case& c : cases) {
    Kernel g = *buildGemm(c.s);
    auto r = testutil::checkHostOn(t, g, cfg(std::string("schedule=nvec,") + c.config));
    EXPECT_TRUE(r.correct) << g.name << " " << c.config << ": " << r.error;
  }
  // The default for one row tile over a B past the L2 reads 16 rows of it per block.
  for (const auto& name : hostPresets()) {
    TargetDesc h = *hostPreset(name);
    auto sp = search::makeSpace(*buildGemm({.m = 3, .n = 4096, .k = 1024}), h);
    ASSERT_TRUE(sp.ok()) << sp.error().str();
    const bool oneTile = std::get<int64_t>(sp->defaults().values.at("MR")) >= 3;
    EXPECT_EQ(std::get<int64_t>(sp->defaults().values.at("KC")) == 16, oneTile && 4096 * 1024 * 4 > h.l2Bytes) << name;
  }
}

// A strip's last vector with at most half its lanes valid holds G steps of K for lanes / G
// columns (host_gemm_nvec.cpp, groupOf): every G the host's vector width makes (N = lanes / 2,
// lanes / 4, 3, 1), a grouped vector after whole ones in one strip (NV = 3) and in a strip of its
// own, depths G does not divide (a partial last group: masked A, zero rows of B), several row
// tiles with B copied to the L1 scratch and K blocks, one row tile over a B past the L2 (K
// blocks outside the strips), two threads splitting the rows, a batch with a fused epilogue, bf16.
// The payload shows the grouping (B's rows interleaved by vector.shuffle); with A stored K x M it
// is not grouped (its G elements are not contiguous) and still right.
TEST(HostGemmNvec, GroupedLastVectorOnEveryTail) {
  TargetDesc t = testutil::twoThreadHost();
  const int64_t lanes = std::max(4, t.simdBits / 32);
  struct Case {
    GemmSpec s;
    std::string config;
  };
  GemmSpec fused{.batch = 2, .m = 6, .n = lanes / 2 - 1, .k = 45, .alpha = -0.5, .beta = 1.5,
                 .epilogue = "gelu(acc * scale + bias)"};
  fused.shapes["bias"] = {lanes / 2 - 1};
  fused.shapes["scale"] = {2, 6, 1};
  std::vector<Case> cases = {
      {{.m = 8, .n = lanes / 2, .k = 129}, "MR=8,NV=1,KC=256,KU=4"},
      {{.m = 9, .n = lanes / 4, .k = 37}, "MR=4,NV=1,KC=256,KU=1"},
      {{.m = 5, .n = 3, .k = 3}, "MR=5,NV=1,KC=16,KU=2"},
      {{.m = 16, .n = 1, .k = 1}, "MR=8,NV=1,KC=16,KU=1"},
      {{.m = 7, .n = 1, .k = 67}, "MR=7,NV=1,KC=64,KU=8"},
      {{.m = 13, .n = 2 * lanes + 3, .k = 50}, "MR=4,NV=3,KC=16,KU=2"},
      {{.m = 12, .n = 2 * lanes + lanes / 4, .k = 100}, "MR=6,NV=2,KC=128,KU=1"},
      {{.m = 13, .n = lanes / 2, .k = 1001}, "MR=4,NV=1,KC=64,KU=2"},
      {{.m = 40, .n = lanes / 2 - 1, .k = 70}, "MR=4,NV=1,KC=32,KU=1,THREADS=2"},
      {fused, "MR=4,NV=1,KC=16,KU=2,THREADS=2"}};
  for (ScalarType dt : {ScalarType::F32, ScalarType::BF16})
    for (Case c : cases) {
      c.s.dtype = dt;
      Kernel g = *buildGemm(c.s);
      Config cf = cfg("schedule=nvec," + c.config);
      auto r = testutil::checkHostOn(t, g, cf);
      EXPECT_TRUE(r.correct) << g.name << " " << c.config << ": " << r.error;
      auto payload = codegen::emitHost(g, testutil::spaceConfig(g, t, "schedule=nvec," + c.config), t, codegen::Emit::Payload);
      ASSERT_TRUE(payload.ok()) << payload.error().str();
      EXPECT_NE(payload->find("vector.shuffle"), std::string::npos) << g.name << " " << c.config << ": not grouped";
    }
  // One row tile over a B past the L2 (a 1 KiB L2 here): the grouped sums wait between K blocks.
  TargetDesc small = t;
  small.l2Bytes = 1024;
  for (const Case& c : std::vector<Case>{{{.m = 2, .n = lanes + 3, .k = 129}, "MR=2,NV=2,KC=16,KU=2"},
                                         {{.m = 1, .n = lanes / 2, .k = 40}, "MR=1,NV=1,KC=16,KU=1"}}) {
    Kernel g = *buildGemm(c.s);
    auto r = testutil::checkHostOn(small, g, cfg("schedule=nvec," + c.config));
    EXPECT_TRUE(r.correct) << g.name << " " << c.config << ": " << r.error;
  }
  // A stored K x M: not grouped, still right.
  Kernel ta = *buildGemm({.m = 8, .n = lanes / 2, .k = 129, .transA = true});
  auto payload = codegen::emitHost(ta, testutil::spaceConfig(ta, t, "schedule=nvec,MR=8,NV=1,KC=256"), t, codegen::Emit::Payload);
  ASSERT_TRUE(payload.ok()) << payload.error().str();
  EXPECT_EQ(payload->find("vector.shuffle"), std::string::npos);
  EXPECT_TRUE(testutil::checkHostOn(t, ta, cfg("schedule=nvec,MR=8,NV=1,KC=256")).correct);
}

// The grouped vector's negative control: a kernel of the neighbouring GEMM (alpha 1.01) with the
// same grouped tails is caught by the comparison those checks use.
TEST(HostGemmNvec, GroupedComparisonCatchesANeighbouringKernel) {
  const int64_t lanes = std::max(4, testutil::twoThreadHost().simdBits / 32);
  Kernel want = *buildGemm({.m = 13, .n = lanes / 2, .k = 37});
  Kernel near = *buildGemm({.m = 13, .n = lanes / 2, .k = 37, .alpha = 1.01});
  Config c = testutil::spaceConfig(want, testutil::twoThreadHost(), "schedule=nvec,MR=4,NV=1,KC=16");
  auto exe = codegen::compileHost(near, c, testutil::twoThreadHost());
  ASSERT_TRUE(exe.ok()) << exe.error().str();
  EXPECT_FALSE(testutil::runAndCompare(want, **exe, c, 1).correct);
}

// Negative control for the checks above: an nvec kernel computing a neighbouring GEMM (alpha 1.01)
// is caught by the same comparison, with several row tiles, K blocks and a masked last strip.
TEST(HostGemmNvec, ComparisonCatchesANeighbouringKernel) {
  Kernel want = *buildGemm({.m = 13, .n = 37, .k = 37});
  Kernel near = *buildGemm({.m = 13, .n = 37, .k = 37, .alpha = 1.01});
  Config c = testutil::spaceConfig(want, testutil::twoThreadHost(), "schedule=nvec,MR=4,NV=2,KC=16");
  auto exe = codegen::compileHost(near, c, testutil::twoThreadHost());
  ASSERT_TRUE(exe.ok()) << exe.error().str();
  EXPECT_FALSE(testutil::runAndCompare(want, **exe, c, 1).correct);
  auto same = codegen::compileHost(want, c, testutil::twoThreadHost());
  ASSERT_TRUE(same.ok()) << same.error().str();
  EXPECT_TRUE(testutil::runAndCompare(want, **same, c, 1).correct);
}

TEST(HostGemmNvec, RefusesWhatItCannotRun) {
  const TargetDesc& t = testutil::twoThreadHost();
  auto refused = [&](const Kernel& k, const std::string& c) {
    auto exe = codegen::compileHost(k, cfg(c), t);
    EXPECT_FALSE(exe.ok()) << k.name << " " << c;
    if (!exe.ok()) {
      EXPECT_EQ(exe.error().code, ErrorCode::InvalidConfig) << exe.error().str();
    }
  };
  const std::string base = "MC=16,NC=64,KC=16,NR=" + std::to_string(std::max(4, t.simdBits / 32)) + ",ORDER=ij,schedule=nvec,KU=1,";
  refused(*buildGemm({.m = 5, .n = 40, .k = 20, .transB = true}), base + "MR=2,NV=2");  // B must be read along N
  // More rows than nvec takes at more columns than it takes past them.
  refused(*buildGemm({.m = codegen::kNvecMaxM + 1, .n = codegen::kNvecNarrowN + 16, .k = 20}), base + "MR=2,NV=2");
  refused(*buildGemm({.m = 16, .n = 64, .k = 20}), base + "MR=16,NV=2");  // 35 registers: no register file holds it
  // The space agrees: not offered for a transposed B, nor past kNvecMaxM rows unless B has few
  // columns that the packed kernels' panels pad (72: offered; 128 and past kNvecNarrowN: not),
  // offered next to them; its rule refuses the tile no register file holds and takes its neighbour.
  EXPECT_FALSE(offers(*buildGemm({.m = 5, .n = 40, .k = 20, .transB = true}), t, "nvec"));
  EXPECT_FALSE(offers(*buildGemm({.m = codegen::kNvecMaxM + 1, .n = codegen::kNvecNarrowN + 16, .k = 20}), t, "nvec"));
  EXPECT_FALSE(offers(*buildGemm({.m = codegen::kNvecMaxM + 1, .n = 128, .k = 20}), t, "nvec"));
  EXPECT_TRUE(offers(*buildGemm({.m = codegen::kNvecMaxM + 1, .n = 72, .k = 20}), t, "nvec"));
  EXPECT_TRUE(offers(*buildGemm({.m = codegen::kNvecMaxM, .n = 40, .k = 20, .transA = true}), t, "nvec"));
  auto sp = search::makeSpace(*buildGemm({.m = 16, .n = 64, .k = 20}), t);
  ASSERT_TRUE(sp.ok()) << sp.error().str();
  Config c = sp->defaults();
  c.values["schedule"] = std::string("nvec");
  c.values["MR"] = int64_t(16);
  c.values["NV"] = int64_t(2);
  EXPECT_TRUE(sp->check(c).has_value());
  c.values["MR"] = int64_t(4);
  EXPECT_FALSE(sp->check(c).has_value()) << *sp->check(c);
}

// The default: nvec for few rows and at least two vectors of columns on every named host (each
// rule derived from that host's vector width and caches); more rows, kvec's few columns, or (with
// AVX2) one or two rows of a B past the L2 keep the others.
TEST(HostGemmNvec, DefaultForFewRows) {
  for (const auto& name : hostPresets()) {
    TargetDesc t = *hostPreset(name);
    const int64_t lanes = std::max(4, t.simdBits / 32);
    EXPECT_EQ(defaultSchedule(*buildGemm({.m = 1, .n = 512, .k = 128}), t), "nvec") << name;
    EXPECT_EQ(defaultSchedule(*buildGemm({.m = 3, .n = 4096, .k = 1024}), t), "nvec") << name;
    // One or two rows of a B past the L2: with AVX2 plain walks B along its rows; with AVX-512
    // nvec's strips win there too.
    EXPECT_EQ(defaultSchedule(*buildGemm({.m = 2, .n = 4096, .k = 1024}), t) == "nvec", t.simdBits >= 512) << name;
    EXPECT_EQ(defaultSchedule(*buildGemm({.m = 1, .n = 4096, .k = 4096}), t) == "nvec", t.simdBits >= 512) << name;
    EXPECT_EQ(defaultSchedule(*buildGemm({.m = 16, .n = 1024, .k = 1024}), t), "nvec") << name;
    EXPECT_EQ(defaultSchedule(*buildGemm({.m = 5, .n = 2 * lanes, .k = 700}), t), "nvec") << name;
    EXPECT_NE(defaultSchedule(*buildGemm({.m = codegen::kNvecMaxM + 1, .n = 1024, .k = 1024}), t), "nvec") << name;
    EXPECT_NE(defaultSchedule(*buildGemm({.m = 129, .n = 7, .k = 200}), t), "nvec") << name;
  }
  auto r = testutil::checkHost(*buildGemm({.m = 13, .n = 200, .k = 300}));
  EXPECT_TRUE(r.correct) << r.error;
}

// Past kNvecMaxM rows (issue 53): nvec where B has few columns (at most kNvecNarrowN) and blis's
// panels of two vectors would pad 1/16 of them or more, on every named host, derived from its
// vector width; on two threads too (its threads split the rows). The controls keep the packed
// kernels: columns that the panels divide or nearly do (128, 127), more than kNvecNarrowN, bf16.
TEST(HostGemmNvec, DefaultForFewColumns) {
  for (const auto& name : hostPresets()) {
    TargetDesc t = *hostPreset(name);
    t.units = 1;
    EXPECT_EQ(defaultSchedule(*buildGemm({.m = 72, .n = 72, .k = 72}), t), "nvec") << name;
    EXPECT_EQ(defaultSchedule(*buildGemm({.m = 1000, .n = 100, .k = 1000}), t), "nvec") << name;
    EXPECT_EQ(defaultSchedule(*buildGemm({.m = 96, .n = 72, .k = 96}), t), "nvec") << name;
    EXPECT_NE(defaultSchedule(*buildGemm({.m = 128, .n = 128, .k = 128}), t), "nvec") << name;
    EXPECT_NE(defaultSchedule(*buildGemm({.m = 127, .n = 127, .k = 127}), t), "nvec") << name;
    EXPECT_NE(defaultSchedule(*buildGemm({.m = 200, .n = 200, .k = 200}), t), "nvec") << name;
    EXPECT_NE(defaultSchedule(*buildGemm({.m = 72, .n = 72, .k = 72, .dtype = ScalarType::BF16}), t), "nvec") << name;
    t.units = 2;
    Config two = search::makeSpace(*buildGemm({.m = 1000, .n = 100, .k = 1000}), t)->defaults();
    EXPECT_EQ(knobValueStr(two.values.at("schedule")), "nvec") << name;
    EXPECT_EQ(std::get<int64_t>(two.values.at("THREADS")), 2) << name;
    // Fewer rows than columns too (its threads split the rows whenever N is narrow), and from
    // 2 x kNvecFlopsPerThread on a second thread (100^3 and 150^3, not 66^3); 256 columns: not nvec.
    EXPECT_EQ(defaultSchedule(*buildGemm({.m = 100, .n = 150, .k = 2000}), t), "nvec") << name;
    Config cube = search::makeSpace(*buildGemm({.m = 150, .n = 150, .k = 150}), t)->defaults();
    EXPECT_EQ(knobValueStr(cube.values.at("schedule")), "nvec") << name;
    EXPECT_EQ(std::get<int64_t>(cube.values.at("THREADS")), 2) << name;
    Config hundred = search::makeSpace(*buildGemm({.m = 100, .n = 100, .k = 100}), t)->defaults();
    EXPECT_EQ(knobValueStr(hundred.values.at("schedule")), "nvec") << name;
    EXPECT_EQ(std::get<int64_t>(hundred.values.at("THREADS")), 2) << name;
    Config small = search::makeSpace(*buildGemm({.m = 66, .n = 66, .k = 66}), t)->defaults();
    EXPECT_EQ(knobValueStr(small.values.at("schedule")), "nvec") << name;
    EXPECT_EQ(std::get<int64_t>(small.values.at("THREADS")), 1) << name;
    EXPECT_NE(defaultSchedule(*buildGemm({.m = 100, .n = 256, .k = 2000}), t), "nvec") << name;
    // Columns the panels divide (128^3, not nvec on one thread above): nvec's row split on two
    // threads with AVX-512 (nvecRowSplitPays), not with AVX2, nor past kNvecNarrowN columns.
    const bool wide = t.simdBits >= 512;
    EXPECT_EQ(defaultSchedule(*buildGemm({.m = 128, .n = 128, .k = 128}), t) == "nvec", wide) << name;
    EXPECT_NE(defaultSchedule(*buildGemm({.m = 200, .n = 200, .k = 200}), t), "nvec") << name;
  }
  // Those defaults run right here: several row tiles, K blocks, a masked last strip, a batch and
  // a fused epilogue, against the reference.
  GemmSpec fused{.m = 130, .n = 90, .k = 70, .epilogue = "relu(acc + bias)"};
  fused.shapes["bias"] = {90};
  TargetDesc t = testutil::twoThreadHost();
  t.units = 1;
  for (const GemmSpec& s : {GemmSpec{.m = 300, .n = 72, .k = 130}, GemmSpec{.batch = 2, .m = 97, .n = 100, .k = 300}, fused}) {
    Kernel g = *buildGemm(s);
    EXPECT_EQ(defaultSchedule(g, t), "nvec") << g.name;
    auto r = testutil::checkHostOn(t, g);
    EXPECT_TRUE(r.correct) << g.name << ": " << r.error;
  }
  // Two threads splitting the rows: shares of whole row tiles with a shorter last one, K blocks
  // with the copied strip of B per thread, full and partial strips, a batch and the epilogue.
  GemmSpec batched{.batch = 2, .m = 97, .n = 40, .k = 50, .epilogue = "relu(acc + bias)"};
  batched.shapes["bias"] = {40};
  for (auto [s, c] : std::vector<std::pair<GemmSpec, const char*>>{{{.m = 131, .n = 72, .k = 130}, "MR=8,NV=2,KC=32,KU=2"},
                                                                  {batched, "MR=4,NV=3,KC=16,KU=1"},
                                                                  {{.m = 70, .n = 20, .k = 300}, "MR=6,NV=1,KC=64,KU=4"},
                                                                  {{.m = 66, .n = 150, .k = 40}, "MR=8,NV=2,KC=16,KU=1"}}) {
    Kernel g = *buildGemm(s);
    auto r = testutil::checkHostOn(testutil::twoThreadHost(), g, cfg(std::string("schedule=nvec,THREADS=2,") + c));
    EXPECT_TRUE(r.correct) << g.name << " " << c << ": " << r.error;
  }
}

// nvec's register tile: while A fits half the L2, the fewest row tiles among the tiles that score
// within 2 % (each row tile re-reads the strip of B): 7 and 13 rows are one tile on the hosts with
// 32 vector registers (7 x 3 and 13 x 2 vectors), where the tie-break by vectors alone took four
// or seven tiles of 2 x 8. The control: with A past half the L2 (1000 x 1000 of f32), each strip
// re-reads A instead, and the tile with the most vectors (fewest strips) stays.
TEST(HostGemmNvec, FewRowsTakeOneRowTileWhereTheRegistersHoldIt) {
  auto defaults = [](const std::string& host, const GemmSpec& s) {
    TargetDesc t = *hostPreset(host);
    t.units = 1;
    return search::makeSpace(*buildGemm(s), t)->defaults();
  };
  auto geti = [](const Config& c, const char* k) { return std::get<int64_t>(c.values.at(k)); };
  for (const std::string host : {"zen4", "sapphire-rapids"}) {
    ASSERT_EQ(hostPreset(host)->vectorRegisters, 32) << host;
    Config a = defaults(host, {.m = 7, .n = 512, .k = 64});
    EXPECT_EQ(knobValueStr(a.values.at("schedule")), "nvec") << host;
    EXPECT_GE(geti(a, "MR"), 7) << host << " " << a.str();
    Config b = defaults(host, {.m = 13, .n = 1024, .k = 1024});
    EXPECT_GE(geti(b, "MR"), 13) << host << " " << b.str();
    Config c = defaults(host, {.m = 1000, .n = 100, .k = 1000});
    EXPECT_EQ(knobValueStr(c.values.at("schedule")), "nvec") << host;
    EXPECT_GE(geti(c, "NV"), 4) << host << " " << c.str();
  }
  // Rows of A 4 KB apart share an L1 set: one tile of every row may fill the set's ways (12 on a
  // 48 KB L1), several tiles two thirds of them (aRowsEvictEachOther). The control: 14 rows, past
  // the ways, take tiles of 8.
  for (const std::string host : {"zen5", "sapphire-rapids"}) {
    ASSERT_EQ(hostPreset(host)->l1dBytes, 48 * 1024) << host;
    Config one = defaults(host, {.m = 12, .n = 16, .k = 1024});
    EXPECT_EQ(knobValueStr(one.values.at("schedule")), "nvec") << host;
    EXPECT_GE(geti(one, "MR"), 12) << host << " " << one.str();
    Config many = defaults(host, {.m = 14, .n = 16, .k = 4096});
    EXPECT_LE(geti(many, "MR"), 8) << host << " " << many.str();
  }
}
