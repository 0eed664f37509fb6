// Owns kernel verification: structure, types, index bounds and the family contract.
#pragma once

#include "ir/ir.h"
#include "support/status.h"

namespace tessera::ir {

// Returns a VerifyError naming the first problem (shape mismatch, zero or negative dims, unknown
// op, dtype clash, heads not divisible by heads_kv, out-of-bounds index, ...).
Status verify(const Kernel& k);

// Structural hash of a kernel (sha256 hex of its anonymized canonical print): the workload key.
// Invariant to the kernel, tensor and variable names.
std::string workloadHash(const Kernel& k);

}  // namespace tessera::ir
