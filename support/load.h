// Owns reading how busy this machine is: the load average and the CPU time stolen by a hypervisor
// (/proc, where visible), and a control that asks the cores themselves: a few threads of fixed
// work whose wall time against their own CPU time says whether each had a core to itself.
#pragma once

#include <optional>
#include <string>

namespace tessera {

struct LoadReading {
  double loadavg1 = -1;  // 1-minute load average (-1: not readable)
  double stealPct = -1;  // % of CPU time stolen since the previous reading of this process (-1: not visible)
  int cores = 1;         // cores this process may run on
};

// The load now (/proc/loadavg, /proc/stat's steal column since the last call).
LoadReading readLoad();

// The cores this process may run on: its CPU affinity (taskset, a container's cpuset) and its
// cgroup's CPU quota (`docker run --cpus 2`: cpu.max, or cpu.cfs_quota_us under cgroup v1; a
// quota of 2.5 CPUs is 3), not the machine's online count, which std::thread::hardware_concurrency
// reports; at least 1. TESSERA_CORES=N, when set, is the answer instead (detection can be wrong in
// a VM or a container that hides its limits, and a plan for N cores can be exercised on fewer).
int usableCores();

// What the machine says, TESSERA_CORES aside.
int detectedCores();

// TESSERA_CORES as a core count; none when unset or when it is not a whole number from 1 to 4096
// (then *error, when given, says why in one line: the command line refuses such a value).
std::optional<int> coresOverride(std::string* error = nullptr);

// The CPU quota of this process's cgroup in whole cores, rounded up (0: no quota): the tightest of
// its group's and every parent's, under cgroup v2 (root/<path>/cpu.max) or v1
// (root/cpu/<path>/cpu.cfs_quota_us over cpu.cfs_period_us). The paths are parameters for tests.
int cgroupCpuLimit(const std::string& root = "/sys/fs/cgroup", const std::string& selfCgroup = "/proc/self/cgroup");

// The control: `threads` threads each spinning about `seconds` of integer work at once; the largest
// wall-over-CPU time of them. 1.0 when every thread had a core of its own; 2.0 when each shared one
// with another runnable process. A kernel timed on that many threads meanwhile ran about that much
// slower (more with OpenMP barriers, which wait for the slowest thread). Also at least N/C when more
// tasks (N, the control's own among them) were runnable than there are online CPUs (C) at the
// start, middle and end of the control: a scheduler may run a freshly woken thread its few
// milliseconds ahead of the tasks sharing its core, and its timing alone then misses them.
double coreShareSlowdown(int threads, double seconds = 0.01);

// A re-timing taken while the control stayed at or below this counts as quiet.
inline constexpr double kQuietSlowdown = 1.25;

}  // namespace tessera
