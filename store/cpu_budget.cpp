// Owns the per-thread CPU budget of a request (cpu_budget.h).
#include "store/cpu_budget.h"

#include <time.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace tessera::cache {

namespace {
// The thread's CPU clock at which its budget is spent (0: no budget), and the budget's size.
thread_local double t_deadline = 0;
thread_local double t_seconds = 0;

double threadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}
}  // namespace

CpuBudget::CpuBudget(double seconds) : previous_deadline_(t_deadline), previous_seconds_(t_seconds) {
  if (seconds > 0) {
    t_deadline = threadCpuSeconds() + seconds;
    t_seconds = seconds;
  }
}

CpuBudget::~CpuBudget() {
  t_deadline = previous_deadline_;
  t_seconds = previous_seconds_;
}

bool CpuBudget::active() { return t_deadline > 0; }

bool CpuBudget::spent() { return t_deadline > 0 && threadCpuSeconds() >= t_deadline; }

int64_t CpuBudget::remainingMs() {
  if (t_deadline <= 0) return 0;
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil((t_deadline - threadCpuSeconds()) * 1000)));
}

Error CpuBudget::error() {
  return makeError(ErrorCode::Timeout, "this search used its CPU budget (" +
                                           std::to_string(static_cast<int64_t>(std::lround(t_seconds * 1000))) +
                                           " ms, serve --search-cpu-ms) and was cut: narrow it (a filter, a smaller page)");
}

}  // namespace tessera::cache
