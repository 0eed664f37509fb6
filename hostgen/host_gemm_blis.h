// Owns what the two files of the explicit host GEMM share (schedules `blis`, `bf16dot`, `amx`): its
// plan, the IR building blocks, and the kernel builder whose packing of A and B panels is
// hostgen/host_gemm_pack.cpp and whose plan, loops, micro-kernels and write-back are
// hostgen/host_gemm_blis.cpp. Internal: no other file includes it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "ir/families.h"
#include "ir/ir.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "support/status.h"

namespace tessera::codegen::blis {

using namespace mlir;

enum class Micro { Fma, Dot, Amx };

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int64_t roundUp(int64_t v, int64_t m) { return ceilDiv(v, m) * m; }

struct Plan {
  ir::GemmInfo g;
  Micro mk = Micro::Fma;
  int64_t VW = 16;                    // f32 lanes per vector
  int64_t MR = 8, NR = 32, KU = 1;
  int64_t mc = 64, nc = 256, kc = 256;  // effective blocks (mc % MR == 0, nc % NR == 0)
  int64_t kcs = 256;                  // Ap row stride (kc padded to whole vectors)
  int64_t nkb = 1, kLast = 256;       // K blocks, valid depth of the last one
  int64_t threads = 1;
  bool ijOrder = true;
  bool fusedEpilogue = true;
  // Runtime sizes (CompileOptions::runtime): M and/or the batch count come from the sizes
  // argument; g.m / g.batch are then their upper bounds.
  bool dynM = false, dynBatch = false;
  // PACKB=0: the fma micro-kernel reads B (stored K x N) in place instead of packed panels; at a
  // few rows of A packing B costs as much as the product (decode-sized GEMMs).
  bool packB = true;
  int64_t nv() const { return NR / VW; }
  int64_t bRow() const { return mk == Micro::Fma ? NR : 2 * NR; }  // Bp row length (elements)
  int64_t bRows() const { return mk == Micro::Fma ? kc : kc / 2; }  // Bp rows per panel
};

// ------------------------------------------------------------------ building blocks

class Builder {
 public:
  Builder(OpBuilder& b, Location loc, const Plan& p) : b_(b), loc_(loc), p_(p) {
    f32_ = b.getF32Type();
    vf_ = VectorType::get({p.VW}, f32_);
  }

  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b_, loc_, v); }
  Value add(Value x, int64_t c) { return c == 0 ? x : Value(arith::AddIOp::create(b_, loc_, x, idx(c))); }
  Value add(Value x, Value y) { return arith::AddIOp::create(b_, loc_, x, y); }
  Value mul(Value x, int64_t c) { return c == 1 ? x : Value(arith::MulIOp::create(b_, loc_, x, idx(c))); }
  Value zeros(VectorType t) {
    return arith::ConstantOp::create(b_, loc_, DenseElementsAttr::get(t, b_.getZeroAttr(t.getElementType())));
  }

  void loop(Value lb, Value ub, int64_t step, const std::function<void(Value)>& body) {
    auto f = scf::ForOp::create(b_, loc_, lb, ub, idx(step));
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPoint(f.getBody()->getTerminator());
    body(f.getInductionVar());
  }
  void loop(int64_t lb, int64_t ub, int64_t step, const std::function<void(Value)>& body) {
    if (ub > lb) loop(idx(lb), idx(ub), step, body);
  }
  // A loop whose iterations may run on different threads (OpenMP after lowering) when the plan
  // has more than one thread and there is more than one iteration.
  void parallel(int64_t n, const std::function<void(Value)>& body) {
    if (n <= 0) return;
    if (p_.threads <= 1 || n == 1) return loop(0, n, 1, body);
    parallel(idx(n), body);
  }
  void parallel(Value n, const std::function<void(Value)>& body) {
    if (p_.threads <= 1) return loop(idx(0), n, 1, body);
    auto par = scf::ParallelOp::create(b_, loc_, ValueRange{idx(0)}, ValueRange{n}, ValueRange{idx(1)});
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPoint(par.getBody()->getTerminator());
    body(par.getInductionVars()[0]);
  }
  // Full tiles of `size` over [0, total) in a loop (body gets the offset and the static size),
  // then the partial last one, statically.
  void tiles(int64_t total, int64_t size, const std::function<void(Value, int64_t)>& body) {
    int64_t full = total / size * size;
    loop(0, full, size, [&](Value o) { body(o, size); });
    if (total > full) body(idx(full), total - full);
  }
  void ifThen(Value cond, const std::function<void()>& thenB) {
    auto op = scf::IfOp::create(b_, loc_, cond, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPoint(op.thenBlock()->getTerminator());
    thenB();
  }
  // cond ? thenB() : elseB(), one value.
  Value select(Type t, Value cond, const std::function<Value()>& thenB, const std::function<Value()>& elseB) {
    auto op = scf::IfOp::create(b_, loc_, TypeRange{t}, cond, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(op.thenBlock());
    scf::YieldOp::create(b_, loc_, thenB());
    b_.setInsertionPointToStart(op.elseBlock());
    scf::YieldOp::create(b_, loc_, elseB());
    return op.getResult(0);
  }
  Value lt(Value x, Value y) { return arith::CmpIOp::create(b_, loc_, arith::CmpIPredicate::slt, x, y); }
  Value lt(int64_t x, Value y) { return lt(idx(x), y); }
  Value sub(Value x, Value y) { return arith::SubIOp::create(b_, loc_, x, y); }
  Value floorTo(Value x, int64_t m) { return mul(arith::DivUIOp::create(b_, loc_, x, idx(m)), m); }
  void ifThenElse(Value cond, const std::function<void()>& thenB, const std::function<void()>& elseB) {
    auto op = scf::IfOp::create(b_, loc_, cond, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPoint(op.thenBlock()->getTerminator());
    thenB();
    b_.setInsertionPoint(op.elseBlock()->getTerminator());
    elseB();
  }

  // Reads `n` contiguous elements of `mem` at `ix` (last index the start) as a vector of `n`,
  // zero past the end of the innermost dimension (masked).
  Value readRow(Value mem, SmallVector<Value> ix, int64_t n) {
    Type et = cast<MemRefType>(mem.getType()).getElementType();
    auto vt = VectorType::get({n}, et);
    Value pad = arith::ConstantOp::create(b_, loc_, b_.getZeroAttr(et));
    auto map = AffineMap::getMinorIdentityMap(unsigned(ix.size()), 1, b_.getContext());
    return vector::TransferReadOp::create(b_, loc_, vt, mem, ix, AffineMapAttr::get(map), pad, Value(),
                                          b_.getBoolArrayAttr({false}));
  }
  Value toF32(Value v) {
    auto vt = cast<VectorType>(v.getType());
    if (vt.getElementType().isF32()) return v;
    return arith::ExtFOp::create(b_, loc_, VectorType::get(vt.getShape(), f32_), v);
  }
  // Constant mask of the first `valid` of `n` lanes.
  Value mask(int64_t n, int64_t valid) {
    SmallVector<bool> m;
    for (int64_t i = 0; i < n; ++i) m.push_back(i < valid);
    auto mt = VectorType::get({n}, b_.getI1Type());
    return arith::ConstantOp::create(b_, loc_, DenseElementsAttr::get(mt, ArrayRef<bool>(m)));
  }
  Value load(Value mem, ValueRange ix, VectorType t, int64_t valid) {
    if (valid >= t.getNumElements()) return vector::LoadOp::create(b_, loc_, t, mem, ix);
    return vector::MaskedLoadOp::create(b_, loc_, t, mem, ix, mask(t.getNumElements(), valid), zeros(t));
  }
  void store(Value v, Value mem, ValueRange ix, int64_t valid) {
    auto vt = cast<VectorType>(v.getType());
    int64_t n = vt.getNumElements();
    if (valid >= n) {
      vector::StoreOp::create(b_, loc_, v, mem, ix);
    } else if (vt.getElementTypeBitWidth() == 16) {
      // Element by element at a partial vector of 16-bit floats: LLVM 22's x86 back end turned
      // a masked store of <16 x i16> with one active lane into a 32-bit `movl` (it clobbered the
      // next row's first element; seen with bf16 GEMM outputs of 33 columns and relu).
      SmallVector<Value> at(ix.begin(), ix.end());
      for (int64_t j = 0; j < valid; ++j) {
        at.back() = add(ix.back(), j);
        memref::StoreOp::create(b_, loc_, vector::ExtractOp::create(b_, loc_, v, ArrayRef<int64_t>{j}), mem, at);
      }
    } else {
      vector::MaskedStoreOp::create(b_, loc_, mem, ix, mask(n, valid), v);
    }
  }

  OpBuilder& b_;
  Location loc_;
  const Plan& p_;
  Type f32_;
  VectorType vf_;
};

// ------------------------------------------------------------------ the kernel

// A count of rows: static (`n`), or known only at run time (`dyn`, at most `n`).
struct Rows {
  Rows(int64_t n_) : n(n_) {}
  Rows(int64_t n_, Value d) : n(n_), dyn(d) {}
  int64_t n;
  Value dyn;
};

// The kernel's body in the @kernel function: row blocks, K blocks and column blocks around the
// packing (host_gemm_pack.cpp) and the micro-kernels and write-back (host_gemm_blis.cpp).
class GemmBuilder : Builder {
 public:
  GemmBuilder(OpBuilder& b, Location loc, const Plan& p, const ir::Kernel& k, std::map<std::string, Value>& args)
      : Builder(b, loc, p), k_(k), args_(args) {}

  Status build();

 private:
  // Indices of [batch,] row, col into a kernel tensor.
  SmallVector<Value> at(Value r, Value c) {
    SmallVector<Value> ix;
    if (bi_) ix.push_back(bi_);
    ix.push_back(r);
    ix.push_back(c);
    return ix;
  }

  void rowBlock(Value ic, Rows mcb);
  void depthBlock(Value ic, Rows mcb, Value pc, int64_t kv, Value first, bool last);

  // ---- packing (host_gemm_pack.cpp)
  void packA(Value ic, Rows mcb, Value pc, int64_t kv);
  VectorType packVec();
  void packARow(Value row, Value pc, int64_t kv, Value panel, int64_t r);
  Value zeroScalar();
  Value scalarToPack(Value v);
  void packB(Value jc, int64_t ncb, Value pc, int64_t kv);
  void packBByRows(Value jc, int64_t ncb, Value pc, int64_t kv);
  // Rows of B ahead of the one packBByRows packs that it prefetches (64x4096x4096 on two Zen 5
  // cores: 4 and 8 rows 6.1 ms, none 6.7).
  static constexpr int64_t kPrefetchRows = 4;
  SmallVector<Value> transposeSquare(SmallVector<Value> r);
  Value gatherB(Value pc, Value kk, Value n0, int64_t c, int64_t valid, Type to);

  // ---- one column block, the micro-kernels and the write-back
  void colBlock(Value ic, Rows mcb, Value pc, int64_t kv, Value jb, Value jc, int64_t ncb, Value first, bool last);
  void microTile(Value panel, Value jp, Value jb, Value row0, Rows rows, Value col0, int64_t cols, Value first, bool last);
  SmallVector<Value> unrolledK(int64_t count, SmallVector<Value> acc, const std::function<void(Value, SmallVector<Value>&)>& step);
  SmallVector<Value> fmaLoop(Value panel, Value jp, SmallVector<Value> acc);
  SmallVector<Value> dotLoop(Value panel, Value jp, SmallVector<Value> acc);
  void amxTile(Value panel, Value jp, Value jb);
  void writeBack(const SmallVector<Value>& acc, Value row0, Rows rows, Value col0, int64_t cols, bool last);
  void writeRow(const SmallVector<Value>& acc, Value row0, int64_t r, Value col0, int64_t cols, bool last);
  Expected<Value> epilogue(Value acc, Value row, Value col, int64_t valid);

  const ir::Kernel& k_;
  std::map<std::string, Value>& args_;
  OpBuilder::InsertPoint keptScratchBody(MemRefType type);
  int64_t bWorkers() const;

  Value A_, B_, C_, Cacc_, Ap_, Bp_, Cs_, bi_, M_, batch_;
  Value bq0_;  // the first panel of the B slot of the worker being built
  Value pc_, col0_;  // the depth block and micro-tile column the fma loop reads B at (PACKB=0)
  int64_t kv_ = 0;
  Value first_;  // true in the first K block of the micro-tile being built
  int64_t nvt_ = 1;  // vectors of the micro-tile being built (fewer than nv() at a partial column tile)
  Type inT_;
  Status error_;
};

}  // namespace tessera::codegen::blis
