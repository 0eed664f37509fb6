// Owns running one candidate in a forked child process with a wall-clock watchdog (ARCHITECTURE.md §2.7):
// a crash, a hang, or a GPU context poisoned by an illegal address costs only that candidate.
// The child reports its timing samples (or the error its runtime gave) through a shared page;
// outputs it writes reach the parent when they live in shared memory (KernelIO::Outputs::Shared).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "measure/trial.h"
#include "support/status.h"
#include "targets/host_runner.h"

namespace tessera::measure {

struct IsolatedRun {
  TrialStatus status = TrialStatus::Ok;
  std::string message;
  std::vector<double> samples_us;
};

// Runs `child` in a forked child with a timeout. Ok: the samples it returned. Its Error becomes
// a Crash with the error's message (a runtime failure such as an illegal address); death by a
// signal is a Crash, overrunning `timeoutSec` a Timeout (the child is killed). SIGINT is ignored
// in the child (the tuner decides what Ctrl-C means) and the child dies with the parent.
IsolatedRun runIsolatedChild(const std::function<Expected<std::vector<double>>()>& child, double timeoutSec);

// The host form: call() once (the checked run; it doubles as the warm-up), then timed wall-clock
// calls per `measure`.
IsolatedRun runIsolated(const std::function<void()>& call, const MeasureOptions& measure, double timeoutSec);

namespace detail {
// Seconds on the monotonic clock (the measuring files time children and batches with it).
inline double nowSec() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace detail

}  // namespace tessera::measure
