// Owns the real replay tables the search tests run on (Kernel Tuner files in bench/data/), loaded
// once per test binary, and small wrappers that turn a real table into an adversarial measurer.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>

#include "measure/replay.h"
#include "search/import.h"

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
