// Owns the tuning session: cache first, seeds, warm start, model, strategy, the tuning loop with
// its commits, and the stored winner.
#include "session/tune_session.h"

#include <chrono>
#include <cmath>
#include <set>
#include <cstdio>

#include "ir/families.h"
#include "ir/text.h"
#include "measure/estimate.h"
#include "measure/records.h"
#include "store/list_all.h"
#include "targets/gpu_skus.h"
#include "search/space.h"
#include "search/strategy.h"
#include "support/load.h"
#include "support/si_format.h"

namespace tessera::session {

using measure::Measurer;
using measure::TrialResult;
using measure::TuningCost;
using measure::estimatePrior;
using measure::fromRecords;
using measure::hardKeyFor;
using measure::toRecord;
using measure::trialStatusName;
using search::FeaturesForKey;
using search::LoadWatchingMeasurer;
using search::PlainSearch;
using search::Prior;
using search::SearchSettings;
using search::TimingLoad;
using search::Transfer;
using search::TuneCallbacks;
using search::TuneProgress;
using search::TuneSettings;
using search::agreementGate;
using search::hostFeaturesForKeys;
using search::makeSpace;
using search::makeStrategy;
using search::makeTransfer;
using search::restrictSpace;
using search::spreadOf;
using search::transferPrior;
using search::transferSource;
using search::tune;
using search::warmStartSamples;
using search::withTransferFeature;

Expected<TuneProblem> tuneProblem(const ir::Kernel& k, const TargetDesc& t, const std::string& spaceSpec) {
  TuneProblem p;
  TESSERA_ASSIGN(p.space, makeSpace(k, t));
  if (!spaceSpec.empty()) {
    TESSERA_ASSIGN(p.space, restrictSpace(p.space, spaceSpec));
  }
  p.key = hardKeyFor(k, t);
  p.kernelText = ir::printKernel(k, {.anonymize = true});
  p.target = t;
  ir::Space space = p.space;
  if (t.isGpu()) {
    // GPU knobs mean the same thing for every workload of a family: the knob features, plus the
    // analytic model's log predicted time of this workload (the prior).
    p.prior = estimatePrior(k, t);
    // Another workload's records (the warm start) get the column too, unknown (-1): the prior
    // describes this kernel only.
    Prior prior = p.prior;
    const std::string self = cache::keyIdOf(p.key);
    p.features = [space, prior, self](const cache::HardKey& key) {
      const bool mine = cache::keyIdOf(key) == self;
      return costmodel::withFeature(costmodel::makeKnobFeatures(space), costmodel::kEstimateFeature,
                                    [prior, mine](const ir::Config& c) {
                                      auto us = mine ? prior(c) : std::nullopt;
                                      return us && *us > 0 ? float(std::log2(*us)) : -1.f;
                                    });
    };
  } else {
    p.features = hostFeaturesForKeys(space, t);
  }
  return p;
}

Prior recordsPrior(const std::vector<cache::Record>& recs) {
  for (const auto& r : recs) {
    if (r.kernel_ir.empty()) continue;
    auto k = ir::parseKernel(r.kernel_ir);
    auto t = getTarget(r.key.target);
    if (!k.ok() || !t.ok() || !t->isGpu()) return {};
    TargetDesc td = *t;
    if (auto sku = gpuForDeviceName(r.provenance.cpu_model))
      if (auto own = targetOfGpu(sku->name, td); own.ok()) td = *own;
    auto p = tuneProblem(*k, td);
    return p.ok() ? p->prior : Prior{};
  }
  return {};
}

namespace {

class Session {
 public:
  Session(const TuneProblem& p, Measurer& m, cache::RecordStore* store, cache::CacheClient* client,
          const cache::Provenance& prov, const SessionSettings& s, const SessionCallbacks& cb)
      : p_(p), measurer_(m), store_(store), client_(client && client->enabled() ? client : nullptr), prov_(prov),
        s_(s), cb_(cb) {
    r_.key = p.key;
    r_.keyId = cache::keyIdOf(p.key);
  }

  Expected<SessionResult> run(const std::vector<cache::Record>* warmRecords) {
    const auto sessionStart = std::chrono::steady_clock::now();
    if (store_ && !p_.kernelText.empty())
      if (Status kept = store_->putKernelText(p_.key.workload, p_.kernelText); !kept.ok())
        warn("could not keep the kernel's text (its winners cannot be rebuilt from this store): " + kept.error().message);
    if (store_ && client_) push();
    std::vector<cache::Record> stored;
    if (store_) {
      TESSERA_ASSIGN(stored, cache::listAll(*store_, {.key_id = r_.keyId}));
    }
    if (s_.cache == CachePolicy::UseStored) {
      const bool answered = lookUpWinner();
      if (lost_) return *lost_;  // verifying a hit lost the measurer (measurer.h)
      if (answered || lookUpEstimate(stored)) return std::move(r_);
    }
    std::vector<TrialResult> previous = seeds(stored);

    const bool evolutionary = s_.loop.search.strategy == "evolutionary";
    std::unique_ptr<costmodel::CostModel> model;
    if (evolutionary) model = costmodel::makeXGBoostModel(s_.model);
    // What the store and the shared cache know of other workloads and other GPUs, read once.
    const bool transfer = evolutionary && s_.transfer.enabled && p_.key.target != "host";
    std::vector<cache::Record> listed;
    const std::vector<cache::Record>* known = warmRecords;
    if (!known && evolutionary && (s_.warmStart || transfer)) {
      listed = warmStartRecords(transfer);
      known = &listed;
    }
    FeaturesForKey featuresFor = p_.features;
    Prior prior = p_.prior;
    std::shared_ptr<const Transfer> transferred;
    if (transfer && known) {
      auto t = std::make_shared<const Transfer>(makeTransfer(*known, p_.key, p_.features, s_.transfer));
      if (t->gpus > 0) {
        transferred = t;
        if (s_.transfer.asFeature) featuresFor = withTransferFeature(featuresFor, t);
        if (s_.transfer.asPrior) prior = transferPrior(t);
        r_.transferGpus = t->gpus;
        r_.transferFrom = t->from;
        if (cb_.onTransfer) cb_.onTransfer(*t);
      }
    }
    auto features = featuresFor(p_.key);
    if (model && s_.warmStart && known) warmStart(*model, *known, featuresFor);
    // Another GPU's landscape is most often wrong about a switch (staging in local memory wins on
    // one GPU and loses on the other): with a transfer, every batch spans the two-valued knobs.
    // Those slots span the switches already, from the other GPUs' view of both sides, so the niche
    // slot over switches (NicheSettings), which buys that view with this GPU's own
    // trials, is off in a search led by other GPUs' records (the twin that takes over once they
    // are dropped has it).
    // Replay (search_efficiency --transfer, 20 seeds, median trials to 95 %): with the niche in
    // both arms, the convolution group 1.83x (W6600 148, A100 184), the Xgemm pair's 3090 46
    // against cold 63, the convolution pair's A100 121 against 101; off in the transfer-led
    // search only: 1.93x, 46, 121; off in both: 2.16x, 32, 94 (the transfer-led trials as before
    // the niche was on by default).
    SearchSettings searchWith = s_.loop.search;
    if (transferred) searchWith.niche.knobs = 0;
    if (transferred) searchWith.categorical.switches = true;
    // Led by other GPUs, the first batch is their best; half of each initial population bred
    // from the best measured here keeps the search near them (the transfer replays: the Xgemm
    // pair 19 trials with it, 25 without). A cold search's best are its first random draws, and
    // breeding from those costs it trials on the held-out tables (docs/search-notes.md); the
    // twin that takes over from dropped GPUs searches as a cold tune does.
    if (transferred) searchWith.evolution.offspringShare = s_.transfer.offspringShare;
    // The other GPUs' prior is a score, not a time: no share of its best rules a family out.
    // Its agreement is checked by the transfer itself (TransferSettings: the check).
    if (transferred && s_.transfer.asPrior) {
      searchWith.prior.dominated = false;
      searchWith.prior.checkZ = -1;
    }
    TESSERA_ASSIGN(auto strategy, makeStrategy(searchWith, p_.space, model.get(), features.get(), prior ? &prior : nullptr));
    if (transferred && s_.transfer.checkAfter > 0) {
      // The twin without the other GPUs, for when they disagree with this one.
      PlainSearch plain{costmodel::makeXGBoostModel(s_.model), p_.features(p_.key), nullptr};
      if (s_.warmStart && known) {
        auto w = warmStartSamples(*known, p_.key, p_.features, s_.warm);
        if (!w.samples.empty()) (void)plain.model->update(w.samples);
      }
      // The twin only searches once the other GPUs were dropped: their view of the switches is
      // gone with them, so it searches as a cold tune does, niche slot included.
      // Replay (search_efficiency --seeds 20 --transfer, median / p90 trials to 95 %, the twin
      // without -> with it): convolution pair A100 175/241 -> 162/249, MI250X 23/133 -> 22/60;
      // convolution group MI250X 14/63 -> 14/32, W6600 21/328 -> 23/193, A100 191/237 ->
      // 182/260; the Xgemm pair and group unchanged at the median (2080 Ti pair p90 130 -> 105).
      TESSERA_ASSIGN(plain.strategy, makeStrategy(s_.loop.search, p_.space, plain.model.get(), plain.features.get(),
                                                  p_.prior ? &p_.prior : nullptr));
      strategy = agreementGate(std::move(strategy), std::move(plain), transferred, s_.transfer, [this](double rho) {
        r_.transferDropped = true;
        r_.transferAgreement = rho;
        if (cb_.onTransferDropped) cb_.onTransferDropped(rho);
      });
    }
    if (transferred) {
      // All the other GPUs lead from the first batch, pooled (the check may drop them), said once.
      r_.transferLed = transferred->from;
      if (cb_.onTransferLed) cb_.onTransferLed(r_.transferLed);
    }

    TuneCallbacks cb;
    cb.commitRecords = [this](const std::vector<TrialResult>& rs) { commit(rs); };
    cb.onTrial = [this](const TrialResult& t, const TuneProgress& pr) {
      ++r_.statusCounts[trialStatusName(t.status)];
      if (cb_.onTrial) cb_.onTrial(t, pr);
    };
    cb.shouldStop = [this](const TuneProgress& pr) {
      if (cb_.shouldStop && cb_.shouldStop(pr)) r_.stopped = true;
      return r_.stopped;
    };
    started_ = std::chrono::steady_clock::now();
    // The time budget is the session's: what the outbox, the lookups and the warm start took
    // comes off the search's share.
    TuneSettings loop = s_.loop;
    if (loop.timeBudgetSec > 0)
      loop.timeBudgetSec = std::max(0.001, loop.timeBudgetSec - std::chrono::duration<double>(started_ - sessionStart).count());
    std::optional<LoadWatchingMeasurer> watch;
    if (cb_.loadControl) {
      watch.emplace(measurer_, cb_.loadControl);
      r_.timing.watched = true;
      r_.timing.before = readLoad();
    }
    Measurer& measuring = watch ? static_cast<Measurer&>(*watch) : measurer_;
    TESSERA_ASSIGN(r_.tune, tune(p_.space, measuring, *strategy, model.get(), features.get(), loop, cb, previous));
    if (watch) TESSERA_TRY(judgeTiming(*watch, loop));
    if (!r_.tune.best) {
      r_.outcome = SessionResult::Outcome::NothingCorrect;
      // The failures are records too: the shared cache shows what was tried.
      if (store_ && client_ && s_.pushToCache) push();
      return std::move(r_);
    }
    storeWinner();
    const auto& b = *r_.tune.best;
    const auto& d = r_.tune.defaultConfig;
    if (d && d->ok() && b.samples.median_us > 0) r_.speedupOverDefault = d->samples.median_us / b.samples.median_us;
    r_.outcome = SessionResult::Outcome::Tuned;
    return std::move(r_);
  }

 private:
  bool lose(Error e) {
    lost_ = std::move(e);
    return false;
  }

  void warn(const std::string& w) {
    if (!w.empty() && cb_.onWarning) cb_.onWarning(w);
  }

  // Cache first (ARCHITECTURE.md §2): a fresh winner, local or shared, ends the session. A shared hit,
  // and a local winner this machine neither measured nor saw confirmed (a worker's claim), is used
  // only once the front end verified it (verify_hit.h); what that measured here is kept.
  bool lookUpWinner() {
    std::optional<cache::Record> hit;
    bool stale = false;
    if (store_) {
      auto local = store_->best(r_.keyId);
      // The key's winner may be another machine's of the same kind (two GPU products of one chip
      // and SM count, two CPUs of one ISA level and core count): this machine's own best first,
      // as the shared cache answers (api_records.cpp: answerFor).
      if (local.ok() && *local && !cache::provenanceMismatch((*local)->record.provenance, prov_).empty()) {
        auto own = store_->bestMatching(r_.keyId, prov_);
        if (own.ok() && *own) local = own;
      }
      if (local.ok() && *local) {
        hit = (*local)->record;
        stale = hit->stale || !cache::provenanceMismatch(hit->provenance, prov_).empty();
        r_.cachedFrom = "local";
        if (!stale && !cache::isConfirmed(hit->trust)) {
          HitCheck check;
          Status verified = cb_.verifySharedHit ? cb_.verifySharedHit(*hit, &check) : Status{};
          if (check.lost) return lose(std::move(*check.lost));
          keepMeasuredHere(check);
          if (!verified.ok()) {
            warn("the stored winner for this kernel is a claim of " + claimant(*hit) + " that failed verification (" +
                 verified.error().message + "): not used, tuning");
            return false;
          }
          r_.cachedWasClaim = true;
        }
      }
    }
    if (!hit && client_) {
      auto remote = client_->best(p_.key, prov_, false);
      warn(remote.warning);
      if (remote.kind == cache::LookupResult::Kind::Hit && remote.record) {
        HitCheck check;
        Status verified = cb_.verifySharedHit ? cb_.verifySharedHit(*remote.record, &check) : Status{};
        if (check.lost) return lose(std::move(*check.lost));
        keepMeasuredHere(check);
        if (!verified.ok()) {
          warn("the shared cache's winner for this kernel failed verification (" + verified.error().message +
               "): not used, tuning");
          return false;
        }
        hit = remote.record;
        stale = remote.stale;
        r_.cachedFrom = client_->options().base_url;
        r_.cachedWasClaim = !cache::isConfirmed(hit->trust);
        // A local copy, kept as what it is: its writer's claim (confirmed here by the measurement
        // kept above, when one was taken).
        if (store_)
          (void)store_->putOne(*hit, {.writer = claimant(*hit), .trusted = false});
      }
    }
    if (!hit || stale) return false;
    r_.cached = hit;
    r_.outcome = SessionResult::Outcome::AlreadyTuned;
    return true;
  }

  static std::string claimant(const cache::Record& r) { return r.writer.empty() ? "shared" : r.writer; }

  // Pushes the outbox and adds what went to the run's account (the front end says it in one line).
  void push() {
    cache::OutboxReport rep = cache::pushOutbox(*store_, *client_);
    r_.pushed.to = client_->options().base_url;
    r_.pushed.records += rep.pushed;
    r_.pushed.rejected += rep.rejected;
    r_.pushed.remaining = rep.remaining;
    warn(rep.warning);
  }

  // What a verification measured here is this machine's measurement of the config: stored as its
  // own (vouched in the local store) and shared, where the service weighs it against the claim.
  void keepMeasuredHere(const HitCheck& check) {
    if (!check.here || !check.here->ok() || !store_) return;
    cache::Record mine = toRecord(*check.here, p_.key, prov_, {0, 0});
    (void)store_->putOne(mine, {.outbox = client_ && s_.pushToCache});
    if (client_ && s_.pushToCache) push();
  }

  // Estimating: the best stored estimate of the current model ends the session like a winner.
  bool lookUpEstimate(const std::vector<cache::Record>& stored) {
    if (s_.acceptEstimatesOf.empty()) return false;
    const cache::Record* best = nullptr;
    // An estimate is of one product: another product of the key's chip and SM count (an RTX 4080
    // and an RTX 4090 Laptop) has other clocks and bandwidth.
    for (const auto& r : stored)
      if (r.status == cache::RecordStatus::Estimated && r.estimator == s_.acceptEstimatesOf &&
          (prov_.cpu_model.empty() || r.provenance.cpu_model == prov_.cpu_model) && (!best || r.median_us < best->median_us))
        best = &r;
    if (!best) return false;
    r_.cached = *best;
    r_.cachedFrom = "local";
    r_.outcome = SessionResult::Outcome::AlreadyTuned;
    return true;
  }

  // What the store already knows seeds the search: everything with --resume; otherwise the ok
  // results (stale or partial, re-measured rather than trusted); nothing with --force.
  std::vector<TrialResult> seeds(const std::vector<cache::Record>& stored) const {
    std::vector<TrialResult> previous;
    if (s_.cache == CachePolicy::Resume) return fromRecords(stored);
    if (s_.cache == CachePolicy::UseStored)
      for (auto& t : fromRecords(stored))
        if (t.ok()) previous.push_back(t);
    return previous;
  }

  // The model starts from what the store knows of other workloads of this family on this target.
  // A warm start is an optimization: a store that cannot list never fails the session.
  void warmStart(costmodel::CostModel& model, const std::vector<cache::Record>& source, const FeaturesForKey& features) {
    r_.warm = warmStartSamples(source, p_.key, features, s_.warm);
    if (r_.warm.samples.empty()) return;
    (void)model.update(r_.warm.samples);
    if (cb_.onWarmStart) cb_.onWarmStart(r_.warm);
  }

  // What the warm start learns from: the store's records of other shapes of the family on this
  // target, and this kernel's records on other GPUs, from the store and from the shared cache (a
  // team's measurements on its other GPUs). Shared records only train the model, never become a
  // winner: a poisoned one can slow a search, not put a kernel in the store. Listing is an
  // optimization: a failure is a warning, never the session's end.
  std::vector<cache::Record> warmStartRecords(bool otherGpus) {
    std::vector<cache::Record> out;
    if (store_ && s_.warmStart && s_.warm.siblings) {
      auto others = cache::listAll(*store_, {.family = p_.key.family, .target = p_.key.target, .arch = p_.key.arch}, s_.warmScanLimit);
      if (others.ok()) out = std::move(*others);
    }
    if (!otherGpus || p_.key.target == "host") return out;
    std::set<std::pair<std::string, std::string>> seen;  // (key, config): the store and the cache hold copies
    for (const auto& r : out) seen.insert({r.key_id, r.config});
    auto keep = [&](std::vector<cache::Record>& rs) {
      for (auto& r : rs)
        if (transferSource(p_.key, r.key) && seen.insert({r.key_id, r.config}).second) out.push_back(std::move(r));
    };
    const cache::ListQuery q{.family = p_.key.family, .workload = p_.key.workload, .dtype = p_.key.dtype, .layout = p_.key.layout};
    if (store_) {
      auto mine = cache::listAll(*store_, q, s_.warmScanLimit);
      if (mine.ok()) keep(*mine);
    }
    if (client_) {
      cache::ListQuery cq = q;
      cq.limit = cache::kMaxListLimit;
      for (size_t pages = 0; pages < s_.transferPages; ++pages) {
        auto page = client_->list(cq);
        if (!page.ok()) {
          warn("the shared cache's records of this kernel on other GPUs: " + page.error().message + " (continuing without them)");
          break;
        }
        keep(page->records);
        if (!page->next_after) break;
        cq.after_id = page->next_after;
      }
    }
    return out;
  }

  // Each record carries the tuning cost spent up to it (trials so far, seconds so far).
  void commit(const std::vector<TrialResult>& rs) {
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    std::vector<cache::Record> recs, mine, shared;
    for (const auto& t : rs) {
      recs.push_back(toRecord(t, p_.key, prov_, {++committed_, secs}));
      (t.origin && t.origin->shared ? shared : mine).push_back(recs.back());
    }
    if (store_) {
      auto put = store_->put(mine, {.outbox = client_ && s_.pushToCache});
      if (!put.ok()) warn("could not store results: " + put.error().str());
      // Records a worker already stored in the shared cache are kept here as what they are: that
      // worker's claims (trust.h), never pushed again.
      for (size_t i = 0, j = 0; i < rs.size(); ++i) {
        if (!(rs[i].origin && rs[i].origin->shared)) continue;
        auto kept = store_->putOne(shared[j++], {.outbox = false, .writer = rs[i].origin->writer, .trusted = false});
        if (!kept.ok()) warn("could not store results: " + kept.error().str());
      }
    }
    if (cb_.onRecordsCommitted) cb_.onRecordsCommitted(recs);
  }

  // The winner, re-measured interleaved, is stored with the run's tuning cost and marked so: it
  // outranks the single measurements of the search (a lucky sample among them would otherwise be
  // what `tessera best`, the benches and the service serve). A winner measured by workers is their
  // claim: this machine checks it first when it can (spotCheck), and shares only what it measured.
  // The verdict on the final re-measurement (timing_load.h): busy once, the finalists are
  // re-measured once more (interleaved, the default among them); still busy, one warning, and the
  // winner is stored without the re-measured mark (storeWinner).
  Status judgeTiming(LoadWatchingMeasurer& watch, const TuneSettings& loop) {
    TimingLoad& tl = r_.timing;
    auto judge = [&] {
      ++tl.remeasures;
      tl.control = watch.lastControl();
      tl.spread = r_.tune.best ? spreadOf(*r_.tune.best) : 0;
    };
    if (r_.tune.remeasured.empty() || !r_.tune.best) {
      tl.after = readLoad();
      return {};
    }
    judge();
    if (tl.isBusy() && !r_.stopped) {  // a stopped tune (Ctrl-C) is not kept waiting
      std::vector<ir::Config> configs;
      for (const auto& t : r_.tune.remeasured)
        if (t.ok()) configs.push_back(t.config);
      TESSERA_ASSIGN(auto again, watch.remeasure(configs, std::max(loop.remeasureRounds, 1)));
      std::optional<TrialResult> best;
      for (const auto& t : again) {
        if (r_.tune.defaultConfig && t.ok() && t.config == r_.tune.defaultConfig->config) r_.tune.defaultConfig = t;
        if (t.ok() && (!best || t.throughput > best->throughput)) best = t;
      }
      if (best) {
        r_.tune.remeasured = again;
        r_.tune.best = best;
        judge();
      }
    }
    tl.after = readLoad();
    tl.busy = tl.isBusy();
    if (tl.busy) warn(tl.warning());
    return {};
  }

  void storeWinner() {
    TuningCost cost{int64_t(r_.tune.trials.size()), r_.tune.seconds};
    if (r_.tune.best->origin && r_.tune.best->ok() && !r_.tune.best->estimated && cb_.measureHere) spotCheck(cost);
    const TrialResult& best = *r_.tune.best;
    cache::Record winner = toRecord(best, p_.key, prov_, cost);
    winner.remeasured = (!r_.tune.remeasured.empty() || r_.spot.remeasuredHere) && winner.status == cache::RecordStatus::Ok;
    if (r_.spot.ran && r_.spot.agreed) winner.remeasured = false;  // one measurement here, of the workers' winner
    if (r_.timing.busy) winner.remeasured = false;  // measured under load: never over a quiet winner
    r_.winner = winner;
    // An estimate is already stored as the trial it was; only a re-measured winner is new. Either
    // way the run's records go to the shared cache now (an estimating run used to leave them in
    // the outbox until the next run).
    if (!store_) return;
    if (winner.status == cache::RecordStatus::Ok && best.origin) {
      // Nobody here measured it: kept as the worker's claim (confirmed only when another identity
      // measures the config), never pushed under this tuner's name.
      (void)store_->putOne(winner, {.outbox = false, .writer = best.origin->writer, .trusted = false});
    } else if (winner.status == cache::RecordStatus::Ok) {
      (void)store_->putOne(winner, {.outbox = client_ && s_.pushToCache});
    }
    if (client_ && s_.pushToCache) push();
    // The key's winner is the store's to decide (a resumed run's re-measured best can lose to an
    // earlier run's re-measured record): the front end shows what `best` will serve.
    if (winner.status == cache::RecordStatus::Ok)
      if (auto served = store_->best(r_.keyId); served.ok() && *served && (*served)->record.config != winner.config)
        r_.served = (*served)->record;
  }

  // The spot check (issue 25): this machine measures the workers' winner itself. When its time
  // agrees (within the noise), that measurement is the winner stored and shared (it confirms the
  // worker's record on the service). A first time that contradicts the claim is not yet a verdict
  // (one re-timing on a loaded machine read 928x an honest claim): the winner is re-timed
  // kSpotRounds more times, each between two readings of the control at the claimed thread count,
  // and only the best quiet re-timing counts. When it still contradicts, the worker is reported (the
  // service quarantines it with its records) and the top candidates are re-measured here, whose
  // best is the winner; when no re-timing was quiet, nothing is reported and the claim stays
  // unconfirmed. When this machine cannot measure, the winner stays the worker's claim.
  static constexpr int kSpotRounds = 5;

  void spotCheck(const TuningCost& cost) {
    const TrialResult claimed = *r_.tune.best;
    SpotCheck& sc = r_.spot;
    sc.claimed_us = claimed.samples.median_us;
    sc.writer = claimed.origin->writer;
    sc.worker = claimed.origin->workerId;
    auto here = cb_.measureHere({claimed.config});
    if (!here || here->size() != 1 || !here->front().ok() || here->front().origin) return;
    sc.ran = true;
    TrialResult mine = here->front();
    sc.first_us = sc.here_us = mine.samples.median_us;
    sc.agreed = !cache::contradicts(sc.claimed_us, sc.here_us, cb_.spotAgreeFactor);
    if (!sc.agreed) {
      std::optional<TrialResult> best = retimeQuietly(claimed.config);
      if (!best) {
        sc.judged = false;
        sc.agreed = true;  // not contradicted: nothing here says the worker lied
        warn("worker " + sc.worker + "'s winner (claimed " + formatMicros(sc.claimed_us) + ") re-timed here at " + formatMicros(sc.first_us) +
             ", but this machine was busy in all " + std::to_string(sc.rounds) + " re-timings (the control ran up to " + formatRatio(sc.busiest) +
             " slower than on free cores): not judged, the worker is not reported and its claim stays unconfirmed");
        return;
      }
      mine = *best;
      sc.here_us = mine.samples.median_us;
      sc.agreed = !cache::contradicts(sc.claimed_us, sc.here_us, cb_.spotAgreeFactor);
    }
    // The record the service gets is the one storeWinner shares when it agrees (one record, not two).
    if (cb_.reportSpotCheck) cb_.reportSpotCheck(claimed, toRecord(mine, p_.key, prov_, cost));
    if (sc.agreed) {
      r_.tune.best = mine;
      return;
    }
    warn("worker " + sc.worker + " (token " + sc.writer + ") claimed " + formatMicros(sc.claimed_us) +
         " for the winner; this machine measured " + formatMicros(sc.here_us) + " (best of " + std::to_string(sc.quiet) +
         " quiet re-timings): its results are not trusted, the top candidates are re-measured here");
    std::vector<ir::Config> top;
    for (const auto& t : r_.tune.remeasured) top.push_back(t.config);
    if (top.empty()) top.push_back(claimed.config);
    auto again = cb_.measureHere(top);
    std::optional<TrialResult> best;
    for (const auto& t : again.value_or(std::vector<TrialResult>{}))
      if (t.ok() && !t.origin && (!best || t.samples.median_us < best->samples.median_us)) best = t;
    r_.tune.best = best ? *best : mine;
    sc.remeasuredHere = best.has_value() && top.size() > 1;
  }

  // The best of kSpotRounds re-timings of `config` taken while the control said the cores were free
  // (before and after each); nullopt when none was.
  std::optional<TrialResult> retimeQuietly(const ir::Config& config) {
    SpotCheck& sc = r_.spot;
    const int threads = config.hostThreads();
    auto control = [&] { return cb_.controlHere ? cb_.controlHere(threads) : 1.0; };
    std::optional<TrialResult> best;
    for (int r = 0; r < kSpotRounds; ++r) {
      const double before = control();
      auto again = cb_.measureHere({config});
      const double slowdown = std::max(before, control());
      if (!again || again->size() != 1 || !again->front().ok() || again->front().origin) continue;
      ++sc.rounds;
      sc.busiest = std::max(sc.busiest, slowdown);
      if (slowdown > kQuietSlowdown) continue;
      ++sc.quiet;
      if (!best || again->front().samples.median_us < best->samples.median_us) best = again->front();
    }
    return best;
  }

  const TuneProblem& p_;
  Measurer& measurer_;
  cache::RecordStore* store_;
  cache::CacheClient* client_;
  cache::Provenance prov_;
  const SessionSettings& s_;
  const SessionCallbacks& cb_;
  SessionResult r_;
  int64_t committed_ = 0;
  std::chrono::steady_clock::time_point started_;
  std::optional<Error> lost_;  // the measurer's error while verifying a hit: the session's answer
};

}  // namespace

Expected<SessionResult> runTuneSession(const TuneProblem& p, Measurer& measurer, cache::RecordStore* store,
                                       cache::CacheClient* client, const cache::Provenance& provenance,
                                       const SessionSettings& s, const SessionCallbacks& cb,
                                       const std::vector<cache::Record>* warmRecords) {
  return Session(p, measurer, store, client, provenance, s, cb).run(warmRecords);
}

}  // namespace tessera::session
