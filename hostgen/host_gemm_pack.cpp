// Owns the packing of the explicit host GEMM's operands (hostgen/host_gemm_blis.cpp builds the
// rest of the kernel): A's row panels, converted to f32 for the fma micro-kernel or kept as bf16
// rows for the dot and AMX ones, and B's column panels, f32 or interleaved bf16 pairs (VNNI), a
// transposed B read in vector squares and transposed in registers.
#include <algorithm>

#include "hostgen/host_gemm_blis.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace tessera::codegen::blis {

// Ap[panel][r][0:kc) = A[ic + panel·MR + r, pc : pc + kv) (zero past kv and past M), converted
// to f32 for the fma kernel. The panels of one block are packed in parallel.
void GemmBuilder::packA(Value ic, Rows mcb, Value pc, int64_t kv) {
  if (mcb.dyn) {
    // A row count known at run time: its panels, each row packed or zeroed past the count.
    Value np = arith::DivUIOp::create(b_, loc_, add(mcb.dyn, p_.MR - 1), idx(p_.MR));
    return parallel(np, [&](Value panel) {
      Value r0 = mul(panel, p_.MR);
      for (int64_t r = 0; r < p_.MR; ++r)
        ifThenElse(
            lt(add(r0, r), mcb.dyn), [&] { packARow(add(add(ic, r0), r), pc, kv, panel, r); },
            [&] {
              for (int64_t c = 0; c < p_.kcs; c += p_.VW)
                vector::StoreOp::create(b_, loc_, zeros(packVec()), Ap_, ValueRange{panel, idx(r), idx(c)});
            });
    });
  }
  const int64_t np = ceilDiv(mcb.n, p_.MR);
  parallel(np, [&](Value panel) {
    Value r0 = add(ic, mul(panel, p_.MR));
    // Rows of the last panel past M (static: mcb is) are zero.
    int64_t validLast = mcb.n - (np - 1) * p_.MR;
    auto rows = [&](int64_t valid) {
      for (int64_t r = 0; r < p_.MR; ++r) {
        if (r >= valid) {
          for (int64_t c = 0; c < p_.kcs; c += p_.VW) vector::StoreOp::create(b_, loc_, zeros(packVec()), Ap_, ValueRange{panel, idx(r), idx(c)});
          continue;
        }
        packARow(add(r0, r), pc, kv, panel, r);
      }
    };
    if (validLast == p_.MR) return rows(p_.MR);
    Value isLast = arith::CmpIOp::create(b_, loc_, arith::CmpIPredicate::eq, panel, idx(np - 1));
    ifThenElse(isLast, [&] { rows(validLast); }, [&] { rows(p_.MR); });
  });
}

VectorType GemmBuilder::packVec() { return VectorType::get({p_.VW}, cast<MemRefType>(Ap_.getType()).getElementType()); }

void GemmBuilder::packARow(Value row, Value pc, int64_t kv, Value panel, int64_t r) {
  VectorType pv = packVec();
  if (!p_.g.transA) {
    for (int64_t c = 0; c < p_.kcs; c += p_.VW) {
      if (c >= kv) {
        vector::StoreOp::create(b_, loc_, zeros(pv), Ap_, ValueRange{panel, idx(r), idx(c)});
        continue;
      }
      Value v = readRow(A_, at(row, add(pc, c)), p_.VW);
      if (kv - c < p_.VW) v = arith::SelectOp::create(b_, loc_, mask(p_.VW, kv - c), v, zeros(cast<VectorType>(v.getType())));
      if (pv.getElementType().isF32()) v = toF32(v);
      vector::StoreOp::create(b_, loc_, v, Ap_, ValueRange{panel, idx(r), idx(c)});
    }
    return;
  }
  // A stored K x M: a strided column, element by element (the layout the micro-kernel reads is
  // the same; transposed inputs pay this O(M·K) gather once per K block).
  for (int64_t c = kv; c < p_.kcs; c += 1) memref::StoreOp::create(b_, loc_, zeroScalar(), Ap_, ValueRange{panel, idx(r), idx(c)});
  loop(0, kv, 1, [&](Value kk) {
    Value v = memref::LoadOp::create(b_, loc_, A_, at(add(pc, kk), row));
    memref::StoreOp::create(b_, loc_, scalarToPack(v), Ap_, ValueRange{panel, idx(r), kk});
  });
}

Value GemmBuilder::zeroScalar() {
  Type t = cast<MemRefType>(Ap_.getType()).getElementType();
  return arith::ConstantOp::create(b_, loc_, b_.getZeroAttr(t));
}

Value GemmBuilder::scalarToPack(Value v) {
  Type t = cast<MemRefType>(Ap_.getType()).getElementType();
  return v.getType() == t ? v : Value(arith::ExtFOp::create(b_, loc_, t, v));
}

// Bp[slot + panel q][k][0:NR) = B[pc + k, jc + q·NR ...] for the panels of one column block,
// zero past kv and past N; dot/amx interleave rows k, k+1 into pairs (VNNI layout).
void GemmBuilder::packB(Value jc, int64_t ncb, Value pc, int64_t kv) {
  if (p_.mk == Micro::Fma && !p_.g.transB) return packBByRows(jc, ncb, pc, kv);
  const int64_t np = ceilDiv(ncb, p_.NR);
  Value q0 = bq0_;  // this worker's slot
  auto panel = [&](Value q, int64_t validCols) {
    Value jp = add(q0, q);
    Value n0 = add(jc, mul(q, p_.NR));
    if (p_.mk == Micro::Fma) {  // B stored N x K here (K x N: packBByRows)
      auto row = [&](Value kk, bool zero) {
        for (int64_t c = 0; c < p_.NR; c += p_.VW) {
          Value v;
          if (zero || c >= validCols) v = zeros(vf_);
          else v = gatherB(pc, kk, n0, c, std::min(p_.VW, validCols - c), f32_);
          vector::StoreOp::create(b_, loc_, v, Bp_, ValueRange{jp, kk, idx(c)});
        }
      };
      // Whole VW x VW squares are read along K (one vector per column of B) and transposed in
      // registers; the rest (a depth tail, a column tail) element by element.
      const int64_t sq = kv / p_.VW * p_.VW;
      if (sq > 0)
        loop(0, sq / p_.VW, 1, [&](Value g) {
          Value k0 = mul(g, p_.VW);
          for (int64_t c = 0; c < p_.NR; c += p_.VW) {
            if (c + p_.VW > validCols) {
              for (int64_t i = 0; i < p_.VW; ++i) {
                Value kk = add(k0, i);
                Value v = c >= validCols ? zeros(vf_) : gatherB(pc, kk, n0, c, validCols - c, f32_);
                vector::StoreOp::create(b_, loc_, v, Bp_, ValueRange{jp, kk, idx(c)});
              }
              continue;
            }
            SmallVector<Value> rows;
            for (int64_t j = 0; j < p_.VW; ++j) rows.push_back(toF32(readRow(B_, at(add(n0, c + j), add(pc, k0)), p_.VW)));
            rows = transposeSquare(rows);
            for (int64_t i = 0; i < p_.VW; ++i) vector::StoreOp::create(b_, loc_, rows[i], Bp_, ValueRange{jp, add(k0, i), idx(c)});
          }
        });
      loop(sq, kv, 1, [&](Value kk) { row(kk, false); });
      loop(kv, p_.kc, 1, [&](Value kk) { row(kk, true); });
      return;
    }
    // Pairs: Bp[jp][kq][2n + t] = B[pc + 2kq + t][n0 + n].
    auto vbf = VectorType::get({p_.VW}, inT_);
    auto pairRow = [&](Value kq, int64_t validRows) {  // rows 2kq (+1) valid when validRows > 0 (> 1)
      Value k0 = add(pc, mul(kq, 2));
      for (int64_t c = 0; c < p_.NR; c += p_.VW) {
        Value v0 = zeros(vbf), v1 = zeros(vbf);
        if (c < validCols) {
          int64_t vc = std::min(p_.VW, validCols - c);
          auto rowAt = [&](Value k) {
            return p_.g.transB ? gatherB(pc, arith::SubIOp::create(b_, loc_, k, pc), n0, c, vc, inT_)
                               : readRow(B_, at(k, add(n0, c)), p_.VW);
          };
          if (validRows > 0) v0 = rowAt(k0);
          if (validRows > 1) v1 = rowAt(add(k0, 1));
        }
        Value both = vector::InterleaveOp::create(b_, loc_, v0, v1);
        vector::StoreOp::create(b_, loc_, both, Bp_, ValueRange{jp, kq, idx(2 * c)});
      }
    };
    loop(0, kv / 2, 1, [&](Value kq) { pairRow(kq, 2); });
    if (kv % 2) pairRow(idx(kv / 2), 1);
    loop(ceilDiv(kv, 2), p_.kc / 2, 1, [&](Value kq) { pairRow(kq, 0); });
  };
  const int64_t full = ncb / p_.NR;
  loop(0, full, 1, [&](Value q) { panel(q, p_.NR); });
  if (np > full) panel(idx(full), ncb - full * p_.NR);
}

// packB for the fma kernel of a B stored K x N, row by row of B: each row's NC columns (contiguous)
// go to the block's panels in turn, and the row kPrefetchRows ahead is prefetched as it goes. By
// panels (each panel's KC rows, then the next panel) every row of B is a page of its own once N
// passes 1024: each panel visits KC pages for NR columns, which no prefetcher follows across pages.
// Few rows of A do too little with a block of B to hide that (two Zen 5 cores, `tessera run
// --threads 2`, 64x4096x4096: 8.0-8.4 ms by panels, 6.1 by rows with the prefetch, 6.7 without it;
// one thread 12.6-13.2 against 11.2-11.4); the cubes tie (1024^3, 2048^3 on one and two threads).
void GemmBuilder::packBByRows(Value jc, int64_t ncb, Value pc, int64_t kv) {
  const int64_t np = ceilDiv(ncb, p_.NR), full = ncb / p_.NR;
  const int64_t elem = std::max<int64_t>(1, cast<MemRefType>(B_.getType()).getElementTypeBitWidth() / 8);
  const int64_t line = std::max<int64_t>(1, 64 / elem);
  Value q0 = bq0_;  // this worker's slot
  Value lastRow = add(pc, std::max<int64_t>(0, kv - 1));
  auto part = [&](Value kk, Value q, int64_t validCols) {
    Value jp = add(q0, q), n0 = add(jc, mul(q, p_.NR));
    if (kv > kPrefetchRows) {
      Value ahead = arith::MinUIOp::create(b_, loc_, add(add(pc, kk), kPrefetchRows), lastRow);
      for (int64_t c = 0; c < validCols; c += line)
        memref::PrefetchOp::create(b_, loc_, B_, at(ahead, add(n0, c)), /*isWrite=*/false, /*locality=*/3,
                                   /*isDataCache=*/true);
    }
    for (int64_t c = 0; c < p_.NR; c += p_.VW) {
      Value v = c >= validCols ? zeros(vf_) : toF32(readRow(B_, at(add(pc, kk), add(n0, c)), p_.VW));
      vector::StoreOp::create(b_, loc_, v, Bp_, ValueRange{jp, kk, idx(c)});
    }
  };
  loop(0, kv, 1, [&](Value kk) {
    loop(0, full, 1, [&](Value q) { part(kk, q, p_.NR); });
    if (np > full) part(kk, idx(full), ncb - full * p_.NR);
  });
  // Depth past kv (the last K block's short panel): zero, never stale memory times zero lanes of A.
  if (kv < p_.kc)
    loop(0, np, 1, [&](Value q) {
      loop(kv, p_.kc, 1, [&](Value kk) {
        for (int64_t c = 0; c < p_.NR; c += p_.VW) vector::StoreOp::create(b_, loc_, zeros(vf_), Bp_, ValueRange{add(q0, q), kk, idx(c)});
      });
    });
}

// The transpose of the square whose rows are `r` (n vectors of n lanes, n a power of two), in
// log2(n) rounds of two-source shuffles: the round of distance d swaps, in every 2d x 2d block,
// the top-right d x d block with the bottom-left one (x86: unpack and lane permutes).
SmallVector<Value> GemmBuilder::transposeSquare(SmallVector<Value> r) {
  const int64_t n = int64_t(r.size());
  for (int64_t d = 1; d < n; d *= 2)
    for (int64_t i = 0; i < n; ++i) {
      if (i & d) continue;
      SmallVector<int64_t> lo, hi;  // rows i and i + d after the round
      for (int64_t c = 0; c < n; ++c) {
        lo.push_back(c & d ? n + c - d : c);
        hi.push_back(c & d ? n + c : c + d);
      }
      Value a = r[i], b = r[i + d];
      r[i] = vector::ShuffleOp::create(b_, loc_, a, b, lo);
      r[i + d] = vector::ShuffleOp::create(b_, loc_, a, b, hi);
    }
  return r;
}

// B stored N x K: `valid` columns of row k of the logical B, element by element.
Value GemmBuilder::gatherB(Value pc, Value kk, Value n0, int64_t c, int64_t valid, Type to) {
  auto vt = VectorType::get({p_.VW}, to);
  Value v = zeros(vt);
  for (int64_t j = 0; j < valid; ++j) {
    Value e = memref::LoadOp::create(b_, loc_, B_, at(add(n0, c + j), add(pc, kk)));
    if (e.getType() != to) e = arith::ExtFOp::create(b_, loc_, to, e);
    v = vector::InsertOp::create(b_, loc_, e, v, ArrayRef<int64_t>{j});
  }
  return v;
}

}  // namespace tessera::codegen::blis
