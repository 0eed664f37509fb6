// Owns the mapped-kernel emulator's per-block state, shared by its runtime files: fibers (one per
// GPU thread), the block's shared-memory arena and its shadow (happens-before for races,
// initialisation, in-flight async copies), warps and their collectives, and the per-warp grouping
// of lane accesses into requests (bank conflicts, coalescing).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "emulator/emu_runtime.h"

namespace tessera::emu::detail {

enum class FiberState : uint8_t { Ready, Waiting, Done };
enum class WaitKind : uint8_t { None, Barrier, Warp, MBarrier, Wgmma };

struct Fiber {
  void* sp = nullptr;  // saved stack pointer while switched out
  int tid = 0;
  int64_t priority = 0;  // PCT orders: the ready fiber of highest priority runs
  FiberState state = FiberState::Ready;
  WaitKind wait = WaitKind::None;
  int waitSite = -1;   // the barrier or collective it waits at
  int barrierId = 0;   // bar.sync id, or the shared offset of the mbarrier it waits on
};

// A read in the race shadow: the reading thread (the last of `several` lanes of `warp` that
// read since its last sync), the instruction, and its warp's clock and sync count at the read.
struct ReadEpoch {
  int16_t tid = -1, warp = -1;
  int32_t site = -1;
  uint32_t clock = 0, sync = 0;
  bool several = false;
};

// Happens-before in shared memory, per byte: the last writer, with the clock of its warp
// (warp-level vector clocks: barriers order warps) and its warp's sync count (__syncwarp and
// barriers order the lanes of one warp), the proxy it wrote through, and the readers since that
// write: one inline epoch, or (once two warps read it unordered) a read vector clock per warp in
// the block's pool, so a write-after-read by any earlier reader is seen.
struct Shadow {
  int16_t writer = -1;
  uint8_t written = 0;     // initialised
  uint8_t pending = 0;     // an async copy to it is in flight
  uint32_t wClock = 0, wSync = 0;
  int32_t wSite = -1;
  uint32_t wFence = 0;     // the writer's fence.proxy.async count when it wrote
  uint8_t wAsync = 0;      // written through the async proxy (TMA)
  uint8_t wgmmaReads = 0;  // wgmma operand reads in flight (issued, not yet retired)
  int16_t pendingBy = -1;
  int32_t pendingSite = -1;
  ReadEpoch r;
  int32_t readSet = -1;    // index of its per-warp read epochs in BlockState::readPool
};

// How an access reaches shared memory (sharedAccess's `how`). kSeveral: the read stands for
// several lanes of the thread's warp (a wgmma operand element its lanes share), so no lane's own
// later write is ordered after it by program order alone.
enum AccessHow : int { kPlain = 0, kAtomic = 1, kAsyncProxy = 2, kSeveral = 4 };

// A warp's collective in progress: operands of every lane, results for every lane.
struct Collective {
  int arrived = 0;
  int op = 0;
  int site = -1;
  uint64_t mask = ~uint64_t(0);  // member lanes (shfl.sync / vote.sync / bar.warp.sync's membermask)
  uint64_t ptr[64] = {};
  uint32_t in[64][24] = {};
  uint32_t out[64][16] = {};
};

// Lane accesses of one warp at one instruction instance, grouped into a request.
struct AccessGroup {
  int lanes = 0;
  int bytes = 0;
  bool shared = true;
  uint64_t addr[64] = {};
};

struct Warp {
  Collective coll;
  uint32_t syncCount = 1;  // __syncwarps and barriers this warp passed (orders its lanes)
  uint32_t collGen = 0;    // collectives completed
  // site -> occurrence counter per lane; (site, occurrence) -> group being filled.
  std::unordered_map<int, std::vector<uint32_t>> occurrence;
  std::unordered_map<uint64_t, AccessGroup> groups;
  // The warp's operands of its last wgmma, decoded once by the collective for all its lanes:
  // A's 16 rows x 16 k and B's N columns x 16 k (emu_tma.cpp).
  std::vector<float> wgA, wgB;
};

// An async copy issued and not yet completed (cp.async; the issuing thread's queue).
// The source is read at issue (what the hardware may read any time before the wait): its bytes
// travel with the copy, the destination holds poison until the wait, and a write to the source
// before then is a race.
struct AsyncCopy {
  char* dst;
  const char* src;
  int bytes, srcBytes;
  int site;
  int group;  // commit group (-1: still open)
  std::array<char, 16> data;
};

// An mbarrier (sm_90) in shared memory, by its offset: the arrivals and transaction bytes its
// current phase still expects, and vector clocks (per warp) for happens-before: what the arrivals
// of the current phase released, and what the last completed phase publishes to its waiters.
struct MBarrier {
  int expected = 0, pending = 0;
  int64_t tx = 0;
  uint32_t phase = 0;  // phases completed
  int initSite = -1;
  std::vector<uint32_t> accum, done;
  struct Landing {
    uint32_t off, bytes;
  };
  std::vector<Landing> landing;  // TMA bytes of the current phase: in flight until it completes
  // The boxes those bytes come from, read from global memory at issue and landed (swizzled) when
  // the phase completes; the destination holds poison until then.
  struct Box {
    int64_t dOff, span, step;
    std::vector<char> data;  // the box in row-major order, before the swizzle
  };
  std::vector<Box> boxes;
};

// wgmma groups of one thread: the shared bytes each in-flight wgmma reads for this thread's part
// of the warpgroup's MMA (recorded as reads when a wait retires the group, so an overwrite before
// the wait is a race).
struct WgmmaReads {
  int group = -1;  // commit group (-1: not committed yet)
  int site = -1;
  int elemBytes = 2;
  std::vector<uint32_t> offs;
};

// The results of one wgmma for one thread (emu_wgmma_acc.cpp): its registers hold handles to
// them (signalling NaNs naming the slot) until a wgmma.wait_group retires it, so a read before the
// wait is seen; `readFence` is the thread's wgmma.fence count when it last read them (-1: never).
struct AccSlot {
  std::vector<float> v;
  uint32_t gen = 0;
  int site = -1, group = -1;
  bool retired = true, reported = false;
  int64_t readFence = -1;
};

// The global-memory race shadow of one launch (emu_shadow.cpp): a word per 4 bytes of every
// extent, shared by the host threads running its blocks.
struct GlobalShadow {
  struct Word;
  explicit GlobalShadow(const std::vector<Extent>& extents);
  ~GlobalShadow();
  std::vector<Word*> words;  // per extent
  bool ok = true;
  std::mutex mu;
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> snapshots;  // (block, write count) each publishes
};

struct BlockState {
  const Launch* L = nullptr;
  const Options* O = nullptr;
  Report* R = nullptr;  // this host thread's partial report
  std::array<int64_t, 3> ctaid{0, 0, 0};
  int nthreads = 0, nwarps = 0, warpSize = 32, live = 0;
  std::vector<Fiber> fibers;
  std::vector<char*> stacks;
  size_t stackBytes = 0;
  Fiber* cur = nullptr;
  void* schedSp = nullptr;
  bool aborted = false;
  // Barriers: arrivals per id; warp-level vector clocks.
  std::vector<int> barArrived;
  std::vector<uint64_t> barWarps;     // warps (bitmask, <= 64 words of 64) that arrived, per id
  // bar.arrive: per id, the clocks its arrivers released (joined into the waiters' when the barrier
  // completes; an arriver goes on and learns nothing) and the site of the latest arrival.
  std::vector<std::vector<uint32_t>> barRelease;
  std::vector<int> barArriveSite;
  std::vector<uint32_t> clocks;       // nwarps x nwarps
  std::vector<char> smem;             // the arena (64-byte aligned data start)
  char* smemBase = nullptr;
  size_t smemBytes = 0;
  std::vector<Shadow> shadow;
  std::vector<ReadEpoch> readPool;  // nwarps entries per read set
  std::vector<int32_t> readFree;
  std::vector<Warp> warps;
  // PCT orders: memory accesses so far, and the accesses after which the running fiber is
  // preempted (its priority drops below every other's); empty in the fixed order.
  bool pct = false;
  uint64_t steps = 0;
  std::vector<uint64_t> preemptAt;
  size_t nextPreempt = 0;
  int64_t lowest = 0;
  // Proxies (sm_90): per thread, fence.proxy.async executed, and its warp's clock row and sync
  // count at the last one (a fence by the reader after it saw a write orders that write too);
  // wgmma.fence executed, and the count at this thread's last wgmma issue / accumulator read.
  std::vector<uint32_t> proxyFences, fenceSync;
  std::vector<std::vector<uint32_t>> fenceClock;
  std::vector<uint32_t> wgmmaFences;
  std::vector<int64_t> lastRegEvent;  // the wgmma.fence count at the last register event, -1 none
  std::vector<int> lastRegSite;       // the instruction of that event
  // cp.async: per thread, queued copies and the next group number; committed-group count.
  std::vector<std::vector<AsyncCopy>> async;
  std::vector<int> asyncGroups;
  int64_t asyncInFlight = 0;  // copies of the whole block
  // sm_90: mbarriers by shared offset; per thread, wgmma reads in flight and committed groups.
  std::unordered_map<uint32_t, MBarrier> mbars;
  std::vector<std::vector<WgmmaReads>> wgmma;
  std::vector<int> wgmmaGroups;
  // A wait_group retires each operand element once, however many warps read it: per 2-byte
  // element the stamp of the last retirement that covered it, and its site.
  std::vector<uint32_t> wgSeen;
  std::vector<int32_t> wgSeenSite;
  uint32_t wgStamp = 0;
  std::vector<std::vector<AccSlot>> acc;  // per thread, a ring of wgmma results (emu_wgmma_acc.cpp)
  std::vector<uint32_t> accNext;
  // Out-of-bounds accesses land here (per thread, largest access 256 bytes).
  std::vector<char> sink;
  struct Writer {
    std::array<int64_t, 3> ctaid;
    int tid, site;
  };
  std::unordered_map<const void*, Writer> writers;  // global word -> its last writer
  bool writersFull = false;
  // Global memory: the launch's shadow (null: not checked), this block's id in it (linear + 1),
  // its global writes so far, per thread the write count its last device-scope fence published
  // (0: none), the releases (writer block, marker) its reads saw and what it acquired per block.
  GlobalShadow* G = nullptr;
  uint32_t blockId = 0, gWrites = 0;
  std::vector<uint32_t> devFenceSeq;
  std::vector<std::pair<uint32_t, uint32_t>> seenReleases;
  std::unordered_map<uint32_t, uint32_t> acquired;
};

extern thread_local BlockState* tls;

// Helpers shared by the runtime files.
std::string threadName(const BlockState& b, int tid);
std::string threadName(const BlockState& b, const std::array<int64_t, 3>& ctaid, int tid);
void reportError(BlockState& b, const std::string& msg);
// Blocks the current fiber until `release` is called for it; returns when resumed.
void waitHere(WaitKind k, int site);
// Wakes every fiber of the block waiting with kind `k` (and, for warps, in warp `warp`).
void wakeWarp(int warp);
// Records a shared-memory access by thread `tid` for the race/initialisation checks; `async`:
// the completion of an async copy issued by `tid`.
void sharedAccess(BlockState& b, const char* p, int bytes, bool write, int tid, int site, int how = kPlain);
// "several lanes of warp w" or the thread's name, for a read epoch.
std::string readerName(const BlockState& b, const ReadEpoch& r);
// A global access by `tid` inside extent `extent` (index in Launch::extents): races within the
// launch, between threads of the block and between blocks (AccessFlags in `flags`).
void globalAccess(BlockState& b, int extent, const char* p, int bytes, int flags, int tid, int site);
// A device-scope fence by `tid` (membar.gl, fence.sc/acq_rel.gpu): releases its writes to its
// next write, acquires what the flags this block read released.
void deviceFence(BlockState& b, int tid);
void acquireSeen(BlockState& b);
// PCT orders: counts one step of the current fiber and preempts it at a chosen step.
void maybePreempt(BlockState& b);
// The warp collective protocol: every live lane of the caller's warp arrives with `op`; the last
// one runs fn(collective, lanes) and wakes the others. Returns false (error reported) when lanes
// diverge or the warp is partial where the op needs it full.
// `mask`: the member lanes (the caller's lane always counts); `ordersMemory`: __syncwarp.
bool warpCollective(int op, int site, const std::function<void(Collective&, int)>& fn, uint64_t mask = ~uint64_t(0),
                    bool ordersMemory = false);
// Before a masked collective writes its operands: waits while lanes of a disjoint mask are
// mid-collective (the other side of a branch).
void collectiveSlot(uint64_t mask);
inline int laneOf(const BlockState& b, int tid) { return tid % b.warpSize; }
inline int warpOf(const BlockState& b, int tid) { return tid / b.warpSize; }
// Lanes of warp w that exist in the block (a partial last warp has fewer).
inline int warpLanes(const BlockState& b, int w) { return std::min(b.warpSize, b.nthreads - w * b.warpSize); }
// The async-copy side: completes what wait_group n leaves in flight, at block end checks none is.
void asyncReset(BlockState& b);
void asyncBlockEnd(BlockState& b);
// A global write of `bytes` at `p` by `tid`: an error when an in-flight cp.async still reads it.
void asyncSourceWrite(BlockState& b, const char* p, int bytes, int tid, int site);
// The sm_90 side (mbarriers, TMA, wgmma): reset per block, and what a block must not leave behind.
void tmaReset(BlockState& b);
void tmaBlockEnd(BlockState& b);
// wgmma accumulators (emu_wgmma_acc.cpp). accReset: per block. accTake: the `words` accumulator
// inputs at `acc` (handles resolved in place; `read` false when scale-d is 0) and, for the
// register-A form, `aRegs` A registers: false with the error reported when a register the wgmma
// reads was accessed since the thread's last wgmma.fence. accPublish: the results at `acc` move
// to a new slot and `acc` holds its handles. accCommit / accRetire: commit_group and wait_group.
void accReset(BlockState& b);
bool accTake(BlockState& b, float* acc, int words, bool read, bool aRegs, int site);
void accPublish(BlockState& b, float* acc, int words, int site);
void accCommit(BlockState& b, int tid, int group);
void accRetire(BlockState& b, int tid, int limit);
// The last arriver's view: the vector-clock release of warp `w` into `acc` (its epoch ends).
void releaseInto(BlockState& b, int w, std::vector<uint32_t>& acc);
// Ends the request groups of warp `w` (their coalescing and bank counters).
void flushGroups(BlockState& b, Warp& w);
// Barriers (emu_barriers.cpp): the vector-clock join of the warps that met at one; the block's
// end (arrivals no bar.sync met).
void joinClocks(BlockState& b, const std::vector<int>& warps);
void barriersBlockEnd(BlockState& b);
const Extent* findExtent(const Launch& l, const void* p, size_t bytes);

}  // namespace tessera::emu::detail
