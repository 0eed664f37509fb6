// Owns transfer across GPUs: the other GPUs' records, their model, and its score as a feature and
// a prior of the session.
#include "search/transfer.h"

#include <algorithm>
#include <cmath>
#include <map>

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
  if (!knobs || !model) return 0;
  return predictOne(*model, *knobs, c);
}

double Transfer::landscapeScore(const ir::Config& c) const {
  if (!knobs || !landscape) return score(c);
  return predictOne(*landscape, *knobs, c);
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
  auto [model, landscape] = trainPair(samples, ms);
  if (!model) return Transfer{};
  out.landscape = std::move(landscape);
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

class AgreementGate : public SearchStrategy {
 public:
  AgreementGate(std::unique_ptr<SearchStrategy> a, PlainSearch b, std::shared_ptr<const Transfer> t, TransferSettings s,
                std::function<void(double)> onSwitch)
      : with_(std::move(a)), plain_(std::move(b)), t_(std::move(t)), s_(std::move(s)), onSwitch_(std::move(onSwitch)) {}

  std::vector<ir::Config> propose(size_t n) override { return trusted_ ? with_->propose(n) : plain_.strategy->propose(n); }

  void observe(const std::vector<TrialResult>& results) override {
    with_->observe(results);
    plain_.strategy->observe(results);
    for (const auto& r : results) {
      scores_.push_back(t_->landscapeScore(r.config));
      measured_.push_back(r.ok() ? r.throughput : 0.0);
      pending_.push_back({plain_.features->extract(r.config), measured_.back(), 0});
    }
    if (trusted_ && s_.checkAfter > 0 && measured_.size() >= size_t(s_.checkAfter)) {
      // Once the other GPUs disagreed, the search stays without them.
      const double rho = rankCorrelation(scores_, measured_);
      if (rho < s_.minAgreement) {
        trusted_ = false;
        if (onSwitch_) onSwitch_(rho);
      }
    }
    // The plain model learns once it proposes: on taking over, every result so far at once, and
    // then in step with each batch, as a tune without the transfer trains it.
    if (!trusted_ && !pending_.empty()) {
      (void)plain_.model->update(pending_);
      pending_.clear();
    }
  }

  bool exhausted() const override { return trusted_ ? with_->exhausted() : plain_.strategy->exhausted(); }

 private:
  std::unique_ptr<SearchStrategy> with_;
  PlainSearch plain_;
  std::shared_ptr<const Transfer> t_;
  TransferSettings s_;
  std::function<void(double)> onSwitch_;
  std::vector<double> scores_, measured_;
  std::vector<costmodel::Sample> pending_;
  bool trusted_ = true;
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

std::unique_ptr<SearchStrategy> agreementGate(std::unique_ptr<SearchStrategy> withTransfer, PlainSearch plain,
                                              std::shared_ptr<const Transfer> t, const TransferSettings& s,
                                              std::function<void(double)> onSwitch) {
  return std::make_unique<AgreementGate>(std::move(withTransfer), std::move(plain), std::move(t), s, std::move(onSwitch));
}

}  // namespace tessera::search
