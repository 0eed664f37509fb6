// Owns which GEMM epilogues the explicit host GEMM schedules (blis, bf16dot, amx, kvec) apply in
// their write-back: the code generator refuses the others, the host GEMM space does not offer
// those schedules for them, and the cache service refuses records that name them, all by this rule.
#pragma once

#include "ir/families.h"

namespace tessera::ir {

// One output, reading other tensors along the rows or broadcast (no transposed or index-computed
// reads); a GEMM without an epilogue qualifies.
bool gemmEpilogueReadsRowwise(const GemmInfo& g);

}  // namespace tessera::ir
