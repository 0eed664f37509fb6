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

#include "codegen/gpu_gemm_epilogue.h"
#include "codegen/gpu_lowering.h"
#include "codegen/gpu_strategies.h"
#include "codegen/host_strategies.h"
#include "codegen/gpu_loops.h"
#include "codegen/gpu_mma_ops.h"
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

struct MmaAttnPlan {
  int64_t B, H, HKV, G, SQ, SKV, D, off;
  bool causal;
  ir::ScalarType dtype;
  int64_t W, BQ, BK, STAGES, LD, NKD, NJ, NC, ND, NQB, NKB, T;
  double qscale;
  bool qInRegs;
  int64_t qBytes() const { return BQ * LD * 2; }
  int64_t kvBytes() const { return STAGES * BK * LD * 2; }
  int64_t smemBytes() const { return qBytes() + 2 * kvBytes(); }
};

Expected<MmaAttnPlan> makePlan(const ir::AttentionSpec& s, const ir::Config& c, const TargetDesc& t) {
  auto bad = [](const std::string& m) { return makeError(ErrorCode::InvalidConfig, "attention (flash-mma): " + m); };
  if (t.vendor != Vendor::Nvidia || !t.findMma("f16", "mma.sync")) return bad("needs an NVIDIA target with mma.sync");
  if (s.dtype != ir::ScalarType::F16 && s.dtype != ir::ScalarType::BF16) return bad("f16 or bf16 inputs only");
  if (s.head_dim % 16 || s.head_dim > 256) return bad("head_dim must be a multiple of 16, at most 256");
  MmaAttnPlan p;
  TESSERA_ASSIGN(p.BQ, c.getInt("BQ"));
  TESSERA_ASSIGN(p.BK, c.getInt("BK"));
  p.STAGES = 2;
  if (c.has("STAGES")) {
    TESSERA_ASSIGN(p.STAGES, c.getInt("STAGES"));
  }
  if (p.BQ % 16 || p.BQ < 16 || p.BQ > 128) return bad("BQ must be 16, 32, 64 or 128 (16 rows per warp)");
  if (p.BK % 16 || p.BK < 16 || p.BK > 128) return bad("BK must be a multiple of 16, at most 128");
  if (p.STAGES != 1 && p.STAGES != 2) return bad("STAGES must be 1 or 2");
  p.B = s.batch; p.H = s.heads; p.HKV = s.heads_kv; p.G = s.heads / s.heads_kv;
  p.SQ = s.seq_q; p.SKV = s.seq_kv; p.D = s.head_dim; p.off = s.seq_kv - s.seq_q;
  p.causal = s.causal; p.dtype = s.dtype;
  p.W = p.BQ / 16;
  p.T = 32 * p.W;
  p.LD = p.D + 8;
  p.NKD = p.D / 16; p.NJ = p.BK / 8; p.NC = p.BK / 16; p.ND = p.D / 8;
  p.NQB = ceilDiv(p.SQ, p.BQ);
  p.NKB = ceilDiv(p.SKV, p.BK);
  p.qscale = s.scale / std::log(2.0);
  // Q's fragments stay in registers up to head_dim 128 (32 registers); past it they are re-read
  // from shared memory for each key block, so O's 4*D/8 accumulators fit.
  p.qInRegs = p.D <= 128;
  const int64_t limit = std::max(t.smemPerBlock, t.smemPerBlockOptIn);
  if (p.smemBytes() > limit)
    return bad("needs " + std::to_string(p.smemBytes()) + " B of shared memory, the limit is " + std::to_string(limit));
  return p;
}

class Kernel : public MmaOps {
 public:
  Kernel(OpBuilder& b, Location loc, const MmaAttnPlan& p) : MmaOps(b, loc, p.dtype), p_(p) {}
  const MmaAttnPlan& p_;
};

}  // namespace

Status checkGpuAttentionMma(const ir::Kernel& k, const ir::Config& c, const TargetDesc& t) {
  TESSERA_ASSIGN(ir::AttentionInfo info, ir::analyzeAttention(k));
  TESSERA_ASSIGN(MmaAttnPlan p, makePlan(info.spec, c, t));
  (void)p;
  return {};
}

Expected<GpuPlan> buildGpuAttentionMma(MLIRContext* ctx, const ir::Kernel& k, const ir::Config& c, const TargetDesc& t,
                                       const RuntimeDims& rt) {
  TESSERA_ASSIGN(ir::AttentionInfo info, ir::analyzeAttention(k));
  TESSERA_ASSIGN(MmaAttnPlan p, makePlan(info.spec, c, t));
  GpuPlan plan;
  plan.strategy = "flash-mma";
  plan.laneLevel = true;
  TESSERA_ASSIGN(plan.launch.runtime, planAttentionRuntime(info.spec, rt, plan.strategy, p.BQ));
  OpBuilder b(ctx);
  Location loc = b.getUnknownLoc();
  plan.module = ModuleOp::create(loc);
  std::map<std::string, Value> args;
  createKernelFunc(b, *plan.module, k, &args, rt.any());
  Value sizes = rt.any() ? args[kSizesArg] : Value();
  const ir::AttentionSpec& s = info.spec;
  Value Q = args[s.q], Kg = args[s.k], Vg = args[s.v], O = args[s.o];
  Kernel e(b, loc, p);
  gpuir::Idx& ix = e.ix_;
  Type et = e.et_;
  const int64_t LD = p.LD, BK = p.BK, T = p.T;

  auto launch = gpu::LaunchOp::create(b, loc, ix.c(p.NQB), ix.c(p.H), ix.c(p.B), ix.c(T), ix.c(1), ix.c(1),
                                      arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(int32_t(p.smemBytes()))));
  b.setInsertionPointToStart(&launch.getBody().front());
  Value qb = launch.getBlockIds().x, h = launch.getBlockIds().y, bi = launch.getBlockIds().z;
  Value tid = launch.getThreadIds().x;
  // Runtime length: read once per thread; the tensors seen at it.
  Value seqV = rt.m ? gemm::loadSize(b, loc, sizes, 0) : Value();
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
  const int64_t chunksPerRow = p.D / 8;

  // ---- Q tile: rows past Sq repeat the last (their outputs are never stored)
  {
    const int64_t chunks = p.BQ * chunksPerRow, steps = ceilDiv(chunks, T);
    for (int64_t st = 0; st < steps; ++st) {
      Value ch = ix.add(tid, st * T);
      gpuir::guarded(b, loc, (st + 1) * T > chunks ? ix.lt(ch, chunks) : Value(), [&] {
        Value r = ix.div(ch, chunksPerRow), col = ix.mul(ix.rem(ch, chunksPerRow), 8);
        Value gr = ix.min(ix.add(q0, r), sqLast);
        Value v = vector::LoadOp::create(b, loc, v8, Q, ValueRange{bi, h, gr, col});
        vector::StoreOp::create(b, loc, v, Qs, ValueRange{r, col});
      });
    }
  }
  // ---- K/V block kb into `stage`: rows past Skv repeat the last key (masked in S)
  auto copyKV = [&](Value kb, Value stage, bool async) -> Value {
    const int64_t chunks = BK * chunksPerRow, steps = ceilDiv(chunks, T);
    SmallVector<Value> tokens;
    Value k0 = ix.mul(kb, BK);
    auto tok = nvgpu::DeviceAsyncTokenType::get(ctx);
    for (int64_t st = 0; st < steps; ++st) {
      Value ch = ix.add(tid, st * T);
      Value inRange = (st + 1) * T > chunks ? ix.lt(ch, chunks) : Value();
      // A thread past the chunks copies nothing: a guarded cp.async's token joins no group (the
      // commit covers every copy the thread issued; copying chunk 0 again instead would be two
      // threads writing the same shared bytes unordered, a race however equal the values).
      auto body = [&] {
        Value r = ix.div(ch, chunksPerRow), col = ix.mul(ix.rem(ch, chunksPerRow), 8);
        Value gr = ix.min(ix.add(k0, r), skvLast);
        for (auto [src, dst] : {std::pair{Kg, Ks}, std::pair{Vg, Vs}}) {
          if (async) {
            Value t = nvgpu::DeviceAsyncCopyOp::create(b, loc, tok, dst, ValueRange{stage, r, col}, src,
                                                       ValueRange{bi, hk, gr, col}, b.getIndexAttr(8), Value(),
                                                       b.getUnitAttr());
            if (!inRange) tokens.push_back(t);
          } else {
            Value v = vector::LoadOp::create(b, loc, v8, src, ValueRange{bi, hk, gr, col});
            vector::StoreOp::create(b, loc, v, dst, ValueRange{stage, r, col});
          }
        }
      };
      gpuir::guarded(b, loc, inRange, body);
    }
    if (async) return Value(nvgpu::DeviceAsyncCreateGroupOp::create(b, loc, tok, tokens).getResult());
    return Value();
  };
  auto wait = [&](Value group, int64_t pending) {
    nvgpu::DeviceAsyncWaitOp::create(b, loc, group, b.getI32IntegerAttr(int32_t(pending)));
  };
  auto barrier = [&] { gpu::BarrierOp::create(b, loc); };

  barrier();
  // ---- Q's A fragments: matrix i of ldmatrix.x4 = rows 8(i%2).., columns 8(i/2).. of a 16x16 slice
  Value aRow = ix.add(ix.add(ix.rem(lane, 8), ix.mul(ix.rem(ix.div(lane, 8), 2), 8)), ix.mul(warp, 16));
  Value aCol = ix.mul(ix.div(lane, 16), 8);
  auto qFrag = [&](int64_t kd) { return e.ldmatrix(Qs, aRow, ix.add(aCol, kd * 16), 4, false); };
  std::vector<SmallVector<Value>> qa;
  if (p.qInRegs)
    for (int64_t kd = 0; kd < p.NKD; ++kd) qa.push_back(qFrag(kd));

  // ---- key blocks: causal stops at the block of the last visible key of the block's last row
  const MmaOps::Shape shape{p.SQ, p.SKV, p.off, p.BQ, BK, p.NKB, p.causal, p.qscale, seqV};
  Value kbEnd = e.keyBlocksEnd(shape, q0);
  const bool async = p.STAGES == 2;
  if (async) (void)copyKV(ix.c(0), ix.c(0), true);
  SmallVector<Value> init;
  for (int64_t i = 0; i < 4 * p.ND; ++i) init.push_back(e.f(0.0f));
  init.append({e.f(-1e30f), e.f(-1e30f), e.f(0.0f), e.f(0.0f)});  // m (rows g, g+8), l (partial)
  auto loop = scf::ForOp::create(b, loc, ix.c(0), kbEnd, ix.c(1), init);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value kb = loop.getInductionVar();
    ValueRange carried = loop.getRegionIterArgs();
    Value stage = ix.c(0);
    if (async) {
      // The next block (or this one again at the end: a harmless copy) into the other stage, then
      // this block's group completes.
      stage = ix.rem(kb, 2);
      Value next = arith::MinSIOp::create(b, loc, ix.add(kb, 1), ix.add(kbEnd, -1));
      Value group = copyKV(next, ix.rem(ix.add(kb, 1), 2), true);
      wait(group, 1);
      barrier();
    } else {
      barrier();
      (void)copyKV(kb, stage, false);
      barrier();
    }
    Value k0 = ix.mul(kb, BK);
    // Rank-reduced 2-D views of this stage.
    auto tile2d = [&](Value base) {
      auto t2 = cast<MemRefType>(memref::SubViewOp::inferRankReducedResultType(
          {BK, LD}, cast<MemRefType>(base.getType()), ArrayRef<int64_t>{ShapedType::kDynamic, 0, 0},
          ArrayRef<int64_t>{1, BK, LD}, ArrayRef<int64_t>{1, 1, 1}));
      return memref::SubViewOp::create(b, loc, t2, base, ArrayRef<OpFoldResult>{stage, b.getIndexAttr(0), b.getIndexAttr(0)},
                                       ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(BK), b.getIndexAttr(LD)},
                                       ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1), b.getIndexAttr(1)})
          .getResult();
    };
    Value K2 = tile2d(Ks), V2 = tile2d(Vs);

    // S = Q Kᵀ, 8 keys per tile: s[j][0..3] = rows g, g, g+8, g+8; keys 2t, 2t+1, 2t, 2t+1.
    Value kRow = ix.rem(lane, 8), kCol = ix.mul(ix.rem(ix.div(lane, 8), 2), 8);
    std::vector<SmallVector<Value>> sTiles;
    for (int64_t j = 0; j < p.NJ; ++j) {
      SmallVector<Value> acc = {e.f(0.0f), e.f(0.0f), e.f(0.0f), e.f(0.0f)};
      for (int64_t kd = 0; kd < p.NKD; ++kd) {
        SmallVector<Value> a = p.qInRegs ? qa[size_t(kd)] : qFrag(kd);
        SmallVector<Value> kf = e.ldmatrix(K2, ix.add(kRow, j * 8), ix.add(kCol, kd * 16), 2, false);
        acc = e.mma(a, kf, acc);
      }
      sTiles.push_back(acc);
    }
    // Scale, mask, row maxima over the quad, p = 2^(s - m) (MmaOps::softmax).
    Value rowBase = ix.add(ix.add(q0, ix.mul(warp, 16)), g);
    SmallVector<Value> scores;
    for (const auto& tile : sTiles) scores.append(tile.begin(), tile.end());
    Value mOld[2] = {carried[4 * p.ND], carried[4 * p.ND + 1]}, lOld[2] = {carried[4 * p.ND + 2], carried[4 * p.ND + 3]};
    MmaOps::Softmax sm = e.softmax(shape, scores, k0, tq, rowBase, mOld, lOld);
    std::vector<SmallVector<Value>> pr(size_t(p.NJ));
    for (int64_t j = 0; j < p.NJ; ++j) pr[size_t(j)].assign(sm.p.begin() + 4 * j, sm.p.begin() + 4 * j + 4);
    // P's A fragments for 16-key slice c: tiles 2c and 2c+1 as (row g, row g+8) x (keys 2t.., keys 8+2t..).
    std::vector<SmallVector<Value>> pa;
    for (int64_t c = 0; c < p.NC; ++c) {
      const auto& t0 = pr[size_t(2 * c)];
      const auto& t1 = pr[size_t(2 * c + 1)];
      pa.push_back({e.pack(t0[0], t0[1]), e.pack(t0[2], t0[3]), e.pack(t1[0], t1[1]), e.pack(t1[2], t1[3])});
    }
    // O = O * alpha + P V over 8-column tiles of the head dim.
    Value vRow = ix.rem(lane, 16);
    SmallVector<Value> yields;
    for (int64_t d = 0; d < p.ND; ++d) {
      SmallVector<Value> acc;
      for (int c = 0; c < 4; ++c) acc.push_back(e.mul(carried[size_t(4 * d + c)], sm.alpha[c / 2]));
      for (int64_t c = 0; c < p.NC; ++c) {
        SmallVector<Value> vf = e.ldmatrix(V2, ix.add(vRow, c * 16), ix.c(d * 8), 2, true);
        acc = e.mma(pa[size_t(c)], vf, acc);
      }
      yields.append(acc.begin(), acc.end());
    }
    yields.append({sm.mNew[0], sm.mNew[1], sm.lNew[0], sm.lNew[1]});
    if (async) barrier();  // the next iteration's copies overwrite the stage read here
    scf::YieldOp::create(b, loc, yields);
  }
  if (async) {
    // Nothing left in flight when the block ends (the last iteration's redundant copy).
    auto tok = nvgpu::DeviceAsyncTokenType::get(ctx);
    Value none = nvgpu::DeviceAsyncCreateGroupOp::create(b, loc, tok, ValueRange{}).getResult();
    wait(none, 0);
  }
  // ---- O / l for rows < Sq
  ValueRange res = loop.getResults();
  Value rowBase = ix.add(ix.add(q0, ix.mul(warp, 16)), g);
  Value lFinal[2] = {res[size_t(4 * p.ND + 2)], res[size_t(4 * p.ND + 3)]};
  e.storeNormalized(shape, SmallVector<Value>(res.begin(), res.begin() + 4 * p.ND), lFinal, O, bi, h, rowBase, tq);
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
  if (rt.any()) {
    GpuArg sz;
    sz.kind = GpuArg::Kind::Sizes;
    sz.dtype = ir::ScalarType::Index;
    plan.launch.args.push_back(sz);
  }
  return plan;
}

}  // namespace tessera::codegen
