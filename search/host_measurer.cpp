// Owns the host measurer: parallel builds, fork/timeout isolation, the correctness gate and
// interleaved re-measurement.
#include "search/host_measurer.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <future>
#include <thread>

#include "codegen/codegen.h"
#include "ir/families.h"
#include "support/thread_pool.h"

namespace tessera::search {

namespace {

double nowSec() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Shared page the child reports through.
struct ChildReport {
  int ranOnce = 0;
  int n = 0;
  static constexpr int kMax = 4096;
  double samples[kMax];
};

}  // namespace

IsolatedRun runIsolated(const std::function<void()>& call, const MeasureOptions& measure, double timeoutSec) {
  IsolatedRun r;
  void* mem = mmap(nullptr, sizeof(ChildReport), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    r.status = TrialStatus::Crash;
    r.message = "mmap failed";
    return r;
  }
  auto* rep = new (mem) ChildReport();
  std::fflush(nullptr);  // no duplicated buffered output from the child
  // A terminal's Ctrl-C reaches the whole process group: the tuner decides what it means (see
  // cmd_tune.cpp); the candidate being measured ignores it, so it neither dies of it (and is
  // recorded a crash) nor runs the tuner's handler it inherited. SIGINT stays blocked across the
  // fork so that it cannot land in the child before the child ignores it.
  sigset_t intOnly, oldMask;
  sigemptyset(&intOnly);
  sigaddset(&intOnly, SIGINT);
  pthread_sigmask(SIG_BLOCK, &intOnly, &oldMask);
  pid_t pid = fork();
  if (pid == 0) signal(SIGINT, SIG_IGN);
  pthread_sigmask(SIG_SETMASK, &oldMask, nullptr);
  if (pid < 0) {
    munmap(mem, sizeof(ChildReport));
    r.status = TrialStatus::Crash;
    r.message = std::string("fork failed: ") + std::strerror(errno);
    return r;
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the tuner
    call();
    rep->ranOnce = 1;
    MeasureOptions m = measure;
    m.warmup = 0;  // the checked run above was the warm-up
    std::vector<double> all;
    auto timed = [&] {
      double t0 = nowSec();
      call();
      all.push_back((nowSec() - t0) * 1e6);
    };
    double total = 0;
    while ((total < m.minTimeSec * 1e6 || int(all.size()) < m.minRuns) && int(all.size()) < std::min(m.maxRuns, ChildReport::kMax)) {
      timed();
      total += all.back();
    }
    for (size_t i = 0; i < all.size(); ++i) rep->samples[i] = all[i];
    rep->n = int(all.size());
    _exit(0);
  }
  int status = 0;
  double deadline = nowSec() + timeoutSec;
  bool done = false;
  while (!done) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) {
      done = true;
      break;
    }
    if (nowSec() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      r.status = TrialStatus::Timeout;
      r.message = "no result after " + std::to_string(timeoutSec) + " s (killed)";
      munmap(mem, sizeof(ChildReport));
      return r;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  if (WIFSIGNALED(status)) {
    r.status = TrialStatus::Crash;
    r.message = std::string("killed by signal ") + strsignal(WTERMSIG(status));
  } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !rep->ranOnce) {
    r.status = TrialStatus::Crash;
    r.message = "child exited with status " + std::to_string(WEXITSTATUS(status));
  } else {
    r.samples_us.assign(rep->samples, rep->samples + rep->n);
  }
  munmap(mem, sizeof(ChildReport));
  return r;
}

SharedBuffers::SharedBuffers(const ir::Kernel& k, uint64_t seed) : k_(k), ins_(ir::makeInputs(k, seed)) {
  for (auto& b : ins_) ptrs_.push_back(b.data());
  for (const auto* o : k.outputs()) {
    size_t bytes = size_t(o->numel() * ir::byteSize(o->dtype)) + 64;
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    outs_.push_back({p, bytes});
    ptrs_.push_back(p);
  }
}

SharedBuffers::~SharedBuffers() {
  for (auto& [p, n] : outs_) munmap(p, n);
}

std::vector<const ir::Buffer*> SharedBuffers::inputs() const {
  std::vector<const ir::Buffer*> r;
  for (const auto& b : ins_) r.push_back(&b);
  return r;
}

std::vector<ir::Buffer> SharedBuffers::outputs() const {
  std::vector<ir::Buffer> r;
  auto outs = k_.outputs();
  for (size_t i = 0; i < outs.size(); ++i) {
    r.emplace_back(outs[i]->dtype, outs[i]->shape);
    std::memcpy(r.back().data(), outs_[i].first, r.back().bytes());
  }
  return r;
}

void SharedBuffers::poisonOutputs() {
  for (auto& [p, n] : outs_) std::memset(p, 0x7f, n);
}

namespace {

class HostMeasurer : public Measurer {
 public:
  HostMeasurer(const ir::Kernel& k, const TargetDesc& t, const HostMeasureSettings& s)
      : k_(k), t_(t), s_(s), bufs_(k_, s.seed), pool_(unsigned(std::max(1, s.buildThreads))) {
    flops_ = ir::kernelFlops(k_);
    bytes_ = ir::kernelBytes(k_);
    compute_ = ir::isComputeBound(k_);
  }

  std::vector<TrialResult> measure(const std::vector<ir::Config>& batch) override {
    auto built = build(batch);
    std::vector<TrialResult> out;
    for (size_t i = 0; i < batch.size(); ++i) out.push_back(runOne(batch[i], built[i]));
    return out;
  }

  std::vector<TrialResult> remeasure(const std::vector<ir::Config>& configs, int rounds) override {
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
    std::unique_ptr<codegen::HostExecutable> exe;
    Error error;
    double seconds = 0;
  };

  std::vector<Built> build(const std::vector<ir::Config>& batch) {
    std::vector<std::future<Built>> fs;
    for (const auto& c : batch)
      fs.push_back(pool_.submit([this, c] {
        Built b;
        double t0 = nowSec();
        auto exe = codegen::compileHost(k_, c, t_);
        b.seconds = nowSec() - t0;
        if (exe.ok()) b.exe = std::move(*exe);
        else b.error = exe.takeError();
        return b;
      }));
    std::vector<Built> out;
    for (auto& f : fs) out.push_back(f.get());
    return out;
  }

  const ir::Reference& reference() {
    if (!ref_) {
      auto r = ir::evaluateReference(k_, bufs_.inputs(), s_.ref);
      ref_ = std::make_unique<ir::Reference>(r.ok() ? std::move(*r) : ir::Reference{});
    }
    return *ref_;
  }

  void fill(TrialResult& r, const std::vector<double>& samples) const {
    r.samples = summarize(samples);
    double sec = r.samples.median_us * 1e-6;
    if (sec <= 0) return;
    r.gflops = flops_ / sec * 1e-9;
    r.gbps = bytes_ / sec * 1e-9;
    r.throughput = compute_ ? r.gflops : r.gbps;
    double peak = compute_ ? t_.peakGflopsF32 : t_.memBandwidthGBs;
    r.peakFraction = peak > 0 ? r.throughput / peak : 0;
  }

  TrialResult runOne(const ir::Config& c, const Built& b, std::vector<double>* pool = nullptr) {
    TrialResult r;
    r.config = c;
    r.compileSeconds = b.seconds;
    if (!b.exe) {
      r.status = trialStatusFromError(b.error.code);
      r.message = b.error.message;
      return r;
    }
    bufs_.poisonOutputs();
    auto raw = b.exe->raw();
    size_t nargs = k_.inputs().size() + k_.outputs().size();
    void* const* ptrs = bufs_.pointers();
    double t0 = nowSec();
    IsolatedRun run = runIsolated([&] { codegen::invokeRaw(raw, ptrs, nargs); }, s_.measure, s_.timeoutSec);
    r.runSeconds = nowSec() - t0;
    if (run.status != TrialStatus::Ok) {
      r.status = run.status;
      r.message = run.message;
      return r;
    }
    auto outs = bufs_.outputs();
    std::vector<const ir::Buffer*> outPtrs;
    for (auto& o : outs) outPtrs.push_back(&o);
    auto cmp = ir::compareOutputs(k_, reference(), outPtrs);
    r.maxAbsErr = cmp.maxAbsErr;
    r.maxRelErr = cmp.maxRelErr;
    if (!cmp.ok) {
      r.status = TrialStatus::WrongResult;
      r.message = cmp.firstBad;
      return r;
    }
    if (pool) pool->insert(pool->end(), run.samples_us.begin(), run.samples_us.end());
    fill(r, run.samples_us);
    return r;
  }

  const ir::Kernel& k_;
  TargetDesc t_;
  HostMeasureSettings s_;
  SharedBuffers bufs_;
  ThreadPool pool_;
  std::unique_ptr<ir::Reference> ref_;
  double flops_ = 0, bytes_ = 0;
  bool compute_ = true;
};

}  // namespace

std::unique_ptr<Measurer> makeHostMeasurer(const ir::Kernel& k, const TargetDesc& t, const HostMeasureSettings& s) {
  return std::make_unique<HostMeasurer>(k, t, s);
}

}  // namespace tessera::search
