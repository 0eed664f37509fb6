// Owns the host attention strategy: FlashAttention-style forward attention built directly as
// loop + vector code with OpBuilder (mlir-recipes/cpu-flash-attention), no transform schedule.
//
//   for b, kv head hk:                      K[b,hk] packed into Kp[NKB][D][BK] (V into Vp if needed)
//     for query head h of hk's group, query block qb:
//       Qs = Q block · scale·log2e; Acc = 0; Mo = -1e30; L = 0
//       for key block kb (full blocks, then the peeled tail; causal: unmasked, then diagonal):
//         Sb = Qs·Kp[kb]; online softmax on Sb; Acc = Acc·alpha + Sb·V[kb]
//       O[valid rows] = Acc / L
//
// Knobs (the space is search/space_attention.cpp): BQ, BK query/key block; MR1 x NR1 and
// MR2 x NR2 register tiles of the two micro-kernels; U1, U2 their unrolls; VW vector lanes.
// Tiles that do not divide their range get a peeled remainder tile, so any positive knob within
// the limits below lowers; the space keeps the search on the fast ones.
#include <cmath>

#include "hostgen/host_attention_kernels.h"
#include "hostgen/host_strategies.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace tessera::codegen {

using namespace mlir;

namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

Expected<attn::Plan> makePlan(const ir::AttentionSpec& s, const HostAttentionConfig& c, const TargetDesc& t) {
  attn::Plan p;
  const int64_t BQ = c.BQ, BK = c.BK, MR1 = c.MR1, NR1 = c.NR1, MR2 = c.MR2, NR2 = c.NR2, U1 = c.U1, U2 = c.U2, VW = c.VW;
  const int64_t threads = c.THREADS;
  if (threads < 1 || threads > 256) return makeError(ErrorCode::InvalidConfig, "attention: THREADS must be between 1 and 256");
  p.threads = threads;
  auto bad = [](const std::string& m) { return makeError(ErrorCode::InvalidConfig, "attention: " + m); };
  for (auto [n, v] : {std::pair{"BQ", BQ}, {"BK", BK}, {"MR1", MR1}, {"NR1", NR1}, {"MR2", MR2}, {"NR2", NR2},
                      {"U1", U1}, {"U2", U2}, {"VW", VW}})
    if (v <= 0) return bad(std::string(n) + " must be positive, got " + std::to_string(v));
  if (VW != 4 && VW != 8 && VW != 16) return bad("VW must be 4, 8 or 16, got " + std::to_string(VW));
  if (VW * 32 > t.simdBits)
    return bad("VW=" + std::to_string(VW) + " f32 lanes exceed the target's " + std::to_string(t.simdBits) + "-bit vectors");
  for (auto [n, v] : {std::pair{"BK", BK}, {"NR1", NR1}, {"NR2", NR2}})
    if (v % VW) return bad(std::string(n) + "=" + std::to_string(v) + " must be a multiple of VW=" + std::to_string(VW));
  // Limits keep the scratch on a sane footprint and the fully unrolled micro-kernels small enough
  // to compile in about a second.
  if (BQ > 1024 || BK > 4096) return bad("BQ must be <= 1024 and BK <= 4096");
  if (MR1 > 32 || MR2 > 32) return bad("MR1 and MR2 must be <= 32");
  if (NR1 / VW > 16 || NR2 / VW > 16) return bad("NR1 and NR2 must be <= 16 vectors");
  if (MR1 * (NR1 / VW) > 96 || MR2 * (NR2 / VW) > 96) return bad("register tile of more than 96 vector accumulators");
  if (U1 > 16 || U2 > 16) return bad("U1 and U2 must be <= 16");

  p.B = s.batch;
  p.H = s.heads;
  p.HKV = s.heads_kv;
  p.G = s.heads / s.heads_kv;
  p.SQ = s.seq_q;
  p.SKV = s.seq_kv;
  p.D = s.head_dim;
  p.VW = VW;
  p.DP = ceilDiv(p.D, VW) * VW;
  // Blocks and tiles larger than the problem behave like the problem (the space clamps the same way).
  p.BQ = std::min(BQ, p.SQ);
  p.BK = std::min(BK, ceilDiv(p.SKV, VW) * VW);
  p.MR1 = std::min(MR1, p.BQ);
  p.NR1 = std::min(NR1, p.BK);
  p.MR2 = std::min(MR2, p.BQ);
  p.NR2 = std::min(NR2, p.DP);
  p.U1 = U1;
  p.U2 = U2;
  p.NQB = ceilDiv(p.SQ, p.BQ);
  p.NKB = ceilDiv(p.SKV, p.BK);
  p.nFull = p.SKV / p.BK;
  p.kTail = p.SKV % p.BK;
  p.off = p.SKV - p.SQ;
  p.causal = s.causal;
  p.dtype = s.dtype;
  // Rows of V are the PV vectors as they are when they are f32 and whole vectors; otherwise V is
  // converted (and its rows padded to DP with zeros) once per kv head: O(S·D) next to O(S²·D).
  p.packV = s.dtype != ir::ScalarType::F32 || p.D % VW != 0;
  p.qscale = s.scale / std::log(2.0);
  return p;
}

// Sizes taken at run time (a shape-generic kernel, RuntimeDims): the plan's B, SQ and SKV are
// then upper bounds (they size the scratch and clamp the blocks), and these values, with the block
// counts derived from them, bound the loops. `on` false: the static plan alone (no value is set).
struct DynSizes {
  bool on = false;
  Value B, SQ, SKV;                   // batch, query and key lengths
  Value NQB, NKB, nFull, kTail, off;  // as in attn::Plan
};

// Builds the function body around the pieces of attn::Emitter.
class KernelBuilder {
 public:
  KernelBuilder(OpBuilder& b, Location loc, const attn::Plan& p, attn::Buffers& buf, const DynSizes& d = {})
      : b_(b), loc_(loc), p_(p), buf_(buf), e_(b, loc, p, buf), d_(d) {}

  void build() {
    if (p_.threads > 1) return workers();
    auto batches = [&](const std::function<void(Value)>& f) {
      if (d_.on) return e_.loop(e_.idx(0), d_.B, 1, f);
      e_.loop(0, p_.B, 1, f);
    };
    batches([&](Value bi) {
      e_.loop(0, p_.HKV, 1, [&](Value hk) {
        packK(bi, hk);
        if (p_.packV) packV(bi, hk);
        // Query heads sharing kv head hk run back to back on its packed K (GQA).
        e_.loop(0, p_.G, 1, [&](Value g) {
          Value h = e_.addi(e_.muli(hk, p_.G), g);
          if (d_.on) return e_.loop(e_.idx(0), d_.NQB, 1, [&](Value qb) { queryBlock(bi, h, hk, qb); });
          e_.loop(0, p_.NQB, 1, [&](Value qb) { queryBlock(bi, h, hk, qb); });
        });
      });
    });
  }

 private:
  // Several threads: one parallel loop over every query block of the call, B·HKV·G·NQB items
  // (kv head major), dealt to `threads` workers in turn (worker w takes items w, w + T, ...:
  // causal blocks, whose cost grows along the sequence, spread evenly). Each worker has its own
  // slice of the scratch, packed K and V included, and packs a kv head's K and V when its next
  // item is of another head than its last (S·D copies against the head's S²·D/T multiply-adds
  // per worker), so a call opens one parallel region, not one per kv head.
  void workers() {
    const int64_t T = p_.threads, perHead = p_.G * p_.NQB;
    Value perHeadV = d_.on ? e_.muli(d_.NQB, p_.G) : e_.idx(perHead);
    Value heads = d_.on ? e_.muli(d_.B, p_.HKV) : e_.idx(p_.B * p_.HKV);
    Value items = arith::MulIOp::create(b_, loc_, heads, perHeadV);
    Value workersV = e_.mini(e_.idx(T), items);
    auto par = scf::ParallelOp::create(b_, loc_, ValueRange{e_.idx(0)}, ValueRange{workersV}, ValueRange{e_.idx(1)});
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPoint(par.getBody()->getTerminator());
    Value w = par.getInductionVars()[0];
    attn::Buffers mine = buf_;
    auto slice = [&](Value all) -> Value {
      auto t = cast<MemRefType>(all.getType());
      SmallVector<OpFoldResult> offs = {w}, sizes = {b_.getIndexAttr(1)}, strides(size_t(t.getRank()), b_.getIndexAttr(1));
      for (int64_t d = 1; d < t.getRank(); ++d) {
        offs.push_back(b_.getIndexAttr(0));
        sizes.push_back(b_.getIndexAttr(t.getDimSize(d)));
      }
      auto rt = memref::SubViewOp::inferRankReducedResultType(t.getShape().drop_front(), t, offs, sizes, strides);
      return memref::SubViewOp::create(b_, loc_, cast<MemRefType>(rt), all, offs, sizes, strides);
    };
    for (Value* v : {&mine.Qs, &mine.Sb, &mine.Acc, &mine.Mo, &mine.Mn, &mine.L, &mine.Rs, &mine.Al, &mine.Kp}) *v = slice(*v);
    if (p_.packV) mine.Vp = slice(mine.Vp);
    KernelBuilder kb(b_, loc_, p_, mine, d_);
    // The loop carries the (batch, kv head) whose K and V this worker holds packed (-1: none).
    auto f = scf::ForOp::create(b_, loc_, w, items, e_.idx(T), ValueRange{e_.idx(-1)});
    b_.setInsertionPointToStart(f.getBody());
    Value item = f.getInductionVar(), held = f.getRegionIterArgs()[0];
    Value head = arith::DivUIOp::create(b_, loc_, item, perHeadV);
    Value rest = arith::RemUIOp::create(b_, loc_, item, perHeadV);
    Value bi = arith::DivUIOp::create(b_, loc_, head, e_.idx(p_.HKV));
    Value hk = arith::RemUIOp::create(b_, loc_, head, e_.idx(p_.HKV));
    Value other = arith::CmpIOp::create(b_, loc_, arith::CmpIPredicate::ne, head, held);
    auto pack = scf::IfOp::create(b_, loc_, TypeRange{}, other, false);
    {
      OpBuilder::InsertionGuard g2(b_);
      b_.setInsertionPoint(pack.thenBlock()->getTerminator());
      kb.packK(bi, hk);
      if (p_.packV) kb.packV(bi, hk);
    }
    Value nqb = d_.on ? d_.NQB : e_.idx(p_.NQB);
    Value g = arith::DivUIOp::create(b_, loc_, rest, nqb);
    Value qb = arith::RemUIOp::create(b_, loc_, rest, nqb);
    kb.queryBlock(bi, e_.addi(e_.muli(hk, p_.G), g), hk, qb);
    scf::YieldOp::create(b_, loc_, ValueRange{head});
  }

  VectorType vecOf(Type t) { return VectorType::get({p_.VW}, t); }
  Type inType() { return cast<MemRefType>(buf_.Q.getType()).getElementType(); }

  // Kp[kb][d][j] = K[b, hk, min(kb·BK + j, SKV-1), d]: each key block contiguous, rows of the
  // QK micro-kernel unit-stride; clamped rows keep the padded columns finite (they are masked).
  void packK(Value bi, Value hk) {
    auto blocks = [&](const std::function<void(Value)>& f) {
      if (d_.on) return e_.loop(e_.idx(0), d_.NKB, 1, f);
      e_.loop(0, p_.NKB, 1, f);
    };
    blocks([&](Value kb) {
      Value kk0 = e_.muli(kb, p_.BK);
      e_.loop(0, p_.BK, 1, [&](Value j) {
        Value row = e_.mini(e_.addi(kk0, j), lastKeyRow());
        e_.loop(0, p_.D, 1, [&](Value d) {
          Value v = memref::LoadOp::create(b_, loc_, buf_.K, ValueRange{bi, hk, row, d});
          memref::StoreOp::create(b_, loc_, e_.toF32(v), buf_.Kp, ValueRange{kb, d, j});
        });
      });
    });
  }

  // Copies `D` elements of row `src` into f32 row `dst` of width DP (zero padded), scaled by
  // `scale` unless it is 1: whole vectors, then the last D % VW elements one by one.
  void copyRow(Value src, ValueRange srcIdx, Value dst, Value dstRow, float scale) {
    const int64_t full = p_.D / p_.VW * p_.VW;
    auto srcAt = [&](Value col) {
      SmallVector<Value> ix(srcIdx.begin(), srcIdx.end());
      ix.push_back(col);
      return ix;
    };
    Value sc = e_.splat(scale);
    for (int64_t c = 0; c < full; c += p_.VW) {
      Value v = e_.toF32(vector::LoadOp::create(b_, loc_, vecOf(inType()), src, srcAt(e_.idx(c))));
      if (scale != 1.0f) v = arith::MulFOp::create(b_, loc_, v, sc, e_.fast());
      vector::StoreOp::create(b_, loc_, v, dst, ValueRange{dstRow, e_.idx(c)});
    }
    if (full == p_.D) return;
    vector::StoreOp::create(b_, loc_, e_.splat(0.0f), dst, ValueRange{dstRow, e_.idx(full)});
    Value ss = arith::ConstantOp::create(b_, loc_, b_.getF32FloatAttr(scale));
    e_.loop(full, p_.D, 1, [&](Value d) {
      Value v = e_.toF32(memref::LoadOp::create(b_, loc_, src, srcAt(d)));
      if (scale != 1.0f) v = arith::MulFOp::create(b_, loc_, v, ss, e_.fast());
      memref::StoreOp::create(b_, loc_, v, dst, ValueRange{dstRow, d});
    });
  }

  void packV(Value bi, Value hk) {
    auto row = [&](Value j) { copyRow(buf_.V, ValueRange{bi, hk, j}, buf_.Vp, j, 1.0f); };
    if (d_.on) return e_.loop(e_.idx(0), d_.SKV, 1, row);
    e_.loop(0, p_.SKV, 1, row);
  }

  Value lastKeyRow() { return d_.on ? e_.addi(d_.SKV, -1) : e_.idx(p_.SKV - 1); }
  Value seqQ() { return d_.on ? d_.SQ : e_.idx(p_.SQ); }

 public:
  void queryBlock(Value bi, Value h, Value hk, Value qb) {
    const int64_t VW = p_.VW;
    Value q0 = e_.muli(qb, p_.BQ);
    // Qs = Q rows (clamped to SQ-1 in the tail block) · scale·log2e; Acc = 0.
    e_.loop(0, p_.BQ, 1, [&](Value qi) {
      Value qr = e_.mini(e_.addi(q0, qi), d_.on ? e_.addi(d_.SQ, -1) : e_.idx(p_.SQ - 1));
      copyRow(buf_.Q, ValueRange{bi, h, qr}, buf_.Qs, qi, float(p_.qscale));
      for (int64_t c = 0; c < p_.DP; c += VW) vector::StoreOp::create(b_, loc_, e_.splat(0.0f), buf_.Acc, ValueRange{qi, e_.idx(c)});
    });
    for (int64_t c = 0; c < p_.bqPad(); c += VW) {
      Value at = e_.idx(c);
      vector::StoreOp::create(b_, loc_, e_.splat(-1.0e30f), buf_.Mo, ValueRange{at});
      vector::StoreOp::create(b_, loc_, e_.splat(-1.0e30f), buf_.Mn, ValueRange{at});
      vector::StoreOp::create(b_, loc_, e_.splat(0.0f), buf_.L, ValueRange{at});
      vector::StoreOp::create(b_, loc_, e_.splat(0.0f), buf_.Rs, ValueRange{at});
    }
    if (!p_.causal && d_.on) {
      e_.loop(e_.idx(0), d_.nFull, 1, [&](Value kb) { fullBlock(bi, hk, kb); });
      dynamicTailBlock(bi, hk);
    } else if (!p_.causal) {
      e_.loop(0, p_.nFull, 1, [&](Value kb) { fullBlock(bi, hk, kb); });
      if (p_.kTail > 0) tailBlock(bi, hk);
    } else {
      causalBlocks(bi, hk, q0);
    }
    // O[valid rows] = Acc / L (L >= 1: the row maximum contributes exp2(0)).
    Value rows = e_.mini(e_.subi(seqQ(), q0), e_.idx(p_.BQ));
    e_.loop(e_.idx(0), rows, 1, [&](Value oi) {
      Value l = memref::LoadOp::create(b_, loc_, buf_.L, ValueRange{oi});
      Value one = arith::ConstantOp::create(b_, loc_, b_.getF32FloatAttr(1.0f));
      Value inv = arith::DivFOp::create(b_, loc_, one, l, e_.fast());
      Value invv = vector::BroadcastOp::create(b_, loc_, e_.vecF32(), inv);
      Value orow = e_.addi(q0, oi);
      const int64_t full = p_.D / VW * VW;
      for (int64_t c = 0; c < full; c += VW) {
        Value a = vector::LoadOp::create(b_, loc_, e_.vecF32(), buf_.Acc, ValueRange{oi, e_.idx(c)});
        Value o = e_.fromF32(arith::MulFOp::create(b_, loc_, a, invv, e_.fast()));
        vector::StoreOp::create(b_, loc_, o, buf_.O, ValueRange{bi, h, orow, e_.idx(c)});
      }
      e_.loop(full, p_.D, 1, [&](Value d) {
        Value a = memref::LoadOp::create(b_, loc_, buf_.Acc, ValueRange{oi, d});
        Value o = e_.fromF32(arith::MulFOp::create(b_, loc_, a, inv, e_.fast()));
        memref::StoreOp::create(b_, loc_, o, buf_.O, ValueRange{bi, h, orow, d});
      });
    });
  }

 private:
  // A key block with BK valid keys and no mask: the hot path.
  void fullBlock(Value bi, Value hk, Value kb) {
    e_.scores(kb, p_.BK);
    e_.softmax(p_.BK / p_.VW, {});
    e_.accumulate(bi, hk, e_.muli(kb, p_.BK), attn::KeyCount{p_.BK, {}});
  }

  // The last, partial key block, peeled statically: scores only over whole vectors covering the
  // valid keys, constant masks on the last vector, PV over the valid keys only (V is not padded).
  void tailBlock(Value bi, Value hk) {
    const int64_t cols = ceilDiv(p_.kTail, p_.VW) * p_.VW;
    e_.scores(e_.idx(p_.NKB - 1), cols);
    attn::BlockMask m;
    m.validCols = p_.kTail;
    e_.softmax(cols / p_.VW, m);
    e_.accumulate(bi, hk, e_.idx((p_.NKB - 1) * p_.BK), attn::KeyCount{p_.kTail, {}});
  }

  // The partial key block of a runtime key length, when there is one: all BK columns scored (the
  // packed rows past the last key repeat it, finite), columns past the last key masked, PV over
  // the valid keys only.
  void dynamicTailBlock(Value bi, Value hk) {
    Value some = arith::CmpIOp::create(b_, loc_, arith::CmpIPredicate::ugt, d_.kTail, e_.idx(0));
    auto ifOp = scf::IfOp::create(b_, loc_, TypeRange{}, some, false);
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    Value kb = e_.addi(d_.NKB, -1);
    Value kk0 = e_.muli(kb, p_.BK);
    e_.scores(kb, p_.BK);
    attn::BlockMask m;
    // Row i sees columns <= min(limit + i, limit): the key limit alone.
    m.colLimit = e_.addi(d_.kTail, -1);
    m.causalLimit = m.colLimit;
    e_.softmax(p_.BK / p_.VW, m);
    e_.accumulate(bi, hk, kk0, attn::KeyCount{0, d_.kTail});
  }

  // Causal (bottom-right aligned: key j visible to query i iff j <= i + off): blocks entirely
  // visible to the block's first row run unmasked; the diagonal blocks after them mask per row
  // (iota <= limit) and stop at the block's last visible key; fully masked blocks are skipped.
  void causalBlocks(Value bi, Value hk, Value q0) {
    Value lastRow = e_.addi(e_.mini(e_.addi(q0, p_.BQ), seqQ()), -1);
    Value lastKey = d_.on ? e_.addi(lastRow, d_.off) : e_.addi(lastRow, p_.off);  // <= SKV - 1
    Value nkb = e_.addi(arith::DivUIOp::create(b_, loc_, lastKey, e_.idx(p_.BK)), 1);
    Value firstMasked = d_.on ? e_.addi(e_.addi(q0, d_.off), 1) : e_.addi(q0, p_.off + 1);
    Value free = e_.mini(arith::DivUIOp::create(b_, loc_, firstMasked, e_.idx(p_.BK)), d_.on ? d_.nFull : e_.idx(p_.nFull));
    e_.loop(e_.idx(0), free, 1, [&](Value kb) { fullBlock(bi, hk, kb); });
    e_.loop(free, nkb, 1, [&](Value kb) {
      Value kk0 = e_.muli(kb, p_.BK);
      e_.scores(kb, p_.BK);
      attn::BlockMask m;
      m.causalLimit = e_.subi(d_.on ? e_.addi(q0, d_.off) : e_.addi(q0, p_.off), kk0);
      m.colLimit = e_.subi(lastKeyRow(), kk0);
      e_.softmax(p_.BK / p_.VW, m);
      Value keys = e_.mini(e_.idx(p_.BK), e_.subi(e_.addi(lastKey, 1), kk0));
      e_.accumulate(bi, hk, kk0, attn::KeyCount{0, keys});
    });
  }

  OpBuilder& b_;
  Location loc_;
  const attn::Plan& p_;
  attn::Buffers& buf_;
  attn::Emitter e_;
  DynSizes d_;
};

}  // namespace

Expected<HostPayload> buildHostAttention(MLIRContext* ctx, const ir::Kernel& k, const ir::Config& c, const TargetDesc& t,
                                         const RuntimeDims& dims) {
  TESSERA_ASSIGN(ir::AttentionInfo info, ir::analyzeAttention(k));
  TESSERA_ASSIGN(HostAttentionConfig cfg, readHostAttentionConfig(c));
  TESSERA_ASSIGN(attn::Plan p, makePlan(info.spec, cfg, t));
  HostPayload out;
  OpBuilder b(ctx);
  Location loc = b.getUnknownLoc();
  out.module = ModuleOp::create(loc);
  std::map<std::string, Value> args;
  createKernelFunc(b, *out.module, k, &args, dims.any());

  attn::Buffers buf;
  buf.Q = args[info.spec.q];
  buf.K = args[info.spec.k];
  buf.V = args[info.spec.v];
  buf.O = args[info.spec.o];
  DynSizes d;
  if (dims.any()) {
    // sizes[0] = query length, sizes[1] = batch, sizes[2] = key length (each read only where it is
    // a runtime size; the shape's are the upper bounds). The tensors are dense at the runtime
    // sizes, so their outer strides are runtime values too: views with those strides.
    d.on = true;
    auto idxAt = [&](int64_t i) {
      Value v = memref::LoadOp::create(b, loc, args[kSizesArg], ValueRange{arith::ConstantIndexOp::create(b, loc, i)});
      return Value(arith::IndexCastOp::create(b, loc, b.getIndexType(), v));
    };
    auto cst = [&](int64_t v) { return Value(arith::ConstantIndexOp::create(b, loc, v)); };
    d.SQ = dims.m ? idxAt(0) : cst(p.SQ);
    d.B = dims.batch ? idxAt(1) : cst(p.B);
    d.SKV = dims.kv ? idxAt(2) : (dims.m && info.spec.seq_kv == info.spec.seq_q ? d.SQ : cst(p.SKV));
    Value bq = cst(p.BQ), bk = cst(p.BK);
    d.NQB = arith::DivUIOp::create(b, loc, arith::AddIOp::create(b, loc, d.SQ, cst(p.BQ - 1)), bq);
    d.NKB = arith::DivUIOp::create(b, loc, arith::AddIOp::create(b, loc, d.SKV, cst(p.BK - 1)), bk);
    d.nFull = arith::DivUIOp::create(b, loc, d.SKV, bk);
    d.kTail = arith::RemUIOp::create(b, loc, d.SKV, bk);
    d.off = arith::SubIOp::create(b, loc, d.SKV, d.SQ);
    auto view = [&](Value mem, Value seq) -> Value {
      auto mt = cast<MemRefType>(mem.getType());
      const int64_t heads = mt.getDimSize(1), hd = mt.getDimSize(3), dyn = ShapedType::kDynamic;
      Value rowStride = arith::MulIOp::create(b, loc, seq, cst(hd));
      Value headStride = arith::MulIOp::create(b, loc, rowStride, cst(heads));
      auto vt = MemRefType::get({dyn, heads, dyn, hd}, mt.getElementType(),
                                StridedLayoutAttr::get(ctx, 0, {dyn, dyn, hd, 1}));
      SmallVector<OpFoldResult> sizes = {d.B, b.getIndexAttr(heads), seq, b.getIndexAttr(hd)};
      SmallVector<OpFoldResult> strides = {headStride, rowStride, b.getIndexAttr(hd), b.getIndexAttr(1)};
      return memref::ReinterpretCastOp::create(b, loc, vt, mem, b.getIndexAttr(0), sizes, strides);
    };
    buf.Q = view(buf.Q, d.SQ);
    buf.O = view(buf.O, d.SQ);
    buf.K = view(buf.K, d.SKV);
    buf.V = view(buf.V, d.SKV);
  }
  // Scratch on the heap (the deallocation pipeline frees it; small buffers are promoted to the
  // stack): a large BQ x BK must not overflow a worker thread's stack.
  Type f32 = b.getF32Type();
  IntegerAttr align = b.getI64IntegerAttr(64);
  auto alloc = [&](ArrayRef<int64_t> shape) { return memref::AllocOp::create(b, loc, MemRefType::get(shape, f32), align).getResult(); };
  // Per-worker scratch: a leading dimension of one slice per thread (sliced in the parallel loop).
  auto scratch = [&](SmallVector<int64_t> shape) {
    if (p.threads > 1) shape.insert(shape.begin(), p.threads);
    return alloc(shape);
  };
  buf.Kp = scratch({p.NKB, p.D, p.BK});
  if (p.packV) buf.Vp = scratch({p.SKV, p.DP});
  buf.Qs = scratch({p.BQ, p.DP});
  buf.Sb = scratch({p.BQ, p.BK});
  buf.Acc = scratch({p.BQ, p.DP});
  buf.Mo = scratch({p.bqPad()});
  buf.Mn = scratch({p.bqPad()});
  buf.L = scratch({p.bqPad()});
  buf.Rs = scratch({p.bqPad()});
  buf.Al = scratch({p.bqPad()});

  if (d.on && p.causal) {
    // Causal attention needs seq_q <= seq_kv (rows without keys): other sizes write nothing (the
    // caller refuses them; the kernel never indexes outside its buffers).
    Value fits = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ule, d.SQ, d.SKV);
    auto guard = scf::IfOp::create(b, loc, TypeRange{}, fits, false);
    b.setInsertionPoint(guard.thenBlock()->getTerminator());
    KernelBuilder(b, loc, p, buf, d).build();
    b.setInsertionPointAfter(guard);
  } else {
    KernelBuilder(b, loc, p, buf, d).build();
  }
  func::ReturnOp::create(b, loc);
  out.threads = int(p.threads);
  return out;  // no schedule: the body already is loop + vector code on memrefs
}

}  // namespace tessera::codegen
