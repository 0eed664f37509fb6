// Owns the pieces of the host FlashAttention kernel: loop helpers, our exp2, the two register-tiled
// micro-kernels (S = Qs·Kp and Acc += P·V) and the online-softmax row step. Each is a one-to-one
// port of mlir-recipes/cpu-flash-attention/gen.py, generalized to any D, sequence length and VW.
#include "hostgen/host_attention_kernels.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace tessera::codegen::attn {

using namespace mlir;

namespace {

// Cephes exp2f polynomial on [-0.5, 0.5], highest degree first (gen.py).
constexpr double kExp2Poly[] = {1.535336188319500e-4, 1.339887440266574e-3, 9.618437357674640e-3,
                                5.550332471162809e-2, 2.402264791363012e-1, 6.931472028550421e-1, 1.0};

// Masked scores. Not -inf: m_old - m_new would be -inf - (-inf) = NaN (REPORT pitfall 3).
constexpr float kMaskValue = -1.0e30f;

}  // namespace

Emitter::Emitter(OpBuilder& b, Location loc, const Plan& p, const Buffers& buf)
    : b_(b), loc_(loc), p_(p), buf_(buf) {
  vf32_ = VectorType::get({p.VW}, b.getF32Type());
  vi32_ = VectorType::get({p.VW}, b.getI32Type());
  fm_ = arith::FastMathFlagsAttr::get(b.getContext(), arith::FastMathFlags::fast);
}

// ---------------------------------------------------------------- helpers

Value Emitter::idx(int64_t v) { return arith::ConstantIndexOp::create(b_, loc_, v); }
Value Emitter::addi(Value x, int64_t c) { return c == 0 ? x : addi(x, idx(c)); }
Value Emitter::addi(Value x, Value y) { return arith::AddIOp::create(b_, loc_, x, y); }
Value Emitter::subi(Value x, Value y) { return arith::SubIOp::create(b_, loc_, x, y); }
Value Emitter::muli(Value x, int64_t c) { return arith::MulIOp::create(b_, loc_, x, idx(c)); }
Value Emitter::mini(Value x, Value y) { return arith::MinSIOp::create(b_, loc_, x, y); }

Value Emitter::splat(float v) {
  return arith::ConstantOp::create(b_, loc_, DenseElementsAttr::get(vf32_, llvm::ArrayRef<float>(v)));
}

Value Emitter::toF32(Value x) {
  if (p_.dtype == ir::ScalarType::F32) return x;
  Type to = b_.getF32Type();
  if (auto vt = dyn_cast<VectorType>(x.getType())) to = VectorType::get(vt.getShape(), to);
  return arith::ExtFOp::create(b_, loc_, to, x);
}

Value Emitter::fromF32(Value x) {
  if (p_.dtype == ir::ScalarType::F32) return x;
  Type to = p_.dtype == ir::ScalarType::F16 ? Type(b_.getF16Type()) : Type(b_.getBF16Type());
  if (auto vt = dyn_cast<VectorType>(x.getType())) to = VectorType::get(vt.getShape(), to);
  return arith::TruncFOp::create(b_, loc_, to, x);
}

SmallVector<Value> Emitter::loop(Value lb, Value ub, int64_t step, ValueRange init, const Body& body) {
  auto f = scf::ForOp::create(b_, loc_, lb, ub, idx(step), init);
  OpBuilder::InsertionGuard g(b_);
  Block* blk = f.getBody();
  if (init.empty()) b_.setInsertionPoint(blk->getTerminator());
  else b_.setInsertionPointToStart(blk);
  SmallVector<Value> res = body(f.getInductionVar(), f.getRegionIterArgs());
  if (!init.empty()) scf::YieldOp::create(b_, loc_, res);
  return SmallVector<Value>(f.getResults().begin(), f.getResults().end());
}

void Emitter::loop(Value lb, Value ub, int64_t step, const std::function<void(Value)>& body) {
  loop(lb, ub, step, ValueRange{}, [&](Value iv, ValueRange) {
    body(iv);
    return SmallVector<Value>{};
  });
}

void Emitter::loop(int64_t lb, int64_t ub, int64_t step, const std::function<void(Value)>& body) {
  if (ub <= lb) return;
  loop(idx(lb), idx(ub), step, body);
}

void Emitter::tiles2D(int64_t rows, int64_t mr, int64_t cols, int64_t nr,
                      const std::function<void(Value, int64_t, Value, int64_t)>& tile) {
  const int64_t rm = rows / mr * mr, cm = cols / nr * nr;
  auto rowOfTiles = [&](Value r0, int64_t m) {
    loop(0, cm, nr, [&](Value c0) { tile(r0, m, c0, nr); });
    if (cols > cm) tile(r0, m, idx(cm), cols - cm);
  };
  loop(0, rm, mr, [&](Value r0) { rowOfTiles(r0, mr); });
  if (rows > rm) rowOfTiles(idx(rm), rows - rm);
}

SmallVector<Value> Emitter::unrolled(KeyCount count, int64_t u, SmallVector<Value> accs, const Step& step) {
  auto group = [&](int64_t n) {
    return [&, n](Value iv, ValueRange args) {
      SmallVector<Value> a(args.begin(), args.end());
      for (int64_t j = 0; j < n; ++j) step(addi(iv, j), a);
      return a;
    };
  };
  if (!count.dynamic) {
    const int64_t main = count.fixed / u * u;
    if (main > 0) accs = loop(idx(0), idx(main), u, accs, group(u));
    for (int64_t k = main; k < count.fixed; ++k) step(idx(k), accs);
    return accs;
  }
  Value mainEnd = count.dynamic;
  if (u > 1) {
    mainEnd = subi(count.dynamic, arith::RemUIOp::create(b_, loc_, count.dynamic, idx(u)));
    accs = loop(idx(0), mainEnd, u, accs, group(u));
  }
  return loop(u > 1 ? mainEnd : idx(0), count.dynamic, 1, accs, group(1));
}

Value Emitter::exp2(Value x) {
  // Clamping at -127 makes masked scores (-1e30) and alpha of the first block exactly 0: n = -127
  // gives exponent bits 0. Everything above stays in the normal range except the (-126.5, -126)
  // band, which real score differences never reach in practice.
  Value t = arith::MaxNumFOp::create(b_, loc_, x, splat(-127.0f), fm_);
  Value n = math::RoundEvenOp::create(b_, loc_, t, fm_);
  Value f = arith::SubFOp::create(b_, loc_, t, n, fm_);
  Value poly = splat(float(kExp2Poly[0]));
  for (size_t i = 1; i < std::size(kExp2Poly); ++i)
    poly = vector::FMAOp::create(b_, loc_, poly, f, splat(float(kExp2Poly[i])));
  auto i32splat = [&](int32_t v) {
    return arith::ConstantOp::create(b_, loc_, DenseElementsAttr::get(vi32_, llvm::ArrayRef<int32_t>(v)));
  };
  Value ni = arith::FPToSIOp::create(b_, loc_, vi32_, n);
  Value bits = arith::ShLIOp::create(b_, loc_, arith::AddIOp::create(b_, loc_, ni, i32splat(127)), i32splat(23));
  Value scale = arith::BitcastOp::create(b_, loc_, vf32_, bits);
  return arith::MulFOp::create(b_, loc_, poly, scale, fm_);
}

// ---------------------------------------------------------------- S = Qs · Kp[kb]

void Emitter::scores(Value kb, int64_t cols) {
  tiles2D(p_.BQ, p_.MR1, cols, p_.NR1,
          [&](Value r0, int64_t m, Value c0, int64_t n) { scoreTile(kb, r0, m, c0, n / p_.VW); });
}

// MR1 x NR1 register tile over the d loop: per d, NR1/VW Kp vectors, MR1 broadcasts of Qs and
// MR1·NR1/VW FMAs — the GEMM inner loop (Kp rows are contiguous: K was packed per key block).
void Emitter::scoreTile(Value kb, Value r0, int64_t mr, Value c0, int64_t nv) {
  SmallVector<Value> rows, cols;
  for (int64_t r = 0; r < mr; ++r) rows.push_back(addi(r0, r));
  for (int64_t c = 0; c < nv; ++c) cols.push_back(addi(c0, c * p_.VW));
  SmallVector<Value> accs(size_t(mr * nv), splat(0.0f));
  accs = unrolled(KeyCount{p_.D, {}}, p_.U1, accs, [&](Value d, SmallVector<Value>& a) {
    SmallVector<Value> kv;
    for (int64_t c = 0; c < nv; ++c) kv.push_back(vector::LoadOp::create(b_, loc_, vf32_, buf_.Kp, ValueRange{kb, d, cols[c]}));
    for (int64_t r = 0; r < mr; ++r) {
      Value q = memref::LoadOp::create(b_, loc_, buf_.Qs, ValueRange{rows[r], d});
      Value qb = vector::BroadcastOp::create(b_, loc_, vf32_, q);
      for (int64_t c = 0; c < nv; ++c) a[r * nv + c] = vector::FMAOp::create(b_, loc_, qb, kv[c], a[r * nv + c]);
    }
  });
  for (int64_t r = 0; r < mr; ++r)
    for (int64_t c = 0; c < nv; ++c) vector::StoreOp::create(b_, loc_, accs[r * nv + c], buf_.Sb, ValueRange{rows[r], cols[c]});
}

// ---------------------------------------------------------------- online softmax

namespace {

Value reduceTree(OpBuilder& b, Location loc, SmallVector<Value> v, bool isMax, arith::FastMathFlagsAttr fm) {
  while (v.size() > 1) {
    SmallVector<Value> next;
    for (size_t i = 0; i + 1 < v.size(); i += 2)
      next.push_back(isMax ? Value(arith::MaxNumFOp::create(b, loc, v[i], v[i + 1], fm))
                           : Value(arith::AddFOp::create(b, loc, v[i], v[i + 1], fm)));
    if (v.size() % 2) next.push_back(v.back());
    v = std::move(next);
  }
  return v[0];
}

}  // namespace

void Emitter::softmax(int64_t chunks, const BlockMask& mask) {
  const int64_t VW = p_.VW;
  Value masked = splat(kMaskValue);
  loop(0, p_.BQ, 1, [&](Value si) {
    Value limit;  // vector of the last visible column for this row
    if (mask.causalLimit) {
      Value l = addi(mask.causalLimit, si);
      if (mask.colLimit) l = mini(l, mask.colLimit);
      Value l32 = arith::IndexCastOp::create(b_, loc_, b_.getI32Type(), l);
      limit = vector::BroadcastOp::create(b_, loc_, vi32_, l32);
    }
    SmallVector<Value> s;
    for (int64_t c = 0; c < chunks; ++c) {
      Value x = vector::LoadOp::create(b_, loc_, vf32_, buf_.Sb, ValueRange{si, idx(c * VW)});
      if (limit) {
        SmallVector<int32_t> iota;
        for (int64_t t = 0; t < VW; ++t) iota.push_back(int32_t(c * VW + t));
        Value io = arith::ConstantOp::create(b_, loc_, DenseElementsAttr::get(vi32_, llvm::ArrayRef<int32_t>(iota)));
        Value m = arith::CmpIOp::create(b_, loc_, arith::CmpIPredicate::sle, io, limit);
        x = arith::SelectOp::create(b_, loc_, m, x, masked);
      }
      if (mask.validCols > 0 && (c + 1) * VW > mask.validCols) {
        SmallVector<bool> keep;
        for (int64_t t = 0; t < VW; ++t) keep.push_back(c * VW + t < mask.validCols);
        auto mt = VectorType::get({VW}, b_.getI1Type());
        Value m = arith::ConstantOp::create(b_, loc_, DenseElementsAttr::get(mt, llvm::ArrayRef<bool>(keep)));
        x = arith::SelectOp::create(b_, loc_, m, x, masked);
      }
      s.push_back(x);
    }
    Value mxv = reduceTree(b_, loc_, s, true, fm_);
    Value mx = vector::ReductionOp::create(b_, loc_, vector::CombiningKind::MAXNUMF, mxv, arith::FastMathFlags::fast);
    Value mo = memref::LoadOp::create(b_, loc_, buf_.Mo, ValueRange{si});
    Value mn = arith::MaxNumFOp::create(b_, loc_, mo, mx, fm_);
    memref::StoreOp::create(b_, loc_, mn, buf_.Mn, ValueRange{si});
    Value mb = vector::BroadcastOp::create(b_, loc_, vf32_, mn);
    SmallVector<Value> ps;
    for (int64_t c = 0; c < chunks; ++c) {
      Value pe = exp2(arith::SubFOp::create(b_, loc_, s[size_t(c)], mb, fm_));
      vector::StoreOp::create(b_, loc_, pe, buf_.Sb, ValueRange{si, idx(c * VW)});
      ps.push_back(pe);
    }
    Value sum = reduceTree(b_, loc_, ps, false, fm_);
    Value rs = vector::ReductionOp::create(b_, loc_, vector::CombiningKind::ADD, sum, arith::FastMathFlags::fast);
    memref::StoreOp::create(b_, loc_, rs, buf_.Rs, ValueRange{si});
  });
  // alpha = exp2(m_old - m_new), l = l·alpha + rowsum, m_old = m_new: vectorized over rows, so no
  // scalar exp per row (REPORT pitfall 5). Padding rows hold -1e30 / 0 and stay inert.
  for (int64_t c = 0; c < p_.bqPad(); c += VW) {
    Value at = idx(c);
    Value mo = vector::LoadOp::create(b_, loc_, vf32_, buf_.Mo, ValueRange{at});
    Value mn = vector::LoadOp::create(b_, loc_, vf32_, buf_.Mn, ValueRange{at});
    Value al = exp2(arith::SubFOp::create(b_, loc_, mo, mn, fm_));
    Value l = vector::LoadOp::create(b_, loc_, vf32_, buf_.L, ValueRange{at});
    Value rs = vector::LoadOp::create(b_, loc_, vf32_, buf_.Rs, ValueRange{at});
    vector::StoreOp::create(b_, loc_, vector::FMAOp::create(b_, loc_, l, al, rs), buf_.L, ValueRange{at});
    vector::StoreOp::create(b_, loc_, mn, buf_.Mo, ValueRange{at});
    vector::StoreOp::create(b_, loc_, al, buf_.Al, ValueRange{at});
  }
}

// ---------------------------------------------------------------- Acc = Acc·Al + P · V

void Emitter::accumulate(Value bi, Value hk, Value kk0, KeyCount n) {
  tiles2D(p_.BQ, p_.MR2, p_.DP, p_.NR2,
          [&](Value r0, int64_t m, Value c0, int64_t nc) { accTile(bi, hk, kk0, n, r0, m, c0, nc / p_.VW); });
}

Value Emitter::loadV(Value bi, Value hk, Value key, Value col) {
  if (p_.packV) return vector::LoadOp::create(b_, loc_, vf32_, buf_.Vp, ValueRange{key, col});
  return vector::LoadOp::create(b_, loc_, vf32_, buf_.V, ValueRange{bi, hk, key, col});
}

// MR2 x NR2 register tile over the key loop: Acc is loaded and rescaled by alpha once per key
// block, then per key NR2/VW row vectors of V (unpacked: rows of V already are the vectors),
// MR2 broadcasts of P and MR2·NR2/VW FMAs.
void Emitter::accTile(Value bi, Value hk, Value kk0, KeyCount n, Value r0, int64_t mr, Value c0, int64_t nv) {
  SmallVector<Value> rows, cols, accs;
  for (int64_t r = 0; r < mr; ++r) rows.push_back(addi(r0, r));
  for (int64_t c = 0; c < nv; ++c) cols.push_back(addi(c0, c * p_.VW));
  for (int64_t r = 0; r < mr; ++r) {
    Value al = vector::BroadcastOp::create(b_, loc_, vf32_, memref::LoadOp::create(b_, loc_, buf_.Al, ValueRange{rows[r]}));
    for (int64_t c = 0; c < nv; ++c) {
      Value a = vector::LoadOp::create(b_, loc_, vf32_, buf_.Acc, ValueRange{rows[r], cols[c]});
      accs.push_back(arith::MulFOp::create(b_, loc_, a, al, fm_));
    }
  }
  accs = unrolled(n, p_.U2, accs, [&](Value k, SmallVector<Value>& a) {
    Value key = addi(kk0, k);
    SmallVector<Value> vv;
    for (int64_t c = 0; c < nv; ++c) vv.push_back(loadV(bi, hk, key, cols[c]));
    for (int64_t r = 0; r < mr; ++r) {
      Value pr = vector::BroadcastOp::create(b_, loc_, vf32_, memref::LoadOp::create(b_, loc_, buf_.Sb, ValueRange{rows[r], k}));
      for (int64_t c = 0; c < nv; ++c) a[r * nv + c] = vector::FMAOp::create(b_, loc_, pr, vv[c], a[r * nv + c]);
    }
  });
  for (int64_t r = 0; r < mr; ++r)
    for (int64_t c = 0; c < nv; ++c) vector::StoreOp::create(b_, loc_, accs[r * nv + c], buf_.Acc, ValueRange{rows[r], cols[c]});
}

}  // namespace tessera::codegen::attn
