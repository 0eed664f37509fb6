// Owns `tessera tune gemm --m LO..HI` (or `--m A,B,C`; elementwise `--rows`, attention `--seq`):
// the range flags, the per-point tunes, the dispatch rule fitted from them, its table on stdout
// and the rule file `tessera bundle --dispatch` reads.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "cli/kernel_flags.h"
#include "session/range_tune.h"

namespace tessera::cli {

// The range-only flags of `tune`.
struct RangeFlags {
  std::string dispatchOut;  // the rule file ("" : <kernel>.dispatch.json)
  int maxKernels = 16;
  int points = 14;          // training points at most (a range; a list tunes all of its values)
  int fixedUpTo = 16;       // GEMM: M up to which a fixed few-row kernel may answer one size
};
void addRangeTuneOptions(CLI::App* tune, RangeFlags* f);

// Whether `tune` got a range or list for --m, --rows or --seq (then it calls tuneRangeCommand).
bool wantsRangeTune(const KernelFlags& k);
// The flag that gives the kernel's range: --m (GEMM), --rows (elementwise), --seq (attention).
const char* rangeFlagOf(const KernelFlags& k);
// The range and the kernel at each point from `kernel`, the rest of the request as `tune` filled
// it from its flags (session/range_tune.h); prints the rule (or its file with `json`) and writes
// the rule file (flags.dispatchOut).
void tuneRangeCommand(const KernelFlags& kernel, const RangeFlags& flags, session::RangeTuneRequest rq, bool json);

}  // namespace tessera::cli
