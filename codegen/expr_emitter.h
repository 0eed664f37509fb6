// Owns the translation of IR expressions (elementwise, no reductions) into arith/math ops. The
// caller decides what a load and an index variable are (block arguments and linalg.index inside
// a linalg.generic; values of its own loops elsewhere).
#pragma once

#include <functional>

#include "ir/ir.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"
#include "support/status.h"

namespace tessera::codegen {

struct ExprCallbacks {
  std::function<mlir::Value(const ir::Expr& load)> load;      // value of the load (its own dtype)
  std::function<mlir::Value(const std::string& var)> indexVar;  // an `index` value
  // Sigmoid/GELU use our own 2^t built from exponent bits (13 instructions). The GPU GEMM
  // epilogue turns it off: MLIR 22's vector unrolling for mma fragments mistypes elementwise ops
  // that change the element type (bitcast, fptosi) on vector<1xf32>, so it gets math.exp.
  bool bitExp2 = true;
  // > 0: float values are vector<lanes x T> (loads return vectors; constants become splats), for
  // callers that emit vector code themselves (the host GEMM's fused epilogue).
  int64_t lanes = 0;
  // The elementwise knob MATH=fast: cheaper approximations that still pass the reference check
  // (f32 tolerance 2e-4): 2^f of degree 3 (7.5e-5 relative), erf as a 9/6 rational (4.9e-6),
  // tanh as a 7/6 rational (6.1e-6), and divisions marked `arcp` (the host turns them into a reciprocal estimate
  // refined by one Newton step, HostLoweringOptions::reciprocalEstimates).
  bool fastMath = false;
};

// Emits `e`; float arithmetic is f32 with `contract` fast-math (lets LLVM form FMAs). Reductions
// are rejected (Internal: the family analysis keeps them out of elementwise regions).
Expected<mlir::Value> emitExpr(mlir::OpBuilder& b, mlir::Location loc, const ir::ExprRef& e, const ExprCallbacks& cb);

mlir::Type mlirType(mlir::OpBuilder& b, ir::ScalarType t);

}  // namespace tessera::codegen
