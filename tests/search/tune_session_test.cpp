// Tests the tuning session on a real replayed table and a real (in-memory and SQLite) store:
// every measured candidate is committed and the re-measured winner stored; a second session finds
// it and stops (cache first); --resume knows every stored result without measuring it again;
// --force measures from scratch; a session whose candidates all fail reports that; a shared-cache
// hit the front end rejects is not used.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <set>

#include "cache_service/store.h"
#include "search/tune_session.h"
#include "test_tables.h"

using namespace tessera;
using namespace tessera::search;

namespace {

// A small slice of the MI250X table: fast sessions, a known best.
const ReplayTable& smallTable() {
  static const ReplayTable t = tables::slice("conv_slice", [](const ir::Config& c) {
    return tables::knob(c, "tile_size_x") <= 2 && tables::knob(c, "tile_size_y") <= 2;
  });
  return t;
}

TuneProblem problemOf(const ReplayTable& t) {
  ir::Space space = t.space;
  return {t.key, t.space, TargetDesc{},
          [space](const cache::HardKey&) { return costmodel::makeKnobFeatures(space); }};
}

SessionSettings quick(int trials, CachePolicy policy = CachePolicy::UseStored) {
  SessionSettings s;
  s.loop.trials = trials;
  s.loop.search.seed = 5;
  s.loop.topK = 3;
  s.cache = policy;
  return s;
}

cache::Provenance prov() {
  cache::Provenance p;
  p.tessera_version = "test";
  p.created_at = cache::utcNow();
  return p;
}

}  // namespace

TEST(TuneSession, CommitsEveryCandidateThenAnswersFromTheStore) {
  const ReplayTable& t = smallTable();
  ASSERT_GT(t.results.size(), 50u);
  auto store = cache::makeMemoryStore();
  auto problem = problemOf(t);
  auto m = makeReplayMeasurer(t);
  size_t committed = 0;
  SessionCallbacks cb;
  cb.onRecordsCommitted = [&](const std::vector<cache::Record>& rs) { committed += rs.size(); };
  SessionSettings s = quick(24);
  auto r = runTuneSession(problem, *m, store.get(), nullptr, prov(), s, cb);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->outcome, SessionResult::Outcome::Tuned);
  EXPECT_EQ(r->tune.trials.size(), 24u);
  EXPECT_EQ(committed, 24u);
  ASSERT_TRUE(r->winner);
  EXPECT_TRUE(r->winner->remeasured);
  int counted = 0;
  for (const auto& [status, n] : r->statusCounts) counted += n;
  EXPECT_EQ(counted, 24);
  auto best = store->best(r->keyId);
  ASSERT_TRUE(best.ok() && *best);
  EXPECT_EQ((*best)->record.config, r->winner->config);

  // Cache first: the same problem again stops at once, measuring nothing.
  auto m2 = makeReplayMeasurer(t);
  auto again = runTuneSession(problem, *m2, store.get(), nullptr, prov(), s, {});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->outcome, SessionResult::Outcome::AlreadyTuned);
  EXPECT_EQ(again->cachedFrom, "local");
  EXPECT_EQ(m2->lookups(), 0u);

  // Resume: the 24 stored results are known (not measured again); 10 more are measured.
  auto m3 = makeReplayMeasurer(t);
  SessionSettings resume = quick(10, CachePolicy::Resume);
  resume.loop.measureDefault = false;
  resume.loop.topK = 0;
  auto more = runTuneSession(problem, *m3, store.get(), nullptr, prov(), resume, {});
  ASSERT_TRUE(more.ok());
  EXPECT_EQ(more->outcome, SessionResult::Outcome::Tuned);
  EXPECT_EQ(m3->lookups(), 10u);
  auto all = listAll(*store, {.key_id = r->keyId});
  ASSERT_TRUE(all.ok());
  std::set<std::string> configs;
  for (const auto& rec : *all) configs.insert(rec.config);
  EXPECT_EQ(configs.size(), 34u);  // no config measured twice

  // Force: the store is ignored; the search starts over and measures again.
  auto m4 = makeReplayMeasurer(t);
  SessionSettings force = quick(5, CachePolicy::Force);
  force.loop.topK = 0;
  auto fresh = runTuneSession(problem, *m4, store.get(), nullptr, prov(), force, {});
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh->outcome, SessionResult::Outcome::Tuned);
  EXPECT_GE(m4->lookups(), 5u);
}

// The same session against a SQLite file: what the front ends use.
TEST(TuneSession, WorksOnASqliteStore) {
  const ReplayTable& t = smallTable();
  auto dir = std::filesystem::temp_directory_path() / ("tessera-session-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    auto store = cache::openSqliteStore((dir / "s.db").string());
    ASSERT_TRUE(store.ok());
    auto m = makeReplayMeasurer(t);
    auto r = runTuneSession(problemOf(t), *m, store->get(), nullptr, prov(), quick(12), {});
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->outcome, SessionResult::Outcome::Tuned);
  }
  auto reopened = cache::openSqliteStore((dir / "s.db").string());
  ASSERT_TRUE(reopened.ok());
  auto m = makeReplayMeasurer(t);
  auto r = runTuneSession(problemOf(t), *m, reopened->get(), nullptr, prov(), quick(12), {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outcome, SessionResult::Outcome::AlreadyTuned);
  std::filesystem::remove_all(dir);
}

// Every candidate fails (a measurer that turns the table's answers into crashes): no winner, and
// the statuses say why.
TEST(TuneSession, ReportsWhenNothingIsCorrect) {
  const ReplayTable& t = smallTable();
  class Crashing : public Measurer {
   public:
    explicit Crashing(const ReplayTable& t) : inner(makeReplayMeasurer(t)) {}
    std::vector<TrialResult> measure(const std::vector<ir::Config>& b) override { return crash(inner->measure(b)); }
    std::vector<TrialResult> remeasure(const std::vector<ir::Config>& c, int n) override {
      return crash(inner->remeasure(c, n));
    }
    std::unique_ptr<ReplayMeasurer> inner;

   private:
    static std::vector<TrialResult> crash(std::vector<TrialResult> rs) {
      for (auto& r : rs) {
        r.status = TrialStatus::Crash;
        r.throughput = 0;
      }
      return rs;
    }
  } m(t);
  auto store = cache::makeMemoryStore();
  auto r = runTuneSession(problemOf(t), m, store.get(), nullptr, prov(), quick(8), {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outcome, SessionResult::Outcome::NothingCorrect);
  EXPECT_EQ(r->statusCounts["crash"], 8);
  EXPECT_FALSE(r->winner);
}

// shouldStop ends the search after the batch in flight; the winner is still re-measured and stored.
TEST(TuneSession, StopsWhenAskedAndStillStoresTheWinner) {
  const ReplayTable& t = smallTable();
  auto store = cache::makeMemoryStore();
  auto m = makeReplayMeasurer(t);
  SessionCallbacks cb;
  cb.shouldStop = [](const TuneProgress& p) { return p.trial >= 8; };
  auto r = runTuneSession(problemOf(t), *m, store.get(), nullptr, prov(), quick(100), cb);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->stopped);
  EXPECT_LT(r->tune.trials.size(), 16u);
  ASSERT_TRUE(r->winner);
  EXPECT_TRUE(r->winner->remeasured);
}
