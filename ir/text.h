// Owns the canonical text form of the IR: printer and parser that round-trip exactly.
//
//   kernel gemm_64x64x64_f32 : gemm {
//     in A: f32[64, 64]
//     in B: f32[64, 64]
//     out C: f32[64, 64]
//     C[i, j] = sum(k < 64: A[i, k] * B[k, j])
//   }
//
// Expressions: infix + - * / (// and % on indices), calls exp(x) ... gelu(x), min(a, b),
// max(a, b), casts f32(x)/f16(x)/bf16(x), neg(x), select(i <= j, a, b), reductions
// sum(k < 64: e) and max(j < 64: e). Float literals always print with '.' or an exponent; integer
// literals are index constants (promoted to float next to a float operand when parsing).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/ir.h"
#include "support/status.h"

namespace tessera::ir {

// Limits of the parser (hostile input must get a clear error, never a crash): the text size, the
// syntactic nesting (parentheses, unary minus, calls, indices, reductions) and the depth of the
// expression tree built (a flat chain a + b + ... is as deep as it is long). The verifier has its
// own, larger limits for kernels built in code.
inline constexpr size_t kMaxIrTextBytes = 1u << 20;
inline constexpr int kMaxExprNesting = 128;
inline constexpr int kMaxExprDepth = 256;

std::string printExpr(const ExprRef& e);

struct PrintOptions {
  // Rename tensors t0, t1, ... (declaration order) and stage/reduction variables v0, v1, ... and
  // drop the kernel name: the form behind the structural hash, invariant to naming.
  bool anonymize = false;
};
std::string printKernel(const Kernel& k, const PrintOptions& opts = {});

Expected<Kernel> parseKernel(std::string_view text);

struct ExprEnv {
  // Type of a declared tensor, or nullopt when the name is not a tensor.
  std::function<std::optional<ScalarType>(const std::string&)> tensorType;
  std::vector<std::string> indexVars;  // variables in scope
  // Elementwise language: a bare tensor name `x` is a Load with no indices (the builder fills in
  // broadcast indices).
  bool bareTensorNames = false;
};
Expected<ExprRef> parseExpr(std::string_view text, const ExprEnv& env);

}  // namespace tessera::ir
