// Owns the tests' one way to build an elementwise kernel from an expression and shapes (host and GPU
// tests alike): a kernel that does not build fails the calling test with the builder's message.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "ir/builders.h"

namespace tessera::testutil {

inline ir::Kernel ew(const std::string& expr, ir::Shape shape, std::map<std::string, ir::Shape> shapes = {},
                     ir::ScalarType t = ir::ScalarType::F32) {
  ir::ElementwiseSpec s;
  s.expr = expr;
  s.shape = std::move(shape);
  s.shapes = std::move(shapes);
  s.dtype = t;
  auto k = ir::buildElementwise(s);
  EXPECT_TRUE(k.ok()) << (k.ok() ? "" : k.error().str());
  return k.ok() ? *k : ir::Kernel{};
}

}  // namespace tessera::testutil
