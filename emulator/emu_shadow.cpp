// Owns the mapped-kernel emulator's race shadows: shared memory per byte (the last writer, the
// readers since it as one epoch or a read vector clock per warp, the proxy it was written through
// and the fences that order it for the async proxy), and global memory per 4-byte word within a
// launch (the last writer's block, thread and bytes; device-scope release and acquire through
// fences and flags), so that two threads or blocks touching one word unordered are named.
#include <algorithm>
#include <cstdio>
#include <mutex>

#include "emulator/emu_internal.h"

namespace tessera::emu::detail {

std::string readerName(const BlockState& b, const ReadEpoch& r) {
  return threadName(b, r.tid) + (r.several ? " (and other lanes of warp " + std::to_string(r.warp) + ")" : "");
}

namespace {

// A read epoch `e` is ordered before an access by thread `tid` of warp `w` (clock row, sync).
bool readOrdered(const BlockState& b, const ReadEpoch& e, int tid, int w, uint32_t mySync) {
  if (e.tid == -1) return true;
  if (e.warp == w) return mySync > e.sync || (e.tid == tid && !e.several);
  return b.clocks[size_t(w * b.nwarps + e.warp)] > e.clock;
}

// Folds a read of warp `w` into that warp's epoch `e` (a later sync replaces it; the same sync by
// another lane makes it "several lanes").
void mergeRead(ReadEpoch& e, int tid, int w, uint32_t clock, uint32_t sync, int site) {
  if (e.tid == -1 || sync > e.sync) {
    e = {int16_t(tid), int16_t(w), site, clock, sync, false};
    return;
  }
  if (e.tid != tid) e.several = true;
  e.tid = int16_t(tid);
  e.clock = std::max(e.clock, clock);
  e.site = site;
}

void dropReads(BlockState& b, Shadow& s) {
  s.r = ReadEpoch{};
  if (s.readSet >= 0) b.readFree.push_back(s.readSet);
  s.readSet = -1;
}

void addRead(BlockState& b, Shadow& s, int tid, int w, uint32_t clock, uint32_t sync, int site, bool several) {
  if (s.readSet < 0) {
    if (s.r.tid == -1 || s.r.warp == w) {
      mergeRead(s.r, tid, w, clock, sync, site);
      s.r.several |= several;
      return;
    }
    if (readOrdered(b, s.r, tid, w, sync)) {  // the earlier read is subsumed: a write racing it races this one
      s.r = {int16_t(tid), int16_t(w), site, clock, sync, several};
      return;
    }
    // Two warps read it unordered: one epoch per warp from now on.
    if (b.readFree.empty()) {
      b.readFree.push_back(int32_t(b.readPool.size() / size_t(b.nwarps)));
      b.readPool.resize(b.readPool.size() + size_t(b.nwarps));
    }
    s.readSet = b.readFree.back();
    b.readFree.pop_back();
    ReadEpoch* set = &b.readPool[size_t(s.readSet) * size_t(b.nwarps)];
    std::fill(set, set + b.nwarps, ReadEpoch{});
    set[s.r.warp] = s.r;
  }
  ReadEpoch& e = b.readPool[size_t(s.readSet) * size_t(b.nwarps) + size_t(w)];
  mergeRead(e, tid, w, clock, sync, site);
  e.several |= several;
}

// The first read since the last write that is not ordered before thread `tid`'s write, or null.
const ReadEpoch* unorderedRead(const BlockState& b, const Shadow& s, int tid, int w, uint32_t mySync) {
  if (s.readSet < 0) return readOrdered(b, s.r, tid, w, mySync) ? nullptr : &s.r;
  const ReadEpoch* set = &b.readPool[size_t(s.readSet) * size_t(b.nwarps)];
  for (int j = 0; j < b.nwarps; ++j)
    if (!readOrdered(b, set[j], tid, w, mySync)) return &set[j];
  return nullptr;
}

// The generic-proxy write `s` is ordered before an async-proxy read by `tid`: a fence.proxy.async
// by the writer after it wrote, or by the reader after the write was visible to it.
bool proxyFenced(const BlockState& b, const Shadow& s, int tid, int w) {
  if (s.writer < 0 || s.wAsync) return true;
  if (b.proxyFences[size_t(s.writer)] > s.wFence) return true;
  if (!b.proxyFences[size_t(tid)]) return false;
  const int ow = warpOf(b, s.writer);
  if (ow == w) return s.writer == tid ? false : b.fenceSync[size_t(tid)] > s.wSync;
  return b.fenceClock[size_t(tid)][size_t(ow)] > s.wClock;
}

}  // namespace

void sharedAccess(BlockState& b, const char* p, int bytes, bool write, int tid, int site, int how) {
  const size_t off = size_t(p - b.smemBase);
  const int w = warpOf(b, tid);
  const uint32_t myClock = b.clocks[size_t(w * b.nwarps + w)], mySync = b.warps[size_t(w)].syncCount;
  const bool atomic = how & kAtomic, async = how & kAsyncProxy;
  // Ordered before this access: the same thread, a lane of this warp before a __syncwarp or
  // barrier it passed since, or another warp whose clock this warp has seen pass the access.
  auto ordered = [&](int other, uint32_t clock, uint32_t sync) {
    if (other < 0 || other == tid) return true;
    int ow = warpOf(b, other);
    if (ow == w) return mySync > sync;
    return b.clocks[size_t(w * b.nwarps + ow)] > clock;
  };
  // An atomic is kept as a read: it must be ordered after the last plain write and before the
  // next one, but atomics of one word do not race with each other.
  auto record = [&](Shadow& s) {
    if (write && !atomic) {
      s.writer = int16_t(tid), s.wClock = myClock, s.wSync = mySync, s.wSite = site, s.written = 1;
      s.wFence = b.proxyFences[size_t(tid)], s.wAsync = async;
      dropReads(b, s);
    } else {
      addRead(b, s, tid, w, myClock, mySync, site, how & kSeveral);
      s.written = 1;  // report an uninitialised byte once
    }
  };
  auto at = [&](int i) { return std::to_string(off + size_t(i)); };
  auto me = [&] { return "by " + threadName(b, tid) + " at " + b.L->sites->name(site); };
  const uint64_t before = b.R->errorCount;
  for (int i = 0; i < bytes; ++i) {
    Shadow& s = b.shadow[off + size_t(i)];
    if (b.R->errorCount != before) {  // one report per access: mark the rest and stop checking
      record(s);
      s.pending = 0;
      continue;
    }
    if (s.pending) {
      reportError(b, std::string(write ? "write to" : "read of") + " shared memory at offset " + at(i) +
                         " while an async copy to it is in flight (issued by " + threadName(b, s.pendingBy) + " at " +
                         b.L->sites->name(s.pendingSite) + "; a missing wait?), " + me());
      s.pending = 0;
    }
    if (write && s.wgmmaReads) {
      reportError(b, "write to shared memory at offset " + at(i) +
                         " that an in-flight wgmma may still read (no wgmma.wait_group retired it before the stage was "
                         "released), " + me());
      s.wgmmaReads = 0;
    }
    if (atomic) {
      if (!s.written && !write)
        reportError(b, "read of uninitialised shared memory at offset " + at(i) + " " + me());
      else if (!ordered(s.writer, s.wClock, s.wSync))
        reportError(b, "race: atomic-after-write on shared byte " + at(i) + ": written by " + threadName(b, s.writer) +
                           " at " + b.L->sites->name(s.wSite) + ", then accessed atomically by " + threadName(b, tid) +
                           " at " + b.L->sites->name(site) + " with no barrier between");
    } else if (write) {
      const ReadEpoch* r = nullptr;
      if (!ordered(s.writer, s.wClock, s.wSync))
        reportError(b, "race: write-after-write on shared byte " + at(i) + ": " + threadName(b, s.writer) + " at " +
                           b.L->sites->name(s.wSite) + ", then " + threadName(b, tid) + " at " + b.L->sites->name(site) +
                           " with no barrier between");
      else if ((r = unorderedRead(b, s, tid, w, mySync)))
        reportError(b, "race: write-after-read on shared byte " + at(i) + ": read by " + readerName(b, *r) + " at " +
                           b.L->sites->name(r->site) + ", then written by " + threadName(b, tid) + " at " +
                           b.L->sites->name(site) + " with no barrier between");
    } else {
      if (!s.written)
        reportError(b, "read of uninitialised shared memory at offset " + at(i) + " " + me());
      else if (!ordered(s.writer, s.wClock, s.wSync))
        reportError(b, "race: read-after-write on shared byte " + at(i) + ": written by " + threadName(b, s.writer) +
                           " at " + b.L->sites->name(s.wSite) + ", read by " + threadName(b, tid) + " at " +
                           b.L->sites->name(site) + " with no barrier between");
      else if (async && !proxyFenced(b, s, tid, w))
        reportError(b, "proxy: async-proxy read of shared byte " + at(i) + " written through the generic proxy by " +
                           threadName(b, s.writer) + " at " + b.L->sites->name(s.wSite) + ", read " + me() +
                           " with no fence.proxy.async between");
    }
    record(s);
    if (b.aborted) return;
  }
}


// ---- global memory ----

// One 4-byte word of a global buffer in a launch's shadow. `block` (linear id + 1 of the last
// writing block) is exchanged atomically, so blocks on different host threads see each other;
// the rest is meaningful to the writing block's own later accesses and to reports.
struct GlobalShadow::Word {
  std::atomic<uint32_t> block{0};
  uint8_t mask = 0;   // the bytes the last write covered
  uint8_t flags = 0;  // kAtomicWrite, kReleaseWrite
  int16_t tid = -1;
  int32_t site = -1;
  uint32_t clock = 0, sync = 0;
  uint32_t seq = 0;   // the writing block's global-write count at the write (its release marker for a flag)
  uint32_t snap = 0;  // a released atomic: 1 + the index of what it publishes in GlobalShadow::snapshots
  // The last block other than a writer's that read it since the last write (0: none), with the
  // bytes, the reading thread and instruction, and that block's global-write count at the read:
  // a write by another block must have acquired a release the reader made after its read.
  std::atomic<uint32_t> reader{0};
  uint8_t rmask = 0, rAtomic = 0;
  int16_t rtid = -1;
  int32_t rsite = -1;
  uint32_t rseq = 0;
};

namespace {
constexpr uint8_t kAtomicWrite = 1, kReleaseWrite = 2;
}

GlobalShadow::GlobalShadow(const std::vector<Extent>& extents) {
  for (const auto& e : extents) {
    const size_t n = e.bytes / 4 + 2;
    words.push_back(static_cast<Word*>(std::calloc(n, sizeof(Word))));  // zero: no writer yet (lazy pages)
    if (!words.back()) ok = false;
  }
}

GlobalShadow::~GlobalShadow() {
  for (Word* w : words) std::free(w);
}

namespace {

std::string hexAddr(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", (unsigned long long)reinterpret_cast<uintptr_t>(p));
  return buf;
}

std::string blockName(const Launch& l, uint32_t id) {
  const int64_t i = int64_t(id) - 1;
  return "block (" + std::to_string(i % l.grid[0]) + "," + std::to_string(i / l.grid[0] % l.grid[1]) + "," +
         std::to_string(i / (l.grid[0] * l.grid[1])) + ")";
}

}  // namespace

void globalAccess(BlockState& b, int extent, const char* p, int bytes, int flags, int tid, int site) {
  GlobalShadow* G = b.G;
  if (!G || extent < 0 || size_t(extent) >= G->words.size() || !G->words[size_t(extent)]) return;
  const Extent& e = b.L->extents[size_t(extent)];
  const bool write = flags & kWrite, atomic = flags & (kAtomicRmw | kVolatile);
  const int w = warpOf(b, tid);
  const uint32_t me = b.blockId, myClock = b.clocks[size_t(w * b.nwarps + w)], mySync = b.warps[size_t(w)].syncCount;
  const size_t off = size_t(p - static_cast<const char*>(e.base));
  const uint64_t before = b.R->errorCount;
  if (write) ++b.gWrites;
  for (size_t wi = off / 4; wi * 4 < off + size_t(bytes) && b.R->errorCount == before; ++wi) {
    GlobalShadow::Word& g = G->words[size_t(extent)][wi];
    uint8_t mine = 0;
    for (size_t k = 0; k < 4; ++k)
      if (wi * 4 + k >= off && wi * 4 + k < off + size_t(bytes)) mine |= uint8_t(1u << k);
    const uint32_t prev = write ? g.block.exchange(me) : g.block.load(std::memory_order_relaxed);
    const bool overlap = prev && (g.mask & mine);
    const bool bothAtomic = atomic && (g.flags & kAtomicWrite);
    auto what = [&] {
      return std::string(write ? "written" : "read") + " by " + threadName(b, tid) + " at " + b.L->sites->name(site);
    };
    if (overlap && !bothAtomic) {
      if (prev != me) {
        // Another block wrote it in this launch: only a device-scope release (a fence, then a
        // flag) this block acquired (read the flag, then a fence) orders that write before this.
        auto it = b.acquired.find(prev);
        if (it == b.acquired.end() || it->second <= g.seq)
          reportError(b, "race: global word " + hexAddr(static_cast<const char*>(e.base) + wi * 4) + " of " + e.name +
                             " written by " + blockName(*b.L, prev) + " thread " + std::to_string(g.tid) + " at " +
                             b.L->sites->name(g.site) + ", then " + what() +
                             " with no device-scope fence and flag between (blocks are not ordered)");
      } else if (g.tid != tid) {
        const int ow = warpOf(b, g.tid);
        const bool ordered = ow == w ? mySync > g.sync : b.clocks[size_t(w * b.nwarps + ow)] > g.clock;
        if (!ordered)
          reportError(b, std::string("race: ") + (write ? "write-after-write" : "read-after-write") + " on global word " +
                             hexAddr(static_cast<const char*>(e.base) + wi * 4) + " of " + e.name + ": written by " +
                             threadName(b, g.tid) + " at " + b.L->sites->name(g.site) + ", then " + what() +
                             " with no barrier between");
      }
    }
    if (write && b.R->errorCount == before) {
      const uint32_t r = g.reader.exchange(0, std::memory_order_relaxed);
      if (r && r != me && (g.rmask & mine) && !(atomic && g.rAtomic)) {
        auto it = b.acquired.find(r);
        if (it == b.acquired.end() || it->second <= g.rseq)
          reportError(b, "race: write-after-read on global word " + hexAddr(static_cast<const char*>(e.base) + wi * 4) + " of " +
                             e.name + ": read by " + blockName(*b.L, r) + " thread " + std::to_string(g.rtid) + " at " +
                             b.L->sites->name(g.rsite) + ", then " + what() +
                             " with no device-scope fence and flag between (blocks are not ordered)");
      }
    } else if (!write && g.reader.load(std::memory_order_relaxed) != me) {
      g.reader.store(me, std::memory_order_relaxed);
      g.rmask = mine, g.rAtomic = atomic, g.rtid = int16_t(tid), g.rsite = site, g.rseq = b.gWrites;
    }
    // A flag another block released, read (plainly or by an atomic RMW): a fence after this read
    // acquires what it published (an atomic's release carries what its block had acquired: the
    // release sequence of a counter every block increments).
    if (prev && prev != me && (g.flags & kReleaseWrite) && (!write || (flags & kAtomicRmw))) {
      if (g.snap) {
        std::lock_guard<std::mutex> lock(G->mu);
        for (const auto& r : G->snapshots[g.snap - 1]) b.seenReleases.push_back(r);
      } else {
        b.seenReleases.push_back({prev, g.seq});
      }
      if (flags & kAcquire) acquireSeen(b);
    }
    if (!write) continue;
    g.mask = mine;
    g.tid = int16_t(tid), g.site = site, g.clock = myClock, g.sync = mySync;
    // A write after this thread's device-scope fence (or a release write) publishes the block's
    // global writes before it (the fence's cumulativity over a barrier, taken leniently).
    const bool released = b.devFenceSeq[size_t(tid)] > 0 || (flags & kRelease);
    g.flags = uint8_t((atomic ? kAtomicWrite : 0) | (released ? kReleaseWrite : 0));
    g.seq = b.gWrites;
    g.snap = 0;
    if (released && atomic) {
      std::vector<std::pair<uint32_t, uint32_t>> snap(b.acquired.begin(), b.acquired.end());
      snap.push_back({me, b.gWrites});
      std::lock_guard<std::mutex> lock(G->mu);
      G->snapshots.push_back(std::move(snap));
      g.snap = uint32_t(G->snapshots.size());
    }
  }
}

void acquireSeen(BlockState& b) {
  for (const auto& [blk, seq] : b.seenReleases) {
    uint32_t& a = b.acquired[blk];
    a = std::max(a, seq);
  }
  b.seenReleases.clear();
}

void deviceFence(BlockState& b, int tid) {
  // Release: the block's writes so far are published by this thread's later writes; acquire:
  // the flags this block read publish their writers' earlier writes to it.
  b.devFenceSeq[size_t(tid)] = b.gWrites + 1;
  acquireSeen(b);
}

}  // namespace tessera::emu::detail
