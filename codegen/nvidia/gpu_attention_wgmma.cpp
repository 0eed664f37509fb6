// Owns the Hopper tensor-core attention strategy (`flash-wgmma`, sm_90a): FlashAttention's forward
// with both products on wgmma m64nNk16, one consumer warpgroup per 64 query rows, in two pipelines
// (knob PIPE):
//
//   fa2: every warpgroup computes; Q once and K/V blocks by a 2-stage cp.async ring; P through
//        shared memory (wgmma's A operand by descriptor).
//   fa3: FlashAttention-3's structure: a producer warpgroup (setmaxnreg.dec) whose one thread loads
//        Q and the K/V blocks by TMA into a STAGES-deep ring of mbarriers (full: the bytes landed;
//        empty: every consumer warp is done with the slot), consumer warpgroups (setmaxnreg.inc)
//        that never copy or wait on a block barrier, and P·V with P straight from the registers
//        S's accumulators left it in (register-A wgmma: inline PTX, codegen/nvidia/wgmma_ptx.h).
//
// Every tile sits in wgmma's canonical 128B-swizzled layout (64-element panels of 128-byte rows,
// 16-byte chunk j of row r at chunk j ^ (r % 8)), which is also what a TMA box of 64 x rows with
// 128-byte swizzle writes, so one matrix descriptor per k-step reads it conflict-free. Per key
// block (causal: only up to the diagonal): S = Q·Kᵀ (head_dim/16 wgmma m64n{BK}k16, Q and K
// K-major); scale·log2e, masks, row max over the quad, p = 2^(s - m) (S's accumulators are laid out
// per warp exactly as mma.sync's, so flash-mma's softmax is reused); O = O·2^(m_old - m) + P·V
// (BK/16 wgmma m64n{D}k16, V MN-major); O / l stored for rows < Sq. Built as a lane-level kernel:
// the mapped-kernel emulator (TMA/mbarrier/wgmma side, register-A wgmma included) checks it.
#include <cmath>

#include "codegen/gpu_attention_skeleton.h"
#include "codegen/gpu_loops.h"
#include "codegen/gpu_lowering.h"
#include "codegen/gpu_strategies.h"
#include "codegen/kernel_func.h"
#include "codegen/nvidia/gpu_attention_ring.h"
#include "codegen/nvidia/gpu_mma_ops.h"
#include "codegen/nvidia/gpu_wgmma.h"
#include "codegen/nvidia/wgmma_ptx.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace tessera::codegen {

using namespace mlir;

namespace {

}  // namespace

static Status buildWgmma(const WgmmaAttnPlan& p, AttnModule& m, GpuPlan& plan, const TargetDesc& t, const RuntimeDims& rt) {
  MLIRContext* ctx = m.b.getContext();
  OpBuilder& b = m.b;
  Location loc = m.loc;
  func::FuncOp fn = m.fn;
  if (p.fa3)  // the tensor maps of Q, K and V (128 bytes each, encoded by the host per launch)
    for (int i = 0; i < 3; ++i)
      if (failed(fn.insertArgument(fn.getNumArguments(), MemRefType::get({16}, b.getI64Type()), DictionaryAttr(), b.getUnknownLoc())))
        return makeError(ErrorCode::Internal, "attention (flash-wgmma): cannot add the tensor-map arguments");
  Value Q = m.q, Kg = m.k, Vg = m.v, O = m.o;
  MmaOps e(b, loc, p.dtype);
  gpuir::Idx& ix = e.ix_;
  Type et = e.et_, f32 = e.f32_, i64 = b.getI64Type();
  const int64_t BK = p.BK, T = p.T, D = p.D;

  auto launch = attnLaunch(b, loc, p, T, p.smemBytes());
  // fa3, causal: the heaviest query blocks first (enterAttnLaunch).
  const AttnBlockIds ids = enterAttnLaunch(b, loc, launch, p.H, p.fa3 && p.causal);
  Value qb = ids.qb, h = ids.h, bi = ids.bi;
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

  // ---- Q tile (fa2; fa3's producer loads it by TMA): rows past Sq repeat the last (their outputs are never stored)
  if (!p.fa3) {
    forEachChunk(ix, tid, T, p.BQ, chunksPerRow, [&](Value r, Value j, Value) {
      Value gr = ix.min(ix.add(q0, r), p.SQ - 1);
      Value v = vector::LoadOp::create(b, loc, v8, Q, ValueRange{bi, h, gr, ix.mul(j, 8)});
      vector::StoreOp::create(b, loc, v, S1, ValueRange{swz(p.qOff() / 2, p.BQ, r, j)});
    });
  }
  // ---- K/V block kb into `stage` (a runtime index): rows past Skv repeat the last key (masked)
  auto stageOff = [&](Value stage, int64_t at0, int64_t perStage) { return ix.add(ix.mul(stage, perStage / 2), at0 / 2); };
  Value kBase, vBase;
  KvRing ring(
      b, loc, tid, T, BK, D, p.dtype, p.STAGES,
      [&](Value, Value r, Value j, Value k0, const KvRing::Put& put) {
        Value gr = ix.min(ix.add(k0, r), p.SKV - 1);
        for (auto [src, tileBase] : {std::pair{Kg, kBase}, std::pair{Vg, vBase}}) {
          Value dst = ix.add(swz(0, BK, r, j), tileBase);
          put(S1, ValueRange{dst}, src, ValueRange{bi, hk, gr, ix.mul(j, 8)});
        }
      },
      [&](Value stage) {
        kBase = stageOff(stage, p.kOff(0), BK * D * 2);
        vBase = stageOff(stage, p.vOff(0), BK * D * 2);
      });
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

  const MmaOps::Shape shape{p.SQ, p.SKV, p.off, p.BQ, BK, p.NKB, p.causal, p.qscale};
  Type oT = accType(D), sT = accType(BK);
  // S = Q Kᵀ over head_dim in k16 steps: Q and K K-major, 64-element panels of 128-byte rows.
  // The wgmmas of S (`fence`: a wgmma.fence first); the accumulators, in flight.
  auto issueScores = [&](Value wgi, Value stage, bool fence) {
    Value kByte = toI64(ix.add(ix.mul(stage, BK * D * 2), p.kOff(0)));
    Value qByte = toI64(ix.add(ix.mul(wgi, 64 * 128), p.qOff()));
    if (fence) NVVM::WgmmaFenceAlignedOp::create(b, loc);
    Value sAcc = structOf(sT, SmallVector<Value>(size_t(BK / 2), e.f(0.0f)));
    for (int64_t kk = 0; kk < D / 16; ++kk) {
      const int64_t inPanel = (kk % 4) * 32;  // the k16 step's 32 bytes within the 128-byte row
      Value da = desc(arith::AddIOp::create(b, loc, qByte, i64c((kk / 4) * p.BQ * 128 + inPanel)), p.BQ * 128, 1024);
      Value db = desc(arith::AddIOp::create(b, loc, kByte, i64c((kk / 4) * BK * 128 + inPanel)), BK * 128, 1024);
      sAcc = wgmma(sAcc, da, db, BK, kk > 0, false);
    }
    NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
    return sAcc;
  };
  auto scores = [&](Value wgi, Value stage) {
    Value sAcc = issueScores(wgi, stage, true);
    NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 0);
    return fieldsOf(sAcc, BK / 2);
  };
  // V's descriptor for the k16 step kk of P·V (V MN-major: head_dim contiguous).
  auto vDesc = [&](Value stage, int64_t kk) {
    Value vByte = toI64(ix.add(ix.mul(stage, BK * D * 2), p.vOff(0)));
    return desc(arith::AddIOp::create(b, loc, vByte, i64c(kk * 16 * 128)), BK * 128, 1024);
  };
  // This thread's first query row (g of its warp's 16 in its warpgroup's 64); the rows' O / l for
  // rows < Sq from the key loop's results (O, m0, m1, l0, l1).
  auto rowBaseOf = [&] { return ix.add(ix.add(ix.add(q0, ix.mul(wg, 64)), ix.mul(warp, 16)), g); };
  auto storeO = [&](ValueRange res) {
    Value lFinal[2] = {res[3], res[4]};
    e.storeNormalized(shape, fieldsOf(res[0], D / 2), lFinal, O, bi, h, rowBaseOf(), tq);
  };
  // Closes the launch and the function; the user's four tensors are the first launch arguments.
  auto finishPlan = [&] {
    closeAttnLaunch(b, loc, launch, plan);
    plan.launch.addUserArgs(4, false);
  };
  // The steps both pipelines share. The carried state is (O, m0, m1, l0, l1); S's accumulators are
  // laid out per warp as mma.sync's (register i: row g + 8((i%4)/2) of this warp's 16, key
  // 8(i/4) + 2t + i%2), so flash-mma's softmax serves.
  AttnSteps steps;
  steps.init = [&] {
    SmallVector<Value> zeros(size_t(D / 2), e.f(0.0f));
    return SmallVector<Value>{structOf(oT, zeros), e.f(-1e30f), e.f(-1e30f), e.f(0.0f), e.f(0.0f)};
  };
  steps.sm = [&](AttnBlock& blk, ValueRange carried) {
    Value rowBase = rowBaseOf();
    Value mOld[2] = {carried[1], carried[2]}, lOld[2] = {carried[3], carried[4]};
    if (!blk.k0) blk.k0 = ix.mul(blk.kb, BK);
    MmaOps::Softmax sm = e.softmax(shape, blk.s, blk.k0, tq, rowBase, mOld, lOld, blk.masked);
    blk.m = {sm.mNew[0], sm.mNew[1]};
    blk.alpha = {sm.alpha[0], sm.alpha[1]};
    blk.l = {sm.lNew[0], sm.lNew[1]};
    blk.p = sm.p;
  };
  // O * alpha, as the accumulator struct P·V adds to.
  auto rescaledO = [&](ValueRange carried, const AttnBlock& blk) {
    SmallVector<Value> ov = fieldsOf(carried[0], D / 2);
    for (int64_t i = 0; i < D / 2; ++i) ov[size_t(i)] = e.mul(ov[size_t(i)], blk.alpha[(i % 4) / 2]);
    return structOf(oT, ov);
  };
  auto nextState = [](Value oAcc, const AttnBlock& blk) { return SmallVector<Value>{oAcc, blk.m[0], blk.m[1], blk.l[0], blk.l[1]}; };
  steps.st = [&](ValueRange res) { storeO(res); };
  if (p.fa3) {
    // ---- FlashAttention-3's pipeline: the last warpgroup produces, the others consume.
    auto mapType = [&](int64_t rows) {
      return nvgpu::TensorMapDescriptorType::get(ctx, MemRefType::get({1, rows, 64}, et, MemRefLayoutAttrInterface(), wgA),
                                                 nvgpu::TensorMapSwizzleKind::SWIZZLE_128B, nvgpu::TensorMapL2PromoKind::L2PROMO_256B,
                                                 nvgpu::TensorMapOOBKind::OOB_ZERO, nvgpu::TensorMapInterleaveKind::INTERLEAVE_NONE);
    };
    auto mapArg = [&](unsigned arg, int64_t rows) {
      Value at = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, fn.getArgument(arg));
      Value asInt = arith::IndexCastOp::create(b, loc, i64, at);
      Value ptr = LLVM::IntToPtrOp::create(b, loc, LLVM::LLVMPointerType::get(ctx), asInt);
      return UnrealizedConversionCastOp::create(b, loc, TypeRange{mapType(rows)}, ValueRange{ptr}).getResult(0);
    };
    const unsigned firstMap = fn.getNumArguments() - 3;
    Value tmQ = mapArg(firstMap, p.BQ), tmK = mapArg(firstMap + 1, BK), tmV = mapArg(firstMap + 2, BK);
    Value full = nvgpu::MBarrierCreateOp::create(b, loc, nvgpu::MBarrierGroupType::get(ctx, wgA, unsigned(p.STAGES)));
    Value empty = nvgpu::MBarrierCreateOp::create(b, loc, nvgpu::MBarrierGroupType::get(ctx, wgA, unsigned(p.STAGES)));
    Value qBar = nvgpu::MBarrierCreateOp::create(b, loc, nvgpu::MBarrierGroupType::get(ctx, wgA, 1));
    auto ifThen = [&](Value cond, const std::function<void()>& body) { gpuir::guarded(b, loc, cond, body); };
    auto eq = [&](Value x, Value y) { return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, x, y).getResult(); };
    auto parity = [&](Value round) { return arith::IndexCastOp::create(b, loc, b.getI1Type(), ix.rem(round, 2)).getResult(); };
    // A slot is full after the producer's one arrival and its bytes, empty after one arrival of
    // every consumer warp.
    ifThen(eq(tid, ix.c(0)), [&] {
      for (int64_t st = 0; st < p.STAGES; ++st) {
        nvgpu::MBarrierInitOp::create(b, loc, full, ix.c(1), ix.c(st), Value());
        nvgpu::MBarrierInitOp::create(b, loc, empty, ix.c(4 * p.WG), ix.c(st), Value());
      }
      nvgpu::MBarrierInitOp::create(b, loc, qBar, ix.c(1), ix.c(0), Value());
      NVVM::FenceMbarrierInitOp::create(b, loc);
    });
    barrier();
    Value kbEnd = e.keyBlocksEnd(shape, q0);
    auto tileView = [&](Value byteOff, int64_t rows) {
      return memref::ViewOp::create(b, loc, MemRefType::get({1, rows, 64}, et, MemRefLayoutAttrInterface(), wgA), dyn, byteOff,
                                    ValueRange{})
          .getResult();
    };
    auto role = scf::IfOp::create(b, loc, eq(wg, ix.c(p.WG)), /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(role.thenBlock()->getTerminator());
      // Producer: gives its registers back; one thread keeps the ring full.
      NVVM::SetMaxRegisterOp::create(b, loc, uint32_t(p.producerRegs), NVVM::SetMaxRegisterAction::decrease);
      ifThen(eq(tid, ix.c(128 * p.WG)), [&] {
        Value qz = ix.add(ix.mul(bi, p.H), h), kz = ix.add(ix.mul(bi, p.HKV), hk);
        nvgpu::MBarrierArriveExpectTxOp::create(b, loc, qBar, ix.c(p.BQ * D * 2), ix.c(0), Value());
        for (int64_t pn = 0; pn < p.NP; ++pn)
          nvgpu::TmaAsyncLoadOp::create(b, loc, tileView(ix.c(p.qOff() + pn * p.BQ * 128), p.BQ), qBar, tmQ,
                                        ValueRange{ix.c(pn * 64), q0, qz}, ix.c(0), Value(), Value());
        auto loop = scf::ForOp::create(b, loc, ix.c(0), kbEnd, ix.c(1));
        OpBuilder::InsertionGuard inner(b);
        b.setInsertionPoint(loop.getBody()->getTerminator());
        Value kb = loop.getInductionVar();
        Value slot = ix.rem(kb, p.STAGES), round = ix.div(kb, p.STAGES);
        // A slot's second and later fills wait until every consumer warp released its last use.
        ifThen(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, kb, ix.c(p.STAGES)), [&] {
          nvgpu::MBarrierTryWaitParityOp::create(b, loc, empty, parity(ix.add(round, -1)), ix.c(10000000), slot);
        });
        nvgpu::MBarrierArriveExpectTxOp::create(b, loc, full, ix.c(2 * BK * D * 2), slot, Value());
        Value k0 = ix.mul(kb, BK);
        for (int64_t pn = 0; pn < p.NP; ++pn) {
          Value kAt = ix.add(ix.mul(slot, BK * D * 2), p.kOff(0) + pn * BK * 128);
          Value vAt = ix.add(ix.mul(slot, BK * D * 2), p.vOff(0) + pn * BK * 128);
          nvgpu::TmaAsyncLoadOp::create(b, loc, tileView(kAt, BK), full, tmK, ValueRange{ix.c(pn * 64), k0, kz}, slot, Value(), Value());
          nvgpu::TmaAsyncLoadOp::create(b, loc, tileView(vAt, BK), full, tmV, ValueRange{ix.c(pn * 64), k0, kz}, slot, Value(), Value());
        }
      });
      // Consumers: take the registers, wait for Q, then for each slot in turn.
      b.setInsertionPoint(role.elseBlock()->getTerminator());
      NVVM::SetMaxRegisterOp::create(b, loc, uint32_t(p.consumerRegs), NVVM::SetMaxRegisterAction::increase);
      nvgpu::MBarrierTryWaitParityOp::create(b, loc, qBar, parity(ix.c(0)), ix.c(10000000), ix.c(0));
      steps.in = [&](AttnBlock& blk, Value) {
        blk.stage = ix.rem(blk.kb, p.STAGES);
        nvgpu::MBarrierTryWaitParityOp::create(b, loc, full, parity(ix.div(blk.kb, p.STAGES)), ix.c(10000000), blk.stage);
      };
      steps.s = [&](AttnBlock& blk) { blk.s = scores(wg, blk.stage); };
      // P as wgmma's A from registers: S's register i holds (row g + 8((i%4)/2), key 8(i/4) + 2t + i%2),
      // so registers 8kk..8kk+7 pair up into the k16 step's A fragment: pair i of P is registers
      // 2i and 2i + 1 in one 32-bit register.
      auto pack = [&](ArrayRef<Value> pf, int64_t i) {
        VectorType v2 = VectorType::get({2}, et);
        Value pair = vector::FromElementsOp::create(b, loc, v2, ValueRange{arith::TruncFOp::create(b, loc, et, pf[size_t(2 * i)]),
                                                                            arith::TruncFOp::create(b, loc, et, pf[size_t(2 * i + 1)])});
        return LLVM::BitcastOp::create(b, loc, b.getI32Type(), pair).getResult();
      };
      // O + P V issued and committed (pairAt(i): pair i of P), O in flight.
      auto issuePV = [&](Value oAcc, const std::function<Value(int64_t)>& pairAt, Value stage) {
        const WgmmaRegA form{int(D), p.dtype == ir::ScalarType::BF16, true};
        auto asmText = b.getStringAttr(wgmmaRegAPtx(form)), constraints = b.getStringAttr(wgmmaRegAConstraints(int(D)));
        for (int64_t kk = 0; kk < BK / 16; ++kk) {
          SmallVector<Value> operands = {pairAt(4 * kk), pairAt(4 * kk + 1), pairAt(4 * kk + 2), pairAt(4 * kk + 3), vDesc(stage, kk)};
          for (Value v : fieldsOf(oAcc, D / 2)) operands.push_back(v);
          oAcc = LLVM::InlineAsmOp::create(b, loc, oT, operands, asmText, constraints, b.getUnitAttr(), UnitAttr(),
                                           LLVM::TailCallKindAttr(), LLVM::AsmDialectAttr::get(ctx, LLVM::AsmDialect::AD_ATT),
                                           ArrayAttr())
                     .getResult(0);
        }
        NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
        return oAcc;
      };
      // Both products of this slot retired: each warp's lane 0 releases it to the producer.
      steps.out = [&](AttnBlock& blk) { ifThen(eq(lane, ix.c(0)), [&] { nvgpu::MBarrierArriveOp::create(b, loc, empty, blk.stage); }); };
      if (!p.overlap) {
        steps.acc = [&](AttnBlock& blk, ValueRange carried) {
          // O = O * alpha + P V. Up to head_dim 128 every pair of P is packed before the fence: a
          // register written between the chain's wgmmas makes ptxas fence each of them (C7519,
          // warpgroup.arrive injected), serialising the chain. At 256, O's 128 registers leave no
          // room for all of them at once (8 B spilled): packed step by step, fenced by ptxas.
          Value oAcc = rescaledO(carried, blk);
          SmallVector<Value> pairs;
          if (D <= 128)
            for (int64_t i = 0; i < BK / 4; ++i) pairs.push_back(pack(blk.p, i));
          NVVM::WgmmaFenceAlignedOp::create(b, loc);
          oAcc = issuePV(oAcc, [&](int64_t i) { return pairs.empty() ? pack(blk.p, i) : pairs[size_t(i)]; }, blk.stage);
          NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 0);
          return nextState(oAcc, blk);
        };
        // The blocks no row of this query block masks first, without the masks' compares and
        // selects (on the consumers' path between the two products), then the rest.
        runAttention(b, loc, kbEnd, steps, e.unmaskedBlocksEnd(shape, q0));
      } else {
        // FlashAttention-3's intra-warpgroup overlap: S of block j issued with P·V of block j - 1,
        // whose wgmmas run under block j's softmax (wait_group 1, then 0 before O is rescaled).
        // P is packed right after its softmax and carried to the next iteration with its slot.
        auto i32c = [&](int32_t v) { return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v)).getResult(); };
        Value wg32 = arith::IndexCastOp::create(b, loc, b.getI32Type(), wg);
        // Ping-pong: named barrier 1 + w is warpgroup w's turn to issue (its 128 threads wait there,
        // the other warpgroup's 128 arrive after issuing), so the tensor cores take the two
        // warpgroups' products in turn and one's softmax runs under the other's wgmmas. Warpgroup 1
        // grants the first turn; warpgroup 0 grants each of warpgroup 1's, warpgroup 1 each of
        // warpgroup 0's but after its last issue (no turn of warpgroup 0 is left to grant).
        auto arriveOther = [&] {
          NVVM::BarrierArriveOp::create(b, loc, arith::SubIOp::create(b, loc, i32c(2), wg32), i32c(256));
        };
        steps.before = [&](Value) {
          if (p.pingpong) ifThen(eq(wg, ix.c(1)), [&] { NVVM::BarrierArriveOp::create(b, loc, i32c(1), i32c(256)); });
        };
        steps.issueBeg = [&] {
          if (p.pingpong)
            NVVM::BarrierOp::create(b, loc, Type(), arith::AddIOp::create(b, loc, wg32, i32c(1)), i32c(256),
                                    NVVM::BarrierReductionAttr(), Value());
          NVVM::WgmmaFenceAlignedOp::create(b, loc);
        };
        steps.issueFin = [&](bool last) {
          if (!p.pingpong) return;
          if (last) ifThen(eq(wg, ix.c(0)), arriveOther);
          else arriveOther();
        };
        steps.issueS = [&](AttnBlock& blk) { blk.sInFlight = issueScores(wg, blk.stage, false); };
        steps.issueAcc = [&](AttnBlock& prev, ValueRange st) {
          return issuePV(st[0], [&](int64_t i) { return prev.p[size_t(i)]; }, prev.stage);
        };
        steps.awaitS = [&](AttnBlock& blk, int pending) {
          NVVM::WgmmaWaitGroupSyncOp::create(b, loc, pending);
          blk.s = fieldsOf(blk.sInFlight, BK / 2);
        };
        steps.awaitAcc = [&](Value o, ValueRange st) {
          NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 0);
          SmallVector<Value> out(st.begin(), st.end());
          out[0] = o;
          return out;
        };
        auto softmaxOnly = steps.sm;
        steps.sm = [&, softmaxOnly](AttnBlock& blk, ValueRange st) {
          softmaxOnly(blk, st);
          SmallVector<Value> pairs;
          for (int64_t i = 0; i < BK / 4; ++i) pairs.push_back(pack(blk.p, i));
          blk.p = pairs;
        };
        steps.resc = [&](AttnBlock& blk, ValueRange st) { return nextState(rescaledO(st, blk), blk); };
        steps.keep = [&](AttnBlock& blk) {
          SmallVector<Value> out(blk.p.begin(), blk.p.end());
          out.push_back(blk.stage);
          return out;
        };
        steps.restore = [&](AttnBlock& blk, ValueRange kept) {
          ValueRange pairs = kept.drop_back();
          blk.p.assign(pairs.begin(), pairs.end());
          blk.stage = kept.back();
        };
        runAttentionOverlapped(b, loc, kbEnd, steps, e.unmaskedBlocksEnd(shape, q0));
      }
    }
    finishPlan();
    // Q, K, V's tensor maps: (head_dim, rows, batch x heads), boxes of 64 x rows, 128-byte swizzle.
    for (int i = 0; i < 3; ++i) {
      GpuArg a;
      a.kind = GpuArg::Kind::TensorMap;
      a.dtype = p.dtype;
      a.tensorMap.of = i;
      a.tensorMap.rank = 3;
      const int64_t rows = i == 0 ? p.SQ : p.SKV, heads = p.B * (i == 0 ? p.H : p.HKV);
      a.tensorMap.dims = {D, rows, heads};
      a.tensorMap.strides = {D * 2, rows * D * 2};
      a.tensorMap.box = {64, i == 0 ? p.BQ : BK, 1};
      a.tensorMap.swizzleBytes = 128;
      plan.launch.args.push_back(a);
    }
    const int consumers = int(p.WG), regs = p.consumerRegs, threads = int(p.T), producer = p.producerRegs;
    plan.checkResources = [consumers, regs, threads, producer](ResourceReport& r) {
      const int64_t pool = int64_t(r.registers) * threads, want = 128 * (int64_t(producer) + int64_t(consumers) * regs);
      std::string why;
      if (r.registers > regs)
        why = "setmaxnreg: the consumers ask for " + std::to_string(regs) + " registers but start with " + std::to_string(r.registers);
      else if (pool < want)
        why = "setmaxnreg: the block holds " + std::to_string(pool) + " registers, its warpgroups ask for " + std::to_string(want);
      if (!why.empty()) {
        r.ok = false;
        r.problems.push_back(why);
      }
    };
    return {};
  }

  ring.barrier();

  Value kbEnd = e.keyBlocksEnd(shape, q0);
  steps.before = [&](Value) { ring.prologue(); };
  steps.in = [&](AttnBlock& blk, Value end) {
    blk.stage = ring.stageIn(blk.kb, end);
    proxyFence();
  };
  steps.s = [&](AttnBlock& blk) {
    blk.k0 = ix.mul(blk.kb, BK);
    blk.s = scores(wg, blk.stage);
  };
  steps.acc = [&](AttnBlock& blk, ValueRange carried) {
    // P into this warpgroup's shared panels, K-major.
    Value pBase = ix.add(ix.mul(wg, 64 * BK), p.pOff(0) / 2);
    Value wRow = ix.add(ix.mul(warp, 16), g);
    VectorType v2 = VectorType::get({2}, et);
    for (int64_t i = 0; i < BK / 2; i += 2) {
      Value pv[2] = {blk.p[size_t(i)], blk.p[size_t(i + 1)]};
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
    Value oAcc = rescaledO(carried, blk);
    Value pByte = toI64(ix.add(ix.mul(wg, 64 * BK * 2), p.pOff(0)));
    NVVM::WgmmaFenceAlignedOp::create(b, loc);
    for (int64_t kk = 0; kk < BK / 16; ++kk) {
      Value da = desc(arith::AddIOp::create(b, loc, pByte, i64c((kk / 4) * 64 * 128 + (kk % 4) * 32)), 64 * 128, 1024);
      oAcc = wgmma(oAcc, da, vDesc(blk.stage, kk), D, true, true);
    }
    NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
    NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 0);
    return nextState(oAcc, blk);
  };
  steps.out = [&](AttnBlock&) { ring.barrier(); };  // the next iteration's copies overwrite the stage read here
  steps.after = [&] { ring.drain(); };
  runAttention(b, loc, kbEnd, steps);
  finishPlan();
  return {};
}

Expected<GpuPlan> buildGpuAttentionWgmma(MLIRContext* ctx, const ir::Kernel& k, const GpuAttentionConfig& c, const TargetDesc& t) {
  return buildAttn<WgmmaAttnPlan>(ctx, k, c, t, {}, makeWgmmaAttnPlan, "flash-wgmma", true, buildWgmma);
}

}  // namespace tessera::codegen
