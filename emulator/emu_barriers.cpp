// Owns the mapped-kernel emulator's named barriers: bar.sync / s_barrier (id 0..15, a thread
// count or every live thread) with the vector-clock join of the warps that meet there, and
// bar.arrive, which counts toward a barrier without waiting and releases what the arriving warp
// did to the warps that wait there (the arriver acquires nothing); arrivals no bar.sync meets by
// the block's end are reported.
#include <algorithm>

#include "emulator/emu_internal.h"

namespace tessera::emu {

namespace detail {

// The vector-clock join of a barrier: every warp in `warps` ends the epoch of its accesses (its
// own clock advances), then learns what every other one knew. An access recorded at a warp's
// clock c is ordered before another warp's access once that warp knows a clock above c.
void joinClocks(BlockState& b, const std::vector<int>& warps) {
  const int n = b.nwarps;
  for (int w : warps) {
    b.clocks[size_t(w * n + w)]++;
    b.warps[size_t(w)].syncCount++;
  }
  std::vector<uint32_t> merged(size_t(n), 0);
  for (int w : warps)
    for (int j = 0; j < n; ++j) merged[size_t(j)] = std::max(merged[size_t(j)], b.clocks[size_t(w * n + j)]);
  for (int w : warps) std::copy(merged.begin(), merged.end(), b.clocks.begin() + w * n);
}


void barriersBlockEnd(BlockState& b) {
  // Arrivals no bar.sync ever met: the kernel's barrier protocol is out of balance.
  for (int id = 0; id < int(b.barArrived.size()); ++id)
    if (b.barArrived[size_t(id)] > 0 && b.barArriveSite[size_t(id)] >= 0)
      reportError(b, "barrier " + std::to_string(id) + " ends the block with " + std::to_string(b.barArrived[size_t(id)]) +
                         " arrivals no bar.sync met (the last bar.arrive at " + b.L->sites->name(b.barArriveSite[size_t(id)]) +
                         ")");
}

}  // namespace detail

using namespace detail;

namespace {

// Barrier `id` completes: the warps that waited there join their clocks and what its arrivers
// released, and go on.
void completeBarrier(BlockState& b, int id) {
  std::vector<int> warps;
  for (int i = 0; i < b.nwarps; ++i)
    if (b.barWarps[size_t(id) * 16 + size_t(i / 64)] >> (i % 64) & 1) warps.push_back(i);
  for (int i = 0; i < 16; ++i) b.barWarps[size_t(id) * 16 + size_t(i)] = 0;
  b.barArrived[size_t(id)] = 0;
  for (int wi : warps) flushGroups(b, b.warps[size_t(wi)]);
  joinClocks(b, warps);
  auto& released = b.barRelease[size_t(id)];
  const int n = b.nwarps;
  if (!released.empty())
    for (int w : warps)
      for (int j = 0; j < n; ++j) b.clocks[size_t(w * n + j)] = std::max(b.clocks[size_t(w * n + j)], released[size_t(j)]);
  released.clear();
  b.barArriveSite[size_t(id)] = -1;
  for (auto& f : b.fibers)
    if (f.state == FiberState::Waiting && f.wait == WaitKind::Barrier && f.barrierId == id)
      f.state = FiberState::Ready, f.wait = WaitKind::None;
}

bool barrierIdOk(BlockState& b, int32_t id, int tid, int32_t site) {
  if (id >= 0 && id < int(b.barArrived.size())) return true;
  reportError(b, "barrier id " + std::to_string(id) + " out of range, " + threadName(b, tid) + " at " + b.L->sites->name(site));
  b.aborted = true;
  return false;
}

}  // namespace

extern "C" {

// bar.sync / s_barrier: `id` 0..15, `count` threads (-1: every live thread of the block).
void tessera_emu_barrier(int32_t id, int32_t count, int32_t site) {
  BlockState& b = *tls;
  ++b.R->counters.barriers;
  if (b.aborted) return;
  const int tid = b.cur->tid;
  if (!barrierIdOk(b, id, tid, site)) return;
  const int expected = count < 0 ? b.live : count;
  b.cur->barrierId = id;
  const int w = warpOf(b, tid);
  b.barWarps[size_t(id) * 16 + size_t(w / 64)] |= uint64_t(1) << (w % 64);
  if (++b.barArrived[size_t(id)] < expected) {
    waitHere(WaitKind::Barrier, site);
    return;
  }
  completeBarrier(b, id);  // the last arriver: release the others
}

// bar.arrive: counts toward barrier `id` of `count` threads without waiting; what this thread
// did before is released to the threads that wait there (bar.sync), not the other way round.
void tessera_emu_barrier_arrive(int32_t id, int32_t count, int32_t site) {
  BlockState& b = *tls;
  ++b.R->counters.barriers;
  if (b.aborted) return;
  const int tid = b.cur->tid;
  if (!barrierIdOk(b, id, tid, site)) return;
  if (count <= 0 || count % b.warpSize) {
    reportError(b, "bar.arrive with " + std::to_string(count) + " threads (a positive multiple of the warp size), " +
                       threadName(b, tid) + " at " + b.L->sites->name(site));
    b.aborted = true;
    return;
  }
  flushGroups(b, b.warps[size_t(warpOf(b, tid))]);
  releaseInto(b, warpOf(b, tid), b.barRelease[size_t(id)]);
  b.barArriveSite[size_t(id)] = site;
  if (++b.barArrived[size_t(id)] >= count) completeBarrier(b, id);
}

}  // extern "C"

}  // namespace tessera::emu
