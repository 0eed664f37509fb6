// Owns the kernel table's rule (ARCHITECTURE.md §2.9): a store keeps, next to its records, the canonical IR
// text of each kernel it has records of, content-addressed by the key's workload hash, so that any
// winner (a fused elementwise chain, a GEMM with an epilogue) can be compiled again from the store.
// The text is the anonymized canonical print (ir::printKernel with anonymize), whose SHA-256 *is*
// the workload hash: a store checks that a text hashes to the workload it is filed under without
// parsing IR, and refuses any other.
#pragma once

#include <string>
#include <string_view>

#include "support/status.h"

namespace tessera::cache {

inline constexpr size_t kMaxKernelTextBytes = 64 * 1024;

// InvalidArgument with one line when `text` is empty, over kMaxKernelTextBytes, holds bytes other
// than printable ASCII, tab and newline, or does not hash to `workload` (64 lowercase hex digits).
Status checkKernelText(std::string_view workload, std::string_view text);

}  // namespace tessera::cache
