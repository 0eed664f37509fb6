// Owns what both cost models share behind the interface: per-workload label normalization and
// the model file format (a JSON object holding the settings, the training samples and, for
// XGBoost, the booster), so a loaded model can keep training where the saved one stopped.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "costmodel/cost_model.h"

namespace tessera::costmodel {

// Throughput divided by the best throughput of its group (failures and empty groups: 0), so
// workloads of different speed train one ranking.
std::vector<float> normalizedLabels(const std::vector<Sample>& samples);

nlohmann::json samplesToJson(const std::vector<Sample>& samples);
Expected<std::vector<Sample>> samplesFromJson(const nlohmann::json& j);

Status writeTextFile(const std::string& path, const std::string& text);
Expected<std::string> readTextFile(const std::string& path);

}  // namespace tessera::costmodel
