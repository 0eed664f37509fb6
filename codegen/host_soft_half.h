// Owns the host back end's handling of 16-bit floats the CPU has no conversion instructions for
// (bf16 without avx512_bf16): bit moves retyped to i16 before LLVM, conversion builtins for the JIT.
#pragma once

#include <functional>

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/BuiltinOps.h"

namespace tessera::codegen {

// In an LLVM-dialect module: every value of a 16-bit float type that `soft` selects (scalar,
// vector, array of those) that is only loaded, stored, selected, shuffled, extracted, inserted,
// bitcast, a constant or a branch argument becomes the i16 of the same bits; ops that compute
// with such a value keep it through bitcasts at their boundary. Returns how many values changed.
int softHalfToInt(mlir::ModuleOp m, const std::function<bool(mlir::Type)>& soft);

// Adds compiler-rt's 16-bit float conversion builtins (__truncsfbf2, __extendhfsf2, ...) to the
// JIT's symbols: whatever conversion LLVM still turns into a call resolves on every host.
void registerConversionBuiltins(mlir::ExecutionEngine& engine);

}  // namespace tessera::codegen
