// Owns the warp-level tensor-core builders the lane-level NVIDIA kernels share (flash-mma attention,
// the mma-lane GEMM): ldmatrix fragments, mma.sync m16n8k16 with f32 accumulators, fragment
// registers of f16 / bf16 pairs, and the cp.async helpers around them. Fragment layouts (PTX ISA,
// "Matrix Fragments for mma.m16n8k16"), with g = lane / 4 and t = lane % 4:
//   A 16x16 (row): 4 registers = (row g, k 2t..2t+1), (row g+8, same k), (row g, k 8+2t..), (row g+8, k 8+2t..)
//   B 16x8 (col):  2 registers = (k 2t..2t+1, col g), (k 8+2t.., col g)
//   C 16x8 f32:    4 values = (row g, cols 2t, 2t+1), (row g+8, cols 2t, 2t+1)
// ldmatrix.x4 gives register i from the 8x8 matrix whose rows lanes 8i..8i+7 address; .trans
// transposes each matrix on the way (what a K-contiguous fragment needs from an MN-contiguous tile).
#pragma once

#include <array>
#include <optional>

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"

namespace tessera::codegen::mmasync {

class Builder {
 public:
  Builder(mlir::OpBuilder& b, mlir::Location loc, bool bf16) : b_(b), loc_(loc), bf16_(bf16) {
    et_ = bf16 ? mlir::Type(b.getBF16Type()) : mlir::Type(b.getF16Type());
  }
  mlir::Type elementType() const { return et_; }
  bool bf16() const { return bf16_; }

  // One 32-bit fragment register from two elements (f16: vector<2xf16>; bf16: i32, the form
  // NVVM's mma.sync takes bf16 operands in).
  mlir::Value reg(mlir::Value pair) {
    using namespace mlir;
    if (!bf16_) return pair;
    Value v = vector::BitCastOp::create(b_, loc_, VectorType::get({1}, b_.getI32Type()), pair);
    return vector::ExtractOp::create(b_, loc_, v, ArrayRef<int64_t>{0});
  }
  // Two f32 values rounded to the element type, as one fragment register.
  mlir::Value pack(mlir::Value lo, mlir::Value hi) {
    using namespace mlir;
    Value v = vector::FromElementsOp::create(b_, loc_, VectorType::get({2}, et_),
                                             ValueRange{arith::TruncFOp::create(b_, loc_, et_, lo),
                                                        arith::TruncFOp::create(b_, loc_, et_, hi)});
    return reg(v);
  }
  // ldmatrix (x1, x2 or x4, optionally transposed) at `idx` of a shared tile; its registers.
  llvm::SmallVector<mlir::Value> ldmatrix(mlir::Value tile, mlir::ValueRange idx, int num, bool trans) {
    using namespace mlir;
    auto vt = VectorType::get({num, 2}, et_);
    Value r = nvgpu::LdMatrixOp::create(b_, loc_, vt, tile, idx, b_.getBoolAttr(trans), b_.getI32IntegerAttr(num));
    SmallVector<Value> regs;
    for (int i = 0; i < num; ++i) regs.push_back(reg(vector::ExtractOp::create(b_, loc_, r, ArrayRef<int64_t>{i})));
    return regs;
  }
  // mma.sync m16n8k16 row.col, f32 accumulators (4 per thread: rows g, g, g+8, g+8).
  llvm::SmallVector<mlir::Value> mma(llvm::ArrayRef<mlir::Value> a, llvm::ArrayRef<mlir::Value> bb, llvm::ArrayRef<mlir::Value> c) {
    using namespace mlir;
    Type f32 = b_.getF32Type();
    auto st = LLVM::LLVMStructType::getLiteral(b_.getContext(), {f32, f32, f32, f32});
    std::optional<std::array<NVVM::MMATypes, 2>> types;
    if (bf16_) types = std::array<NVVM::MMATypes, 2>{NVVM::MMATypes::bf16, NVVM::MMATypes::bf16};
    auto op = NVVM::MmaOp::create(b_, loc_, st, a, bb, c, ArrayRef<int64_t>{16, 8, 16}, std::nullopt, std::nullopt, types,
                                  std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row, NVVM::MMALayout::col});
    SmallVector<Value> d;
    for (int64_t i = 0; i < 4; ++i) d.push_back(LLVM::ExtractValueOp::create(b_, loc_, op.getRes(), ArrayRef<int64_t>{i}));
    return d;
  }
  // cp.async of 16 bytes (8 elements) global -> shared, L1 bypassed. With `srcElements` (an index
  // value, 0 or 8) only that many are read and the rest zero-filled; its token.
  mlir::Value copy16(mlir::Value dst, mlir::ValueRange dstIdx, mlir::Value src, mlir::ValueRange srcIdx,
                     mlir::Value srcElements = mlir::Value()) {
    using namespace mlir;
    auto tok = nvgpu::DeviceAsyncTokenType::get(b_.getContext());
    return nvgpu::DeviceAsyncCopyOp::create(b_, loc_, tok, dst, dstIdx, src, srcIdx, b_.getIndexAttr(8), srcElements,
                                            b_.getUnitAttr());
  }
  // cp.async.commit_group over every copy this thread issued since the last one (NVVM directly:
  // a group is per thread, whichever copies were predicated off).
  void commit() { mlir::NVVM::CpAsyncCommitGroupOp::create(b_, loc_); }
  // cp.async.wait_group `pending`: all but the newest `pending` committed groups have landed.
  void wait(int64_t pending) { mlir::NVVM::CpAsyncWaitGroupOp::create(b_, loc_, uint32_t(pending)); }

 private:
  mlir::OpBuilder& b_;
  mlir::Location loc_;
  bool bf16_;
  mlir::Type et_;
};

}  // namespace tessera::codegen::mmasync
