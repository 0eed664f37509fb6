// Owns the estimate backend of the Measurer interface: configs compiled through ptxas / the AMDGPU
// backend in a pool for their resource reports, then predicted by the analytic model. Nothing runs.
#include <future>
#include <map>

#include "codegen/gpu.h"
#include "ir/families.h"
#include "measure/estimate.h"
#include "support/thread_pool.h"

namespace tessera::measure {

namespace {

class EstimateMeasurer : public Measurer {
 public:
  EstimateMeasurer(const ir::Kernel& k, const TargetDesc& t, int threads)
      : k_(k), t_(t), pool_(unsigned(std::max(1, threads))) {}

  Expected<std::vector<TrialResult>> measure(const std::vector<ir::Config>& batch) override {
    std::vector<std::future<TrialResult>> fs;
    for (const auto& c : batch) {
      auto it = done_.find(configKey(c));
      if (it != done_.end()) {
        std::promise<TrialResult> p;
        p.set_value(it->second);
        fs.push_back(p.get_future());
        continue;
      }
      fs.push_back(pool_.submit([this, c] { return estimateOne(c); }));
    }
    std::vector<TrialResult> out;
    for (auto& f : fs) {
      out.push_back(f.get());
      done_[configKey(out.back().config)] = out.back();
    }
    return out;
  }

  // A prediction does not drift: re-measuring is looking it up again.
  Expected<std::vector<TrialResult>> remeasure(const std::vector<ir::Config>& configs, int) override {
    return measure(configs);
  }

 private:
  TrialResult estimateOne(const ir::Config& c) {
    TrialResult r;
    r.config = c;
    auto bin = codegen::compileGpu(k_, c, t_, {.wantBinary = false});
    if (!bin.ok()) {
      r.status = trialStatusFromError(bin.error().code);
      r.message = bin.error().message;
      return r;
    }
    r.compileSeconds = bin->compileSeconds;
    if (!bin->resources.ok) {  // spills or over the target's limits: rejected as on a device
      r.status = TrialStatus::InvalidConfig;
      for (const auto& p : bin->resources.problems) r.message += (r.message.empty() ? "" : "; ") + p;
      return r;
    }
    auto e = estimateKernel(k_, c, t_, &bin->resources);
    if (!e.ok()) {
      r.status = trialStatusFromError(e.error().code);
      r.message = e.error().message;
      return r;
    }
    const double us = e->model.timeUs;
    r.estimated = true;
    r.estimator = costmodel::kGpuModelName;
    r.bound = e->model.bound;
    r.samples.n = 1;
    r.samples.median_us = r.samples.p20_us = r.samples.p80_us = r.samples.min_us = us;
    const double sec = us * 1e-6;
    r.gflops = e->flops / sec * 1e-9;
    r.gbps = e->bytes / sec * 1e-9;
    const bool compute = ir::isComputeBound(k_);
    r.throughput = compute ? r.gflops : r.gbps;
    const double peak = compute ? t_.computePeakGflops(ir::kernelInputType(k_)) : t_.memBandwidthGBs;
    r.peakFraction = peak > 0 ? r.throughput / peak : 0;
    return r;
  }

  const ir::Kernel& k_;
  TargetDesc t_;
  ThreadPool pool_;
  std::map<std::string, TrialResult> done_;
};

}  // namespace

std::unique_ptr<Measurer> makeEstimateMeasurer(const ir::Kernel& k, const TargetDesc& t, int buildThreads) {
  return std::make_unique<EstimateMeasurer>(k, t, buildThreads);
}

}  // namespace tessera::measure
