// Owns the mapped-kernel emulator's execution: fibers (a hand-rolled x86-64 context switch over
// mmap'd stacks with guard pages), the block scheduler (barriers: emu_barriers.cpp), warp-level
// vector clocks, special registers, the shared-memory arena and the memory hooks every load and store of a
// rewritten kernel goes through (bounds, races, uninitialised reads, the grouping of lane accesses
// into requests for bank conflicts and coalescing), and grid execution across host threads.
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <random>
#include <thread>

#include "emulator/emu_internal.h"
#include "support/load.h"

namespace tessera::emu {
namespace detail {

thread_local BlockState* tls = nullptr;

extern "C" void tessera_emu_switch(void** save, void* to);
// Saves the callee-saved registers on the current stack, stores the stack pointer in *save,
// switches to `to` and restores the registers saved there (System V x86-64).
asm(R"(
.text
.globl tessera_emu_switch
.type tessera_emu_switch,@function
tessera_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
.size tessera_emu_switch, .-tessera_emu_switch
)");

std::string threadName(const BlockState& b, int tid) { return threadName(b, b.ctaid, tid); }

namespace {

std::string threadLabel(const std::array<int64_t, 3>& bd, int warpSize, const std::array<int64_t, 3>& ctaid, int tid) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "block (%lld,%lld,%lld) thread (%lld,%lld,%lld) [warp %d lane %d]",
                (long long)ctaid[0], (long long)ctaid[1], (long long)ctaid[2], (long long)(tid % bd[0]),
                (long long)(tid / bd[0] % bd[1]), (long long)(tid / (bd[0] * bd[1])), tid / warpSize, tid % warpSize);
  return buf;
}

}  // namespace

std::string threadName(const BlockState& b, const std::array<int64_t, 3>& ctaid, int tid) {
  return threadLabel(b.L->block, b.warpSize, ctaid, tid);
}

void reportError(BlockState& b, const std::string& msg) {
  b.R->ok = false;
  b.R->errorCount++;
  // A quarter of the listed errors per kind ("race", "read of uninitialised shared memory", ...):
  // one fault usually shows as many of one kind, and the other kinds it causes matter as much.
  const std::string kind = msg.substr(0, std::min(msg.find(':'), msg.find(" at ")));
  int same = 0;
  for (const auto& e : b.R->errors) same += e.compare(0, kind.size(), kind) == 0;
  if (int(b.R->errors.size()) < b.O->maxErrors && same < std::max(1, b.O->maxErrors / 4)) b.R->errors.push_back(msg);
}

namespace {

[[noreturn]] void fiberMain() {
  BlockState& b = *tls;
  b.L->entry(b.L->args.empty() ? nullptr : const_cast<void**>(b.L->args.data()));
  Fiber* f = b.cur;
  f->state = FiberState::Done;
  --b.live;
  // Lanes of its warp waiting at a collective recount the live members.
  wakeWarp(warpOf(b, f->tid));
  tessera_emu_switch(&f->sp, b.schedSp);
  std::abort();  // a finished fiber is never resumed
}

void fiberStart() { fiberMain(); }

void resume(BlockState& b, Fiber& f) {
  b.cur = &f;
  ++b.R->counters.switches;
  tessera_emu_switch(&b.schedSp, f.sp);
  b.cur = nullptr;
}

// A fresh stack frame whose first switch "returns" into fiberStart with the ABI's alignment.
void prepare(BlockState& b, Fiber& f, char* stackTop) {
  uintptr_t top = reinterpret_cast<uintptr_t>(stackTop) & ~uintptr_t(15);
  auto* s = reinterpret_cast<uint64_t*>(top - 64);
  for (int i = 0; i < 6; ++i) s[i] = 0;
  s[6] = reinterpret_cast<uint64_t>(&fiberStart);
  s[7] = 0;
  f.sp = s;
  (void)b;
}

char* mapStack(size_t bytes) {
  void* p = mmap(nullptr, bytes + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  mprotect(p, 4096, PROT_NONE);  // guard page: a stack overflow faults instead of corrupting
  return static_cast<char*>(p);
}

// Wavefronts of one shared-memory request: lanes are served in phases (all 32 for accesses up to
// 4 bytes, 16 for 8 bytes, 8 for 16 bytes); in each phase, the most distinct 4-byte words any of
// the 32 banks must deliver (lanes reading the same word share it).
std::pair<uint64_t, uint64_t> bankWavefronts(const AccessGroup& g, int warpSize) {
  const int width = std::max(4, g.bytes);
  const int perPhase = std::max(1, std::min(32, 128 / width));
  uint64_t waves = 0, ideal = 0;
  for (int start = 0; start < warpSize; start += perPhase) {
    std::vector<std::vector<uint64_t>> bank(32);
    bool any = false;
    for (int l = start; l < std::min(warpSize, start + perPhase); ++l) {
      if (!g.addr[l]) continue;
      any = true;
      for (int w = 0; w < (g.bytes + 3) / 4; ++w) {
        uint64_t word = g.addr[l] / 4 + uint64_t(w);
        auto& v = bank[word % 32];
        if (std::find(v.begin(), v.end(), word) == v.end()) v.push_back(word);
      }
    }
    if (!any) continue;
    size_t worst = 1;
    for (const auto& v : bank) worst = std::max(worst, v.size());
    waves += worst;
    ++ideal;
  }
  return {waves, ideal};
}

// 32-byte sectors one global request touches, and the fewest its bytes could touch.
std::pair<uint64_t, uint64_t> sectors(const AccessGroup& g, int warpSize) {
  std::vector<uint64_t> s;
  uint64_t bytes = 0;
  for (int l = 0; l < warpSize; ++l) {
    if (!g.addr[l]) continue;
    bytes += uint64_t(g.bytes);
    for (uint64_t a = g.addr[l] / 32; a <= (g.addr[l] + uint64_t(g.bytes) - 1) / 32; ++a)
      if (std::find(s.begin(), s.end(), a) == s.end()) s.push_back(a);
  }
  return {s.size(), (bytes + 31) / 32};
}

void finishGroup(BlockState& b, int site, const AccessGroup& g) {
  Counters& c = b.R->counters;
  if (g.shared) {
    auto [waves, ideal] = bankWavefronts(g, b.warpSize);
    c.sharedRequests++, c.sharedWavefronts += waves, c.sharedIdealWavefronts += ideal, c.bankConflicts += waves - ideal;
    auto& s = c.sharedBySite[site];
    s[0]++, s[1] += waves, s[2] += waves - ideal;
  } else {
    auto [sec, ideal] = sectors(g, b.warpSize);
    ideal = std::min(ideal, sec);  // lanes reading the same bytes (a broadcast) share sectors
    c.globalRequests++, c.globalSectors += sec, c.globalIdealSectors += ideal;
    auto& s = c.globalBySite[site];
    s[0]++, s[1] += sec, s[2] += sec - ideal;
  }
}


// Adds lane `lane`'s access at `site` to its warp's request for that instruction instance.
void group(BlockState& b, int tid, int site, uint64_t addr, int bytes, bool shared) {
  Warp& w = b.warps[size_t(warpOf(b, tid))];
  const int lane = laneOf(b, tid);
  auto& occ = w.occurrence[site];
  if (occ.empty()) occ.assign(size_t(b.warpSize), 0);
  uint64_t key = (uint64_t(uint32_t(site)) << 32) | occ[size_t(lane)]++;
  auto it = w.groups.find(key);
  if (it == w.groups.end()) {
    if (w.groups.size() >= 4096) {  // a lane ran far ahead without a barrier: count what is there
      b.R->counters.partial = true;
      flushGroups(b, w);
      w.occurrence[site].assign(size_t(b.warpSize), 0);
      w.occurrence[site][size_t(lane)] = 1;
      key = uint64_t(uint32_t(site)) << 32;
    }
    it = w.groups.emplace(key, AccessGroup{}).first;
    it->second.bytes = bytes;
    it->second.shared = shared;
  }
  AccessGroup& g = it->second;
  g.addr[lane] = addr ? addr : 1;
  g.bytes = std::max(g.bytes, bytes);
  if (++g.lanes == warpLanes(b, warpOf(b, tid))) {
    finishGroup(b, site, g);
    w.groups.erase(it);
  }
}

}  // namespace

void releaseInto(BlockState& b, int w, std::vector<uint32_t>& acc) {
  const int n = b.nwarps;
  b.clocks[size_t(w * n + w)]++;
  b.warps[size_t(w)].syncCount++;
  acc.resize(size_t(n), 0);
  for (int j = 0; j < n; ++j) acc[size_t(j)] = std::max(acc[size_t(j)], b.clocks[size_t(w * n + j)]);
}

void flushGroups(BlockState& b, Warp& w) {
  for (auto& [key, g] : w.groups) finishGroup(b, int(key >> 32), g);
  w.groups.clear();
  w.occurrence.clear();
}

const Extent* findExtent(const Launch& l, const void* p, size_t bytes) {
  for (const auto& e : l.extents) {
    auto* base = static_cast<const char*>(e.base);
    if (static_cast<const char*>(p) >= base && static_cast<const char*>(p) + bytes <= base + e.bytes) return &e;
  }
  return nullptr;
}

namespace {

// Where a faulty access of thread `tid` lands instead (256 bytes each, 64-byte aligned).
char* sinkFor(BlockState& b, int tid) {
  auto base = (reinterpret_cast<uintptr_t>(b.sink.data()) + 63) & ~uintptr_t(63);
  return reinterpret_cast<char*>(base) + size_t(tid) * 256;
}

std::string hex(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", (unsigned long long)reinterpret_cast<uintptr_t>(p));
  return buf;
}

}  // namespace

void waitHere(WaitKind k, int site) {
  BlockState& b = *tls;
  Fiber* f = b.cur;
  f->state = FiberState::Waiting;
  f->wait = k;
  f->waitSite = site;
  ++b.R->counters.switches;
  tessera_emu_switch(&f->sp, b.schedSp);
}

void wakeWarp(int warp) {
  BlockState& b = *tls;
  for (int l = 0; l < warpLanes(b, warp); ++l) {
    Fiber& f = b.fibers[size_t(warp * b.warpSize + l)];
    if (f.state == FiberState::Waiting && f.wait == WaitKind::Warp) f.state = FiberState::Ready, f.wait = WaitKind::None;
  }
}

void maybePreempt(BlockState& b) {
  if (!b.pct || !b.cur) return;
  ++b.steps;
  if (b.nextPreempt >= b.preemptAt.size() || b.steps < b.preemptAt[b.nextPreempt]) return;
  ++b.nextPreempt;
  Fiber* f = b.cur;
  f->priority = --b.lowest;  // below every other fiber: the others run until they block
  ++b.R->counters.switches;
  tessera_emu_switch(&f->sp, b.schedSp);
}

namespace {

// Live lanes of warp w in `mask`.
uint64_t liveLanes(const BlockState& b, int w, uint64_t mask) {
  uint64_t m = 0;
  for (int l = 0; l < warpLanes(b, w); ++l)
    if ((mask >> l & 1) && b.fibers[size_t(w * b.warpSize + l)].state != FiberState::Done) m |= uint64_t(1) << l;
  return m;
}

}  // namespace

void collectiveSlot(uint64_t mask) {
  BlockState& b = *tls;
  const int tid = b.cur->tid, w = warpOf(b, tid);
  Warp& warp = b.warps[size_t(w)];
  // Lanes of another mask (the other side of a branch) are mid-collective: theirs completes first.
  while (warp.coll.arrived > 0 && (warp.coll.mask & mask) == 0 && !b.aborted) waitHere(WaitKind::Warp, warp.coll.site);
}

bool warpCollective(int op, int site, const std::function<void(Collective&, int)>& fn, uint64_t mask, bool ordersMemory) {
  BlockState& b = *tls;
  const int tid = b.cur->tid, w = warpOf(b, tid);
  Warp& warp = b.warps[size_t(w)];
  Collective& c = warp.coll;
  if (c.arrived == 0) {
    c.op = op;
    c.site = site;
    c.mask = mask | uint64_t(1) << laneOf(b, tid);
  } else if (c.op != op || (c.site != site && !ordersMemory && op / 16 != 1 && op / 16 != 2)) {
    // .aligned instructions (ldmatrix, mma, MFMA, wgmma) need every lane at the same one;
    // shfl.sync / vote.sync / bar.warp.sync only the same kind with the same lanes.
    reportError(b, "warp divergence at a collective: " + threadName(b, tid) + " at " + b.L->sites->name(site) +
                       " while other lanes of warp " + std::to_string(w) + " wait at " + b.L->sites->name(c.site));
    b.aborted = true;
    return false;
  }
  const uint32_t gen = warp.collGen;
  // Lanes that exited cannot arrive (nor lanes outside the member mask): the collective runs
  // with the live members; a waiting lane finishes it when the last missing member exits.
  auto complete = [&] {
    ++b.R->counters.collectives;
    fn(c, __builtin_popcountll(liveLanes(b, w, c.mask)));
    std::memset(c.ptr, 0, sizeof c.ptr);  // lane marks and addresses are per collective
    c.arrived = 0;
    ++warp.collGen;
    // Only __syncwarp / bar.warp.sync orders memory between the lanes (PTX ISA memory model).
    if (ordersMemory) warp.syncCount++;
    flushGroups(b, warp);
    wakeWarp(w);
  };
  if (++c.arrived < __builtin_popcountll(liveLanes(b, w, c.mask))) {
    while (warp.collGen == gen) {
      waitHere(WaitKind::Warp, site);
      if (b.aborted) return false;
      if (warp.collGen == gen && c.arrived >= __builtin_popcountll(liveLanes(b, w, c.mask))) complete();
    }
    return !b.aborted;
  }
  complete();
  return !b.aborted;
}

}  // namespace detail

using namespace detail;

// ---- entry points of the rewritten kernels ----
extern "C" {

int32_t tessera_emu_sreg(int32_t which) {
  BlockState& b = *tls;
  const int tid = b.cur->tid;
  const auto& bd = b.L->block;
  const auto& gd = b.L->grid;
  switch (which) {
    case kTidX: return int32_t(tid % bd[0]);
    case kTidY: return int32_t(tid / bd[0] % bd[1]);
    case kTidZ: return int32_t(tid / (bd[0] * bd[1]));
    case kNtidX: return int32_t(bd[0]);
    case kNtidY: return int32_t(bd[1]);
    case kNtidZ: return int32_t(bd[2]);
    case kCtaidX: return int32_t(b.ctaid[0]);
    case kCtaidY: return int32_t(b.ctaid[1]);
    case kCtaidZ: return int32_t(b.ctaid[2]);
    case kNctaidX: return int32_t(gd[0]);
    case kNctaidY: return int32_t(gd[1]);
    case kNctaidZ: return int32_t(gd[2]);
    case kLaneId: return laneOf(b, tid);
    case kWarpSize: return b.warpSize;
    case kWarpId: return warpOf(b, tid);
    case kNwarpId: return b.nwarps;
    case kClock: return int32_t(b.R->counters.switches);
  }
  return 0;
}

void* tessera_emu_shared(int64_t offset) { return tls->smemBase + offset; }

// Every load and store of the kernel but private ones: returns the pointer to use (a sink when
// the access is out of bounds, so a wrong kernel never corrupts the process).
void* tessera_emu_mem(void* p, int32_t bytes, int32_t flags, int32_t site) {
  BlockState& b = *tls;
  maybePreempt(b);
  const int tid = b.cur->tid;
  const bool write = flags & kWrite;
  char* c = static_cast<char*>(p);
  const uint64_t align = uint64_t(1) << ((flags >> 8) & 31);
  if (align > 1 && reinterpret_cast<uintptr_t>(p) % align) {
    reportError(b, std::string("misaligned ") + (write ? "store" : "load") + " of " + std::to_string(bytes) + " B at " +
                       hex(p) + " (the instruction assumes " + std::to_string(align) + "-byte alignment) by " +
                       threadName(b, tid) + " at " + b.L->sites->name(site));
    return sinkFor(b, tid);
  }
  if (c >= b.smemBase && c < b.smemBase + std::max<size_t>(b.smemBytes, 1)) {
    if (c + bytes > b.smemBase + b.smemBytes) {
      reportError(b, std::string("out-of-bounds shared ") + (write ? "store" : "load") + " of " + std::to_string(bytes) +
                         " B at offset " + std::to_string(c - b.smemBase) + " (the block has " +
                         std::to_string(b.smemBytes) + " B) by " + threadName(b, tid) + " at " + b.L->sites->name(site));
      return sinkFor(b, tid);
    }
    // Atomics of shared memory do not race with each other (with plain accesses they do).
    if (b.O->checks) sharedAccess(b, c, bytes, write, tid, site, (flags & kAtomicRmw) ? kAtomic : kPlain);
    group(b, tid, site, uint64_t(c - b.smemBase), bytes, true);
    return p;
  }
  const Extent* ext = findExtent(*b.L, p, size_t(bytes));
  if (!ext) {
    // Named by the buffer it overran (past its end first: the usual fault); the red zones
    // between the emulated device's buffers keep an overrun from landing in a neighbour.
    const Extent *past = nullptr, *close = nullptr;
    for (const auto& e : b.L->extents) {
      auto* base = static_cast<const char*>(e.base);
      if (c >= base + e.bytes && c < base + e.bytes + 4096) past = &e;
      else if (c >= base - 4096 && c < base + e.bytes + 4096) close = &e;
    }
    std::string near;
    if (const Extent* e = past ? past : close) {
      auto* base = static_cast<const char*>(e->base);
      near = " (" + std::to_string(c - base) + " B from the start of " + e->name + " of " + std::to_string(e->bytes) + " B" +
             (past ? ", " + std::to_string(c - base - e->bytes) + " B past its end)" : ")");
    }
    reportError(b, std::string("out-of-bounds global ") + (write ? "store" : "load") + " of " + std::to_string(bytes) +
                       " B at " + hex(p) + near + " by " + threadName(b, tid) + " at " + b.L->sites->name(site));
    return sinkFor(b, tid);
  }
  group(b, tid, site, reinterpret_cast<uint64_t>(p), bytes, false);
  if (write && b.asyncInFlight > 0 && b.O->checks) asyncSourceWrite(b, c, bytes, tid, site);
  if (b.G) globalAccess(b, int(ext - b.L->extents.data()), c, bytes, flags, tid, site);
  if (write && b.L->trackWriters && !b.writersFull) {
    for (int i = 0; i < bytes; i += 4) b.writers[c + i] = {b.ctaid, tid, site};
    if (b.writers.size() > (size_t(1) << 22)) b.writersFull = true;
  }
  return p;
}

void tessera_emu_count(int64_t n) { tls->R->counters.laneInstructions += uint64_t(n); }

// membar.gl / fence.{sc,acq_rel}.gpu / an LLVM fence: device scope.
void tessera_emu_fence_device(int32_t) {
  BlockState& b = *tls;
  if (b.G) deviceFence(b, b.cur->tid);
}

}  // extern "C"

// ---- grid execution ----
namespace {

struct Worker {
  BlockState b;
  Report partial;
  ~Worker() {
    for (char* s : b.stacks)
      if (s) munmap(s, b.stackBytes + 4096);
  }
};

bool setUp(Worker& w, const Launch& l, const Options& o) {
  BlockState& b = w.b;
  b.L = &l;
  b.O = &o;
  b.R = &w.partial;
  b.warpSize = l.warpSize;
  b.nthreads = int(l.block[0] * l.block[1] * l.block[2]);
  b.nwarps = (b.nthreads + b.warpSize - 1) / b.warpSize;
  b.fibers.resize(size_t(b.nthreads));
  b.stackBytes = o.stackBytes;
  b.stacks.assign(size_t(b.nthreads), nullptr);
  for (auto& s : b.stacks)
    if (!(s = mapStack(b.stackBytes))) return false;
  b.barArrived.assign(16, 0);
  b.barWarps.assign(16 * 16, 0);
  b.barRelease.assign(16, {});
  b.barArriveSite.assign(16, -1);
  b.smemBytes = l.sharedBytes;
  b.smem.assign(l.sharedBytes + 1024 + 64, 0);
  // 1024-byte aligned base: swizzled layouts and TMA destinations assume it.
  b.smemBase = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(b.smem.data()) + 1023) & ~uintptr_t(1023));
  b.shadow.resize(l.sharedBytes);
  b.warps.resize(size_t(b.nwarps));
  b.sink.assign(size_t(b.nthreads) * 256 + 256, 0);
  b.async.resize(size_t(b.nthreads));
  b.asyncGroups.assign(size_t(b.nthreads), 0);
  b.wgmma.resize(size_t(b.nthreads));
  b.wgmmaGroups.assign(size_t(b.nthreads), 0);
  b.proxyFences.assign(size_t(b.nthreads), 0);
  b.fenceSync.assign(size_t(b.nthreads), 0);
  b.fenceClock.assign(size_t(b.nthreads), std::vector<uint32_t>(size_t(b.nwarps), 0));
  b.wgmmaFences.assign(size_t(b.nthreads), 0);
  b.lastRegEvent.assign(size_t(b.nthreads), -1);
  b.lastRegSite.assign(size_t(b.nthreads), -1);
  b.devFenceSeq.assign(size_t(b.nthreads), 0);
  return true;
}

// A PCT order for one block: random distinct fiber priorities and `points` preemption points
// drawn from the first `steps` memory accesses.
void choosePct(BlockState& b, std::mt19937_64& rng, int points, uint64_t steps) {
  std::vector<int64_t> prio(size_t(b.nthreads));
  for (int t = 0; t < b.nthreads; ++t) prio[size_t(t)] = t + 1;
  std::shuffle(prio.begin(), prio.end(), rng);
  for (int t = 0; t < b.nthreads; ++t) b.fibers[size_t(t)].priority = prio[size_t(t)];
  b.lowest = 0;
  b.preemptAt.clear();
  for (int i = 0; i < points && steps > 0; ++i) b.preemptAt.push_back(1 + rng() % steps);
  std::sort(b.preemptAt.begin(), b.preemptAt.end());
  b.nextPreempt = 0;
  b.steps = 0;
}

void runBlock(Worker& w, std::array<int64_t, 3> ctaid, std::mt19937_64* rng, int preemptions = 0, uint64_t steps = 0) {
  BlockState& b = w.b;
  b.ctaid = ctaid;
  b.blockId = uint32_t(ctaid[0] + b.L->grid[0] * (ctaid[1] + b.L->grid[1] * ctaid[2]) + 1);
  b.aborted = false;
  b.live = b.nthreads;
  std::memset(b.smemBase, 0xA5, b.smemBytes);  // never zero: a read before a write shows
  std::fill(b.shadow.begin(), b.shadow.end(), Shadow{});
  b.clocks.assign(size_t(b.nwarps) * size_t(b.nwarps), 0);
  for (int i = 0; i < b.nwarps; ++i) b.clocks[size_t(i * b.nwarps + i)] = 1;
  for (auto& wp : b.warps) wp = Warp{};
  std::fill(b.barArrived.begin(), b.barArrived.end(), 0);
  std::fill(b.barWarps.begin(), b.barWarps.end(), 0);
  for (auto& r : b.barRelease) r.clear();
  std::fill(b.barArriveSite.begin(), b.barArriveSite.end(), -1);
  b.readPool.clear();
  b.readFree.clear();
  b.gWrites = 0;
  std::fill(b.devFenceSeq.begin(), b.devFenceSeq.end(), 0);
  b.seenReleases.clear();
  b.acquired.clear();
  std::fill(b.proxyFences.begin(), b.proxyFences.end(), 0);
  std::fill(b.fenceSync.begin(), b.fenceSync.end(), 0);
  std::fill(b.wgmmaFences.begin(), b.wgmmaFences.end(), 0);
  std::fill(b.lastRegEvent.begin(), b.lastRegEvent.end(), -1);
  asyncReset(b);
  tmaReset(b);
  for (int t = 0; t < b.nthreads; ++t) {
    Fiber& f = b.fibers[size_t(t)];
    f = Fiber{};
    f.tid = t;
    prepare(b, f, b.stacks[size_t(t)] + 4096 + b.stackBytes);
  }
  b.pct = rng != nullptr;
  if (rng) choosePct(b, *rng, preemptions, steps);
  tls = &b;
  std::vector<int> order(size_t(b.nthreads));
  for (int t = 0; t < b.nthreads; ++t) order[size_t(t)] = t;
  while (b.live > 0 && !b.aborted) {
    bool progressed = false;
    if (b.pct) {
      // PCT: the ready fiber of highest priority runs until it blocks or is preempted.
      Fiber* best = nullptr;
      for (auto& f : b.fibers)
        if (f.state == FiberState::Ready && (!best || f.priority > best->priority)) best = &f;
      if (best) resume(b, *best), progressed = true;
    } else {
      for (int t : order) {
        Fiber& f = b.fibers[size_t(t)];
        if (f.state != FiberState::Ready) continue;
        resume(b, f);
        progressed = true;
        if (b.aborted) break;
      }
    }
    if (!progressed && !b.aborted) {
      // Nobody can run and not everyone finished: a barrier or collective some never reach.
      std::string who;
      int shown = 0;
      for (const auto& f : b.fibers)
        if (f.state == FiberState::Waiting && shown++ < 4)
          who += (who.empty() ? "" : "; ") + threadName(b, f.tid) + " waits at " + b.L->sites->name(f.waitSite);
      int done = 0;
      for (const auto& f : b.fibers) done += f.state == FiberState::Done;
      reportError(b, "deadlock: " + std::to_string(b.live) + " threads wait, " + std::to_string(done) +
                         " finished without arriving (" + who + ")");
      b.aborted = true;
    }
  }
  for (auto& wp : b.warps) flushGroups(b, wp);
  if (!b.aborted) barriersBlockEnd(b);
  if (!b.aborted) asyncBlockEnd(b);
  if (!b.aborted) tmaBlockEnd(b);
  tls = nullptr;
}

std::array<int64_t, 3> ctaidOf(const Launch& l, int64_t i) {
  return {i % l.grid[0], i / l.grid[0] % l.grid[1], i / (l.grid[0] * l.grid[1])};
}

// Global memory a launch may touch, copied so that the PCT orders start from what the fixed order
// starts from (and leave nothing behind). Bounded: past it the extra orders are skipped.
constexpr size_t kScheduleSnapshotBytes = size_t(1) << 30;
constexpr size_t kGlobalShadowBytes = size_t(256) << 20;

// The seeded PCT orders over the first and last blocks (options' scheduleBlocks), on one host
// thread from the launch's initial global memory, restored after each; their errors, each naming
// its order, into `errors`; returns how many errors they found.
uint64_t runSchedules(const Launch& l, const Options& o, int64_t blocks, Report& total, std::vector<std::string>& errors) {
  size_t bytes = 0;
  for (const auto& e : l.extents) bytes += e.bytes;
  if (bytes > kScheduleSnapshotBytes) {
    total.schedulesNote = "the extra fiber orders were skipped: " + std::to_string(bytes >> 20) +
                          " MiB of buffers is too much to restore between them";
    return 0;
  }
  std::vector<std::vector<char>> saved;
  for (const auto& e : l.extents) {
    auto* p = static_cast<const char*>(e.base);
    saved.emplace_back(p, p + e.bytes);
  }
  auto restore = [&] {
    for (size_t i = 0; i < l.extents.size(); ++i)
      std::memcpy(const_cast<void*>(l.extents[i].base), saved[i].data(), saved[i].size());
  };
  std::vector<int64_t> picked;
  for (int64_t i : {int64_t(0), blocks - 1, blocks / 2})
    if (int(picked.size()) < std::max(1, o.scheduleBlocks) && std::find(picked.begin(), picked.end(), i) == picked.end())
      picked.push_back(i);
  Options one = o;
  one.countInstructions = false;
  Launch quiet = l;
  quiet.trackWriters = false;
  auto w = std::make_unique<Worker>();
  if (!setUp(*w, quiet, one)) return 0;
  uint64_t found = 0;
  std::vector<uint64_t> steps(picked.size(), 0);
  total.schedules = o.schedules;
  total.seed = o.seed;
  for (int s = 1; s < o.schedules; ++s) {
    const uint64_t seed = o.seed + uint64_t(s - 1);
    std::mt19937_64 rng(seed);
    for (size_t k = 0; k < picked.size(); ++k) {
      Report& p = w->partial;
      p = Report{};
      // The first order has no preemption points (it counts the block's steps for the others).
      runBlock(*w, ctaidOf(l, picked[k]), &rng, s == 1 ? 0 : o.preemptions, steps[k]);
      if (s == 1) steps[k] = w->b.steps;
      found += p.errorCount;
      for (const auto& e : p.errors)
        if (errors.size() < size_t(o.maxErrors))
          errors.push_back(e + " [in fiber order " + std::to_string(s + 1) + " of " + std::to_string(o.schedules) +
                           ": PCT seed " + std::to_string(seed) + "]");
      restore();
      if (found) break;
    }
    if (found) break;  // one order that fails is enough to refuse the kernel
  }
  return found;
}

}  // namespace

Report run(const Launch& l, const Options& o) {
  auto t0 = std::chrono::steady_clock::now();
  Report total;
  const int64_t blocks = l.grid[0] * l.grid[1] * l.grid[2];
  const int64_t threads = l.block[0] * l.block[1] * l.block[2];
  if (blocks <= 0 || threads <= 0 || threads > 2048 || l.warpSize <= 0 || l.warpSize > 64 || !l.entry || !l.sites) {
    total.ok = false;
    total.errors.push_back("bad launch: grid " + std::to_string(blocks) + " blocks of " + std::to_string(threads) + " threads");
    return total;
  }
  int hostThreads = o.hostThreads > 0 ? o.hostThreads : usableCores();
  hostThreads = int(std::min<int64_t>(hostThreads, blocks));
  std::vector<std::string> extraErrors;
  uint64_t extraCount = 0;
  if (o.checks && o.schedules > 1) extraCount = runSchedules(l, o, blocks, total, extraErrors);
  std::atomic<int64_t> next{0};
  std::mutex mu;
  // Global races are checked while the launch's buffers are small enough to shadow (6x their bytes).
  std::unique_ptr<GlobalShadow> shadow;
  size_t globalBytes = 0;
  for (const auto& e : l.extents) globalBytes += e.bytes;
  if (o.checks && globalBytes <= kGlobalShadowBytes) {
    shadow = std::make_unique<GlobalShadow>(l.extents);
    if (!shadow->ok) shadow.reset();
  }
  auto work = [&]() {
    auto w = std::make_unique<Worker>();
    if (!setUp(*w, l, o)) {
      std::lock_guard<std::mutex> g(mu);
      total.ok = false;
      total.errors.push_back("cannot map the fibers' stacks");
      return;
    }
    w->b.G = shadow.get();
    for (int64_t i; (i = next++) < blocks;) runBlock(*w, ctaidOf(l, i), nullptr);
    std::lock_guard<std::mutex> g(mu);
    Report& p = w->partial;
    total.ok = total.ok && p.ok;
    total.errorCount += p.errorCount;
    for (auto& e : p.errors)
      if (total.errors.size() < size_t(o.maxErrors)) total.errors.push_back(e);
    Counters& c = total.counters;
    const Counters& pc = p.counters;
    c.laneInstructions += pc.laneInstructions, c.barriers += pc.barriers, c.collectives += pc.collectives;
    c.switches += pc.switches, c.sharedRequests += pc.sharedRequests, c.sharedWavefronts += pc.sharedWavefronts;
    c.sharedIdealWavefronts += pc.sharedIdealWavefronts, c.bankConflicts += pc.bankConflicts;
    c.globalRequests += pc.globalRequests, c.globalSectors += pc.globalSectors;
    c.globalIdealSectors += pc.globalIdealSectors, c.partial = c.partial || pc.partial;
    for (const auto& [s, v] : pc.sharedBySite)
      for (int i = 0; i < 3; ++i) c.sharedBySite[s][size_t(i)] += v[size_t(i)];
    for (const auto& [s, v] : pc.globalBySite)
      for (int i = 0; i < 3; ++i) c.globalBySite[s][size_t(i)] += v[size_t(i)];
    for (const auto& [addr, who] : w->b.writers) total.lastWriter.push_back({addr, who.ctaid, who.tid, who.site});
  };
  std::vector<std::thread> pool;
  for (int i = 1; i < hostThreads; ++i) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  // The PCT orders' errors after the fixed order's (the same fault usually shows in both).
  total.ok = total.ok && extraCount == 0;
  total.errorCount += extraCount;
  for (auto& e : extraErrors)
    if (total.errors.size() < size_t(o.maxErrors)) total.errors.push_back(std::move(e));
  // One writer per word, by address (a word two blocks wrote: the one merged last, as before).
  auto& lw = total.lastWriter;
  std::stable_sort(lw.begin(), lw.end(), [](const GlobalWriter& a, const GlobalWriter& b) { return std::less<const void*>()(a.addr, b.addr); });
  size_t kept = 0;
  for (size_t i = 0; i < lw.size(); ++i) {
    if (kept && lw[kept - 1].addr == lw[i].addr) --kept;
    lw[kept++] = lw[i];
  }
  lw.resize(kept);
  total.block = l.block;
  total.warpSize = l.warpSize;
  total.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return total;
}

std::string writerName(const Report& r, const GlobalWriter& w) { return threadLabel(r.block, r.warpSize, w.ctaid, w.tid); }

}  // namespace tessera::emu
