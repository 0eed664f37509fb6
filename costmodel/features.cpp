// Owns the generic knob feature extractor: knob values, their log2, power-of-two structure, and
// log2 ratios and products of knob pairs. Works for any space, including imported GPU tables.
#include <bit>
#include <cmath>

#include "costmodel/features.h"

namespace tessera::costmodel {
namespace {

class KnobFeatures : public FeatureExtractor {
 public:
  KnobFeatures(const ir::Space& space, const KnobFeatureSettings& s) : powerOfTwo_(s.powerOfTwo) {
    for (const auto& k : space.knobs) {
      Column c{k.name, k.isCategorical(), {}};
      if (c.categorical) c.domain = k.domain;
      bool positive = !c.categorical && !k.domain.empty();
      for (const auto& v : k.domain)
        if (const auto* i = std::get_if<int64_t>(&v); !i || *i <= 0) positive = false;
      c.positive = positive;
      cols_.push_back(std::move(c));
    }
    for (size_t i = 0; i < cols_.size(); ++i) {
      names_.push_back(cols_[i].name);
      if (!cols_[i].categorical) names_.push_back("log2_" + cols_[i].name);
      if (cols_[i].positive && s.powerOfTwo) {
        names_.push_back("ctz_" + cols_[i].name);
        names_.push_back("pow2_" + cols_[i].name);
      }
    }
    if (s.pairwise)
      for (size_t i = 0; i < cols_.size(); ++i)
        for (size_t j = i + 1; j < cols_.size(); ++j)
          if (cols_[i].positive && cols_[j].positive) {
            pairs_.push_back({i, j});
            names_.push_back("log2_" + cols_[i].name + "_over_" + cols_[j].name);
            names_.push_back("log2_" + cols_[i].name + "_times_" + cols_[j].name);
          }
  }

  std::vector<float> extract(const ir::Config& c) const override {
    std::vector<float> f;
    f.reserve(names_.size());
    std::vector<double> logs(cols_.size(), 0.0);
    for (size_t i = 0; i < cols_.size(); ++i) {
      const Column& col = cols_[i];
      auto it = c.values.find(col.name);
      if (col.categorical) {
        float idx = -1;
        if (it != c.values.end())
          for (size_t d = 0; d < col.domain.size(); ++d)
            if (col.domain[d] == it->second) idx = float(d);
        f.push_back(idx);
        continue;
      }
      double v = 0;
      if (it != c.values.end())
        if (const auto* iv = std::get_if<int64_t>(&it->second)) v = double(*iv);
      logs[i] = v > 0 ? std::log2(v) : -1.0;
      f.push_back(float(v));
      f.push_back(float(logs[i]));
      if (col.positive && powerOfTwo_) {
        uint64_t u = v > 0 ? uint64_t(v) : 0;
        f.push_back(u ? float(std::countr_zero(u)) : -1.f);
        f.push_back(u && std::has_single_bit(u) ? 1.f : 0.f);
      }
    }
    for (const auto& [i, j] : pairs_) {
      f.push_back(float(logs[i] - logs[j]));
      f.push_back(float(logs[i] + logs[j]));
    }
    return f;
  }

  std::vector<std::string> names() const override { return names_; }

 private:
  struct Column {
    std::string name;
    bool categorical = false;
    std::vector<ir::KnobValue> domain;
    bool positive = false;
  };
  std::vector<Column> cols_;
  std::vector<std::pair<size_t, size_t>> pairs_;
  std::vector<std::string> names_;
  bool powerOfTwo_ = true;
};

class WithFeature : public FeatureExtractor {
 public:
  WithFeature(std::unique_ptr<FeatureExtractor> base, std::string name, std::function<float(const ir::Config&)> f)
      : base_(std::move(base)), name_(std::move(name)), f_(std::move(f)) {}
  std::vector<float> extract(const ir::Config& c) const override {
    auto v = base_->extract(c);
    v.push_back(f_(c));
    return v;
  }
  std::vector<std::string> names() const override {
    auto n = base_->names();
    n.push_back(name_);
    return n;
  }

 private:
  std::unique_ptr<FeatureExtractor> base_;
  std::string name_;
  std::function<float(const ir::Config&)> f_;
};

}  // namespace

std::unique_ptr<FeatureExtractor> withFeature(std::unique_ptr<FeatureExtractor> base, std::string name,
                                              std::function<float(const ir::Config&)> f) {
  return std::make_unique<WithFeature>(std::move(base), std::move(name), std::move(f));
}

std::unique_ptr<FeatureExtractor> makeKnobFeatures(const ir::Space& space, const KnobFeatureSettings& s) {
  return std::make_unique<KnobFeatures>(space, s);
}

}  // namespace tessera::costmodel
