// Owns tuning on the emulated device: candidates are ranked by the analytic model's prediction for
// the target, and the emulator (the mapped kernel on this CPU) only refuses the candidates whose
// outputs are wrong or whose runs fault or race. A CPU's time is never reported as a GPU's.
#include <map>

#include "measure/device_measurer.h"
#include "measure/estimate.h"

namespace tessera::measure {

namespace {

class EmulatorCheckedMeasurer : public Measurer {
 public:
  EmulatorCheckedMeasurer(std::unique_ptr<Measurer> model, std::unique_ptr<Measurer> emulator)
      : model_(std::move(model)), emulator_(std::move(emulator)) {}

  Expected<std::vector<TrialResult>> measure(const std::vector<ir::Config>& batch) override {
    TESSERA_ASSIGN(std::vector<TrialResult> out, model_->measure(batch));
    // Only a candidate the model could price is worth the emulator's time; each is checked once.
    std::vector<ir::Config> check;
    for (const auto& r : out)
      if (r.ok() && !checked_.count(configKey(r.config))) check.push_back(r.config);
    if (!check.empty()) {
      TESSERA_ASSIGN(std::vector<TrialResult> ran, emulator_->measure(check));
      for (size_t i = 0; i < ran.size() && i < check.size(); ++i) checked_[configKey(check[i])] = ran[i];
    }
    for (auto& r : out) {
      r.emulated = true;
      if (!r.ok()) continue;
      const TrialResult& c = checked_.at(configKey(r.config));
      if (!c.ok()) {
        const ir::Config cfg = r.config;
        r = c;
        r.config = cfg;
        r.emulated = true;
        r.message = "refused by the emulator: " + c.message;
        continue;
      }
      r.maxAbsErr = c.maxAbsErr, r.maxRelErr = c.maxRelErr;
      r.runSeconds = c.runSeconds;
      r.compileSeconds += c.compileSeconds;
    }
    return out;
  }

  // A prediction does not drift, and a candidate is checked once: nothing to re-time.
  Expected<std::vector<TrialResult>> remeasure(const std::vector<ir::Config>& configs, int) override {
    return measure(configs);
  }

 private:
  std::unique_ptr<Measurer> model_, emulator_;
  std::map<std::string, TrialResult> checked_;
};

}  // namespace

std::unique_ptr<Measurer> makeEmulatorCheckedMeasurer(const ir::Kernel& k, const TargetDesc& t, const DeviceSettings& d,
                                                      const MeasureSettings& s) {
  return std::make_unique<EmulatorCheckedMeasurer>(makeEstimateMeasurer(k, t), makeDeviceMeasurer(k, t, d, s));
}

}  // namespace tessera::measure
