// Owns the machine-load readings of load.h: /proc/loadavg, /proc/stat's steal, and the
// threads-of-fixed-work control.
#include "support/load.h"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

namespace tessera {

namespace {

double wallNow() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

double threadCpuNow() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// The aggregate cpu line of /proc/stat: total jiffies and stolen ones.
bool readStat(unsigned long long* total, unsigned long long* steal) {
  FILE* f = std::fopen("/proc/stat", "r");
  if (!f) return false;
  unsigned long long v[8] = {};
  int n = std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
                      &v[7]);
  std::fclose(f);
  if (n < 8) return false;
  *total = 0;
  for (unsigned long long x : v) *total += x;
  *steal = v[7];
  return true;
}

}  // namespace

LoadReading readLoad() {
  static std::mutex mu;
  static unsigned long long lastTotal = 0, lastSteal = 0;
  LoadReading r;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &r.loadavg1) != 1) r.loadavg1 = -1;
    std::fclose(f);
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  r.cores = sched_getaffinity(0, sizeof set, &set) == 0 ? std::max(1, CPU_COUNT(&set)) : 1;
  unsigned long long total = 0, steal = 0;
  if (readStat(&total, &steal)) {
    std::lock_guard<std::mutex> g(mu);
    if (lastTotal > 0 && total > lastTotal) r.stealPct = 100.0 * double(steal - lastSteal) / double(total - lastTotal);
    lastTotal = total;
    lastSteal = steal;
  }
  return r;
}

double coreShareSlowdown(int threads, double seconds) {
  threads = std::max(1, threads);
  std::vector<double> ratio(size_t(threads), 1.0);
  std::atomic<int> ready{0};
  auto spin = [&](int i) {
    ready.fetch_add(1);
    while (ready.load() < threads) std::this_thread::yield();  // start together
    const double w0 = wallNow(), c0 = threadCpuNow();
    volatile unsigned long long x = 0;
    // Work in slices until this thread has had `seconds` of CPU: a descheduled thread's wall time grows.
    while (threadCpuNow() - c0 < seconds)
      for (int k = 0; k < 20000; ++k) x = x + unsigned(k);
    const double cpu = threadCpuNow() - c0, wall = wallNow() - w0;
    ratio[size_t(i)] = cpu > 0 ? std::max(1.0, wall / cpu) : 1.0;
  };
  std::vector<std::thread> ts;
  for (int i = 0; i < threads; ++i) ts.emplace_back(spin, i);
  for (auto& t : ts) t.join();
  return *std::max_element(ratio.begin(), ratio.end());
}

}  // namespace tessera
