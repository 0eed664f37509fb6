// Owns measuring candidates on the host (design.md §5): candidates are compiled in a thread
// pool, then each runs in a forked child process with a wall-clock timeout (a crash or hang costs
// only that candidate), its outputs are checked against the reference evaluator (computed once
// per run) before its time counts, and every outcome is a TrialStatus.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "ir/ir.h"
#include "ir/reference.h"
#include "search/measurer.h"
#include "targets/host_runner.h"
#include "targets/target_desc.h"

namespace tessera::search {

struct HostMeasureSettings {
  int buildThreads = 2;       // parallel compiles (runs are always sequential: clean timings)
  double timeoutSec = 20;     // per candidate, wall clock, child process
  MeasureOptions measure{.minTimeSec = 0.05, .minRuns = 3, .maxRuns = 2000, .warmup = 1, .flushCache = false};
  uint64_t seed = 1;          // inputs
  ir::RefOptions ref;
};

std::unique_ptr<Measurer> makeHostMeasurer(const ir::Kernel& k, const TargetDesc& t, const HostMeasureSettings& s);

// The isolation mechanism on its own (used by the measurer; tested with deliberately crashing
// and hanging callables): runs `call` on `buffers` in a forked child — once, then timed per
// `measure` — with a timeout. Outputs written by the child are visible to the caller when the
// output buffers live in shared memory (SharedBuffers).
struct IsolatedRun {
  TrialStatus status = TrialStatus::Ok;
  std::string message;
  std::vector<double> samples_us;
};
IsolatedRun runIsolated(const std::function<void()>& call, const MeasureOptions& measure, double timeoutSec);

// Kernel buffers for isolated runs: inputs in private memory (the child reads copy-on-write),
// outputs in MAP_SHARED memory so the parent sees what the child wrote.
class SharedBuffers {
 public:
  SharedBuffers(const ir::Kernel& k, uint64_t seed);
  ~SharedBuffers();
  SharedBuffers(const SharedBuffers&) = delete;
  SharedBuffers& operator=(const SharedBuffers&) = delete;
  void* const* pointers() const { return ptrs_.data(); }
  std::vector<const ir::Buffer*> inputs() const;
  // Output views as Buffers (copies) for the comparison.
  std::vector<ir::Buffer> outputs() const;
  void poisonOutputs();  // 0x7f bytes: a kernel that skips elements cannot pass on stale data

 private:
  const ir::Kernel& k_;
  std::vector<ir::Buffer> ins_;
  std::vector<std::pair<void*, size_t>> outs_;
  std::vector<void*> ptrs_;
};

}  // namespace tessera::search
