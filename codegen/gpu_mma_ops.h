// Owns the register-level builders the tensor-core attention kernels share (flash-mma on mma.sync,
// flash-wgmma on wgmma): f32 arithmetic with contraction allowed, 2^x on the SFU, quad shuffles,
// 16-bit pairs packed into 32-bit fragment registers, ldmatrix and mma.sync m16n8k16.
#pragma once

#include "codegen/gpu_loops.h"
#include "ir/ir.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace tessera::codegen {

class MmaOps {
 public:
  MmaOps(mlir::OpBuilder& b, mlir::Location loc, ir::ScalarType dtype) : b_(b), loc_(loc), ix_{b, loc} {
    using namespace mlir;
    f32_ = b.getF32Type();
    i32_ = b.getI32Type();
    bf16_ = dtype == ir::ScalarType::BF16;
    et_ = bf16_ ? Type(b.getBF16Type()) : Type(b.getF16Type());
    fm_ = arith::FastMathFlagsAttr::get(b.getContext(), arith::FastMathFlags::contract);
  }
  mlir::Value f(float v) { return mlir::arith::ConstantOp::create(b_, loc_, b_.getF32FloatAttr(v)); }
  mlir::Value add(mlir::Value x, mlir::Value y) { return mlir::arith::AddFOp::create(b_, loc_, x, y, fm_); }
  mlir::Value sub(mlir::Value x, mlir::Value y) { return mlir::arith::SubFOp::create(b_, loc_, x, y, fm_); }
  mlir::Value mul(mlir::Value x, mlir::Value y) { return mlir::arith::MulFOp::create(b_, loc_, x, y, fm_); }
  mlir::Value max(mlir::Value x, mlir::Value y) { return mlir::arith::MaxNumFOp::create(b_, loc_, x, y, fm_); }
  // 2^x on the SFU (ex2.approx: 2 ulp; a masked -1e30 flushes to 0).
  mlir::Value exp2(mlir::Value x) {
    return mlir::NVVM::InlinePtxOp::create(b_, loc_, mlir::TypeRange{f32_}, mlir::ValueRange{x}, mlir::ValueRange{}, "ex2.approx.ftz.f32 $0, $1;",
                                     mlir::Value())
        ->getResult(0);
  }
  mlir::Value shflXor(mlir::Value v, int32_t lanes) {
    auto off = mlir::arith::ConstantOp::create(b_, loc_, b_.getI32IntegerAttr(lanes));
    auto width = mlir::arith::ConstantOp::create(b_, loc_, b_.getI32IntegerAttr(32));
    return mlir::gpu::ShuffleOp::create(b_, loc_, v, off, width, mlir::gpu::ShuffleMode::XOR).getShuffleResult();
  }
  // One 32-bit fragment register from two elements (f16: vector<2xf16>; bf16: i32).
  mlir::Value reg(mlir::Value pair) {
    if (!bf16_) return pair;
    mlir::Value v = mlir::vector::BitCastOp::create(b_, loc_, mlir::VectorType::get({1}, i32_), pair);
    return mlir::vector::ExtractOp::create(b_, loc_, v, mlir::ArrayRef<int64_t>{0});
  }
  mlir::Value pack(mlir::Value lo, mlir::Value hi) {
    mlir::Value v = mlir::vector::FromElementsOp::create(b_, loc_, mlir::VectorType::get({2}, et_),
                                             mlir::ValueRange{mlir::arith::TruncFOp::create(b_, loc_, et_, lo),
                                                        mlir::arith::TruncFOp::create(b_, loc_, et_, hi)});
    return reg(v);
  }
  // ldmatrix (x2 or x4, optionally transposed) from a 2-D shared tile; its registers.
  mlir::SmallVector<mlir::Value> ldmatrix(mlir::Value tile, mlir::Value row, mlir::Value col, int num, bool trans) {
    auto vt = mlir::VectorType::get({num, 2}, et_);
    mlir::Value r = mlir::nvgpu::LdMatrixOp::create(b_, loc_, vt, tile, mlir::ValueRange{row, col}, b_.getBoolAttr(trans),
                                        b_.getI32IntegerAttr(num));
    mlir::SmallVector<mlir::Value> regs;
    for (int i = 0; i < num; ++i) regs.push_back(reg(mlir::vector::ExtractOp::create(b_, loc_, r, mlir::ArrayRef<int64_t>{i})));
    return regs;
  }
  // mma.sync m16n8k16 row.col, f32 accumulators (4 per thread: rows g, g, g+8, g+8).
  mlir::SmallVector<mlir::Value> mma(mlir::ArrayRef<mlir::Value> a, mlir::ArrayRef<mlir::Value> bb, mlir::ArrayRef<mlir::Value> c) {
    auto st = mlir::LLVM::LLVMStructType::getLiteral(b_.getContext(), {f32_, f32_, f32_, f32_});
    std::optional<std::array<mlir::NVVM::MMATypes, 2>> types;
    if (bf16_) types = std::array<mlir::NVVM::MMATypes, 2>{mlir::NVVM::MMATypes::bf16, mlir::NVVM::MMATypes::bf16};
    auto op = mlir::NVVM::MmaOp::create(b_, loc_, st, a, bb, c, mlir::ArrayRef<int64_t>{16, 8, 16}, std::nullopt, std::nullopt, types,
                                  std::array<mlir::NVVM::MMALayout, 2>{mlir::NVVM::MMALayout::row, mlir::NVVM::MMALayout::col});
    mlir::SmallVector<mlir::Value> d;
    for (int64_t i = 0; i < 4; ++i) d.push_back(mlir::LLVM::ExtractValueOp::create(b_, loc_, op.getRes(), mlir::ArrayRef<int64_t>{i}));
    return d;
  }

  mlir::OpBuilder& b_;
  mlir::Location loc_;
  gpuir::Idx ix_;
  mlir::Type f32_, i32_, et_;
  bool bf16_ = false;
  mlir::arith::FastMathFlagsAttr fm_;
};

}  // namespace tessera::codegen
