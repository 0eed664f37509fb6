// Owns measurement on the host (ARCHITECTURE.md §2.7): warm-up, repeats until a minimum time and count,
// optional cache flush, and the n/median/p20/p80 summary; plus the full "run one kernel" flow:
// seeded inputs, one checked run against the reference evaluator, then timing.
#pragma once

#include <functional>
#include <vector>

#include "ir/buffer.h"
#include "ir/ir.h"
#include "ir/reference.h"
#include "support/stats.h"
#include "support/status.h"
#include "targets/target_desc.h"

namespace tessera {

struct MeasureOptions {
  double minTimeSec = 0.05;  // keep repeating until this much time is measured...
  int minRuns = 5;           // ...and at least this many samples
  int maxRuns = 10000;
  int warmup = 1;
  bool flushCache = false;   // stream through 2x the LLC between runs (cold-cache timing)
};

// The timing loop every backend runs (ARCHITECTURE.md §2.7): `o.warmup` untimed calls, then timed calls
// (each preceded by `beforeEach`, untimed: a cache flush, input packing) until at least
// o.minTimeSec of samples and o.minRuns samples, at most o.maxRuns. `timedCall` returns the time
// of one call in microseconds (wall clock on the host; device events on a GPU).
std::vector<double> sampleRuns(const std::function<double()>& timedCall, const MeasureOptions& o,
                               const std::function<void()>& beforeEach = {});
// Wall-clock time of fn() in microseconds.
double wallMicros(const std::function<void()>& fn);
// sampleRuns of fn (with the host LLC flush when o.flushCache), summarized.
SampleSummary timeCalls(const std::function<void()>& fn, const MeasureOptions& o);
// Streams through twice the host's LLC (cold-cache timing).
void flushHostCaches();

// A host kernel entry point with the HostExecutable calling convention: buffers for the
// kernel's inputs then outputs.
using KernelCall = std::function<void(void* const* buffers)>;

struct HostRunResult {
  SampleSummary samples;
  ir::Comparison check;
  double gflops = 0;        // compute-bound families
  double gbps = 0;          // bytes of inputs + outputs per run / time
  double peakFraction = 0;  // of the FMA peak or the copy bandwidth of the threads the kernel ran on
  int64_t refRowStride = 1; // > 1 when only sampled rows were checked (large problems)
};

struct HostRunOptions {
  uint64_t seed = 1;
  int threads = 1;  // threads the kernel runs on (its THREADS knob): the peak it is measured against
  MeasureOptions measure;
  ir::RefOptions ref;
  bool check = true;
};

// Runs `call` once on seeded inputs with poisoned outputs (KernelIO), checks every output against
// the reference (a mismatch is a WrongResult error carrying the comparison), then measures.
Expected<HostRunResult> runOnHost(const ir::Kernel& k, const KernelCall& call, const TargetDesc& t,
                                  const HostRunOptions& o);

}  // namespace tessera
