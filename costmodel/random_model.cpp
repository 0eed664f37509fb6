// Owns the random cost model: uniform scores, never trained. The control in tests (a model that
// learns nothing must rank at chance) and the stand-in before any data exists.
#include <random>

#include "costmodel/cost_model.h"
#include "costmodel/model_io.h"

namespace tessera::costmodel {
namespace {

class RandomModel : public CostModel {
 public:
  explicit RandomModel(uint64_t seed) : seed_(seed), rng_(seed) {}
  Status update(const std::vector<Sample>& samples) override {
    n_ += samples.size();
    return {};
  }
  std::vector<double> predict(const std::vector<std::vector<float>>& features) override {
    std::uniform_real_distribution<double> u(0, 1);
    std::vector<double> out(features.size());
    for (auto& v : out) v = u(rng_);
    return out;
  }
  bool trained() const override { return false; }
  void holdConstant(const std::vector<size_t>&, double) override {}
  size_t numSamples() const override { return n_; }
  Status save(const std::string& path) const override {
    return writeTextFile(path, nlohmann::json{{"format", "tessera-random-1"}, {"seed", seed_}}.dump());
  }
  Status load(const std::string& path) override {
    TESSERA_ASSIGN(std::string text, readTextFile(path));
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || j.value("format", "") != "tessera-random-1")
      return makeError(ErrorCode::InvalidArgument, path + " is not a tessera random model");
    if (!j.contains("seed") || !j["seed"].is_number_unsigned())
      return makeError(ErrorCode::InvalidArgument, path + ": random model without a seed");
    seed_ = j["seed"].get<uint64_t>();
    rng_.seed(seed_);
    return {};
  }

 private:
  uint64_t seed_;
  std::mt19937_64 rng_;
  size_t n_ = 0;
};

}  // namespace

std::unique_ptr<CostModel> makeRandomModel(uint64_t seed) { return std::make_unique<RandomModel>(seed); }

}  // namespace tessera::costmodel
