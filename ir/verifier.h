// Owns kernel verification: structure, types, index bounds and the family contract.
#pragma once

#include "ir/ir.h"
#include "support/status.h"

namespace tessera::ir {

// Limits on each stage's expression, checked without recursion before anything walks it
// recursively: the tree depth and the node count with shared subtrees counted every time they
// are reached (what a recursive pass visits). Larger than the parser's (ir/text.h) because
// builders wrap parsed expressions in casts, broadcasts and the GEMM accumulator.
inline constexpr int kMaxVerifiedExprDepth = 512;
inline constexpr int64_t kMaxVerifiedExprNodes = int64_t(1) << 20;

// Returns a VerifyError naming the first problem (shape mismatch, zero or negative dims, unknown
// op, dtype clash, heads not divisible by heads_kv, out-of-bounds index, ...).
Status verify(const Kernel& k);

// Structural hash of a kernel (sha256 hex of its anonymized canonical print): the workload key.
// Invariant to the kernel, tensor and variable names.
std::string workloadHash(const Kernel& k);

}  // namespace tessera::ir
