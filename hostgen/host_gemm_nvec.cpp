// Owns the host GEMM for few rows (schedule `nvec`): vectors along N with every row of C for a
// strip of columns held in registers across all of K, so B (stored K x N) streams from memory
// once, read in place, and A (either layout) is broadcast from where it lies. Nothing is packed:
// with M <= 16 a packed A panel is reused by too few columns to pay for its copy, and packing B
// costs as much as the one pass over it that the product needs; up to kNvecMaxM rows it also
// serves the small GEMMs whose operands fit the L1.
//
//   One row tile over a B past the L2 (few rows, big B): for K blocks of KC, the strips below
//   each over its block only, the sums kept between blocks in an f32 copy of C.
//   for b, [parallel] chunks of column strips of NV vectors (then the partial last strip):
//     for row tiles of MR rows (a loop; then the partial last tile):
//       MR x NV accumulators, NV vectors of B held while MR elements of A are broadcast; one
//       tile: over all of K. Several: over blocks of KC, the first tile copying the strip of B
//       it reads into an L1 scratch (KC x NV vectors) that the later tiles read: B's rows are N
//       apart, which at power-of-two N maps the whole strip onto a few cache sets, so re-reading
//       B in place would come from the L3.
//
// The partial last strip's last vector is masked: its loads are zero past N and its epilogue and
// stores are exactly the valid lanes. This is the small-M path BLIS and libxsmm special-case.
// Several threads share the column strips, or, with at least as many rows as columns or at most
// kNvecNarrowN columns, the rows
// (each thread every strip over its share of whole row tiles, with its own copy of B's strip).
// Knobs: MR (rows per tile), NV (vectors per strip), KC (depth block with several row tiles, or
// with one over a B past the L2), KU (unroll of the K loop), THREADS.
#include <algorithm>

#include "codegen/codegen.h"
#include "hostgen/host_gemm_nvec.h"
#include "hostgen/host_strategies.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace tessera::codegen {

using namespace mlir;

namespace {

struct NvecPlan {
  ir::GemmInfo g;
  int64_t VW = 8, MR = 4, NV = 1, KU = 1, KC = 256, threads = 1;
};

class NvecBuilder {
 public:
  NvecBuilder(OpBuilder& b, Location loc, const NvecPlan& p, std::map<std::string, Value>& args, int64_t l1Bytes,
              int64_t l2Bytes)
      : b_(b), loc_(loc), p_(p), args_(args) {
    l1Bytes_ = std::max<int64_t>(4096, l1Bytes);
    l2Bytes_ = l2Bytes > 0 ? l2Bytes : l2Bytes_;
    f32_ = b.getF32Type();
    vf_ = VectorType::get({p.VW}, f32_);
  }

  Status build() {
    const ir::GemmInfo& g = p_.g;
    A_ = args_[g.a];
    B_ = args_[g.b];
    C_ = args_[g.c];
    const int64_t width = p_.NV * p_.VW, strips = g.n / width, rest = g.n % width;
    // At least as many rows as columns, or few columns (few strips to share: fewer than the
    // threads, or not a multiple of them, and the partial last one run by one thread), and rows
    // enough for two row tiles per thread: the threads split the rows instead, each running every
    // strip over its own share (a multiple of MR). Two threads, strips against rows (one Sapphire
    // Rapids VM): 100x176x2000 327 / 270 us, 96x100x4096 637 / 375, 80x120x800 72 / 50.
    rowSplit_ = p_.threads > 1 && (g.m >= g.n || g.n <= kNvecNarrowN) && g.m >= 2 * p_.threads * p_.MR;
    const int64_t chunks = rowSplit_ ? p_.threads : std::max<int64_t>(1, std::min(p_.threads, strips));
    rowsPer_ = rowSplit_ ? (g.m + p_.threads - 1) / p_.threads : g.m;
    rowsPer_ = rowSplit_ ? (rowsPer_ + p_.MR - 1) / p_.MR * p_.MR : rowsPer_;
    rowsM_ = rowsPer_;
    rowBase_ = idx(0);
    multiTile_ = g.m > p_.MR;
    kc_ = std::min(p_.KC, g.k);
    // The later row tiles read B in place when all of it sits in half the L1 (a few KB: the
    // small GEMMs libxsmm serves), else the copy the first tile made of the strip.
    const int64_t bBytes = g.k * g.n * int64_t(cast<MemRefType>(B_.getType()).getElementTypeBitWidth() / 8);
    copyB_ = multiTile_ && bBytes > l1Bytes_ / 2;
    // One row tile over a B past the L2 (3x4096x1024: 16 MB): a strip walked down all of K reads
    // one line from each of K pages, which the prefetchers do not follow (0.67x OpenBLAS). With
    // the K blocks outside the strips, the strips of one block read KC pages left to right, and
    // the sums wait between blocks in an f32 copy of C.
    kOuter_ = !multiTile_ && g.k > kc_ && bBytes > l2Bytes_;
    if (kOuter_)
      cacc_ = memref::AllocOp::create(b_, loc_, MemRefType::get({g.m, (g.n + p_.VW - 1) / p_.VW * p_.VW}, f32_),
                                      b_.getI64IntegerAttr(64))
                  .getResult();
    if (multiTile_) {
      auto alloc = [&](int64_t rows) {
        return memref::AllocOp::create(b_, loc_, MemRefType::get({chunks, rows, width}, f32_), b_.getI64IntegerAttr(64))
            .getResult();
      };
      if (copyB_) scratch_ = alloc(kc_);
      // Two copies of the sums, the K blocks taking turns (strip()): kept in one place, LLVM
      // holds every row tile's sums in registers across the blocks and reloads them from the
      // stack inside the K loop once they outnumber the registers.
      if (g.k > kc_) ctile_ = alloc(2 * g.m);
    }
    auto batchBody = [&](Value bi) {
      bi_ = bi;
      if (rowSplit_) return rowChunks(strips, width, rest);
      if (strips > 0) fullStrips(strips, chunks, width);
      if (!rest) return;
      const int64_t nv = (rest + p_.VW - 1) / p_.VW, lastValid = rest - (rest - 1) / p_.VW * p_.VW;
      if (kOuter_) kBlocksOutside([&](const StripFn& body) { body(idx(strips * width), nv, lastValid); });
      else strip(idx(strips * width), nv, lastValid, idx(0));
    };
    if (g.batch) loop(idx(0), idx(g.batch), 1, batchBody);
    else batchBody(Value());
    return error_;
  }

 private:
  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b_, loc_, v); }
  Value add(Value x, int64_t c) { return c == 0 ? x : Value(arith::AddIOp::create(b_, loc_, x, idx(c))); }
  Value zeros(VectorType t) {
    return arith::ConstantOp::create(b_, loc_, DenseElementsAttr::get(t, b_.getZeroAttr(t.getElementType())));
  }
  SmallVector<Value> at(Value r, Value c) {
    SmallVector<Value> ix;
    if (bi_) ix.push_back(bi_);
    ix.push_back(r);
    ix.push_back(c);
    return ix;
  }
  void loop(Value lb, Value ub, int64_t step, const std::function<void(Value)>& body) {
    auto f = scf::ForOp::create(b_, loc_, lb, ub, idx(step));
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPoint(f.getBody()->getTerminator());
    body(f.getInductionVar());
  }
  Value toF32(Value v) {
    auto vt = dyn_cast<VectorType>(v.getType());
    if (!vt) return v.getType().isF32() ? v : Value(arith::ExtFOp::create(b_, loc_, f32_, v));
    if (vt.getElementType().isF32()) return v;
    return arith::ExtFOp::create(b_, loc_, VectorType::get(vt.getShape(), f32_), v);
  }
  Value mask(int64_t n, int64_t valid) {
    SmallVector<bool> m;
    for (int64_t i = 0; i < n; ++i) m.push_back(i < valid);
    auto mt = VectorType::get({n}, b_.getI1Type());
    return arith::ConstantOp::create(b_, loc_, DenseElementsAttr::get(mt, ArrayRef<bool>(m)));
  }

  // The strips [0, strips): split into `chunks` contiguous runs, one per thread when there are several.
  void fullStrips(int64_t strips, int64_t chunks, int64_t width) {
    const int64_t per = (strips + chunks - 1) / chunks;
    auto chunk = [&](Value t) {
      Value lb = arith::MulIOp::create(b_, loc_, t, idx(per));
      Value ub = arith::MinSIOp::create(b_, loc_, add(lb, per), idx(strips));
      auto col = [&](Value s) { return Value(arith::MulIOp::create(b_, loc_, s, idx(width))); };
      if (kOuter_)
        return kBlocksOutside([&](const StripFn& body) { loop(lb, ub, 1, [&](Value s) { body(col(s), p_.NV, p_.VW); }); });
      loop(lb, ub, 1, [&](Value s) { strip(col(s), p_.NV, p_.VW, t); });
    };
    if (chunks <= 1) return chunk(idx(0));
    auto par = scf::ParallelOp::create(b_, loc_, ValueRange{idx(0)}, ValueRange{idx(chunks)}, ValueRange{idx(1)});
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPoint(par.getBody()->getTerminator());
    chunk(par.getInductionVars()[0]);
  }

  // Row split: thread t runs every strip (the full ones, then the partial last) over rows
  // [t * rowsPer_, ...): rowsPer_ of them, the last thread the rest; its scratch slot is t.
  void rowChunks(int64_t strips, int64_t width, int64_t rest) {
    const int64_t T = (p_.g.m + rowsPer_ - 1) / rowsPer_, last = p_.g.m - (T - 1) * rowsPer_;  // T <= threads
    auto par = scf::ParallelOp::create(b_, loc_, ValueRange{idx(0)}, ValueRange{idx(T)}, ValueRange{idx(1)});
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPoint(par.getBody()->getTerminator());
    Value t = par.getInductionVars()[0];
    auto chunk = [&](int64_t rows) {
      rowBase_ = arith::MulIOp::create(b_, loc_, t, idx(rowsPer_));
      rowsM_ = rows;
      if (strips > 0)
        loop(idx(0), idx(strips), 1, [&](Value s) { strip(arith::MulIOp::create(b_, loc_, s, idx(width)), p_.NV, p_.VW, t); });
      if (rest) strip(idx(strips * width), (rest + p_.VW - 1) / p_.VW, rest - (rest - 1) / p_.VW * p_.VW, t);
      rowBase_ = idx(0);
      rowsM_ = rowsPer_;
    };
    if (last == rowsPer_) return chunk(rowsPer_);
    Value isLast = arith::CmpIOp::create(b_, loc_, arith::CmpIPredicate::eq, t, idx(T - 1));
    auto op = scf::IfOp::create(b_, loc_, isLast, /*withElseRegion=*/true);
    b_.setInsertionPoint(op.thenBlock()->getTerminator());
    chunk(last);
    b_.setInsertionPoint(op.elseBlock()->getTerminator());
    chunk(rowsPer_);
  }

  using StripFn = std::function<void(Value col0, int64_t nv, int64_t lastValid)>;

  // The one row tile of every strip `strips` emits, K block by K block: the first block starts
  // from zero, the last one finishes; between blocks the sums wait in cacc_.
  void kBlocksOutside(const std::function<void(const StripFn&)>& strips) {
    const int64_t M = p_.g.m, K = p_.g.k, blocks = (K + kc_ - 1) / kc_;
    auto at = [&](Value col0, int64_t r, int64_t v) { return SmallVector<Value, 2>{idx(r), add(col0, v * p_.VW)}; };
    auto block = [&](Value k0, int64_t count, bool first, bool last) {
      strips([&](Value col0, int64_t nv, int64_t lastValid) {
        SmallVector<Value> acc;
        for (int64_t r = 0; r < M; ++r)
          for (int64_t v = 0; v < nv; ++v)
            acc.push_back(first ? zeros(vf_) : Value(vector::LoadOp::create(b_, loc_, vf_, cacc_, at(col0, r, v))));
        tile(idx(0), M, col0, nv, lastValid, idx(0), false, k0, count, acc);
        if (last) return finish(idx(0), M, col0, nv, lastValid, acc);
        for (int64_t r = 0; r < M; ++r)
          for (int64_t v = 0; v < nv; ++v) vector::StoreOp::create(b_, loc_, acc[r * nv + v], cacc_, at(col0, r, v));
      });
    };
    block(idx(0), kc_, true, false);
    if (blocks > 2) loop(idx(kc_), idx((blocks - 1) * kc_), kc_, [&](Value k0) { block(k0, kc_, false, false); });
    block(idx((blocks - 1) * kc_), K - (blocks - 1) * kc_, false, true);
  }

  // The row tiles of a strip: the first (it copies B when several follow), a loop over the other
  // full tiles, the partial last. A loop, not one copy per tile: at M = 64 and MR = 1 the copies
  // took LLVM 5-6 s of CPU to compile (0.9 s for the packed default), long enough for a worker's
  // lease on the candidate to be taken over before it had been measured.
  void rowTiles(const std::function<void(Value row0, int64_t rows, bool first)>& body) {
    const int64_t M = rowsM_, full = M / p_.MR, rest = M % p_.MR;
    if (full > 0) body(rowBase_, p_.MR, true);
    if (full > 1)
      loop(add(rowBase_, p_.MR), add(rowBase_, full * p_.MR), p_.MR, [&](Value r0) { body(r0, p_.MR, false); });
    if (rest) body(add(rowBase_, full * p_.MR), rest, full == 0);
  }

  // One strip of `nv` vectors from col0, its last vector `lastValid` lanes wide; `slot` is the
  // scratch of the thread running it. One row tile: all of K in registers. Several: K in blocks
  // of KC, whose copied strip of B stays in the L1 for the later tiles, the sums carried between
  // blocks in an f32 tile of C (M x NV vectors, twice, in the L1 too).
  void strip(Value col0, int64_t nv, int64_t lastValid, Value slot) {
    const int64_t M = rowsM_, K = p_.g.k;
    if (!multiTile_ || K <= kc_) {
      rowTiles([&](Value r0, int64_t rows, bool first) {
        SmallVector<Value> acc(rows * nv, zeros(vf_));
        tile(r0, rows, col0, nv, lastValid, slot, first, idx(0), K, acc);
        finish(r0, rows, col0, nv, lastValid, acc);
      });
      return;
    }
    // Block b reads the sums from copy b % 2 and writes them to the other: rows [0, M) of the
    // scratch tile, then [M, 2M) (p_.g.m rows apart: the row split indexes by absolute row).
    auto ctile = [&](Value half, Value r0, int64_t r, int64_t v) {
      return SmallVector<Value, 3>{slot, arith::AddIOp::create(b_, loc_, half, add(r0, r)), idx(v * p_.VW)};
    };
    auto halfOf = [&](Value k0, int64_t turn) {
      Value b = arith::DivUIOp::create(b_, loc_, k0, idx(kc_));
      if (turn) b = add(b, turn);
      Value odd = arith::RemUIOp::create(b_, loc_, b, idx(2));
      return Value(arith::MulIOp::create(b_, loc_, odd, idx(p_.g.m)));
    };
    loop(rowBase_, add(rowBase_, M), 1, [&](Value r) {
      for (int64_t v = 0; v < nv; ++v) vector::StoreOp::create(b_, loc_, zeros(vf_), ctile_, ctile(idx(0), r, 0, v));
    });
    auto loadC = [&](Value half, Value r0, int64_t rows) {
      SmallVector<Value> acc;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t v = 0; v < nv; ++v)
          acc.push_back(vector::LoadOp::create(b_, loc_, vf_, ctile_, ctile(half, r0, r, v)));
      return acc;
    };
    auto block = [&](Value k0, int64_t count) {
      Value from = halfOf(k0, 0), to = halfOf(k0, 1);
      rowTiles([&](Value r0, int64_t rows, bool first) {
        SmallVector<Value> acc = loadC(from, r0, rows);
        tile(r0, rows, col0, nv, lastValid, slot, first, k0, count, acc);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t v = 0; v < nv; ++v)
            vector::StoreOp::create(b_, loc_, acc[r * nv + v], ctile_, ctile(to, r0, r, v));
      });
    };
    const int64_t blocks = K / kc_, rest = K % kc_;
    if (blocks > 0) loop(idx(0), idx(blocks * kc_), kc_, [&](Value k0) { block(k0, kc_); });
    if (rest) block(idx(blocks * kc_), rest);
    Value last = idx((blocks + (rest ? 1 : 0)) % 2 * p_.g.m);
    rowTiles([&](Value r0, int64_t rows, bool) { finish(r0, rows, col0, nv, lastValid, loadC(last, r0, rows)); });
  }

  // An scf.for over [lb, lb + steps) by `by`, carrying the sums `acc` (updated to its results);
  // `body` adds one iteration's depth to them.
  void sumsLoop(Value lb, int64_t steps, int64_t by, SmallVector<Value>& acc,
                const std::function<void(Value k, SmallVector<Value>& a)>& body) {
    auto f = scf::ForOp::create(b_, loc_, lb, add(lb, steps), idx(by), acc);
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(f.getBody());
    SmallVector<Value> a(f.getRegionIterArgs().begin(), f.getRegionIterArgs().end());
    body(f.getInductionVar(), a);
    scf::YieldOp::create(b_, loc_, a);
    b_.setInsertionPointAfter(f);
    acc.assign(f.getResults().begin(), f.getResults().end());
  }

  // The scratch copy of the strip's B vector v at depth k of a block from k0: the first row tile
  // writes it (copyB), the later ones read it (copiedB).
  void copyB(Value x, Value slot, Value k, Value k0, int64_t v) {
    Value kk = arith::SubIOp::create(b_, loc_, k, k0);
    vector::StoreOp::create(b_, loc_, x, scratch_, ValueRange{slot, kk, idx(v * p_.VW)});
  }
  Value copiedB(Value slot, Value k, Value k0, int64_t v) {
    Value kk = arith::SubIOp::create(b_, loc_, k, k0);
    return vector::LoadOp::create(b_, loc_, vf_, scratch_, ValueRange{slot, kk, idx(v * p_.VW)});
  }

  // Adds depth [k0, k0 + count) of rows [row0, row0 + rows) x the strip to `acc`. The first tile
  // reads B in place (masked past N) and, with several tiles, copies it to the scratch at k - k0.
  void tile(Value row0, int64_t rows, Value col0, int64_t nv, int64_t lastValid, Value slot, bool first, Value k0,
            int64_t count, SmallVector<Value>& acc) {
    const ir::GemmInfo& g = p_.g;
    auto valid = [&](int64_t v) { return v + 1 < nv ? p_.VW : lastValid; };
    auto bVec = [&](Value k, int64_t v) -> Value {
      Value col = add(col0, v * p_.VW);
      if (!first && copyB_) return copiedB(slot, k, k0, v);
      Type et = cast<MemRefType>(B_.getType()).getElementType();
      auto vt = VectorType::get({p_.VW}, et);
      Value x = valid(v) >= p_.VW
                    ? Value(vector::LoadOp::create(b_, loc_, vt, B_, at(k, col)))
                    : Value(vector::MaskedLoadOp::create(b_, loc_, vt, B_, at(k, col), mask(p_.VW, valid(v)), zeros(vt)));
      x = toF32(x);
      if (first && copyB_) copyB(x, slot, k, k0, v);
      return x;
    };
    auto aVal = [&](Value k, int64_t r) -> Value {
      Value a = memref::LoadOp::create(b_, loc_, A_, g.transA ? at(k, add(row0, r)) : at(add(row0, r), k));
      return vector::BroadcastOp::create(b_, loc_, vf_, toF32(a));
    };
    // A grouped last vector (groupOf) takes its FMAs once per group of G steps; the others each step.
    const int64_t G = groupOf(nv, lastValid), plainNv = G > 1 ? nv - 1 : nv;
    auto step = [&](Value k, SmallVector<Value>& a) {
      if (plainNv == 0) return;
      SmallVector<Value> bv;
      for (int64_t v = 0; v < plainNv; ++v) bv.push_back(bVec(k, v));
      for (int64_t r = 0; r < rows; ++r) {
        Value x = aVal(k, r);
        for (int64_t v = 0; v < plainNv; ++v) a[r * nv + v] = vector::FMAOp::create(b_, loc_, x, bv[v], a[r * nv + v]);
      }
    };
    if (G > 1)
      return groupedTile(row0, rows, col0, nv, lastValid, slot, first, k0, count, acc, G, step);
    const int64_t u = std::max<int64_t>(1, std::min(p_.KU, count)), main = count / u * u;
    if (main > 0)
      sumsLoop(k0, main, u, acc, [&](Value k, SmallVector<Value>& a) {
        for (int64_t s = 0; s < u; ++s) step(add(k, s), a);
      });
    for (int64_t s = main; s < count; ++s) step(add(k0, s), acc);
  }

  // Grouped last vector. A strip's last vector with at most half its lanes valid (N = 4 or 8, or
  // the 4 columns left of 100) would leave most FMA lanes idle, one FMA per row per step. Instead
  // its lanes hold G steps of K for VW / G columns: lane j * G + s is column j at step k + s. B's
  // G rows are interleaved into that order once per group (shared by the rows of the tile), each
  // row's G elements of A (contiguous: A stored M x K) are repeated across the columns
  // (vbroadcastsd / vbroadcastf32x4), so one FMA does G steps; the epilogue sums the G lanes of
  // each column. 8x8x2048 takes one FMA per row per two steps instead of per step, 100^3 a
  // quarter of the FMAs on its last 4 columns. G is 1 (no grouping) with A stored K x M.
  int64_t groupOf(int64_t nv, int64_t lastValid) const {
    if (p_.g.transA || nv < 1 || 2 * lastValid > p_.VW) return 1;
    int64_t wp = 1;
    while (wp < lastValid) wp *= 2;
    return std::min(p_.VW / wp, kMaxGroup);
  }
  // At most 8 steps a group: 16 (N = 1) builds each group from 16 rows of B for 16 FMAs a row of
  // the tile (one Zen 5 core: 33x65x17, whose last vector has one column, 0.36 us at 8, 0.39 at 16;
  // 512x1x512 11.0 either way, 13.6 at 4).
  static constexpr int64_t kMaxGroup = 8;

  // Lanes [0, 2L) = x0, y0, x1, y1, ... of two L-lane vectors.
  Value interleave(Value x, Value y) {
    const int64_t L = cast<VectorType>(x.getType()).getNumElements();
    SmallVector<int64_t> m;
    for (int64_t i = 0; i < L; ++i) m.append({i, L + i});
    return vector::ShuffleOp::create(b_, loc_, x, y, m);
  }
  // rows[s][j] at lane j * G + s (G = rows.size(), a power of two).
  Value interleaveRows(ArrayRef<Value> rows) {
    if (rows.size() == 1) return rows[0];
    SmallVector<Value> even, odd;
    for (size_t s = 0; s < rows.size(); ++s) (s % 2 ? odd : even).push_back(rows[s]);
    return interleave(interleaveRows(even), interleaveRows(odd));
  }
  // The sums of the G lanes of each column: VW / G lanes.
  Value ungroup(Value x, int64_t G) {
    const int64_t wp = p_.VW / G;
    Value sum;
    for (int64_t s = 0; s < G; ++s) {
      SmallVector<int64_t> m;
      for (int64_t j = 0; j < wp; ++j) m.push_back(j * G + s);
      Value part = vector::ShuffleOp::create(b_, loc_, x, x, m);
      sum = s ? Value(arith::AddFOp::create(b_, loc_, sum, part)) : part;
    }
    return sum;
  }

  // tile() with the strip's last vector grouped (groupOf): the plain vectors step by step (`step`),
  // the grouped one once per group of G steps, n <= G of them valid (the last group of a depth
  // that G does not divide: its missing rows of B are zeros, its A elements masked).
  void groupedTile(Value row0, int64_t rows, Value col0, int64_t nv, int64_t lastValid, Value slot, bool first,
                   Value k0, int64_t count, SmallVector<Value>& acc, int64_t G,
                   const std::function<void(Value, SmallVector<Value>&)>& step) {
    const int64_t v = nv - 1, wp = p_.VW / G;
    Value col = add(col0, v * p_.VW);
    auto bGroup = [&](Value k, int64_t n) -> Value {
      if (!first && copyB_) return copiedB(slot, k, k0, v);
      Type et = cast<MemRefType>(B_.getType()).getElementType();
      auto rt = VectorType::get({wp}, et);
      SmallVector<Value> rowsB;
      for (int64_t s = 0; s < G; ++s) {
        if (s >= n) {
          rowsB.push_back(zeros(VectorType::get({wp}, f32_)));
          continue;
        }
        Value x = lastValid >= wp ? Value(vector::LoadOp::create(b_, loc_, rt, B_, at(add(k, s), col)))
                                  : Value(vector::MaskedLoadOp::create(b_, loc_, rt, B_, at(add(k, s), col),
                                                                       mask(wp, lastValid), zeros(rt)));
        rowsB.push_back(toF32(x));
      }
      Value x = interleaveRows(rowsB);
      if (first && copyB_) copyB(x, slot, k, k0, v);
      return x;
    };
    auto aGroup = [&](Value k, int64_t r, int64_t n) -> Value {
      Type et = cast<MemRefType>(A_.getType()).getElementType();
      auto vt = VectorType::get({G}, et);
      auto ix = at(add(row0, r), k);
      Value x = n >= G ? Value(vector::LoadOp::create(b_, loc_, vt, A_, ix))
                       : Value(vector::MaskedLoadOp::create(b_, loc_, vt, A_, ix, mask(G, n), zeros(vt)));
      x = toF32(x);
      SmallVector<int64_t> m;
      for (int64_t lane = 0; lane < p_.VW; ++lane) m.push_back(lane % G);
      return vector::ShuffleOp::create(b_, loc_, x, x, m);
    };
    auto group = [&](Value k, int64_t n, SmallVector<Value>& a) {
      for (int64_t s = 0; s < n; ++s) step(add(k, s), a);
      Value bv = bGroup(k, n);
      for (int64_t r = 0; r < rows; ++r)
        a[r * nv + v] = vector::FMAOp::create(b_, loc_, aGroup(k, r, n), bv, a[r * nv + v]);
    };
    // Groups in a loop (KU / G of them per iteration), the full groups left in a loop of one, the
    // partial last group inline.
    auto groupLoop = [&](Value lb, int64_t steps, int64_t per) {
      sumsLoop(lb, steps, per * G, acc, [&](Value k, SmallVector<Value>& a) {
        for (int64_t q = 0; q < per; ++q) group(add(k, q * G), G, a);
      });
    };
    const int64_t per = std::max<int64_t>(1, p_.KU / G), main = count / (per * G) * (per * G);
    const int64_t fullRest = (count - main) / G * G;
    if (main > 0) groupLoop(k0, main, per);
    if (fullRest > 0) groupLoop(add(k0, main), fullRest, 1);
    if (count % G) group(add(k0, main + fullRest), count % G, acc);
  }

  // The epilogue and the stores of rows [row0, row0 + rows) of the strip: exactly the valid lanes.
  void finish(Value row0, int64_t rows, Value col0, int64_t nv, int64_t lastValid, const SmallVector<Value>& acc) {
    const int64_t G = groupOf(nv, lastValid);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t v = 0; v < nv; ++v) {
        Value x = acc[r * nv + v];
        const int64_t w = v + 1 < nv ? p_.VW : lastValid;
        if (G > 1 && v + 1 == nv) x = ungroup(x, G);
        const int64_t lanes = cast<VectorType>(x.getType()).getNumElements();
        if (w < lanes)
          x = vector::ExtractStridedSliceOp::create(b_, loc_, x, ArrayRef<int64_t>{0}, ArrayRef<int64_t>{w},
                                                    ArrayRef<int64_t>{1});
        Value row = add(row0, r), col = add(col0, v * p_.VW);
        auto e = epilogue(x, row, col, w);
        if (!e.ok()) {
          if (error_.ok()) error_ = e.takeError();
          return;
        }
        store(*e, row, col, w);
      }
  }

  void store(Value v, Value row, Value col, int64_t cols) {
    auto vt = cast<VectorType>(v.getType());
    if (vt.getElementTypeBitWidth() == 32 || cols == p_.VW) {
      vector::StoreOp::create(b_, loc_, v, C_, at(row, col));
      return;
    }
    // A partial 16-bit vector element by element (host_gemm_blis.cpp: LLVM 22 widened a partial
    // 16-bit vector store into the next row).
    for (int64_t j = 0; j < cols; ++j)
      memref::StoreOp::create(b_, loc_, vector::ExtractOp::create(b_, loc_, v, ArrayRef<int64_t>{j}), C_, at(row, add(col, j)));
  }

  // The epilogue on the `cols` sums of one row (host_strategies.h).
  Expected<Value> epilogue(Value acc, Value row, Value col, int64_t cols) {
    return emitRowEpilogue(b_, loc_, p_.g, args_, acc, row, col, bi_, cols);
  }

  OpBuilder& b_;
  Location loc_;
  const NvecPlan& p_;
  std::map<std::string, Value>& args_;
  Type f32_;
  VectorType vf_;
  Value A_, B_, C_, scratch_, ctile_, cacc_, bi_;
  bool multiTile_ = false, copyB_ = false, kOuter_ = false, rowSplit_ = false;
  Value rowBase_;                         // the first row of the rows being built (row split: per thread)
  int64_t rowsM_ = 0, rowsPer_ = 0;       // rows being built; rows per thread of a row split
  int64_t kc_ = 1, l1Bytes_ = 32768, l2Bytes_ = 1 << 20;
  Status error_;
};

Expected<NvecPlan> makeNvecPlan(const ir::Kernel& k, const HostGemmConfig& c, const TargetDesc& t) {
  NvecPlan p;
  TESSERA_ASSIGN(p.g, ir::analyzeGemm(k));
  p.MR = c.MR, p.NV = c.NV, p.KU = c.KU, p.KC = c.KC, p.threads = c.THREADS;
  auto bad = [](const std::string& m) { return makeError(ErrorCode::InvalidConfig, m); };
  for (auto [n, v] : {std::pair{"MR", p.MR}, {"NV", p.NV}, {"KU", p.KU}, {"KC", p.KC}, {"THREADS", p.threads}})
    if (v <= 0) return bad(std::string(n) + " must be positive, got " + std::to_string(v));
  if (p.KU > 16) return bad("KU must be <= 16");
  if (p.threads > 256) return bad("THREADS must be <= 256");
  if (p.g.transB) return bad("schedule nvec reads rows of B as vectors in place: B stored K x N only");
  if (!nvecTakes(p.g.m, p.g.n))
    return bad("schedule nvec takes M <= " + std::to_string(kNvecMaxM) + " or N <= " + std::to_string(kNvecNarrowN));
  p.VW = std::max(4, t.simdBits / 32);
  p.MR = std::min(p.MR, p.g.m);
  p.NV = std::min(p.NV, (p.g.n + p.VW - 1) / p.VW);
  // Every accumulator, the held B vectors and the broadcast A element in a register, the tile as
  // clamped to the problem (cf. the space's constraint); tiles past that spill in the innermost loop.
  if (p.MR * p.NV + p.NV + 1 > t.vectorRegisters)
    return bad("register tile " + std::to_string(p.MR) + "x" + std::to_string(p.NV) + " vectors of schedule nvec exceeds the " +
               std::to_string(t.vectorRegisters) + " vector registers");
  return p;
}

}  // namespace

Expected<HostPayload> buildHostGemmNvec(MLIRContext* ctx, const ir::Kernel& k, const HostGemmConfig& c, const TargetDesc& t) {
  TESSERA_ASSIGN(NvecPlan p, makeNvecPlan(k, c, t));
  if (!hostGemmFusesEpilogue(p.g))
    return makeError(ErrorCode::InvalidConfig, "schedule nvec cannot fuse this epilogue (transposed or computed reads)");
  HostPayload out;
  OpBuilder b(ctx);
  Location loc = b.getUnknownLoc();
  out.module = ModuleOp::create(loc);
  std::map<std::string, Value> args;
  createKernelFunc(b, *out.module, k, &args);
  NvecBuilder nb(b, loc, p, args, t.l1dBytes, t.l2Bytes);
  TESSERA_TRY(nb.build());
  func::ReturnOp::create(b, loc);
  out.threads = int(p.threads);
  return out;  // loop + vector code on memrefs already: no schedule
}

}  // namespace tessera::codegen
