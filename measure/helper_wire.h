// Owns the wire form between a tuning process and its measuring helper (measure_helper.h): the
// target description and trial results as JSON, and length-prefixed JSON frames on a pipe.
#pragma once

#include <nlohmann/json.hpp>

#include "measure/trial.h"
#include "support/status.h"
#include "targets/target_desc.h"

namespace tessera::measure {

// One frame: a 4-byte little-endian length, then that many bytes of JSON.
inline constexpr size_t kMaxFrameBytes = size_t(256) << 20;

nlohmann::json targetToJson(const TargetDesc& t);
Expected<TargetDesc> targetFromJson(const nlohmann::json& j);
nlohmann::json trialToJson(const TrialResult& r);
Expected<TrialResult> trialFromJson(const nlohmann::json& j);

Status writeFrame(int fd, const nlohmann::json& j);
Expected<nlohmann::json> readFrame(int fd);

}  // namespace tessera::measure
