// Tests a property of every family's space: for any shape (1 to 65536 per dimension, odd and prime
// sizes, batches, transposes, fused epilogues, GQA, causal masks) on every named host and on this
// host at each x86 ISA level, the default config lies in its knobs' domains and passes the space's
// own rules; a sample of them compiles for that machine's CPU. A default is what `tessera run`
// uses without --config: it must be legal for every shape (M = 5000 once got MC = 4096 with
// MR = 6, which the GEMM space's own rule rejects).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "codegen/codegen.h"
#include "ir/builders.h"
#include "search/space.h"

using namespace tessera;

namespace {

struct Host {
  std::string name;
  TargetDesc t;
  std::string cpu;  // LLVM CPU for compiling ("" = this one)
};

std::vector<Host> hosts() {
  std::vector<Host> out;
  for (const auto& p : hostPresets()) out.push_back({p, *hostPreset(p), hostPresetCpu(p)});
  for (const char* level : {"x86-64-v3", "x86-64-v4"}) {
    auto t = hostTargetAs(level);
    if (t.ok()) out.push_back({std::string("this host as ") + level, hostAtLevel(*t), level});
  }
  return out;
}

// A dimension in [1, hi]: log-uniform sizes, primes, powers of two and their neighbours.
int64_t dim(std::mt19937_64& rng, int64_t hi) {
  static const int64_t primes[] = {2, 3, 5, 7, 13, 31, 61, 127, 251, 509, 1021, 4093, 8191, 65521};
  switch (rng() % 4) {
    case 0: {
      double lg = std::uniform_real_distribution<double>(0, std::log2(double(hi)))(rng);
      return std::clamp<int64_t>(int64_t(std::exp2(lg)), 1, hi);
    }
    case 1: return std::min(hi, primes[rng() % std::size(primes)]);
    case 2: {
      int64_t p = int64_t(1) << (rng() % 17);
      return std::clamp<int64_t>(p + int64_t(rng() % 3) - 1, 1, hi);
    }
    default: return std::clamp<int64_t>(int64_t(rng() % 64) + 1, 1, hi);
  }
}

// Random kernels of one family whose tensors stay within the IR's element limit (2^36).
// maxHeadDim: attention's head dimension at most this (compiling takes time linear in it: 48 s
// at 43849, so the compile sample stays at sizes that occur).
ir::Kernel randomKernel(ir::Family f, std::mt19937_64& rng, std::string* what, int64_t maxHeadDim = 65536) {
  const int64_t kMaxNumel = int64_t(1) << 34;  // headroom under the IR's 2^36 for the batch
  for (;;) {
    if (f == ir::Family::Gemm) {
      ir::GemmSpec g;
      g.m = dim(rng, 65536), g.n = dim(rng, 65536), g.k = dim(rng, 65536);
      g.batch = rng() % 3 == 0 ? int64_t(rng() % 16) + 1 : 0;
      g.transA = rng() % 2, g.transB = rng() % 2;
      g.dtype = std::array{ir::ScalarType::F32, ir::ScalarType::F16, ir::ScalarType::BF16}[rng() % 3];
      if (rng() % 4 == 0) g.epilogue = "relu(acc + bias)", g.shapes["bias"] = {g.n};
      const int64_t b = std::max<int64_t>(1, g.batch);
      if (g.m * g.k * b > kMaxNumel || g.k * g.n * b > kMaxNumel || g.m * g.n * b > kMaxNumel) continue;
      auto k = ir::buildGemm(g);
      if (!k.ok()) continue;
      *what = k->name;
      return *k;
    }
    if (f == ir::Family::Elementwise) {
      ir::ElementwiseSpec e;
      const int rank = 1 + int(rng() % 3);
      for (int i = 0; i < rank; ++i) e.shape.push_back(dim(rng, 65536));
      int64_t n = 1;
      for (int64_t d : e.shape) n *= d;
      if (n > kMaxNumel) continue;
      static const char* exprs[] = {"y = x * s + b", "y = gelu(x * s + b)", "y = gelu_erf(x + b)", "y = silu(x) * z",
                                    "y = tanh(x); w = exp(x * 0.5)"};
      e.expr = exprs[rng() % std::size(exprs)];
      for (const char* bcast : {"s", "b"})
        if (e.expr.find(bcast) != std::string::npos) e.shapes[bcast] = {e.shape.back()};
      e.dtype = std::array{ir::ScalarType::F32, ir::ScalarType::F16, ir::ScalarType::BF16}[rng() % 3];
      auto k = ir::buildElementwise(e);
      if (!k.ok()) continue;
      *what = k->name;
      return *k;
    }
    ir::AttentionSpec a;
    a.heads_kv = 1 + int64_t(rng() % 4);
    a.heads = a.heads_kv * (1 + int64_t(rng() % 4));
    a.batch = 1 + int64_t(rng() % 3);
    a.seq_q = dim(rng, 65536), a.seq_kv = rng() % 2 ? a.seq_q : dim(rng, 65536);
    a.head_dim = rng() % 4 == 0 ? dim(rng, maxHeadDim) : dim(rng, std::min<int64_t>(256, maxHeadDim));
    a.causal = rng() % 2;
    a.dtype = std::array{ir::ScalarType::F32, ir::ScalarType::F16, ir::ScalarType::BF16}[rng() % 3];
    if (a.batch * a.heads * std::max(a.seq_q, a.seq_kv) * a.head_dim > kMaxNumel) continue;
    auto k = ir::buildAttention(a);
    if (!k.ok()) continue;
    *what = k->name;
    return *k;
  }
}

// Why the default of `s` is not legal, or "".
std::string illegalDefault(const ir::Space& s) {
  ir::Config d = s.defaults();
  for (const auto& knob : s.knobs) {
    auto v = d.values.find(knob.name);
    if (v == d.values.end()) return "no default for " + knob.name;
    if (std::find(knob.domain.begin(), knob.domain.end(), v->second) == knob.domain.end())
      return knob.name + " default outside its domain";
  }
  return s.check(d).value_or("");
}

}  // namespace

TEST(SpaceDefaultsProperty, LegalForRandomShapesOnEveryHost) {
  std::mt19937_64 rng(20261125);
  int checked = 0;
  for (const Host& h : hosts())
    for (ir::Family f : {ir::Family::Gemm, ir::Family::Elementwise, ir::Family::Attention})
      for (int i = 0; i < 150; ++i) {
        std::string what;
        ir::Kernel k = randomKernel(f, rng, &what);
        auto s = search::makeSpace(k, h.t);
        ASSERT_TRUE(s.ok()) << h.name << " " << what << ": " << s.error().str();
        std::string why = illegalDefault(*s);
        EXPECT_EQ(why, "") << h.name << " " << what << " default " << s->defaults().str();
        ++checked;
      }
  EXPECT_GE(checked, 2700);
}

// The negative control of the property: the illegal default that used to be produced is caught.
TEST(SpaceDefaultsProperty, TheCheckCatchesAnIllegalDefault) {
  auto k = ir::buildGemm({.m = 5000, .n = 1024, .k = 1024});
  ASSERT_TRUE(k.ok());
  auto s = search::makeSpace(*k, *hostPreset("zen4-avx2"));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(illegalDefault(*s), "");
  ir::Space bad = *s;
  for (auto& knob : bad.knobs)
    if (knob.name == "MC") knob.def = int64_t(4096);
  for (auto& knob : bad.knobs)
    if (knob.name == "MR") knob.def = int64_t(6);
  EXPECT_EQ(illegalDefault(bad), "MC must be a multiple of MR");
}

TEST(SpaceDefaultsProperty, DefaultsCompileForEachHostsCpu) {
  std::mt19937_64 rng(7);
  for (const Host& h : hosts()) {
    if (h.cpu.empty()) continue;
    for (ir::Family f : {ir::Family::Gemm, ir::Family::Elementwise, ir::Family::Attention})
      for (int i = 0; i < 2; ++i) {
        std::string what;
        ir::Kernel k = randomKernel(f, rng, &what, 1024);
        auto s = search::makeSpace(k, h.t);
        ASSERT_TRUE(s.ok()) << s.error().str();
        auto obj = codegen::emitHost(k, s->defaults(), h.t, codegen::Emit::Object, {.cpu = h.cpu});
        EXPECT_TRUE(obj.ok()) << h.name << " " << what << " " << s->defaults().str() << ": "
                              << (obj.ok() ? "" : obj.error().str());
      }
  }
}

// plain tiles N by NC without padding, so a default NC that leaves a ragged last block sends that
// block through an unvectorized copy of the loop nest: 128x768x256 with NC 512 ran 2.1x slower
// than with NC 256 on a Sapphire Rapids core. On every named host (one thread), a plain default's
// NC divides N or covers it whenever its domain has such a value; the control is the old default
// (NC 512 at N = 768), which the same predicate rejects.
TEST(SpaceDefaultsProperty, PlainDefaultsTileNWithoutARaggedBlock) {
  auto knob = [](const ir::Space& s, const std::string& name) -> const ir::Knob& {
    for (const auto& k : s.knobs)
      if (k.name == name) return k;
    throw std::runtime_error("no knob " + name);
  };
  auto whole = [](int64_t nc, int64_t n) { return n % nc == 0 || nc >= n; };
  int plain = 0;
  for (const auto& p : hostPresets()) {
    TargetDesc t = *hostPreset(p);
    t.units = 1;
    for (int64_t n : {384, 640, 768, 1280, 1536, 2560, 3072})
      for (int64_t m : {64, 128}) {
        auto k = ir::buildGemm({.m = m, .n = n, .k = 256});
        ASSERT_TRUE(k.ok());
        auto s = search::makeSpace(*k, t);
        ASSERT_TRUE(s.ok()) << s.error().str();
        ir::Config d = s->defaults();
        auto sched = d.getStr("schedule");
        if (!sched.ok() || *sched != "plain") continue;
        ++plain;
        const int64_t nc = *d.getInt("NC"), nr = *d.getInt("NR");
        bool exists = false;
        for (const auto& v : knob(*s, "NC").domain) {
          const int64_t x = std::get<int64_t>(v);
          exists = exists || (x <= 512 && x % nr == 0 && whole(x, n));
        }
        if (exists) EXPECT_TRUE(whole(nc, n)) << p << " " << m << "x" << n << "x256: NC " << nc;
      }
  }
  EXPECT_GT(plain, 0) << "no shape took plain: the property was not exercised";
  EXPECT_FALSE(whole(512, 768));  // the control: the old default's ragged block is caught
}

// B transposed (nn.Linear's weight): the transform schedules read B's vectors across its rows, a
// strided load each (128x768x256 on one Sapphire Rapids core: plain 807 us, blis 319 us). On every
// named host (one thread), a transposed-B GEMM of more than 8 rows defaults to a kernel that packs
// or reads B along K (blis, kvec), never plain or packed; up to 8 rows plain stays (a matrix-vector
// product, where it was faster). The control: the same shapes without the transpose keep plain.
TEST(SpaceDefaultsProperty, TransposedBDefaultsPackB) {
  int plainNN = 0, checked = 0;
  for (const auto& p : hostPresets()) {
    TargetDesc t = *hostPreset(p);
    t.units = 1;
    for (int64_t m : {12, 64, 128})
      for (int64_t n : {256, 768, 1024}) {
        for (bool tb : {true, false}) {
          auto k = ir::buildGemm({.m = m, .n = n, .k = 256, .transB = tb});
          ASSERT_TRUE(k.ok());
          auto s = search::makeSpace(*k, t);
          ASSERT_TRUE(s.ok()) << s.error().str();
          const std::string sched = *s->defaults().getStr("schedule");
          if (tb) {
            ++checked;
            EXPECT_TRUE(sched != "plain" && sched != "packed") << p << " " << m << "x" << n << "x256 tB: " << sched;
          } else {
            plainNN += sched == "plain";
          }
        }
      }
  }
  EXPECT_GT(checked, 0);
  EXPECT_GT(plainNN, 0) << "without the transpose no shape took plain: the control says nothing";
}
