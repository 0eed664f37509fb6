// Owns the small builders the OpBuilder GPU kernels share: scf.forall nests carrying #gpu.block /
// #gpu.thread mapping attributes (the only way pre-mapping IR expresses GPU parallelism), index
// arithmetic and guarded regions.
#pragma once

#include <functional>

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

namespace tessera::codegen::gpuir {

enum class Level { Block, Thread, Warp, LinearThread };

// scf.forall over `counts` (static, normalized) with one mapping per dimension: dims are given
// outermost first and mapped z, y, x (or x for a single dim). The builder is left inside the body.
inline mlir::scf::ForallOp forall(mlir::OpBuilder& b, mlir::Location loc, llvm::ArrayRef<int64_t> counts, Level level) {
  using namespace mlir;
  MLIRContext* ctx = b.getContext();
  SmallVector<OpFoldResult> ubs;
  for (int64_t c : counts) ubs.push_back(b.getIndexAttr(c));
  SmallVector<Attribute> maps;
  const gpu::MappingId ids[3] = {gpu::MappingId::DimX, gpu::MappingId::DimY, gpu::MappingId::DimZ};
  size_t n = counts.size();
  for (size_t i = 0; i < n; ++i) {
    gpu::MappingId id = ids[n - 1 - i];
    if (level == Level::LinearThread) id = gpu::MappingId(uint64_t(gpu::MappingId::LinearDim0) + (n - 1 - i));
    if (level == Level::Block) maps.push_back(gpu::GPUBlockMappingAttr::get(ctx, id));
    else if (level == Level::Warp) maps.push_back(gpu::GPUWarpMappingAttr::get(ctx, id));
    else maps.push_back(gpu::GPUThreadMappingAttr::get(ctx, id));  // Thread, LinearThread
  }
  auto op = scf::ForallOp::create(b, loc, ubs, ValueRange{}, b.getArrayAttr(maps));
  b.setInsertionPoint(op.getBody()->getTerminator());
  return op;
}

struct Idx {
  mlir::OpBuilder& b;
  mlir::Location loc;
  mlir::Value c(int64_t v) { return mlir::arith::ConstantIndexOp::create(b, loc, v); }
  mlir::Value add(mlir::Value x, mlir::Value y) { return mlir::arith::AddIOp::create(b, loc, x, y); }
  mlir::Value add(mlir::Value x, int64_t v) { return v == 0 ? x : add(x, c(v)); }
  mlir::Value mul(mlir::Value x, int64_t v) { return v == 1 ? x : mlir::arith::MulIOp::create(b, loc, x, c(v)).getResult(); }
  mlir::Value mul(mlir::Value x, mlir::Value y) { return mlir::arith::MulIOp::create(b, loc, x, y); }
  mlir::Value div(mlir::Value x, int64_t v) { return v == 1 ? x : mlir::arith::DivUIOp::create(b, loc, x, c(v)).getResult(); }
  mlir::Value rem(mlir::Value x, int64_t v) { return mlir::arith::RemUIOp::create(b, loc, x, c(v)); }
  mlir::Value div(mlir::Value x, mlir::Value y) { return mlir::arith::DivUIOp::create(b, loc, x, y); }
  mlir::Value min(mlir::Value x, int64_t v) { return mlir::arith::MinSIOp::create(b, loc, x, c(v)); }
  mlir::Value min(mlir::Value x, mlir::Value y) { return mlir::arith::MinSIOp::create(b, loc, x, y); }
  mlir::Value lt(mlir::Value x, int64_t v) {
    return mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::slt, x, c(v));
  }
  mlir::Value lt(mlir::Value x, mlir::Value y) {
    return mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::slt, x, y);
  }
  mlir::Value band(mlir::Value x, mlir::Value y) { return mlir::arith::AndIOp::create(b, loc, x, y); }
};

// What every register-level kernel builder shares (the SIMT, mma.sync, wgmma and MFMA attention
// and GEMM builders): the builder, the location, index arithmetic and f32 arithmetic with
// contraction allowed (fma formation), which the softmax and epilogue steps are written in.
class F32Builder {
 public:
  F32Builder(mlir::OpBuilder& b, mlir::Location loc)
      : b_(b), loc_(loc), ix_{b, loc}, f32_(b.getF32Type()),
        fm_(mlir::arith::FastMathFlagsAttr::get(b.getContext(), mlir::arith::FastMathFlags::contract)) {}
  mlir::Value f(float v) { return mlir::arith::ConstantOp::create(b_, loc_, b_.getF32FloatAttr(v)); }
  mlir::Value add(mlir::Value x, mlir::Value y) { return mlir::arith::AddFOp::create(b_, loc_, x, y, fm_); }
  mlir::Value sub(mlir::Value x, mlir::Value y) { return mlir::arith::SubFOp::create(b_, loc_, x, y, fm_); }
  mlir::Value mul(mlir::Value x, mlir::Value y) { return mlir::arith::MulFOp::create(b_, loc_, x, y, fm_); }
  mlir::Value max(mlir::Value x, mlir::Value y) { return mlir::arith::MaxNumFOp::create(b_, loc_, x, y, fm_); }

  mlir::OpBuilder& b_;
  mlir::Location loc_;
  Idx ix_;
  mlir::Type f32_;
  mlir::arith::FastMathFlagsAttr fm_;
};

// Emits `body` under scf.if (cond) (no else); a null cond emits it unguarded.
inline void guarded(mlir::OpBuilder& b, mlir::Location loc, mlir::Value cond, const std::function<void()>& body) {
  if (!cond) {
    body();
    return;
  }
  auto ifOp = mlir::scf::IfOp::create(b, loc, cond, /*withElseRegion=*/false);
  mlir::OpBuilder::InsertionGuard g(b);
  b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  body();
}

// scf.for lb..ub step with no iter_args; the builder is left after the loop.
inline void forLoop(mlir::OpBuilder& b, mlir::Location loc, mlir::Value lb, mlir::Value ub, int64_t step,
                    const std::function<void(mlir::Value)>& body) {
  Idx ix{b, loc};
  auto op = mlir::scf::ForOp::create(b, loc, lb, ub, ix.c(step));
  mlir::OpBuilder::InsertionGuard g(b);
  b.setInsertionPoint(op.getBody()->getTerminator());
  body(op.getInductionVar());
}

}  // namespace tessera::codegen::gpuir
