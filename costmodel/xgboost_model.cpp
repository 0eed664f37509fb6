// Owns the XGBoost cost model (C API of Debian's XGBoost 1.7): trained from scratch on every
// sample seen so far at each update (the data stay small: hundreds to a few thousand trials), with
// a ranking objective on throughput normalized per workload; random scores until trained.
#include <xgboost/c_api.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "costmodel/cost_model.h"
#include "costmodel/model_io.h"

namespace tessera::costmodel {
namespace {

constexpr const char* kFormat = "tessera-xgboost-1";

Error xgbError(const std::string& what) {
  return makeError(ErrorCode::Internal, "xgboost: " + what + ": " + XGBGetLastError());
}

class XGBoostModel : public CostModel {
 public:
  explicit XGBoostModel(const ModelSettings& s) : s_(s), rng_(s.seed) {}
  ~XGBoostModel() override { freeBooster(); }

  Status update(const std::vector<Sample>& samples) override {
    for (const auto& x : samples) {
      if (!samples_.empty() && x.features.size() != samples_.front().features.size())
        return makeError(ErrorCode::InvalidArgument, "cost model: feature vectors of different lengths");
      samples_.push_back(x);
    }
    return train();
  }

  std::vector<double> predict(const std::vector<std::vector<float>>& features) override {
    std::vector<double> out(features.size());
    if (!booster_ || features.empty() || features[0].size() != nfeat_) {
      std::uniform_real_distribution<double> u(0, 1);
      for (auto& v : out) v = u(rng_);
      return out;
    }
    std::vector<float> dense;
    dense.reserve(features.size() * nfeat_);
    for (const auto& f : features) {
      if (f.size() != nfeat_) return std::vector<double>(features.size(), 0.0);
      dense.insert(dense.end(), f.begin(), f.end());
      if (!(heldShare_ > 0)) hold(dense, nfeat_);  // else the trees that hold them never split on them
    }
    // __array_interface__ of the dense row-major float matrix.
    std::string arr = "{\"data\":[" + std::to_string(reinterpret_cast<uintptr_t>(dense.data())) +
                      ",true],\"shape\":[" + std::to_string(features.size()) + "," + std::to_string(nfeat_) +
                      "],\"typestr\":\"<f4\",\"version\":3}";
    // cache_id 0 is required by 1.7 (ARCHITECTURE.md §5).
    const char* cfg =
        "{\"type\":0,\"training\":false,\"iteration_begin\":0,\"iteration_end\":0,\"strict_shape\":false,"
        "\"cache_id\":0,\"missing\":NaN}";
    const bst_ulong* shape = nullptr;
    bst_ulong dim = 0;
    const float* res = nullptr;
    if (XGBoosterPredictFromDense(booster_, arr.c_str(), cfg, nullptr, &shape, &dim, &res) != 0)
      return std::vector<double>(features.size(), 0.0);
    for (size_t i = 0; i < out.size(); ++i) out[i] = res[i];
    return out;
  }

  bool trained() const override { return booster_ != nullptr; }
  void holdConstant(const std::vector<size_t>& columns, double share) override {
    share = std::clamp(share, 0.0, 1.0);
    if (columns == held_ && (columns.empty() || share == heldShare_)) return;
    held_ = columns;
    heldShare_ = share;
    if (booster_) (void)train();  // a model that cannot retrain keeps predicting as before
  }
  size_t numSamples() const override { return samples_.size(); }

  Status save(const std::string& path) const override {
    nlohmann::json j;
    j["format"] = kFormat;
    j["settings"] = {{"objective", s_.objective}, {"rounds", s_.rounds}, {"max_depth", s_.maxDepth},
                     {"eta", s_.eta}, {"min_child_weight", s_.minChildWeight}, {"seed", s_.seed},
                     {"relevance_levels", s_.relevanceLevels}, {"relevance_power", s_.relevancePower},
                     {"subsample", s_.subsample}, {"colsample", s_.colsample}};
    j["samples"] = samplesToJson(samples_);
    if (booster_) {
      bst_ulong len = 0;
      const char* buf = nullptr;
      if (XGBoosterSaveModelToBuffer(booster_, "{\"format\":\"json\"}", &len, &buf) != 0)
        return xgbError("save");
      j["booster"] = std::string(buf, len);
      j["num_features"] = nfeat_;
    }
    return writeTextFile(path, j.dump());
  }

  Status load(const std::string& path) override {
    // A hand-edited file with a mistyped field makes nlohmann throw: translate at the boundary.
    try {
      return loadFile(path);
    } catch (const nlohmann::json::exception& e) {
      return makeError(ErrorCode::InvalidArgument, path + ": malformed model file: " + e.what());
    }
  }

 private:
  Status loadFile(const std::string& path) {
    TESSERA_ASSIGN(std::string text, readTextFile(path));
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || j.value("format", "") != kFormat)
      return makeError(ErrorCode::InvalidArgument, path + " is not a tessera XGBoost model");
    TESSERA_ASSIGN(std::vector<Sample> samples, samplesFromJson(j["samples"]));
    static const nlohmann::json kNone = nlohmann::json::object();
    const auto& st = j.contains("settings") && j["settings"].is_object() ? j["settings"] : kNone;
    ModelSettings s = s_;
    s.objective = st.value("objective", s.objective);
    s.rounds = st.value("rounds", s.rounds);
    s.maxDepth = st.value("max_depth", s.maxDepth);
    s.eta = st.value("eta", s.eta);
    s.minChildWeight = st.value("min_child_weight", s.minChildWeight);
    s.seed = st.value("seed", s.seed);
    s.relevanceLevels = st.value("relevance_levels", s.relevanceLevels);
    s.relevancePower = st.value("relevance_power", s.relevancePower);
    s.subsample = st.value("subsample", s.subsample);
    s.colsample = st.value("colsample", s.colsample);
    BoosterHandle b = nullptr;
    size_t nfeat = 0;
    if (j.contains("booster")) {
      std::string model = j["booster"].get<std::string>();
      if (XGBoosterCreate(nullptr, 0, &b) != 0) return xgbError("create");
      if (XGBoosterLoadModelFromBuffer(b, model.data(), model.size()) != 0) {
        Error e = xgbError("load " + path);
        XGBoosterFree(b);
        return e;
      }
      XGBoosterSetParam(b, "nthread", std::to_string(s.threads).c_str());
      nfeat = j.value("num_features", size_t(0));
    }
    freeBooster();
    s_ = s;
    samples_ = std::move(samples);
    booster_ = b;
    nfeat_ = nfeat;
    return {};
  }

  // The held columns of the row of `nfeat` just appended to `dense`, set to 0.
  void hold(std::vector<float>& dense, size_t nfeat) const {
    for (size_t c : held_)
      if (c < nfeat) dense[dense.size() - nfeat + c] = 0.f;
  }

  void freeBooster() {
    if (booster_) XGBoosterFree(booster_);
    booster_ = nullptr;
  }

  Status train() {
    std::vector<float> labels = normalizedLabels(samples_);
    if (s_.relevanceLevels > 0)
      for (auto& l : labels) l = std::round(std::pow(l, float(s_.relevancePower)) * float(s_.relevanceLevels));
    // A ranking needs at least two different outcomes; until then predictions stay random.
    if (std::set<float>(labels.begin(), labels.end()).size() < 2) return {};
    // Rows grouped by workload (XGBoost groups are contiguous runs of rows).
    std::map<int, std::vector<size_t>> byGroup;
    for (size_t i = 0; i < samples_.size(); ++i) byGroup[samples_[i].group].push_back(i);
    size_t nfeat = samples_.front().features.size();
    // With a share (holdConstant), two matrices: the held columns at one value, and as they are
    // for the share of the rounds in which they count.
    const bool shared = !held_.empty() && heldShare_ > 0;
    std::vector<float> dense, full, y;
    std::vector<unsigned> groups;
    dense.reserve(samples_.size() * nfeat);
    for (const auto& [g, rows] : byGroup) {
      groups.push_back(unsigned(rows.size()));
      for (size_t i : rows) {
        dense.insert(dense.end(), samples_[i].features.begin(), samples_[i].features.end());
        if (shared) full.insert(full.end(), samples_[i].features.begin(), samples_[i].features.end());
        hold(dense, nfeat);
        y.push_back(labels[i]);
      }
    }
    DMatrixHandle d[2] = {nullptr, nullptr};
    BoosterHandle b = nullptr;
    auto fail = [&](const char* what) {
      Error e = xgbError(what);
      if (b) XGBoosterFree(b);
      for (auto* m : d)
        if (m) XGDMatrixFree(m);
      return e;
    };
    const int matrices = shared ? 2 : 1;
    for (int m = 0; m < matrices; ++m) {
      if (XGDMatrixCreateFromMat(m == 0 ? dense.data() : full.data(), y.size(), nfeat, std::nanf(""), &d[m]) != 0)
        return fail("dmatrix");
      if (XGDMatrixSetFloatInfo(d[m], "label", y.data(), y.size()) != 0) return fail("labels");
      if (XGDMatrixSetUIntInfo(d[m], "group", groups.data(), groups.size()) != 0) return fail("groups");
    }
    if (XGBoosterCreate(d, bst_ulong(matrices), &b) != 0) return fail("create");
    const std::pair<const char*, std::string> params[] = {
        {"objective", s_.objective},
        {"max_depth", std::to_string(s_.maxDepth)},
        {"eta", std::to_string(s_.eta)},
        {"min_child_weight", std::to_string(s_.minChildWeight)},
        {"seed", std::to_string(s_.seed + trainings_)},
        {"subsample", std::to_string(s_.subsample)},
        {"colsample_bytree", std::to_string(s_.colsample)},
        {"nthread", std::to_string(s_.threads)},
        {"tree_method", "exact"},
        {"verbosity", "0"},
    };
    for (const auto& [k, v] : params)
      if (XGBoosterSetParam(b, k, v.c_str()) != 0) return fail(k);
    for (int it = 0; it < s_.rounds; ++it) {
      // Round `it` sees the held columns when the share's count of rounds steps up at it, from
      // the first round on (share 0.5: rounds 0, 2, 4, ...): the first tree is the one the
      // columns believed would give, the rounds without them must rank by the other columns.
      const bool sees = shared && std::ceil(double(it + 1) * heldShare_) > std::ceil(double(it) * heldShare_);
      if (XGBoosterUpdateOneIter(b, it, d[sees ? 1 : 0]) != 0) return fail("train");
    }
    for (auto* m : d)
      if (m) XGDMatrixFree(m);
    freeBooster();
    booster_ = b;
    nfeat_ = nfeat;
    ++trainings_;
    return {};
  }

  ModelSettings s_;
  uint64_t trainings_ = 0;  // retrains so far: each subsampled retrain draws a fresh seed
  std::mt19937_64 rng_;
  std::vector<Sample> samples_;
  BoosterHandle booster_ = nullptr;
  size_t nfeat_ = 0;
  std::vector<size_t> held_;  // holdConstant's columns
  double heldShare_ = 0;      // and the share of the trees in which they count
};

}  // namespace

std::unique_ptr<CostModel> makeXGBoostModel(const ModelSettings& s) { return std::make_unique<XGBoostModel>(s); }

}  // namespace tessera::costmodel
