// Owns the mapped-kernel emulator's per-block state, shared by its runtime files: fibers (one per
// GPU thread), the block's shared-memory arena and its shadow (happens-before for races,
// initialisation, in-flight async copies), warps and their collectives, and the per-warp grouping
// of lane accesses into requests (bank conflicts, coalescing).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "codegen/emu_runtime.h"

namespace tessera::emu::detail {

enum class FiberState : uint8_t { Ready, Waiting, Done };
enum class WaitKind : uint8_t { None, Barrier, Warp, MBarrier, Wgmma };

struct Fiber {
  void* sp = nullptr;  // saved stack pointer while switched out
  int tid = 0;
  FiberState state = FiberState::Ready;
  WaitKind wait = WaitKind::None;
  int waitSite = -1;   // the barrier or collective it waits at
  int barrierId = 0;   // bar.sync id, or the shared offset of the mbarrier it waits on
};

// Happens-before in shared memory, per byte: the last writer and the last reader, with the clock
// of their warp (warp-level vector clocks: barriers order warps) and their warp's sync count
// (collectives order the lanes of one warp).
struct Shadow {
  int16_t writer = -1, reader = -1;  // thread ids (-1: none)
  uint32_t wClock = 0, rClock = 0;
  uint32_t wSync = 0, rSync = 0;
  int32_t wSite = -1, rSite = -1;    // the writing and reading instructions (reports)
  uint8_t written = 0;               // initialised
  uint8_t pending = 0;               // an async copy to it is in flight
  int16_t pendingBy = -1;
  int32_t pendingSite = -1;
  uint8_t wgmmaReads = 0;            // wgmma operand reads in flight (issued, not yet retired)
};

// A warp's collective in progress: operands of every lane, results for every lane.
struct Collective {
  int arrived = 0;
  int op = 0;
  int site = -1;
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
  uint32_t syncCount = 1;  // collectives and barriers this warp passed (orders its lanes)
  // site -> occurrence counter per lane; (site, occurrence) -> group being filled.
  std::unordered_map<int, std::vector<uint32_t>> occurrence;
  std::unordered_map<uint64_t, AccessGroup> groups;
};

// An async copy issued and not yet completed (cp.async; the issuing thread's queue).
struct AsyncCopy {
  char* dst;
  const char* src;
  int bytes, srcBytes;
  int site;
  int group;  // commit group (-1: still open)
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
  std::vector<uint32_t> clocks;       // nwarps x nwarps
  std::vector<char> smem;             // the arena (64-byte aligned data start)
  char* smemBase = nullptr;
  size_t smemBytes = 0;
  std::vector<Shadow> shadow;
  std::vector<Warp> warps;
  // cp.async: per thread, queued copies and the next group number; committed-group count.
  std::vector<std::vector<AsyncCopy>> async;
  std::vector<int> asyncGroups;
  // sm_90: mbarriers by shared offset; per thread, wgmma reads in flight and committed groups.
  std::unordered_map<uint32_t, MBarrier> mbars;
  std::vector<std::vector<WgmmaReads>> wgmma;
  std::vector<int> wgmmaGroups;
  // Out-of-bounds accesses land here (per thread, largest access 256 bytes).
  std::vector<char> sink;
  struct Writer {
    std::array<int64_t, 3> ctaid;
    int tid, site;
  };
  std::unordered_map<const void*, Writer> writers;  // global word -> its last writer
  bool writersFull = false;
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
void sharedAccess(BlockState& b, const char* p, int bytes, bool write, int tid, int site);
// The warp collective protocol: every live lane of the caller's warp arrives with `op`; the last
// one runs fn(collective, lanes) and wakes the others. Returns false (error reported) when lanes
// diverge or the warp is partial where the op needs it full.
bool warpCollective(int op, int site, const std::function<void(Collective&, int)>& fn);
inline int laneOf(const BlockState& b, int tid) { return tid % b.warpSize; }
inline int warpOf(const BlockState& b, int tid) { return tid / b.warpSize; }
// Lanes of warp w that exist in the block (a partial last warp has fewer).
inline int warpLanes(const BlockState& b, int w) { return std::min(b.warpSize, b.nthreads - w * b.warpSize); }
// The async-copy side: completes what wait_group n leaves in flight, at block end checks none is.
void asyncReset(BlockState& b);
void asyncBlockEnd(BlockState& b);
// The sm_90 side (mbarriers, TMA, wgmma): reset per block, and what a block must not leave behind.
void tmaReset(BlockState& b);
void tmaBlockEnd(BlockState& b);
// The last arriver's view: the vector-clock release of warp `w` into `acc` (its epoch ends).
void releaseInto(BlockState& b, int w, std::vector<uint32_t>& acc);
const Extent* findExtent(const Launch& l, const void* p, size_t bytes);

}  // namespace tessera::emu::detail
