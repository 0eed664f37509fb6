// Owns what a measurement job carries between a tuner and a worker (store/jobs.h): the
// measurement settings (the same protocol as a local tune: ARCHITECTURE.md §2.7) as JSON, and a worker's
// record read back as the TrialResult the tuning loop expects.
#pragma once

#include <string>

#include "store/record.h"
#include "measure/protocol_measurer.h"
#include "measure/trial.h"

namespace tessera::measure {

std::string measureSettingsJson(const MeasureSettings& s);
// Bounds every field (a job comes from the network): timeout 0.1-3600 s, min_time 0-60 s, runs,
// warm-ups, build threads. Fields absent keep `defaults`.
Expected<MeasureSettings> measureSettingsFromJson(const std::string& json, const MeasureSettings& defaults);

// A worker's record of one candidate as a result of this tune: status, samples, throughput
// (GFLOP/s for compute-bound kernels, else GB/s, as the host measurer reports), the worker's
// message, and its provenance as the result's origin (`shared`: the service stored the record).
TrialResult trialFromRecord(const cache::Record& r, const std::string& message, bool computeBound, bool shared);

}  // namespace tessera::measure
