// Owns the sm_90 side of the mapped-kernel emulator: mbarriers (arrival counts, transaction bytes,
// phases; a release/acquire between the arrivers and the waiters of a phase), TMA tiled loads from
// the emulator's tensor-map form (zero fill past the tensor, 32/64/128-byte swizzle; the bytes stay
// in flight until the mbarrier phase they complete on is over), and wgmma m64nNk16 from shared-memory
// descriptors (a warp collective reads each operand element once for the lanes that take it, each
// thread computes its own accumulator fragment, held in flight until its wait by
// emu_wgmma_acc.cpp; the bytes a wgmma reads count as read when a wgmma.wait_group retires it, so
// overwriting a stage a wgmma may still read is a race).
#include <algorithm>
#include <cmath>

#include "emulator/emu_internal.h"
#include "ir/dtype.h"

namespace tessera::emu {

using namespace detail;

namespace layout {

std::pair<int, int> wgmmaD(int thread, int reg) {
  const int warp = thread / 32, lane = thread % 32;
  const int row = 16 * warp + lane / 4 + 8 * (reg % 4 / 2);
  const int col = 8 * (reg / 4) + 2 * (lane % 4) + reg % 2;
  return {row, col};
}

int64_t wgmmaOperandAddress(uint64_t desc, bool mnMajor, int elemBytes, int mn, int k) {
  const int64_t start = int64_t(desc & 0x3fff) << 4;
  const int64_t lbo = int64_t((desc >> 16) & 0x3fff) << 4;
  const int64_t sbo = int64_t((desc >> 32) & 0x3fff) << 4;
  const int mode = int((desc >> 62) & 3);
  if (mode == 0) return -1;
  const int64_t span = mode == 1 ? 128 : mode == 2 ? 64 : 32;  // the swizzle's row, in bytes
  int64_t a;
  if (!mnMajor) {
    // K-major: a row of the operand (one m or n) is `span` bytes of k; 8 rows form one swizzle
    // atom, atoms repeat along m/n every SBO bytes (LBO unused: one k16 step stays in a row).
    a = start + (mn % 8) * span + (mn / 8) * sbo + int64_t(k) * elemBytes;
  } else {
    // MN-major: a row is `span` bytes of m/n at one k; 8 k rows form an atom; atoms repeat along
    // m/n every LBO bytes and along k every SBO bytes.
    const int64_t per = span / elemBytes;
    a = start + (mn % per) * elemBytes + (mn / per) * lbo + (k % 8) * span + (k / 8) * sbo;
  }
  // The swizzle is a function of the address: the 16-byte chunk index (bits 4..) XOR the row
  // index within the atom (bits 7..), as wide as the span has chunks.
  const int64_t mask = span / 16 - 1;
  return a ^ (((a >> 7) & mask) << 4);
}

bool wgmmaBaseOffsetAgrees(uint64_t desc, int* want) {
  const int mode = int((desc >> 62) & 3);
  const int64_t start = int64_t(desc & 0x3fff) << 4;
  const int base = int((desc >> 49) & 7);
  // The pattern repeats every 8 rows of the span: 1024, 512 or 256 bytes; the start's row in it.
  const int rows = mode == 1 ? 8 : mode == 2 ? 4 : 2;
  *want = mode == 0 ? 0 : int((start >> 7) & (rows - 1));
  // The ISA writes the field as (start >> 7) & 7 for every mode: that form is accepted too.
  return mode == 0 || base == *want || base == int((start >> 7) & 7);
}

}  // namespace layout

namespace detail {

void tmaReset(BlockState& b) {
  b.mbars.clear();
  for (auto& q : b.wgmma) q.clear();
  std::fill(b.wgmmaGroups.begin(), b.wgmmaGroups.end(), 0);
  accReset(b);
}

void tmaBlockEnd(BlockState& b) {
  for (const auto& [off, m] : b.mbars)
    if (!m.landing.empty()) {
      reportError(b, "TMA bytes still in flight when the block finished: the mbarrier at shared offset " + std::to_string(off) +
                         " never completed the phase they land on (" + std::to_string(m.pending) + " arrivals and " +
                         std::to_string(m.tx) + " transaction bytes outstanding)");
      return;
    }
  for (int t = 0; t < b.nthreads; ++t)
    if (!b.wgmma[size_t(t)].empty()) {
      reportError(b, "wgmma still in flight when the block finished, issued by " + threadName(b, t) + " at " +
                         b.L->sites->name(b.wgmma[size_t(t)].front().site) + " (no wgmma.wait_group retires it)");
      return;
    }
}

}  // namespace detail

namespace {

// The warp collective of the register-A wgmma (beside emu_collectives.cpp's, which stay below 128).
constexpr int kWgmmaRegA = 200;

// The shared-memory offset of element (mn, k) of a wgmma operand described by `desc`, or -1 with
// the error reported (a layout the emulator does not model, or outside shared memory).
// `noSwizzle` (a fault injected by the controls) undoes the swizzle: it is an involution.
int64_t wgmmaAddress(BlockState& b, uint64_t desc, bool mn, int i, int k, bool noSwizzle, const char* which, int site) {
  int64_t a = layout::wgmmaOperandAddress(desc, mn, 2, i, k);
  if (noSwizzle && a >= 0) {
    const int mode = int((desc >> 62) & 3);
    const int64_t mask = (mode == 1 ? 128 : mode == 2 ? 64 : 32) / 16 - 1;
    a ^= ((a >> 7) & mask) << 4;
  }
  if (a < 0 || a + 2 > int64_t(b.smemBytes)) {
    reportError(b, std::string("wgmma ") + which + " descriptor " +
                       (a < 0 ? "in a layout the emulator does not model (no swizzle / interleaved)" : "outside shared memory") +
                       ", by " + threadName(b, b.cur->tid) + " at " + b.L->sites->name(site));
    b.aborted = true;
    return -1;
  }
  return a;
}

MBarrier* findBar(BlockState& b, const void* p, const char* what, int site) {
  const char* c = static_cast<const char*>(p);
  if (c < b.smemBase || c + 8 > b.smemBase + b.smemBytes || (c - b.smemBase) % 8) {
    reportError(b, std::string(what) + " on an address that is no 8-byte aligned shared-memory word, by " +
                       threadName(b, b.cur->tid) + " at " + b.L->sites->name(site));
    b.aborted = true;
    return nullptr;
  }
  auto it = b.mbars.find(uint32_t(c - b.smemBase));
  if (it == b.mbars.end()) {
    reportError(b, std::string(what) + " on an mbarrier never initialised (shared offset " + std::to_string(c - b.smemBase) +
                       "), by " + threadName(b, b.cur->tid) + " at " + b.L->sites->name(site));
    b.aborted = true;
    return nullptr;
  }
  return &it->second;
}

// The phase is over: its TMA bytes have landed, its waiters may go on with what it released.
int64_t placed(int64_t o, int64_t span) { return span ? o ^ (((o >> 7) & (span / 16 - 1)) << 4) : o; }

void completePhase(BlockState& b, uint32_t off, MBarrier& m) {
  for (const auto& box : m.boxes)
    for (int64_t u = 0; u < int64_t(box.data.size()); u += box.step)
      std::memcpy(b.smemBase + placed(box.dOff + u, box.span), box.data.data() + u, size_t(box.step));
  m.boxes.clear();
  if (b.O->checks)
    for (const auto& l : m.landing)
      for (uint32_t i = 0; i < l.bytes; ++i) b.shadow[size_t(l.off + i)].pending = 0;
  m.landing.clear();
  m.done = m.accum;
  std::fill(m.accum.begin(), m.accum.end(), 0);
  m.pending = m.expected;
  m.tx = 0;
  ++m.phase;
  for (auto& f : b.fibers)
    if (f.state == FiberState::Waiting && f.wait == WaitKind::MBarrier && f.barrierId == int(off))
      f.state = FiberState::Ready, f.wait = WaitKind::None;
}

void maybeComplete(BlockState& b, uint32_t off, MBarrier& m) {
  if (m.pending == 0 && m.tx == 0) completePhase(b, off, m);
}

}  // namespace

extern "C" {

void tessera_emu_mbar_init(void* bar, int32_t count, int32_t site) {
  BlockState& b = *tls;
  const char* c = static_cast<const char*>(bar);
  if (c < b.smemBase || c + 8 > b.smemBase + b.smemBytes || (c - b.smemBase) % 8 || count <= 0) {
    reportError(b, "mbarrier.init of a bad address or count " + std::to_string(count) + " by " + threadName(b, b.cur->tid) +
                       " at " + b.L->sites->name(site));
    b.aborted = true;
    return;
  }
  // The init is a plain write of the barrier's word: a thread that uses the barrier must be
  // ordered after it (a barrier between), which the atomic accesses below check.
  if (b.O->checks) sharedAccess(b, c, 8, true, b.cur->tid, site);
  MBarrier m;
  m.expected = m.pending = count;
  m.initSite = site;
  m.accum.assign(size_t(b.nwarps), 0);
  m.done.assign(size_t(b.nwarps), 0);
  b.mbars[uint32_t(c - b.smemBase)] = std::move(m);
}

// mbarrier.arrive[.expect_tx]: `tx` more transaction bytes expected this phase, then one arrival.
int64_t tessera_emu_mbar_arrive(void* bar, int32_t tx, int32_t site) {
  BlockState& b = *tls;
  MBarrier* m = findBar(b, bar, "mbarrier.arrive", site);
  if (!m) return 0;
  if (b.O->checks) sharedAccess(b, static_cast<const char*>(bar), 8, true, b.cur->tid, site, kAtomic);
  const uint32_t off = uint32_t(static_cast<const char*>(bar) - b.smemBase);
  const int64_t state = int64_t(m->phase & 1) << 63;
  m->tx += tx;
  releaseInto(b, warpOf(b, b.cur->tid), m->accum);
  if (--m->pending < 0) {
    reportError(b, "mbarrier at shared offset " + std::to_string(off) + " got more arrivals than its count, by " +
                       threadName(b, b.cur->tid) + " at " + b.L->sites->name(site));
    b.aborted = true;
    return state;
  }
  maybeComplete(b, off, *m);
  return state;
}

// mbarrier.try_wait.parity in a loop: until the phase of that parity is over; then this warp
// knows what its arrivals released.
void tessera_emu_mbar_wait(void* bar, int32_t parity, int32_t site) {
  BlockState& b = *tls;
  MBarrier* m = findBar(b, bar, "mbarrier.try_wait", site);
  if (!m) return;
  if (b.O->checks) sharedAccess(b, static_cast<const char*>(bar), 8, false, b.cur->tid, site, kAtomic);
  const uint32_t off = uint32_t(static_cast<const char*>(bar) - b.smemBase);
  while ((m->phase & 1) == uint32_t(parity & 1)) {
    b.cur->barrierId = int(off);
    waitHere(WaitKind::MBarrier, site);
    if (b.aborted) return;
    m = &b.mbars[off];
  }
  const int w = warpOf(b, b.cur->tid), n = b.nwarps;
  for (int j = 0; j < n && size_t(j) < m->done.size(); ++j)
    b.clocks[size_t(w * n + j)] = std::max(b.clocks[size_t(w * n + j)], m->done[size_t(j)]);
  b.warps[size_t(w)].syncCount++;
}

// cp.async.bulk.tensor.{1..3}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes: the box
// at `c0..c2` of the map into shared memory at `dst` (swizzled), completing on `bar`.
void tessera_emu_tma_load(void* dst, const void* map, void* bar, int32_t rank, int32_t c0, int32_t c1, int32_t c2,
                          int32_t site) {
  BlockState& b = *tls;
  const int tid = b.cur->tid;
  auto fail = [&](const std::string& why) {
    reportError(b, "TMA load: " + why + ", by " + threadName(b, tid) + " at " + b.L->sites->name(site));
    b.aborted = true;
  };
  if (!findExtent(*b.L, map, sizeof(TensorMapForm))) return fail("the tensor map is outside every global buffer");
  TensorMapForm f;
  std::memcpy(&f, map, sizeof f);
  if (f.magic != TensorMapForm::kMagic) return fail("the tensor map is no tensor map the emulated device encoded");
  if (f.rank != rank || rank < 1 || rank > 3) return fail("rank " + std::to_string(rank) + " against a map of rank " + std::to_string(f.rank));
  MBarrier* m = findBar(b, bar, "TMA load", site);
  if (!m) return;
  if (b.O->checks) sharedAccess(b, static_cast<const char*>(bar), 8, true, tid, site, kAtomic);
  const int64_t eb = f.elemBytes;
  const int64_t rowBytes = f.box[0] * eb, boxBytes = rowBytes * f.box[1] * f.box[2];
  char* d = static_cast<char*>(dst);
  const int64_t dOff = d - b.smemBase;
  if (dOff < 0 || dOff % 128 || (f.swizzleBytes && rowBytes > f.swizzleBytes))
    return fail("destination offset " + std::to_string(dOff) + " (needs 128-byte alignment, a box row within the swizzle span)");
  const int64_t span = f.swizzleBytes, mask = span ? span / 16 - 1 : 0;
  auto place = [&](int64_t o) { return span ? o ^ (((o >> 7) & mask) << 4) : o; };
  if (place(dOff + boxBytes - 1) >= int64_t(b.smemBytes) || dOff + boxBytes > int64_t(b.smemBytes))
    return fail("the box of " + std::to_string(boxBytes) + " B overruns shared memory");
  const int64_t cs[3] = {c0, c1, c2};
  // The whole tensor must lie in one global buffer (the map's promise to the hardware).
  int64_t last = (f.dims[0] - 1) * eb;
  for (int i = 1; i < rank; ++i) last += (f.dims[i] - 1) * f.strides[i - 1];
  if (!findExtent(*b.L, reinterpret_cast<const void*>(f.global), size_t(last + eb)))
    return fail("the tensor the map describes is outside every global buffer");
  const char* g = reinterpret_cast<const char*>(f.global);
  MBarrier::Box box{dOff, span, rowBytes % 16 == 0 ? 16 : eb, std::vector<char>(size_t(boxBytes), 0)};
  for (int64_t i2 = 0; i2 < f.box[2]; ++i2)
    for (int64_t i1 = 0; i1 < f.box[1]; ++i1)
      for (int64_t i0 = 0; i0 < f.box[0]; ++i0) {
        const int64_t x = cs[0] + i0, y = cs[1] + i1, z = cs[2] + i2;
        const bool in = x >= 0 && x < f.dims[0] && (rank < 2 || (y >= 0 && y < f.dims[1])) &&
                        (rank < 3 || (z >= 0 && z < f.dims[2]));
        const int64_t u = ((i2 * f.box[1] + i1) * f.box[0] + i0) * eb;
        if (in) std::memcpy(box.data.data() + u, g + x * eb + (rank > 1 ? y * f.strides[0] : 0) + (rank > 2 ? z * f.strides[1] : 0), size_t(eb));
      }
  // The landing bytes, as 16-byte swizzle chunks (contiguous wherever the swizzle puts them) or
  // elements for narrow rows: poison until the phase completes, written through the async proxy.
  const int64_t step = box.step;
  for (int64_t u = 0; u < boxBytes; u += step) {
    const int64_t o = place(dOff + u);
    std::memset(b.smemBase + o, 0xff, size_t(step));
    if (!b.O->checks) continue;
    sharedAccess(b, b.smemBase + o, int(step), true, tid, site, kAsyncProxy);
    for (int64_t j = 0; j < step; ++j) {
      Shadow& s = b.shadow[size_t(o + j)];
      s.pending = 1, s.pendingBy = int16_t(tid), s.pendingSite = site;
    }
    m->landing.push_back({uint32_t(o), uint32_t(step)});
  }
  const uint32_t boff = uint32_t(static_cast<char*>(bar) - b.smemBase);
  m->boxes.push_back(std::move(box));
  // The copy's completion releases the issuer's writes to the phase's waiters.
  releaseInto(b, warpOf(b, tid), m->accum);
  m->tx -= boxBytes;
  maybeComplete(b, boff, *m);
}

}  // extern "C"

namespace {

// wgmma.fence must precede a thread's first wgmma (PTX ISA: it orders the registers the wgmma
// reads, accumulators and A fragments, after the thread's own accesses of them).
bool wgmmaFenced(BlockState& b, int site) {
  const int tid = b.cur->tid;
  if (!b.O->checks || b.wgmmaFences[size_t(tid)] > 0) return true;
  reportError(b, "wgmma without a wgmma.fence before it: " + threadName(b, tid) + " at " + b.L->sites->name(site) +
                     " issued its first wgmma.mma_async with no wgmma.fence.sync.aligned since the kernel began");
  b.wgmmaFences[size_t(tid)] = 1;  // reported once per thread
  return false;
}

// f16 / bf16 bits -> f32 (ir/dtype.h: the same conversion the reference evaluator uses).
float halfValue(uint16_t h, bool bf16) { return bf16 ? ir::bf16ToF32(h) : ir::f16ToF32(h); }

// The lanes of a warp whose fragments take an operand element (PTX ISA wgmma fragments): row r
// of A (of the warp's 16) feeds lanes 4(r%8)..4(r%8)+3, column c of B the lanes l with l%4 ==
// c%8/2 (wgmmaD's columns).
uint32_t aLanes(int r) { return 0xFu << (4 * (r % 8)); }
uint32_t bLanes(int c) { return 0x11111111u << (c % 8 / 2); }

// Whether the lanes hold one async-proxy fence state (what proxyFenced reads of a reader).
bool sameFenceState(const BlockState& b, int base, uint32_t lanes) {
  int first = -1;
  for (uint32_t m = lanes; m; m &= m - 1) {
    const size_t t = size_t(base + __builtin_ctz(m));
    if (first < 0) {
      first = int(t);
      continue;
    }
    const size_t f = size_t(first);
    if ((b.proxyFences[t] != 0) != (b.proxyFences[f] != 0) || b.fenceSync[t] != b.fenceSync[f] ||
        b.fenceClock[t] != b.fenceClock[f])
      return false;
  }
  return true;
}

// The async-proxy read of one 2-byte operand element by `lanes` of the warp starting at thread
// `base`, checked and recorded as the per-lane reads would be. Lanes of a warp share its clock and
// sync count, so with one fence state they differ only where a lane wrote the element itself (its
// own write is ordered before its read but needs its own fence.proxy.async): one lane that did not
// write it stands for the others, and a lane that did is checked as itself.
void operandRead(BlockState& b, uint32_t off, uint32_t lanes, int base, bool sameFences, int site) {
  const char* p = b.smemBase + off;
  const int how = kAsyncProxy | (__builtin_popcount(lanes) > 1 ? kSeveral : 0);
  if (!sameFences) {
    for (uint32_t m = lanes; m; m &= m - 1) sharedAccess(b, p, 2, false, base + __builtin_ctz(m), site, how);
    return;
  }
  const int w0 = b.shadow[off].writer, w1 = b.shadow[off + 1].writer;
  auto reads = [&](int t) { return t >= base && t < base + 32 && (lanes >> (t - base) & 1); };
  for (uint32_t m = lanes; m; m &= m - 1) {
    const int t = base + __builtin_ctz(m);
    if (t != w0 && t != w1) {
      sharedAccess(b, p, 2, false, t, site, how);
      break;
    }
  }
  if (reads(w0)) sharedAccess(b, p, 2, false, w0, site, how);
  if (w1 != w0 && reads(w1)) sharedAccess(b, p, 2, false, w1, site, how);
}

// One operand of a wgmma m64nNk16 as a warp needs it, read once for all its lanes: A's rows
// first..first+15 or B's n columns, 16 k each, from shared memory through `desc` into `out`
// (negated when `sign` is -1); each element checked for the lanes that take it and, with checks,
// recorded in flight in `reads` until a wait_group retires it. False when the kernel was aborted.
bool operandTile(BlockState& b, uint64_t desc, bool mn, bool bf16, float sign, int first, int count, bool isA,
                 uint32_t arrived, int site, std::vector<float>& out, WgmmaReads& reads) {
  const bool noSwizzle = b.O->fault == HwFault::WgmmaNoSwizzle;
  const int base = warpOf(b, b.cur->tid) * b.warpSize;
  const bool same = !b.O->checks || sameFenceState(b, base, arrived);
  int want = 0;
  if (!layout::wgmmaBaseOffsetAgrees(desc, &want)) {
    // The hardware takes the swizzle's row from the address bits and base_offset together: a
    // start off the pattern boundary with the field unset reads rows the TMA never put there.
    reportError(b, std::string("wgmma ") + (isA ? "A" : "B") + " descriptor starts at shared offset " +
                       std::to_string((desc & 0x3fff) << 4) + ", row " + std::to_string(want) +
                       " of its swizzle pattern, with base_offset " + std::to_string((desc >> 49) & 7) +
                       " (the hardware swizzles by absolute address: base_offset must be " + std::to_string(want) +
                       "), by " + threadName(b, b.cur->tid) + " at " + b.L->sites->name(site));
    b.aborted = true;
    return false;
  }
  out.resize(size_t(count) * 16);
  for (int r = 0; r < count; ++r)
    for (int k = 0; k < 16; ++k) {
      const int64_t off = wgmmaAddress(b, desc, mn, first + r, k, noSwizzle, isA ? "A" : "B", site);
      if (off < 0) return false;
      uint16_t h;
      std::memcpy(&h, b.smemBase + off, 2);
      out[size_t(r * 16 + k)] = sign * halfValue(h, bf16);
      if (!b.O->checks) continue;
      const uint32_t lanes = (isA ? aLanes(r) : bLanes(r)) & arrived;
      if (lanes) operandRead(b, uint32_t(off), lanes, base, same, site);
      reads.offs.push_back(uint32_t(off));
      for (int j = 0; j < 2; ++j) {
        uint8_t& cnt = b.shadow[size_t(off) + size_t(j)].wgmmaReads;
        cnt = uint8_t(std::min(255, cnt + 1));
      }
    }
  return !b.aborted;
}

// The lanes of the warp that are in the collective.
uint32_t arrivedLanes(const Collective& c) {
  uint32_t m = 0;
  for (int l = 0; l < 32; ++l)
    if (c.ptr[l]) m |= 1u << l;
  return m;
}

// The part of the product one lane keeps: its N/2 accumulators (rows A0 and A1 of its warp's 16,
// wgmmaD's columns) += A x B over the warp's decoded B columns, each a chain of fmas in k order
// from the lane's own accumulator. The product of two f16 values is exact in f32, so a multiply
// and an add round as the fma does (and need no libm call on hosts built without FMA);
// bf16's products can leave f32's range and keep the fma.
template <bool ExactProducts>
void laneProductAs(int n, bool scaleD, const float* A0, const float* A1, const std::vector<float>& B, int lane, float* acc) {
  for (int i = 0; i < n / 2; ++i) {
    const int c = (i / 4) * 2 + i % 2;
    const float* a = i % 4 / 2 ? A1 : A0;
    const float* bc = &B[size_t(8 * (c / 2) + 2 * (lane % 4) + c % 2) * 16];
    float s = scaleD ? acc[i] : 0.f;
    for (int k = 0; k < 16; ++k) s = ExactProducts ? a[k] * bc[k] + s : std::fma(a[k], bc[k], s);
    acc[i] = s;
  }
}

void laneProduct(bool bf16, int n, bool scaleD, const float* A0, const float* A1, const std::vector<float>& B, int lane,
                 float* acc) {
  if (bf16) laneProductAs<false>(n, scaleD, A0, A1, B, lane, acc);
  else laneProductAs<true>(n, scaleD, A0, A1, B, lane, acc);
}

// The warp collective of the shared-memory wgmma.
constexpr int kWgmmaShared = 201;

}  // namespace

extern "C" {

// wgmma.mma_async m64nNk16 f32 += A(desc) x B(desc): this thread's N/2 accumulators at `acc`.
// flags: bit 0 B's type bf16 (A the same), bit 1 A MN-major, bit 2 B MN-major (its "row" layout),
// bit 3 scale-d (accumulate), bit 4 negate A, bit 5 negate B. The warp's lanes meet (the
// instruction is .sync.aligned); the last one reads the warp's 16 rows of A and B's N columns once
// (the race, proxy and in-flight bookkeeping per element and the lanes that take it), then each
// lane computes its own fragment.
void tessera_emu_wgmma(int32_t n, int32_t flags, int64_t descA, int64_t descB, float* acc, int32_t site) {
  BlockState& b = *tls;
  const int me = laneOf(b, b.cur->tid), w = warpOf(b, b.cur->tid);
  const bool bf16 = flags & 1;
  wgmmaFenced(b, site);
  accTake(b, acc, n / 2, flags & 8, false, site);
  Warp& warp = b.warps[size_t(w)];
  warp.coll.ptr[me] = 1;
  if (!warpCollective(kWgmmaShared, site, [&](Collective& c, int) {
        const uint32_t lanes = arrivedLanes(c);
        WgmmaReads reads;
        reads.site = site;
        if (!operandTile(b, uint64_t(descA), flags & 2, bf16, (flags & 16) ? -1.f : 1.f, 16 * (w % 4), 16, true, lanes,
                         site, warp.wgA, reads) ||
            !operandTile(b, uint64_t(descB), flags & 4, bf16, (flags & 32) ? -1.f : 1.f, 0, n, false, lanes, site,
                         warp.wgB, reads))
          return;
        if (b.O->checks) b.wgmma[size_t(b.cur->tid)].push_back(std::move(reads));
      }))
    return;
  if (b.aborted) return;
  laneProduct(bf16, n, flags & 8, &warp.wgA[size_t(me / 4) * 16], &warp.wgA[size_t(me / 4 + 8) * 16], warp.wgB, me, acc);
  accPublish(b, acc, n / 2, site);
}

// wgmma.mma_async m64nNk16 with A from registers (FlashAttention-3's P·V; the inline PTX of
// codegen/nvidia/wgmma_ptx.h): `a` holds this thread's four A registers, laid out as mma.sync m16n8k16's
// A fragment over its warp's 16 rows. A warp's rows of the product need only its own lanes'
// registers, so the warp exchanges them (a warp collective; the instruction is .sync.aligned),
// its last lane reads B once as the descriptor form does, and every thread then computes its
// accumulators. flags as above (bits 1 and 4 unused: A is K-major in registers and not negated).
void tessera_emu_wgmma_rs(int32_t n, int32_t flags, const uint32_t* a, int64_t descB, float* acc, int32_t site) {
  BlockState& b = *tls;
  const int me = laneOf(b, b.cur->tid);
  const bool bf16 = flags & 1;
  wgmmaFenced(b, site);
  accTake(b, acc, n / 2, true, true, site);
  Warp& warp = b.warps[size_t(warpOf(b, b.cur->tid))];
  Collective& k = warp.coll;
  std::memcpy(k.in[me], a, 16);
  k.ptr[me] = 1;
  if (!warpCollective(kWgmmaRegA, site, [&](Collective& c, int live) {
        if (live != 32) {
          reportError(b, "wgmma with a partial warp (" + std::to_string(live) + " lanes) at " + b.L->sites->name(site));
          b.aborted = true;
          return;
        }
        uint16_t A[16][16];
        const bool swapA = b.O->fault == HwFault::WgmmaSwapA;
        for (int l = 0; l < 32; ++l)
          for (int r = 0; r < 4; ++r) {
            auto [row, col] = layout::mmaA16816(l, swapA && (r == 1 || r == 2) ? 3 - r : r);
            A[row][col] = uint16_t(c.in[l][r]), A[row][col + 1] = uint16_t(c.in[l][r] >> 16);
          }
        // Every lane receives the two rows it accumulates (g and g + 8), 16 halves each.
        for (int l = 0; l < 32; ++l)
          for (int h = 0; h < 2; ++h)
            for (int w = 0; w < 8; ++w)
              c.out[l][8 * h + w] = uint32_t(A[l / 4 + 8 * h][2 * w]) | uint32_t(A[l / 4 + 8 * h][2 * w + 1]) << 16;
        WgmmaReads reads;
        reads.site = site;
        if (!operandTile(b, uint64_t(descB), flags & 4, bf16, (flags & 32) ? -1.f : 1.f, 0, n, false, arrivedLanes(c),
                         site, warp.wgB, reads))
          return;
        if (b.O->checks) b.wgmma[size_t(b.cur->tid)].push_back(std::move(reads));
      }))
    return;
  if (b.aborted) return;
  float rowsA[2][16];
  for (int h = 0; h < 2; ++h)
    for (int w = 0; w < 8; ++w) {
      rowsA[h][2 * w] = halfValue(uint16_t(k.out[me][8 * h + w]), bf16);
      rowsA[h][2 * w + 1] = halfValue(uint16_t(k.out[me][8 * h + w] >> 16), bf16);
    }
  laneProduct(bf16, n, true, rowsA[0], rowsA[1], warp.wgB, me, acc);
  accPublish(b, acc, n / 2, site);
}

void tessera_emu_wgmma_fence(int32_t) {
  BlockState& b = *tls;
  b.wgmmaFences[size_t(b.cur->tid)]++;
}

// fence.proxy.async: this thread's generic-proxy accesses so far are ordered with its later
// async-proxy ones (and, by the clocks it holds, the writes it has seen from other threads).
void tessera_emu_fence_proxy_async(int32_t) {
  BlockState& b = *tls;
  const int tid = b.cur->tid, w = warpOf(b, tid);
  b.proxyFences[size_t(tid)]++;
  b.fenceSync[size_t(tid)] = b.warps[size_t(w)].syncCount;
  auto& row = b.fenceClock[size_t(tid)];
  for (int j = 0; j < b.nwarps; ++j) row[size_t(j)] = b.clocks[size_t(w * b.nwarps + j)];
}

void tessera_emu_wgmma_commit(int32_t) {
  BlockState& b = *tls;
  const int tid = b.cur->tid;
  const int g = b.wgmmaGroups[size_t(tid)]++;
  for (auto& r : b.wgmma[size_t(tid)])
    if (r.group < 0) r.group = g;
  accCommit(b, tid, g);
  // A thread of the warpgroup may wait for this group (wgmma_wait).
  const int first = tid / 128 * 128;
  for (int u = first; u < std::min(first + 128, b.nthreads); ++u) {
    Fiber& f = b.fibers[size_t(u)];
    if (f.state == FiberState::Waiting && f.wait == WaitKind::Wgmma) f.state = FiberState::Ready, f.wait = WaitKind::None;
  }
}

// wgmma.wait_group n: every committed group but the newest n is over. The MMA is the warpgroup's
// (it starts once its four warps issued it), so the wait returns once every live thread of the
// warpgroup committed those groups, and retires the reads of all of them: after it, one thread's
// mbarrier arrive releases the whole stage (the usual consumer-release protocol).
void tessera_emu_wgmma_wait(int32_t n, int32_t site) {
  BlockState& b = *tls;
  const int tid = b.cur->tid;
  const int limit = b.wgmmaGroups[size_t(tid)] - std::max(0, n);
  const int first = tid / 128 * 128, last = std::min(first + 128, b.nthreads);
  for (;;) {
    bool all = true;
    for (int u = first; u < last && all; ++u)
      all = b.fibers[size_t(u)].state == FiberState::Done || b.wgmmaGroups[size_t(u)] >= limit;
    if (all) break;
    waitHere(WaitKind::Wgmma, site);
    if (b.aborted) return;
  }
  accRetire(b, tid, limit);
  // The warps of a warpgroup read B's elements each: retire every element once per site.
  if (b.wgSeen.size() < b.smemBytes / 2 + 1) b.wgSeen.resize(b.smemBytes / 2 + 1, 0), b.wgSeenSite.resize(b.wgSeen.size());
  if (++b.wgStamp == 0) std::fill(b.wgSeen.begin(), b.wgSeen.end(), 0), b.wgStamp = 1;
  for (int u = first; u < last; ++u) {
    auto& q = b.wgmma[size_t(u)];
    std::vector<WgmmaReads> keep;
    for (auto& r : q) {
      if (r.group >= 0 && r.group < limit) {
        for (uint32_t off : r.offs) {
          for (int j = 0; j < 2; ++j) {
            uint8_t& c = b.shadow[size_t(off) + size_t(j)].wgmmaReads;
            if (c && c < 255) --c;
          }
          const size_t e = off / 2;
          if (b.wgSeen[e] == b.wgStamp && b.wgSeenSite[e] == r.site) continue;
          b.wgSeen[e] = b.wgStamp, b.wgSeenSite[e] = r.site;
          sharedAccess(b, b.smemBase + off, 2, false, tid, r.site);
        }
      } else {
        keep.push_back(std::move(r));
      }
    }
    q.swap(keep);
  }
}

}  // extern "C"

}  // namespace tessera::emu
