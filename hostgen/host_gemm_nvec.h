// Owns the interface of the host GEMM for few rows (schedule nvec, host_gemm_nvec.cpp): its
// builder and the most rows it takes, which the search space reads without MLIR headers.
#pragma once

#include <cstdint>

#include "ir/ir.h"
#include "ir/schedule.h"
#include "support/status.h"
#include "targets/kernel_configs.h"
#include "targets/target_desc.h"

namespace mlir {
class MLIRContext;
}

namespace tessera::codegen {

struct HostPayload;  // hostgen/host_strategies.h

// The most rows nvec takes: up to 16 every row of a column strip is a register tile or two and B
// streams from memory once (its default there); up to 64 it is the small-matrix kernel for
// operands that fit the L1 (no packing at all); past it the packed kernels' A panels pay for
// themselves.
inline constexpr int64_t kNvecMaxM = 64;
// Past kNvecMaxM rows nvec still takes a B of few columns (at most kNvecNarrowN): its strips are
// one or two, so A streams once or twice, and its masked last vector wastes less than a packed
// kernel's edge panel of NR columns (72^3 on one Sapphire Rapids core: nvec 1.10x OpenBLAS,
// blis 0.70-0.75x; 1000x100x1000 1.06x against 0.82x; 200^3 0.97x against 1.07x).
inline constexpr int64_t kNvecNarrowN = 192;

// Whether schedule nvec takes an M x N GEMM (B stored K x N is the kernel's other condition).
inline bool nvecTakes(int64_t m, int64_t n) { return m <= kNvecMaxM || n <= kNvecNarrowN; }

// `func.func @kernel` of C = A·B (+ epilogue) with nvecTakes(M, N): vectors along N, B stored K x N
// read in place, A (either layout) broadcast in place.
Expected<HostPayload> buildHostGemmNvec(mlir::MLIRContext* ctx, const ir::Kernel& k, const HostGemmConfig& c,
                                        const TargetDesc& t);

}  // namespace tessera::codegen
