// Owns the asynchronous copies of the mapped-kernel emulator: cp.async (sm_80+) queued per thread,
// grouped by commit_group, performed only when cp.async.wait_group lets them complete (so a missing
// wait reads stale data and is reported: the destination bytes are marked in flight until then),
// and copies still in flight when a block ends.
#include <cstdio>

#include "emulator/emu_internal.h"

namespace tessera::emu {

using namespace detail;

namespace detail {

void asyncReset(BlockState& b) {
  for (auto& q : b.async) q.clear();
  std::fill(b.asyncGroups.begin(), b.asyncGroups.end(), 0);
  b.asyncInFlight = 0;
}

void asyncSourceWrite(BlockState& b, const char* p, int bytes, int tid, int site) {
  for (int t = 0; t < b.nthreads; ++t)
    for (const auto& c : b.async[size_t(t)])
      if (p < c.src + c.srcBytes && c.src < p + bytes) {
        char at[32];
        std::snprintf(at, sizeof at, "0x%llx", (unsigned long long)reinterpret_cast<uintptr_t>(p));
        reportError(b, std::string("race: global write at ") + at + " by " + threadName(b, tid) +
                           " at " + b.L->sites->name(site) + " to the source of a cp.async still in flight (issued by " +
                           threadName(b, t) + " at " + b.L->sites->name(c.site) +
                           "; the copy may read the old or the new bytes)");
        return;
      }
}

namespace {

void complete(BlockState& b, int tid, const AsyncCopy& c) {
  --b.asyncInFlight;
  std::memcpy(c.dst, c.data.data(), size_t(c.srcBytes));
  if (c.bytes > c.srcBytes) std::memset(c.dst + c.srcBytes, 0, size_t(c.bytes - c.srcBytes));
  if (!b.O->checks) return;
  for (int i = 0; i < c.bytes; ++i) b.shadow[size_t(c.dst - b.smemBase) + size_t(i)].pending = 0;
  // The data lands now, written by the issuing thread: readers on other threads need a barrier.
  sharedAccess(b, c.dst, c.bytes, true, tid, c.site);
}

}  // namespace

void asyncBlockEnd(BlockState& b) {
  for (int t = 0; t < b.nthreads; ++t)
    for (const auto& c : b.async[size_t(t)]) {
      reportError(b, "cp.async of " + std::to_string(c.bytes) + " B still in flight when the block finished, issued by " +
                         threadName(b, t) + " at " + b.L->sites->name(c.site) + " (no cp.async.wait_group covers it)");
      break;
    }
}

}  // namespace detail

extern "C" {

// cp.async.{ca,cg}.shared.global [dst], [src], bytes, src-size: queued, performed at a wait.
void tessera_emu_cp_async(void* dst, const void* src, int32_t bytes, int32_t srcBytes, int32_t site) {
  BlockState& b = *tls;
  const int tid = b.cur->tid;
  char* d = static_cast<char*>(dst);
  if (srcBytes < 0 || srcBytes > bytes) srcBytes = bytes;
  if (d < b.smemBase || d + bytes > b.smemBase + b.smemBytes) {
    reportError(b, "cp.async destination outside shared memory (offset " + std::to_string(d - b.smemBase) + ") by " +
                       threadName(b, tid) + " at " + b.L->sites->name(site));
    return;
  }
  bool inBounds = srcBytes == 0;
  for (const auto& e : b.L->extents) {
    auto* base = static_cast<const char*>(e.base);
    if (static_cast<const char*>(src) >= base && static_cast<const char*>(src) + srcBytes <= base + e.bytes) inBounds = true;
  }
  if (!inBounds) {
    reportError(b, "cp.async source of " + std::to_string(srcBytes) + " B outside every global buffer, by " +
                       threadName(b, tid) + " at " + b.L->sites->name(site));
    srcBytes = 0;  // zero-filled instead
  }
  if (bytes > 16) {
    reportError(b, "cp.async of " + std::to_string(bytes) + " B (at most 16) by " + threadName(b, tid) + " at " + b.L->sites->name(site));
    return;
  }
  if (b.O->checks)
    for (int i = 0; i < bytes; ++i) {
      Shadow& s = b.shadow[size_t(d - b.smemBase) + size_t(i)];
      s.pending = 1, s.pendingBy = int16_t(tid), s.pendingSite = site;
    }
  AsyncCopy c{d, static_cast<const char*>(src), bytes, srcBytes, site, -1, {}};
  std::memcpy(c.data.data(), src, size_t(srcBytes));
  std::memset(d, 0xff, size_t(bytes));  // poison (NaN in every float format) until the wait
  b.async[size_t(tid)].push_back(c);
  ++b.asyncInFlight;
}

void tessera_emu_cp_commit(int32_t) {
  BlockState& b = *tls;
  const int tid = b.cur->tid;
  int g = b.asyncGroups[size_t(tid)]++;
  for (auto& c : b.async[size_t(tid)])
    if (c.group < 0) c.group = g;
}

// cp.async.wait_group n: every committed group but the newest n has landed.
void tessera_emu_cp_wait(int32_t n, int32_t) {
  BlockState& b = *tls;
  const int tid = b.cur->tid;
  auto& q = b.async[size_t(tid)];
  const int limit = b.asyncGroups[size_t(tid)] - std::max(0, n);
  std::vector<AsyncCopy> keep;
  for (const auto& c : q) {
    if (c.group >= 0 && c.group < limit) complete(b, tid, c);
    else keep.push_back(c);
  }
  q.swap(keep);
}

}  // extern "C"

}  // namespace tessera::emu
