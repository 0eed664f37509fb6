// Owns the protocol measurer: parallel builds, isolated checked runs, statistics and the
// interleaved re-measurement, over any ExecutionBackend.
#include "measure/protocol_measurer.h"

#include <chrono>
#include <future>

#include "ir/families.h"
#include "measure/isolation.h"
#include "support/thread_pool.h"

namespace tessera::measure {

namespace {

using detail::nowSec;

class ProtocolMeasurer : public Measurer {
 public:
  ProtocolMeasurer(const ir::Kernel& k, const TargetDesc& t, std::unique_ptr<ExecutionBackend> backend,
                   const MeasureSettings& s)
      : k_(k), t_(t), backend_(std::move(backend)), s_(s), io_(k_, s.seed, KernelIO::Outputs::Shared, s.ref),
        pool_(unsigned(std::max(1, s.buildThreads))) {
    flops_ = ir::kernelFlops(k_);
    bytes_ = ir::kernelBytes(k_);
    compute_ = ir::isComputeBound(k_);
  }

  Expected<std::vector<TrialResult>> measure(const std::vector<ir::Config>& batch) override {
    auto built = build(batch);
    std::vector<TrialResult> out;
    for (size_t i = 0; i < batch.size(); ++i) out.push_back(runOne(batch[i], built[i]));
    return out;
  }

  Expected<std::vector<TrialResult>> remeasure(const std::vector<ir::Config>& configs, int rounds) override {
    auto built = build(configs);
    std::vector<TrialResult> out(configs.size());
    std::vector<std::vector<double>> pooled(configs.size());
    for (int r = 0; r < std::max(1, rounds); ++r)
      for (size_t i = 0; i < configs.size(); ++i) {
        if (r > 0 && !out[i].ok()) continue;  // a failure stays a failure
        TrialResult one = runOne(configs[i], built[i], &pooled[i]);
        if (r == 0 || !one.ok()) out[i] = one;
      }
    for (size_t i = 0; i < configs.size(); ++i)
      if (out[i].ok()) fill(out[i], pooled[i]);
    return out;
  }

 private:
  struct Built {
    std::shared_ptr<const Executable> exe;
    Error error;
    double seconds = 0;
  };

  std::vector<Built> build(const std::vector<ir::Config>& batch) {
    std::vector<std::future<Built>> fs;
    for (const auto& c : batch)
      fs.push_back(pool_.submit([this, c] {
        Built b;
        double t0 = nowSec();
        auto exe = backend_->build(c);
        b.seconds = nowSec() - t0;
        if (exe.ok()) b.exe = std::move(*exe);
        else b.error = exe.takeError();
        return b;
      }));
    std::vector<Built> out;
    for (auto& f : fs) out.push_back(f.get());
    return out;
  }

  void fill(TrialResult& r, const std::vector<double>& samples) const {
    r.samples = summarize(samples);
    const int threads = r.config.hostThreads();
    double sec = r.samples.median_us * 1e-6;
    if (sec <= 0) return;
    r.gflops = flops_ / sec * 1e-9;
    r.gbps = bytes_ / sec * 1e-9;
    r.throughput = compute_ ? r.gflops : r.gbps;
    double peak = compute_ ? t_.computePeakGflops(ir::kernelInputType(k_), threads) : t_.bandwidthGBs(threads);
    r.peakFraction = peak > 0 ? r.throughput / peak : 0;
  }

  TrialResult runOne(const ir::Config& c, const Built& b, std::vector<double>* pool = nullptr) {
    TrialResult r;
    r.config = c;
    r.compileSeconds = b.seconds;
    r.emulated = backend_->emulated();
    if (!b.exe) {
      r.status = trialStatusFromError(b.error.code);
      r.message = b.error.message;
      return r;
    }
    io_.poisonOutputs();
    double t0 = nowSec();
    ExecutionBackend& backend = *backend_;
    const Executable& exe = *b.exe;
    IsolatedRun run = runIsolatedChild([&] { return backend.run(exe, io_, s_.measure); }, s_.timeoutSec);
    r.runSeconds = nowSec() - t0;
    if (run.status != TrialStatus::Ok) {
      r.status = run.status;
      r.message = run.message;
      return r;
    }
    auto cmp = io_.check();
    if (!cmp.ok()) {  // no reference for this kernel: nothing can count
      r.status = TrialStatus::Crash;
      r.message = "reference: " + cmp.error().message;
      return r;
    }
    r.maxAbsErr = cmp->maxAbsErr;
    r.maxRelErr = cmp->maxRelErr;
    if (!cmp->ok) {
      r.status = TrialStatus::WrongResult;
      r.message = cmp->firstBad;
      return r;
    }
    if (pool) pool->insert(pool->end(), run.samples_us.begin(), run.samples_us.end());
    fill(r, run.samples_us);
    return r;
  }

  const ir::Kernel& k_;
  TargetDesc t_;
  std::unique_ptr<ExecutionBackend> backend_;
  MeasureSettings s_;
  KernelIO io_;
  ThreadPool pool_;
  double flops_ = 0, bytes_ = 0;
  bool compute_ = true;
};

}  // namespace

std::unique_ptr<Measurer> makeProtocolMeasurer(const ir::Kernel& k, const TargetDesc& t,
                                               std::unique_ptr<ExecutionBackend> backend, const MeasureSettings& s) {
  return std::make_unique<ProtocolMeasurer>(k, t, std::move(backend), s);
}

}  // namespace tessera::measure
