// Tests the tuning session on a real replayed table and a real (in-memory and SQLite) store:
// every measured candidate is committed and the re-measured winner stored; a second session finds
// it and stops (cache first); --resume knows every stored result without measuring it again;
// --force measures from scratch; a session whose candidates all fail reports that; a shared-cache
// hit the front end rejects is not used.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "store/list_all.h"
#include "store/store.h"
#include "store/trust.h"
#include "session/tune_session.h"
#include "support/si_format.h"
#include "test_tables.h"

using namespace tessera;
using namespace tessera::search;
using namespace tessera::session;
using namespace tessera::measure;

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
    Expected<std::vector<TrialResult>> measure(const std::vector<ir::Config>& b) override {
      return crash(*inner->measure(b));
    }
    Expected<std::vector<TrialResult>> remeasure(const std::vector<ir::Config>& c, int n) override {
      return crash(*inner->remeasure(c, n));
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

// A measuring backend that is gone (measurer.h: the remote measurer's workers or service) answers
// with an error value: the session ends with that error, the batches measured before it stored.
// The control: the same measurer while it lasts tunes to the end; a failure thrown across the
// interface fails EXPECT_NO_THROW, and one dropped would let the session answer ok.
TEST(TuneSession, AMeasurerThatIsGoneEndsTheTuneWithItsError) {
  const ReplayTable& t = smallTable();
  class Vanishing : public Measurer {
   public:
    Vanishing(const ReplayTable& t, int calls) : inner(makeReplayMeasurer(t)), left(calls) {}
    Expected<std::vector<TrialResult>> measure(const std::vector<ir::Config>& b) override {
      if (left-- <= 0) return makeError(ErrorCode::Unavailable, "no live worker for this test");
      return inner->measure(b);
    }
    Expected<std::vector<TrialResult>> remeasure(const std::vector<ir::Config>& c, int n) override {
      if (left-- <= 0) return makeError(ErrorCode::Unavailable, "no live worker for this test");
      return inner->remeasure(c, n);
    }
    std::unique_ptr<ReplayMeasurer> inner;
    int left;
  };
  for (int calls : {2, 1000}) {
    Vanishing m(t, calls);
    auto store = cache::makeMemoryStore();
    size_t committed = 0;
    SessionCallbacks cb;
    cb.onRecordsCommitted = [&](const std::vector<cache::Record>& rs) { committed += rs.size(); };
    std::optional<Expected<SessionResult>> r;
    EXPECT_NO_THROW(r.emplace(runTuneSession(problemOf(t), m, store.get(), nullptr, prov(), quick(40), cb)));
    ASSERT_TRUE(r.has_value());
    EXPECT_GT(committed, 0u);
    if (calls == 1000) {
      ASSERT_TRUE(r->ok()) << r->error().message;
      EXPECT_TRUE((*r)->winner);
      continue;
    }
    ASSERT_FALSE(r->ok()) << "the lost measurer's error was dropped";
    EXPECT_EQ(r->error().code, ErrorCode::Unavailable);
    EXPECT_EQ(r->error().message, "no live worker for this test");
    auto listed = listAll(*store, {});
    ASSERT_TRUE(listed.ok());
    EXPECT_FALSE(listed->empty());  // what was measured before is kept: a resume continues
  }
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

// The spot check of a tune measured by workers (issue 48): the replayed table's times are the
// workers' claims (origin set); this machine's re-timings are the table's times scaled as a
// scenario says, with the control (SessionCallbacks::controlHere) reading free or busy cores.
// Before: one re-timing decided, so a loaded machine's first 900x read convicted an honest worker.
namespace {

struct SpotScenario {
  std::vector<double> slowdowns;  // this machine's re-timing i runs at claim x slowdowns[i] (the last repeats)
  std::vector<double> controls;   // the control's reading j (the last repeats)
};

struct SpotOutcome {
  SpotCheck spot;
  int reports = 0;
  double reported_us = 0, claimed_us = 0;
  bool winnerIsClaim = false;
  std::vector<std::string> warnings;
};

SpotOutcome spotCheckUnder(const SpotScenario& sc) {
  const ReplayTable& t = smallTable();
  class Workers : public Measurer {
   public:
    explicit Workers(const ReplayTable& t) : inner(makeReplayMeasurer(t)) {}
    Expected<std::vector<TrialResult>> measure(const std::vector<ir::Config>& b) override {
      return claim(*inner->measure(b));
    }
    Expected<std::vector<TrialResult>> remeasure(const std::vector<ir::Config>& c, int n) override {
      return claim(*inner->remeasure(c, n));
    }
    std::unique_ptr<ReplayMeasurer> inner;

   private:
    static std::vector<TrialResult> claim(std::vector<TrialResult> rs) {
      for (auto& r : rs) {
        r.origin = TrialResult::Origin{};
        r.origin->writer = "box";
        r.origin->workerId = "w1";
      }
      return rs;
    }
  } workers(t);
  auto here = makeReplayMeasurer(t);
  size_t timing = 0, reading = 0;
  SessionCallbacks cb;
  SpotOutcome out;
  cb.measureHere = [&](const std::vector<ir::Config>& configs) -> std::optional<std::vector<TrialResult>> {
    auto rs = *here->measure(configs);
    const double f = sc.slowdowns[std::min(timing++, sc.slowdowns.size() - 1)];
    for (auto& r : rs) {
      r.samples.median_us *= f;
      r.samples.p20_us *= f;
      r.samples.p80_us *= f;
      r.samples.min_us *= f;
    }
    return rs;
  };
  cb.controlHere = [&](int) { return sc.controls[std::min(reading++, sc.controls.size() - 1)]; };
  cb.onWarning = [&](const std::string& w) { out.warnings.push_back(w); };
  cb.reportSpotCheck = [&](const TrialResult& claimed, const cache::Record& mine) {
    ++out.reports;
    out.reported_us = mine.median_us;
    out.claimed_us = claimed.samples.median_us;
  };
  auto store = cache::makeMemoryStore();
  auto r = runTuneSession(problemOf(t), workers, store.get(), nullptr, prov(), quick(8), cb);
  EXPECT_TRUE(r.ok());
  if (!r.ok()) return out;
  out.spot = r->spot;
  out.winnerIsClaim = r->tune.best && r->tune.best->origin.has_value();
  return out;
}

}  // namespace

TEST(TuneSession, ASpotCheckConvictsOnlyWhatSurvivesQuietReTimings) {
  // A noisy first re-timing (900x, the 928x), then quiet cores and honest times: agreed,
  // and what the service hears agrees with the claim.
  SpotOutcome noisy = spotCheckUnder({{900, 1.05}, {1.0}});
  ASSERT_TRUE(noisy.spot.ran);
  EXPECT_TRUE(noisy.spot.judged);
  EXPECT_TRUE(noisy.spot.agreed);
  EXPECT_GE(noisy.spot.quiet, 1);
  EXPECT_NEAR(noisy.spot.first_us / noisy.spot.claimed_us, 900, 1);
  ASSERT_EQ(noisy.reports, 1);
  EXPECT_FALSE(tessera::cache::contradicts(noisy.claimed_us, noisy.reported_us)) << noisy.reported_us;
  EXPECT_FALSE(noisy.winnerIsClaim) << "an agreeing re-timing here is the winner";

  // Busy in every re-timing (the control reads 2x: a spinning process on each core): not judged,
  // nothing reported, the claim kept unconfirmed.
  SpotOutcome busy = spotCheckUnder({{900}, {2.0}});
  ASSERT_TRUE(busy.spot.ran);
  EXPECT_FALSE(busy.spot.judged);
  EXPECT_EQ(busy.spot.quiet, 0);
  EXPECT_GE(busy.spot.busiest, 2.0);
  EXPECT_EQ(busy.reports, 0) << "the service heard a verdict measured on busy cores";
  EXPECT_TRUE(busy.winnerIsClaim);
  // Its warning in the one number format (it read "re-timed here at 2.076e+04 us ... 2.00x").
  ASSERT_EQ(busy.warnings.size(), 1u) << ::testing::PrintToString(busy.warnings);
  EXPECT_NE(busy.warnings[0].find(tessera::formatMicros(busy.spot.first_us)), std::string::npos) << busy.warnings[0];
  EXPECT_NE(busy.warnings[0].find("up to 2.00x slower"), std::string::npos) << busy.warnings[0];

  // The negative control: a worker whose claims are 20x too fast is still convicted on quiet
  // cores, and busy rounds in between do not rescue it (only quiet ones count).
  SpotOutcome liar = spotCheckUnder({{20}, {1.0, 1.0, 3.0, 3.0, 1.0}});
  ASSERT_TRUE(liar.spot.ran);
  EXPECT_TRUE(liar.spot.judged);
  EXPECT_FALSE(liar.spot.agreed);
  EXPECT_GE(liar.spot.quiet, 1);
  EXPECT_LT(liar.spot.quiet, liar.spot.rounds);
  ASSERT_EQ(liar.reports, 1);
  EXPECT_TRUE(tessera::cache::contradicts(liar.claimed_us, liar.reported_us));

  // A busy round's fast-looking time does not count either: quiet rounds at 20x, busy ones at 1x.
  SpotOutcome mixed = spotCheckUnder({{20, 20, 1, 20, 1, 20}, {1.0, 1.0, 3.0, 3.0, 1.0, 1.0, 3.0, 3.0, 1.0}});
  EXPECT_FALSE(mixed.spot.agreed);
  EXPECT_EQ(mixed.reports, 1);
}

// Issue 48's done-when, without a real spinner: under load a config can read faster than the quiet
// winner (a THREADS=1 config on a 2-core box whose two-thread ones suffer the spinner most). A run
// whose control (SessionCallbacks::loadControl) reads busy cores warns once and stores its winner
// without the re-measured mark, so the winner a quiet run stored stays the key's. The control: the
// same faster run on quiet cores does replace it (the test can see a replacement).
namespace {

class Scaled : public Measurer {
 public:
  Scaled(const ReplayTable& t, double f) : inner_(makeReplayMeasurer(t)), f_(f) {}
  Expected<std::vector<TrialResult>> measure(const std::vector<ir::Config>& b) override {
    return scale(*inner_->measure(b));
  }
  Expected<std::vector<TrialResult>> remeasure(const std::vector<ir::Config>& c, int n) override {
    return scale(*inner_->remeasure(c, n));
  }

 private:
  std::vector<TrialResult> scale(std::vector<TrialResult> rs) const {
    for (auto& r : rs) {
      r.samples.median_us *= f_;
      r.samples.p20_us *= f_;
      r.samples.p80_us *= f_;
      r.samples.min_us *= f_;
      r.throughput /= f_;
    }
    return rs;
  }
  std::unique_ptr<ReplayMeasurer> inner_;
  double f_;
};

struct LoadedAfterQuiet {
  int64_t quietWinner = 0, winnerAfter = 0;
  bool loadedBusy = false;
  std::vector<std::string> warnings;
};

// A quiet run stores its winner; then a forced run of the same key reads every time at half (as
// under load a config may), its control reading `control`.
LoadedAfterQuiet quietThenFasterUnder(double control) {
  const ReplayTable& t = smallTable();
  LoadedAfterQuiet out;
  auto store = cache::makeMemoryStore();
  auto problem = problemOf(t);
  SessionCallbacks quietCb;
  quietCb.loadControl = [](int) { return 1.0; };
  Scaled asIs(t, 1.0);
  auto quiet = runTuneSession(problem, asIs, store.get(), nullptr, prov(), quick(8), quietCb);
  EXPECT_TRUE(quiet.ok() && quiet->winner && quiet->winner->remeasured);
  if (!quiet.ok()) return out;
  auto before = store->best(quiet->keyId);
  EXPECT_TRUE(before.ok() && *before);
  if (!before.ok() || !*before) return out;
  out.quietWinner = (*before)->record.id;

  SessionCallbacks loadedCb;
  loadedCb.loadControl = [control](int) { return control; };
  loadedCb.onWarning = [&](const std::string& w) { out.warnings.push_back(w); };
  Scaled faster(t, 0.5);
  auto loaded = runTuneSession(problem, faster, store.get(), nullptr, prov(), quick(8, CachePolicy::Force), loadedCb);
  EXPECT_TRUE(loaded.ok() && loaded->winner);
  if (!loaded.ok()) return out;
  out.loadedBusy = loaded->timing.busy;
  auto after = store->best(quiet->keyId);
  EXPECT_TRUE(after.ok() && *after);
  if (after.ok() && *after) out.winnerAfter = (*after)->record.id;
  return out;
}

}  // namespace

TEST(TuneSession, AWinnerTimedUnderLoadNeverReplacesAQuietOne) {
  LoadedAfterQuiet busy = quietThenFasterUnder(2.0);  // a spinner on every core: the control runs 2x
  EXPECT_TRUE(busy.loadedBusy);
  EXPECT_EQ(std::count_if(busy.warnings.begin(), busy.warnings.end(),
                          [](const std::string& w) { return w.find("timing under load") != std::string::npos; }),
            1)
      << ::testing::PrintToString(busy.warnings);
  EXPECT_EQ(busy.winnerAfter, busy.quietWinner) << "a winner timed under load replaced the quiet one";

  LoadedAfterQuiet quiet = quietThenFasterUnder(1.0);
  EXPECT_FALSE(quiet.loadedBusy);
  EXPECT_TRUE(quiet.warnings.empty()) << ::testing::PrintToString(quiet.warnings);
  EXPECT_NE(quiet.winnerAfter, quiet.quietWinner) << "the control: a faster quiet run replaces the winner";
}
