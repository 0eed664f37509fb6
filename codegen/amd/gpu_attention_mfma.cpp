// Owns the tensor-core attention strategy for AMD CDNA2/CDNA3 (`flash-mfma`): FlashAttention-2's
// forward on MFMA (v_mfma_f32_16x16x16{f16,bf16_1k} or 32x32x8) for wave64, built directly as the
// mapped kernel (lane-level code: the mapped-kernel emulator checks it). MFMA's wave64 layouts
// (AMD's matrix instruction calculator; emu::layout::mfmaA/B/D), MN = 16 or 32, K = 16 or 8:
//   A: lane l holds A[l % MN][4(l / MN) + j], B: B[4(l / MN) + j][l % MN],
//   D: register r holds D[8(r / 4) + 4(l / MN) + r % 4][l % MN].
// A wave owns NG groups of MN query rows and computes the transposed problem:
//   Sᵀ = K·Qᵀ  (A: K rows from LDS, 8-byte loads; B: Q rows, loaded once into registers)
//   Oᵀ = Vᵀ·Pᵀ (A: Vᵀ rows from LDS, V stored transposed; B: Pᵀ)
// Sᵀ's accumulator registers 4c..4c+3 of a key tile are exactly Pᵀ's B operand for keys
// 8c + 4(l / MN) + j: P is the accumulators rounded to the input type and never leaves registers.
// Every value a lane holds belongs to query column l % MN, so Oᵀ's rescale is a per-lane scalar,
// and a query's max and sum are reduced over the 64 / MN lanes sharing l % MN (ds_swizzle xor 16
// within 32 lanes, ds_bpermute xor 32). Per block of W waves and BQ = W·NG·MN query rows:
//   for each key block kb (causal: only up to the diagonal):
//     STAGES = 2: kb+1's K/V rows loaded into registers before kb's compute, stored into the
//                 other LDS buffer after it, one barrier per block; STAGES = 1: copy, barrier
//     Sᵀ by MFMA; scale·log2e, keys past Skv or right of the diagonal -> -1e30
//     m, p = 2^(s - m), l; Oᵀ = Oᵀ·2^(m_old - m) + Vᵀ·Pᵀ by MFMA
//   l summed over the lanes of the query, O / l stored (4 consecutive head-dim elements per lane).
// LDS rows are padded by 4 elements: K [BK][D+4] and Vᵀ [D][BK+4] per stage, as workgroup
// attributions of the launch (64 KB per workgroup). A row is then 2 mod 4 banks away from the
// previous one (a multiple of 16 plus 4 elements is an odd number of 8-byte pairs), so the 16 rows
// one MFMA operand load touches cover all 32 banks once; CDNA's LDS takes 8-byte-aligned b128.
#include <cmath>

#include "codegen/gpu_attention_skeleton.h"
#include "codegen/gpu_loops.h"
#include "codegen/gpu_lowering.h"
#include "codegen/gpu_strategies.h"
#include "codegen/kernel_func.h"
#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/ROCDLDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace tessera::codegen {

using namespace mlir;

namespace {

class Kernel : public gpuir::F32Builder {
 public:
  Kernel(OpBuilder& b, Location loc, const MfmaAttnPlan& p) : F32Builder(b, loc), p_(p) {
    i32_ = b.getI32Type();
    et_ = p.dtype == ir::ScalarType::BF16 ? Type(b.getBF16Type()) : Type(b.getF16Type());
    accT_ = VectorType::get({p.NR}, f32_);
    opT_ = VectorType::get({4}, et_);
  }

  // 2^x: llvm.exp2 (v_exp_f32); a masked -1e30 gives 0.
  Value exp2(Value x) { return math::Exp2Op::create(b_, loc_, x); }
  Value zeroAcc() {
    return arith::ConstantOp::create(b_, loc_, accT_, DenseElementsAttr::get(accT_, b_.getF32FloatAttr(0.0f)));
  }
  Value elem(Value v, int64_t i) { return vector::ExtractOp::create(b_, loc_, v, ArrayRef<int64_t>{i}); }
  // The lane `lanes` apart (xor) in the wave: ds_swizzle's bit mode within 32 lanes (and 0x1f,
  // or 0, xor `lanes`), ds_bpermute (gpu.shuffle) across the halves.
  Value xorLane(Value v, int32_t lanes) {
    if (lanes < 32) {
      Value bits = arith::BitcastOp::create(b_, loc_, i32_, v);
      Value off = arith::ConstantOp::create(b_, loc_, b_.getI32IntegerAttr(0x1f | (lanes << 10)));
      Value r = ROCDL::DsSwizzleOp::create(b_, loc_, i32_, bits, off);
      return arith::BitcastOp::create(b_, loc_, f32_, r);
    }
    auto off = arith::ConstantOp::create(b_, loc_, b_.getI32IntegerAttr(lanes));
    auto width = arith::ConstantOp::create(b_, loc_, b_.getI32IntegerAttr(64));
    return gpu::ShuffleOp::create(b_, loc_, v, off, width, gpu::ShuffleMode::XOR).getShuffleResult();
  }
  // Combines `v` over the 64 / MN lanes that hold the same query column.
  Value acrossQuery(Value v, bool isMax) {
    for (int32_t lanes = int32_t(p_.MN); lanes < 64; lanes *= 2) {
      Value o = xorLane(v, lanes);
      v = isMax ? max(v, o) : add(v, o);
    }
    return v;
  }
  Value mfma(Value a, Value bv, Value acc) {
    return amdgpu::MFMAOp::create(b_, loc_, accT_, uint32_t(p_.MN), uint32_t(p_.MN), uint32_t(p_.KI), 1u, a, bv, acc)
        .getResult();
  }

  const MfmaAttnPlan& p_;
  Type i32_, et_;
  VectorType accT_, opT_;
};

}  // namespace

static Status buildMfma(const MfmaAttnPlan& p, AttnModule& m, GpuPlan& plan, const TargetDesc& t, const RuntimeDims& rt) {
  OpBuilder& b = m.b;
  Location loc = m.loc;
  Value Q = m.q, O = m.o;  // K and V are read once each, from m.k and m.v
  Kernel e(b, loc, p);
  gpuir::Idx& ix = e.ix_;
  Type et = e.et_;
  const int64_t BK = p.BK, T = p.T, MN = p.MN, KI = p.KI, NG = p.NG, D = p.D;
  const int64_t NT = BK / MN;    // key tiles of Sᵀ per block
  const int64_t NDT = D / MN;    // head-dim tiles of Oᵀ
  const int64_t NKC = D / KI;    // head-dim steps of Sᵀ
  const int64_t NPC = MN / KI;   // Pᵀ operands per key tile

  auto launch = attnLaunch(b, loc, p, T, -1);
  auto wg = gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
  Value Ks = launch.addWorkgroupAttribution(MemRefType::get({p.STAGES, BK, p.LK}, et, MemRefLayoutAttrInterface(), wg), loc);
  Value Vt = launch.addWorkgroupAttribution(MemRefType::get({p.STAGES, D, p.LV}, et, MemRefLayoutAttrInterface(), wg), loc);
  b.setInsertionPointToStart(&launch.getBody().front());
  Value qb = launch.getBlockIds().x, h = launch.getBlockIds().y, bi = launch.getBlockIds().z;
  Value tid = launch.getThreadIds().x;
  Value wave = ix.div(tid, 64), lane = ix.rem(tid, 64), ln = ix.rem(lane, MN), lq4 = ix.mul(ix.div(lane, MN), 4);
  Value q0 = ix.mul(qb, p.BQ), hk = ix.div(h, p.G);
  // Query row of group g's column ln (rows past Sq repeat the last for loads; never stored).
  auto rowOf = [&](int64_t g) { return ix.add(ix.add(q0, ix.mul(ix.add(ix.mul(wave, NG), g), MN)), ln); };
  VectorType v8 = VectorType::get({8}, et);
  const int64_t chunksPerRow = D / 8, chunks = BK * chunksPerRow, steps = ceilDiv(chunks, T);

  // ---- Q's B operands (Qᵀ[d][q] = Q[q][d]: 4 consecutive head-dim elements), in registers
  std::vector<std::vector<Value>> qB(static_cast<size_t>(NG));
  for (int64_t g = 0; g < NG; ++g) {
    Value row = ix.min(rowOf(g), p.SQ - 1);
    for (int64_t kc = 0; kc < NKC; ++kc)
      qB[size_t(g)].push_back(vector::LoadOp::create(b, loc, e.opT_, Q, ValueRange{bi, h, row, ix.add(lq4, kc * KI)}));
  }
  // ---- K/V block kb: global rows (past Skv: the last key again, masked in S) into registers,
  // then into LDS buffer `stage` (K row-major, V transposed). Threads past the chunks copy nothing.
  // Chunk ch of 8 elements: K's run along its rows (16-byte loads and stores). V's pairs of chunks
  // (one 32-byte sector of a row) run down the keys: the lanes' transposing 2-byte LDS stores then
  // land in consecutive addresses, the pair's second half 8 Vᵀ rows (16 banks) away. Along the
  // rows, the 8 lanes of a row would hit one bank (16-way conflicts in the emulator's count).
  auto kChunk = [&](Value ch) { return std::pair{ix.div(ch, chunksPerRow), ix.mul(ix.rem(ch, chunksPerRow), 8)}; };
  auto vChunk = [&](Value ch) {
    Value pair = ix.div(ch, 2);
    return std::pair{ix.rem(pair, BK), ix.add(ix.mul(ix.div(pair, BK), 16), ix.mul(ix.rem(ch, 2), 8))};
  };
  struct Loaded { std::vector<Value> k, v; };
  auto loadKV = [&](Value kb) {
    Loaded r;
    Value k0 = ix.mul(kb, BK);
    for (int64_t st = 0; st < steps; ++st) {
      Value ch = ix.add(tid, st * T);
      if ((st + 1) * T > chunks) ch = ix.min(ch, chunks - 1);  // loaded, not stored
      auto [row, col] = kChunk(ch);
      r.k.push_back(vector::LoadOp::create(b, loc, v8, m.k, ValueRange{bi, hk, ix.min(ix.add(k0, row), p.SKV - 1), col}));
      auto [vrow, vcol] = vChunk(ch);
      r.v.push_back(vector::LoadOp::create(b, loc, v8, m.v, ValueRange{bi, hk, ix.min(ix.add(k0, vrow), p.SKV - 1), vcol}));
    }
    return r;
  };
  auto storeKV = [&](const Loaded& r, Value stage) {
    for (int64_t st = 0; st < steps; ++st) {
      Value ch = ix.add(tid, st * T);
      gpuir::guarded(b, loc, (st + 1) * T > chunks ? ix.lt(ch, chunks) : Value(), [&] {
        auto [row, col] = kChunk(ch);
        vector::StoreOp::create(b, loc, r.k[size_t(st)], Ks, ValueRange{stage, row, col});
        auto [vrow, vcol] = vChunk(ch);
        for (int64_t i = 0; i < 8; ++i)
          memref::StoreOp::create(b, loc, e.elem(r.v[size_t(st)], i), Vt, ValueRange{stage, ix.add(vcol, i), vrow});
      });
    }
  };
  auto barrier = [&] { gpu::BarrierOp::create(b, loc); };

  // ---- key blocks: causal stops at the block of the last visible key of the block's last row
  Value kbEnd = ix.c(p.NKB);
  if (p.causal) {
    Value lastRow = ix.min(ix.add(q0, p.BQ - 1), p.SQ - 1);
    kbEnd = arith::MinSIOp::create(b, loc, ix.add(ix.div(ix.add(lastRow, p.off), BK), 1), ix.c(p.NKB));
  }
  const bool pipelined = p.STAGES == 2;
  // Carried per group: Oᵀ tiles, m, l (this lane's partial sum).
  const int64_t perG = NDT + 2;
  AttnSteps family;
  family.before = [&](Value) {
    if (!pipelined) return;
    storeKV(loadKV(ix.c(0)), ix.c(0));
    barrier();
  };
  family.init = [&] {
    SmallVector<Value> init;
    for (int64_t g = 0; g < NG; ++g) {
      for (int64_t d = 0; d < NDT; ++d) init.push_back(e.zeroAcc());
      init.append({e.f(-1e30f), e.f(0.0f)});
    }
    return init;
  };
  Value hasNext;
  Loaded next;
  family.in = [&](AttnBlock& blk, Value kbEnd) {
    Value kb = blk.kb;
    Value stage = ix.c(0);
    if (pipelined) {
      stage = ix.rem(kb, 2);
      Value nb = ix.add(kb, 1);
      hasNext = ix.lt(nb, kbEnd);
      next = loadKV(arith::MinSIOp::create(b, loc, nb, ix.add(kbEnd, -1)));  // in flight during the compute
    } else {
      barrier();  // every wave is done with the previous block
      storeKV(loadKV(kb), stage);
      barrier();
    }
    blk.stage = stage;
  };
  // Sᵀ = K Qᵀ per key tile: A = K[key ln][d 4(l/MN)..], B = Q's registers.
  std::vector<std::vector<Value>> sT(static_cast<size_t>(NG), std::vector<Value>(static_cast<size_t>(NT)));
  family.s = [&](AttnBlock& blk) {
    blk.k0 = ix.mul(blk.kb, BK);
    for (int64_t kt = 0; kt < NT; ++kt) {
      for (int64_t g = 0; g < NG; ++g) sT[size_t(g)][size_t(kt)] = e.zeroAcc();
      for (int64_t kc = 0; kc < NKC; ++kc) {
        Value a = vector::LoadOp::create(b, loc, e.opT_, Ks, ValueRange{blk.stage, ix.add(ln, kt * MN), ix.add(lq4, kc * KI)});
        for (int64_t g = 0; g < NG; ++g)
          sT[size_t(g)][size_t(kt)] = e.mfma(a, qB[size_t(g)][size_t(kc)], sT[size_t(g)][size_t(kt)]);
      }
    }
  };
  // Per group: m, l, alpha, and Pᵀ's B operands [kt][c] in blk.p (NT * NPC of them).
  family.sm = [&](AttnBlock& blk, ValueRange carried) {
    Value qs = e.f(float(p.qscale)), neg = e.f(-1e30f), zero = e.f(0.0f);
    for (int64_t g = 0; g < NG; ++g) {
      Value row = rowOf(g);
      Value lim = p.causal ? ix.add(row, p.off) : Value();
      // Scale and mask: register r of tile kt is key k0 + kt·MN + 8(r/4) + 4(l/MN) + r%4.
      std::vector<Value> sv, ok;
      Value rowMax = neg;
      for (int64_t kt = 0; kt < NT; ++kt)
        for (int64_t r = 0; r < p.NR; ++r) {
          Value key = ix.add(ix.add(blk.k0, lq4), kt * MN + 8 * (r / 4) + r % 4);
          Value valid;
          if (p.SKV % BK) valid = ix.lt(key, p.SKV);
          if (p.causal) {
            Value cv = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle, key, lim);
            valid = valid ? ix.band(valid, cv) : cv;
          }
          Value x = e.mul(e.elem(sT[size_t(g)][size_t(kt)], r), qs);
          if (valid) x = arith::SelectOp::create(b, loc, valid, x, neg);
          sv.push_back(x);
          ok.push_back(valid);
          rowMax = e.max(rowMax, x);
        }
      Value mOld = carried[size_t(g * perG + NDT)], lOld = carried[size_t(g * perG + NDT + 1)];
      Value mNew = e.max(mOld, e.acrossQuery(rowMax, true));
      Value alpha = e.exp2(e.sub(mOld, mNew));
      Value l = e.mul(lOld, alpha);
      // p = 2^(s - m); masked keys exactly 0 (a row none of whose keys is visible keeps m = -1e30).
      std::vector<Value> pr;
      for (size_t i = 0; i < sv.size(); ++i) {
        Value pv = e.exp2(e.sub(sv[i], mNew));
        if (ok[i]) pv = arith::SelectOp::create(b, loc, ok[i], pv, zero);
        pr.push_back(pv);
        l = e.add(l, pv);
      }
      // Pᵀ's B operand c of tile kt: registers 4c..4c+3, rounded to the input type.
      for (int64_t kt = 0; kt < NT; ++kt)
        for (int64_t c = 0; c < NPC; ++c) {
          SmallVector<Value> four;
          for (int64_t j = 0; j < 4; ++j)
            four.push_back(arith::TruncFOp::create(b, loc, et, pr[size_t(kt * p.NR + 4 * c + j)]));
          blk.p.push_back(vector::FromElementsOp::create(b, loc, e.opT_, four));
        }
      blk.alpha.push_back(alpha);
      blk.m.push_back(mNew);
      blk.l.push_back(l);
    }
  };
  // Oᵀ = Oᵀ·alpha + Vᵀ Pᵀ per head-dim tile: A = Vᵀ[d ln][key 4(l/MN)..].
  family.acc = [&](AttnBlock& blk, ValueRange carried) {
    std::vector<std::vector<Value>> oT(static_cast<size_t>(NG));
    for (int64_t g = 0; g < NG; ++g) {
      Value al = vector::BroadcastOp::create(b, loc, e.accT_, blk.alpha[size_t(g)]);
      for (int64_t d = 0; d < NDT; ++d) oT[size_t(g)].push_back(e.mul(carried[size_t(g * perG + d)], al));
    }
    for (int64_t d = 0; d < NDT; ++d)
      for (int64_t kt = 0; kt < NT; ++kt)
        for (int64_t c = 0; c < NPC; ++c) {
          Value a = vector::LoadOp::create(b, loc, e.opT_, Vt,
                                           ValueRange{blk.stage, ix.add(ln, d * MN), ix.add(lq4, kt * MN + c * KI)});
          for (int64_t g = 0; g < NG; ++g)
            oT[size_t(g)][size_t(d)] = e.mfma(a, blk.p[size_t((g * NT + kt) * NPC + c)], oT[size_t(g)][size_t(d)]);
        }
    SmallVector<Value> out;
    for (int64_t g = 0; g < NG; ++g) {
      out.append(oT[size_t(g)].begin(), oT[size_t(g)].end());
      out.push_back(blk.m[size_t(g)]);
      out.push_back(blk.l[size_t(g)]);
    }
    return out;
  };
  family.out = [&](AttnBlock& blk) {
    if (!pipelined) return;
    // kb+1 into the other buffer (read by every wave during kb-1, before the last barrier).
    Value nextStage = ix.rem(ix.add(blk.kb, 1), 2);
    gpuir::guarded(b, loc, hasNext, [&] { storeKV(next, nextStage); });
    barrier();
  };
  // ---- O / l for rows < Sq: register r of tile d is O[row][d·MN + 8(r/4) + 4(l/MN) + r%4]
  family.st = [&](ValueRange res) {
    for (int64_t g = 0; g < NG; ++g) {
      Value l = e.acrossQuery(res[size_t(g * perG + NDT + 1)], false);
      Value inv = arith::DivFOp::create(b, loc, e.f(1.0f), l);
      Value row = rowOf(g);
      gpuir::guarded(b, loc, ix.lt(row, p.SQ), [&] {
        for (int64_t d = 0; d < NDT; ++d)
          for (int64_t r4 = 0; r4 < p.NR / 4; ++r4) {
            SmallVector<Value> four;
            for (int64_t j = 0; j < 4; ++j)
              four.push_back(
                  arith::TruncFOp::create(b, loc, et, e.mul(e.elem(res[size_t(g * perG + d)], 4 * r4 + j), inv)));
            Value v = vector::FromElementsOp::create(b, loc, e.opT_, four);
            vector::StoreOp::create(b, loc, v, O, ValueRange{bi, h, row, ix.add(lq4, d * MN + 8 * r4)});
          }
      });
    }
  };
  runAttention(b, loc, kbEnd, family);
  closeAttnLaunch(b, loc, launch, plan);
  plan.launch.addUserArgs(4, false);
  return {};
}

Expected<GpuPlan> buildGpuAttentionMfma(MLIRContext* ctx, const ir::Kernel& k, const GpuAttentionConfig& c, const TargetDesc& t) {
  return buildAttn<MfmaAttnPlan>(ctx, k, c, t, {}, makeMfmaAttnPlan, "flash-mfma", true, buildMfma);
}

}  // namespace tessera::codegen
