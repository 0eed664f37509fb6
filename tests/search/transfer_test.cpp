// Tests transfer across GPUs (search/transfer.h) on a real bundled pair: the Xgemm tables measured
// on an RTX 3090 and an RTX 2080 Ti (bench/data; 5 seeds, about 20 s of CPU). A replayed
// tune of one GPU warm-started from the other's records reaches 95 % of the best in fewer trials
// than a cold one; the controls: records that are not this kernel on another GPU change nothing
// (the same seeds replay the very same trials), and the other GPU's landscape turned upside down
// does worse than the true one.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "costmodel/features.h"
#include "store/store.h"
#include "measure/replay.h"
#include "search/import.h"
#include "search/transfer.h"
#include "session/tune_session.h"

using namespace tessera;
using namespace tessera::search;
using namespace tessera::session;
using namespace tessera::measure;

namespace {

std::string dataFile(const std::string& name) { return std::string(TESSERA_TEST_DATA_DIR) + "/" + name; }

// A bundled table's records (imported once per file).
const std::vector<cache::Record>& recordsOf(const std::string& file) {
  static std::map<std::string, std::vector<cache::Record>> cache;
  auto [it, fresh] = cache.try_emplace(file);
  if (fresh) {
    auto recs = importKernelTuner(dataFile(file), file.find("MI250X") != std::string::npos ? "MI250X" : "");
    EXPECT_TRUE(recs.ok()) << (recs.ok() ? "" : recs.error().message);
    if (recs.ok()) it->second = std::move(*recs);
  }
  return it->second;
}

struct Replays {
  std::vector<int> hits;  // per seed: the trial that reached 95 % of the best
  std::vector<std::vector<std::string>> trials;  // per seed: the configs measured, in order
  int transferGpus = 0;
  std::vector<std::vector<std::string>> led;  // per seed: the other GPUs that led (none: cold)
};

// One replayed `tessera tune` per seed on `table`, warm-started from `others` (none: cold).
// `nicheKnobs`: the search's niche slot (NicheSettings); some tests pin it off, the seeds they
// were calibrated on.
Replays replay(const ReplayTable& table, const std::vector<cache::Record>* others, int seeds = 5,
               const TransferSettings& transfer = {}, int firstSeed = 0,
               int nicheKnobs = SearchSettings{}.niche.knobs) {
  Replays out;
  const double bar = 0.95 * table.bestThroughput();
  const ir::Space space = table.space;
  TuneProblem p{table.key, table.space, TargetDesc{}, [space](const cache::HardKey&) { return costmodel::makeKnobFeatures(space); }};
  for (int seed = firstSeed; seed < firstSeed + seeds; ++seed) {
    SessionSettings ss;
    ss.loop.search.strategy = "evolutionary";
    ss.loop.search.seed = uint64_t(seed) * 7919 + 1;
    ss.loop.search.batchSize = 4;
    ss.loop.search.niche.knobs = nicheKnobs;
    ss.loop.trials = int(table.results.size());
    ss.loop.topK = 0;
    ss.loop.measureDefault = false;
    ss.cache = CachePolicy::Force;
    ss.model.seed = uint64_t(seed);
    ss.model.threads = 1;
    ss.transfer = transfer;
    ss.transfer.seed = uint64_t(seed);
    ss.transfer.model.threads = 1;
    auto measurer = makeReplayMeasurer(table);
    int hit = 0;
    std::vector<std::string> trials;
    SessionCallbacks cb;
    cb.onTrial = [&](const TrialResult& r, const TuneProgress& pr) {
      trials.push_back(r.config.str());
      if (!hit && r.ok() && r.throughput >= bar) hit = pr.trial;
    };
    cb.shouldStop = [&](const TuneProgress&) { return hit > 0; };
    auto s = runTuneSession(p, *measurer, nullptr, nullptr, {}, ss, cb, others);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
    if (!s.ok()) return out;
    out.transferGpus = s->transferGpus;
    out.led.push_back(s->transferLed);
    out.hits.push_back(hit ? hit : int(table.results.size()));
    out.trials.push_back(std::move(trials));
  }
  return out;
}

double median(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace

TEST(Transfer, AnotherGpusRecordsCutTheTrialsOfATune) {
  const auto& on2080 = recordsOf("gemm_RTX_2080_Ti.json.gz");
  const auto& on3090 = recordsOf("gemm_RTX_3090.json.gz");
  ASSERT_GT(on2080.size(), 200u);
  ASSERT_GT(on3090.size(), 200u);
  ASSERT_TRUE(transferSource(on2080.front().key, on3090.front().key));
  auto table = tableFromRecords("gemm_RTX_2080_Ti", on2080);
  ASSERT_TRUE(table.ok()) << table.error().message;

  Replays cold = replay(*table, nullptr);
  Replays warm = replay(*table, &on3090);
  EXPECT_EQ(cold.transferGpus, 0);
  EXPECT_EQ(warm.transferGpus, 1);
  const double c = median(cold.hits), w = median(warm.hits);
  std::printf("RTX 2080 Ti (%zu configs): median trials to 95 %%: cold %.0f, from the RTX 3090's records %.0f\n",
              table->results.size(), c, w);
  EXPECT_LT(w, c) << "transfer did not beat the cold start";

  // Control 1: records of this kernel on this GPU's own key, or of another kernel on another GPU,
  // are no transfer: the session learns nothing from them and replays the cold trials exactly.
  std::vector<cache::Record> notTransfer = on3090;
  for (auto& r : notTransfer) {
    r.key.workload = std::string(64, 'f');  // another kernel
    r.key_id = cache::keyIdOf(r.key);
  }
  Replays none = replay(*table, &notTransfer, 2);
  EXPECT_EQ(none.transferGpus, 0);
  EXPECT_EQ(none.hits, std::vector<int>(cold.hits.begin(), cold.hits.begin() + 2));

  // Control 2: the RTX 3090's landscape upside down (its fastest config now its slowest) is worse
  // than the true one: the gain comes from what the records say, not from having records.
  std::vector<double> times;
  for (const auto& r : on3090) times.push_back(r.median_us);
  const double lo = *std::min_element(times.begin(), times.end()), hi = *std::max_element(times.begin(), times.end());
  std::vector<cache::Record> inverted = on3090;
  for (auto& r : inverted) r.median_us = lo * hi / r.median_us;
  Replays wrong = replay(*table, &inverted);
  EXPECT_EQ(wrong.transferGpus, 1);
  EXPECT_GT(median(wrong.hits), w) << "an inverted landscape helped as much as the true one";
}

// By default the other GPUs lead from the first batch, because agreement over the bulk of a space
// says little about agreement at its top, which is what a transfer pays for: the A100 and MI250X
// convolution landscapes agree at 0.46 over every config, yet with the A100 file's
// measurement-order configs set aside (bench/data/README.md) the MI250X's own order holds configs
// within 95 % of the A100's best at its ranks 6, 7 and 9, and led by the MI250X's records the A100
// needs a trial or two where a cold tune needs ~74 (20 seeds). Control: the MI250X's landscape
// inverted does not lead there. (A probe of agreement before the lead, deleted, judged the
// MI250X by the bulk and kept it out: docs/search-notes.md.) ~5 s.
TEST(Transfer, TheOtherGpusLeadWhereTheyAgreeAtTheTop) {
  std::vector<cache::Record> onA100 = recordsOf("convolution_A100.json.gz");
  auto order = parseKnobMatch("read_only=1,use_padding=0,use_shmem=1");
  ASSERT_TRUE(order.ok());
  EXPECT_EQ(setAside(onA100, *order), 800u);
  auto table = tableFromRecords("convolution_A100", onA100);
  ASSERT_TRUE(table.ok()) << table.error().message;
  const auto& onMI250X = recordsOf("convolution_MI250X.json.gz");
  Replays cold = replay(*table, nullptr, 5, {}, 0);
  Replays led = replay(*table, &onMI250X, 5, {}, 0);
  // Control: the MI250X's landscape upside down (its fastest config now its slowest) leads nowhere.
  std::vector<double> times;
  for (const auto& r : onMI250X) times.push_back(r.median_us);
  const double lo = *std::min_element(times.begin(), times.end()), hi = *std::max_element(times.begin(), times.end());
  std::vector<cache::Record> inverted = onMI250X;
  for (auto& r : inverted) r.median_us = lo * hi / r.median_us;
  Replays wrong = replay(*table, &inverted, 5, {}, 0);
  const double c = median(cold.hits), l = median(led.hits), w = median(wrong.hits);
  std::printf("A100 convolution without its measurement-order configs: median trials to 95 %%: cold %.0f, led by the "
              "MI250X's records %.0f, by them inverted %.0f\n", c, l, w);
  EXPECT_EQ(led.led.front().size(), 1u);
  EXPECT_LT(4 * l, c) << "the MI250X's records did not lead the A100 to its best";
  EXPECT_GT(w, 4 * l) << "control: the MI250X's records inverted led as well as the true ones";
}

TEST(Transfer, TheModelRanksTheOtherGpusFastConfigsFirst) {
  const auto& on2080 = recordsOf("gemm_RTX_2080_Ti.json.gz");
  const auto& on3090 = recordsOf("gemm_RTX_3090.json.gz");
  ASSERT_FALSE(on2080.empty());
  auto table = tableFromRecords("gemm_RTX_2080_Ti", on2080);
  ASSERT_TRUE(table.ok());
  const ir::Space space = table->space;
  FeaturesForKey knobs = [space](const cache::HardKey&) { return costmodel::makeKnobFeatures(space); };
  std::vector<cache::Record> withJunk = on3090;
  cache::Record junk = on3090.front();
  junk.config = "{not json";
  withJunk.push_back(junk);
  Transfer t = makeTransfer(withJunk, on2080.front().key, knobs, {.seed = 1});
  ASSERT_EQ(t.gpus, 1);
  ASSERT_EQ(t.from.size(), 1u);
  EXPECT_NE(t.from.front().find("RTX 3090"), std::string::npos) << t.from.front();
  // The 3090's best decile scores above its worst decile on average.
  std::vector<std::pair<double, double>> byTime;  // (time, score)
  for (const auto& r : on3090) byTime.push_back({r.median_us, t.score(*ir::Config::fromJson(r.config))});
  std::sort(byTime.begin(), byTime.end());
  const size_t d = byTime.size() / 10;
  double fast = 0, slow = 0;
  for (size_t i = 0; i < d; ++i) {
    fast += byTime[i].second;
    slow += byTime[byTime.size() - 1 - i].second;
  }
  EXPECT_GT(fast, slow);
  // Nothing usable: no transfer, and disabled: none either.
  EXPECT_EQ(makeTransfer(on2080, on2080.front().key, knobs, {}).gpus, 0);  // its own key
  EXPECT_EQ(makeTransfer(on3090, on2080.front().key, knobs, {.enabled = false}).gpus, 0);
  auto cpu = on3090;
  for (auto& r : cpu) r.key.target = "host";
  EXPECT_EQ(makeTransfer(cpu, on2080.front().key, knobs, {}).gpus, 0);
}

// A session finds this kernel's records on other GPUs in its store by itself (as `tessera tune`
// does), says so, and --no-transfer (enabled = false) turns it off; records of this GPU's own key
// are its history, not a transfer.
TEST(Transfer, ASessionFindsOtherGpusRecordsInItsStore) {
  const auto& on2080 = recordsOf("gemm_RTX_2080_Ti.json.gz");
  const auto& on3090 = recordsOf("gemm_RTX_3090.json.gz");
  auto table = tableFromRecords("gemm_RTX_2080_Ti", on2080);
  ASSERT_TRUE(table.ok());
  auto store = cache::makeMemoryStore();
  std::vector<cache::Record> some(on3090.begin(), on3090.begin() + 600);
  ASSERT_TRUE(store->put(some).ok());
  // A team's store: the same kernel on two more GPUs.
  for (const char* f : {"gemm_RTX_Titan.json.gz", "gemm_RTX_3060_laptop.json.gz"}) {
    const auto& r = recordsOf(f);
    ASSERT_GT(r.size(), 600u) << f;
    ASSERT_TRUE(store->put(std::vector<cache::Record>(r.begin(), r.begin() + 600)).ok());
  }
  const ir::Space space = table->space;
  TuneProblem p{table->key, table->space, TargetDesc{}, [space](const cache::HardKey&) { return costmodel::makeKnobFeatures(space); }};
  auto run = [&](bool enabled, std::vector<std::string>* heard) {
    SessionSettings ss;
    ss.loop.search.strategy = "evolutionary";
    ss.loop.trials = 24;
    ss.loop.topK = 0;
    ss.loop.measureDefault = false;
    ss.cache = CachePolicy::Force;
    ss.transfer.enabled = enabled;
    ss.pushToCache = false;
    SessionCallbacks cb;
    cb.onTransfer = [&](const Transfer& t) { *heard = t.from; };
    auto m = makeReplayMeasurer(*table);
    return runTuneSession(p, *m, store.get(), nullptr, {}, ss, cb);
  };
  std::vector<std::string> heard;
  auto on = run(true, &heard);
  ASSERT_TRUE(on.ok()) << on.error().message;
  EXPECT_EQ(on->transferGpus, 3);
  ASSERT_EQ(heard.size(), 3u);
  std::string all;
  for (const auto& h : heard) all += h + "\n";
  for (const char* gpu : {"RTX 3090", "TITAN RTX", "RTX 3060 Laptop"}) EXPECT_NE(all.find(gpu), std::string::npos) << all;
  // What led (all of them, from the first batch) is said by name.
  EXPECT_EQ(on->transferLed, heard);
  heard.clear();
  auto off = run(false, &heard);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->transferGpus, 0);
  EXPECT_TRUE(heard.empty());
}
