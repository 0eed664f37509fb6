// Owns the real replay tables the search tests run on (Kernel Tuner files in bench/data/), loaded
// once per test binary, and small wrappers that turn a real table into an adversarial measurer.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>

#include "measure/replay.h"
#include "search/import.h"
#include "search/strategy.h"

namespace tessera::search::tables {

inline std::string dataFile(const std::string& name) { return std::string(TESSERA_TEST_DATA_DIR) + "/" + name; }

// The MI250X convolution table (4362 configs, all measured ok), imported once.
inline const std::vector<cache::Record>& mi250xRecords() {
  static const std::vector<cache::Record> recs = [] {
    auto r = importKernelTuner(dataFile("convolution_MI250X.json.gz"), "MI250X");
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? *r : std::vector<cache::Record>{};
  }();
  return recs;
}

inline const measure::ReplayTable& mi250x() {
  static const measure::ReplayTable t = [] {
    auto r = measure::tableFromRecords("convolution_MI250X", mi250xRecords());
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : measure::ReplayTable{};
  }();
  return t;
}

// The table's measured times by config, as a prior that knows them (an oracle).
inline std::map<std::string, double> timesOf(const measure::ReplayTable& t) {
  std::map<std::string, double> timeOf;
  for (const auto& r : t.results)
    if (r.ok()) timeOf[measure::configKey(r.config)] = r.samples.median_us;
  return timeOf;
}
// A prior from those times (nullopt for a config the table lacks); `warp` bends each one. It
// refers to `timeOf`, which must outlive it.
inline Prior oracleOf(const std::map<std::string, double>& timeOf,
                      std::function<double(const ir::Config&, double)> warp = nullptr) {
  return [&timeOf, warp](const ir::Config& c) -> std::optional<double> {
    auto it = timeOf.find(measure::configKey(c));
    if (it == timeOf.end()) return std::nullopt;
    return warp ? warp(c, it->second) : it->second;
  };
}

// A slice of the real table (records whose config satisfies `keep`): small spaces for exhaustive
// search and fast loops.
inline measure::ReplayTable slice(const std::string& name, const std::function<bool(const ir::Config&)>& keep) {
  std::vector<cache::Record> recs;
  for (const auto& r : mi250xRecords()) {
    auto c = ir::Config::fromJson(r.config);
    if (c.ok() && keep(*c)) recs.push_back(r);
  }
  auto t = measure::tableFromRecords(name, recs);
  EXPECT_TRUE(t.ok());
  return t.ok() ? *t : measure::ReplayTable{};
}

inline int64_t knob(const ir::Config& c, const char* k) { return std::get<int64_t>(c.values.at(k)); }

}  // namespace tessera::search::tables
