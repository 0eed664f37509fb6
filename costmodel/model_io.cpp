// Owns label normalization and the model file helpers shared by the cost models.
#include "costmodel/model_io.h"

#include <fstream>
#include <map>
#include <sstream>

namespace tessera::costmodel {

std::vector<float> normalizedLabels(const std::vector<Sample>& samples) {
  std::map<int, double> best;
  for (const auto& s : samples) best[s.group] = std::max(best[s.group], s.throughput);
  std::vector<float> out;
  out.reserve(samples.size());
  for (const auto& s : samples) {
    double b = best[s.group];
    out.push_back(b > 0 && s.throughput > 0 ? float(s.throughput / b) : 0.f);
  }
  return out;
}

nlohmann::json samplesToJson(const std::vector<Sample>& samples) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& s : samples) arr.push_back({{"f", s.features}, {"y", s.throughput}, {"g", s.group}});
  return arr;
}

Expected<std::vector<Sample>> samplesFromJson(const nlohmann::json& j) {
  if (!j.is_array()) return makeError(ErrorCode::InvalidArgument, "model file: samples must be an array");
  std::vector<Sample> out;
  for (const auto& e : j) {
    if (!e.is_object() || !e.contains("f") || !e.contains("y") || !e.contains("g") || !e["f"].is_array() ||
        !e["y"].is_number() || !e["g"].is_number_integer())
      return makeError(ErrorCode::InvalidArgument, "model file: malformed sample");
    Sample s;
    for (const auto& v : e["f"]) {
      if (!v.is_number()) return makeError(ErrorCode::InvalidArgument, "model file: non-numeric feature");
      s.features.push_back(v.get<float>());
    }
    s.throughput = e["y"].get<double>();
    s.group = e["g"].get<int>();
    out.push_back(std::move(s));
  }
  return out;
}

Status writeTextFile(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return makeError(ErrorCode::IOError, "cannot write " + path);
  f << text;
  f.close();
  if (!f) return makeError(ErrorCode::IOError, "cannot write " + path);
  return {};
}

Expected<std::string> readTextFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return makeError(ErrorCode::IOError, "cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace tessera::costmodel
