// Owns the interface of the host GEMM for few rows (schedule nvec, host_gemm_nvec.cpp): its
// builder and the most rows it takes, which the search space reads without MLIR headers.
#pragma once

#include <cstdint>

#include "ir/ir.h"
#include "ir/schedule.h"
#include "support/status.h"
#include "targets/target_desc.h"

namespace mlir {
class MLIRContext;
}

namespace tessera::codegen {

struct HostPayload;  // codegen/host/host_strategies.h

// The most rows nvec takes: up to 16 every row of a column strip is a register tile or two and B
// streams from memory once (its default there); up to 64 it is the small-matrix kernel for
// operands that fit the L1 (no packing at all); past it the packed kernels' A panels pay for
// themselves.
inline constexpr int64_t kNvecMaxM = 64;

// `func.func @kernel` of C = A·B (+ epilogue) with M <= kNvecMaxM: vectors along N, B stored K x N
// read in place, A (either layout) broadcast in place.
Expected<HostPayload> buildHostGemmNvec(mlir::MLIRContext* ctx, const ir::Kernel& k, const ir::Config& c,
                                        const TargetDesc& t);

}  // namespace tessera::codegen
