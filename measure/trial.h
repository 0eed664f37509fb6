// Owns the result of measuring one candidate config: a status category (never an exception),
// the timing summary, throughput and the correctness check; and the key a config is known by.
#pragma once

#include <optional>
#include <string>

#include "ir/schedule.h"
#include "support/stats.h"
#include "support/status.h"

namespace tessera::measure {

// Candidate outcomes; names are the record statuses of ARCHITECTURE.md §2.9.
enum class TrialStatus { Ok, InvalidConfig, CompileError, Timeout, Crash, WrongResult };
const char* trialStatusName(TrialStatus s);
TrialStatus trialStatusFromError(ErrorCode c);

// Canonical key of a config (sorted knob=value list): what strategies deduplicate by and what
// the estimate and replay backends look results up by.
std::string configKey(const ir::Config& c);

struct TrialResult {
  ir::Config config;
  TrialStatus status = TrialStatus::Ok;
  std::string message;       // why it failed
  SampleSummary samples;     // ok only
  // Higher is better: GFLOP/s (compute-bound), GB/s (bandwidth-bound) or, for replayed generic
  // spaces, 1000 / time_ms. 0 for failures.
  double throughput = 0;
  double gflops = 0, gbps = 0, peakFraction = 0;
  double maxAbsErr = 0, maxRelErr = 0;
  double compileSeconds = 0, runSeconds = 0;
  // An emulated device's time (a CPU running the GPU kernel's emulated form): labelled, never
  // stored as a device measurement.
  bool emulated = false;
  // A prediction of the analytic model (ARCHITECTURE.md §2.7), not a measurement: `samples` hold the
  // predicted time; stored with status `estimated`, the model's name and the bound it predicts.
  bool estimated = false;
  std::string estimator, bound;
  // Measured on another machine (a worker, measure/remote_measurer.h): that machine's provenance,
  // which its record carries instead of this process's, and whether the shared service already
  // stored the record (the worker posted it), so that a tuner never pushes it a second time.
  struct Origin {
    std::string host, user, cpuModel, tesseraVersion, llvmVersion, cudaVersion, createdAt;
    bool shared = false;
    // Who measured it (trust.h: the worker's token is its identity) and where the result came
    // from (the job and its item), for the spot check of the submitter (POST /v1/jobs/{id}/check).
    std::string writer, workerId, jobId;
    int64_t item = 0;
  };
  std::optional<Origin> origin;
  bool ok() const { return status == TrialStatus::Ok; }
};

}  // namespace tessera::measure
