// Owns the register-level builders the tensor-core kernels share (flash-mma on mma.sync,
// flash-wgmma on wgmma, the mma-lane GEMM): f32 arithmetic with contraction allowed, 2^x on the SFU,
// quad shuffles, 16-bit pairs packed into 32-bit fragment registers, ldmatrix and mma.sync m16n8k16,
// and FlashAttention-2's steps over accumulators in mma.sync's per-warp layout (wgmma's is the same
// per warp): the causal key-block bound, the masked online-softmax update, the normalized store.
#pragma once

#include <string>

#include "codegen/gpu_loops.h"
#include "ir/ir.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace tessera::codegen {

class MmaOps : public gpuir::F32Builder {
 public:
  MmaOps(mlir::OpBuilder& b, mlir::Location loc, ir::ScalarType dtype) : F32Builder(b, loc) {
    using namespace mlir;
    i32_ = b.getI32Type();
    bf16_ = dtype == ir::ScalarType::BF16;
    et_ = bf16_ ? Type(b.getBF16Type()) : Type(b.getF16Type());
  }
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

  // ---- FlashAttention-2 over accumulators in mma.sync's layout: register i of a thread (lane
  // 4g + t) holds row g + 8((i%4)/2) of its warp's 16 and column 8(i/4) + 2t + i%2.
  struct Shape {
    int64_t SQ, SKV, off, BQ, BK, NKB;  // off = Skv - Sq (causal masks are bottom-right aligned)
    bool causal;
    double qscale;                      // scale * log2(e)
    // A shape-generic kernel's runtime length (query and key lengths together, off = 0): it
    // replaces SQ, SKV and NKB (the compiled ones are its bounds); null: the compiled shape.
    mlir::Value seq = {};
  };
  mlir::Value sqOf(const Shape& s) { return s.seq ? s.seq : ix_.c(s.SQ); }
  mlir::Value skvOf(const Shape& s) { return s.seq ? s.seq : ix_.c(s.SKV); }
  // The key-block loop's end: causal stops at the block of the last visible key of the block's last row.
  mlir::Value keyBlocksEnd(const Shape& s, mlir::Value q0) {
    mlir::Value nkb = s.seq ? ix_.div(ix_.add(s.seq, s.BK - 1), s.BK) : ix_.c(s.NKB);
    if (!s.causal) return nkb;
    mlir::Value lastRow = ix_.min(ix_.add(q0, s.BQ - 1), ix_.add(sqOf(s), -1));
    return mlir::arith::MinSIOp::create(b_, loc_, ix_.add(ix_.div(ix_.add(lastRow, s.off), s.BK), 1), nkb);
  }
  // The key blocks below which no key is masked for any row of the query block at q0: inside Skv
  // and, causal, left of the diagonal of its first row (at most keyBlocksEnd).
  mlir::Value unmaskedBlocksEnd(const Shape& s, mlir::Value q0) {
    mlir::Value full = s.seq ? ix_.div(s.seq, s.BK) : ix_.c(s.SKV / s.BK);
    if (!s.causal) return full;
    // Rows r >= q0 see keys <= r + off: block kb is whole for all of them when (kb + 1)·BK - 1 <= q0 + off.
    mlir::Value seen = mlir::arith::MaxSIOp::create(b_, loc_, ix_.add(q0, s.off + 1), ix_.c(0));
    return mlir::arith::MinSIOp::create(b_, loc_, ix_.div(seen, s.BK), full);
  }
  struct Softmax {
    mlir::Value mNew[2], alpha[2], lNew[2];
    mlir::SmallVector<mlir::Value> p;  // 2^(s - m), masked keys exactly 0, in the scores' layout
  };
  // One key block's online-softmax update of `scores` (keys k0..; rows rowBase + 8r), masking keys
  // past Skv and, causal, right of the diagonal (unless `mask` is false: the caller knows every
  // key of the block is visible to every row); row maxima over the quad (shfl.xor 1, 2).
  Softmax softmax(const Shape& s, mlir::ArrayRef<mlir::Value> scores, mlir::Value k0, mlir::Value tq, mlir::Value rowBase,
                  const mlir::Value mOld[2], const mlir::Value lOld[2], bool mask = true) {
    using namespace mlir;
    Value qs = f(float(s.qscale)), neg = f(-1e30f);
    SmallVector<Value> sv(scores.begin(), scores.end()), valid(scores.size());
    Value rowMax[2] = {neg, neg};
    for (size_t i = 0; i < sv.size(); ++i) {
      const int c = int(i % 4);
      Value key = ix_.add(ix_.add(k0, ix_.mul(tq, 2)), int64_t(i / 4) * 8 + c % 2);
      Value ok;
      if (mask && (s.seq || s.SKV % s.BK)) ok = ix_.lt(key, skvOf(s));
      if (mask && s.causal) {
        Value lim = ix_.add(ix_.add(rowBase, 8 * (c / 2)), s.off);
        Value cv = arith::CmpIOp::create(b_, loc_, arith::CmpIPredicate::sle, key, lim);
        ok = ok ? ix_.band(ok, cv) : cv;
      }
      Value x = mul(sv[i], qs);
      if (ok) x = arith::SelectOp::create(b_, loc_, ok, x, neg);
      valid[i] = ok;
      sv[i] = x;
      rowMax[c / 2] = max(rowMax[c / 2], x);
    }
    Softmax out;
    for (int r = 0; r < 2; ++r) {
      Value m = max(rowMax[r], shflXor(rowMax[r], 1));
      m = max(m, shflXor(m, 2));
      out.mNew[r] = max(mOld[r], m);
      out.alpha[r] = exp2(sub(mOld[r], out.mNew[r]));
      out.lNew[r] = mul(lOld[r], out.alpha[r]);
    }
    // A row none of whose keys is visible yet keeps m = -1e30: its p are exactly 0 by the select.
    for (size_t i = 0; i < sv.size(); ++i) {
      const int c = int(i % 4);
      Value x = exp2(sub(sv[i], out.mNew[c / 2]));
      if (Value ok = valid[i]) x = arith::SelectOp::create(b_, loc_, ok, x, f(0.0f));
      out.p.push_back(x);
      out.lNew[c / 2] = add(out.lNew[c / 2], x);
    }
    return out;
  }
  // O / l for rows < Sq of out[b][h][row][col] (l summed over the quad: each thread held part of
  // its rows' keys); `o` holds D/2 accumulators in the layout above.
  void storeNormalized(const Shape& s, mlir::ArrayRef<mlir::Value> o, const mlir::Value l[2], mlir::Value out,
                       mlir::Value bi, mlir::Value h, mlir::Value rowBase, mlir::Value tq) {
    using namespace mlir;
    VectorType v2 = VectorType::get({2}, et_);
    for (int r = 0; r < 2; ++r) {
      Value lr = add(l[r], shflXor(l[r], 1));
      lr = add(lr, shflXor(lr, 2));
      Value inv = arith::DivFOp::create(b_, loc_, f(1.0f), lr);
      Value row = ix_.add(rowBase, 8 * r);
      gpuir::guarded(b_, loc_, ix_.lt(row, sqOf(s)), [&] {
        for (size_t d = 0; d < o.size() / 4; ++d) {
          Value lo = mul(o[4 * d + 2 * size_t(r)], inv), hi = mul(o[4 * d + 2 * size_t(r) + 1], inv);
          Value v = vector::FromElementsOp::create(b_, loc_, v2, ValueRange{arith::TruncFOp::create(b_, loc_, et_, lo),
                                                                            arith::TruncFOp::create(b_, loc_, et_, hi)});
          vector::StoreOp::create(b_, loc_, v, out, ValueRange{bi, h, row, ix_.add(ix_.mul(tq, 2), int64_t(d) * 8)});
        }
      });
    }
  }

  mlir::Type i32_, et_;
  bool bf16_ = false;
};

}  // namespace tessera::codegen
