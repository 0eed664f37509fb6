// Tests Tessera's analytic GPU model against Tessera's own kernels measured on a GPU
// (bench/data/device_*.jsonl.gz: attention, GEMM and bias+GELU spaces an H200 and an H100 measured
// with bench/gpu/device_tables.sh): the records name a product the GPU table knows, the kernel text of
// each key parses back, and the model of that product (session::tuneProblem's prior, what `tessera
// tune` on that device starts from: session::recordsPrior) orders the measured configs like the device (Spearman >= 0.7)
// with a config within 80 % of the measured best in its top 10; at least 90 % of the configs the
// device ran are ones the model describes. A reversed order fails the same
// check (the negative control).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <numeric>

#include "measure/replay.h"
#include "search/import.h"
#include "search/transfer.h"
#include "session/tune_session.h"
#include "targets/gpu_skus.h"

using namespace tessera;

namespace {

struct Measured {
  std::string name;
  std::vector<double> us, estimate;  // per ok config the model describes: measured and estimated time
  size_t ran = 0;                    // ok configs
};

// Every device table bundled (device_*.jsonl.gz), in name order.
std::vector<std::string> deviceFiles() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(TESSERA_BENCH_DATA_DIR)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("device_", 0) == 0 && n.size() > 9 && n.substr(n.size() - 9) == ".jsonl.gz") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The tables of one device file (one per key), with the model of the product that measured them.
void addTables(const std::string& file, std::vector<Measured>& out) {
  auto recs = search::readRecordFile(file);
  EXPECT_TRUE(recs.ok()) << file << ": " << (recs.ok() ? "" : recs.error().message);
  if (!recs.ok()) return;
  for (const auto& rs : measure::groupByKey(*recs)) {
    const cache::HardKey& key = rs.front().key;
    const std::string name = rs.front().provenance.cpu_model + ": " + key.family + " " + key.layout + " " + key.target;
    EXPECT_TRUE(std::any_of(rs.begin(), rs.end(), [](const cache::Record& r) { return !r.kernel_ir.empty(); })) << name;
    // The device's own row of the GPU table is the product the model describes.
    EXPECT_TRUE(gpuForDeviceName(rs.front().provenance.cpu_model).has_value()) << rs.front().provenance.cpu_model;
    search::Prior prior = session::recordsPrior(rs);
    EXPECT_TRUE(bool(prior)) << name;
    if (!prior) continue;
    Measured m;
    m.name = name;
    for (const auto& r : rs) {
      if (r.status != cache::RecordStatus::Ok) continue;
      auto c = ir::Config::fromJson(r.config);
      EXPECT_TRUE(c.ok()) << r.config;
      if (!c.ok()) continue;
      ++m.ran;
      auto e = prior(*c);
      if (!e) continue;  // a config the model takes for one that cannot launch (counted below)
      m.us.push_back(r.median_us);
      m.estimate.push_back(*e);
    }
    out.push_back(std::move(m));
  }
}

// The spaces: keys whose tables hold at least 40 ok configs (a sample or a brute force of the
// space). A device run's goal rows add keys of a few configs each (bench/gpu/rows_to_table.py):
// too few to rank, read and checked for parsing above, left out here.
std::vector<Measured> load() {
  std::vector<Measured> all, out;
  const auto files = deviceFiles();
  EXPECT_GE(files.size(), 2u);  // the H100's and the H200's
  for (const auto& file : files) addTables(file, all);
  for (auto& m : all)
    if (m.ran >= 40) out.push_back(std::move(m));
  return out;
}

// The best measured time over the best among the estimate's `k` fastest configs.
double topK(const std::vector<double>& us, const std::vector<double>& estimate, size_t k) {
  std::vector<size_t> order(us.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return estimate[a] < estimate[b]; });
  double best = *std::min_element(us.begin(), us.end()), inTop = 1e300;
  for (size_t i = 0; i < std::min(k, order.size()); ++i) inTop = std::min(inTop, us[order[i]]);
  return best / inTop;
}

}  // namespace

TEST(DeviceTables, TheModelOfTheMeasuringGpuRanksItsSpaces) {
  auto tables = load();
  ASSERT_GE(tables.size(), 8u);
  for (const auto& m : tables) {
    ASSERT_GE(m.us.size(), 40u) << m.name;
    // A few configs the device ran are ones the model holds unlaunchable (its resource rules are
    // stricter than the device's: 1024-thread elementwise blocks, single-stage mma tiles).
    EXPECT_GE(double(m.us.size()), 0.9 * double(m.ran)) << m.name;
    std::printf("%s: %zu of %zu configs described, Spearman %.2f, best of the top 10 %.2f of the best\n", m.name.c_str(),
                m.us.size(), m.ran, search::rankCorrelation(m.estimate, m.us), topK(m.us, m.estimate, 10));
    EXPECT_GE(search::rankCorrelation(m.estimate, m.us), 0.7) << m.name;
    EXPECT_GE(topK(m.us, m.estimate, 10), 0.8) << m.name;
  }
}

TEST(DeviceTables, AReversedOrderFailsTheSameCheck) {
  auto tables = load();
  ASSERT_GE(tables.size(), 8u);
  int fails = 0;
  for (const auto& m : tables) {
    std::vector<double> reversed(m.estimate.size());
    for (size_t i = 0; i < reversed.size(); ++i) reversed[i] = -m.estimate[i];
    fails += search::rankCorrelation(reversed, m.us) < 0.7 && topK(m.us, reversed, 10) < 0.8;
  }
  EXPECT_EQ(fails, int(tables.size()));
}
