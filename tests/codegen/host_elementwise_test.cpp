// Tests host elementwise codegen against the reference: broadcasting, every op, every dtype,
// odd shapes, multiple outputs and the extremes of every knob.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "codegen/codegen.h"
#include "../common/elementwise_kernel.h"
#include "host_check.h"
#include "ir/buffer.h"
#include "ir/builders.h"
#include "ir/text.h"
#include "search/space.h"

using namespace tessera;
using namespace tessera::ir;

namespace {

using testutil::ew;

}  // namespace

TEST(HostElementwise, BiasGeluOnOddShapesAndDtypes) {
  for (ScalarType t : {ScalarType::F32, ScalarType::F16, ScalarType::BF16})
    for (Shape sh : {Shape{1}, Shape{7}, Shape{129}, Shape{1000}, Shape{7, 129}, Shape{3, 5, 33}}) {
      Kernel k = ew("y = gelu(x * s + b)", sh, {{"s", {sh.back()}}, {"b", {sh.back()}}}, t);
      auto r = testutil::checkHost(k);
      EXPECT_TRUE(r.correct) << k.name << ": " << r.error;
    }
}

TEST(HostElementwise, EveryOp) {
  // Inputs are uniform in [-1, 1): log/sqrt/rsqrt get abs()+0.5 so the reference stays finite.
  for (const char* e : {"y = x + z - x * z / (abs(z) + 1)", "y = neg(x)", "y = abs(x)", "y = exp(x * 3)",
                        "y = log(abs(x) + 0.5)", "y = sqrt(abs(x) + 0.5)", "y = rsqrt(abs(x) + 0.5)", "y = tanh(x * 4)",
                        "y = sigmoid(x * 6)", "y = relu(x)", "y = gelu(x * 3)", "y = gelu_erf(x * 3)", "y = silu(x * 5)",
                        "y = erf(x * 2)", "y = min(x, z) + max(x, z)", "y = f32(bf16(x)) * f32(f16(z))"}) {
    auto r = testutil::checkHost(ew(e, {3, 37}));
    EXPECT_TRUE(r.correct) << e << ": " << r.error;
  }
}

// MATH=fast (cheaper 2^f, erf, tanh and reciprocal-estimate divisions) passes the reference check
// on every op it changes, in every dtype; the space offers it only where it changes something.
TEST(HostElementwise, FastMathFormsPassTheReference) {
  for (const char* e : {"y = tanh(x * 4)", "y = sigmoid(x * 6)", "y = gelu(x * 3)", "y = gelu_erf(x * 3)",
                        "y = silu(x * 5)", "y = erf(x * 2)", "y = x / (abs(z) + 0.5)", "y = gelu(x * 40)",
                        "y = sigmoid(x * 300)", "y = tanh(x * 300)", "y = tanh(x * 0.001)"}) {
    auto r = testutil::checkHost(ew(e, {5, 203}), *Config::parseAssignments("MATH=fast"));
    EXPECT_TRUE(r.correct) << e << ": " << r.error;
  }
  for (ScalarType t : {ScalarType::BF16, ScalarType::F16})
    for (const char* e : {"y = gelu(x * s + b)", "y = gelu_erf(x + b) + s", "y = silu(x) * tanh(s) + b"}) {
      Kernel k = ew(e, {7, 203}, {{"s", {203}}, {"b", {203}}}, t);
      auto r = testutil::checkHost(k, *Config::parseAssignments("MATH=fast"));
      EXPECT_TRUE(r.correct) << e << " " << typeName(t) << ": " << r.error;
    }
  auto plain = search::makeSpace(ew("y = x * s + b", {4, 64}, {{"s", {64}}, {"b", {64}}}), hostTarget());
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->find("MATH"), nullptr);
  auto gelu = search::makeSpace(ew("y = gelu(x)", {4, 64}), hostTarget());
  ASSERT_TRUE(gelu.ok());
  ASSERT_NE(gelu->find("MATH"), nullptr);
  EXPECT_EQ(gelu->defaults().values.at("MATH"), KnobValue(std::string("precise")));
}

// GELU and sigmoid saturate their 2^t at |t| = 126 (the numerator keeps x): far past that
// (|x| > 10 for GELU, > 87 for sigmoid), the results must still be x or 0 with the right signs.
TEST(HostElementwise, SaturatingActivationsFarOutsideTheirClamps) {
  for (const char* e : {"y = gelu(x * 40)", "y = gelu(x * 10)", "y = sigmoid(x * 300)", "y = silu(x * 300)",
                        "y = sigmoid(x * 88)"}) {
    auto r = testutil::checkHost(ew(e, {5, 203}));
    EXPECT_TRUE(r.correct) << e << ": " << r.error;
  }
}

// erf and gelu_erf use a clamped rational approximation (expr_emitter.cpp). Checked element by
// element without the comparison's 1 %-of-max floor: relative error across 76 decades, the
// saturation to exactly +-1 (so gelu_erf of a large negative x is exactly 0, not x times the
// fit's last ulp), |erf| <= 1, and infinities and NaN.
TEST(HostElementwise, ErfAndGeluErfAccurateAndSaturatingExactly) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  std::vector<double> xs = {0.0, -0.0, inf, -inf, nan, 1e30, -1e30, 3.3e38, -3.3e38, 1e-38, -1e-38};
  for (double a = 1e-37; a < 12; a *= 1.07) xs.insert(xs.end(), {a, -a});
  for (double a = 0; a < 7; a += 1.0 / 64) xs.insert(xs.end(), {a, -a});
  for (const char* e : {"y = erf(x)", "y = gelu_erf(x)"}) {
    bool gelu = std::string(e).find("gelu") != std::string::npos;
    Kernel k = ew(e, {int64_t(xs.size())});
    auto space = search::makeSpace(k, hostTarget());
    ASSERT_TRUE(space.ok());
    auto exe = codegen::compileHost(k, space->defaults(), hostTarget());
    ASSERT_TRUE(exe.ok()) << exe.error().str();
    Buffer x(ScalarType::F32, {int64_t(xs.size())}), y(ScalarType::F32, {int64_t(xs.size())});
    for (size_t i = 0; i < xs.size(); ++i) x.set(int64_t(i), xs[i]);
    void* bufs[] = {x.data(), y.data()};
    (*exe)->run(bufs);
    int bad = 0;
    for (size_t i = 0; i < xs.size() && bad < 5; ++i) {
      double v = x.get(int64_t(i)), got = y.get(int64_t(i));
      double want = gelu ? 0.5 * v * (1 + std::erf(v * 0.7071067811865476)) : std::erf(v);
      bool ok;
      if (std::isnan(v)) ok = std::isnan(got);
      else if (gelu && v == -inf) ok = true;  // -inf * 0: the reference itself is NaN
      else if (gelu && v < -5.7) ok = got == 0;  // erf(x / sqrt 2) is exactly -1 there
      else if (std::isinf(want)) ok = got == want;
      else if (gelu)  // 1 + erf cancels for negative x: the error scales with |x|, as in any f32 form
        ok = std::fabs(got - want) <= 1e-6 * std::fabs(want) + 4e-7 * std::fabs(v);
      else ok = std::fabs(got) <= 1 && std::fabs(got - want) <= 5e-7 * std::fabs(want) + 1e-44;
      if (!ok) ADD_FAILURE() << e << " at x = " << v << ": got " << got << ", want " << want, ++bad;
    }
  }
}

TEST(HostElementwise, BroadcastingAndMultipleOutputs) {
  Kernel k = ew("t = x * s + b; y = relu(t); z = t * w", {4, 6, 33}, {{"s", {33}}, {"b", {6, 1}}, {"w", {4, 1, 1}}});
  auto r = testutil::checkHost(k);
  EXPECT_TRUE(r.correct) << r.error;
  // A transposed read, written in the IR text form.
  auto t = parseKernel("kernel tr : elementwise {\n in x: f32[9, 17]\n out y: f32[17, 9]\n y[i, j] = x[j, i] * 2.0\n}");
  ASSERT_TRUE(t.ok());
  r = testutil::checkHost(*t);
  EXPECT_TRUE(r.correct) << r.error;
}

TEST(HostElementwise, ExtremesOfEveryKnob) {
  Kernel k = ew("y = gelu(x * s + b)", {5, 1000}, {{"s", {1000}}, {"b", {1000}}});
  auto space = search::makeSpace(k, hostTarget());
  ASSERT_TRUE(space.ok());
  for (const auto& knob : space->knobs)
    for (const auto& v : {knob.domain.front(), knob.domain.back()}) {
      Config c = space->defaults();
      c.set(knob.name, v);
      if (space->check(c)) continue;
      auto r = testutil::checkHost(k, c);
      EXPECT_TRUE(r.correct) << knob.name << "=" << knobValueStr(v) << ": " << r.error;
    }
}

// Several rows per tile (ROWS): the row-broadcast operands are loaded once per tile. Correct on
// every rank, with column tails, with column blocks, and with row counts the tile does not
// divide (the partial last row tile is peeled off).
TEST(HostElementwise, RowsPerTileShareBroadcastLoads) {
  struct Case {
    const char* expr;
    Shape shape;
    std::map<std::string, Shape> shapes;
    const char* config;
  };
  for (const Case& c : std::vector<Case>{
           {"y = x * s + b", {8, 1000}, {{"s", {1000}}, {"b", {1000}}}, "VW=8,UNROLL=2,NT=1,CHUNK=0,ROWS=4"},
           {"y = gelu(x * s + b)", {12, 517}, {{"s", {517}}, {"b", {517}}}, "VW=16,UNROLL=1,NT=0,CHUNK=256,ROWS=2"},
           {"y = gelu(x + b)", {3, 8, 40}, {{"b", {40}}}, "VW=8,UNROLL=4,NT=1,CHUNK=0,ROWS=4"},
           {"y = x * s + b", {7, 33}, {{"s", {33}}, {"b", {33}}}, "VW=8,UNROLL=1,NT=0,CHUNK=0,ROWS=4"},
           {"y = gelu(x * s + b)", {13, 517}, {{"s", {517}}, {"b", {517}}}, "VW=8,UNROLL=2,NT=1,CHUNK=256,ROWS=4"},
           {"y = x + b", {3, 9, 40}, {{"b", {40}}}, "VW=16,UNROLL=2,NT=1,CHUNK=0,ROWS=2"},
       }) {
    Kernel k = ew(c.expr, c.shape, c.shapes);
    auto r = testutil::checkHost(k, *Config::parseAssignments(c.config));
    EXPECT_TRUE(r.correct) << k.name << " " << c.config << ": " << r.error;
  }
  // The space offers ROWS only with a row-broadcast operand, and no more rows than there are.
  auto rowsOf = [](const Kernel& k) {
    auto s = search::makeSpace(k, hostTarget());
    EXPECT_TRUE(s.ok());
    for (const auto& knob : s->knobs)
      if (knob.name == "ROWS") return knob.domain.size();
    return size_t(0);
  };
  EXPECT_EQ(rowsOf(ew("y = x * s + b", {8, 64}, {{"s", {64}}, {"b", {64}}})), 3u);
  EXPECT_EQ(rowsOf(ew("y = x * s + b", {6, 64}, {{"s", {64}}, {"b", {64}}})), 3u);
  EXPECT_EQ(rowsOf(ew("y = x * s + b", {3, 64}, {{"s", {64}}, {"b", {64}}})), 2u);
  EXPECT_EQ(rowsOf(ew("y = x * z", {8, 64})), 1u);
}

TEST(HostElementwise, InvalidConfigsAreRejectedCleanly) {
  Kernel k = ew("y = x * 2", {64});
  for (const char* bad : {"VW=0", "UNROLL=-1", "VW=4096", "NT=2", "ROWS=0", "ROWS=17"}) {
    Config c = *Config::parseAssignments("VW=16,UNROLL=1,NT=0,CHUNK=0");
    Config extra = *Config::parseAssignments(bad);
    for (const auto& [n, v] : extra.values) c.set(n, v);
    auto exe = codegen::compileHost(k, c, hostTarget());
    ASSERT_FALSE(exe.ok()) << bad;
    EXPECT_EQ(exe.error().code, ErrorCode::InvalidConfig) << exe.error().str();
  }
}
