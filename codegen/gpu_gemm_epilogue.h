// Owns the fused epilogue of the lane-level GPU GEMM kernels (wgmma, mma-lane): which kernel
// arguments the epilogue's tensors become (the host wrapper's side) and the per-element code that
// reads a finished C tile, applies the elementwise expression (alpha/beta, bias, activation,
// residual) and stores the output under the problem's edges, all batches in one grid.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "codegen/codegen.h"
#include "codegen/gpu.h"
#include "ir/families.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "support/status.h"

namespace tessera::codegen::gemm {

// One epilogue operand: its kernel argument and how the iteration coordinates address it.
struct EpiOperand {
  ir::ElementwiseOperand op;
  int arg = -1;                  // kernel argument (-1: the accumulator)
  std::vector<int64_t> strides;  // per tensor dim, in elements (0 for broadcast dims)
};

struct Epilogue {
  bool present = false;          // false: the output is the accumulator
  ir::ElementwiseRegion region;
  std::vector<EpiOperand> operands;
  int rowDim = 0, colDim = 1;    // iteration dims of row and column (batch is dim 0 when batched)
  int outArg = -1;               // the output tensor (all batches)
  int partialsArg = -1, countersArg = -1;  // wgmma's split-K workspaces
};

// Appends the epilogue's tensors and then the output to `args` (user buffers, whole: the kernel
// indexes batches itself) and their flat kernel argument types to `flat` (element type, elements);
// fills `e`.
void planEpilogue(mlir::OpBuilder& b, const ir::Kernel& k, const ir::GemmInfo& g, std::vector<GpuArg>& args,
                  std::vector<std::pair<mlir::Type, int64_t>>& flat, Epilogue& e);

// The output of one BM x BN tile at (batch, m0, n0): `threads` threads from `tid` take one element
// per step (consecutive threads, consecutive columns: coalesced), accOf(e, r, col) gives the f32
// accumulator of tile element e = r * BN + col; elements past M or N are skipped. With `elBegin`,
// only the `elCount` elements from it (a slice of the tile; elCount a multiple of `threads`).
Status emitTileStores(mlir::OpBuilder& b, mlir::Location loc, mlir::func::FuncOp fn, const ir::GemmInfo& g, const Epilogue& e,
                      mlir::Value tid, int64_t threads, int64_t BM, int64_t BN, mlir::Value batch, mlir::Value m0,
                      mlir::Value n0, const std::function<mlir::Value(mlir::Value e, mlir::Value r, mlir::Value col)>& accOf,
                      mlir::Value runtimeM = {},  // runtime M: rows at or past it are skipped
                      mlir::Value elBegin = {}, int64_t elCount = 0);

// Shape-generic GEMM kernels (RuntimeDims: M, or the batch count), shared by the strategies that
// take them: the refusals they have in common (a key length, runtime M with a batch dimension or a
// transposed A, a runtime batch without one) in one line naming `strategy`, and the launch's
// Runtime (upper bounds, the row blocks' height, which user tensors hold M rows / batches).
Expected<GpuLaunch::Runtime> planRuntime(const ir::Kernel& k, const ir::GemmInfo& g, const RuntimeDims& rt,
                                         const std::string& strategy, int64_t rowsPerBlock, bool batchInGrid);
// The sizes argument: appended to the launch's arguments and the kernel's (memref<3xi64>); its index.
int appendSizesArg(mlir::OpBuilder& b, std::vector<GpuArg>& args, std::vector<mlir::Type>& types);
// sizes[i] of the sizes argument `sizes` as an index.
mlir::Value loadSize(mlir::OpBuilder& b, mlir::Location loc, mlir::Value sizes, int i);

// The index of tensor `name` among the kernel's inputs then outputs (HostExecutable order); -1 if none.
int userIndexOf(const ir::Kernel& k, const std::string& name);

}  // namespace tessera::codegen::gemm
