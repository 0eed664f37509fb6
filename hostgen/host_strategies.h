// Owns the interface between the host dispatcher and the per-family host strategies: each turns
// (kernel, config, target) into a payload module holding `func.func @kernel` plus, for
// transform-scheduled families, the schedule text that lowers it to vector code.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "codegen/codegen.h"
#include "codegen/kernel_func.h"
#include "ir/families.h"
#include "ir/ir.h"
#include "ir/schedule.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "support/status.h"
#include "targets/kernel_configs.h"
#include "targets/target_desc.h"

namespace tessera::codegen {

struct HostPayload {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::string schedule;  // transform module with @__transform_main; empty: already loop code
  // Full-vector stores bypass the caches (streaming outputs larger than the LLC: no
  // read-for-ownership of lines that are only written).
  bool nontemporalStores = false;
  // scf.parallel loops become OpenMP worksharing loops on this many threads (1: none are emitted).
  int threads = 1;
  // After the schedule: the kernel function's outermost loops become scf.parallel (their
  // iterations write disjoint slices of the outputs: tiles of a parallel linalg op).
  bool parallelOuterLoops = false;
  // AMX tile ops are present: lowered with the AMX intrinsics; the process must ask Linux for
  // the tile state before running them (arch_prctl ARCH_REQ_XCOMP_PERM).
  bool amx = false;
  // Divisions marked `arcp` may become a reciprocal estimate refined by one Newton step.
  bool reciprocalEstimates = false;
};

Expected<HostPayload> buildHostGemm(mlir::MLIRContext* ctx, const ir::Kernel& k, const ir::Config& c,
                                    const TargetDesc& t);
// The indices of one operand read in a GEMM's fused epilogue at (row, col) of batch `batch`: the
// region's last iteration dimension is the column, the one before it the row, any other the batch,
// constants as given. `vec` says the read is a vector along the columns; false when the column is
// not the operand's last index (a transposed read, which no epilogue vector can take).
bool epilogueReadIndices(mlir::OpBuilder& b, mlir::Location loc, const ir::Expr& load, int inner, mlir::Value row,
                         mlir::Value col, mlir::Value batch, llvm::SmallVectorImpl<mlir::Value>& ix, bool& vec);
// Reads one vector operand of a fused epilogue: memref, indices, vector type.
using EpilogueVectorRead = std::function<mlir::Value(mlir::Value, mlir::ValueRange, mlir::VectorType)>;
// A GEMM's fused epilogue (alpha, beta·Cin, bias, activation, output cast) on `lanes` columns of one
// row of the accumulator at (row, col) of batch `batch`: the kernel's own elementwise expression
// emitted on vectors of `lanes`. `read` loads a vector operand (empty: a plain vector.load); the
// accumulator itself is `acc`. Returns `acc` when the kernel has no epilogue.
Expected<mlir::Value> emitRowEpilogue(mlir::OpBuilder& b, mlir::Location loc, const ir::GemmInfo& g,
                                      const std::map<std::string, mlir::Value>& args, mlir::Value acc, mlir::Value row,
                                      mlir::Value col, mlir::Value batch, int64_t lanes,
                                      const EpilogueVectorRead& read = {});

// The explicit BLIS-style GEMM (host_gemm_blis.cpp): schedules blis, bf16dot and amx.
// `dims`: the sizes it takes at run time (shape-generic kernels; only this strategy has them).
Expected<HostPayload> buildHostGemmBlis(mlir::MLIRContext* ctx, const ir::Kernel& k, const HostGemmConfig& c,
                                        const TargetDesc& t, const RuntimeDims& dims = {});
// `dims.m`: the leading dimension (the iteration space's first) is a runtime size, sizes[0].
Expected<HostPayload> buildHostElementwise(mlir::MLIRContext* ctx, const ir::Kernel& k, const ir::Config& c,
                                           const TargetDesc& t, const RuntimeDims& dims = {});
// `dims`: runtime query length (m, sizes[0]), batch (sizes[1]) and key length (kv, sizes[2]).
Expected<HostPayload> buildHostAttention(mlir::MLIRContext* ctx, const ir::Kernel& k, const ir::Config& c,
                                         const TargetDesc& t, const RuntimeDims& dims = {});

}  // namespace tessera::codegen
