// Owns the MLIR environment shared by all strategies: a context with every dialect we use,
// textual pass pipelines with captured diagnostics, transform-schedule application, and the
// polynomial approximation of math functions.
#pragma once

#include <memory>
#include <string>

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "support/status.h"

namespace tessera::codegen {

// A fresh context (single-threaded: the tuner compiles in its own thread pool and forks) with
// all dialects, extensions and LLVM translations registered.
std::unique_ptr<mlir::MLIRContext> makeContext();

// Collects diagnostics emitted while it lives; message() joins them.
class DiagnosticCollector {
 public:
  explicit DiagnosticCollector(mlir::MLIRContext* ctx);
  ~DiagnosticCollector();
  std::string message() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Runs a pass list (no builtin.module(...) wrapper) on the module; CompileError with the
// diagnostics on failure.
Status runPasses(mlir::ModuleOp m, const std::string& pipeline, const std::string& what);

// Parses `scheduleText` (a module with transform.with_named_sequence) and applies its
// @__transform_main to `payload`. Knob problems the schedule discovers are compile errors.
Status applySchedule(mlir::ModuleOp payload, const std::string& scheduleText);

// Rewrites math.exp/tanh/erf/log/... on f32 (scalars and vectors) into polynomials: libm per
// vector lane is 5-10x slower (mlir-recipes/cpu-flash-attention REPORT, pitfall 1).
Status approximateMath(mlir::ModuleOp m);

Expected<mlir::OwningOpRef<mlir::ModuleOp>> parseModule(mlir::MLIRContext* ctx, const std::string& text);
std::string printOp(mlir::Operation* op);

}  // namespace tessera::codegen
