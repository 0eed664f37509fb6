// Owns the host back end: the pass pipeline from scheduled MLIR to the LLVM dialect, the JIT,
// and LLVM IR / assembly / object emission for the host CPU.
#pragma once

#include <memory>
#include <string>

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/BuiltinOps.h"
#include "support/status.h"

namespace tessera::codegen {

// Scheduled (memref + vector + scf) IR -> LLVM dialect, in place. Kernels use the bare-pointer
// calling convention: one `ptr` per static-shaped memref argument.
Status lowerHostToLLVMDialect(mlir::ModuleOp m, bool nontemporalStores = false);

// JIT-compiles an LLVM-dialect module for this CPU (or `cpu`), O3.
Expected<std::unique_ptr<mlir::ExecutionEngine>> jitHost(mlir::ModuleOp m, const std::string& cpu);

enum class HostArtifact { LLVMIR, Asm, Object };
Expected<std::string> emitHostArtifact(mlir::ModuleOp m, HostArtifact kind, const std::string& cpu);

}  // namespace tessera::codegen
