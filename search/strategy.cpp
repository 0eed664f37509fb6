// Owns the strategy factory, the per-run search state, and the two simple strategies: `random`
// (uniform over the legal space, without replacement) and `exhaustive` (every legal config once).
#include "search/strategy.h"

#include <algorithm>
#include <limits>

#include "search/strategy_state.h"
#include "support/strings.h"

namespace tessera::search {

using measure::TrialResult;
using measure::configKey;

// The evolutionary and GA strategies live in strategy_evolutionary.cpp.
std::unique_ptr<SearchStrategy> makeEvolution(const SearchSettings& s, const ir::Space& space,
                                              costmodel::CostModel* model,
                                              const costmodel::FeatureExtractor* features, const Prior* prior);

namespace {

// Collisions in a row after which drawing gives way to the enumerated remainder.
constexpr int kMaxCollisions = 64;

}  // namespace

SearchState::SearchState(const ir::Space& space, uint64_t seed) : space_(space), rng_(seed) {
  if (space_.members) legalCount_ = space_.members->size();
}

void SearchState::observe(const std::vector<TrialResult>& results) {
  for (const auto& r : results) {
    seen_.insert(configKey(r.config));
    measured_.push_back(r);
  }
}

std::vector<const TrialResult*> SearchState::best(size_t n) const {
  std::vector<const TrialResult*> ok;
  for (const auto& r : measured_)
    if (r.ok() && r.throughput > 0) ok.push_back(&r);
  std::stable_sort(ok.begin(), ok.end(), [](const TrialResult* a, const TrialResult* b) {
    return a->throughput > b->throughput;
  });
  if (ok.size() > n) ok.resize(n);
  return ok;
}

bool SearchState::refillRemainder() {
  auto all = enumerateLegal(space_);
  if (!all) return false;  // too large to list: collisions there mean bad luck, not exhaustion
  remainder_.clear();
  for (auto& c : *all)
    if (!seen(c)) remainder_.push_back(std::move(c));
  std::shuffle(remainder_.begin(), remainder_.end(), rng_);
  usingRemainder_ = true;
  return true;
}

std::vector<ir::Config> SearchState::fresh(size_t n) {
  std::vector<ir::Config> out;
  if (exhausted_) return out;
  if (legalCount_ && seen_.size() >= *legalCount_) {
    exhausted_ = true;
    return out;
  }
  int collisions = 0;
  while (out.size() < n && !usingRemainder_) {
    auto c = sampleLegal(space_, rng_);
    if (!c) {
      exhausted_ = true;
      return out;
    }
    if (claim(*c)) {
      out.push_back(std::move(*c));
      collisions = 0;
    } else if (++collisions >= kMaxCollisions) {
      if (!refillRemainder()) return out;
    }
  }
  while (out.size() < n && !remainder_.empty()) {
    ir::Config c = std::move(remainder_.back());
    remainder_.pop_back();
    if (claim(c)) out.push_back(std::move(c));
  }
  if (usingRemainder_ && remainder_.empty()) exhausted_ = true;
  return out;
}

namespace {

class RandomStrategy : public SearchStrategy {
 public:
  RandomStrategy(const ir::Space& space, uint64_t seed) : st_(space, seed) {}
  std::vector<ir::Config> propose(size_t n) override { return st_.fresh(n); }
  void observe(const std::vector<TrialResult>& results) override { st_.observe(results); }
  bool exhausted() const override { return st_.exhausted(); }

 private:
  SearchState st_;
};

// Proposes a fixed list of configs in order: `exhaustive` (the whole legal space) and `ranked`
// (the legal space, or a large uniform sample of it, in the prior's order).
class ListStrategy : public SearchStrategy {
 public:
  ListStrategy(const ir::Space& space, std::vector<ir::Config> order) : st_(space, 0), order_(std::move(order)) {}
  std::vector<ir::Config> propose(size_t n) override {
    std::vector<ir::Config> out;
    while (out.size() < n && next_ < order_.size()) {
      const ir::Config& c = order_[next_++];
      if (st_.claim(c)) out.push_back(c);
    }
    return out;
  }
  void observe(const std::vector<TrialResult>& results) override { st_.observe(results); }
  bool exhausted() const override { return next_ >= order_.size(); }

 private:
  SearchState st_;
  std::vector<ir::Config> order_;
  size_t next_ = 0;
};

std::vector<ir::Config> rankByPrior(const ir::Space& space, const Prior& prior, uint64_t seed, size_t limit) {
  std::vector<ir::Config> all;
  if (auto listed = enumerateLegal(space, limit)) all = std::move(*listed);
  else all = SearchState(space, seed).fresh(limit);
  std::vector<std::pair<double, size_t>> scored;
  for (size_t i = 0; i < all.size(); ++i) {
    auto p = prior(all[i]);
    scored.push_back({p ? *p : std::numeric_limits<double>::infinity(), i});
  }
  std::stable_sort(scored.begin(), scored.end());
  std::vector<ir::Config> order;
  for (const auto& [score, i] : scored) order.push_back(std::move(all[i]));
  return order;
}

}  // namespace

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

std::string strategyNameList() {
  std::string out;
  for (const char* n : kStrategyNames) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

Expected<std::unique_ptr<SearchStrategy>> makeStrategy(const SearchSettings& s, const ir::Space& space,
                                                       costmodel::CostModel* model,
                                                       const costmodel::FeatureExtractor* features,
                                                       const Prior* prior) {
  if (s.strategy == "random") return std::unique_ptr<SearchStrategy>(std::make_unique<RandomStrategy>(space, s.seed));
  if (s.strategy == "exhaustive") {
    auto all = enumerateLegal(space, s.exhaustiveLimit);
    if (!all)
      return makeError(ErrorCode::InvalidArgument,
                       "exhaustive search needs a space of at most " + std::to_string(s.exhaustiveLimit) +
                           " configs; this one has " + formatDouble(productSize(space)) + " before constraints");
    return std::unique_ptr<SearchStrategy>(std::make_unique<ListStrategy>(space, std::move(*all)));
  }
  if (s.strategy == "ranked") {
    if (!prior || !*prior)
      return makeError(ErrorCode::InvalidArgument, "the ranked strategy needs a prior (GPU targets: the analytic model)");
    return std::unique_ptr<SearchStrategy>(
        std::make_unique<ListStrategy>(space, rankByPrior(space, *prior, s.seed, s.rankedLimit)));
  }
  if (s.strategy == "evolutionary" || s.strategy == "ga") {
    if (s.strategy == "evolutionary" && (!model || !features))
      return makeError(ErrorCode::InvalidArgument, "the evolutionary strategy needs a cost model and features");
    return makeEvolution(s, space, model, features, prior && *prior ? prior : nullptr);
  }
  return makeError(ErrorCode::InvalidArgument,
                   "unknown strategy '" + s.strategy + "' (known: " + strategyNameList() + ")");
}

}  // namespace tessera::search
