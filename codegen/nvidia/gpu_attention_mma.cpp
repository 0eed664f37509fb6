// Owns the tensor-core attention strategy for NVIDIA (`flash-mma`): FlashAttention-2's forward on
// mma.sync m16n8k16 (mlir-recipes/gpu-wgmma-tma/gen_fa2_mma.py, generalized to batch, GQA, causal
// masks, ragged sequences, f16 and bf16, head_dim 16..256 by 16), built directly as the mapped
// kernel (a gpu.launch whose threads are lanes: its collectives have no sequential form, so the
// mapped-kernel emulator is what checks it). Per block of W warps, 16 query rows per warp:
//
//   Q tile -> shared (once) -> ldmatrix.x4 A fragments, kept in registers (head_dim <= 128)
//   for each key block kb (causal: only up to the diagonal):
//     K, V rows of kb+1 -> the other stage by cp.async (STAGES = 2; 1: plain copies), wait kb's
//     S = Q·Kᵀ: mma.sync per 8-key tile (B fragments: ldmatrix.x2 of K rows)
//     scale·log2e, keys past Skv or right of the diagonal -> -1e30
//     row max over the thread's values, then the quad (shfl.xor 1, 2); p = 2^(s - m)
//     P's A fragments are S's accumulators (row g / g+8, keys 2t, 2t+1), rounded to the input type
//     O = O·2^(m_old - m) + P·V: mma.sync per 8-column tile (B fragments: ldmatrix.x2.trans of V)
//   l summed over the quad, O / l stored for rows < Sq.
// Shared rows are padded by 8 elements (16 B): the 8 rows an ldmatrix phase reads then start in
// 8 different 16-byte bank groups (the emulator counts no conflict), as the XOR swizzle does for
// the GEMM, with plain index arithmetic. All tiles live in dynamic shared memory (past 48 KB at
// head_dim 128 with two stages).
// Runtime sizes (planAttentionRuntime): the length S (query and key together) from the sizes
// argument clamps the Q and K/V row copies, masks keys at or past S, bounds the causal key blocks
// and guards the stores; the global tensors are viewed at [B][H][S][D]; grid.x (query blocks) and
// grid.z (batch) come from the sizes at launch.
#include <cmath>

#include "codegen/gpu_attention_skeleton.h"
#include "codegen/gpu_gemm_epilogue.h"
#include "codegen/gpu_loops.h"
#include "codegen/gpu_lowering.h"
#include "codegen/gpu_strategies.h"
#include "codegen/kernel_func.h"
#include "codegen/nvidia/gpu_attention_ring.h"
#include "codegen/nvidia/gpu_mma_ops.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace tessera::codegen {

using namespace mlir;

namespace {

// mma.sync's steps: S per 8-key tile from ldmatrix fragments, the softmax over the quad, P's A
// fragments straight from S's accumulators, O per 8-column tile of the head dim.
class MmaSyncSteps : public AttnFamily {
 public:
  MmaSyncSteps(MmaOps& e, const MmaAttnPlan& p, const MmaOps::Shape& shape, KvRing& ring, Value Ks, Value Vs, Value O,
            Value bi, Value h, Value q0, Value warp, Value lane, Value g, Value tq,
            const std::function<SmallVector<Value>(int64_t)>& qFrag, const std::vector<SmallVector<Value>>& qa)
      : e_(e), b(e.b_), loc(e.loc_), ix(e.ix_), p(p), shape(shape), ring(ring), Ks(Ks), Vs(Vs), O(O), bi(bi), h(h), q0(q0),
        warp(warp), lane(lane), g(g), tq(tq), qFrag(qFrag), qa(qa) {}

  void beforeLoop(Value) override { ring.prologue(); }
  SmallVector<Value> initState() override {
    SmallVector<Value> init;
    for (int64_t i = 0; i < 4 * p.ND; ++i) init.push_back(e_.f(0.0f));
    init.append({e_.f(-1e30f), e_.f(-1e30f), e_.f(0.0f), e_.f(0.0f)});  // m (rows g, g+8), l (partial)
    return init;
  }
  void stageIn(AttnBlock& blk, Value kbEnd) override { blk.stage = ring.stageIn(blk.kb, kbEnd); }
  void scores(AttnBlock& blk) override {
    blk.k0 = ix.mul(blk.kb, p.BK);
    // Rank-reduced 2-D views of this stage.
    auto tile2d = [&](Value base) {
      auto t2 = cast<MemRefType>(memref::SubViewOp::inferRankReducedResultType(
          {p.BK, p.LD}, cast<MemRefType>(base.getType()), ArrayRef<int64_t>{ShapedType::kDynamic, 0, 0},
          ArrayRef<int64_t>{1, p.BK, p.LD}, ArrayRef<int64_t>{1, 1, 1}));
      return memref::SubViewOp::create(b, loc, t2, base, ArrayRef<OpFoldResult>{blk.stage, b.getIndexAttr(0), b.getIndexAttr(0)},
                                       ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(p.BK), b.getIndexAttr(p.LD)},
                                       ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1), b.getIndexAttr(1)})
          .getResult();
    };
    K2 = tile2d(Ks), V2 = tile2d(Vs);
    // S = Q Kᵀ, 8 keys per tile: s[j][0..3] = rows g, g, g+8, g+8; keys 2t, 2t+1, 2t, 2t+1.
    Value kRow = ix.rem(lane, 8), kCol = ix.mul(ix.rem(ix.div(lane, 8), 2), 8);
    for (int64_t j = 0; j < p.NJ; ++j) {
      SmallVector<Value> acc = {e_.f(0.0f), e_.f(0.0f), e_.f(0.0f), e_.f(0.0f)};
      for (int64_t kd = 0; kd < p.NKD; ++kd) {
        SmallVector<Value> a = p.qInRegs ? qa[size_t(kd)] : qFrag(kd);
        SmallVector<Value> kf = e_.ldmatrix(K2, ix.add(kRow, j * 8), ix.add(kCol, kd * 16), 2, false);
        acc = e_.mma(a, kf, acc);
      }
      blk.s.append(acc.begin(), acc.end());
    }
  }
  void softmax(AttnBlock& blk, ValueRange carried) override {
    Value rowBase = rowBaseOf();
    Value mOld[2] = {carried[4 * p.ND], carried[4 * p.ND + 1]}, lOld[2] = {carried[4 * p.ND + 2], carried[4 * p.ND + 3]};
    MmaOps::Softmax sm = e_.softmax(shape, blk.s, blk.k0, tq, rowBase, mOld, lOld, blk.masked);
    blk.m = {sm.mNew[0], sm.mNew[1]};
    blk.alpha = {sm.alpha[0], sm.alpha[1]};
    blk.l = {sm.lNew[0], sm.lNew[1]};
    blk.p = sm.p;
  }
  SmallVector<Value> accumulate(AttnBlock& blk, ValueRange carried) override {
    // P's A fragments for 16-key slice c: tiles 2c and 2c+1 as (row g, row g+8) x (keys 2t.., keys 8+2t..).
    std::vector<SmallVector<Value>> pa;
    for (int64_t c = 0; c < p.NC; ++c) {
      auto t0 = blk.p.begin() + 8 * c, t1 = t0 + 4;
      pa.push_back({e_.pack(t0[0], t0[1]), e_.pack(t0[2], t0[3]), e_.pack(t1[0], t1[1]), e_.pack(t1[2], t1[3])});
    }
    // O = O * alpha + P V over 8-column tiles of the head dim.
    Value vRow = ix.rem(lane, 16);
    SmallVector<Value> yields;
    for (int64_t d = 0; d < p.ND; ++d) {
      SmallVector<Value> acc;
      for (int c = 0; c < 4; ++c) acc.push_back(e_.mul(carried[size_t(4 * d + c)], blk.alpha[c / 2]));
      for (int64_t c = 0; c < p.NC; ++c) {
        SmallVector<Value> vf = e_.ldmatrix(V2, ix.add(vRow, c * 16), ix.c(d * 8), 2, true);
        acc = e_.mma(pa[size_t(c)], vf, acc);
      }
      yields.append(acc.begin(), acc.end());
    }
    yields.append({blk.m[0], blk.m[1], blk.l[0], blk.l[1]});
    return yields;
  }
  void stageOut(AttnBlock&) override {
    if (ring.async()) ring.barrier();  // the next iteration's copies overwrite the stage read here
  }
  void afterLoop() override { ring.drain(); }
  void store(ValueRange res) override {
    Value rowBase = rowBaseOf();
    Value lFinal[2] = {res[size_t(4 * p.ND + 2)], res[size_t(4 * p.ND + 3)]};
    e_.storeNormalized(shape, SmallVector<Value>(res.begin(), res.begin() + 4 * p.ND), lFinal, O, bi, h, rowBase, tq);
  }

 private:
  Value rowBaseOf() { return ix.add(ix.add(q0, ix.mul(warp, 16)), g); }

  MmaOps& e_;
  OpBuilder& b;
  Location loc;
  gpuir::Idx& ix;
  const MmaAttnPlan& p;
  const MmaOps::Shape& shape;
  KvRing& ring;
  Value Ks, Vs, O, bi, h, q0, warp, lane, g, tq, K2, V2;
  const std::function<SmallVector<Value>(int64_t)>& qFrag;
  const std::vector<SmallVector<Value>>& qa;
};

}  // namespace

static Status buildMma(const MmaAttnPlan& p, AttnModule& m, GpuPlan& plan, const TargetDesc& t, const RuntimeDims& rt) {
  MLIRContext* ctx = m.b.getContext();
  OpBuilder& b = m.b;
  Location loc = m.loc;
  Value Q = m.q, Kg = m.k, Vg = m.v, O = m.o;
  MmaOps e(b, loc, p.dtype);
  gpuir::Idx& ix = e.ix_;
  Type et = e.et_;
  const int64_t LD = p.LD, BK = p.BK, T = p.T;

  auto launch = attnLaunch(b, loc, p, T, p.smemBytes());
  // Causal: the heaviest query blocks first (enterAttnLaunch).
  const AttnBlockIds ids = enterAttnLaunch(b, loc, launch, p.H, p.causal);
  Value qb = ids.qb, h = ids.h, bi = ids.bi;
  Value tid = launch.getThreadIds().x;
  // Runtime length: read once per thread; the tensors seen at it.
  Value seqV = rt.m ? gemm::loadSize(b, loc, m.sizes, 0) : Value();
  Q = seqView(b, loc, Q, seqV), Kg = seqView(b, loc, Kg, seqV), Vg = seqView(b, loc, Vg, seqV), O = seqView(b, loc, O, seqV);
  Value sqLast = seqV ? ix.add(seqV, -1) : ix.c(p.SQ - 1), skvLast = seqV ? ix.add(seqV, -1) : ix.c(p.SKV - 1);
  Value warp = ix.div(tid, 32), lane = ix.rem(tid, 32), g = ix.div(lane, 4), tq = ix.rem(lane, 4);
  Value q0 = ix.mul(qb, p.BQ), hk = ix.div(h, p.G);
  // The tiles in the dynamic window: Q [BQ][LD], then K and V [STAGES][BK][LD] each.
  auto wg = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  Value dyn = gpu::DynamicSharedMemoryOp::create(
      b, loc, MemRefType::get({ShapedType::kDynamic}, b.getI8Type(), MemRefLayoutAttrInterface(), wg));
  auto view = [&](int64_t offset, ArrayRef<int64_t> shape) {
    return memref::ViewOp::create(b, loc, MemRefType::get(shape, et, MemRefLayoutAttrInterface(), wg), dyn, ix.c(offset),
                                  ValueRange{})
        .getResult();
  };
  Value Qs = view(0, {p.BQ, LD});
  Value Ks = view(p.qBytes(), {p.STAGES, BK, LD});
  Value Vs = view(p.qBytes() + p.kvBytes(), {p.STAGES, BK, LD});
  VectorType v8 = VectorType::get({8}, et);

  // ---- Q tile: rows past Sq repeat the last (their outputs are never stored)
  forEachChunk(ix, tid, T, p.BQ, p.D / 8, [&](Value r, Value j, Value) {
    Value col = ix.mul(j, 8);
    Value gr = ix.min(ix.add(q0, r), sqLast);
    Value v = vector::LoadOp::create(b, loc, v8, Q, ValueRange{bi, h, gr, col});
    vector::StoreOp::create(b, loc, v, Qs, ValueRange{r, col});
  });
  // ---- K/V block kb into `stage`: rows past Skv repeat the last key (masked in S)
  KvRing ring(b, loc, tid, T, BK, p.D, p.dtype, p.STAGES, [&](Value stage, Value r, Value j, Value k0, const KvRing::Put& put) {
    Value col = ix.mul(j, 8);
    Value gr = ix.min(ix.add(k0, r), skvLast);
    for (auto [src, dst] : {std::pair{Kg, Ks}, std::pair{Vg, Vs}}) put(dst, ValueRange{stage, r, col}, src, ValueRange{bi, hk, gr, col});
  });

  ring.barrier();
  // ---- Q's A fragments: matrix i of ldmatrix.x4 = rows 8(i%2).., columns 8(i/2).. of a 16x16 slice
  Value aRow = ix.add(ix.add(ix.rem(lane, 8), ix.mul(ix.rem(ix.div(lane, 8), 2), 8)), ix.mul(warp, 16));
  Value aCol = ix.mul(ix.div(lane, 16), 8);
  std::function<SmallVector<Value>(int64_t)> qFrag = [&](int64_t kd) { return e.ldmatrix(Qs, aRow, ix.add(aCol, kd * 16), 4, false); };
  std::vector<SmallVector<Value>> qa;
  if (p.qInRegs)
    for (int64_t kd = 0; kd < p.NKD; ++kd) qa.push_back(qFrag(kd));

  // ---- key blocks: causal stops at the block of the last visible key of the block's last row
  const MmaOps::Shape shape{p.SQ, p.SKV, p.off, p.BQ, BK, p.NKB, p.causal, p.qscale, seqV};
  Value kbEnd = e.keyBlocksEnd(shape, q0);
  MmaSyncSteps family(e, p, shape, ring, Ks, Vs, O, bi, h, q0, warp, lane, g, tq, qFrag, qa);
  // The blocks no row of this query block masks first (no compares or selects in their softmax).
  runAttention(b, loc, kbEnd, family, e.unmaskedBlocksEnd(shape, q0));
  closeAttnLaunch(b, loc, launch, plan);
  plan.launch.addUserArgs(4, rt.any());
  return {};
}

Expected<GpuPlan> buildGpuAttentionMma(MLIRContext* ctx, const ir::Kernel& k, const GpuAttentionConfig& c, const TargetDesc& t,
                                       const RuntimeDims& rt) {
  return buildAttn<MmaAttnPlan>(ctx, k, c, t, rt, makeMmaAttnPlan, "flash-mma", true, buildMma);
}

}  // namespace tessera::codegen
