// Owns the choice among the GPU attention strategies and the SIMT family's steps of the attention
// skeleton (`flash-simt`, gpu_attention_skeleton.h): FlashAttention-style forward built directly
// as pre-mapping IR (mlir-recipes/gpu-flash-attention: gen.py's phase structure, generalized to
// batch, GQA, causal masks with skipped key blocks, seq_q != seq_kv, any head_dim, and a head_dim
// split):
//
//   scf.forall (b, h, qb) in (B, H, ceil(Sq/BQ))                           #gpu.block<z, y, x>
//     Ks, Vs [BK][DP] (input dtype), Acc [DCS][T][VW] f32, Ms, Ls [T] f32,
//     Sp [DSPLIT][BQ][BK] f32 (DSPLIT > 1)                                 workgroup memory
//     forall t < T: Ms = -1e30, Ls = 0, Acc = 0                              thread t = (row r, slice s)
//     for kb < kbEnd (causal: key blocks right of the diagonal are never visited):
//       forall t: cooperative copy of K/V rows kb*BK.. (clamped, VW-wide chunks, coalesced)
//       [DSPLIT > 1] forall t: partial scores of row r over head_dim slice s -> Sp
//       forall t: scores (x scale*log2e), key mask (ragged / causal), online softmax in registers
//                 (m, l, p), Acc[slice] = Acc*alpha + p . V[slice]; m, l back to Ms, Ls
//     forall t: O[b, h, q0 + r, slice] = Acc / Ls for rows < Sq
//
// Thread t owns only its own state slices, so the phases need no barriers beyond the ones the
// mapping puts after each forall (copy -> compute -> next copy). The per-row state crosses key
// blocks in workgroup memory because the sequential CPU emulation runs one forall after the other
// (REPORT §1); within a key block m, l and p live in registers. exp2 is our own polynomial (no
// libdevice / ocml), -1e30 stands for -inf, masked probabilities are exactly 0.
// Knobs: BQ query rows per block, BK keys per block, DSPLIT threads per query row (head_dim
// split); threads per block = BQ * DSPLIT (warps = threads / warp size).
// Runtime sizes (RuntimeDims, planAttentionRuntime): the sequence length S = Sq = Skv read from
// the sizes argument replaces the compiled one in the copies' clamps, the key mask, the causal
// bound, the key-block count and the store guard, and the tensors are viewed at [B][H][S][D];
// with a runtime batch, blocks past it (the CPU emulation runs every one) read the last batch and
// store nothing.
#include <cmath>

#include "codegen/expr_emitter.h"
#include "codegen/gpu_attention_skeleton.h"
#include "codegen/gpu_gemm_epilogue.h"
#include "codegen/gpu_loops.h"
#include "codegen/gpu_lowering.h"
#include "codegen/gpu_strategies.h"
#include "codegen/kernel_func.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace tessera::codegen {

using namespace mlir;

namespace {

class Builder : public gpuir::F32Builder {
 public:
  Builder(OpBuilder& b, Location loc, const SimtAttnPlan& p) : F32Builder(b, loc), p_(p) {}

  Value f(float v, Type t) {
    if (auto vt = dyn_cast<VectorType>(t))
      return arith::ConstantOp::create(b_, loc_, vt, DenseElementsAttr::get(vt, b_.getF32FloatAttr(v)));
    return arith::ConstantOp::create(b_, loc_, b_.getF32FloatAttr(v));
  }
  Value toF32(Value x) {
    auto vt = dyn_cast<VectorType>(x.getType());
    Type et = vt ? vt.getElementType() : x.getType();
    if (et.isF32()) return x;
    Type to = vt ? Type(VectorType::get(vt.getShape(), f32_)) : Type(f32_);
    return arith::ExtFOp::create(b_, loc_, to, x);
  }
  Value fromF32(Value x, Type et) {
    if (et.isF32()) return x;
    auto vt = cast<VectorType>(x.getType());
    return arith::TruncFOp::create(b_, loc_, VectorType::get(vt.getShape(), et), x);
  }
  Value fma(Value x, Value y, Value z) { return math::FmaOp::create(b_, loc_, x, y, z); }
  Value bcast(Value s, Type vt) { return vector::BroadcastOp::create(b_, loc_, vt, s); }

  // exp2(x) for x <= 0: clamp at -126, n = trunc(x - 0.5) (= round for x <= 0), Cephes degree-6
  // polynomial of the fraction, 2^n from the exponent bits (gpu-flash-attention gen.py).
  Value exp2(Value x) {
    Type t = x.getType();
    auto vt = dyn_cast<VectorType>(t);
    Type it = vt ? Type(VectorType::get(vt.getShape(), b_.getI32Type())) : Type(b_.getI32Type());
    auto ic = [&](int32_t v) -> Value {
      if (vt) return arith::ConstantOp::create(b_, loc_, cast<VectorType>(it), DenseElementsAttr::get(cast<VectorType>(it), b_.getI32IntegerAttr(v)));
      return arith::ConstantOp::create(b_, loc_, b_.getI32IntegerAttr(v));
    };
    Value tt = max(x, f(-126.0f, t));
    Value ni = arith::FPToSIOp::create(b_, loc_, it, sub(tt, f(0.5f, t)));
    Value nf = arith::SIToFPOp::create(b_, loc_, t, ni);
    Value fr = sub(tt, nf);
    const float P[] = {1.535336188319500e-4f, 1.339887440266574e-3f, 9.618437357674640e-3f, 5.550332471162809e-2f,
                       2.402264791363012e-1f, 6.931472028550421e-1f, 1.0f};
    Value poly = f(P[0], t);
    for (int i = 1; i < 7; ++i) poly = fma(poly, fr, f(P[i], t));
    Value bits = arith::ShLIOp::create(b_, loc_, arith::AddIOp::create(b_, loc_, ni, ic(127)), ic(23));
    return mul(poly, arith::BitcastOp::create(b_, loc_, t, bits));
  }

  const SimtAttnPlan& p_;
};

}  // namespace

Expected<GpuLaunch::Runtime> planAttentionRuntime(const ir::AttentionSpec& s, const RuntimeDims& rt, const std::string& strategy,
                                                  int64_t BQ) {
  auto refuse = [&](const std::string& m) { return makeError(ErrorCode::Unsupported, "attention (" + strategy + "): " + m); };
  GpuLaunch::Runtime r;
  if (!rt.any()) return r;
  if (rt.kv)
    return refuse("a runtime key length apart from the query length is not supported on a GPU: take the sequence length (query and key together)");
  if (rt.m && s.seq_q != s.seq_kv)
    return refuse("a runtime sequence length needs equal query and key lengths (" + std::to_string(s.seq_q) + " and " +
                  std::to_string(s.seq_kv) + ")");
  r.m = rt.m;
  r.batch = rt.batch;
  r.maxM = s.seq_q;
  r.maxBatch = s.batch;
  r.rowsPerBlock = BQ;
  r.rowAxis = 0;
  r.mDim = 2;
  r.dim = "seq";
  r.batchInGrid = true;
  for (int i = 0; i < 4; ++i) {
    if (rt.m) r.mTensors.push_back(i);
    if (rt.batch) r.batchTensors.push_back(i);
  }
  return r;
}

Value seqView(OpBuilder& b, Location loc, Value mem, Value seq) {
  if (!seq) return mem;
  auto mt = cast<MemRefType>(mem.getType());
  gpuir::Idx ix{b, loc};
  const int64_t H = mt.getDimSize(1), D = mt.getDimSize(3), dyn = ShapedType::kDynamic;
  auto layout = StridedLayoutAttr::get(b.getContext(), 0, {dyn, dyn, D, 1});
  auto vt = MemRefType::get({mt.getDimSize(0), H, dyn, D}, mt.getElementType(), layout, mt.getMemorySpace());
  Value headStride = ix.mul(seq, D);
  Value batchStride = ix.mul(headStride, H);
  return memref::ReinterpretCastOp::create(b, loc, vt, mem, OpFoldResult(b.getIndexAttr(0)),
                                           ArrayRef<OpFoldResult>{b.getIndexAttr(mt.getDimSize(0)), b.getIndexAttr(H), seq, b.getIndexAttr(D)},
                                           ArrayRef<OpFoldResult>{batchStride, headStride, b.getIndexAttr(D), b.getIndexAttr(1)})
      .getResult();
}

static Status buildSimt(const SimtAttnPlan& p, AttnModule& m, GpuPlan& plan, const TargetDesc& t, const RuntimeDims& rt) {
  MLIRContext* ctx = m.b.getContext();
  OpBuilder& b = m.b;
  Location loc = m.loc;
  Value Q = m.q, K = m.k, V = m.v, O = m.o, sizes = m.sizes;
  Builder e(b, loc, p);
  gpuir::Idx& ix = e.ix_;
  Type et = mlirType(b, p.dtype), f32 = b.getF32Type();
  auto wg = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  auto wgBuf = [&](ArrayRef<int64_t> shape, Type t) {
    return memref::AllocOp::create(b, loc, MemRefType::get(shape, t, MemRefLayoutAttrInterface(), wg), b.getI64IntegerAttr(16)).getResult();
  };
  const int64_t VW = p.VW, BK = p.BK;
  VectorType vEt = VectorType::get({VW}, et), vF = VectorType::get({VW}, f32), vBK = VectorType::get({BK}, f32);

  gpuir::forall(b, loc, {p.B, p.H, p.NQB}, gpuir::Level::Block);
  Block* blk = b.getInsertionBlock();
  Value bi = blk->getArgument(0), h = blk->getArgument(1), qb = blk->getArgument(2);
  // Runtime sizes, read inside the launch: the length bounds what the compiled SQ / SKV did.
  Value seqV = rt.m ? gemm::loadSize(b, loc, sizes, 0) : Value();
  Value sqV = seqV ? seqV : ix.c(p.SQ), skvV = seqV ? seqV : ix.c(p.SKV);
  Value nkbV = seqV ? ix.div(ix.add(seqV, BK - 1), BK) : ix.c(p.NKB);
  Value batchOk;
  if (rt.batch) {
    Value nb = gemm::loadSize(b, loc, sizes, 1);
    batchOk = ix.lt(bi, nb);
    bi = ix.min(bi, ix.add(nb, -1));
  }
  Q = seqView(b, loc, Q, seqV), K = seqView(b, loc, K, seqV), V = seqView(b, loc, V, seqV), O = seqView(b, loc, O, seqV);
  Value q0 = ix.mul(qb, p.BQ);
  Value hk = ix.div(h, p.G);
  Value Ks = wgBuf({BK, p.DP}, et), Vs = wgBuf({BK, p.DP}, et);
  Value Acc = wgBuf({p.DCS, p.T, VW}, f32), Ms = wgBuf({p.T}, f32), Ls = wgBuf({p.T}, f32);
  Value Sp = p.DSPLIT > 1 ? wgBuf({p.DSPLIT, p.BQ, BK}, f32) : Value();
  // A forall over the block's threads, the builder left inside it: thread t = (row r, slice sl).
  auto threadsOpen = [&](const std::function<void(Value t, Value r, Value sl)>& body) {
    gpuir::forall(b, loc, {p.T}, gpuir::Level::Thread);
    Value t = b.getInsertionBlock()->getArgument(0);
    body(t, ix.div(t, p.DSPLIT), p.DSPLIT > 1 ? ix.rem(t, p.DSPLIT) : ix.c(0));
  };
  auto threads = [&](const std::function<void(Value t, Value r, Value sl)>& body) {
    OpBuilder::InsertionGuard g(b);
    threadsOpen(body);
  };
  auto load = [&](Value mem, ValueRange idx, VectorType vt) { return vector::LoadOp::create(b, loc, vt, mem, idx).getResult(); };

  // ---- init per-thread state
  threads([&](Value t, Value, Value) {
    memref::StoreOp::create(b, loc, e.f(-1e30f, f32), Ms, ValueRange{t});
    memref::StoreOp::create(b, loc, e.f(0.0f, f32), Ls, ValueRange{t});
    for (int64_t cc = 0; cc < p.DCS; ++cc)
      vector::StoreOp::create(b, loc, e.f(0.0f, vF), Acc, ValueRange{ix.c(cc), t, ix.c(0)});
  });
  // ---- key blocks; causal: up to the block holding the last visible key of the block's last row
  Value kbEnd = nkbV;
  if (p.causal) {
    Value lastRow = ix.min(ix.add(q0, p.BQ - 1), ix.add(sqV, -1));
    kbEnd = ix.min(ix.add(ix.div(ix.add(lastRow, p.off), BK), 1), nkbV);
  }
  // partial scores of row r over the chunks [c0, c0 + n) of head_dim: vector<BK>
  auto partialScores = [&](Value r, Value c0, int64_t n) {
    Value qr = ix.min(ix.add(q0, r), ix.add(sqV, -1));
    Value qs = e.f(float(p.qscale), vF);
    auto loop = scf::ForOp::create(b, loc, c0, ix.add(c0, n), ix.c(1), ValueRange{e.f(0.0f, vBK)});
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(loop.getBody());
    Value dc = loop.getInductionVar(), col = ix.mul(dc, VW);
    Value q = e.mul(e.toF32(load(Q, ValueRange{bi, h, qr, col}, vEt)), qs);
    SmallVector<Value> sj;
    for (int64_t j = 0; j < BK; ++j) {
      Value kv = e.toF32(load(Ks, ValueRange{ix.c(j), col}, vEt));
      sj.push_back(vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD, e.mul(q, kv), Value(), arith::FastMathFlags::contract));
    }
    Value fe = vector::FromElementsOp::create(b, loc, vBK, sj);
    scf::YieldOp::create(b, loc, ValueRange{e.add(loop.getRegionIterArgs()[0], fe)});
    return loop.getResult(0);
  };
  // The SIMT steps: the state lives in workgroup memory, a thread's row is whole in its registers
  // (no lanes to reduce over); scores, softmax and P·V run in one forall over the threads.
  AttnSteps steps;
  steps.init = [] { return SmallVector<Value>(); };
  steps.in = [&](AttnBlock& blk, Value) {
    Value k0 = ix.mul(blk.kb, BK);
    blk.k0 = k0;
    // cooperative copy: chunk e = i*T + t -> row e / DC, chunk e % DC (consecutive threads read
    // consecutive VW-element chunks of a row); rows past Skv repeat the last key (masked below)
    threads([&](Value t, Value, Value) {
      forEachChunk(ix, t, p.T, BK, p.DC, [&](Value r, Value j, Value) {
        Value col = ix.mul(j, VW);
        Value g = ix.min(ix.add(k0, r), ix.add(skvV, -1));
        vector::StoreOp::create(b, loc, load(K, ValueRange{bi, hk, g, col}, vEt), Ks, ValueRange{r, col});
        vector::StoreOp::create(b, loc, load(V, ValueRange{bi, hk, g, col}, vEt), Vs, ValueRange{r, col});
      });
    });
  };
  Value thr, row, slice, valid;  // the open forall's thread, its row and head_dim slice
  OpBuilder::InsertPoint afterThreads;
  steps.s = [&](AttnBlock& blk) {
    if (p.DSPLIT > 1) {
      threads([&](Value, Value r, Value sl) {
        Value sc = partialScores(r, ix.mul(sl, p.DCS), p.DCS);
        vector::StoreOp::create(b, loc, sc, Sp, ValueRange{sl, r, ix.c(0)});
      });
    }
    afterThreads = b.saveInsertionPoint();
    threadsOpen([&](Value t, Value r, Value sl) { thr = t, row = r, slice = sl; });
    Value r = row, sv;
    if (p.DSPLIT == 1) {
      sv = partialScores(r, ix.c(0), p.DC);
    } else {
      sv = load(Sp, ValueRange{ix.c(0), r, ix.c(0)}, vBK);
      for (int64_t x = 1; x < p.DSPLIT; ++x) sv = e.add(sv, load(Sp, ValueRange{ix.c(x), r, ix.c(0)}, vBK));
    }
    blk.s = {sv};
  };
  steps.sm = [&](AttnBlock& blk, ValueRange) {
    Value t = thr, r = row, sv = blk.s[0];
    // key j of the block is visible when k0 + j < Skv and (causal) k0 + j <= q0 + r + off
    valid = Value();
    bool ragged = seqV || p.SKV % BK != 0;
    if (ragged || p.causal) {
      auto vi = VectorType::get({BK}, b.getIndexType());
      SmallVector<int64_t> iota(static_cast<size_t>(BK), int64_t(0));
      for (int64_t j = 0; j < BK; ++j) iota[size_t(j)] = j;
      Value io = arith::ConstantOp::create(b, loc, vi, b.getIndexVectorAttr(iota));
      Value kid = arith::AddIOp::create(b, loc, io, vector::BroadcastOp::create(b, loc, vi, blk.k0));
      auto cmp = [&](arith::CmpIPredicate pr, Value lim) {
        return arith::CmpIOp::create(b, loc, pr, kid, vector::BroadcastOp::create(b, loc, vi, lim)).getResult();
      };
      if (ragged) valid = cmp(arith::CmpIPredicate::slt, skvV);
      if (p.causal) {
        Value lim = ix.add(ix.add(q0, r), p.off);
        Value cv = cmp(arith::CmpIPredicate::sle, lim);
        valid = valid ? arith::AndIOp::create(b, loc, valid, cv).getResult() : cv;
      }
      sv = arith::SelectOp::create(b, loc, valid, sv, e.f(-1e30f, vBK));
    }
    Value mx = vector::ReductionOp::create(b, loc, vector::CombiningKind::MAXNUMF, sv, Value(), arith::FastMathFlags::contract);
    Value mo = memref::LoadOp::create(b, loc, Ms, ValueRange{t});
    Value mn = e.max(mo, mx);
    Value pv = e.exp2(e.sub(sv, e.bcast(mn, vBK)));
    if (valid) pv = arith::SelectOp::create(b, loc, valid, pv, e.f(0.0f, vBK));
    Value rs = vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD, pv, Value(), arith::FastMathFlags::contract);
    Value al = e.exp2(e.sub(mo, mn));
    Value lo = memref::LoadOp::create(b, loc, Ls, ValueRange{t});
    memref::StoreOp::create(b, loc, e.fma(lo, al, rs), Ls, ValueRange{t});
    memref::StoreOp::create(b, loc, mn, Ms, ValueRange{t});
    blk.p = {pv};
    blk.alpha = {al};
  };
  steps.acc = [&](AttnBlock& blk, ValueRange) {
    Value t = thr, sl = slice;
    Value alb = e.bcast(blk.alpha[0], vF);
    SmallVector<Value> pb;
    for (int64_t j = 0; j < BK; ++j) pb.push_back(e.bcast(vector::ExtractOp::create(b, loc, blk.p[0], j), vF));
    gpuir::forLoop(b, loc, ix.c(0), ix.c(p.DCS), 1, [&](Value lc) {
      Value col = ix.mul(ix.add(ix.mul(sl, p.DCS), lc), VW);
      Value a = e.mul(load(Acc, ValueRange{lc, t, ix.c(0)}, vF), alb);
      for (int64_t j = 0; j < BK; ++j) a = e.fma(pb[size_t(j)], e.toF32(load(Vs, ValueRange{ix.c(j), col}, vEt)), a);
      vector::StoreOp::create(b, loc, a, Acc, ValueRange{lc, t, ix.c(0)});
    });
    return SmallVector<Value>();
  };
  steps.out = [&](AttnBlock&) { b.restoreInsertionPoint(afterThreads); };
  // ---- O = Acc / L for rows < Sq
  steps.st = [&](ValueRange) {
    threads([&](Value t, Value r, Value sl) {
      Value row = ix.add(q0, r);
      gpuir::guarded(b, loc, batchOk ? ix.band(batchOk, ix.lt(row, sqV)) : ix.lt(row, sqV), [&] {
        Value inv = arith::DivFOp::create(b, loc, e.f(1.0f, f32), memref::LoadOp::create(b, loc, Ls, ValueRange{t}));
        Value invb = e.bcast(inv, vF);
        for (int64_t lc = 0; lc < p.DCS; ++lc) {
          Value col = ix.mul(ix.add(ix.mul(sl, p.DCS), lc), VW);
          Value a = e.mul(load(Acc, ValueRange{ix.c(lc), t, ix.c(0)}, vF), invb);
          vector::StoreOp::create(b, loc, e.fromF32(a, et), O, ValueRange{bi, h, row, col});
        }
      });
    });
  };
  runAttention(b, loc, kbEnd, steps);
  for (Value buf : {Ks, Vs, Acc, Ms, Ls, Sp})
    if (buf) memref::DeallocOp::create(b, loc, buf);
  b.setInsertionPointToEnd(&plan.module->getBody()->back().getRegion(0).front());
  func::ReturnOp::create(b, loc);

  plan.schedule = genericMapSchedule({p.T, 1, 1}, t.warpSize, t.smemPerBlock);
  plan.launch.addUserArgs(4, rt.any());
  return {};
}

Expected<GpuPlan> buildGpuAttention(MLIRContext* ctx, const ir::Kernel& k, const ir::Config& c, const TargetDesc& t,
                                    const RuntimeDims& rt) {
  TESSERA_TRY(checkGpuAttention(k, c, t));
  TESSERA_ASSIGN(GpuAttentionConfig cfg, readGpuAttentionConfig(c));
  const std::string& strategy = cfg.strategy;
  if (strategy == "flash-mma") return buildGpuAttentionMma(ctx, k, cfg, t, rt);
  if (rt.any() && (strategy == "flash-wgmma" || strategy == "flash-mfma"))
    return makeError(ErrorCode::Unsupported, "attention (" + strategy + "): no runtime sizes (its tiles and " +
                                                 (strategy == "flash-wgmma" ? "TMA tensor maps" : "matrix-core schedule") +
                                                 " are fixed at the compiled shape): use strategy=flash-mma or flash-simt for a shape-generic kernel");
  if (strategy == "flash-wgmma") return buildGpuAttentionWgmma(ctx, k, cfg, t);
  if (strategy == "flash-mfma") return buildGpuAttentionMfma(ctx, k, cfg, t);
  return buildAttn<SimtAttnPlan>(ctx, k, cfg, t, rt, makeSimtAttnPlan, "flash-simt", false, buildSimt);
}

}  // namespace tessera::codegen
