// Owns the Measurer interface: turns candidate configs into TrialResults. Backends: host (compiled
// and run in isolated child processes), device (a GPU, or its emulation, through a DeviceApi),
// estimate (the analytic model, nothing executed) and replay (recorded measurements, so strategies
// can be compared deterministically). The executing ones share one protocol (protocol_measurer.h).
#pragma once

#include <vector>

#include "measure/trial.h"
#include "support/status.h"

namespace tessera::measure {

class Measurer {
 public:
  virtual ~Measurer() = default;
  // Results in input order. A candidate's failure is its result's status; an error is the backend
  // itself gone (the remote measurer: no live worker, a job every worker refused, the service
  // unreachable), after which the tune cannot go on. No exception crosses this interface.
  virtual Expected<std::vector<TrialResult>> measure(const std::vector<ir::Config>& batch) = 0;
  // Re-measures `configs` in `rounds` interleaved rounds (a, b, c, a, b, c, ...) and returns one
  // combined result per config: the final ranking of the top-k, robust to drift.
  virtual Expected<std::vector<TrialResult>> remeasure(const std::vector<ir::Config>& configs, int rounds) = 0;
};

}  // namespace tessera::measure
