// Owns reading how busy this machine is: the load average and the CPU time stolen by a hypervisor
// (/proc, where visible), and a control that asks the cores themselves: a few threads of fixed
// work whose wall time against their own CPU time says whether each had a core to itself.
#pragma once

namespace tessera {

struct LoadReading {
  double loadavg1 = -1;  // 1-minute load average (-1: not readable)
  double stealPct = -1;  // % of CPU time stolen since the previous reading of this process (-1: not visible)
  int cores = 1;         // cores this process may run on
};

// The load now (/proc/loadavg, /proc/stat's steal column since the last call).
LoadReading readLoad();

// The cores this process may run on: its CPU affinity (taskset, a container's cpuset), not the
// machine's online count, which std::thread::hardware_concurrency reports; at least 1.
int usableCores();

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
