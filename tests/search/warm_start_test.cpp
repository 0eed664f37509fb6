// Tests the cost model's warm start from stored records of other workloads: which records are
// taken (same family and target, not the run's own key, nearest shapes first, capped with the
// best kept), how they are grouped, and that a model trained on two shapes of a synthetic GEMM
// landscape ranks a third, unseen shape well before measuring anything there.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "../common/ranking.h"
#include "measure/records.h"
#include "search/space_ops.h"
#include "search/warm_start.h"

using namespace tessera;
using namespace tessera::search;
using namespace tessera::measure;

namespace {

ir::Space gemmLikeSpace() {
  ir::Space s;
  s.family = "gemm";
  auto ints = [](std::initializer_list<int64_t> v) { return std::vector<ir::KnobValue>(v.begin(), v.end()); };
  s.knobs = {{"schedule", {std::string("plain"), std::string("packed")}, std::string("plain"), ""},
             {"MR", ints({1, 2, 4, 6, 8, 12, 14}), int64_t(8), ""},
             {"NR", ints({16, 32, 64}), int64_t(32), ""},
             {"KC", ints({16, 64, 256, 512}), int64_t(256), ""},
             {"KU", ints({1, 2, 4}), int64_t(1), ""}};
  return s;
}


cache::HardKey key(std::vector<int64_t> shape, std::string family = "gemm", std::string target = "host") {
  cache::HardKey k;
  k.family = std::move(family);
  k.workload = std::string(64, 'a');
  k.workload[0] = char('a' + shape[0] % 6);
  k.shape = std::move(shape);
  k.dtype = "f32";
  k.layout = "row";
  k.target = std::move(target);
  k.arch = "x86-64-v4";
  k.units = 2;
  return k;
}

int64_t geti(const ir::Config& c, const char* k) { return std::get<int64_t>(c.values.at(k)); }

// A made-up CPU GEMM landscape driven by what the derived features describe: register-tile
// intensity, spills past 32 vector registers, padding waste of the shape, the L1 footprint of a
// KC panel, packing paying off on large problems only.
double truth(const std::vector<int64_t>& shape, const ir::Config& c) {
  int64_t M = shape[0], N = shape[1], K = shape[2];
  int64_t MR = geti(c, "MR"), NR = geti(c, "NR"), KC = geti(c, "KC"), KU = geti(c, "KU");
  int64_t nv = (NR + 15) / 16;
  double regs = double(MR * nv + nv + 1);
  double intensity = double(MR * NR) / double(MR + NR);
  double pad = double((M + MR - 1) / MR * MR) * double((N + NR - 1) / NR * NR) / double(M * N);
  double kc = double(std::min(KC, K));
  double l1 = kc * double(NR + MR) * 4 / double(32 << 10);
  bool packed = std::get<std::string>(c.values.at("schedule")) == "packed";
  double g = 100 * std::min(intensity / 8, 1.0) * (regs > 32 ? 0.3 : 1.0) / pad * (l1 > 1 ? 0.6 : 1.0);
  g *= packed ? (double(M * N * K) > 1e7 ? 1.15 : 0.8) : 1.0;
  g *= KU == 1 ? 0.95 : 1.0;
  return g;
}

std::vector<cache::Record> recordsOf(const cache::HardKey& k, const ir::Space& space, size_t limit = 100000) {
  std::vector<cache::Record> out;
  auto all = enumerateLegal(space);
  for (const auto& c : *all) {
    if (out.size() >= limit) break;
    cache::Record r;
    r.key = k;
    r.config = c.toJson();
    r.key_id = cache::keyIdOf(k);
    r.median_us = 1e3 / truth(k.shape, c);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

TEST(WarmStart, TakesOtherWorkloadsOfTheFamilyOnTheTarget) {
  ir::Space space = gemmLikeSpace();
  cache::HardKey self = key({200, 96, 300});
  std::vector<cache::Record> recs;
  for (const auto& k : {self, key({128, 128, 128}), key({4096, 4096, 4096}), key({128, 128, 128}, "attention"),
                        key({128, 128, 128}, "gemm", "sm_90")}) {
    auto r = recordsOf(k, space, 40);
    recs.insert(recs.end(), r.begin(), r.end());
  }
  cache::Record failed = recs[50];  // a compile error of 128^3: a sample of throughput 0
  failed.status = cache::RecordStatus::CompileError;
  failed.config = R"({"KC":16,"KU":1,"MR":14,"NR":64,"schedule":"plain"})";
  recs.push_back(failed);
  cache::Record estimate = recs[41];  // estimates are not measurements
  estimate.status = cache::RecordStatus::Estimated;
  estimate.config = R"({"KC":16,"KU":2,"MR":14,"NR":64,"schedule":"plain"})";
  recs.push_back(estimate);

  WarmStart w = warmStartSamples(recs, self, hostFeaturesForKeys(space, testutil::avx512Host()), {.maxWorkloads = 8, .maxRecordsPerWorkload = 1000});
  EXPECT_EQ(w.workloads, 2);  // 128^3 and 4096^3: not self, not attention, not sm_90
  EXPECT_EQ(w.samples.size(), 40u + 1 + 40);
  std::set<int> groups;
  for (const auto& s : w.samples) groups.insert(s.group);
  EXPECT_EQ(groups, (std::set<int>{1, 2}));  // group 0 is the run's own
  EXPECT_EQ(std::count_if(w.samples.begin(), w.samples.end(), [](const auto& s) { return s.throughput == 0; }), 1);
  // The nearest shape is group 1; with one workload allowed, only it is taken.
  WarmStart one = warmStartSamples(recs, self, hostFeaturesForKeys(space, testutil::avx512Host()), {.maxWorkloads = 1, .maxRecordsPerWorkload = 1000});
  EXPECT_EQ(one.workloads, 1);
  EXPECT_EQ(one.samples.size(), 41u);
  // Capped: the best quarter is always kept.
  WarmStart capped = warmStartSamples(recs, self, hostFeaturesForKeys(space, testutil::avx512Host()), {.maxWorkloads = 1, .maxRecordsPerWorkload = 12});
  ASSERT_EQ(capped.samples.size(), 12u);
  std::vector<double> all;
  for (const auto& s : one.samples) all.push_back(s.throughput);
  std::sort(all.rbegin(), all.rend());
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(capped.samples[i].throughput, all[i]);
  // Off, or nothing else stored: no samples.
  EXPECT_TRUE(warmStartSamples(recs, self, hostFeaturesForKeys(space, testutil::avx512Host()), {.maxWorkloads = 0}).samples.empty());
  EXPECT_TRUE(warmStartSamples(recordsOf(self, space, 10), self, hostFeaturesForKeys(space, testutil::avx512Host()), {}).samples.empty());
}

TEST(WarmStart, ModelRanksAnUnseenShapeFromOtherShapes) {
  ir::Space space = gemmLikeSpace();
  std::vector<cache::Record> stored;
  for (const auto& k : {key({128, 128, 128}), key({1024, 1024, 1024})}) {
    auto r = recordsOf(k, space);
    stored.insert(stored.end(), r.begin(), r.end());
  }
  cache::HardKey self = key({200, 96, 300});
  WarmStart w = warmStartSamples(stored, self, hostFeaturesForKeys(space, testutil::avx512Host()), {.maxRecordsPerWorkload = 200, .seed = 3});
  ASSERT_EQ(w.workloads, 2);
  auto model = costmodel::makeXGBoostModel({.seed = 1});
  ASSERT_TRUE(model->update(w.samples).ok());
  ASSERT_TRUE(model->trained());

  // Nothing of 200x96x300 was measured: rank its whole space.
  auto configs = *enumerateLegal(space);
  auto features = costmodel::makeHostFeatures(workloadOf(self), space, testutil::avx512Host());
  std::vector<std::vector<float>> f;
  std::vector<double> t;
  for (const auto& c : configs) {
    f.push_back(features->extract(c));
    t.push_back(truth(self.shape, c));
  }
  std::vector<double> p = model->predict(f);
  double rho = testutil::spearman(p, t);
  EXPECT_GT(rho, 0.6) << "rank correlation on the unseen shape";
  // The first batch a warm-started search would measure (its 8 best predictions) holds a config
  // within 10% of the best.
  std::vector<size_t> idx(configs.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
  double best = *std::max_element(t.begin(), t.end()), firstBatch = 0;
  for (size_t i = 0; i < 8; ++i) firstBatch = std::max(firstBatch, t[idx[i]]);
  EXPECT_GE(firstBatch, 0.9 * best);
}
