// Tests the strategies on a real replayed table: none proposes a config twice, exhaustive covers
// the whole legal space, a fixed seed replays the same trials in the same order, and the factory
// refuses what it cannot build.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "search/import.h"
#include "search/space_ops.h"
#include "search/strategy.h"
#include "search/tuner.h"
#include "test_tables.h"

using namespace tessera;
using namespace tessera::search;
using namespace tessera::measure;

namespace {

struct ReplayRun {
  std::vector<std::string> keys;  // measured configs in order
  TuneResult result;
};

ReplayRun replay(const ReplayTable& t, const std::string& strategy, uint64_t seed, int trials) {
  SearchSettings ss;
  ss.strategy = strategy;
  ss.seed = seed;
  auto features = costmodel::makeKnobFeatures(t.space);
  auto model = costmodel::makeXGBoostModel({.seed = seed});
  auto strat = makeStrategy(ss, t.space, model.get(), features.get());
  EXPECT_TRUE(strat.ok());
  auto m = makeReplayMeasurer(t);
  TuneSettings ts;
  ts.search = ss;
  ts.trials = trials;
  ts.topK = 0;
  ReplayRun run;
  run.result = tune(t.space, *m, **strat, model.get(), features.get(), ts, {}).value();
  for (const auto& r : run.result.trials) run.keys.push_back(configKey(r.config));
  return run;
}

}  // namespace

TEST(Strategy, NoneProposesAConfigTwice) {
  const auto& t = tables::mi250x();
  for (const char* s : {"random", "ga", "evolutionary"}) {
    ReplayRun run = replay(t, s, 11, 160);
    EXPECT_EQ(run.keys.size(), 160u) << s;
    EXPECT_EQ(std::set<std::string>(run.keys.begin(), run.keys.end()).size(), run.keys.size()) << s;
    for (const auto& r : run.result.trials) EXPECT_NE(r.status, TrialStatus::InvalidConfig) << s << " proposed an unrecorded config";
  }
}

TEST(Strategy, SmallSpacesRunDryWithoutRepeats) {
  // 21 configs: every strategy must measure each once and then stop, not loop or repeat.
  auto t = tables::slice("bx64_by1_tx1", [](const ir::Config& c) {
    return tables::knob(c, "block_size_x") == 64 && tables::knob(c, "block_size_y") <= 2 &&
           tables::knob(c, "tile_size_x") == 1 && tables::knob(c, "read_only") == 0;
  });
  ASSERT_GT(t.results.size(), 8u);
  for (const char* s : {"random", "ga", "evolutionary", "exhaustive"}) {
    ReplayRun run = replay(t, s, 3, 1000);
    EXPECT_EQ(run.keys.size(), t.results.size()) << s;
    EXPECT_EQ(std::set<std::string>(run.keys.begin(), run.keys.end()).size(), t.results.size()) << s;
    EXPECT_TRUE(run.result.exhausted) << s;
  }
}

TEST(Strategy, ExhaustiveCoversTheWholeLegalSpace) {
  auto t = tables::slice("bx64", [](const ir::Config& c) { return tables::knob(c, "block_size_x") == 64; });
  SearchSettings ss;
  ss.strategy = "exhaustive";
  auto strat = makeStrategy(ss, t.space, nullptr, nullptr);
  ASSERT_TRUE(strat.ok());
  std::set<std::string> seen;
  while (!(*strat)->exhausted()) {
    auto batch = (*strat)->propose(50);
    ASSERT_FALSE(batch.empty());
    for (const auto& c : batch) EXPECT_TRUE(seen.insert(configKey(c)).second);
  }
  EXPECT_TRUE((*strat)->propose(10).empty());
  std::set<std::string> legal;
  auto all = enumerateLegal(t.space);  // named: a temporary optional would dangle in the loop
  ASSERT_TRUE(all);
  for (const auto& c : *all) legal.insert(configKey(c));
  EXPECT_EQ(seen, legal);
}

TEST(Strategy, FixedSeedReplaysTheSameTrials) {
  const auto& t = tables::mi250x();
  for (const char* s : {"evolutionary", "ga", "random"}) {
    ReplayRun a = replay(t, s, 42, 96), b = replay(t, s, 42, 96), c = replay(t, s, 43, 96);
    EXPECT_EQ(a.keys, b.keys) << s;
    EXPECT_NE(a.keys, c.keys) << s << ": another seed should search differently";
  }
}

TEST(Strategy, FactoryRefusesWhatItCannotBuild) {
  const auto& t = tables::mi250x();
  SearchSettings ss;
  ss.strategy = "annealing";
  auto r = makeStrategy(ss, t.space, nullptr, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("evolutionary, ga, random, exhaustive"), std::string::npos);
  ss.strategy = "evolutionary";
  EXPECT_FALSE(makeStrategy(ss, t.space, nullptr, nullptr).ok()) << "needs a model";
  ss.strategy = "exhaustive";
  ir::Space huge;
  huge.family = "huge";
  std::vector<ir::KnobValue> d;
  for (int64_t i = 0; i < 100; ++i) d.push_back(i);
  for (const char* k : {"a", "b", "c", "d"}) huge.knobs.push_back({k, d, int64_t(0), ""});
  EXPECT_FALSE(makeStrategy(ss, huge, nullptr, nullptr).ok());
}

namespace {
// An evolutionary search whose model was trained on 64 (`trials`) random trials of `t` (greedy
// picks only).
struct Trained {
  std::unique_ptr<costmodel::FeatureExtractor> features;
  std::unique_ptr<costmodel::CostModel> model;
  std::unique_ptr<SearchStrategy> strategy;
};
// An evolutionary search of `t` whose model (seeded as the search) has no data yet.
Trained freshSearch(const SearchSettings& ss, const ReplayTable& t, const Prior* prior = nullptr) {
  Trained tr{costmodel::makeKnobFeatures(t.space), costmodel::makeXGBoostModel({.seed = ss.seed}), nullptr};
  auto strat = makeStrategy(ss, t.space, tr.model.get(), tr.features.get(), prior);
  EXPECT_TRUE(strat.ok());
  if (strat.ok()) tr.strategy = std::move(*strat);
  return tr;
}
// Measures `configs` on `t` and hands the results to the search and its model (which learns
// `coarse` of each config instead of its throughput when given).
void learn(Trained& tr, const ReplayTable& t, const std::vector<ir::Config>& configs,
           const std::function<double(const ir::Config&)>& coarse = nullptr) {
  auto results = *makeReplayMeasurer(t)->measure(configs);
  std::vector<costmodel::Sample> samples;
  for (const auto& r : results) samples.push_back({tr.features->extract(r.config), coarse ? coarse(r.config) : r.throughput, 0});
  EXPECT_TRUE(tr.model->update(samples).ok());
  tr.strategy->observe(results);
}
// `prior`: the search's prior (the first 64 trials are still uniform draws, as a model trained
// on the prior's top would only know that corner); `coarse`: the throughput the model learns
// instead of the measured one (a label of two values: it then scores configs in two classes).
Trained trainedSearch(SearchSettings ss, const ReplayTable& t, const Prior* prior = nullptr,
                      std::function<double(const ir::Config&)> coarse = nullptr, size_t trials = 64) {
  ss.seed = 5;
  ss.eps = 0;  // greedy picks only
  ss.niche.knobs = 0;  // the greedy picks alone (the niche's pick keeps no distance from them)
  Trained tr = freshSearch(ss, t, prior);
  std::vector<ir::Config> first;  // untrained: uniform draws
  if (prior) {
    SearchSettings uniform = ss;
    uniform.strategy = "random";
    auto r = makeStrategy(uniform, t.space, nullptr, nullptr);
    EXPECT_TRUE(r.ok());
    first = (*r)->propose(trials);
  } else {
    first = tr.strategy->propose(trials);
  }
  learn(tr, t, first, coarse);
  return tr;
}

// The greedy batch the evolutionary search proposes after a model trained on 64 random trials.
std::vector<ir::Config> greedyBatch(const ReplayTable& t, bool slots, double dominated = 0) {
  SearchSettings ss;
  ss.categorical.on = slots;
  ss.categorical.dominated = dominated;
  return trainedSearch(ss, t).strategy->propose(16);
}
}  // namespace

TEST(Strategy, CategoricalSlotsGiveEveryValueAGreedyPick) {
  // The MI250X table with a categorical knob that marks its slower half: the trained model
  // learns to avoid "slow", so plain greedy batches hold none; with the slots each holds one.
  std::vector<double> tp;
  for (const auto& r : tables::mi250x().results) tp.push_back(r.throughput);
  std::nth_element(tp.begin(), tp.begin() + tp.size() / 2, tp.end());
  const double median = tp[tp.size() / 2];
  std::vector<cache::Record> recs;
  for (cache::Record r : tables::mi250xRecords()) {
    auto c = ir::Config::fromJson(r.config);
    ASSERT_TRUE(c.ok());
    bool slow = r.status == cache::RecordStatus::Ok && 1e6 / r.median_us < median;
    c->set("family", std::string(slow ? "slow" : "fast"));
    r.config = c->toJson();
    recs.push_back(std::move(r));
  }
  auto t = tableFromRecords("family_split", recs);
  ASSERT_TRUE(t.ok());
  ASSERT_NE(t->space.find("family"), nullptr);
  ASSERT_TRUE(t->space.find("family")->isCategorical());
  auto slowPicks = [](const std::vector<ir::Config>& batch) {
    return std::count_if(batch.begin(), batch.end(), [](const ir::Config& c) {
      return std::get<std::string>(c.values.at("family")) == "slow";
    });
  };
  auto plain = greedyBatch(*t, false), slots = greedyBatch(*t, true);
  ASSERT_EQ(plain.size(), 16u);
  ASSERT_EQ(slots.size(), 16u);
  EXPECT_EQ(slowPicks(plain), 0);
  EXPECT_EQ(slowPicks(slots), 1);
}

namespace {
using tables::oracleOf;
using tables::timesOf;
// The time below which a `share` of the table's measured configs run.
double fastestShare(const std::map<std::string, double>& timeOf, double share) {
  std::vector<double> all;
  for (const auto& [k, v] : timeOf) all.push_back(v);
  std::sort(all.begin(), all.end());
  return all[size_t(double(all.size()) * share)];
}
// The MI250X table with a categorical `family`: every other config "dead", 100x slower.
Expected<ReplayTable> familyDeadTable() {
  std::vector<cache::Record> recs;
  size_t i = 0;
  for (cache::Record r : tables::mi250xRecords()) {
    auto c = ir::Config::fromJson(r.config);
    if (!c.ok()) return c.error();
    const bool dead = i++ % 2 == 0;
    c->set("family", std::string(dead ? "dead" : "live"));
    if (dead) r.median_us *= 100;
    r.config = c->toJson();
    recs.push_back(std::move(r));
  }
  return tableFromRecords("family_dead", recs);
}
long countFamily(const std::vector<ir::Config>& batch, const char* family) {
  return std::count_if(batch.begin(), batch.end(),
                       [&](const ir::Config& c) { return std::get<std::string>(c.values.at("family")) == family; });
}
}  // namespace

// A value whose configs all run at a hundredth of the others' speed (a SIMT kernel family next
// to tensor-core ones) keeps its slot while the rule is off, and loses it once two of its configs
// were measured under a quarter of the best (CategoricalSlots::dominated).
TEST(Strategy, ADominatedCategoricalValueLosesItsSlot) {
  auto t = familyDeadTable();
  ASSERT_TRUE(t.ok());
  auto kept = greedyBatch(*t, true, 0), dropped = greedyBatch(*t, true, 0.25);
  ASSERT_EQ(kept.size(), 16u);
  ASSERT_EQ(dropped.size(), 16u);
  EXPECT_EQ(countFamily(kept, "dead"), 1);
  EXPECT_EQ(countFamily(dropped, "dead"), 0);
}

// More values than a batch has slots (`tune --batch 1`, a GEMM space with four kernel families):
// the values take turns, and every other one-slot batch is the model's best. In domain order the
// first value held the only slot of every batch until it was dominated, and the model's best
// family was never measured (the H100's GEMM table, batch 1: 25 trials to 95 % instead of 8).
TEST(Strategy, ASmallBatchGivesTheValuesTurns) {
  std::vector<cache::Record> recs;
  size_t i = 0;
  const char* names[] = {"a", "b", "c", "d"};
  for (cache::Record r : tables::mi250xRecords()) {
    auto c = ir::Config::fromJson(r.config);
    ASSERT_TRUE(c.ok());
    const size_t f = i++ % 4;
    c->set("family", std::string(names[f]));
    r.median_us *= 1.0 + 2.0 * double(3 - f);  // "d" fastest, "a" 7x slower (none judged dominated here)
    r.config = c->toJson();
    recs.push_back(std::move(r));
  }
  auto t = tableFromRecords("family_four", recs);
  ASSERT_TRUE(t.ok());
  auto families = [&](int batch) {
    SearchSettings ss;
    ss.categorical.dominated = 0;
    Trained tr = trainedSearch(ss, *t);
    std::vector<std::string> out;
    for (int b = 0; b < 8 / batch; ++b)
      for (const auto& c : tr.strategy->propose(size_t(batch))) out.push_back(std::get<std::string>(c.values.at("family")));
    return out;
  };
  auto solo = families(1);
  ASSERT_EQ(solo.size(), 8u);
  std::string seq;
  for (const auto& f : solo) seq += f;
  EXPECT_EQ(std::set<std::string>(solo.begin(), solo.end()).size(), 4u) << seq;
  EXPECT_GE(std::count(solo.begin(), solo.end(), "d"), 4) << seq;
  // Control: a batch with room for every value holds each of them, as before.
  auto wide = families(4);
  ASSERT_EQ(wide.size(), 8u);
  for (const char* f : names) EXPECT_EQ(std::count(wide.begin(), wide.end(), f), 2) << f;
}

// With a prior (a GPU's analytic estimate; here an oracle built from the table itself), the
// evolutionary search's first batch — before its model has data — is the prior's best, except for
// the eps random share; without one it is uniform.
TEST(Strategy, EvolutionaryFirstBatchComesFromThePrior) {
  const ReplayTable& t = tables::mi250x();
  const auto timeOf = timesOf(t);
  Prior oracle = oracleOf(timeOf);
  SearchSettings ss;
  ss.seed = 3;
  ss.batchSize = 8;
  ss.eps = 0;
  auto features = costmodel::makeKnobFeatures(t.space);
  auto model = costmodel::makeXGBoostModel({.seed = 3});
  auto withPrior = makeStrategy(ss, t.space, model.get(), features.get(), &oracle);
  ASSERT_TRUE(withPrior.ok());
  auto batch = (*withPrior)->propose(8);
  ASSERT_EQ(batch.size(), 8u);
  // Every pick is among the 2 % fastest of the table (the prior scores a large legal sample).
  std::vector<double> all;
  for (const auto& [k, v] : timeOf) all.push_back(v);
  std::sort(all.begin(), all.end());
  const double fast = all[all.size() / 50];
  for (const auto& c : batch) EXPECT_LE(oracle(c).value_or(1e30), fast) << c.str();
  auto without = makeStrategy(ss, t.space, model.get(), features.get());
  ASSERT_TRUE(without.ok());
  int fastPicks = 0;
  for (const auto& c : (*without)->propose(8)) fastPicks += oracle(c).value_or(1e30) <= fast;
  EXPECT_LT(fastPicks, 8);
}

// A prior that cannot tell configs apart (equal predictions: they differ only in knobs the
// analytic model does not see) does not fill the first batch with look-alikes: every distinct
// prediction of the top comes first.
TEST(Strategy, PriorFirstBatchSkipsTiedPredictions) {
  const ReplayTable& t = tables::mi250x();
  const auto timeOf = timesOf(t);
  // The oracle blind to read_only and use_padding: their variants tie.
  Prior blind = [&](const ir::Config& c) -> std::optional<double> {
    ir::Config base = c;
    base.set("read_only", int64_t(0));
    base.set("use_padding", int64_t(0));
    auto it = timeOf.find(configKey(base));
    if (it == timeOf.end()) return std::nullopt;
    return it->second;
  };
  SearchSettings ss;
  ss.seed = 5;
  ss.batchSize = 4;
  ss.eps = 0;
  auto features = costmodel::makeKnobFeatures(t.space);
  auto model = costmodel::makeXGBoostModel({.seed = 5});
  auto s = makeStrategy(ss, t.space, model.get(), features.get(), &blind);
  ASSERT_TRUE(s.ok());
  auto batch = (*s)->propose(4);
  ASSERT_EQ(batch.size(), 4u);
  std::set<double> predictions;
  for (const auto& c : batch) predictions.insert(blind(c).value_or(-1));
  EXPECT_EQ(predictions.size(), 4u);
}

// Candidates the cost model scores alike (a model trained on few trials, or on equal ones, has a
// few distinct leaf values) go in the prior's order: with the prior an oracle and a model that
// learnt nothing, the greedy picks are the prior's best; without the tiebreak they are whatever
// the evolution met (the control).
TEST(Strategy, APriorOrdersWhatTheModelScoresAlike) {
  const ReplayTable& t = tables::mi250x();
  const auto timeOf = timesOf(t);
  Prior oracle = oracleOf(timeOf);
  const double fast = fastestShare(timeOf, 0.05);
  // The model learns one thing: whether a config stages in shared memory the way the best one does.
  const auto best = std::max_element(t.results.begin(), t.results.end(),
                                     [](const TrialResult& a, const TrialResult& b) { return a.throughput < b.throughput; });
  const int64_t staged = tables::knob(best->config, "use_shmem");
  auto coarse = [&](const ir::Config& c) { return tables::knob(c, "use_shmem") == staged ? 1.0 : 0.5; };
  auto fastPicks = [&](bool tiebreak) {
    SearchSettings ss;
    ss.prior.weight = 0;  // the tiebreak alone (the blend would order by the prior too)
    ss.prior.tiebreak = tiebreak;
    Trained tr = trainedSearch(ss, t, &oracle, coarse);
    auto batch = tr.strategy->propose(8);
    EXPECT_EQ(batch.size(), 8u);
    return std::count_if(batch.begin(), batch.end(), [&](const ir::Config& c) { return oracle(c).value_or(1e30) <= fast; });
  };
  const auto with = fastPicks(true), without = fastPicks(false);
  std::printf("greedy picks among the table's fastest 5 %%: %d of 8 with the prior's tiebreak, %d without\n", int(with), int(without));
  EXPECT_EQ(with, 8);
  EXPECT_LE(without, 4);
}

// Configs the prior takes for unlaunchable (the analytic model's register or shared-memory
// estimate over the limit: the compiler would refuse them, a trial spent for nothing) go after
// every config it can estimate, however well the cost model scores them. Here the prior refuses
// the table's fastest fifth, which a model trained on 64 trials favours (the control).
TEST(Strategy, APriorsUnlaunchableConfigsComeLast) {
  const ReplayTable& t = tables::mi250x();
  const auto timeOf = timesOf(t);
  const double fast = fastestShare(timeOf, 0.2);
  Prior refusesTheFast = [&](const ir::Config& c) -> std::optional<double> {
    auto it = timeOf.find(configKey(c));
    if (it == timeOf.end() || it->second <= fast) return std::nullopt;
    return 1.0;  // no order among the rest: the cost model's
  };
  auto refused = [&](bool fitsFirst) {
    SearchSettings ss;
    ss.prior.weight = 0;  // the rule alone (the blend ranks what the prior refuses last too)
    ss.prior.checkZ = -1;  // unchecked: measured, the fast configs it refuses contradict it
    ss.prior.fitsFirst = fitsFirst;
    Trained tr = trainedSearch(ss, t, &refusesTheFast);
    auto batch = tr.strategy->propose(8);
    EXPECT_EQ(batch.size(), 8u);
    return std::count_if(batch.begin(), batch.end(), [&](const ir::Config& c) { return !refusesTheFast(c); });
  };
  const auto last = refused(true), mixed = refused(false);
  std::printf("greedy picks the prior refuses: %d of 8 with them last, %d without\n", int(last), int(mixed));
  EXPECT_EQ(last, 0);
  EXPECT_GE(mixed, 4);
}

namespace {
// Of a greedy batch of 8, after a model trained on `trials` uniform trials of `t` and with `prior`
// weighing `weight` trials (PriorSettings::weight), the picks among the table's fastest 5 %.
long fastPicksWeighing(const ReplayTable& t, const Prior& prior, size_t trials, double weight, double check = 1.282) {
  const auto timeOf = timesOf(t);
  const double fast = fastestShare(timeOf, 0.05);
  SearchSettings ss;
  ss.prior.weight = weight;
  ss.prior.checkZ = check;
  Trained tr = trainedSearch(ss, t, &prior, nullptr, trials);
  auto batch = tr.strategy->propose(8);
  EXPECT_EQ(batch.size(), 8u);
  return std::count_if(batch.begin(), batch.end(), [&](const ir::Config& c) {
    auto it = timeOf.find(configKey(c));
    return it != timeOf.end() && it->second <= fast;
  });
}
}  // namespace

// A model trained on a few trials ranks most of the space by extrapolation; the prior, counted as
// priorWeight trials against them, then leads: with an oracle prior and a model of 16 trials, the
// greedy picks fall in the table's fastest 5 % (without the blend, the prior only breaking the
// model's ties, none do: the control).
TEST(Strategy, AModelOfFewTrialsLeansOnThePrior) {
  const ReplayTable& t = tables::mi250x();
  const auto timeOf = timesOf(t);
  Prior oracle = oracleOf(timeOf);
  const auto with = fastPicksWeighing(t, oracle, 16, 8), without = fastPicksWeighing(t, oracle, 16, 0);
  std::printf("greedy picks among the fastest 5 %% after 16 trials: %d of 8 with the prior weighing 8 trials, %d without\n",
              int(with), int(without));
  EXPECT_GE(with, 6);
  EXPECT_LE(without, 2);
}

// The prior's weight fades as trials come in: a prior that inverts the table (the slowest configs
// predicted fastest) no longer steers a model trained on 256 trials, whose picks then fall in the
// fastest 5 % as without a prior; a weight that does not fade keeps them on the prior's (wrong)
// top (the control). Both unchecked (priorCheckZ < 0): checked, even that weight has no say once
// the measurements contradict the prior.
TEST(Strategy, ThePriorsWeightFadesAsTrialsComeIn) {
  const ReplayTable& t = tables::mi250x();
  const auto timeOf = timesOf(t);
  Prior inverted = oracleOf(timeOf, [](const ir::Config&, double us) { return 1.0 / us; });
  const auto fading = fastPicksWeighing(t, inverted, 256, 8, -1), stuck = fastPicksWeighing(t, inverted, 256, 1e9, -1);
  const auto checked = fastPicksWeighing(t, inverted, 256, 1e9);
  std::printf("greedy picks among the fastest 5 %% after 256 trials, the prior inverted: %d of 8 as it weighs 8 trials, "
              "%d as it weighs 1e9\n", int(fading), int(stuck));
  EXPECT_GE(fading, 4);
  EXPECT_EQ(stuck, 0);
  EXPECT_GE(checked, 4);
}

namespace {
// Median trials to 95 % of the best of `t` over `seeds` evolutionary tunes (batches of 4, as
// `tessera tune`) with `prior` (null: the cold search), checked at priorCheckZ `check`.
double medianTrialsWith(const ReplayTable& t, const Prior* prior, double check, int seeds) {
  const double bar = 0.95 * t.bestThroughput();
  std::vector<int> hits;
  for (int seed = 0; seed < seeds; ++seed) {
    SearchSettings ss;
    ss.seed = uint64_t(seed) * 7919 + 1;
    ss.prior.checkZ = check;
    Trained tr = freshSearch(ss, t, prior);
    auto m = makeReplayMeasurer(t);
    TuneSettings ts;
    ts.search = ss;
    ts.trials = int(t.results.size());
    ts.topK = 0;
    ts.measureDefault = false;
    int hit = 0;
    TuneCallbacks cb;
    cb.onTrial = [&](const TrialResult& r, const TuneProgress& p) {
      if (!hit && r.ok() && r.throughput >= bar) hit = p.trial;
    };
    cb.shouldStop = [&](const TuneProgress&) { return hit > 0; };
    tune(t.space, *m, *tr.strategy, tr.model.get(), tr.features.get(), ts, cb);
    hits.push_back(hit ? hit : int(t.results.size()));
  }
  std::sort(hits.begin(), hits.end());
  return hits.size() % 2 ? hits[hits.size() / 2] : 0.5 * (hits[hits.size() / 2 - 1] + hits[hits.size() / 2]);
}
}  // namespace

// A prior that is wrong (here the table's own times inverted: the slowest config predicted
// fastest) is checked against the measurements each batch and loses its say once they
// contradict it (PriorSettings::checkZ): its first batch, the prior's top, is the price of
// letting any prior lead, and after it the search needs no more trials than the cold one (5
// seeds: cold 46, the inverted prior checked 49, believed 203). The control: believed at its
// fixed weight (priorWeight trials' worth), the same prior costs far more than a batch.
TEST(Strategy, AWrongPriorCostsNoMoreThanTheColdSearch) {
  const ReplayTable& t = tables::mi250x();
  const auto timeOf = timesOf(t);
  Prior inverted = oracleOf(timeOf, [](const ir::Config&, double us) { return 1.0 / us; });
  const int seeds = 5, batch = SearchSettings{}.batchSize;
  const double cold = medianTrialsWith(t, nullptr, 1.282, seeds), checked = medianTrialsWith(t, &inverted, 1.282, seeds),
               believed = medianTrialsWith(t, &inverted, -1, seeds);
  std::printf("median trials to 95 %%: cold %.0f, an inverted prior checked %.0f, believed %.0f\n", cold, checked, believed);
  EXPECT_LE(checked, cold + batch) << "a checked wrong prior cost more than its first batch";
  EXPECT_GT(believed, cold + batch) << "a prior believed at its fixed weight costs trials (the control)";
}

// A prior the check has half disowned rules no family out. The prior here takes the fast ("live")
// family for the one far behind (its times inverted), and its top eight, the slow family's eight
// slowest configs, it ranks so that their measurements disagree with it (Spearman -0.31 over
// the eight: the check's trust falls to about a quarter, not to nothing). The next batch gives
// the live family its slot again although none of its configs was measured. The control: the
// same prior believed (no check) keeps the family out.
TEST(Strategy, APriorTheCheckDisownsRulesNoFamilyOut) {
  auto t = familyDeadTable();
  ASSERT_TRUE(t.ok());
  const auto timeOf = timesOf(*t);
  std::vector<std::pair<double, std::string>> dead;  // (time, config) of the slow family
  for (const auto& r : t->results)
    if (r.ok() && std::get<std::string>(r.config.values.at("family")) == "dead") dead.push_back({r.samples.median_us, configKey(r.config)});
  std::sort(dead.begin(), dead.end(), std::greater<>());
  ASSERT_GE(dead.size(), 8u);
  // The i-th slowest is the prior's (order[i] + 1)-th pick: predicted and measured ranks then
  // correlate at -0.31.
  const int order[8] = {0, 1, 4, 7, 6, 5, 3, 2};
  std::map<std::string, double> picked;
  for (int i = 0; i < 8; ++i) picked[dead[size_t(i)].second] = (order[i] + 1) * 1e-9;
  Prior prior = oracleOf(timeOf, [&](const ir::Config& c, double us) {
    auto it = picked.find(configKey(c));
    return it != picked.end() ? it->second : 1.0 / us;
  });
  auto liveInSecondBatch = [&](double check) {
    SearchSettings ss;
    ss.seed = 5;
    ss.eps = 0;
    ss.niche.knobs = 0;
    ss.prior.checkZ = check;
    Trained tr = freshSearch(ss, *t, &prior);
    std::vector<ir::Config> first = tr.strategy->propose(8);
    EXPECT_EQ(countFamily(first, "live"), 0);
    for (const auto& c : first) EXPECT_TRUE(picked.count(configKey(c))) << configKey(c);
    learn(tr, *t, first);
    return countFamily(tr.strategy->propose(4), "live");
  };
  EXPECT_GE(liveInSecondBatch(1.282), 1);
  EXPECT_EQ(liveInSecondBatch(-1), 0);  // believed: the rule holds until a live config is measured
}

// A family the prior predicts far behind (under a quarter of its best: SIMT kernels next to
// tensor-core ones) gets no slot of its own in the prior's first batch, where without the rule it
// holds one (the control), nor in the greedy batches after it.
TEST(Strategy, APriorRulesOutAFamilyItPredictsFarBehind) {
  auto t = familyDeadTable();
  ASSERT_TRUE(t.ok());
  const auto timeOf = timesOf(*t);
  Prior oracle = oracleOf(timeOf);
  auto deadInFirstBatch = [&](bool rule) {
    SearchSettings ss;
    ss.seed = 3;
    ss.eps = 0;
    ss.prior.dominated = rule;
    auto batch = freshSearch(ss, *t, &oracle).strategy->propose(4);
    EXPECT_EQ(batch.size(), 4u);
    return countFamily(batch, "dead");
  };
  EXPECT_EQ(deadInFirstBatch(true), 0);
  EXPECT_EQ(deadInFirstBatch(false), 1);
  // After the model has data too (greedy batches of a trained search).
  SearchSettings ss;
  auto later = trainedSearch(ss, *t, &oracle).strategy->propose(16);
  ASSERT_EQ(later.size(), 16u);
  EXPECT_EQ(countFamily(later, "dead"), 0);
}

// A prior wrong about a family (here it takes the fast family for the slow one) is overruled by a
// measurement: once one of the family's configs measures at a quarter of the best, the family is
// back in the batches. Before that measurement it has none, and without the rule it has its slot
// (the controls).
TEST(Strategy, AMeasurementOverrulesThePriorOnAFamily) {
  auto t = familyDeadTable();
  ASSERT_TRUE(t.ok());
  const auto timeOf = timesOf(*t);
  // Inverted: "live" configs predicted 1000x slower than they are.
  Prior wrong = oracleOf(timeOf, [](const ir::Config& c, double us) {
    return std::get<std::string>(c.values.at("family")) == "live" ? us * 1000 : us;
  });
  auto liveAfter = [&](bool measuredOne, bool rule) {
    SearchSettings ss;
    ss.seed = 7;
    ss.eps = 0;
    ss.niche.knobs = 0;
    ss.prior.dominated = rule;
    Trained tr = freshSearch(ss, *t, &wrong);
    std::vector<ir::Config> first = tr.strategy->propose(4);  // the prior's top: dead configs
    if (rule) {
      EXPECT_EQ(countFamily(first, "live"), 0);
    }
    if (measuredOne)  // a random pick met a live config
      for (const auto& r : t->results)
        if (r.ok() && std::get<std::string>(r.config.values.at("family")) == "live") {
          first.push_back(r.config);
          break;
        }
    learn(tr, *t, first);
    return countFamily(tr.strategy->propose(4), "live");
  };
  EXPECT_GE(liveAfter(true, true), 1);
  EXPECT_EQ(liveAfter(false, true), 0);
  EXPECT_GE(liveAfter(false, false), 1);  // without the rule the family has its slot
}

namespace {
const ReplayTable& w6600() {
  static const ReplayTable t = [] {
    auto recs = importKernelTuner(tables::dataFile("convolution_W6600.json.gz"), "");
    EXPECT_TRUE(recs.ok()) << (recs.ok() ? "" : recs.error().message);
    auto r = recs.ok() ? tableFromRecords("convolution_W6600", *recs) : Expected<ReplayTable>(recs.error());
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : ReplayTable{};
  }();
  return t;
}

// The unstaged (use_shmem 0) configs of the greedy batches that the evolutionary search with
// `niche` slots proposes over `batches` more batches, continuing from `history` (eps 0: the random
// share cannot supply them), and the best share of the table's best those batches measured.
std::pair<int, double> unstagedPicks(const ReplayTable& t, const std::vector<TrialResult>& history, int niche, int batches) {
  SearchSettings ss;
  ss.seed = 11;
  ss.eps = 0;
  ss.niche.knobs = niche;
  auto features = costmodel::makeKnobFeatures(t.space);
  auto model = costmodel::makeXGBoostModel({.seed = 11});
  auto strat = makeStrategy(ss, t.space, model.get(), features.get());
  EXPECT_TRUE(strat.ok());
  auto m = makeReplayMeasurer(t);
  std::vector<costmodel::Sample> samples;
  auto learn = [&](const std::vector<TrialResult>& rs) {
    for (const auto& r : rs) samples.push_back({features->extract(r.config), r.throughput, 0});
    EXPECT_TRUE(model->update(samples).ok());
    (*strat)->observe(rs);
  };
  learn(history);
  int unstaged = 0;
  double best = 0;
  for (int b = 0; b < batches; ++b) {
    auto batch = (*strat)->propose(4);
    for (const auto& c : batch) unstaged += tables::knob(c, "use_shmem") == 0 ? 1 : 0;
    auto rs = *m->measure(batch);
    for (const auto& r : rs) best = std::max(best, r.ok() ? r.throughput / t.bestThroughput() : 0.0);
    learn(rs);
  }
  return {unstaged, best};
}
}  // namespace

TEST(Strategy, TheSwitchNicheKeepsTheOtherKernelImproving) {
  // The Radeon W6600's convolution (a real Kernel Tuner file): shared-memory staging
  // (use_shmem, a switch) is the better kernel on median, a plateau at 0.7-0.84 of the best, and
  // the four configs within 95 % sit in one corner of the unstaged kernel. A history on the
  // plateau: the 40 best staged configs and, of the unstaged kernel, one config a knob from the
  // corner (0.62) and a few slow ones. From there the greedy search (no random share) measures
  // staged configs and the odd unstaged one; the niche slot over switches (the default) plays the
  // unstaged niche from its own best config and reaches the corner within 30 batches.
  const ReplayTable& t = w6600();
  ASSERT_EQ(t.countAtLeast(0.95), 4u);
  std::vector<TrialResult> staged, history;
  for (size_t i = 0; i < t.results.size(); ++i)
    if (t.results[i].ok() && tables::knob(t.results[i].config, "use_shmem") == 1) staged.push_back(t.results[i]);
  std::sort(staged.begin(), staged.end(), [](const TrialResult& a, const TrialResult& b) { return a.throughput > b.throughput; });
  staged.resize(40);
  ASSERT_LT(staged.front().throughput, 0.85 * t.bestThroughput());
  auto at = [&](int64_t bx, int64_t by, int64_t tx, int64_t ty, int64_t ro) {
    for (const auto& r : t.results)
      if (tables::knob(r.config, "block_size_x") == bx && tables::knob(r.config, "block_size_y") == by &&
          tables::knob(r.config, "tile_size_x") == tx && tables::knob(r.config, "tile_size_y") == ty &&
          tables::knob(r.config, "read_only") == ro && tables::knob(r.config, "use_padding") == 0 &&
          tables::knob(r.config, "use_shmem") == 0)
        return r;
    ADD_FAILURE() << "no such config";
    return TrialResult{};
  };
  history = {at(256, 1, 1, 2, 1), at(240, 1, 1, 4, 0), at(176, 1, 2, 2, 1), at(96, 4, 4, 2, 0), at(160, 2, 2, 2, 0)};
  EXPECT_GT(history[0].throughput, 0.6 * t.bestThroughput());
  EXPECT_LT(history[1].throughput, 0.05 * t.bestThroughput());
  history.insert(history.end(), staged.begin(), staged.end());
  const auto [with, withBest] = unstagedPicks(t, history, 2, 30);
  const auto [without, withoutBest] = unstagedPicks(t, history, 0, 30);
  std::printf("30 greedy batches after a plateau: %d unstaged picks, best %.2f with the switch niche; %d, %.2f without\n",
              with, withBest, without, withoutBest);
  EXPECT_GT(with, 2 * without);
  EXPECT_GE(withBest, 0.95);
  EXPECT_LT(withoutBest, 0.95) << "the control: the model alone keeps to the plateau";
}
