// Tests the paired check of a prior (PriorSettings::paired, an option): in a batch on trial the
// cold search's own picks go beside the prior's, and the prior is disowned once they do better.
// On the real MI250X table.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "costmodel/features.h"
#include "search/strategy.h"
#include "test_tables.h"

using namespace tessera;
using namespace tessera::search;
using namespace tessera::measure;
using tables::oracleOf;
using tables::timesOf;

namespace {
struct PairedSearch {
  std::unique_ptr<costmodel::FeatureExtractor> features;
  std::unique_ptr<costmodel::CostModel> model;
  std::unique_ptr<SearchStrategy> strategy;
};
// An evolutionary search of `t` (seed 5, greedy picks only, no niche slot) whose model has no
// data yet; `paired`: PriorSettings::paired.
PairedSearch startPaired(const ReplayTable& t, const Prior* prior, int paired) {
  SearchSettings ss;
  ss.seed = 5;
  ss.eps = 0;
  ss.niche.knobs = 0;
  ss.prior.paired = paired;
  PairedSearch s{costmodel::makeKnobFeatures(t.space), costmodel::makeXGBoostModel({.seed = ss.seed}), nullptr};
  auto strat = makeStrategy(ss, t.space, s.model.get(), s.features.get(), prior);
  EXPECT_TRUE(strat.ok());
  if (strat.ok()) s.strategy = std::move(*strat);
  return s;
}
// Measures `configs` on `t`; the model and the search learn the results.
void learnPaired(PairedSearch& s, const ReplayTable& t, const std::vector<ir::Config>& configs) {
  auto results = *makeReplayMeasurer(t)->measure(configs);
  std::vector<costmodel::Sample> samples;
  for (const auto& r : results) samples.push_back({s.features->extract(r.config), r.throughput, 0});
  EXPECT_TRUE(s.model->update(samples).ok());
  s.strategy->observe(results);
}
}  // namespace

// A prior right inside a corner and wrong about the rest: it takes the table's slowest tenth for
// its best and orders that tenth as the measurements do, so its picks agree with the measurements
// of them (the rank check keeps its say: the W7800 convolution file's plateau, docs/
// search-notes.md). Paired, one pick of its first batch is the cold search's first uniform draw;
// that pick beats the prior's three, the prior is disowned, and the second batch goes where the
// model leads, not to the corner. The controls: unpaired, the blend keeps the second batch in the
// corner; a right prior (the table's times), paired, keeps its say (its three picks beat the cold
// one) and its second batch lies in the table's fastest 5 %, as unpaired.
TEST(Strategy, APairedCheckDisownsAPriorWhosePicksLoseToTheColdOnes) {
  const ReplayTable& t = tables::mi250x();
  const auto timeOf = timesOf(t);
  std::vector<double> times;
  for (const auto& [k, us] : timeOf) times.push_back(us);
  std::sort(times.begin(), times.end());
  ASSERT_GE(times.size(), 1000u);
  const double fast = times[times.size() / 20], slow = times[times.size() * 9 / 10];
  auto count = [&](const std::vector<ir::Config>& cs, auto in) {
    return int(std::count_if(cs.begin(), cs.end(), [&](const ir::Config& c) { return in(timeOf.at(configKey(c))); }));
  };
  auto inCorner = [slow](double us) { return us >= slow; };
  auto inFastest = [fast](double us) { return us <= fast; };
  Prior corner = oracleOf(timeOf, [slow](const ir::Config&, double us) { return us >= slow ? 1e-3 * us : 1e3 + us; });
  Prior oracle = oracleOf(timeOf);

  // The cold search's first pick (no prior: uniform draws).
  PairedSearch cold = startPaired(t, nullptr, 0);
  const std::vector<ir::Config> coldFirst = cold.strategy->propose(4);
  ASSERT_EQ(coldFirst.size(), 4u);

  // Both batches of a search led by `prior`.
  auto twoBatches = [&](const Prior& prior, int paired) {
    PairedSearch s = startPaired(t, &prior, paired);
    std::vector<ir::Config> first = s.strategy->propose(4);
    learnPaired(s, t, first);
    return std::pair{first, s.strategy->propose(4)};
  };
  const auto [pairedFirst, pairedSecond] = twoBatches(corner, 1);
  const auto [unpairedFirst, unpairedSecond] = twoBatches(corner, 0);
  const auto [rightFirst, rightSecond] = twoBatches(oracle, 1);
  const auto [rightUnpairedFirst, rightUnpairedSecond] = twoBatches(oracle, 0);
  std::printf("second batch in the corner prior's slowest tenth: %d of 4 paired, %d unpaired; "
              "a right prior's in the fastest 5 %%: %d paired, %d unpaired\n",
              count(pairedSecond, inCorner), count(unpairedSecond, inCorner), count(rightSecond, inFastest),
              count(rightUnpairedSecond, inFastest));

  // The first batch on trial: the prior's three, then the cold search's very first pick, faster.
  ASSERT_EQ(pairedFirst.size(), 4u);
  EXPECT_EQ(count(std::vector<ir::Config>(pairedFirst.begin(), pairedFirst.begin() + 3), inCorner), 3);
  EXPECT_EQ(configKey(pairedFirst[3]), configKey(coldFirst[0]));
  EXPECT_LT(timeOf.at(configKey(pairedFirst[3])), slow);
  EXPECT_EQ(count(unpairedFirst, inCorner), 4);
  // Disowned: the second batch leaves the corner; unpaired (the control) it stays there.
  EXPECT_LE(count(pairedSecond, inCorner), 1);
  EXPECT_GE(count(unpairedSecond, inCorner), 3);
  // A right prior keeps its say.
  EXPECT_EQ(count(std::vector<ir::Config>(rightFirst.begin(), rightFirst.begin() + 3), inFastest), 3);
  EXPECT_GE(count(rightSecond, inFastest), 3);
  EXPECT_GE(count(rightUnpairedSecond, inFastest), 3);
}
