// Owns fork/timeout isolation of one candidate and the child's report page.
#include "measure/isolation.h"
#include "support/si_format.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <new>
#include <thread>

namespace tessera::measure {

namespace {

using detail::nowSec;

// Shared page the child reports through.
struct ChildReport {
  int done = 0;  // the child returned (ok or with an error)
  int failed = 0;
  int n = 0;
  static constexpr int kMax = 4096;
  static constexpr int kMessage = 1024;
  char message[kMessage];
  double samples[kMax];
};

}  // namespace

IsolatedRun runIsolatedChild(const std::function<Expected<std::vector<double>>()>& child, double timeoutSec) {
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
    Expected<std::vector<double>> res = child();
    if (res.ok()) {
      rep->n = int(std::min<size_t>(res->size(), ChildReport::kMax));
      std::copy_n(res->begin(), rep->n, rep->samples);
    } else {
      rep->failed = 1;
      std::snprintf(rep->message, ChildReport::kMessage, "%s", res.error().message.c_str());
    }
    rep->done = 1;
    _exit(0);
  }
  int status = 0;
  double deadline = nowSec() + timeoutSec;
  while (true) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (nowSec() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      r.status = TrialStatus::Timeout;
      r.message = "no result after " + formatSi(timeoutSec, "s", -2, 0) + " (killed)";
      munmap(mem, sizeof(ChildReport));
      return r;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  if (WIFSIGNALED(status)) {
    r.status = TrialStatus::Crash;
    r.message = std::string("killed by signal ") + strsignal(WTERMSIG(status));
  } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !rep->done) {
    r.status = TrialStatus::Crash;
    r.message = "child exited with status " + std::to_string(WEXITSTATUS(status));
  } else if (rep->failed) {
    r.status = TrialStatus::Crash;
    r.message = rep->message;
  } else {
    r.samples_us.assign(rep->samples, rep->samples + rep->n);
  }
  munmap(mem, sizeof(ChildReport));
  return r;
}

IsolatedRun runIsolated(const std::function<void()>& call, const MeasureOptions& measure, double timeoutSec) {
  return runIsolatedChild(
      [&]() -> Expected<std::vector<double>> {
        call();
        MeasureOptions m = measure;
        m.warmup = 0;  // the checked run above was the warm-up
        m.maxRuns = std::min(m.maxRuns, 4096);
        std::function<void()> flush;
        if (m.flushCache) flush = flushHostCaches;
        return sampleRuns([&] { return wallMicros(call); }, m, flush);
      },
      timeoutSec);
}

}  // namespace tessera::measure
