// Owns the measurement protocol shared by every executing backend (ARCHITECTURE.md §2.7): candidates
// compiled in a thread pool; each run in a forked child with a watchdog (isolation.h); seeded
// inputs and outputs poisoned before every run (KernelIO); the outputs checked against the
// reference before the time counts; statistics (n, median, p20, p80) and throughput; the
// interleaved re-measurement of the top-k. What differs between the host and a GPU (how to build
// a candidate, how the child runs and times it) is an ExecutionBackend.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "ir/reference.h"
#include "measure/measurer.h"
#include "support/status.h"
#include "targets/host_runner.h"
#include "targets/kernel_io.h"
#include "targets/target_desc.h"

namespace tessera::measure {

// A built candidate (a host JIT, a GPU binary, ...).
class Executable {
 public:
  virtual ~Executable() = default;
  double compileSeconds = 0;
  ir::Config config;  // what was built
};

class ExecutionBackend {
 public:
  virtual ~ExecutionBackend() = default;
  // Compiles `c`; called from the build pool, concurrently. A categorized failure (invalid
  // config, compile error, resources over the target's limits) is an Error.
  virtual Expected<std::shared_ptr<const Executable>> build(const ir::Config& c) = 0;
  // Runs in the measuring child process: one checked run writing io's outputs, then the timed
  // runs per `m`; samples in microseconds. A runtime failure is an Error (reported as a crash).
  virtual Expected<std::vector<double>> run(const Executable& e, KernelIO& io, const MeasureOptions& m) = 0;
  // Timings of an emulation: labelled, never stored as device measurements.
  virtual bool emulated() const { return false; }
};

// Where the measuring children are forked from. Helper: from a measuring helper process
// (measure_helper.h), so that any process can tune, one that has initialised a GPU driver
// included. Fork: from this process (its children cannot use a GPU driver this process has
// initialised): the helper's own side, and tests that inject faults into the child in-process.
enum class Isolation { Helper, Fork };

struct MeasureSettings {
  Isolation isolation = Isolation::Helper;
  std::string helperPath;     // the helper executable ("": findMeasureHelper's places)
  int buildThreads = 2;       // parallel compiles (runs are always sequential: clean timings)
  double timeoutSec = 20;     // per candidate, wall clock, child process
  MeasureOptions measure{.minTimeSec = 0.05, .minRuns = 3, .maxRuns = 2000, .warmup = 1, .flushCache = false};
  uint64_t seed = 1;          // inputs
  ir::RefOptions ref;
};

std::unique_ptr<Measurer> makeProtocolMeasurer(const ir::Kernel& k, const TargetDesc& t,
                                               std::unique_ptr<ExecutionBackend> backend, const MeasureSettings& s);

// The host backend: compileHost in the pool, the raw entry point called in the child.
std::unique_ptr<ExecutionBackend> makeHostBackend(const ir::Kernel& k, const TargetDesc& t);
// makeProtocolMeasurer with the host backend (in the measuring helper unless s.isolation is Fork).
std::unique_ptr<Measurer> makeHostMeasurer(const ir::Kernel& k, const TargetDesc& t, const MeasureSettings& s);

}  // namespace tessera::measure
