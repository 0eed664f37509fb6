// Owns transfer across GPUs: the other GPUs' records, their model, and its score as a feature and
// a prior of the session.
#include "search/transfer.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "measure/records.h"

namespace tessera::search {

using measure::TrialResult;
using measure::trialStatusOf;

namespace {

double predictOne(costmodel::CostModel& m, const costmodel::FeatureExtractor& knobs, const ir::Config& c) {
  return m.predict({knobs.extract(c)}).front();
}

// The ranking model and the landscape (a regression on each record's share of its GPU's best)
// trained on `samples`; null models when they cannot train.
std::pair<std::shared_ptr<costmodel::CostModel>, std::shared_ptr<costmodel::CostModel>> trainPair(
    const std::vector<costmodel::Sample>& samples, const costmodel::ModelSettings& ms) {
  std::shared_ptr<costmodel::CostModel> model(costmodel::makeXGBoostModel(ms));
  if (!model->update(samples).ok() || !model->trained()) return {};
  costmodel::ModelSettings ls = ms;
  ls.objective = "reg:squarederror";
  ls.relevanceLevels = 0;
  std::shared_ptr<costmodel::CostModel> landscape(costmodel::makeXGBoostModel(ls));
  if (!landscape->update(samples).ok() || !landscape->trained()) landscape.reset();
  return {std::move(model), std::move(landscape)};
}

}  // namespace

double Transfer::score(const ir::Config& c) const {
  if (!knobs) return 0;
  if (lead && lead->model) return predictOne(*lead->model, *knobs, c);
  if (!model) return 0;
  return predictOne(*model, *knobs, c);
}

double Transfer::landscapeScore(const ir::Config& c) const {
  if (!knobs) return score(c);
  if (lead && lead->model) return lead->landscape ? predictOne(*lead->landscape, *knobs, c) : score(c);
  if (!landscape) return score(c);
  return predictOne(*landscape, *knobs, c);
}

double Transfer::sourceScore(size_t g, const ir::Config& c) const {
  if (g >= sources.size() || !sources[g].model || !knobs) return score(c);
  return predictOne(*sources[g].model, *knobs, c);
}

double Transfer::sourceLandscape(size_t g, const ir::Config& c) const {
  if (g >= sources.size() || !knobs) return landscapeScore(c);
  if (!sources[g].landscape) return sourceScore(g, c);
  return predictOne(*sources[g].landscape, *knobs, c);
}

void Transfer::leadWith(std::vector<size_t> gpus) const {
  std::sort(gpus.begin(), gpus.end());
  gpus.erase(std::unique(gpus.begin(), gpus.end()), gpus.end());
  gpus.erase(std::remove_if(gpus.begin(), gpus.end(), [&](size_t g) { return g >= sources.size(); }), gpus.end());
  if (!lead) return;
  *lead = Lead{};
  if (gpus.empty() || gpus.size() == sources.size()) return;  // all of them: the pooled models
  lead->sources = gpus;
  if (gpus.size() == 1) {
    lead->model = sources[gpus[0]].model;
    lead->landscape = sources[gpus[0]].landscape;
    return;
  }
  std::vector<costmodel::Sample> pooled;
  for (size_t i = 0; i < gpus.size(); ++i)
    for (auto x : sources[gpus[i]].samples) {
      x.group = int(i);
      pooled.push_back(std::move(x));
    }
  auto [m, l] = trainPair(pooled, settings);
  if (!m) return;  // the pooled models stay
  lead->model = std::move(m);
  lead->landscape = std::move(l);
}

Transfer makeTransfer(const std::vector<cache::Record>& records, const cache::HardKey& self,
                      const FeaturesForKey& features, const TransferSettings& s) {
  Transfer out;
  if (!s.enabled || s.maxGpus <= 0) return out;
  // The records of each other GPU (a key: its chip and SM count).
  std::map<std::string, std::vector<const cache::Record*>> byGpu;
  for (const auto& r : records)
    if (transferSource(self, r.key) && trialStatusOf(r.status)) byGpu[r.key_id.empty() ? cache::keyIdOf(r.key) : r.key_id].push_back(&r);
  std::vector<std::pair<size_t, std::string>> order;
  for (const auto& [id, rs] : byGpu) order.push_back({rs.size(), id});
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  if (order.size() > size_t(s.maxGpus)) order.resize(size_t(s.maxGpus));

  std::shared_ptr<const costmodel::FeatureExtractor> knobs(features(self).release());
  std::vector<costmodel::Sample> samples;
  int group = 0;
  for (const auto& [n, id] : order) {
    auto drawn = warmStartDraw(byGpu[id], size_t(std::max(s.maxRecordsPerGpu, 1)), s.seed + uint64_t(group));
    std::vector<costmodel::Sample> mine;
    for (const auto* r : drawn) {
      auto cfg = ir::Config::fromJson(r->config);
      if (!cfg.ok()) continue;
      mine.push_back({knobs->extract(*cfg), recordThroughput(*r), group});
    }
    if (std::none_of(mine.begin(), mine.end(), [](const costmodel::Sample& x) { return x.throughput > 0; })) continue;
    const cache::HardKey& k = drawn.front()->key;
    const std::string& model = drawn.front()->provenance.cpu_model;
    out.from.push_back((model.empty() ? k.target : model) + " (" + k.target + ", " + std::to_string(k.units) +
                       " units): " + std::to_string(mine.size()) + " records");
    out.records += mine.size();
    samples.insert(samples.end(), mine.begin(), mine.end());
    Transfer::Source src{out.from.back(), nullptr, nullptr, std::move(mine)};
    for (auto& x : src.samples) x.group = 0;
    out.sources.push_back(std::move(src));
    ++group;
  }
  if (group == 0) return out;
  costmodel::ModelSettings ms = s.model;
  ms.seed = s.seed;
  out.settings = ms;
  auto [model, landscape] = trainPair(samples, ms);
  if (!model) return Transfer{};
  out.landscape = std::move(landscape);
  out.model = std::move(model);
  // Each GPU's own models, for the probe to judge it by (one GPU: the pooled ones are its own).
  if (out.sources.size() == 1 || !s.perGpu) {
    out.sources[0].model = out.model;
    out.sources[0].landscape = out.landscape;
  } else {
    for (auto& src : out.sources) std::tie(src.model, src.landscape) = trainPair(src.samples, ms);
  }
  out.knobs = std::move(knobs);
  out.gpus = group;
  return out;
}

namespace {

// `base` plus one column computed by the transfer model.
class WithTransfer : public costmodel::FeatureExtractor {
 public:
  WithTransfer(std::unique_ptr<costmodel::FeatureExtractor> base, std::shared_ptr<const Transfer> t)
      : base_(std::move(base)), t_(std::move(t)) {}
  std::vector<float> extract(const ir::Config& c) const override {
    std::vector<float> f = base_->extract(c);
    f.push_back(float(t_->score(c)));
    return f;
  }
  std::vector<std::string> names() const override {
    auto n = base_->names();
    n.push_back("transfer_score");
    return n;
  }

 private:
  std::unique_ptr<costmodel::FeatureExtractor> base_;
  std::shared_ptr<const Transfer> t_;
};

}  // namespace

FeaturesForKey withTransferFeature(FeaturesForKey base, std::shared_ptr<const Transfer> t) {
  return [base, t](const cache::HardKey& k) -> std::unique_ptr<costmodel::FeatureExtractor> {
    return std::make_unique<WithTransfer>(base(k), t);
  };
}

Prior transferPrior(std::shared_ptr<const Transfer> t) {
  return [t](const ir::Config& c) -> std::optional<double> { return -t->score(c); };
}

namespace {

// The one-sided normal quantile that keeps the family-wise level of `tests` tests at that of one
// test at `z` (Sidak: 1 - (1 - a)^(1/tests)); `z` itself for one test or z <= 0.
double familyZ(double z, size_t tests) {
  if (tests <= 1 || z <= 0) return z;
  const double alpha = 0.5 * std::erfc(z / std::sqrt(2.0));
  const double each = 1 - std::pow(1 - alpha, 1.0 / double(tests));
  double lo = z, hi = 10;  // bisection on the upper tail 0.5 erfc(x / sqrt 2), decreasing in x
  for (int i = 0; i < 60; ++i) {
    const double mid = 0.5 * (lo + hi);
    (0.5 * std::erfc(mid / std::sqrt(2.0)) > each ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

class AgreementGate : public SearchStrategy {
 public:
  AgreementGate(std::unique_ptr<SearchStrategy> a, PlainSearch b, std::shared_ptr<const Transfer> t, TransferSettings s,
                std::function<void(double)> onSwitch, std::function<void(const std::vector<size_t>&)> onLead)
      : with_(std::move(a)), plain_(std::move(b)), t_(std::move(t)), s_(std::move(s)), onSwitch_(std::move(onSwitch)),
        onLead_(std::move(onLead)),
        judged_(s_.perGpu ? t_->sources.size() : 1), perLandscape_(judged_), perRanked_(judged_),
        phase_(s_.probeTrials > 0 ? Phase::Probe : Phase::Trusted) {}

  std::vector<ir::Config> propose(size_t n) override {
    if (phase_ != Phase::Trusted) {
      // The probe's last batch stops at its size: the judgement comes before the transfer leads.
      if (phase_ == Phase::Probe && measured_.size() < size_t(s_.probeTrials)) n = std::min(n, size_t(s_.probeTrials) - measured_.size());
      return plain_.strategy->propose(n);
    }
    return with_->propose(n);
  }

  void observe(const std::vector<TrialResult>& results) override {
    with_->observe(results);
    plain_.strategy->observe(results);
    for (const auto& r : results) {
      configs_.push_back(r.config);
      scores_.push_back(t_->landscapeScore(r.config));
      if (phase_ == Phase::Probe)
        for (size_t g = 0; g < judged_; ++g) {
          perLandscape_[g].push_back(s_.perGpu ? t_->sourceLandscape(g, r.config) : t_->landscapeScore(r.config));
          perRanked_[g].push_back(s_.perGpu ? t_->sourceScore(g, r.config) : t_->score(r.config));
        }
      measured_.push_back(r.ok() ? r.throughput : 0.0);
      if (measured_.back() > best_) {
        best_ = measured_.back();
        lastBest_ = measured_.size();
      }
      pending_.push_back({plain_.features->extract(r.config), measured_.back(), 0});
    }
    if (phase_ == Phase::Probe && measured_.size() >= size_t(s_.probeTrials)) {
      // Judged on the cold tune's own trials (the transfer's picks, all from the other GPUs' top,
      // would bias it), as a sequential test (TransferSettings), each other GPU on its own, by its
      // landscape's rank correlation with this GPU's results (probeModels: the ranking model's
      // graded labels tie the slow bulk, so its order of a probe's mostly slow results is noise;
      // what keeps chance agreements out, as the A100's with the MI250X, is the test's bound).
      // The GPUs that agree lead, pooled; those that disagree drop out (a team's cache holds
      // both: an RTX A6000 ranks an RTX A4000's space at 0.92, a Radeon W7800 at 0.14); the tune
      // waits while some are undecided and none agrees.
      // Several GPUs judged at once: each test at probeZ, or (probeCorrected) at the
      // Sidak-corrected level, so that the chance of any GPU that disagrees passing stays that of
      // one (TransferSettings says why it is off by default).
      TransferSettings each = s_;
      if (s_.probeCorrected) each.probeZ = familyZ(s_.probeZ, judged_);
      std::vector<size_t> agree;
      bool undecided = false;
      double best = -1;
      for (size_t g = 0; g < judged_; ++g) {
        const double rho = probeRho(perLandscape_[g], perRanked_[g]);
        best = std::max(best, rho);
        const ProbeVerdict v = probeVerdict(rho, measured_.size(), each);
        if (v == ProbeVerdict::Agrees) agree.push_back(g);
        undecided = undecided || v == ProbeVerdict::Undecided;
      }
      if (!agree.empty()) {
        if (!s_.perGpu)  // the pool as one: all of them lead
          for (size_t g = 1; g < t_->sources.size(); ++g) agree.push_back(g);
        t_->leadWith(agree);
        phase_ = Phase::Trusted;
        if (onLead_) onLead_(agree);
        // The check judges the GPUs that lead, over every result.
        if (agree.size() < t_->sources.size())
          for (size_t i = 0; i < configs_.size(); ++i) scores_[i] = t_->landscapeScore(configs_[i]);
      } else if (!undecided) {
        phase_ = Phase::Plain;
        if (onSwitch_) onSwitch_(best);
      }
    } else if (phase_ == Phase::Trusted && s_.checkAfter > 0 && measured_.size() >= size_t(s_.checkAfter)) {
      // Checked while trusted: once the other GPUs disagreed, or stopped paying, the search stays
      // without them.
      const double rho = rankCorrelation(scores_, measured_);
      const bool stale = s_.staleAfter > 0 && measured_.size() - lastBest_ >= size_t(s_.staleAfter);
      if (rho < s_.minAgreement || stale) {
        phase_ = Phase::Plain;
        if (onSwitch_) onSwitch_(rho);
      }
    }
    // The plain model learns whenever the plain search proposes (in step with each batch, as a
    // tune without the transfer trains it), and on taking over, every result so far at once.
    if (phase_ != Phase::Trusted && !pending_.empty()) {
      (void)plain_.model->update(pending_);
      pending_.clear();
    }
  }

  // The probe's agreement of one GPU (TransferSettings::probeModels).
  double probeRho(const std::vector<double>& landscape, const std::vector<double>& ranked) const {
    const double l = rankCorrelation(landscape, measured_);
    return s_.probeModels == TransferSettings::ProbeModels::Landscape ? l : 0.5 * (l + rankCorrelation(ranked, measured_));
  }

  bool exhausted() const override { return phase_ == Phase::Trusted ? with_->exhausted() : plain_.strategy->exhausted(); }

 private:
  enum class Phase { Probe, Trusted, Plain };
  std::unique_ptr<SearchStrategy> with_;
  PlainSearch plain_;
  std::shared_ptr<const Transfer> t_;
  TransferSettings s_;
  std::function<void(double)> onSwitch_;
  std::function<void(const std::vector<size_t>&)> onLead_;
  std::vector<double> scores_, measured_;
  size_t judged_;  // the GPUs the probe judges on their own (perGpu), or 1: the pool
  std::vector<ir::Config> configs_;  // every result's, in order
  double best_ = 0;
  size_t lastBest_ = 0;  // results when the best so far was measured
  // Per other GPU, its landscape's and its ranking model's scores of the probe's results.
  std::vector<std::vector<double>> perLandscape_, perRanked_;
  std::vector<costmodel::Sample> pending_;
  Phase phase_;
};

}  // namespace

double rankCorrelation(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t n = std::min(a.size(), b.size());
  if (n < 3) return 0;
  std::vector<double> ra = ranks({a.begin(), a.begin() + std::ptrdiff_t(n)}), rb = ranks({b.begin(), b.begin() + std::ptrdiff_t(n)});
  const double mean = (double(n) + 1) / 2;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < n; ++i) {
    sab += (ra[i] - mean) * (rb[i] - mean);
    saa += (ra[i] - mean) * (ra[i] - mean);
    sbb += (rb[i] - mean) * (rb[i] - mean);
  }
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : 0;
}

ProbeVerdict probeVerdict(double rho, size_t n, const TransferSettings& s) {
  if (n < size_t(std::max(s.probeTrials, 0))) return ProbeVerdict::Undecided;
  // Fisher's z of Spearman's rho, standard error sqrt(1.06 / (n - 3)) (Fieller, Hartley and
  // Pearson): the bounds are those of a one-sided test at probeZ standard errors.
  const double z = std::atanh(std::clamp(rho, -0.9999, 0.9999));
  const double se = n > 3 ? std::sqrt(1.06 / double(n - 3)) : 1e9;
  if (std::tanh(z - s.probeZ * se) >= s.probeAgreement) return ProbeVerdict::Agrees;
  if (std::tanh(z + s.probeZ * se) < s.probeAgreement || n >= size_t(std::max(s.probeMaxTrials, s.probeTrials)))
    return ProbeVerdict::Disagrees;
  return ProbeVerdict::Undecided;
}

std::unique_ptr<SearchStrategy> agreementGate(std::unique_ptr<SearchStrategy> withTransfer, PlainSearch plain,
                                              std::shared_ptr<const Transfer> t, const TransferSettings& s,
                                              std::function<void(double)> onSwitch,
                                              std::function<void(const std::vector<size_t>&)> onLead) {
  return std::make_unique<AgreementGate>(std::move(withTransfer), std::move(plain), std::move(t), s, std::move(onSwitch),
                                         std::move(onLead));
}

}  // namespace tessera::search
