// Owns the Hopper tensor-core attention strategy (`flash-wgmma`, sm_90a): FlashAttention-2's forward
// with both products on wgmma m64nNk16 from shared memory, one warpgroup per 64 query rows:
//
//   Q tile -> shared (once), K/V blocks by a 2-stage cp.async ring; every tile stored in wgmma's
//   canonical 128B-swizzled layout (64-element panels of 128-byte rows, 16-byte chunk j of row r at
//   chunk j ^ (r % 8)), so one matrix descriptor per k-step reads it conflict-free
//   for each key block (causal: only up to the diagonal):
//     S = Q·Kᵀ: head_dim/16 wgmma m64n{BK}k16 (Q K-major, K K-major), committed and waited
//     scale·log2e, masks, row max over the quad, p = 2^(s - m): S's accumulators are laid out per
//     warp exactly as mma.sync's (rows g, g+8; keys 2t, 2t+1 of every 8), so flash-mma's softmax
//     P -> the warpgroup's shared panel (K-major), a proxy fence and a warpgroup barrier
//     O = O·2^(m_old - m) + P·V: BK/16 wgmma m64n{D}k16 (P K-major, V MN-major)
//   O / l stored for rows < Sq.
// P goes through shared memory (wgmma's A from registers has no MLIR 22 op; FA3 uses inline PTX
// for it), so this is FA2's structure on wgmma, not FA3's producer/consumer pipeline. Built as a
// lane-level kernel: the mapped-kernel emulator (TMA/mbarrier/wgmma side) is what checks it.
#include <cmath>

#include "codegen/gpu_loops.h"
#include "codegen/gpu_lowering.h"
#include "codegen/gpu_mma_ops.h"
#include "codegen/gpu_strategies.h"
#include "codegen/host_strategies.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace tessera::codegen {

using namespace mlir;

namespace {

struct WgmmaAttnPlan {
  int64_t B, H, HKV, G, SQ, SKV, D, off;
  bool causal;
  ir::ScalarType dtype;
  int64_t WG, BQ, BK, STAGES, NP, NQB, NKB, T;
  double qscale;
  // Byte offsets in the dynamic window (each a multiple of 1024: the swizzle atom).
  int64_t qOff() const { return 0; }
  int64_t kOff(int64_t st) const { return BQ * D * 2 + st * BK * D * 2; }
  int64_t vOff(int64_t st) const { return kOff(STAGES) + st * BK * D * 2; }
  int64_t pOff(int64_t wg) const { return vOff(STAGES) + wg * 64 * BK * 2; }
  int64_t smemBytes() const { return pOff(WG); }
};

Expected<WgmmaAttnPlan> makePlan(const ir::AttentionSpec& s, const ir::Config& c, const TargetDesc& t) {
  auto bad = [](const std::string& m) { return makeError(ErrorCode::InvalidConfig, "attention (flash-wgmma): " + m); };
  if (t.vendor != Vendor::Nvidia || !t.findMma("f16", "wgmma")) return bad("needs sm_90a (wgmma)");
  if (s.dtype != ir::ScalarType::F16 && s.dtype != ir::ScalarType::BF16) return bad("f16 or bf16 inputs only");
  if (s.head_dim % 64 || s.head_dim > 256) return bad("head_dim must be 64, 128, 192 or 256 (whole 128-byte panels)");
  WgmmaAttnPlan p;
  TESSERA_ASSIGN(p.BQ, c.getInt("BQ"));
  TESSERA_ASSIGN(p.BK, c.getInt("BK"));
  p.STAGES = 2;
  if (c.has("STAGES")) {
    TESSERA_ASSIGN(p.STAGES, c.getInt("STAGES"));
  }
  if (p.BQ != 64 && p.BQ != 128) return bad("BQ must be 64 or 128 (64 query rows per warpgroup)");
  if (p.BK != 64 && p.BK != 128) return bad("BK must be 64 or 128 (whole 128-byte panels of P)");
  if (p.STAGES != 1 && p.STAGES != 2) return bad("STAGES must be 1 or 2");
  p.B = s.batch; p.H = s.heads; p.HKV = s.heads_kv; p.G = s.heads / s.heads_kv;
  p.SQ = s.seq_q; p.SKV = s.seq_kv; p.D = s.head_dim; p.off = s.seq_kv - s.seq_q;
  p.causal = s.causal; p.dtype = s.dtype;
  p.WG = p.BQ / 64;
  p.T = 128 * p.WG;
  p.NP = p.D / 64;
  p.NQB = ceilDiv(p.SQ, p.BQ);
  p.NKB = ceilDiv(p.SKV, p.BK);
  p.qscale = s.scale / std::log(2.0);
  // O (D/2) and S (BK/2) accumulators per thread, plus P and the softmax state.
  if (p.D / 2 + p.BK / 2 > 224) return bad("O and S need " + std::to_string(p.D / 2 + p.BK / 2) + " accumulator registers per thread");
  const int64_t limit = std::max(t.smemPerBlock, t.smemPerBlockOptIn);
  if (p.smemBytes() > limit)
    return bad("needs " + std::to_string(p.smemBytes()) + " B of shared memory, the limit is " + std::to_string(limit));
  return p;
}

std::string noMapSchedule() {
  return "module attributes {transform.with_named_sequence} {\n"
         "  transform.named_sequence @map_main(%root: !transform.any_op {transform.readonly}) {\n"
         "    transform.yield\n  }\n}\n";
}

}  // namespace

Status checkGpuAttentionWgmma(const ir::Kernel& k, const ir::Config& c, const TargetDesc& t) {
  TESSERA_ASSIGN(ir::AttentionInfo info, ir::analyzeAttention(k));
  TESSERA_ASSIGN(WgmmaAttnPlan p, makePlan(info.spec, c, t));
  (void)p;
  return {};
}

Expected<GpuPlan> buildGpuAttentionWgmma(MLIRContext* ctx, const ir::Kernel& k, const ir::Config& c, const TargetDesc& t) {
  TESSERA_ASSIGN(ir::AttentionInfo info, ir::analyzeAttention(k));
  TESSERA_ASSIGN(WgmmaAttnPlan p, makePlan(info.spec, c, t));
  GpuPlan plan;
  plan.strategy = "flash-wgmma";
  plan.laneLevel = true;
  OpBuilder b(ctx);
  Location loc = b.getUnknownLoc();
  plan.module = ModuleOp::create(loc);
  std::map<std::string, Value> args;
  createKernelFunc(b, *plan.module, k, &args);
  const ir::AttentionSpec& s = info.spec;
  Value Q = args[s.q], Kg = args[s.k], Vg = args[s.v], O = args[s.o];
  MmaOps e(b, loc, p.dtype);
  gpuir::Idx& ix = e.ix_;
  Type et = e.et_, f32 = e.f32_, i64 = b.getI64Type();
  const int64_t BK = p.BK, T = p.T, D = p.D;

  auto launch = gpu::LaunchOp::create(b, loc, ix.c(p.NQB), ix.c(p.H), ix.c(p.B), ix.c(T), ix.c(1), ix.c(1),
                                      arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(int32_t(p.smemBytes()))));
  b.setInsertionPointToStart(&launch.getBody().front());
  Value qb = launch.getBlockIds().x, h = launch.getBlockIds().y, bi = launch.getBlockIds().z;
  Value tid = launch.getThreadIds().x;
  Value wg = ix.div(tid, 128), warp = ix.rem(ix.div(tid, 32), 4), lane = ix.rem(tid, 32);
  Value g = ix.div(lane, 4), tq = ix.rem(lane, 4);
  Value q0 = ix.mul(qb, p.BQ), hk = ix.div(h, p.G);
  auto wgA = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  Value dyn = gpu::DynamicSharedMemoryOp::create(
      b, loc, MemRefType::get({ShapedType::kDynamic}, b.getI8Type(), MemRefLayoutAttrInterface(), wgA));
  // One flat view in elements; tiles are addressed by swizzled element offsets.
  Value S1 = memref::ViewOp::create(b, loc, MemRefType::get({p.smemBytes() / 2}, et, MemRefLayoutAttrInterface(), wgA),
                                    dyn, ix.c(0), ValueRange{})
                 .getResult();
  // The window's shared address, for the matrix descriptors.
  Value base = arith::IndexCastOp::create(b, loc, i64, memref::ExtractAlignedPointerAsIndexOp::create(b, loc, dyn));
  // Element offset of (row r, 8-element chunk j) of a tile of `rows` rows stored as 64-wide panels.
  auto swz = [&](int64_t tileElems, int64_t rows, Value r, Value j) {
    Value panel = ix.div(j, 8), jj = ix.rem(j, 8);
    Value chunk = arith::XOrIOp::create(b, loc, jj, ix.rem(r, 8));
    return ix.add(ix.add(ix.add(ix.mul(panel, rows * 64), ix.mul(r, 64)), ix.mul(chunk, 8)), tileElems);
  };
  VectorType v8 = VectorType::get({8}, et);
  const int64_t chunksPerRow = D / 8;

  // ---- Q tile: rows past Sq repeat the last (their outputs are never stored)
  {
    const int64_t chunks = p.BQ * chunksPerRow, steps = ceilDiv(chunks, T);
    for (int64_t st = 0; st < steps; ++st) {
      Value ch = ix.add(tid, st * T);
      gpuir::guarded(b, loc, (st + 1) * T > chunks ? ix.lt(ch, chunks) : Value(), [&] {
        Value r = ix.div(ch, chunksPerRow), j = ix.rem(ch, chunksPerRow);
        Value gr = ix.min(ix.add(q0, r), p.SQ - 1);
        Value v = vector::LoadOp::create(b, loc, v8, Q, ValueRange{bi, h, gr, ix.mul(j, 8)});
        vector::StoreOp::create(b, loc, v, S1, ValueRange{swz(p.qOff() / 2, p.BQ, r, j)});
      });
    }
  }
  // ---- K/V block kb into `stage` (a runtime index): rows past Skv repeat the last key (masked)
  auto stageOff = [&](Value stage, int64_t at0, int64_t perStage) { return ix.add(ix.mul(stage, perStage / 2), at0 / 2); };
  auto copyKV = [&](Value kb, Value stage, bool async) -> Value {
    const int64_t chunks = BK * chunksPerRow, steps = ceilDiv(chunks, T);
    SmallVector<Value> tokens;
    Value k0 = ix.mul(kb, BK);
    auto tok = nvgpu::DeviceAsyncTokenType::get(ctx);
    Value kBase = stageOff(stage, p.kOff(0), BK * D * 2), vBase = stageOff(stage, p.vOff(0), BK * D * 2);
    for (int64_t st = 0; st < steps; ++st) {
      Value ch = ix.add(tid, st * T);
      Value inRange = (st + 1) * T > chunks ? ix.lt(ch, chunks) : Value();
      gpuir::guarded(b, loc, inRange, [&] {
        Value r = ix.div(ch, chunksPerRow), j = ix.rem(ch, chunksPerRow);
        Value gr = ix.min(ix.add(k0, r), p.SKV - 1);
        for (auto [src, tileBase] : {std::pair{Kg, kBase}, std::pair{Vg, vBase}}) {
          Value dst = ix.add(swz(0, BK, r, j), tileBase);
          if (async) {
            Value tk = nvgpu::DeviceAsyncCopyOp::create(b, loc, tok, S1, ValueRange{dst}, src,
                                                        ValueRange{bi, hk, gr, ix.mul(j, 8)}, b.getIndexAttr(8), Value(),
                                                        b.getUnitAttr());
            if (!inRange) tokens.push_back(tk);
          } else {
            Value v = vector::LoadOp::create(b, loc, v8, src, ValueRange{bi, hk, gr, ix.mul(j, 8)});
            vector::StoreOp::create(b, loc, v, S1, ValueRange{dst});
          }
        }
      });
    }
    if (async) return Value(nvgpu::DeviceAsyncCreateGroupOp::create(b, loc, tok, tokens).getResult());
    return Value();
  };
  auto waitCopies = [&](Value group, int64_t pending) {
    nvgpu::DeviceAsyncWaitOp::create(b, loc, group, b.getI32IntegerAttr(int32_t(pending)));
  };
  auto barrier = [&] { gpu::BarrierOp::create(b, loc); };
  // Writes of the generic proxy (stores, cp.async) made visible to wgmma's async proxy.
  auto proxyFence = [&] {
    NVVM::FenceProxyOp::create(b, loc, NVVM::ProxyKind::async_shared, NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
  };
  // A 128B-swizzle matrix descriptor at byte `offset` (i64) of the window: start >> 4 in bits 0-13,
  // LBO >> 4 in 16-29, SBO >> 4 in 32-45, swizzle mode 1 (128 B) in 62-63.
  auto i64c = [&](int64_t v) { return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v)).getResult(); };
  auto desc = [&](Value offset, int64_t lbo, int64_t sbo) {
    Value addr = arith::AddIOp::create(b, loc, base, offset);
    Value start = arith::AndIOp::create(b, loc, arith::ShRUIOp::create(b, loc, addr, i64c(4)), i64c(0x3fff));
    const int64_t hi = ((lbo >> 4) & 0x3fff) << 16 | ((sbo >> 4) & 0x3fff) << 32 | int64_t(1) << 62;
    return arith::OrIOp::create(b, loc, start, i64c(hi)).getResult();
  };
  auto toI64 = [&](Value idx) { return arith::IndexCastOp::create(b, loc, i64, idx).getResult(); };
  auto accType = [&](int64_t n) {
    return LLVM::LLVMStructType::getLiteral(ctx, SmallVector<Type>(size_t(n / 2), f32));
  };
  const NVVM::WGMMATypes wt = p.dtype == ir::ScalarType::BF16 ? NVVM::WGMMATypes::bf16 : NVVM::WGMMATypes::f16;
  auto wgmma = [&](Value acc, Value da, Value db, int64_t n, bool accumulate, bool bMnMajor) {
    return NVVM::WgmmaMmaAsyncOp::create(
               b, loc, acc.getType(), acc, da, db, NVVM::MMAShapeAttr::get(ctx, 64, int(n), 16), wt, wt,
               NVVM::WGMMATypes::f32, accumulate ? NVVM::WGMMAScaleOut::one : NVVM::WGMMAScaleOut::zero,
               NVVM::WGMMAScaleIn::one, NVVM::WGMMAScaleIn::one, NVVM::MMALayout::row,
               bMnMajor ? NVVM::MMALayout::row : NVVM::MMALayout::col, NVVM::MMAIntOverflowAttr())
        .getResult();
  };
  auto structOf = [&](Type st, ArrayRef<Value> vals) {
    Value sv = LLVM::PoisonOp::create(b, loc, st);
    for (size_t i = 0; i < vals.size(); ++i) sv = LLVM::InsertValueOp::create(b, loc, sv, vals[i], ArrayRef<int64_t>{int64_t(i)});
    return sv;
  };
  auto fieldsOf = [&](Value sv, int64_t n) {
    SmallVector<Value> out;
    for (int64_t i = 0; i < n; ++i) out.push_back(LLVM::ExtractValueOp::create(b, loc, sv, ArrayRef<int64_t>{i}));
    return out;
  };

  barrier();
  // ---- key blocks: causal stops at the block of the last visible key of the block's last row
  Value kbEnd = ix.c(p.NKB);
  if (p.causal) {
    Value lastRow = ix.min(ix.add(q0, p.BQ - 1), p.SQ - 1);
    kbEnd = arith::MinSIOp::create(b, loc, ix.add(ix.div(ix.add(lastRow, p.off), BK), 1), ix.c(p.NKB));
  }
  const bool async = p.STAGES == 2;
  if (async) (void)copyKV(ix.c(0), ix.c(0), true);
  Type oT = accType(D), sT = accType(BK);
  SmallVector<Value> zeros(size_t(D / 2), e.f(0.0f));
  SmallVector<Value> init = {structOf(oT, zeros), e.f(-1e30f), e.f(-1e30f), e.f(0.0f), e.f(0.0f)};
  auto loop = scf::ForOp::create(b, loc, ix.c(0), kbEnd, ix.c(1), init);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value kb = loop.getInductionVar();
    ValueRange carried = loop.getRegionIterArgs();
    Value stage = ix.c(0);
    if (async) {
      stage = ix.rem(kb, 2);
      Value next = arith::MinSIOp::create(b, loc, ix.add(kb, 1), ix.add(kbEnd, -1));
      Value group = copyKV(next, ix.rem(ix.add(kb, 1), 2), true);
      waitCopies(group, 1);
      barrier();
    } else {
      barrier();
      (void)copyKV(kb, stage, false);
      barrier();
    }
    proxyFence();
    Value k0 = ix.mul(kb, BK);
    Value kByte = toI64(ix.add(ix.mul(stage, BK * D * 2), p.kOff(0)));
    Value vByte = toI64(ix.add(ix.mul(stage, BK * D * 2), p.vOff(0)));
    Value qByte = toI64(ix.add(ix.mul(wg, 64 * 128), p.qOff()));
    // S = Q Kᵀ over head_dim in k16 steps: Q and K K-major, 64-element panels of 128-byte rows.
    NVVM::WgmmaFenceAlignedOp::create(b, loc);
    Value sAcc = structOf(sT, SmallVector<Value>(size_t(BK / 2), e.f(0.0f)));
    for (int64_t kk = 0; kk < D / 16; ++kk) {
      const int64_t inPanel = (kk % 4) * 32;  // the k16 step's 32 bytes within the 128-byte row
      Value da = desc(arith::AddIOp::create(b, loc, qByte, i64c((kk / 4) * p.BQ * 128 + inPanel)), p.BQ * 128, 1024);
      Value db = desc(arith::AddIOp::create(b, loc, kByte, i64c((kk / 4) * BK * 128 + inPanel)), BK * 128, 1024);
      sAcc = wgmma(sAcc, da, db, BK, kk > 0, false);
    }
    NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
    NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 0);
    SmallVector<Value> sv = fieldsOf(sAcc, BK / 2);
    // Scale, mask (keys past Skv; causal: key > row + off), row maxima over the quad. Register i:
    // row g + 8((i%4)/2) of this warp's 16, key 8(i/4) + 2t + i%2 (mma.sync's layout per 8 keys).
    Value rowBase = ix.add(ix.add(ix.add(q0, ix.mul(wg, 64)), ix.mul(warp, 16)), g);
    Value qs = e.f(float(p.qscale)), neg = e.f(-1e30f);
    std::vector<Value> valid(size_t(BK / 2));
    Value rowMax[2] = {neg, neg};
    for (int64_t i = 0; i < BK / 2; ++i) {
      const int c = int(i % 4);
      Value key = ix.add(ix.add(k0, ix.mul(tq, 2)), (i / 4) * 8 + c % 2);
      Value ok;
      if (p.SKV % BK) ok = ix.lt(key, p.SKV);
      if (p.causal) {
        Value lim = ix.add(ix.add(rowBase, 8 * (c / 2)), p.off);
        Value cv = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle, key, lim);
        ok = ok ? ix.band(ok, cv) : cv;
      }
      Value x = e.mul(sv[size_t(i)], qs);
      if (ok) x = arith::SelectOp::create(b, loc, ok, x, neg);
      valid[size_t(i)] = ok;
      sv[size_t(i)] = x;
      rowMax[c / 2] = e.max(rowMax[c / 2], x);
    }
    Value mOld[2] = {carried[1], carried[2]}, lOld[2] = {carried[3], carried[4]};
    Value mNew[2], alpha[2], lNew[2];
    for (int r = 0; r < 2; ++r) {
      Value m = e.max(rowMax[r], e.shflXor(rowMax[r], 1));
      m = e.max(m, e.shflXor(m, 2));
      mNew[r] = e.max(mOld[r], m);
      alpha[r] = e.exp2(e.sub(mOld[r], mNew[r]));
      lNew[r] = e.mul(lOld[r], alpha[r]);
    }
    // P = 2^(s - m) (masked keys exactly 0) into this warpgroup's shared panels, K-major.
    Value pBase = ix.add(ix.mul(wg, 64 * BK), p.pOff(0) / 2);
    Value wRow = ix.add(ix.mul(warp, 16), g);
    VectorType v2 = VectorType::get({2}, et);
    for (int64_t i = 0; i < BK / 2; i += 2) {
      Value pv[2];
      for (int64_t u = 0; u < 2; ++u) {
        const int c = int((i + u) % 4);
        Value x = e.exp2(e.sub(sv[size_t(i + u)], mNew[c / 2]));
        if (Value ok = valid[size_t(i + u)]) x = arith::SelectOp::create(b, loc, ok, x, e.f(0.0f));
        lNew[c / 2] = e.add(lNew[c / 2], x);
        pv[u] = x;
      }
      const int c = int(i % 4);
      Value r = ix.add(wRow, 8 * (c / 2));
      Value j = ix.c(i / 4);  // 8-key chunk of this register pair
      Value at = ix.add(ix.add(swz(0, 64, r, j), pBase), ix.mul(tq, 2));
      Value pair = vector::FromElementsOp::create(b, loc, v2, ValueRange{arith::TruncFOp::create(b, loc, et, pv[0]),
                                                                          arith::TruncFOp::create(b, loc, et, pv[1])});
      vector::StoreOp::create(b, loc, pair, S1, ValueRange{at});
    }
    proxyFence();
    // The warpgroup's four warps wrote P's 64 rows: named barrier 1 + wg over its 128 threads.
    Value barId = arith::AddIOp::create(b, loc, arith::IndexCastOp::create(b, loc, b.getI32Type(), wg),
                                        arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(1)));
    NVVM::BarrierOp::create(b, loc, Type(), barId, arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(128)),
                            NVVM::BarrierReductionAttr(), Value());
    // O = O * alpha + P V over keys in k16 steps: P K-major, V MN-major (head_dim contiguous).
    SmallVector<Value> ov = fieldsOf(carried[0], D / 2);
    for (int64_t i = 0; i < D / 2; ++i) ov[size_t(i)] = e.mul(ov[size_t(i)], alpha[(i % 4) / 2]);
    Value oAcc = structOf(oT, ov);
    Value pByte = toI64(ix.add(ix.mul(wg, 64 * BK * 2), p.pOff(0)));
    NVVM::WgmmaFenceAlignedOp::create(b, loc);
    for (int64_t kk = 0; kk < BK / 16; ++kk) {
      Value da = desc(arith::AddIOp::create(b, loc, pByte, i64c((kk / 4) * 64 * 128 + (kk % 4) * 32)), 64 * 128, 1024);
      Value db = desc(arith::AddIOp::create(b, loc, vByte, i64c(kk * 16 * 128)), BK * 128, 1024);
      oAcc = wgmma(oAcc, da, db, D, true, true);
    }
    NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
    NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 0);
    barrier();  // the next iteration's copies overwrite the stage read here
    scf::YieldOp::create(b, loc, ValueRange{oAcc, mNew[0], mNew[1], lNew[0], lNew[1]});
  }
  if (async) {
    auto tok = nvgpu::DeviceAsyncTokenType::get(ctx);
    Value none = nvgpu::DeviceAsyncCreateGroupOp::create(b, loc, tok, ValueRange{}).getResult();
    waitCopies(none, 0);
  }
  // ---- O / l for rows < Sq (l summed over the quad)
  ValueRange res = loop.getResults();
  SmallVector<Value> of = fieldsOf(res[0], D / 2);
  Value rowBase = ix.add(ix.add(ix.add(q0, ix.mul(wg, 64)), ix.mul(warp, 16)), g);
  VectorType v2 = VectorType::get({2}, et);
  for (int r = 0; r < 2; ++r) {
    Value l = res[size_t(3 + r)];
    l = e.add(l, e.shflXor(l, 1));
    l = e.add(l, e.shflXor(l, 2));
    Value inv = arith::DivFOp::create(b, loc, e.f(1.0f), l);
    Value row = ix.add(rowBase, 8 * r);
    gpuir::guarded(b, loc, ix.lt(row, p.SQ), [&] {
      for (int64_t d = 0; d < D / 8; ++d) {
        Value lo = e.mul(of[size_t(4 * d + 2 * r)], inv), hi = e.mul(of[size_t(4 * d + 2 * r + 1)], inv);
        Value v = vector::FromElementsOp::create(b, loc, v2, ValueRange{arith::TruncFOp::create(b, loc, et, lo),
                                                                        arith::TruncFOp::create(b, loc, et, hi)});
        vector::StoreOp::create(b, loc, v, O, ValueRange{bi, h, row, ix.add(ix.mul(tq, 2), d * 8)});
      }
    });
  }
  gpu::TerminatorOp::create(b, loc);
  b.setInsertionPointAfter(launch);
  func::ReturnOp::create(b, loc);

  plan.schedule = noMapSchedule();
  plan.hasPre = false;
  for (size_t i = 0; i < 4; ++i) {
    GpuArg a;
    a.tensor = int(i);
    plan.launch.args.push_back(a);
  }
  return plan;
}

}  // namespace tessera::codegen
