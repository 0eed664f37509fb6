// Owns the emulator's wgmma accumulators in flight: a wgmma's results wait in a per-thread slot
// while its registers hold handles (signalling NaNs that name the slot) until a wgmma.wait_group
// retires it, so a read of an accumulator before its wait is an error naming the thread, the read
// and the register, and the register side of wgmma.fence (a wgmma takes registers the thread
// accessed since its last wgmma.fence) is checked.
#include <cmath>

#include "emulator/emu_internal.h"

namespace tessera::emu {

using namespace detail;

namespace {

// A handle: exponent all ones, quiet bit clear, bits 21..20 set (a tag no arithmetic produces:
// IEEE operations quiet a signalling NaN), then slot (6 bits), generation (7), register (7).
constexpr uint32_t kTagMask = 0xFFF00000u, kTag = 0x7FB00000u;
constexpr int kSlots = 64;

struct Handle {
  int slot, gen, reg;
};

bool decode(float x, Handle* h) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & kTagMask) != kTag) return false;
  *h = {int(u >> 14 & 63), int(u >> 7 & 127), int(u & 127)};
  return true;
}

float encode(int slot, uint32_t gen, int reg) {
  const uint32_t u = kTag | uint32_t(slot) << 14 | (gen & 127) << 7 | uint32_t(reg);
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

std::string regName(int reg) { return "accumulator register " + std::to_string(reg); }

// The slot a handle names, or null with the error reported (its slot was reused since).
AccSlot* slotOf(BlockState& b, int tid, const Handle& h, int site) {
  AccSlot& s = b.acc[size_t(tid)][size_t(h.slot)];
  if (int(s.gen & 127) == h.gen && !s.v.empty() && size_t(h.reg) < s.v.size()) return &s;
  reportError(b, "wgmma accumulator too old: " + threadName(b, tid) + " at " + b.L->sites->name(site) + " uses " +
                     regName(h.reg) + " of a wgmma whose results were overwritten by " + std::to_string(kSlots) +
                     " later ones (more wgmma results live at once than the emulator keeps)");
  return nullptr;
}

void fenceError(BlockState& b, int tid, int site, const std::string& what, int readSite) {
  reportError(b, "wgmma reads registers accessed since the last wgmma.fence: " + threadName(b, tid) + " at " +
                     b.L->sites->name(site) + " takes " + what + " after the thread read accumulator registers at " +
                     b.L->sites->name(readSite) + " with no wgmma.fence.sync.aligned between");
}

}  // namespace

namespace detail {

void accReset(BlockState& b) {
  b.acc.resize(size_t(b.nthreads));
  b.accNext.assign(size_t(b.nthreads), 0);
  for (auto& ring : b.acc) {
    ring.resize(kSlots);
    for (auto& s : ring) s.retired = true, s.reported = false, s.group = -1, s.readFence = -1, s.v.clear();
  }
  std::fill(b.lastRegSite.begin(), b.lastRegSite.end(), -1);
}

bool accTake(BlockState& b, float* acc, int words, bool read, bool aRegs, int site) {
  if (!b.O->checks) return true;
  const int tid = b.cur->tid;
  const int64_t fences = b.wgmmaFences[size_t(tid)];
  // A register written by the thread's own code since its last fence: its inputs were read after
  // that fence (the only register accesses with a place in the instruction stream).
  const bool readSinceFence = b.lastRegEvent[size_t(tid)] >= 0 && b.lastRegEvent[size_t(tid)] == fences;
  bool ok = true;
  if (aRegs && readSinceFence) {
    fenceError(b, tid, site, "its A fragment registers, computed", b.lastRegSite[size_t(tid)]);
    ok = false;
  }
  if (!read) return ok;
  for (int i = 0; i < words; ++i) {
    Handle h;
    if (!decode(acc[i], &h)) {
      if (ok && readSinceFence) {
        fenceError(b, tid, site, regName(i) + " (written by the thread's code)", b.lastRegSite[size_t(tid)]);
        ok = false;
      }
      continue;
    }
    // An accumulator still in flight may feed the next wgmma of the chain (the ISA orders those).
    AccSlot* s = slotOf(b, tid, h, site);
    if (!s) return false;
    if (ok && s->readFence >= 0 && s->readFence == fences) {
      fenceError(b, tid, site, regName(i) + " of the wgmma at " + b.L->sites->name(s->site), b.lastRegSite[size_t(tid)]);
      ok = false;
    }
    acc[i] = s->v[size_t(h.reg)];
  }
  return ok;
}

void accPublish(BlockState& b, float* acc, int words, int site) {
  if (!b.O->checks) return;
  const int tid = b.cur->tid;
  const uint32_t k = b.accNext[size_t(tid)];
  AccSlot& s = b.acc[size_t(tid)][k];
  if (!s.retired) {
    reportError(b, "more than " + std::to_string(kSlots) + " wgmma in flight (the emulator's limit), by " + threadName(b, tid) +
                       " at " + b.L->sites->name(site));
    b.aborted = true;
    return;
  }
  b.accNext[size_t(tid)] = (k + 1) % kSlots;
  s.gen++;
  s.site = site, s.group = -1, s.retired = false, s.reported = false, s.readFence = -1;
  s.v.assign(acc, acc + words);
  for (int i = 0; i < words; ++i) acc[i] = encode(int(k), s.gen, i);
}

void accCommit(BlockState& b, int tid, int group) {
  for (auto& s : b.acc[size_t(tid)])
    if (!s.retired && s.group < 0) s.group = group;
}

// wait_group orders this thread's reads of its own accumulators after the wgmma it retires.
void accRetire(BlockState& b, int tid, int limit) {
  for (auto& s : b.acc[size_t(tid)])
    if (!s.retired && s.group >= 0 && s.group < limit) s.retired = true;
}

}  // namespace detail

extern "C" {

// A read of a wgmma accumulator register by the kernel's own code (the rewrite puts one after
// every f32 extracted from a wgmma result): the value, or poison when its wgmma is in flight.
float tessera_emu_wgmma_acc_read(float x, int32_t site) {
  Handle h;
  if (!decode(x, &h)) return x;
  BlockState& b = *tls;
  const int tid = b.cur->tid;
  AccSlot* s = slotOf(b, tid, h, site);
  if (!s) return std::nanf("");
  b.lastRegEvent[size_t(tid)] = s->readFence = b.wgmmaFences[size_t(tid)];
  b.lastRegSite[size_t(tid)] = site;
  if (s->retired) return s->v[size_t(h.reg)];
  if (!s->reported) {
    s->reported = true;
    reportError(b, "wgmma accumulator read before its wgmma.wait_group: " + threadName(b, tid) + " at " +
                       b.L->sites->name(site) + " reads " + regName(h.reg) + " of the wgmma at " + b.L->sites->name(s->site) +
                       (s->group < 0 ? " (not committed yet)" : " (commit group " + std::to_string(s->group) + ", still in flight)"));
  }
  return std::nanf("");
}

}  // extern "C"

}  // namespace tessera::emu
