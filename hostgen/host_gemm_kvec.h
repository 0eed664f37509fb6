// Owns the interface of the host GEMM for few columns (schedule kvec, host_gemm_kvec.cpp): its
// builder and the most columns it takes, which the search space reads without MLIR headers.
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

// Past a couple of vectors' width the N-vector kernels waste no lanes and need no reductions.
inline constexpr int64_t kKvecMaxN = 16;

// `func.func @kernel` of C = A·B (+ epilogue) with vectors along K: A stored M x K, N <= kKvecMaxN.
Expected<HostPayload> buildHostGemmKvec(mlir::MLIRContext* ctx, const ir::Kernel& k, const HostGemmConfig& c,
                                        const TargetDesc& t);

}  // namespace tessera::codegen
