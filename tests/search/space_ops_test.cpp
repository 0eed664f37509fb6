// Tests the space operations: every sampled candidate is legal (host spaces on odd shapes and a
// replayed space), sampling is uniform over the legal set, mutation and crossover stay legal,
// enumeration matches brute force, and config keys deduplicate.
#include <gtest/gtest.h>

#include <array>
#include <map>
#include <set>

#include "ir/builders.h"
#include "search/space.h"
#include "search/space_ops.h"
#include "test_tables.h"

using namespace tessera;
using namespace tessera::search;
using namespace tessera::measure;

namespace {

std::vector<ir::Space> hostSpacesOnOddShapes() {
  std::vector<ir::Space> out;
  const TargetDesc& host = hostTarget();
  for (auto [m, n, k] : {std::tuple{97, 61, 45}, {1, 333, 7}, {1000, 1000, 1000}}) {
    auto g = ir::buildGemm({.m = m, .n = n, .k = k});
    EXPECT_TRUE(g.ok());
    auto s = makeSpace(*g, host);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
    if (s.ok()) out.push_back(*s);
  }
  auto e = ir::buildElementwise({.expr = "y = gelu(x * s + b)", .shape = {37, 1001}});
  EXPECT_TRUE(e.ok());
  if (auto s = makeSpace(*e, host); s.ok()) out.push_back(*s);
  auto a = ir::buildAttention({.heads = 3, .seq_q = 77, .head_dim = 40});
  EXPECT_TRUE(a.ok());
  if (auto s = makeSpace(*a, host); s.ok()) out.push_back(*s);
  return out;
}

// Two knobs of 1..8 with a*b <= 12: 27 legal of 64.
ir::Space smallSpace() {
  ir::Space s;
  s.family = "test";
  std::vector<ir::KnobValue> d;
  for (int64_t i = 1; i <= 8; ++i) d.push_back(i);
  s.knobs = {{"a", d, int64_t(1), ""}, {"b", d, int64_t(1), ""}, {"mode", {std::string("x"), std::string("y")}, std::string("x"), ""}};
  s.constraint = [](const ir::Config& c) -> std::optional<std::string> {
    if (std::get<int64_t>(c.values.at("a")) * std::get<int64_t>(c.values.at("b")) > 12) return "too big";
    return std::nullopt;
  };
  return s;
}

}  // namespace

TEST(SpaceOps, SampledCandidatesAreLegalOnOddShapes) {
  Rng rng(1);
  auto spaces = hostSpacesOnOddShapes();
  ASSERT_EQ(spaces.size(), 5u);
  for (const auto& s : spaces) {
    EXPECT_FALSE(s.check(s.defaults())) << s.family << ": the default config must be legal";
    for (int i = 0; i < 300; ++i) {
      auto c = sampleLegal(s, rng);
      ASSERT_TRUE(c) << s.family;
      auto why = s.check(*c);
      EXPECT_FALSE(why) << s.family << " " << c->str() << ": " << why.value_or("");
    }
  }
}

TEST(SpaceOps, MutationAndCrossoverStayLegal) {
  Rng rng(2);
  for (const auto& s : hostSpacesOnOddShapes()) {
    for (int i = 0; i < 200; ++i) {
      auto a = sampleLegal(s, rng), b = sampleLegal(s, rng);
      ASSERT_TRUE(a && b);
      if (auto m = mutate(s, *a, 0.3, rng)) {
        EXPECT_FALSE(s.check(*m)) << s.family << " mutant " << m->str();
        EXPECT_FALSE(*m == *a) << "a mutation changes at least one knob";
      }
      if (auto x = crossover(s, *a, *b, rng)) {
        EXPECT_FALSE(s.check(*x)) << s.family << " child " << x->str();
        for (const auto& [k, v] : x->values) EXPECT_TRUE(v == a->values.at(k) || v == b->values.at(k)) << k;
      }
    }
  }
}

TEST(SpaceOps, ReplayedSpaceSamplesOnlyRecordedConfigs) {
  const auto& t = tables::mi250x();
  ASSERT_TRUE(t.space.members);
  std::set<std::string> recorded;
  for (const auto& c : *t.space.members) recorded.insert(configKey(c));
  Rng rng(3);
  for (int i = 0; i < 500; ++i) {
    auto c = sampleLegal(t.space, rng);
    ASSERT_TRUE(c);
    EXPECT_TRUE(recorded.count(configKey(*c)));
    auto m = mutate(t.space, *c, 0.15, rng);
    if (m) EXPECT_TRUE(recorded.count(configKey(*m))) << m->str();
  }
  auto all = enumerateLegal(t.space);
  ASSERT_TRUE(all);
  EXPECT_EQ(all->size(), t.results.size());
}

TEST(SpaceOps, EnumerationMatchesBruteForceAndSamplingIsUniform) {
  ir::Space s = smallSpace();
  EXPECT_EQ(productSize(s), 128.0);
  auto all = enumerateLegal(s);
  ASSERT_TRUE(all);
  size_t expect = 0;
  for (int a = 1; a <= 8; ++a)
    for (int b = 1; b <= 8; ++b)
      if (a * b <= 12) expect += 2;
  EXPECT_EQ(all->size(), expect);
  EXPECT_FALSE(enumerateLegal(s, 100)) << "over the limit";
  std::map<std::string, int> counts;
  Rng rng(4);
  const int draws = 200 * int(expect);
  for (int i = 0; i < draws; ++i) counts[configKey(*sampleLegal(s, rng))]++;
  EXPECT_EQ(counts.size(), expect);
  for (const auto& [k, n] : counts) {
    EXPECT_GT(n, 120) << k;  // 200 expected per config
    EXPECT_LT(n, 280) << k;
  }
}

TEST(SpaceOps, SparseSpacesFallBackToEnumeration) {
  ir::Space s;
  s.family = "sparse";
  std::vector<ir::KnobValue> d;
  for (int64_t i = 0; i < 40; ++i) d.push_back(i);
  s.knobs = {{"x", d, int64_t(0), ""}, {"y", d, int64_t(0), ""}, {"z", d, int64_t(0), ""}};
  s.constraint = [](const ir::Config& c) -> std::optional<std::string> {
    return c.str() == "x=3,y=14,z=15" ? std::nullopt : std::optional<std::string>("no");
  };
  Rng rng(5);
  auto c = sampleLegal(s, rng);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->str(), "x=3,y=14,z=15");
  EXPECT_FALSE(mutate(s, *c, 0.5, rng)) << "no legal neighbour exists";
}

TEST(SpaceOps, ConfigKeysDeduplicate) {
  ir::Config a, b;
  a.set("MC", int64_t(64));
  a.set("schedule", std::string("packed"));
  b.set("schedule", std::string("packed"));
  b.set("MC", int64_t(64));
  EXPECT_EQ(configKey(a), configKey(b));
  b.set("MC", int64_t(32));
  EXPECT_NE(configKey(a), configKey(b));
}

// Defaults are legal and as measured on both x86 ISA levels, whichever machine runs the test:
// an AVX2 host once got MC=64 with MR=6, which the GEMM space's own MC % MR rule rejects.
// Defaults derive from the host's ISA and caches, so their values are asserted on fixed, named
// machine descriptions (targets/host_presets.cpp), never on whichever machine runs the test; the
// live host seen at each ISA level only has to give legal defaults.
TEST(SpaceOps, DefaultsAreLegalOnEveryHostIsaLevel) {
  std::vector<TargetDesc> hosts;
  for (const char* arch : {"x86-64-v3", "x86-64-v4"}) hosts.push_back(*hostTargetAs(arch));
  for (const auto& name : hostPresets()) hosts.push_back(*hostPreset(name));
  for (const auto& t : hosts)
    for (auto [m, n, k] : std::vector<std::array<int64_t, 3>>{
             {1, 1, 1}, {7, 1000, 3}, {32, 2048, 512}, {64, 64, 64}, {97, 61, 45}, {128, 128, 128}, {1024, 1024, 1024}}) {
      auto g = ir::buildGemm({.m = m, .n = n, .k = k});
      ASSERT_TRUE(g.ok());
      auto s = makeSpace(*g, t);
      ASSERT_TRUE(s.ok());
      auto why = s->check(s->defaults());
      EXPECT_FALSE(why) << t.model << " " << m << "x" << n << "x" << k << ": " << why.value_or("");
    }
}

TEST(SpaceOps, ElementwiseDefaultsOnNamedHosts) {
  // bias+GELU: four rows per tile sharing the loads of s and b, whole rows, two vectors of native
  // width (1.2-1.4x the 256-column blocks of 32 lanes x 8 on an AVX2 VM, 1.1x on AVX-512);
  // streaming stores only for outputs the caches cannot keep: 64 MB against half the L3.
  struct Want {
    const char* host;
    const char* large;  // 4096x4096
    int64_t smallRows;  // 64x256
  };
  // THREADS: all cores (2 on the Zen 4 presets, 4 on the Sapphire Rapids) for 128 MB of traffic,
  // one for a single 32 KB row (below 2 MB per thread).
  // MATH: the precise forms by default (GELU has approximations MATH=fast changes).
  for (const Want& w : std::vector<Want>{{"zen4", "CHUNK=0,MATH=precise,NT=1,ROWS=4,THREADS=2,UNROLL=2,VW=16", 4},
                                         {"zen4-avx2", "CHUNK=0,MATH=precise,NT=1,ROWS=4,THREADS=2,UNROLL=2,VW=8", 4},
                                         {"sapphire-rapids", "CHUNK=0,MATH=precise,NT=1,ROWS=4,THREADS=4,UNROLL=2,VW=16", 4}}) {
    auto t = hostPreset(w.host);
    ASSERT_TRUE(t.ok());
    auto e = ir::buildElementwise({.expr = "y = gelu(x * s + b)", .shape = {4096, 4096}, .shapes = {{"s", {4096}}, {"b", {4096}}}});
    ASSERT_TRUE(e.ok());
    auto s = makeSpace(*e, *t);
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->defaults().str(), w.large) << w.host;
    // A small output that the caches keep gets no streaming stores.
    auto small = ir::buildElementwise({.expr = "y = gelu(x * s + b)", .shape = {64, 256}, .shapes = {{"s", {256}}, {"b", {256}}}});
    ASSERT_TRUE(small.ok());
    auto ss = makeSpace(*small, *t);
    ASSERT_TRUE(ss.ok());
    EXPECT_EQ(ss->defaults().values.at("NT"), ir::KnobValue(int64_t(0))) << w.host;
    EXPECT_EQ(ss->defaults().values.at("ROWS"), ir::KnobValue(w.smallRows)) << w.host;
    // A single row leaves one row per tile and the column-block defaults.
    auto one = ir::buildElementwise({.expr = "y = gelu(x * s + b)", .shape = {1, 4096}, .shapes = {{"s", {4096}}, {"b", {4096}}}});
    ASSERT_TRUE(one.ok());
    auto so = makeSpace(*one, *t);
    ASSERT_TRUE(so.ok());
    EXPECT_EQ(so->defaults().str(), "CHUNK=256,MATH=precise,NT=1,ROWS=1,THREADS=1,UNROLL=8,VW=32") << w.host;
  }
  // The same rule with an L3 of 256 MB (an Intel VM reporting more than one socket's L3): the
  // 64 MB output fits half of it, so the stores stay cached (the value the live-host test used to
  // assert wrongly on such a machine).
  TargetDesc bigL3 = *hostPreset("zen4-avx2");
  bigL3.l3Bytes = int64_t(256) << 20;
  auto e = ir::buildElementwise({.expr = "y = gelu(x * s + b)", .shape = {4096, 4096}, .shapes = {{"s", {4096}}, {"b", {4096}}}});
  EXPECT_EQ(makeSpace(*e, bigL3)->defaults().str(), "CHUNK=0,MATH=precise,NT=0,ROWS=4,THREADS=2,UNROLL=2,VW=8");
}

TEST(SpaceOps, HostPresetsAreNamedMachines) {
  EXPECT_EQ(hostPresets(), (std::vector<std::string>{"zen4", "zen4-avx2", "sapphire-rapids", "zen1", "zen5"}));
  auto zen1 = hostPreset("zen1");
  ASSERT_TRUE(zen1.ok());
  EXPECT_EQ(zen1->arch, "x86-64-v3");
  EXPECT_EQ(zen1->l2Bytes, 512 << 10);
  EXPECT_EQ(zen1->fmaPerCycle, 1);  // two 128-bit pipes: one 256-bit FMA a cycle
  EXPECT_FALSE(zen1->hasIsa("avx512_bf16"));
  EXPECT_EQ(hostPresetCpu("zen1"), "znver1");
  auto spr = hostPreset("sapphire-rapids");
  ASSERT_TRUE(spr.ok());
  EXPECT_EQ(spr->l1dBytes, 48 << 10);
  EXPECT_EQ(spr->l2Bytes, 2 << 20);
  EXPECT_TRUE(spr->hasIsa("amx_bf16"));
  EXPECT_FALSE(hostPreset("zen4")->hasIsa("amx_bf16"));
  EXPECT_EQ(hostPreset("zen4-avx2")->simdBits, 256);
  auto zen5 = hostPreset("zen5");
  ASSERT_TRUE(zen5.ok());
  EXPECT_EQ(zen5->fmaPerCycle, 2);  // full-width 512-bit pipes, where Zen 4 splits a zmm FMA in two
  EXPECT_EQ(zen5->l1dBytes, 48 << 10);
  EXPECT_FALSE(zen5->hasIsa("avx512_fp16"));
  EXPECT_EQ(hostPresetCpu("zen5"), "znver5");
  auto bad = hostPreset("pentium");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("sapphire-rapids"), std::string::npos);
}

// The BLIS blocking (Low et al. 2016) derived from each named machine's registers, FMA pipes and
// caches, by hand: Zen 4 (32 registers of 16 lanes, 4 x 1 accumulators needed), 8 x 32 (FMA-bound:
// 10 loads per 16 FMAs; the most rows among the full-rate tiles that divide 1024, so each B
// vector streamed from the L2 serves 8 FMAs); KC: the A micro-panel gets floor(7 / (1 + 32/8)) =
// 1 of 8 L1 ways: 64 sets x 64 B / (8 x 4 B) = 128; NC: 6/8 of the 1 MB L2 over 128 x 4 B = 1536;
// MC: 14/16 of the 32 MB L3 = 57344. AVX2: 6 x 16 (12 accumulators, 4 x 2 needed), KC 170.
// Sapphire Rapids (2 FMAs a cycle: 8 needed): 8 x 32, KC 256 (48 KB, 12 ways: 2 for A), NC 1792
// (2 MB L2, 16 ways), MC 93184. bf16 pairs: twice the depth. Zen 1 (16 registers of 8 lanes, one
// 256-bit FMA a cycle at latency 5: 5 accumulators needed): every tile of 5+ accumulators runs at
// the FMA rate, and 8 x 8 has the most rows among those that divide 1024; KC: floor(7 / (1 + 8/8))
// = 3 of 8 L1 ways: 3 x 64 sets x 64 B / (8 x 4 B) = 384; NC: 6/8 of the 512 KB L2 over 384 x 4 B
// = 256; MC: 14/16 of the 8 MB L3 = 4778, rounded to a multiple of 8. Zen 5 (two zmm FMAs a
// cycle: 8 needed, as Sapphire Rapids): 8 x 32, KC 256 (48 KB, 12 ways: 2 for A), NC 14/16 of the
// 1 MB L2 over 256 x 4 B = 896, MC 14/16 of the 32 MB L3 over 256 x 4 B = 28672.
TEST(SpaceOps, GemmBlockingFromTheHostsFacts) {
  struct Want {
    const char* host;
    GemmBlocking b;
  };
  for (const Want& w : std::vector<Want>{{"zen4", {8, 32, 128, 1536, 57344}},
                                         {"zen4-avx2", {6, 16, 170, 1152, 43176}},
                                         {"sapphire-rapids", {8, 32, 256, 1792, 93184}},
                                         {"zen1", {8, 8, 384, 256, 4776}},
                                         {"zen5", {8, 32, 256, 896, 28672}}}) {
    GemmBlocking b = hostGemmBlocking(*hostPreset(w.host), 1024, 1024);
    EXPECT_EQ(std::vector<int64_t>({b.MR, b.NR, b.KC, b.NC, b.MC}),
              std::vector<int64_t>({w.b.MR, w.b.NR, w.b.KC, w.b.NC, w.b.MC}))
        << w.host;
  }
  EXPECT_EQ(hostGemmBlocking(*hostPreset("zen4"), 1024, 1024, 4).KC, 256);
  // A tile that does not divide M computes padding: 8 rows for M = 32 (12 would waste 11 %)...
  EXPECT_EQ(hostGemmBlocking(*hostPreset("zen4"), 32, 2048).MR, 8);
  // ... and 12 for M = 2048 (2052 rows: 0.2 % of padding).
  EXPECT_EQ(hostGemmBlocking(*hostPreset("zen4"), 2048, 2048).MR, 12);
  // The defaults snap them to the space's domains and add the thread count: all cores for a
  // large GEMM, one for a small one.
  auto g = ir::buildGemm({.m = 1024, .n = 1024, .k = 1024});
  EXPECT_EQ(makeSpace(*g, *hostPreset("zen4"))->defaults().str(),
            "KC=128,KU=1,MC=1024,MR=8,NC=1024,NR=32,ORDER=ij,THREADS=2,schedule=blis");
  EXPECT_EQ(makeSpace(*g, *hostPreset("zen4-avx2"))->defaults().str(),
            "KC=128,KU=1,MC=1024,MR=6,NC=1024,NR=16,ORDER=ij,THREADS=2,schedule=blis");
  EXPECT_EQ(makeSpace(*g, *hostPreset("sapphire-rapids"))->defaults().str(),
            "KC=256,KU=1,MC=1024,MR=8,NC=1024,NR=32,ORDER=ij,THREADS=4,schedule=blis");
  EXPECT_EQ(makeSpace(*g, *hostPreset("zen1"))->defaults().str(),
            "KC=384,KU=1,MC=1024,MR=8,NC=256,NR=8,ORDER=ij,THREADS=2,schedule=blis");
  // Past the domain's largest MC (4096), MC stays a multiple of MR: 4096 is none of 6's.
  auto tall = ir::buildGemm({.m = 5000, .n = 1024, .k = 1024});
  EXPECT_EQ(makeSpace(*tall, *hostPreset("zen4-avx2"))->defaults().values.at("MC"), ir::KnobValue(int64_t(192)));
  auto small = ir::buildGemm({.m = 64, .n = 64, .k = 64});
  EXPECT_EQ(std::get<int64_t>(makeSpace(*small, *hostPreset("sapphire-rapids"))->defaults().values.at("THREADS")), 1);
  auto bf = ir::buildGemm({.m = 1024, .n = 1024, .k = 1024, .dtype = ir::ScalarType::BF16});
  EXPECT_EQ(makeSpace(*bf, *hostPreset("zen4"))->defaults().str(),
            "KC=256,KU=1,MC=1024,MR=8,NC=1024,NR=32,ORDER=ij,THREADS=2,schedule=bf16dot");
  EXPECT_EQ(makeSpace(*bf, *hostPreset("sapphire-rapids"))->defaults().str(),
            "KC=512,KU=1,MC=1024,MR=32,NC=1024,NR=32,ORDER=ij,THREADS=4,schedule=amx");
}

// Untuned defaults at small and awkward shapes (bench/small_shapes_bench measures them against a
// sweep's best). plain has no packing to pad edge tiles: it is the default only where its tiles
// divide the problem (or B is one vector wide), else the BLIS loops pad them. Zen 4 (16 lanes):
// 64^3 divides 8 x 32 tiles and a 64-row block: plain. 56^3 leaves a 24-column edge (12x slower
// on plain, measured): blis. 40^3 and 48^3 fit the L1 (A, B and C): nvec, nothing packed, a
// masked last vector. 512x1x512: one column: kvec (dot products along K; plain used 1 lane of 16,
// blis packs a 1-column B for nothing). 1x512x512: a matrix-vector product: nvec, one row of 8
// vectors over all of K. 127^3: a prime M keeps at least 4-row tiles (MR=1
// "padded least" and ran 2x slower). Zen 4 without AVX-512 (8 lanes): 56^3 (37 KB, past the L1)
// takes 4 x 8 tiles that divide it and a 64-row block covering it.
namespace {
// The default config of an f32 GEMM on a host preset with `units` cores, and one knob of it as text.
ir::Config gemmDefaults(const char* host, int64_t m, int64_t n, int64_t k, int units) {
  auto g = ir::buildGemm({.m = m, .n = n, .k = k});
  auto t = *hostPreset(host);
  t.units = units;
  return makeSpace(*g, t)->defaults();
}
std::string str(const ir::Config& c, const char* knob) { return ir::knobValueStr(c.values.at(knob)); }
}  // namespace

TEST(SpaceOps, GemmDefaultsAtSmallAndAwkwardShapes) {
  auto defaults = [](const char* host, int64_t m, int64_t n, int64_t k) { return gemmDefaults(host, m, n, k, 1); };
  EXPECT_EQ(str(defaults("zen4", 64, 64, 64), "schedule"), "plain");
  EXPECT_EQ(str(defaults("zen4", 56, 56, 56), "schedule"), "blis");
  EXPECT_EQ(str(defaults("zen4", 40, 40, 40), "schedule"), "nvec");
  EXPECT_EQ(str(defaults("zen4", 48, 48, 48), "schedule"), "nvec");
  EXPECT_EQ(str(defaults("zen4", 512, 1, 512), "schedule"), "kvec");
  EXPECT_EQ(str(defaults("zen4", 1, 512, 512), "schedule"), "nvec");
  EXPECT_GE(std::get<int64_t>(defaults("zen4", 127, 127, 127).values.at("MR")), 4);
  EXPECT_EQ(str(defaults("zen4", 127, 127, 127), "schedule"), "blis");
  EXPECT_EQ(defaults("zen4-avx2", 56, 56, 56).str(), "KC=64,KU=1,MC=64,MR=4,NC=64,NR=8,NV=1,ORDER=ij,schedule=plain");
  // A negative control: the edge-free rule does not turn tile-aligned, L2-sized problems away from plain.
  EXPECT_EQ(str(defaults("zen4", 128, 128, 128), "schedule"), "plain");
  // 100 columns pad to 128 in blis's panels of 32: nvec, whose last vector is masked, instead.
  EXPECT_EQ(str(defaults("zen4", 100, 100, 100), "schedule"), "nvec");
  // A K of at most 16 goes to blis, with or without AVX-512; from K = 64 the transform schedule
  // stays.
  for (const char* host : {"zen4", "zen4-avx2"}) {
    EXPECT_EQ(str(defaults(host, 512, 512, 1), "schedule"), "blis") << host;
    EXPECT_EQ(str(defaults(host, 256, 256, 16), "schedule"), "blis") << host;
    EXPECT_NE(str(defaults(host, 256, 256, 64), "schedule"), "blis") << host;
  }
  // Few rows and more than 8 columns up to two 512-bit vectors: nvec's tile of rows x one or two
  // vectors (one Zen 5 core, 16^3: 38.7 ns against plain's 41; 13^3 30 against 43). The AVX2
  // host keeps its rules: the control.
  EXPECT_EQ(str(defaults("zen4", 16, 16, 16), "schedule"), "nvec");
  EXPECT_EQ(str(defaults("zen4", 15, 15, 15), "schedule"), "nvec");
  // From 8 rows, 5-8 columns group two steps of K per vector in nvec (one Zen 5 core,
  // small_shapes_bench: 8^3 10.9 ns against plain's 14.4); fewer rows keep their rules.
  EXPECT_EQ(str(defaults("zen4", 8, 8, 8), "schedule"), "nvec");
  EXPECT_EQ(str(defaults("zen4", 4, 8, 8), "schedule"), "plain");
  EXPECT_EQ(str(defaults("zen4-avx2", 15, 15, 15), "schedule"), "blis");
}

// blis f32 on several AVX-512 threads takes 8 rows by two vectors where one thread keeps the
// blocking's taller tie-break (issue 53: 4096^3 on two Zen 5 cores 0.95x -> 1.03x OpenBLAS); AVX2's
// tile is its own. The one-thread rows are the control that the rule is the thread count's. bf16's
// vdpbf16ps kernel takes 8 rows on one thread too (2048^3 476-480 -> 506-511 GFLOP/s on a Zen 5).
// blis f32 on AVX-512 takes 8 rows by two vectors on one thread and on several, where the
// blocking's tie-break alone picks 12 (2048^3, 3072^3) or 14 (4096^3); AVX2 keeps the blocking's.
TEST(SpaceOps, BlisOnAvx512TakesEightRows) {
  for (const char* host : {"zen4", "zen5", "sapphire-rapids"}) {
    for (int units : {1, 2})
      for (int64_t n : {2048, 3072, 4096}) {
        EXPECT_EQ(str(gemmDefaults(host, n, n, n, units), "MR"), "8") << host << " " << units << " " << n;
        EXPECT_EQ(str(gemmDefaults(host, n, n, n, units), "schedule"), "blis") << host << " " << units << " " << n;
      }
    EXPECT_EQ(hostGemmBlocking(*hostPreset(host), 4096, 4096).MR, 14) << host;  // what the rule overrides
  }
  for (int units : {1, 2})
    EXPECT_EQ(str(gemmDefaults("zen4-avx2", 4096, 4096, 4096, units), "MR"),
              std::to_string(hostGemmBlocking(*hostPreset("zen4-avx2"), 4096, 4096).MR));
  // bf16dot takes 8 rows on any thread count (the blocking alone picks 12 at 2048^3, 14 at 4096^3).
  for (const char* host : {"zen4", "zen5"})
    for (int units : {1, 2})
      for (int64_t n : {2048, 4096}) {
        auto bf = ir::buildGemm({.m = n, .n = n, .k = n, .dtype = ir::ScalarType::BF16});
        auto t = *hostPreset(host);
        t.units = units;
        ir::Config c = makeSpace(*bf, t)->defaults();
        EXPECT_EQ(str(c, "schedule"), "bf16dot") << host;
        EXPECT_EQ(str(c, "MR"), "8") << host << " " << units << " " << n;
      }
}

// Two cores and a small cube (issue 53): from 2 x 6 Mi flops (kGemmFlopsPerThread, about 184^3)
// the default is blis on both cores with the whole of M in one row block (MC=64 on two threads
// ran 0.73x OpenBLAS at 256^3, MC=256 1.05x); below it one thread, except where nvec's row split
// takes the cube (AVX-512, at most kNvecNarrowN columns: from ~69^3). A matrix-vector product keeps
// the old threshold (blis on two threads ran 1x4096x4096 1.9x slower than plain on one): the
// negative control that the rule is not "more threads everywhere" (with AVX2; with AVX-512 it is
// nvec now, whose column strips read B on both cores: 1.35x faster than one on a Zen 5).
TEST(SpaceOps, SmallCubesTakeBothCoresOfATwoCoreHost) {
  auto defaults = [](const char* host, int64_t m, int64_t n, int64_t k) { return gemmDefaults(host, m, n, k, 2); };
  for (const char* host : {"zen4", "zen4-avx2", "sapphire-rapids"}) {
    // With AVX-512 nvec's row split takes cubes of up to kNvecNarrowN columns on both cores
    // (nvecRowSplitPays), 160^3 included; with AVX2 160^3 stays on one thread.
    const bool avx2 = std::string(host) == "zen4-avx2";
    for (int64_t n : {192, 256, 320}) {
      ir::Config c = defaults(host, n, n, n);
      EXPECT_EQ(str(c, "THREADS"), "2") << host << " " << n;
      EXPECT_EQ(str(c, "schedule"), n == 192 && !avx2 ? "nvec" : "blis") << host << " " << n;
      if (str(c, "schedule") == "blis") EXPECT_GE(std::get<int64_t>(c.values.at("MC")), n) << host << " " << n << ": " << c.str();
    }
    EXPECT_EQ(str(defaults(host, 160, 160, 160), "THREADS"), avx2 ? "1" : "2") << host;
    // With AVX2 plain walks B along its rows on one thread; with AVX-512 nvec's strips on both
    // cores (bound by reading B).
    EXPECT_EQ(str(defaults(host, 1, 4096, 4096), "THREADS"), avx2 ? "1" : "2") << host;
    EXPECT_EQ(str(defaults(host, 1, 4096, 4096), "schedule"), avx2 ? "plain" : "nvec") << host;
    EXPECT_EQ(str(defaults(host, 16, 1024, 1024), "THREADS"), "2") << host;
  }
}

// nvec past 64 rows on one AVX-512 core where B is two to six vectors wide (nvecNarrowAvx512):
// 96^3, 96x96x64, 4096x64x64 and 1024x64x4096 (B past the L2); wider B (160^3, 256x128x256) keeps
// plain, and AVX2 keeps its defaults (the controls).
TEST(SpaceOps, NvecTakesANarrowBOnOneAvx512Core) {
  for (const char* host : {"zen4", "zen5", "sapphire-rapids"}) {
    for (std::array<int64_t, 3> s : std::vector<std::array<int64_t, 3>>{{96, 96, 96}, {96, 96, 64}, {4096, 64, 64}, {1024, 64, 4096}})
      EXPECT_EQ(str(gemmDefaults(host, s[0], s[1], s[2], 1), "schedule"), "nvec") << host << " " << s[0] << "x" << s[1] << "x" << s[2];
    EXPECT_EQ(str(gemmDefaults(host, 160, 160, 160, 1), "schedule"), "plain") << host;
    EXPECT_EQ(str(gemmDefaults(host, 256, 128, 256, 1), "schedule"), "plain") << host;
  }
  for (std::array<int64_t, 3> s : std::vector<std::array<int64_t, 3>>{{96, 96, 96}, {4096, 64, 64}})
    EXPECT_NE(str(gemmDefaults("zen4-avx2", s[0], s[1], s[2], 1), "schedule"), "nvec") << s[0] << "x" << s[1] << "x" << s[2];
}

// 17-48 rows of f32 against a B past the L2 at least 64 vectors wide take nvec on one AVX-512
// core (B streams through once in strips). Controls: 16 rows were nvec already, 64 rows, a B of
// 512 columns, two threads and AVX2 keep what they had.
TEST(SpaceOps, NvecTakesFewRowsOfAWideBOnOneAvx512Core) {
  for (const char* host : {"zen4", "zen5", "sapphire-rapids"}) {
    for (std::array<int64_t, 3> s : std::vector<std::array<int64_t, 3>>{
             {17, 1024, 1024}, {32, 1024, 1024}, {48, 1024, 1024}, {20, 2048, 512}, {32, 4096, 4096}, {16, 1024, 1024}})
      EXPECT_EQ(str(gemmDefaults(host, s[0], s[1], s[2], 1), "schedule"), "nvec") << host << " " << s[0] << "x" << s[1] << "x" << s[2];
    for (std::array<int64_t, 3> s : std::vector<std::array<int64_t, 3>>{{64, 1024, 1024}, {49, 1024, 1024}, {32, 512, 1024}})
      EXPECT_NE(str(gemmDefaults(host, s[0], s[1], s[2], 1), "schedule"), "nvec") << host << " " << s[0] << "x" << s[1] << "x" << s[2];
    EXPECT_NE(str(gemmDefaults(host, 32, 1024, 1024, 2), "schedule"), "nvec") << host;
  }
  EXPECT_NE(str(gemmDefaults("zen4-avx2", 32, 1024, 1024, 1), "schedule"), "nvec");
}

// blis f32 on several AVX-512 threads from kBlisAvx512FlopsPerThread (two threads from ~1.6
// Mflops): 100x300x50 and 128x200x40 take blis on both cores with AVX-512; with AVX2, in bf16, on
// one core and at ~1 Mflops (70x300x30) they stay on one thread (the controls).
TEST(SpaceOps, BlisOnSeveralAvx512ThreadsFromLessWork) {
  for (const char* host : {"zen4", "zen5", "sapphire-rapids", "zen4-avx2"}) {
    const bool avx2 = std::string(host) == "zen4-avx2";
    for (std::array<int64_t, 3> s : std::vector<std::array<int64_t, 3>>{{100, 300, 50}, {128, 200, 40}}) {
      ir::Config c = gemmDefaults(host, s[0], s[1], s[2], 2);
      EXPECT_EQ(str(c, "THREADS"), avx2 ? "1" : "2") << host << " " << s[0] << "x" << s[1] << "x" << s[2];
      if (!avx2) {
        EXPECT_EQ(str(c, "schedule"), "blis") << host;
      }
      EXPECT_FALSE(gemmDefaults(host, s[0], s[1], s[2], 1).values.count("THREADS")) << host;  // one core
    }
    EXPECT_EQ(str(gemmDefaults(host, 70, 300, 30, 2), "THREADS"), "1") << host;
  }
  auto t = *hostPreset("zen5");
  t.units = 2;
  auto bf16 = ir::buildGemm({.m = 100, .n = 300, .k = 50, .dtype = ir::ScalarType::BF16});
  EXPECT_EQ(str(makeSpace(*bf16, t)->defaults(), "THREADS"), "1");
}

// kvec (a few columns, bound by reading A) with AVX-512 takes every core from kKvecBytesPerThread
// of A a thread (512 KiB on two): 1000x1x1000, 512x1x512 and 384x2x384 on two threads; 256x1x256
// (256 KiB), AVX2 and one core on one (the controls).
TEST(SpaceOps, KvecReadsAPastHalfAMegabyteOnEveryCore) {
  for (const char* host : {"zen4", "zen5", "sapphire-rapids", "zen4-avx2"}) {
    const bool avx2 = std::string(host) == "zen4-avx2";
    for (std::array<int64_t, 3> s : std::vector<std::array<int64_t, 3>>{{1000, 1, 1000}, {512, 1, 512}, {384, 2, 384}}) {
      ir::Config c = gemmDefaults(host, s[0], s[1], s[2], 2);
      EXPECT_EQ(str(c, "schedule"), "kvec") << host << " " << s[0] << "x" << s[1] << "x" << s[2];
      EXPECT_EQ(str(c, "THREADS"), avx2 ? "1" : "2") << host << " " << s[0] << "x" << s[1] << "x" << s[2];
      EXPECT_FALSE(gemmDefaults(host, s[0], s[1], s[2], 1).values.count("THREADS")) << host;  // one core
    }
    EXPECT_EQ(str(gemmDefaults(host, 256, 1, 256, 2), "THREADS"), "1") << host;
  }
}

// blis on two threads merges K blocks of little work a thread (each opens and joins two parallel
// regions) while the thread's B block stays within a quarter of the L2: Sapphire Rapids' 2 MB L2
// holds 1024 x 128 columns (128x256x1024 takes all of K in one block) but not 1024 x 256
// (64x512x2048 stops at 512); a large cube and one thread keep the L1's KC (the negative controls).
TEST(SpaceOps, TwoThreadsMergeShortKBlocks) {
  auto t = *hostPreset("sapphire-rapids");
  auto kc = [&](int64_t threads, int64_t m, int64_t n, int64_t k, bool transB) {
    auto g = ir::buildGemm({.m = m, .n = n, .k = k, .transB = transB});
    t.units = int(threads);
    ir::Config c = makeSpace(*g, t)->defaults();
    EXPECT_EQ(str(c, "schedule"), "blis") << m << "x" << n << "x" << k << " " << c.str();
    return std::get<int64_t>(c.values.at("KC"));
  };
  const int64_t l1kc = hostGemmBlocking(t, 1024, 1024).KC;  // the L1's KC at this MR
  EXPECT_EQ(kc(2, 128, 256, 1024, true), 1024);
  EXPECT_EQ(kc(2, 64, 512, 2048, false), 512);
  EXPECT_EQ(kc(2, 1024, 1024, 1024, false), l1kc);
  EXPECT_EQ(kc(1, 128, 256, 1024, true), l1kc);  // a Linear's GEMM on one thread
}

// The README's `run gemm --m 512 --n 512 --k 512 --config 'schedule=plain,MR=4,NR=16'`: on a
// host of 2 or more cores the size's default is blis on all cores, and a config naming a one-thread
// schedule without THREADS used to keep THREADS=2 and be refused. Naming plain or packed now means
// one thread; naming THREADS too is the user's word (refused as before: the negative control), and
// a config that names neither keeps the size's default.
TEST(SpaceOps, NamingAOneThreadScheduleMeansOneThread) {
  auto g = ir::buildGemm({.m = 512, .n = 512, .k = 512});
  for (const char* host : {"zen4", "zen4-avx2", "sapphire-rapids"}) {
    auto s = makeSpace(*g, *hostPreset(host));
    ASSERT_TRUE(s.ok()) << host;
    ASSERT_GT(std::get<int64_t>(s->defaults().values.at("THREADS")), 1) << host;  // the premise
    for (const char* sched : {"plain", "packed"}) {
      ir::Config named;
      named.values = {{"schedule", std::string(sched)}, {"MR", int64_t(4)}, {"NR", int64_t(16)}};
      auto c = s->complete(named);
      ASSERT_TRUE(c.ok()) << host;
      EXPECT_EQ(std::get<int64_t>(c->values.at("THREADS")), 1) << host << " " << sched;
      EXPECT_EQ(s->check(*c), std::nullopt) << host << " " << sched << " " << c->str();
      named.values["THREADS"] = int64_t(2);
      auto told = s->complete(named);
      ASSERT_TRUE(told.ok());
      EXPECT_EQ(std::get<int64_t>(told->values.at("THREADS")), 2);
      EXPECT_NE(s->check(*told), std::nullopt) << "plain/packed on two threads must stay refused";
    }
    ir::Config blis;
    blis.values = {{"schedule", std::string("blis")}};
    EXPECT_EQ(s->complete(blis)->values.at("THREADS"), s->defaults().values.at("THREADS")) << host;
    EXPECT_EQ(s->complete(ir::Config{})->values.at("THREADS"), s->defaults().values.at("THREADS")) << host;
  }
}
