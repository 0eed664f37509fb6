// Owns elementwise regions as linalg.generic ops (used by the elementwise family and the GEMM
// epilogue) and the transform-schedule fragment that tiles and vectorizes them.
#pragma once

#include <functional>
#include <string>

#include "ir/families.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"
#include "support/status.h"

namespace tessera::codegen {

// Attribute marking the generics a schedule fragment targets.
inline constexpr const char* kElementwiseTag = "tessera.elementwise";

// Builds one linalg.generic over region.iter reading `operand(op)` tensors and writing into
// `outInits` (one per output); returns its results.
Expected<llvm::SmallVector<mlir::Value>> buildElementwiseGeneric(
    mlir::OpBuilder& b, mlir::Location loc, const ir::ElementwiseRegion& region,
    const std::function<mlir::Value(const ir::ElementwiseOperand&)>& operand, mlir::ValueRange outInits,
    bool fastMath = false);

// Transform ops (inside @__transform_main, with %root in scope) that tile the tagged generics
// of rank `rank` by [1, ..., 1, vw], vectorize them to vector<vw> with masks and unroll the
// innermost loop `unroll` times; `suffix` keeps SSA names unique across fragments. With
// `chunk` > 0 (rank >= 2) an outer loop walks column blocks of `chunk` elements first, so that
// row-broadcast operands (a bias of a whole row) stay in L1 while the rows stream past. With
// `rows` > 1 (rank >= 2) each tile spans that many rows, vectorized as vector<rows x vw>: an
// operand broadcast along the rows is loaded once per tile and shared by all of them;
// `rowExtent` (the size of that dimension) tells whether the last row tile is partial, and then
// it is peeled off.
std::string elementwiseScheduleFragment(int rank, int64_t vw, int64_t unroll, const std::string& suffix,
                                        int64_t chunk = 0, int64_t rows = 1, int64_t rowExtent = 1);

}  // namespace tessera::codegen
