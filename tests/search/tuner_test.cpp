// Tests the tuning loop on real replayed measurements: trial and time budgets, resume from
// previous results without re-measuring them, failed and wrong-result candidates never win (also
// when a candidate turns flaky at re-measurement), the named callbacks, the default config, and
// the interleaved re-measurement of the top-k.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>

#include "search/space_ops.h"
#include "search/tuner.h"
#include "test_tables.h"

using namespace tessera;
using namespace tessera::search;
using namespace tessera::measure;

namespace {

// Real table answers, adjusted by `tweak` (which may turn results into failures) and optionally
// slowed down; re-measurement answers go through `tweakRemeasure`.
class TableMeasurer : public Measurer {
 public:
  explicit TableMeasurer(const ReplayTable& t) : inner_(makeReplayMeasurer(t)) {}
  std::function<void(TrialResult&)> tweak, tweakRemeasure;
  double sleepPerConfig = 0;
  bool sleepInRemeasure = false;  // the final re-measurement costs its rounds too
  std::vector<std::vector<ir::Config>> remeasured;
  size_t measured = 0;

  Expected<std::vector<TrialResult>> measure(const std::vector<ir::Config>& batch) override {
    if (sleepPerConfig > 0) std::this_thread::sleep_for(std::chrono::duration<double>(sleepPerConfig * double(batch.size())));
    measured += batch.size();
    auto out = *inner_->measure(batch);
    if (tweak)
      for (auto& r : out) tweak(r);
    return out;
  }
  Expected<std::vector<TrialResult>> remeasure(const std::vector<ir::Config>& configs, int rounds) override {
    if (sleepPerConfig > 0 && sleepInRemeasure)
      std::this_thread::sleep_for(std::chrono::duration<double>(sleepPerConfig * double(configs.size() * size_t(rounds))));
    remeasured.push_back(configs);
    auto out = *inner_->remeasure(configs, rounds);
    for (auto& r : out) {
      if (tweak) tweak(r);
      if (tweakRemeasure) tweakRemeasure(r);
    }
    return out;
  }

 private:
  std::unique_ptr<ReplayMeasurer> inner_;
};

struct Fixture {
  const ReplayTable& t = tables::mi250x();
  std::unique_ptr<costmodel::FeatureExtractor> features = costmodel::makeKnobFeatures(t.space);
  std::unique_ptr<costmodel::CostModel> model = costmodel::makeXGBoostModel({});
  TuneSettings settings;
  Fixture() { settings.search.seed = 9; }
  TuneResult run(Measurer& m, const TuneCallbacks& cb = {}, const std::vector<TrialResult>& previous = {}) {
    auto s = makeStrategy(settings.search, t.space, model.get(), features.get());
    EXPECT_TRUE(s.ok());
    return tune(t.space, m, **s, model.get(), features.get(), settings, cb, previous).value();
  }
};

double bestOf(const std::vector<TrialResult>& rs) {
  double b = 0;
  for (const auto& r : rs)
    if (r.ok()) b = std::max(b, r.throughput);
  return b;
}

}  // namespace

TEST(Tuner, RespectsTheTrialBudgetAndMeasuresTheDefaultFirst) {
  Fixture f;
  f.settings.trials = 37;
  TableMeasurer m(f.t);
  TuneResult r = f.run(m);
  EXPECT_EQ(r.trials.size(), 37u);
  EXPECT_EQ(m.measured, 37u);
  ASSERT_TRUE(r.defaultConfig);
  EXPECT_EQ(r.trials.front().config, f.t.space.defaults());
  ASSERT_TRUE(r.best);
  EXPECT_TRUE(r.best->ok());
}

TEST(Tuner, RespectsTheTimeBudget) {
  Fixture f;
  f.settings.trials = 100000;
  f.settings.timeBudgetSec = 0.3;
  f.settings.topK = 0;
  TableMeasurer m(f.t);
  m.sleepPerConfig = 0.005;  // a 16-config batch takes 80 ms
  auto t0 = std::chrono::steady_clock::now();
  TuneResult r = f.run(m);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GT(r.trials.size(), 16u);
  EXPECT_LT(r.trials.size(), 200u);
  EXPECT_LT(s, 1.5) << "the loop must stop once the budget is spent (at most one batch late)";
}

// The budget is the whole tune's, its final re-measurement of the top-k included (`--time-budget
// 10` took 14 s): batches of 0.48 s and a re-measurement of 6 configs x 3 rounds (0.54 s) in 2 s.
// Starting batches while time is left would end at about 1.92 + 0.54 = 2.46 s.
TEST(Tuner, TheTimeBudgetCoversTheFinalRemeasurement) {
  Fixture f;
  f.settings.trials = 100000;
  f.settings.timeBudgetSec = 2.0;
  f.settings.topK = 5;
  TableMeasurer m(f.t);
  m.sleepPerConfig = 0.03;
  m.sleepInRemeasure = true;
  auto t0 = std::chrono::steady_clock::now();
  TuneResult r = f.run(m);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GT(r.trials.size(), 16u) << "more than one batch fits";
  EXPECT_FALSE(m.remeasured.empty());
  EXPECT_LT(s, 2.25) << "the re-measurement ran past the budget";
}

TEST(Tuner, ResumeContinuesInsteadOfRestarting) {
  Fixture f;
  f.settings.trials = 48;
  f.settings.topK = 0;
  TableMeasurer first(f.t);
  TuneResult a = f.run(first);
  ASSERT_EQ(a.trials.size(), 48u);

  // A new process: fresh model and strategy, the store's results as `previous`.
  Fixture g;
  g.settings.trials = 48;
  g.settings.topK = 0;
  g.settings.search.seed = 9;  // same seed: a restart would measure the same configs again
  TableMeasurer second(g.t);
  TuneResult b = g.run(second, {}, a.trials);
  EXPECT_EQ(b.trials.size(), 48u);
  EXPECT_EQ(second.measured, 48u) << "previous results are not measured again";
  std::set<std::string> before;
  for (const auto& r : a.trials) before.insert(configKey(r.config));
  for (const auto& r : b.trials) EXPECT_FALSE(before.count(configKey(r.config))) << "re-measured " << r.config.str();
  EXPECT_EQ(g.model->numSamples(), 96u) << "the model learnt from previous and new results";
  ASSERT_TRUE(b.best);
  EXPECT_GE(b.best->throughput, bestOf(a.trials)) << "the best previous result stays a candidate";
}

TEST(Tuner, FailedAndWrongResultsNeverWin) {
  Fixture f;
  f.settings.trials = 160;
  f.settings.topK = 5;
  TableMeasurer m(f.t);
  const double bar = 0.1 * f.t.bestThroughput();
  // Adversarial: the fast configs fail their correctness check or crash, and still carry a huge
  // throughput; a loop that ranked by throughput alone would pick one of them.
  int flip = 0;
  m.tweak = [&](TrialResult& r) {
    if (r.ok() && r.throughput >= bar) {
      r.status = (flip++ % 2) ? TrialStatus::WrongResult : TrialStatus::Crash;
      r.throughput *= 100;
    }
  };
  std::vector<TrialResult> progressBest;
  TuneCallbacks cb;
  cb.onTrial = [&](const TrialResult&, const TuneProgress& p) {
    if (p.best) progressBest.push_back(*p.best);
  };
  TuneResult r = f.run(m, cb);
  int failed = 0;
  for (const auto& t : r.trials) failed += !t.ok();
  ASSERT_GT(failed, 0) << "the search should have met some of the adversarial configs";
  ASSERT_TRUE(r.best);
  EXPECT_TRUE(r.best->ok());
  EXPECT_LT(r.best->throughput, bar);
  for (const auto& b : progressBest) EXPECT_TRUE(b.ok());
}

TEST(Tuner, AFlakyCandidateCannotWinAtRemeasurement) {
  Fixture f;
  f.settings.trials = 64;
  f.settings.topK = 4;
  TableMeasurer m(f.t);
  TuneResult probe = f.run(m);
  ASSERT_TRUE(probe.best);
  // Same run again, but the best config crashes when re-measured.
  Fixture g;
  g.settings = f.settings;
  TableMeasurer m2(g.t);
  const std::string flaky = configKey(probe.best->config);
  m2.tweakRemeasure = [&](TrialResult& r) {
    if (configKey(r.config) == flaky) {
      r.status = TrialStatus::Crash;
    }
  };
  TuneResult r = g.run(m2);
  ASSERT_TRUE(r.best);
  EXPECT_TRUE(r.best->ok());
  EXPECT_NE(configKey(r.best->config), flaky);
}

TEST(Tuner, CallsTheCallbacksAndRemeasuresTheTopK) {
  Fixture f;
  f.settings.trials = 50;
  f.settings.topK = 5;
  f.settings.remeasureRounds = 3;
  f.settings.search.batchSize = 16;
  TableMeasurer m(f.t);
  size_t committed = 0, commits = 0, trials = 0, remeasures = 0;
  int lastTrial = 0;
  TuneCallbacks cb;
  cb.commitRecords = [&](const std::vector<TrialResult>& rs) {
    committed += rs.size();
    ++commits;
  };
  cb.onTrial = [&](const TrialResult&, const TuneProgress& p) {
    ++trials;
    EXPECT_EQ(p.trial, lastTrial + 1);
    EXPECT_EQ(p.trials, 50);
    lastTrial = p.trial;
  };
  size_t remeasuredCount = 0;
  cb.afterRemeasure = [&](const std::vector<TrialResult>& rs) {
    ++remeasures;
    remeasuredCount = rs.size();
  };
  TuneResult r = f.run(m, cb);
  EXPECT_EQ(committed, 50u);
  EXPECT_EQ(commits, 1u + 4u) << "the default, then batches of 16, 16, 16, 1";
  EXPECT_EQ(trials, 50u);
  EXPECT_EQ(remeasures, 1u);
  ASSERT_EQ(m.remeasured.size(), 1u);
  // The re-measured configs are the five best trials, plus the default when it is not among them.
  std::vector<TrialResult> sorted = r.trials;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const TrialResult& a, const TrialResult& b) { return a.throughput > b.throughput; });
  std::set<std::string> top, got;
  for (int i = 0; i < 5; ++i) top.insert(configKey(sorted[size_t(i)].config));
  top.insert(configKey(f.t.space.defaults()));
  for (const auto& c : m.remeasured[0]) got.insert(configKey(c));
  EXPECT_EQ(top, got);
  EXPECT_EQ(r.remeasured.size(), top.size());
  EXPECT_EQ(remeasuredCount, top.size());
  ASSERT_TRUE(r.best);
  EXPECT_EQ(r.best->throughput, sorted[0].throughput);
}

TEST(Tuner, EarlyStopEndsTheSearch) {
  Fixture f;
  f.settings.trials = 1000;
  f.settings.topK = 0;
  f.settings.search.batchSize = 16;
  TableMeasurer m(f.t);
  TuneCallbacks cb;
  cb.shouldStop = [](const TuneProgress& p) { return p.trial >= 20; };
  TuneResult r = f.run(m, cb);
  EXPECT_EQ(r.trials.size(), 33u) << "the default and two batches of 16";
}

// The search's best trials can be lucky samples: when the re-measurement finds them slower than
// the default, the default wins and the reported speedup over it is 1, never below.
TEST(Tuner, TheDefaultIsRemeasuredWithTheTopKAndCannotLose) {
  Fixture f;
  f.settings.trials = 48;
  f.settings.topK = 4;
  TableMeasurer m(f.t);
  const std::string def = configKey(f.t.space.defaults());
  m.tweakRemeasure = [&](TrialResult& r) {
    if (configKey(r.config) != def) {
      r.throughput *= 0.01;  // every other config turns out 100x slower when measured again
      r.samples.median_us *= 100;
    }
  };
  TuneResult r = f.run(m);
  ASSERT_TRUE(r.best && r.defaultConfig);
  EXPECT_EQ(configKey(r.best->config), def);
  ASSERT_EQ(m.remeasured.size(), 1u);
  EXPECT_EQ(m.remeasured[0].size(), 5u) << "the top 4 and the default";
  EXPECT_EQ(r.defaultConfig->samples.median_us, r.best->samples.median_us) << "the default's same-run median";
}
