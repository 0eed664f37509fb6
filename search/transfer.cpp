// Owns transfer across GPUs: the other GPUs' records, their model, and its score as a feature and
// a prior of the session.
#include "search/transfer.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "measure/records.h"

namespace tessera::search {

double Transfer::score(const ir::Config& c) const {
  if (!model || !knobs) return 0;
  return model->predict({knobs->extract(c)}).front();
}

double Transfer::landscapeScore(const ir::Config& c) const {
  if (!landscape || !knobs) return score(c);
  return landscape->predict({knobs->extract(c)}).front();
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
    ++group;
  }
  if (group == 0) return out;
  costmodel::ModelSettings ms = s.model;
  ms.seed = s.seed;
  std::shared_ptr<costmodel::CostModel> model(costmodel::makeXGBoostModel(ms));
  if (!model->update(samples).ok() || !model->trained()) return Transfer{};
  costmodel::ModelSettings ls = ms;
  ls.objective = "reg:squarederror";
  ls.relevanceLevels = 0;
  std::shared_ptr<costmodel::CostModel> landscape(costmodel::makeXGBoostModel(ls));
  if (landscape->update(samples).ok() && landscape->trained()) out.landscape = std::move(landscape);
  out.model = std::move(model);
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

std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<size_t> idx(v.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < idx.size();) {
    size_t j = i;
    while (j + 1 < idx.size() && v[idx[j + 1]] == v[idx[i]]) ++j;
    for (size_t k = i; k <= j; ++k) r[idx[k]] = 0.5 * double(i + j) + 1;
    i = j + 1;
  }
  return r;
}

class AgreementGate : public SearchStrategy {
 public:
  AgreementGate(std::unique_ptr<SearchStrategy> a, PlainSearch b, std::shared_ptr<const Transfer> t, TransferSettings s,
                std::function<void(double)> onSwitch)
      : with_(std::move(a)), plain_(std::move(b)), t_(std::move(t)), s_(std::move(s)), onSwitch_(std::move(onSwitch)),
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
      scores_.push_back(t_->landscapeScore(r.config));
      if (phase_ == Phase::Probe) ranked_.push_back(t_->score(r.config));
      measured_.push_back(r.ok() ? r.throughput : 0.0);
      pending_.push_back({plain_.features->extract(r.config), measured_.back(), 0});
    }
    if (phase_ == Phase::Probe && measured_.size() >= size_t(s_.probeTrials)) {
      // Judged on the cold tune's own trials (the transfer's picks, all from the other GPUs' top,
      // would bias it), as a sequential test (TransferSettings). Both of the other GPUs' models
      // must rank them alike: the landscape (a regression: it orders the bulk of slow configs) and
      // the ranking model that leads once trusted (graded labels: it orders their top). The A100
      // and the MI250X agree on the convolution's bulk (slow tiles are slow on both), not on its
      // top (shared memory): on the A100's probes the ranking model's correlation is mostly
      // negative where the landscape's reaches 0.7-0.8 by chance. The mean of the two, not the
      // lesser: the ranking model's ties (most uniform draws are one grade) make it noisy on
      // landscapes that agree too.
      const double rho = 0.5 * (rankCorrelation(scores_, measured_) + rankCorrelation(ranked_, measured_));
      const ProbeVerdict v = probeVerdict(rho, measured_.size(), s_);
      if (v != ProbeVerdict::Undecided) phase_ = v == ProbeVerdict::Agrees ? Phase::Trusted : Phase::Plain;
      if (phase_ == Phase::Plain && onSwitch_) onSwitch_(rho);
    } else if (phase_ == Phase::Trusted && s_.checkAfter > 0 && measured_.size() >= size_t(s_.checkAfter)) {
      // Checked while trusted: once the other GPUs disagreed, the search stays without them.
      const double rho = rankCorrelation(scores_, measured_);
      if (rho < s_.minAgreement) {
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

  bool exhausted() const override { return phase_ == Phase::Trusted ? with_->exhausted() : plain_.strategy->exhausted(); }

 private:
  enum class Phase { Probe, Trusted, Plain };
  std::unique_ptr<SearchStrategy> with_;
  PlainSearch plain_;
  std::shared_ptr<const Transfer> t_;
  TransferSettings s_;
  std::function<void(double)> onSwitch_;
  std::vector<double> scores_, measured_;
  std::vector<double> ranked_;  // the ranking model's scores of the probe's results
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
                                              std::function<void(double)> onSwitch) {
  return std::make_unique<AgreementGate>(std::move(withTransfer), std::move(plain), std::move(t), s, std::move(onSwitch));
}

}  // namespace tessera::search
