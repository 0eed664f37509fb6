// Tests the cost models: XGBoost learns a synthetic ranking (held-out rank correlation), a random
// model does not, per-workload normalization lets differently scaled groups train together, and
// save -> load gives identical predictions and keeps the training data, and a column held constant
// has no say.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <random>

#include "../common/ranking.h"
#include "costmodel/cost_model.h"

using namespace tessera::costmodel;
using tessera::testutil::kendall;
using tessera::testutil::spearman;

namespace {

// A smooth, non-linear "throughput" of 6 features, 3 of them irrelevant.
double truth(const std::vector<float>& x) {
  return std::exp(2 * x[0]) * (1.2 + std::sin(3 * x[1])) / (1 + 4 * (x[2] - 0.5) * (x[2] - 0.5));
}

std::vector<Sample> makeSamples(size_t n, uint64_t seed, int group = 0, double scale = 1) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<Sample> out;
  for (size_t i = 0; i < n; ++i) {
    Sample s;
    for (int d = 0; d < 6; ++d) s.features.push_back(u(rng));
    s.throughput = scale * truth(s.features);
    s.group = group;
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<std::vector<float>> featuresOf(const std::vector<Sample>& s) {
  std::vector<std::vector<float>> f;
  for (const auto& x : s) f.push_back(x.features);
  return f;
}

std::vector<double> truthOf(const std::vector<Sample>& s) {
  std::vector<double> t;
  for (const auto& x : s) t.push_back(x.throughput);
  return t;
}

}  // namespace

TEST(CostModel, XGBoostLearnsSyntheticRanking) {
  auto model = makeXGBoostModel({});
  EXPECT_FALSE(model->trained());
  ASSERT_TRUE(model->update(makeSamples(300, 1)).ok());
  EXPECT_TRUE(model->trained());
  EXPECT_EQ(model->numSamples(), 300u);
  auto test = makeSamples(300, 2);
  auto pred = model->predict(featuresOf(test));
  double rho = spearman(pred, truthOf(test)), tau = kendall(pred, truthOf(test));
  EXPECT_GT(rho, 0.7) << "held-out Spearman";
  EXPECT_GT(tau, 0.5) << "held-out Kendall";
}

TEST(CostModel, RegressionObjectiveLearnsToo) {
  ModelSettings s;
  s.objective = "reg:squarederror";
  s.relevanceLevels = 0;
  auto model = makeXGBoostModel(s);
  ASSERT_TRUE(model->update(makeSamples(300, 3)).ok());
  auto test = makeSamples(300, 4);
  EXPECT_GT(spearman(model->predict(featuresOf(test)), truthOf(test)), 0.7);
}

TEST(CostModel, RandomModelDoesNotLearn) {
  auto model = makeRandomModel(7);
  ASSERT_TRUE(model->update(makeSamples(300, 1)).ok());
  EXPECT_FALSE(model->trained());
  auto test = makeSamples(300, 2);
  EXPECT_LT(std::fabs(spearman(model->predict(featuresOf(test)), truthOf(test))), 0.2);
}

TEST(CostModel, GroupsOfDifferentScaleTrainOneRanking) {
  // Group 1 is 1000x faster: without per-group normalization its samples would dominate and the
  // slow group's order would be noise.
  auto train = makeSamples(200, 5, 0, 1.0);
  auto fast = makeSamples(200, 6, 1, 1000.0);
  train.insert(train.end(), fast.begin(), fast.end());
  auto model = makeXGBoostModel({});
  ASSERT_TRUE(model->update(train).ok());
  auto test = makeSamples(300, 8, 0, 1.0);
  EXPECT_GT(spearman(model->predict(featuresOf(test)), truthOf(test)), 0.7);
}

TEST(CostModel, UntrainedPredictsRandomlyUntilOutcomesDiffer) {
  auto model = makeXGBoostModel({});
  auto same = makeSamples(20, 9);
  for (auto& s : same) s.throughput = 5;  // no ranking to learn yet
  ASSERT_TRUE(model->update(same).ok());
  EXPECT_FALSE(model->trained());
  auto p = model->predict(featuresOf(same));
  ASSERT_EQ(p.size(), same.size());
  for (double v : p) EXPECT_TRUE(v >= 0 && v < 1);
}

// A column held at one value (holdConstant: the search's prior once its check disowns it) has no
// say: rows that differ only in it score alike, in a model retrained at once, while the other
// columns still rank; released, it counts again. The control: the same rows scored by the model
// before the hold differ (the column is the truth's strongest).
TEST(CostModel, AHeldColumnHasNoSay) {
  auto model = makeXGBoostModel({});
  ASSERT_TRUE(model->update(makeSamples(300, 14)).ok());
  auto test = makeSamples(300, 15);
  std::vector<std::vector<float>> other = featuresOf(test);
  for (auto& f : other) f[0] = 1 - f[0];  // only the held column differs
  auto differing = [&] {
    const auto a = model->predict(featuresOf(test)), b = model->predict(other);
    size_t n = 0;
    for (size_t i = 0; i < a.size(); ++i) n += a[i] != b[i];
    return n;
  };
  EXPECT_GT(differing(), 200u);
  model->holdConstant({0});
  EXPECT_EQ(differing(), 0u);
  EXPECT_GT(spearman(model->predict(featuresOf(test)), truthOf(test)), 0.1) << "the other columns still rank";
  // New samples train with the column held too.
  ASSERT_TRUE(model->update(makeSamples(50, 16)).ok());
  EXPECT_EQ(differing(), 0u);
  model->holdConstant({});
  EXPECT_GT(differing(), 200u);
}

TEST(CostModel, MismatchedFeatureLengthsAreRefused) {
  auto model = makeXGBoostModel({});
  ASSERT_TRUE(model->update(makeSamples(10, 1)).ok());
  std::vector<Sample> bad = {{{1.f, 2.f}, 3.0, 0}};
  EXPECT_FALSE(model->update(bad).ok());
}

TEST(CostModel, SaveLoadGivesIdenticalPredictions) {
  auto path = (std::filesystem::temp_directory_path() / ("tessera_model_" + std::to_string(::getpid()) + ".json")).string();
  auto model = makeXGBoostModel({});
  ASSERT_TRUE(model->update(makeSamples(200, 11)).ok());
  ASSERT_TRUE(model->save(path).ok());
  auto loaded = makeXGBoostModel({});
  ASSERT_TRUE(loaded->load(path).ok());
  EXPECT_TRUE(loaded->trained());
  EXPECT_EQ(loaded->numSamples(), 200u);
  auto test = featuresOf(makeSamples(100, 12));
  EXPECT_EQ(model->predict(test), loaded->predict(test));
  // The loaded model keeps its training data: more samples extend it instead of replacing it.
  ASSERT_TRUE(loaded->update(makeSamples(10, 13)).ok());
  EXPECT_EQ(loaded->numSamples(), 210u);
  // A random model's file is not an XGBoost model.
  ASSERT_TRUE(makeRandomModel(1)->save(path).ok());
  EXPECT_FALSE(makeXGBoostModel({})->load(path).ok());
  std::filesystem::remove(path);
  EXPECT_FALSE(makeXGBoostModel({})->load(path).ok());
}
