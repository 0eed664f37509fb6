// Tests the GPU elementwise strategy: CPU emulation of its pre-mapping IR against the reference
// (broadcasting, every op, every dtype, odd shapes, knob extremes) and PTX/cubin + hsaco with
// resource reports for sm_80, sm_90, gfx90a and gfx942.
#include <gtest/gtest.h>

#include "../common/elementwise_kernel.h"
#include "gpu_check.h"
#include "ir/builders.h"
#include "ir/text.h"
#include "search/space.h"

using namespace tessera;
using namespace tessera::ir;

namespace {

using testutil::ew;

const char* kTargets[] = {"sm_80", "sm_90", "gfx90a", "gfx942"};

}  // namespace

TEST(GpuElementwise, EmulatedBiasGeluOnOddShapesAndDtypes) {
  for (ScalarType t : {ScalarType::F32, ScalarType::F16, ScalarType::BF16})
    for (Shape sh : {Shape{7}, Shape{1000}, Shape{7, 129}, Shape{3, 5, 32}}) {
      Kernel k = ew("y = gelu(x * s + b)", sh, {{"s", {sh.back()}}, {"b", {sh.back()}}}, t);
      auto r = testutil::checkEmulated(k, testutil::gpuTarget(t == ScalarType::F32 ? "sm_80" : "gfx942"));
      EXPECT_TRUE(r.correct) << k.name << ": " << r.error;
    }
}

TEST(GpuElementwise, EmulatedEveryOp) {
  for (const char* e : {"y = x + z - x * z / (abs(z) + 1)", "y = neg(x)", "y = exp(x * 3)", "y = log(abs(x) + 0.5)",
                        "y = sqrt(abs(x) + 0.5)", "y = rsqrt(abs(x) + 0.5)", "y = tanh(x * 4)", "y = sigmoid(x * 6)",
                        "y = relu(x)", "y = gelu_erf(x * 3)", "y = silu(x * 5)", "y = erf(x * 2)",
                        "y = min(x, z) + max(x, z)", "y = f32(bf16(x)) * f32(f16(z))"}) {
    auto r = testutil::checkEmulated(ew(e, {3, 36}), testutil::gpuTarget("sm_90"));
    EXPECT_TRUE(r.correct) << e << ": " << r.error;
  }
}

TEST(GpuElementwise, EmulatedBroadcastingTransposeAndMultipleOutputs) {
  Kernel k = ew("t = x * s + b; y = relu(t); z = t * w", {4, 6, 36}, {{"s", {36}}, {"b", {6, 1}}, {"w", {4, 1, 1}}});
  auto r = testutil::checkEmulated(k, testutil::gpuTarget("gfx90a"));
  EXPECT_TRUE(r.correct) << r.error;
  auto t = parseKernel("kernel tr : elementwise {\n in x: f32[9, 16]\n out y: f32[16, 9]\n y[i, j] = x[j, i] * 2.0\n}");
  ASSERT_TRUE(t.ok());
  r = testutil::checkEmulated(*t, testutil::gpuTarget("sm_80"));
  EXPECT_TRUE(r.correct) << r.error;
  auto t2 = parseKernel("kernel tr2 : elementwise {\n in x: f32[8, 16]\n out y: f32[16, 8]\n y[i, j] = x[j, i] * 2.0\n}");
  ASSERT_TRUE(t2.ok());
  r = testutil::checkEmulated(*t2, testutil::gpuTarget("sm_80"), *Config::parseAssignments("VW=4"));
  EXPECT_TRUE(r.correct) << r.error;
}

TEST(GpuElementwise, EmulatedExtremesOfEveryKnob) {
  Kernel k = ew("y = gelu(x * s + b)", {5, 1000}, {{"s", {1000}}, {"b", {1000}}}, ScalarType::F16);
  const TargetDesc& t = testutil::gpuTarget("sm_80");
  auto space = search::makeSpace(k, t);
  ASSERT_TRUE(space.ok()) << space.error().str();
  for (const auto& knob : space->knobs)
    for (const auto& v : {knob.domain.front(), knob.domain.back()}) {
      Config c = space->defaults();
      c.set(knob.name, v);
      if (space->check(c)) continue;
      auto r = testutil::checkEmulated(k, t, c);
      EXPECT_TRUE(r.correct) << knob.name << "=" << knobValueStr(v) << ": " << r.error;
    }
}

TEST(GpuElementwise, EmulatedGridStrideLoop) {
  // GRID=1: one block per SM and a grid-stride loop of several steps, with a predicated tail.
  Kernel k = ew("y = x * s + b", {300001}, {{"s", {1}}, {"b", {300001}}});
  for (const char* tn : {"sm_80", "gfx942"}) {
    auto r = testutil::checkEmulated(k, testutil::gpuTarget(tn), *Config::parseAssignments("TPB=64,VW=1,EPT=2,GRID=1"));
    EXPECT_TRUE(r.correct) << tn << ": " << r.error;
  }
}

TEST(GpuElementwise, BinariesAndResourcesForEveryTarget) {
  Kernel k = ew("y = gelu(x * s + b) + exp(x) * rsqrt(abs(s) + 1)", {1024, 4096}, {{"s", {4096}}, {"b", {4096}}});
  for (const char* tn : kTargets) {
    const TargetDesc& t = testutil::gpuTarget(tn);
    auto b = testutil::compileFor(k, t);
    ASSERT_TRUE(b.ok()) << tn << ": " << b.error().str();
    EXPECT_FALSE(b->binary.empty()) << tn;
    EXPECT_TRUE(b->resources.ok) << b->resources.summary();
    EXPECT_FALSE(b->resources.spills()) << b->resources.summary();
    EXPECT_EQ(testutil::countOccurrences(b->assembly, t.vendor == Vendor::Nvidia ? "call" : "s_swappc"), 0)
        << tn << ": no device-library calls";
    std::printf("[elementwise default] %s\n", b->resources.summary().c_str());
  }
}
