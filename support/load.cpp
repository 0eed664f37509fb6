// Owns the machine-load readings of load.h: /proc/loadavg, /proc/stat's steal, and the
// threads-of-fixed-work control.
#include "support/load.h"

#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
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

// The running-task count of /proc/loadavg's fourth field ("running/total"), this reader among them
// (-1: not readable).
int runnableNow() {
  FILE* f = std::fopen("/proc/loadavg", "r");
  if (!f) return -1;
  double a = 0, b = 0, c = 0;
  int running = -1, total = 0;
  if (std::fscanf(f, "%lf %lf %lf %d/%d", &a, &b, &c, &running, &total) != 5) running = -1;
  std::fclose(f);
  return running;
}

}  // namespace

int cgroupCpuLimit(const std::string& root, const std::string& selfCgroup) {
  // One line of /proc/self/cgroup is "id:controllers:path": "0::path" under v2, "N:...cpu...:path"
  // under v1. The limit of a path is the tightest of it and its parents.
  std::ifstream in(selfCgroup);
  std::string v2Path, v1Path, line;
  bool v1 = false;
  while (std::getline(in, line)) {
    auto a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string ctl = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (ctl.empty()) v2Path = path;
    std::stringstream cs(ctl);
    for (std::string c; std::getline(cs, c, ',');)
      if (c == "cpu") v1 = true, v1Path = path;
  }
  auto readTwo = [](const std::string& file, std::string* x, std::string* y) {
    std::ifstream f(file);
    return bool(f >> *x) && (y == nullptr || bool(f >> *y));
  };
  auto limitOf = [](double quota, double period) {
    return quota > 0 && period > 0 ? std::max(1, int(std::ceil(quota / period - 1e-9))) : 0;
  };
  int best = 0;
  auto take = [&best](int n) {
    if (n > 0) best = best == 0 ? n : std::min(best, n);
  };
  // Walk from the process's own group up to the root.
  auto walk = [](std::string path, const std::function<void(const std::string&)>& at) {
    for (;;) {
      at(path);
      if (path.empty() || path == "/") return;
      auto cut = path.find_last_of('/');
      path = cut == 0 || cut == std::string::npos ? "/" : path.substr(0, cut);
    }
  };
  if (v1) {
    const std::string base = root + "/cpu";
    walk(v1Path, [&](const std::string& p) {
      std::string q, per;
      if (readTwo(base + p + "/cpu.cfs_quota_us", &q, nullptr) && readTwo(base + p + "/cpu.cfs_period_us", &per, nullptr))
        take(limitOf(std::atof(q.c_str()), std::atof(per.c_str())));
    });
  } else if (!v2Path.empty()) {
    walk(v2Path, [&](const std::string& p) {
      std::string q, per;
      if (readTwo(root + p + "/cpu.max", &q, &per) && q != "max") take(limitOf(std::atof(q.c_str()), std::atof(per.c_str())));
    });
  }
  return best;
}

std::optional<int> coresOverride(std::string* error) {
  const char* v = std::getenv("TESSERA_CORES");
  if (v == nullptr || *v == '\0') return std::nullopt;
  char* end = nullptr;
  errno = 0;
  long n = std::strtol(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || n < 1 || n > 4096) {
    if (error) *error = std::string("TESSERA_CORES=") + v + " is not a core count (a whole number from 1 to 4096)";
    return std::nullopt;
  }
  return int(n);
}

int detectedCores() {
  int n = int(std::max(1u, std::thread::hardware_concurrency()));
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) n = std::max(1, CPU_COUNT(&set));
  if (int quota = cgroupCpuLimit(); quota > 0) n = std::min(n, quota);
  return n;
}

int usableCores() {
  std::string why;
  if (auto n = coresOverride(&why)) return *n;
  if (!why.empty()) {  // the command line refuses it first; a library user hears it once
    static std::once_flag said;
    std::call_once(said, [&why] { std::fprintf(stderr, "tessera: warning: %s; using the detected cores\n", why.c_str()); });
  }
  return detectedCores();
}

LoadReading readLoad() {
  static std::mutex mu;
  static unsigned long long lastTotal = 0, lastSteal = 0;
  LoadReading r;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &r.loadavg1) != 1) r.loadavg1 = -1;
    std::fclose(f);
  }
  r.cores = usableCores();
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
  int fewestRunnable = -1;  // the smallest of thread 0's readings at the start, middle and end
  auto runnable = [&] {
    const int n = runnableNow();
    if (n >= 0) fewestRunnable = fewestRunnable < 0 ? n : std::min(fewestRunnable, n);
  };
  auto spin = [&](int i) {
    ready.fetch_add(1);
    while (ready.load() < threads) std::this_thread::yield();  // start together
    if (i == 0) runnable();
    const double w0 = wallNow(), c0 = threadCpuNow();
    volatile unsigned long long x = 0;
    bool halfway = i != 0;
    // Work in slices until this thread has had `seconds` of CPU: a descheduled thread's wall time grows.
    while (threadCpuNow() - c0 < seconds) {
      for (int k = 0; k < 20000; ++k) x = x + unsigned(k);
      if (!halfway && threadCpuNow() - c0 >= seconds / 2) {
        halfway = true;
        runnable();
      }
    }
    const double cpu = threadCpuNow() - c0, wall = wallNow() - w0;
    if (i == 0) runnable();
    ratio[size_t(i)] = cpu > 0 ? std::max(1.0, wall / cpu) : 1.0;
  };
  std::vector<std::thread> ts;
  for (int i = 0; i < threads; ++i) ts.emplace_back(spin, i);
  for (auto& t : ts) t.join();
  const double timed = *std::max_element(ratio.begin(), ratio.end());
  // A scheduler may let a freshly woken thread run its few milliseconds ahead of the tasks that
  // share its core, so the timed ratio alone can miss them. More tasks runnable than online CPUs at
  // all three readings means someone waited: the fair share of N runnable tasks on C CPUs is N/C.
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  const double shared = online > 0 && fewestRunnable > online ? double(fewestRunnable) / double(online) : 1.0;
  return std::max(timed, shared);
}

}  // namespace tessera
