// Owns the host back end: the pass pipeline from scheduled MLIR to the LLVM dialect, the JIT,
// and LLVM IR / assembly / object emission for the host CPU.
#pragma once

#include <memory>
#include <string>

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/BuiltinOps.h"
#include "support/status.h"

namespace tessera::codegen {

struct HostLoweringOptions {
  bool nontemporalStores = false;  // full-vector stores bypass the caches
  int threads = 1;                 // > 1: scf.parallel loops become OpenMP loops on this many threads
  bool amx = false;                // lower AMX tile ops
  // The CPU converts f32 to bf16 itself (avx512_bf16: vcvtneps2bf16): bf16 casts go to LLVM as
  // they are instead of being expanded into integer rounding (~6 instructions a vector).
  bool nativeBf16 = false;
  // fdiv marked `arcp` becomes rcpps/rcp14ps and one Newton step (LLVM's reciprocal-estimates
  // attribute on the kernel function) instead of vdivps: 3 instructions on the FMA pipes instead
  // of one that blocks the divider for 5-10 cycles per vector.
  bool reciprocalEstimates = false;
};

// Scheduled (memref + vector + scf) IR -> LLVM dialect, in place. Kernels use the bare-pointer
// calling convention: one `ptr` per static-shaped memref argument.
Status lowerHostToLLVMDialect(mlir::ModuleOp m, const HostLoweringOptions& o = {});

// JIT-compiles an LLVM-dialect module for this CPU (or `cpu`), O3; `openmp`: it calls the OpenMP
// runtime, which is loaded into the process.
Expected<std::unique_ptr<mlir::ExecutionEngine>> jitHost(mlir::ModuleOp m, const std::string& cpu, bool openmp = false);

enum class HostArtifact { LLVMIR, Asm, Object };
Expected<std::string> emitHostArtifact(mlir::ModuleOp m, HostArtifact kind, const std::string& cpu);

}  // namespace tessera::codegen
