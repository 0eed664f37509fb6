// Owns `tessera tune gemm --m LO..HI` (or `--m A,B,C`; elementwise `--rows`, attention `--seq`):
// the range flags, the per-point tunes, the dispatch rule fitted from them, its table on stdout
// and the rule file `tessera bundle --dispatch` reads.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "cli/kernel_flags.h"

namespace tessera::cli {

// The range-only flags of `tune`.
struct RangeFlags {
  std::string dispatchOut;  // the rule file ("" : <kernel>.dispatch.json)
  int maxKernels = 16;
  int points = 14;          // training points at most (a range; a list tunes all of its values)
};
void addRangeTuneOptions(CLI::App* tune, RangeFlags* f);

// What `tune` hands over when --m is a range or a list.
struct RangeTuneRequest {
  KernelFlags kernel;
  RangeFlags range;
  std::string target, db, spaceSpec;
  int trials = 200, batch = 8, topK = 5, threads = -1;
  uint64_t seed = 0;
  double timeBudget = 0, timeout = 20, minTime = 0.05;
  bool force = false, resume = false, json = false, noWarmStart = false;
  bool estimate = false;  // a GPU target: through the estimate (nothing runs)
  int64_t maxElements = 0;
};
// Whether `tune` got a range or list for --m, --rows or --seq (then it calls tuneRangeCommand).
bool wantsRangeTune(const KernelFlags& k);
// The flag that gives the kernel's range: --m (GEMM), --rows (elementwise), --seq (attention).
const char* rangeFlagOf(const KernelFlags& k);
void tuneRangeCommand(const RangeTuneRequest& r);

}  // namespace tessera::cli
