// Owns the job wire form of measurement settings and results.
#include "measure/job_wire.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "measure/records.h"

namespace tessera::measure {

using nlohmann::json;

std::string measureSettingsJson(const MeasureSettings& s) {
  return json{{"timeout_s", s.timeoutSec},
              {"min_time_s", s.measure.minTimeSec},
              {"min_runs", s.measure.minRuns},
              {"max_runs", s.measure.maxRuns},
              {"warmup", s.measure.warmup},
              {"flush_cache", s.measure.flushCache},
              {"seed", s.seed},
              {"ref_max_work", s.ref.maxWork},
              {"build_threads", s.buildThreads}}
      .dump();
}

Expected<MeasureSettings> measureSettingsFromJson(const std::string& text, const MeasureSettings& defaults) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return makeError(ErrorCode::InvalidArgument, "job settings: expected an object");
  MeasureSettings s = defaults;
  auto num = [&](const char* name, double lo, double hi, double& out) -> Status {
    auto it = j.find(name);
    if (it == j.end()) return {};
    if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < lo || it->get<double>() > hi)
      return makeError(ErrorCode::InvalidArgument, std::string("job settings: ") + name + " out of range");
    out = it->get<double>();
    return {};
  };
  auto integer = [&](const char* name, int lo, int hi, int& out) -> Status {
    double v = out;
    TESSERA_TRY(num(name, lo, hi, v));
    out = int(v);
    return {};
  };
  TESSERA_TRY(num("timeout_s", 0.1, 3600, s.timeoutSec));
  TESSERA_TRY(num("min_time_s", 0, 60, s.measure.minTimeSec));
  TESSERA_TRY(integer("min_runs", 1, 100000, s.measure.minRuns));
  TESSERA_TRY(integer("max_runs", 1, 100000, s.measure.maxRuns));
  TESSERA_TRY(integer("warmup", 0, 1000, s.measure.warmup));
  TESSERA_TRY(integer("build_threads", 1, 64, s.buildThreads));
  TESSERA_TRY(num("ref_max_work", 1, 1e13, s.ref.maxWork));
  if (auto it = j.find("flush_cache"); it != j.end()) {
    if (!it->is_boolean()) return makeError(ErrorCode::InvalidArgument, "job settings: flush_cache must be a boolean");
    s.measure.flushCache = it->get<bool>();
  }
  if (auto it = j.find("seed"); it != j.end()) {
    if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<int64_t>() >= 0))
      return makeError(ErrorCode::InvalidArgument, "job settings: seed must be an integer >= 0");
    s.seed = it->get<uint64_t>();
  }
  if (s.measure.maxRuns < s.measure.minRuns) s.measure.maxRuns = s.measure.minRuns;
  return s;
}

TrialResult trialFromRecord(const cache::Record& r, const std::string& message, bool computeBound, bool shared) {
  TrialResult t;
  auto cfg = ir::Config::fromJson(r.config);
  if (cfg.ok()) t.config = *cfg;
  t.status = trialStatusOf(r.status).value_or(TrialStatus::Crash);
  t.message = message;
  copyMeasurement(r, t);
  t.throughput = t.ok() ? (computeBound ? r.gflops : r.gbps) : 0;
  TrialResult::Origin o;
  o.host = r.provenance.host;
  o.user = r.provenance.user;
  o.cpuModel = r.provenance.cpu_model;
  o.tesseraVersion = r.provenance.tessera_version;
  o.llvmVersion = r.provenance.llvm_version;
  o.cudaVersion = r.provenance.cuda_version;
  o.createdAt = r.provenance.created_at;
  o.shared = shared;
  t.origin = o;
  return t;
}

}  // namespace tessera::measure
