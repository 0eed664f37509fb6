// Owns the host GEMM for few columns (schedule `kvec`): vectors run along K instead of N, so a
// GEMM whose N is below the vector width wastes no lanes. Each element of C is a dot product of a
// row of A (read in place, never packed) with a column of B (Bᵀ: packed once into an N x K
// buffer of f32, a few KB, or read in place when B is stored N x K).
//
//   for b, [parallel] row tiles of MR rows (then the partial last tile, statically):
//     for column tiles of NJ columns (then the partial last one):
//       MR x NJ accumulators of one vector each, over K in vector steps (the last one masked);
//       each reduced across its lanes once, the epilogue applied on the NJ sums of a row.
//
// This is the shape small-matrix libraries special-case: with N = 7, the N-vector kernels use 7
// of 8 (AVX2) or 16 (AVX-512) lanes and pack B into panels padded to the vector, while here every
// lane does useful work and only the final reductions (one per element of C) are extra.
// Knobs: MR (rows per tile), NJ (columns per tile), KU (unroll of the K loop), THREADS.
#include <algorithm>

#include "codegen/codegen.h"
#include "hostgen/host_gemm_kvec.h"
#include "hostgen/host_strategies.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace tessera::codegen {

using namespace mlir;

namespace {

int64_t roundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

struct KvecPlan {
  ir::GemmInfo g;
  int64_t VW = 8, MR = 4, NJ = 2, KU = 1, threads = 1;
};

class KvecBuilder {
 public:
  KvecBuilder(OpBuilder& b, Location loc, const KvecPlan& p, std::map<std::string, Value>& args)
      : b_(b), loc_(loc), p_(p), args_(args) {
    f32_ = b.getF32Type();
    vf_ = VectorType::get({p.VW}, f32_);
  }

  Status build() {
    const ir::GemmInfo& g = p_.g;
    A_ = args_[g.a];
    B_ = args_[g.b];
    C_ = args_[g.c];
    kp_ = roundUp(g.k, p_.VW);
    if (!g.transB)
      Bt_ = memref::AllocOp::create(b_, loc_, MemRefType::get({g.n, kp_}, f32_), b_.getI64IntegerAttr(64)).getResult();
    auto batchBody = [&](Value bi) {
      bi_ = bi;
      if (!g.transB) packB();
      const int64_t fullTiles = g.m / p_.MR, rest = g.m % p_.MR;
      rowTiles(fullTiles);
      if (rest) rowTile(idx(fullTiles * p_.MR), rest);
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
  // `valid` (1..VW) elements of `mem` at `ix` as a vector of VW f32, zero past them.
  Value loadVec(Value mem, ValueRange ix, int64_t valid) {
    Type et = cast<MemRefType>(mem.getType()).getElementType();
    auto vt = VectorType::get({p_.VW}, et);
    if (valid >= p_.VW) return toF32(vector::LoadOp::create(b_, loc_, vt, mem, ix));
    return toF32(vector::MaskedLoadOp::create(b_, loc_, vt, mem, ix, mask(p_.VW, valid), zeros(vt)));
  }

  // Bt[j][k] = B[k][j] in f32, zero for k in [K, Kp): the K tail's masked A lanes are zero, and
  // zero times the padding must stay zero (never NaN from stale memory).
  void packB() {
    const ir::GemmInfo& g = p_.g;
    loop(idx(0), idx(g.k), 1, [&](Value k) {
      for (int64_t j = 0; j < g.n; ++j) {
        Value v = memref::LoadOp::create(b_, loc_, B_, at(k, idx(j)));
        memref::StoreOp::create(b_, loc_, toF32(v), Bt_, ValueRange{idx(j), k});
      }
    });
    if (kp_ > g.k) {
      Value z = arith::ConstantOp::create(b_, loc_, b_.getF32FloatAttr(0.0f));
      for (int64_t j = 0; j < g.n; ++j)
        for (int64_t k = g.k; k < kp_; ++k) memref::StoreOp::create(b_, loc_, z, Bt_, ValueRange{idx(j), idx(k)});
    }
  }
  // Column j of B from k on: the packed Bᵀ (padded: always whole vectors) or B stored N x K.
  Value bVec(int64_t j, Value k, int64_t valid) {
    if (!p_.g.transB) return vector::LoadOp::create(b_, loc_, vf_, Bt_, ValueRange{idx(j), k});
    return loadVec(B_, at(idx(j), k), valid);
  }

  // The full row tiles: in parallel across threads when the plan has several.
  void rowTiles(int64_t n) {
    if (n <= 0) return;
    auto body = [&](Value t) { rowTile(arith::MulIOp::create(b_, loc_, t, idx(p_.MR)), p_.MR); };
    if (p_.threads <= 1 || n == 1) return loop(idx(0), idx(n), 1, body);
    auto par = scf::ParallelOp::create(b_, loc_, ValueRange{idx(0)}, ValueRange{idx(n)}, ValueRange{idx(1)});
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPoint(par.getBody()->getTerminator());
    body(par.getInductionVars()[0]);
  }

  void rowTile(Value row0, int64_t rows) {
    const int64_t n = p_.g.n, full = n / p_.NJ * p_.NJ;
    for (int64_t c0 = 0; c0 < full; c0 += p_.NJ) tile(row0, rows, c0, p_.NJ);
    if (n > full) tile(row0, rows, full, n - full);
  }

  // One MR x NJ tile of C: the dot products over K, their reductions, the epilogue, the stores.
  void tile(Value row0, int64_t rows, int64_t col0, int64_t cols) {
    const int64_t K = p_.g.k, steps = K / p_.VW, tail = K % p_.VW;
    SmallVector<Value> acc(rows * cols, zeros(vf_));
    // One depth step: the operand with fewer vectors is held in registers while the other
    // streams, so the tile needs rows·cols + min(rows, cols) + 1 registers.
    auto step = [&](Value k, int64_t valid, SmallVector<Value>& a) {
      if (rows <= cols) {
        SmallVector<Value> av;
        for (int64_t r = 0; r < rows; ++r) av.push_back(loadVec(A_, at(add(row0, r), k), valid));
        for (int64_t j = 0; j < cols; ++j) {
          Value bv = bVec(col0 + j, k, valid);
          for (int64_t r = 0; r < rows; ++r) a[r * cols + j] = vector::FMAOp::create(b_, loc_, av[r], bv, a[r * cols + j]);
        }
      } else {
        SmallVector<Value> bv;
        for (int64_t j = 0; j < cols; ++j) bv.push_back(bVec(col0 + j, k, valid));
        for (int64_t r = 0; r < rows; ++r) {
          Value av = loadVec(A_, at(add(row0, r), k), valid);
          for (int64_t j = 0; j < cols; ++j) a[r * cols + j] = vector::FMAOp::create(b_, loc_, av, bv[j], a[r * cols + j]);
        }
      }
    };
    const int64_t u = std::max<int64_t>(1, std::min(p_.KU, steps)), main = steps / u * u;
    if (main > 0) {
      auto f = scf::ForOp::create(b_, loc_, idx(0), idx(main * p_.VW), idx(u * p_.VW), acc);
      OpBuilder::InsertionGuard guard(b_);
      b_.setInsertionPointToStart(f.getBody());
      SmallVector<Value> a(f.getRegionIterArgs().begin(), f.getRegionIterArgs().end());
      for (int64_t s = 0; s < u; ++s) step(add(f.getInductionVar(), s * p_.VW), p_.VW, a);
      scf::YieldOp::create(b_, loc_, a);
      b_.setInsertionPointAfter(f);
      acc.assign(f.getResults().begin(), f.getResults().end());
    }
    for (int64_t s = main; s < steps; ++s) step(idx(s * p_.VW), p_.VW, acc);
    if (tail) step(idx(steps * p_.VW), tail, acc);
    const SmallVector<Value> sums = rowSums(acc, rows, cols);
    for (int64_t r = 0; r < rows; ++r) {
      Value v = sums[r];
      Value row = add(row0, r), col = idx(col0);
      auto e = epilogue(v, row, col, cols);
      if (!e.ok()) {
        if (error_.ok()) error_ = e.takeError();
        return;
      }
      store(*e, row, col, cols);
    }
  }

  // The sums across lanes of the rows x cols accumulators of a tile, one vector of `cols` per row.
  // A tree over up to VW accumulators at a time: each level pairs two vectors whose lanes hold
  // segments of s lanes per accumulator, and adds the lower halves of the segments (of both,
  // gathered by one shuffle) to the upper halves (another), so the result holds twice the
  // accumulators in segments of s/2. log2(VW) levels end with one lane per accumulator; a shuffle
  // per row then gathers its `cols` sums. Three operations per pair of vectors, against the eight
  // of a reduction of each accumulator and an insert for each sum (512x7x64 spent more in them
  // than in its FMAs).
  SmallVector<Value> rowSums(const SmallVector<Value>& acc, int64_t rows, int64_t cols) {
    const int64_t W = p_.VW, n = rows * cols;
    SmallVector<Value> out;
    if (cols > W) {  // a row wider than a group (it could straddle three): one reduction per accumulator
      for (int64_t r = 0; r < rows; ++r) {
        SmallVector<Value> sums;
        for (int64_t j = 0; j < cols; ++j)
          sums.push_back(vector::ReductionOp::create(b_, loc_, f32_, vector::CombiningKind::ADD, acc[r * cols + j], Value(),
                                                     arith::FastMathFlags::reassoc));
        out.push_back(vector::FromElementsOp::create(b_, loc_, VectorType::get({cols}, f32_), sums));
      }
      return out;
    }
    struct Part {
      Value v;
      SmallVector<int64_t> owner;  // the accumulator of each segment (-1: none)
    };
    SmallVector<Value> groups;             // one vector per group of up to W accumulators
    SmallVector<int64_t> laneOf(n, 0);     // accumulator -> group * W + lane
    for (int64_t g0 = 0; g0 < n; g0 += W) {
      SmallVector<Part> cur;
      for (int64_t i = g0; i < std::min(n, g0 + W); ++i) cur.push_back({acc[i], {i}});
      for (int64_t sw = W; sw > 1; sw /= 2) {
        SmallVector<Part> next;
        for (size_t i = 0; i < cur.size(); i += 2) {
          const Part& x = cur[i];
          Part y = i + 1 < cur.size() ? cur[i + 1] : Part{zeros(vf_), SmallVector<int64_t>(x.owner.size(), -1)};
          SmallVector<int64_t> lo, hi;
          Part z;
          for (size_t seg = 0; seg < x.owner.size(); ++seg) {
            for (int64_t base : {int64_t(0), W}) {
              const int64_t off = base + int64_t(seg) * sw;
              for (int64_t l = 0; l < sw / 2; ++l) lo.push_back(off + l), hi.push_back(off + sw / 2 + l);
              z.owner.push_back(base == 0 ? x.owner[seg] : y.owner[seg]);
            }
          }
          Value a = vector::ShuffleOp::create(b_, loc_, x.v, y.v, lo), c = vector::ShuffleOp::create(b_, loc_, x.v, y.v, hi);
          z.v = arith::AddFOp::create(b_, loc_, a, c);
          next.push_back(z);
        }
        cur = next;
      }
      for (int64_t l = 0; l < W; ++l)
        if (cur[0].owner[l] >= 0) laneOf[cur[0].owner[l]] = int64_t(groups.size()) * W + l;
      groups.push_back(cur[0].v);
    }
    for (int64_t r = 0; r < rows; ++r) {
      // The row's sums lie in one group or two neighbouring ones.
      const int64_t first = laneOf[r * cols] / W;
      int64_t last = first;
      for (int64_t j = 0; j < cols; ++j) last = std::max(last, laneOf[r * cols + j] / W);
      Value x = groups[first], y = groups[last];
      SmallVector<int64_t> pick;
      for (int64_t j = 0; j < cols; ++j) {
        const int64_t at = laneOf[r * cols + j];
        pick.push_back(at / W == first ? at % W : W + at % W);
      }
      out.push_back(vector::ShuffleOp::create(b_, loc_, x, y, pick));
    }
    return out;
  }

  void store(Value v, Value row, Value col, int64_t cols) {
    auto vt = cast<VectorType>(v.getType());
    if (vt.getElementTypeBitWidth() == 32) {
      vector::StoreOp::create(b_, loc_, v, C_, at(row, col));
      return;
    }
    // 16-bit outputs element by element (host_gemm_blis.cpp: LLVM 22 widened a partial 16-bit
    // vector store into the next row).
    for (int64_t j = 0; j < cols; ++j)
      memref::StoreOp::create(b_, loc_, vector::ExtractOp::create(b_, loc_, v, ArrayRef<int64_t>{j}), C_, at(row, add(col, j)));
  }

  // The epilogue on the `cols` sums of one row (host_strategies.h).
  Expected<Value> epilogue(Value acc, Value row, Value col, int64_t cols) {
    return emitRowEpilogue(b_, loc_, p_.g, args_, acc, row, col, bi_, cols);
  }

  OpBuilder& b_;
  Location loc_;
  const KvecPlan& p_;
  std::map<std::string, Value>& args_;
  Type f32_;
  VectorType vf_;
  Value A_, B_, C_, Bt_, bi_;
  int64_t kp_ = 0;
  Status error_;
};

Expected<KvecPlan> makeKvecPlan(const ir::Kernel& k, const HostGemmConfig& c, const TargetDesc& t) {
  KvecPlan p;
  TESSERA_ASSIGN(p.g, ir::analyzeGemm(k));
  p.MR = c.MR, p.NJ = c.NJ, p.KU = c.KU, p.threads = c.THREADS;
  auto bad = [](const std::string& m) { return makeError(ErrorCode::InvalidConfig, m); };
  for (auto [n, v] : {std::pair{"MR", p.MR}, {"NJ", p.NJ}, {"KU", p.KU}, {"THREADS", p.threads}})
    if (v <= 0) return bad(std::string(n) + " must be positive, got " + std::to_string(v));
  if (p.KU > 16) return bad("KU must be <= 16");
  if (p.threads > 256) return bad("THREADS must be <= 256");
  if (p.g.transA) return bad("schedule kvec reads the rows of A in place: A stored M x K only");
  if (p.g.n > kKvecMaxN) return bad("schedule kvec takes N <= " + std::to_string(kKvecMaxN));
  p.VW = std::max(4, t.simdBits / 32);
  // Every accumulator, the held operand and the streamed one in a register (cf. the space's
  // constraint); tiles past that spill in the innermost loop.
  if (p.MR * p.NJ + std::min(p.MR, p.NJ) + 1 > t.vectorRegisters)
    return bad("register tile " + std::to_string(p.MR) + "x" + std::to_string(p.NJ) + " of schedule kvec exceeds the " +
               std::to_string(t.vectorRegisters) + " vector registers");
  p.MR = std::min(p.MR, p.g.m);
  p.NJ = std::min(p.NJ, p.g.n);
  return p;
}

}  // namespace

Expected<HostPayload> buildHostGemmKvec(MLIRContext* ctx, const ir::Kernel& k, const HostGemmConfig& c, const TargetDesc& t) {
  TESSERA_ASSIGN(KvecPlan p, makeKvecPlan(k, c, t));
  if (!hostGemmFusesEpilogue(p.g))
    return makeError(ErrorCode::InvalidConfig, "schedule kvec cannot fuse this epilogue (transposed or computed reads)");
  HostPayload out;
  OpBuilder b(ctx);
  Location loc = b.getUnknownLoc();
  out.module = ModuleOp::create(loc);
  std::map<std::string, Value> args;
  createKernelFunc(b, *out.module, k, &args);
  KvecBuilder kb(b, loc, p, args);
  TESSERA_TRY(kb.build());
  func::ReturnOp::create(b, loc);
  out.threads = int(p.threads);
  return out;  // loop + vector code on memrefs already: no schedule
}

}  // namespace tessera::codegen
