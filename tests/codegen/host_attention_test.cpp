// Tests host attention codegen against the reference: odd shapes, every dtype, causal, GQA,
// seq_q != seq_kv, head dims that are not whole vectors, the extremes of every knob, the space's
// defaults and rules on several ISAs, and invalid configs rejected cleanly.
#include <gtest/gtest.h>

#include "codegen/codegen.h"
#include "host_check.h"
#include "ir/builders.h"
#include "search/space.h"

using namespace tessera;
using namespace tessera::ir;

namespace {

struct Case {
  int64_t b, h, hkv, sq, skv, d;
  bool causal = false;
  ScalarType t = ScalarType::F32;
};

Kernel attention(const Case& s) {
  AttentionSpec a;
  a.batch = s.b;
  a.heads = s.h;
  a.heads_kv = s.hkv;
  a.seq_q = s.sq;
  a.seq_kv = s.skv;
  a.head_dim = s.d;
  a.causal = s.causal;
  a.dtype = s.t;
  auto k = buildAttention(a);
  EXPECT_TRUE(k.ok()) << (k.ok() ? "" : k.error().str());
  return *k;
}

std::string str(const Case& s) {
  return "b" + std::to_string(s.b) + " h" + std::to_string(s.h) + "/" + std::to_string(s.hkv) + " sq" +
         std::to_string(s.sq) + " skv" + std::to_string(s.skv) + " d" + std::to_string(s.d) +
         (s.causal ? " causal " : " ") + std::string(typeName(s.t));
}

void expectCorrect(const Case& s, const Config& over = {}) {
  auto r = testutil::checkHost(attention(s), over);
  EXPECT_TRUE(r.compiled && r.correct) << str(s) << " [" << over.str() << "]: " << r.error;
}

// An ISA other than the host's, for the space rules: a named machine (fixed caches, whichever
// host runs the test) with the vector width and register count of that ISA.
TargetDesc fakeTarget(int simdBits, int vregs) {
  TargetDesc t = *hostPreset("zen4");
  t.simdBits = simdBits;
  t.vectorRegisters = vregs;
  return t;
}

}  // namespace

TEST(HostAttention, DefaultConfigOnOddShapes) {
  for (const Case& s : std::vector<Case>{{1, 1, 1, 1, 1, 64},
                                           {1, 2, 2, 7, 7, 7},
                                           {1, 1, 1, 129, 129, 64},
                                           {2, 2, 1, 33, 77, 16},
                                           {1, 1, 1, 130, 300, 128},
                                           {1, 1, 1, 1000, 1000, 80},
                                           {1, 3, 3, 49, 17, 1},
                                           {1, 1, 1, 257, 129, 96},
                                           {1, 1, 1, 20, 37, 200}})
    expectCorrect(s);
}

TEST(HostAttention, EveryDtype) {
  for (ScalarType t : {ScalarType::F32, ScalarType::F16, ScalarType::BF16}) {
    expectCorrect({1, 2, 1, 65, 129, 72, false, t});
    expectCorrect({2, 2, 2, 100, 100, 64, true, t});
  }
}

TEST(HostAttention, CausalGqaAndUnequalSequences) {
  for (const Case& s : std::vector<Case>{{1, 1, 1, 1, 1, 8, true},
                                           {1, 2, 2, 129, 129, 64, true},
                                           {1, 1, 1, 7, 200, 40, true},
                                           {1, 4, 2, 100, 100, 64, true},
                                           {2, 6, 3, 50, 333, 24, true},
                                           {1, 1, 1, 1000, 1000, 64, true},
                                           {1, 8, 1, 20, 9, 32, false}})
    expectCorrect(s);
}

// Threads take the call's query blocks of every batch and kv head from one parallel loop, each
// worker packing a head's K and V when it moves to another: fewer items than threads, a worker
// whose items cross batches and heads (GQA groups), a thread count that divides nothing.
TEST(HostAttention, ThreadsShareEveryHeadsQueryBlocks) {
  for (const Case& s : std::vector<Case>{{1, 1, 1, 5, 5, 16, false},
                                           {2, 4, 2, 37, 53, 24, true},
                                           {3, 2, 1, 70, 70, 32, false},
                                           {2, 6, 3, 50, 333, 24, true, ScalarType::BF16}})
    for (int64_t threads : {2, 3, 7}) {
      Config over;
      over.set("THREADS", threads);
      over.set("BQ", int64_t{16});
      over.set("BK", int64_t{32});
      expectCorrect(s, over);
    }
}

// Each knob at the smallest and the largest value of its domain, the others at their defaults:
// codegen lowers them all (remainder tiles, spilling tiles), the space only ranks them.
TEST(HostAttention, KnobExtremes) {
  for (const Case& s : std::vector<Case>{{1, 2, 1, 130, 200, 72, false}, {1, 2, 2, 150, 150, 48, true}}) {
    Kernel k = attention(s);
    auto space = search::makeSpace(k, hostTarget());
    ASSERT_TRUE(space.ok()) << space.error().str();
    for (const Knob& knob : space->knobs)
      for (const KnobValue& v : {knob.domain.front(), knob.domain.back()}) {
        Config over;
        over.set(knob.name, v);
        expectCorrect(s, over);
      }
  }
}

TEST(HostAttention, InvalidConfigsAreRejected) {
  Kernel k = attention({1, 2, 1, 64, 64, 64});
  auto space = search::makeSpace(k, hostTarget());
  ASSERT_TRUE(space.ok());
  const std::string half = std::to_string(std::get<int64_t>(space->defaults().values.at("VW")) * 3 / 2);
  for (const std::string& bad : {std::string("BQ=0"), std::string("BK=-16"), "NR1=" + half, "NR2=" + half, "BK=" + half,
                                 std::string("VW=3"), std::string("VW=32"), std::string("MR1=64"), std::string("U2=0"),
                                 std::string("U1=17"), std::string("NR2=512"), std::string("MR2=30,NR2=64")}) {
    Config c = *space->complete(*Config::parseAssignments(bad));
    auto exe = codegen::compileHost(k, c, hostTarget());
    ASSERT_FALSE(exe.ok()) << bad;
    EXPECT_EQ(exe.error().code, ErrorCode::InvalidConfig) << bad << ": " << exe.error().str();
  }
  Config missing = space->defaults();
  missing.values.erase("U1");
  auto exe = codegen::compileHost(k, missing, hostTarget());
  ASSERT_FALSE(exe.ok());
  EXPECT_EQ(exe.error().code, ErrorCode::InvalidConfig);
  Config typed = space->defaults();
  typed.set("BQ", std::string("big"));
  exe = codegen::compileHost(k, typed, hostTarget());
  ASSERT_FALSE(exe.ok());
  EXPECT_EQ(exe.error().code, ErrorCode::InvalidConfig);
}

TEST(HostAttention, SpaceDefaultsFollowTheRecipe) {
  TargetDesc avx512 = fakeTarget(512, 32);
  auto get = [](const Space& s, const char* k) { return std::get<int64_t>(s.defaults().values.at(k)); };
  auto s64 = search::makeSpace(attention({1, 8, 8, 2048, 2048, 64}), avx512);
  ASSERT_TRUE(s64.ok());
  // THREADS: all of the (preset's two) cores for work this size.
  EXPECT_EQ(s64->defaults().str(), "BK=128,BQ=48,MR1=8,MR2=6,NR1=32,NR2=64,THREADS=2,U1=2,U2=2,VW=16");
  auto s80 = search::makeSpace(attention({1, 2, 2, 1000, 1000, 80}), avx512);
  EXPECT_EQ(get(*s80, "MR2"), 4);
  EXPECT_EQ(get(*s80, "NR2"), 80);
  auto s128 = search::makeSpace(attention({1, 8, 8, 2048, 2048, 128}), avx512);
  EXPECT_EQ(get(*s128, "BK"), 256);
  EXPECT_EQ(get(*s128, "MR2"), 6);
  EXPECT_EQ(get(*s128, "NR2"), 64);
  auto s96 = search::makeSpace(attention({1, 2, 2, 512, 512, 96}), avx512);
  EXPECT_EQ(get(*s96, "MR2") * 100 + get(*s96, "NR2"), 4 * 100 + 96);
  auto s200 = search::makeSpace(attention({1, 2, 2, 512, 512, 200}), avx512);
  EXPECT_EQ(get(*s200, "MR2") * 100 + get(*s200, "NR2"), 6 * 100 + 64);
  auto avx2 = search::makeSpace(attention({1, 8, 8, 2048, 2048, 64}), fakeTarget(256, 16));
  EXPECT_EQ(avx2->defaults().str(), "BK=128,BQ=48,MR1=6,MR2=6,NR1=16,NR2=16,THREADS=2,U1=2,U2=2,VW=8");
  // Over the register budget, or tiles that do not divide their blocks: rejected with a reason.
  for (const char* bad : {"MR1=14,NR1=64", "MR2=8,NR2=64", "NR1=256", "BQ=64,MR2=6", "VW=8"}) {
    auto c = s64->complete(*Config::parseAssignments(bad));
    ASSERT_TRUE(c.ok()) << bad;
    EXPECT_TRUE(s64->check(*c).has_value()) << bad;
  }
}

TEST(HostAttention, DefaultsAreLegalEverywhere) {
  std::vector<Case> shapes = {{1, 1, 1, 1, 1, 1},        {1, 2, 2, 7, 7, 7},       {1, 1, 1, 129, 129, 64},
                               {1, 8, 8, 2048, 2048, 64}, {1, 2, 1, 1000, 1000, 80}, {1, 2, 2, 40, 300, 200, true},
                               {1, 1, 1, 20, 20, 256},    {1, 4, 2, 100, 100, 128}};
  for (const TargetDesc& t : {fakeTarget(512, 32), fakeTarget(256, 16), fakeTarget(128, 16)})
    for (const Case& s : shapes) {
      auto sp = search::makeSpace(attention(s), t);
      ASSERT_TRUE(sp.ok()) << sp.error().str();
      auto why = sp->check(sp->defaults());
      EXPECT_FALSE(why.has_value()) << str(s) << " simd" << t.simdBits << ": " << *why << " [" << sp->defaults().str() << "]";
    }
}

// The AVX2 and SSE defaults (VW=8 / VW=4 tiles) also run correctly on this host.
TEST(HostAttention, NarrowIsaDefaultsRunHere) {
  Case s{1, 2, 1, 70, 90, 40, true};
  for (const TargetDesc& t : {fakeTarget(256, 16), fakeTarget(128, 16)}) {
    if (t.simdBits > hostTarget().simdBits) continue;
    auto sp = search::makeSpace(attention(s), t);
    ASSERT_TRUE(sp.ok());
    expectCorrect(s, sp->defaults());
  }
}
