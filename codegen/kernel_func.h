// Owns the kernel function's calling convention that host and GPU code generation share: the
// `@kernel` symbol, one static-shaped memref per tensor (inputs, then outputs), the runtime sizes
// argument, and calling a compiled kernel with packed pointers (invokeRaw, codegen.h).
#pragma once

#include <map>
#include <string>

#include "ir/ir.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace tessera::codegen {

inline constexpr const char* kKernelSymbol = "kernel";
// The name createKernelFunc gives the runtime sizes argument in `args` (RuntimeDims).
inline constexpr const char* kSizesArg = "__sizes";

// `func.func @kernel` taking one static-shaped memref per tensor (inputs, then outputs), and with
// `sizesArg` a memref<2xi64> of runtime sizes last (RuntimeDims); fills `args` with tensor name
// (kSizesArg for the sizes) -> block argument and leaves the builder inside the (empty) body.
mlir::func::FuncOp createKernelFunc(mlir::OpBuilder& b, mlir::ModuleOp m, const ir::Kernel& k,
                                    std::map<std::string, mlir::Value>* args, bool sizesArg = false);

}  // namespace tessera::codegen
