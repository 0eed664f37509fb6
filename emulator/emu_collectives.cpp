// Owns the warp- and wave-collective instructions of the mapped-kernel emulator, computed for the
// whole warp by its last arriving lane from the documents' fragment tables: shfl.sync and vote
// (PTX ISA pseudo-code), ldmatrix and mma.sync m16n8k16 / m16n8k8 (PTX ISA "Matrix Fragments"),
// MFMA 16x16x16 / 32x32x8 for f16 and bf16, mbcnt, ds_bpermute, ds_swizzle, DPP and readlane (AMD
// CDNA3 ISA; MFMA layouts as AMD's matrix instruction calculator prints them), plus the device
// libraries' math and the inline-PTX approximations the kernels call.
#include <cmath>
#include <cstdio>

#include "emulator/emu_internal.h"
#include "ir/dtype.h"

namespace tessera::emu {

namespace layout {
std::pair<int, int> mmaA16816(int lane, int reg) {
  const int g = lane / 4, t = lane % 4;
  return {g + 8 * (reg % 2), 2 * t + 8 * (reg / 2)};
}
std::pair<int, int> mmaB16816(int lane, int reg) { return {2 * (lane % 4) + 8 * reg, lane / 4}; }
std::pair<int, int> mmaC16816(int lane, int reg) { return {lane / 4 + 8 * (reg / 2), 2 * (lane % 4) + reg % 2}; }
std::pair<int, int> mfmaA(int mn, int lane, int j) { return {lane % mn, 4 * (lane / mn) + j}; }
std::pair<int, int> mfmaB(int mn, int lane, int j) { return {4 * (lane / mn) + j, lane % mn}; }
std::pair<int, int> mfmaD(int mn, int lane, int r) {
  if (mn == 16) return {4 * (lane / 16) + r, lane % 16};
  return {8 * (r / 4) + 4 * (lane / 32) + r % 4, lane % 32};
}
}  // namespace layout

using namespace detail;

namespace {

inline float h2f(uint16_t b) { return ir::f16ToF32(b); }
inline float bf2f(uint16_t b) { return ir::bf16ToF32(b); }
inline uint16_t f2h(float f) {
  _Float16 h = _Float16(f);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
inline uint32_t f2u(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float u2f(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

enum CollectiveOp { kShfl = 1, kVote = 2, kLdmatrix = 3, kMma = 4, kMfma = 5, kPermute = 6, kReadlane = 7, kSyncwarp = 8 };

BlockState& state() { return *tls; }
int lane() { return laneOf(*tls, tls->cur->tid); }

}  // namespace

extern "C" {

// shfl.sync.{bfly,up,down,idx}.b32 d|p, a, b, c, membermask (mode 0 bfly, 1 up, 2 down, 3 idx).
int32_t tessera_emu_shfl(int32_t mode, int32_t mask, int32_t val, int32_t b, int32_t c, int32_t site, int8_t* valid) {
  BlockState& st = state();
  const int me = lane();
  collectiveSlot(uint32_t(mask));
  Collective& k = st.warps[size_t(warpOf(st, st.cur->tid))].coll;
  uint32_t in[4] = {uint32_t(val), uint32_t(b), uint32_t(c), uint32_t(mask)};
  std::memcpy(k.in[me], in, sizeof in);
  k.ptr[me] = 1;
  if (!warpCollective(kShfl * 16 + mode, site, [&](Collective& w, int) {
        for (int l = 0; l < 32; ++l) {
          if (!w.ptr[l]) continue;
          int bb = int(w.in[l][1]), cc = int(w.in[l][2]), clamp = cc & 0x1f, seg = (cc >> 8) & 0x1f;
          int maxL = (l & seg) | (clamp & ~seg), minL = l & seg, j = l;
          bool p;
          switch (mode) {
            case 1: j = l - bb, p = j >= maxL; break;
            case 2: j = l + bb, p = j <= maxL; break;
            case 0: j = l ^ bb, p = j <= maxL; break;
            default: j = minL | (bb & ~seg), p = j <= maxL;
          }
          if (!p || j < 0 || j >= 32 || !w.ptr[j]) j = l, p = p && false;
          w.out[l][0] = w.in[j][0];
          w.out[l][1] = p;
        }
        std::memset(w.ptr, 0, sizeof w.ptr);
      }, uint32_t(mask)))
    return val;
  if (valid) *valid = int8_t(k.out[me][1]);
  return int32_t(k.out[me][0]);
}

// vote.sync.{all,any,uni,ballot} (mode 0 all, 1 any, 2 uni, 3 ballot).
int32_t tessera_emu_vote(int32_t mode, int32_t mask, int32_t pred, int32_t site) {
  BlockState& st = state();
  const int me = lane();
  collectiveSlot(uint32_t(mask));
  Collective& k = st.warps[size_t(warpOf(st, st.cur->tid))].coll;
  k.in[me][0] = uint32_t(pred != 0);
  k.in[me][1] = uint32_t(mask);
  k.ptr[me] = 1;
  if (!warpCollective(kVote * 16 + mode, site, [&](Collective& w, int) {
        uint32_t ballot = 0;
        for (int l = 0; l < 32; ++l)
          if (w.ptr[l] && w.in[l][0]) ballot |= 1u << l;
        const uint32_t m = w.in[me][1];
        uint32_t r = mode == 3 ? ballot : mode == 0 ? ((ballot & m) == m) : mode == 1 ? ((ballot & m) != 0)
                                                                   : ((ballot & m) == 0 || (ballot & m) == m);
        for (int l = 0; l < 64; ++l) w.out[l][0] = r;
        std::memset(w.ptr, 0, sizeof w.ptr);
      }, uint32_t(mask)))
    return 0;
  return int32_t(k.out[me][0]);
}

// __syncwarp / bar.warp.sync: the member lanes meet (memory they wrote before is visible after;
// the warp's sync count is one for all its lanes, so a partial mask orders the others too).
void tessera_emu_syncwarp(int32_t mask, int32_t site) {
  collectiveSlot(uint32_t(mask));
  warpCollective(kSyncwarp * 16, site, [](Collective&, int) {}, uint32_t(mask), true);
}

// ldmatrix.sync.aligned.m8n8.x{num}[.trans].shared.b16: lanes 8i..8i+7 give the row addresses of
// matrix i; lane l receives, of matrix i, row l/4 columns 2(l%4) and 2(l%4)+1 (.trans: rows
// 2(l%4), 2(l%4)+1 of column l/4).
void tessera_emu_ldmatrix(void* addr, int32_t num, int32_t trans, uint32_t* out, int32_t site) {
  BlockState& st = state();
  const int me = lane();
  const int w = warpOf(st, st.cur->tid);
  Collective& k = st.warps[size_t(w)].coll;
  k.ptr[me] = reinterpret_cast<uint64_t>(addr);
  if (!warpCollective(kLdmatrix * 16 + num * 2 + trans, site, [&](Collective& c, int live) {
        if (live != 32) {
          reportError(st, "ldmatrix with a partial warp (" + std::to_string(live) + " lanes) at " + st.L->sites->name(site));
          return;
        }
        uint16_t m[4][8][8];
        Counters& ct = st.R->counters;
        for (int i = 0; i < num; ++i) {
          // One phase per 8x8 matrix: its 8 rows of 16 bytes through the 32 banks.
          AccessGroup g;
          g.bytes = 16;
          for (int r = 0; r < 8; ++r) {
            const int src = 8 * i + r;
            char* p = reinterpret_cast<char*>(c.ptr[src]);
            if (p < st.smemBase || p + 16 > st.smemBase + st.smemBytes || reinterpret_cast<uintptr_t>(p) % 16) {
              reportError(st, "ldmatrix row address " + std::to_string(p - st.smemBase) +
                                  " is outside shared memory or not 16-byte aligned, from " +
                                  threadName(st, w * st.warpSize + src) + " at " + st.L->sites->name(site));
              std::memset(m[i][r], 0, 16);
              continue;
            }
            if (st.O->checks) sharedAccess(st, p, 16, false, w * st.warpSize + src, site);
            std::memcpy(m[i][r], p, 16);
            g.addr[r] = uint64_t(p - st.smemBase);
          }
          std::vector<std::vector<uint64_t>> bank(32);
          for (int r = 0; r < 8; ++r)
            for (int wd = 0; wd < 4; ++wd) {
              uint64_t word = g.addr[r] / 4 + uint64_t(wd);
              auto& v = bank[word % 32];
              if (std::find(v.begin(), v.end(), word) == v.end()) v.push_back(word);
            }
          size_t worst = 1;
          for (const auto& v : bank) worst = std::max(worst, v.size());
          ct.sharedRequests += i == 0;
          ct.sharedWavefronts += worst, ct.sharedIdealWavefronts += 1, ct.bankConflicts += worst - 1;
          auto& s = ct.sharedBySite[site];
          s[0] += i == 0, s[1] += worst, s[2] += worst - 1;
        }
        for (int l = 0; l < 32; ++l)
          for (int i = 0; i < num; ++i) {
            uint16_t lo, hi;
            if (!trans) lo = m[i][l / 4][2 * (l % 4)], hi = m[i][l / 4][2 * (l % 4) + 1];
            else lo = m[i][2 * (l % 4)][l / 4], hi = m[i][2 * (l % 4) + 1][l / 4];
            c.out[l][i] = lo | uint32_t(hi) << 16;
          }
      }))
    return;
  std::memcpy(out, k.out[me], 4 * size_t(num));
}

// mma.sync.aligned: kind 0 m16n8k16 f32 += f16 x f16, 1 the same with bf16, 2 m16n8k16 f16 +=
// f16 x f16, 3 m16n8k8 f32 += f16 x f16, 4 m16n8k8 f32 += bf16 x bf16. `in`: A registers, B
// registers, C registers (32-bit words); `out`: D registers.
void tessera_emu_mma(int32_t kind, const uint32_t* in, uint32_t* out, int32_t site) {
  BlockState& st = state();
  const int me = lane();
  const int K = kind <= 2 ? 16 : 8;
  const int aRegs = K == 16 ? 4 : 2, bRegs = K == 16 ? 2 : 1, cRegs = kind == 2 ? 2 : 4;
  Collective& k = st.warps[size_t(warpOf(st, st.cur->tid))].coll;
  std::memcpy(k.in[me], in, 4 * size_t(aRegs + bRegs + cRegs));
  const bool swapA = st.O->fault == HwFault::MmaSwapA;
  if (!warpCollective(kMma * 16 + kind, site, [&](Collective& c, int live) {
        if (live != 32) {
          reportError(st, "mma.sync with a partial warp (" + std::to_string(live) + " lanes) at " + st.L->sites->name(site));
          return;
        }
        auto elt = [&](uint32_t word, int half) {
          uint16_t b = uint16_t(word >> (16 * half));
          return kind == 1 || kind == 4 ? bf2f(b) : h2f(b);
        };
        float A[16][16] = {}, B[16][8] = {}, C[16][8] = {};
        for (int l = 0; l < 32; ++l) {
          const int g = l / 4, t = l % 4;
          for (int r = 0; r < aRegs; ++r) {
            int rr = swapA && aRegs == 4 && (r == 1 || r == 2) ? 3 - r : r;
            auto [row, col] = K == 16 ? layout::mmaA16816(l, rr) : std::pair<int, int>{g + 8 * rr, 2 * t};
            A[row][col] = elt(c.in[l][r], 0), A[row][col + 1] = elt(c.in[l][r], 1);
          }
          for (int r = 0; r < bRegs; ++r) {
            auto [kk, n] = layout::mmaB16816(l, r);
            B[kk][n] = elt(c.in[l][aRegs + r], 0), B[kk + 1][n] = elt(c.in[l][aRegs + r], 1);
          }
          if (kind == 2) {
            for (int r = 0; r < 2; ++r) {
              uint32_t w = c.in[l][aRegs + bRegs + r];
              C[g + 8 * r][2 * t] = h2f(uint16_t(w)), C[g + 8 * r][2 * t + 1] = h2f(uint16_t(w >> 16));
            }
          } else {
            for (int r = 0; r < 4; ++r) {
              auto [row, col] = layout::mmaC16816(l, r);
              C[row][col] = u2f(c.in[l][aRegs + bRegs + r]);
            }
          }
        }
        float D[16][8];
        for (int i = 0; i < 16; ++i)
          for (int j = 0; j < 8; ++j) {
            float acc = 0;
            for (int kk = 0; kk < K; ++kk) acc += A[i][kk] * B[kk][j];  // 16-bit products are exact in f32
            D[i][j] = acc + C[i][j];
          }
        for (int l = 0; l < 32; ++l) {
          const int g = l / 4, t = l % 4;
          if (kind == 2) {
            for (int r = 0; r < 2; ++r)
              c.out[l][r] = f2h(D[g + 8 * r][2 * t]) | uint32_t(f2h(D[g + 8 * r][2 * t + 1])) << 16;
          } else {
            for (int r = 0; r < 4; ++r) {
              auto [row, col] = layout::mmaC16816(l, r);
              c.out[l][r] = f2u(D[row][col]);
            }
          }
        }
      }))
    return;
  std::memcpy(out, k.out[me], 4 * size_t(cRegs));
}

// MFMA (wave64): kind 0 v_mfma_f32_16x16x16_f16, 1 v_mfma_f32_32x32x8_f16, 2 16x16x16_bf16,
// 3 32x32x8_bf16. a, b: four 16-bit elements; acc: 4 or 16 f32, updated in place.
void tessera_emu_mfma(int32_t kind, uint64_t a, uint64_t b, float* acc, int32_t cbsz, int32_t abid, int32_t blgp,
                      int32_t site) {
  BlockState& st = state();
  const int me = lane();
  const int mn = kind % 2 == 0 ? 16 : 32, K = mn == 16 ? 16 : 8, regs = mn == 16 ? 4 : 16;
  const bool bf = kind >= 2;
  Collective& k = st.warps[size_t(warpOf(st, st.cur->tid))].coll;
  if (cbsz || abid || blgp) {
    reportError(st, "MFMA with CBSZ/ABID/BLGP broadcast (not modelled) by " + threadName(st, st.cur->tid) + " at " +
                        st.L->sites->name(site));
    return;
  }
  k.in[me][0] = uint32_t(a), k.in[me][1] = uint32_t(a >> 32), k.in[me][2] = uint32_t(b), k.in[me][3] = uint32_t(b >> 32);
  std::memcpy(&k.in[me][4], acc, 4 * size_t(regs));
  const HwFault fault = st.O->fault;
  if (!warpCollective(kMfma * 16 + kind, site, [&](Collective& c, int live) {
        if (live != 64 || st.warpSize != 64) {
          reportError(st, "MFMA needs a full wave64 (" + std::to_string(live) + " lanes) at " + st.L->sites->name(site));
          return;
        }
        float A[32][16] = {}, B[16][32] = {}, D[32][32] = {};
        for (int l = 0; l < 64; ++l)
          for (int j = 0; j < 4; ++j) {
            uint16_t ha = uint16_t(c.in[l][j / 2] >> (16 * (j % 2))), hb = uint16_t(c.in[l][2 + j / 2] >> (16 * (j % 2)));
            int jj = fault == HwFault::MfmaReverseK ? 3 - j : j;
            auto [am, ak] = layout::mfmaA(mn, l, jj);
            auto [bk, bn] = layout::mfmaB(mn, l, j);
            A[am][ak] = bf ? bf2f(ha) : h2f(ha);
            B[bk][bn] = bf ? bf2f(hb) : h2f(hb);
          }
        auto dAt = [&](int l, int r) -> float& {
          auto [m, n] = layout::mfmaD(mn, l, r);
          return fault == HwFault::MfmaTransposeD ? D[n][m] : D[m][n];
        };
        for (int l = 0; l < 64; ++l)
          for (int r = 0; r < regs; ++r) dAt(l, r) = u2f(c.in[l][4 + r]);
        for (int i = 0; i < mn; ++i)
          for (int j = 0; j < mn; ++j) {
            float s = 0;
            for (int kk = 0; kk < K; ++kk) s += A[i][kk] * B[kk][j];
            D[i][j] += s;
          }
        for (int l = 0; l < 64; ++l)
          for (int r = 0; r < regs; ++r) c.out[l][r] = f2u(dAt(l, r));
      }))
    return;
  std::memcpy(acc, k.out[me], 4 * size_t(regs));
}

// v_mbcnt_lo/hi_u32_b32: src + the set bits of mask among the lanes below this one, in the low
// or the high 32 lanes of the wave.
int32_t tessera_emu_mbcnt(int32_t hi, int32_t mask, int32_t src) {
  const int l = lane();
  const int below = hi ? std::max(0, l - 32) : std::min(l, 32);
  const uint64_t bits = below >= 32 ? 0xffffffffull : (uint64_t(1) << below) - 1;
  return src + __builtin_popcountll(uint32_t(mask) & bits);
}

// Cross-lane permutes: 0 ds_bpermute (lane reads lane addr/4), 1 ds_swizzle (offset in `arg`),
// 2 readlane (lane `arg`), 3 readfirstlane, 4 DPP (control in `arg`: row_mask, bank_mask and
// bound_ctrl packed above bit 16).
int32_t tessera_emu_permute(int32_t mode, int32_t data, int32_t arg, int32_t old, int32_t site) {
  BlockState& st = state();
  const int me = lane();
  Collective& k = st.warps[size_t(warpOf(st, st.cur->tid))].coll;
  k.in[me][0] = uint32_t(data), k.in[me][1] = uint32_t(arg), k.in[me][2] = uint32_t(old);
  k.ptr[me] = 1;
  const int WS = st.warpSize;
  if (!warpCollective(kPermute * 16 + mode, site, [&](Collective& c, int) {
        for (int l = 0; l < WS; ++l) {
          if (!c.ptr[l]) continue;
          const uint32_t a = c.in[l][1];
          int src = l;
          bool keepOld = false;
          if (mode == 0) src = int((a >> 2) % uint32_t(WS));
          else if (mode == 1) {
            if (a & 0x8000) src = (l & ~3) | int((a >> (2 * (l & 3))) & 3);  // quad permute
            else src = (l & ~31) | ((((l & 31) & int(a & 31)) | int((a >> 5) & 31)) ^ int((a >> 10) & 31));
          } else if (mode == 2) src = int(a % uint32_t(WS));
          else if (mode == 3) {
            src = 0;
            while (src < WS && !c.ptr[src]) ++src;
          } else {
            const int ctrl = int(a & 0x1ff), rowMask = int((a >> 16) & 0xf), bankMask = int((a >> 20) & 0xf);
            const bool bound = (a >> 24) & 1;
            const int row = l / 16, pos = l % 16;
            if (!(rowMask >> row & 1) || !(bankMask >> (pos / 4) & 1)) {
              c.out[l][0] = c.in[l][2];
              continue;
            }
            if (ctrl <= 0xff) src = (l & ~3) | ((ctrl >> (2 * (l & 3))) & 3);
            else if (ctrl >= 0x101 && ctrl <= 0x10f) src = pos + (ctrl & 0xf) < 16 ? l + (ctrl & 0xf) : -1;   // row_shl
            else if (ctrl >= 0x111 && ctrl <= 0x11f) src = pos >= (ctrl & 0xf) ? l - (ctrl & 0xf) : -1;      // row_shr
            else if (ctrl >= 0x121 && ctrl <= 0x12f) src = row * 16 + (pos + (ctrl & 0xf)) % 16;              // row_ror
            else if (ctrl == 0x140) src = row * 16 + 15 - pos;                                              // row_mirror
            else if (ctrl == 0x141) src = row * 16 + (pos & 8) + 7 - (pos & 7);                             // row_half_mirror
            else if (ctrl == 0x142) src = pos == 15 || row == 0 ? -1 : (row - 1) * 16 + 15;                // row_bcast15
            else if (ctrl == 0x143) src = l < 32 ? -1 : 31;                                                  // row_bcast31
            else {
              reportError(st, "DPP control " + std::to_string(ctrl) + " is not modelled, at " + st.L->sites->name(site));
              src = l;
            }
            if (src < 0 || src >= WS || !c.ptr[src]) {
              if (bound) c.out[l][0] = 0;
              else keepOld = true;
              if (keepOld) c.out[l][0] = c.in[l][2];
              continue;
            }
          }
          c.out[l][0] = src < WS && c.ptr[src] ? c.in[src][0] : 0;
        }
        std::memset(c.ptr, 0, sizeof c.ptr);
      }))
    return data;
  return int32_t(k.out[me][0]);
}

// ex2.approx.ftz.f32: subnormal inputs and outputs flushed to zero; exp2f is within the PTX
// bound (2 ulp), not bit-identical to the SFU.
float tessera_emu_ex2_approx_ftz(float x) {
  if (std::fpclassify(x) == FP_SUBNORMAL) x = 0;
  float y = exp2f(x);
  return std::fpclassify(y) == FP_SUBNORMAL ? 0.f : y;
}
float tessera_emu_rcp_approx_ftz(float x) { return 1.0f / x; }

// The device libraries' math (libdevice), which convert-gpu-to-nvvm calls for what the kernels
// did not expand themselves.
float tessera_emu_nv_fmaf(float a, float b, float c) { return std::fma(a, b, c); }
float tessera_emu_nv_fmaxf(float a, float b) { return std::fmax(a, b); }
float tessera_emu_nv_fminf(float a, float b) { return std::fmin(a, b); }
float tessera_emu_nv_expf(float a) { return std::exp(a); }
float tessera_emu_nv_exp2f(float a) { return std::exp2(a); }
float tessera_emu_nv_logf(float a) { return std::log(a); }
float tessera_emu_nv_sqrtf(float a) { return std::sqrt(a); }
float tessera_emu_nv_rsqrtf(float a) { return 1.0f / std::sqrt(a); }
float tessera_emu_nv_tanhf(float a) { return std::tanh(a); }
float tessera_emu_nv_erff(float a) { return std::erf(a); }
float tessera_emu_nv_floorf(float a) { return std::floor(a); }
float tessera_emu_nv_fabsf(float a) { return std::fabs(a); }
float tessera_emu_nv_powf(float a, float b) { return std::pow(a, b); }
float tessera_emu_nv_rintf(float a) { return std::nearbyint(a); }

// cp.async (emu_async.cpp).
void tessera_emu_cp_async(void* dst, const void* src, int32_t bytes, int32_t srcBytes, int32_t site);
void tessera_emu_cp_commit(int32_t site);
void tessera_emu_cp_wait(int32_t n, int32_t site);
// mbarriers, TMA, wgmma (emu_tma.cpp).
void tessera_emu_mbar_init(void* bar, int32_t count, int32_t site);
int64_t tessera_emu_mbar_arrive(void* bar, int32_t tx, int32_t site);
void tessera_emu_mbar_wait(void* bar, int32_t parity, int32_t site);
void tessera_emu_tma_load(void* dst, const void* map, void* bar, int32_t rank, int32_t c0, int32_t c1, int32_t c2, int32_t site);
void tessera_emu_wgmma(int32_t n, int32_t flags, int64_t descA, int64_t descB, float* acc, int32_t site);
void tessera_emu_wgmma_rs(int32_t n, int32_t flags, const uint32_t* a, int64_t descB, float* acc, int32_t site);
void tessera_emu_wgmma_commit(int32_t site);
void tessera_emu_wgmma_fence(int32_t site);
void tessera_emu_fence_proxy_async(int32_t site);
void tessera_emu_wgmma_wait(int32_t n, int32_t site);
float tessera_emu_wgmma_acc_read(float x, int32_t site);
int32_t tessera_emu_sreg(int32_t which);
void* tessera_emu_shared(int64_t offset);
void tessera_emu_barrier(int32_t id, int32_t count, int32_t site);
void tessera_emu_barrier_arrive(int32_t id, int32_t count, int32_t site);
void* tessera_emu_mem(void* p, int32_t bytes, int32_t flags, int32_t site);
void tessera_emu_count(int64_t n);
void tessera_emu_fence_device(int32_t site);

}  // extern "C"

std::vector<std::pair<std::string, void*>> runtimeSymbols() {
  std::vector<std::pair<std::string, void*>> s = {
      {"tessera_emu_sreg", reinterpret_cast<void*>(&tessera_emu_sreg)},
      {"tessera_emu_shared", reinterpret_cast<void*>(&tessera_emu_shared)},
      {"tessera_emu_barrier", reinterpret_cast<void*>(&tessera_emu_barrier)},
      {"tessera_emu_barrier_arrive", reinterpret_cast<void*>(&tessera_emu_barrier_arrive)},
      {"tessera_emu_mem", reinterpret_cast<void*>(&tessera_emu_mem)},
      {"tessera_emu_count", reinterpret_cast<void*>(&tessera_emu_count)},
      {"tessera_emu_fence_device", reinterpret_cast<void*>(&tessera_emu_fence_device)},
      {"tessera_emu_shfl", reinterpret_cast<void*>(&tessera_emu_shfl)},
      {"tessera_emu_vote", reinterpret_cast<void*>(&tessera_emu_vote)},
      {"tessera_emu_syncwarp", reinterpret_cast<void*>(&tessera_emu_syncwarp)},
      {"tessera_emu_ldmatrix", reinterpret_cast<void*>(&tessera_emu_ldmatrix)},
      {"tessera_emu_mma", reinterpret_cast<void*>(&tessera_emu_mma)},
      {"tessera_emu_mfma", reinterpret_cast<void*>(&tessera_emu_mfma)},
      {"tessera_emu_mbcnt", reinterpret_cast<void*>(&tessera_emu_mbcnt)},
      {"tessera_emu_permute", reinterpret_cast<void*>(&tessera_emu_permute)},
      {"tessera_emu_cp_async", reinterpret_cast<void*>(&tessera_emu_cp_async)},
      {"tessera_emu_cp_commit", reinterpret_cast<void*>(&tessera_emu_cp_commit)},
      {"tessera_emu_cp_wait", reinterpret_cast<void*>(&tessera_emu_cp_wait)},
      {"tessera_emu_mbar_init", reinterpret_cast<void*>(&tessera_emu_mbar_init)},
      {"tessera_emu_mbar_arrive", reinterpret_cast<void*>(&tessera_emu_mbar_arrive)},
      {"tessera_emu_mbar_wait", reinterpret_cast<void*>(&tessera_emu_mbar_wait)},
      {"tessera_emu_tma_load", reinterpret_cast<void*>(&tessera_emu_tma_load)},
      {"tessera_emu_wgmma", reinterpret_cast<void*>(&tessera_emu_wgmma)},
      {"tessera_emu_wgmma_rs", reinterpret_cast<void*>(&tessera_emu_wgmma_rs)},
      {"tessera_emu_wgmma_commit", reinterpret_cast<void*>(&tessera_emu_wgmma_commit)},
      {"tessera_emu_wgmma_fence", reinterpret_cast<void*>(&tessera_emu_wgmma_fence)},
      {"tessera_emu_fence_proxy_async", reinterpret_cast<void*>(&tessera_emu_fence_proxy_async)},
      {"tessera_emu_wgmma_wait", reinterpret_cast<void*>(&tessera_emu_wgmma_wait)},
      {"tessera_emu_wgmma_acc_read", reinterpret_cast<void*>(&tessera_emu_wgmma_acc_read)},
      {"tessera_emu_ex2_approx_ftz", reinterpret_cast<void*>(&tessera_emu_ex2_approx_ftz)},
      {"tessera_emu_rcp_approx_ftz", reinterpret_cast<void*>(&tessera_emu_rcp_approx_ftz)},
      {"__nv_fmaf", reinterpret_cast<void*>(&tessera_emu_nv_fmaf)},
      {"__nv_fmaxf", reinterpret_cast<void*>(&tessera_emu_nv_fmaxf)},
      {"__nv_fminf", reinterpret_cast<void*>(&tessera_emu_nv_fminf)},
      {"__nv_expf", reinterpret_cast<void*>(&tessera_emu_nv_expf)},
      {"__nv_exp2f", reinterpret_cast<void*>(&tessera_emu_nv_exp2f)},
      {"__nv_logf", reinterpret_cast<void*>(&tessera_emu_nv_logf)},
      {"__nv_sqrtf", reinterpret_cast<void*>(&tessera_emu_nv_sqrtf)},
      {"__nv_rsqrtf", reinterpret_cast<void*>(&tessera_emu_nv_rsqrtf)},
      {"__nv_tanhf", reinterpret_cast<void*>(&tessera_emu_nv_tanhf)},
      {"__nv_erff", reinterpret_cast<void*>(&tessera_emu_nv_erff)},
      {"__nv_floorf", reinterpret_cast<void*>(&tessera_emu_nv_floorf)},
      {"__nv_fabsf", reinterpret_cast<void*>(&tessera_emu_nv_fabsf)},
      {"__nv_powf", reinterpret_cast<void*>(&tessera_emu_nv_powf)},
      {"__nv_rintf", reinterpret_cast<void*>(&tessera_emu_nv_rintf)},
  };
  return s;
}

}  // namespace tessera::emu
