// Owns the host execution backend of the measurement protocol: candidates JIT-compiled for this
// CPU in the build pool; in the measuring child, the raw entry point called once on the
// protocol's buffers (the checked run, also the warm-up), then timed with the wall clock.
#include "codegen/codegen.h"
#include "measure/protocol_measurer.h"
#include "measure/measure_helper.h"

namespace tessera::measure {

namespace {

class HostExecutableBox : public Executable {
 public:
  explicit HostExecutableBox(std::unique_ptr<codegen::HostExecutable> e) : exe(std::move(e)) {
    compileSeconds = exe->compileSeconds;
  }
  std::unique_ptr<codegen::HostExecutable> exe;
};

class HostBackend : public ExecutionBackend {
 public:
  HostBackend(const ir::Kernel& k, const TargetDesc& t) : k_(k), t_(t) {}

  Expected<std::shared_ptr<const Executable>> build(const ir::Config& c) override {
    TESSERA_ASSIGN(auto exe, codegen::compileHost(k_, c, t_));
    auto box = std::make_shared<HostExecutableBox>(std::move(exe));
    box->config = c;
    return std::shared_ptr<const Executable>(std::move(box));
  }

  Expected<std::vector<double>> run(const Executable& e, KernelIO& io, const MeasureOptions& m) override {
    const auto& exe = *static_cast<const HostExecutableBox&>(e).exe;
    auto raw = exe.raw();
    void* const* ptrs = io.buffers();
    size_t nargs = io.count();
    auto call = [&] {
      if (raw) codegen::invokeRaw(raw, ptrs, nargs);
      else exe.run(ptrs);
    };
    call();  // the checked run, and the warm-up
    MeasureOptions timed = m;
    timed.warmup = 0;
    timed.maxRuns = std::min(timed.maxRuns, 4096);
    std::function<void()> flush;
    if (m.flushCache) flush = flushHostCaches;
    return sampleRuns([&] { return wallMicros(call); }, timed, flush);
  }

 private:
  const ir::Kernel& k_;
  TargetDesc t_;
};

}  // namespace

std::unique_ptr<ExecutionBackend> makeHostBackend(const ir::Kernel& k, const TargetDesc& t) {
  return std::make_unique<HostBackend>(k, t);
}

std::unique_ptr<Measurer> makeHostMeasurer(const ir::Kernel& k, const TargetDesc& t, const MeasureSettings& s) {
  if (s.isolation == Isolation::Helper) return makeHelperMeasurer(k, t, HelperBackend{}, s);
  return makeProtocolMeasurer(k, t, makeHostBackend(k, t), s);
}

}  // namespace tessera::measure
