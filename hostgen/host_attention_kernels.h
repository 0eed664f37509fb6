// Owns the building blocks of the host FlashAttention kernel (mlir-recipes/cpu-flash-attention):
// the static plan derived from (spec, config) and an emitter for the pieces the kernel is made of
// — the two register-tiled micro-kernels, the online-softmax row step, our exp2 and the loop helpers.
// host_attention.cpp assembles them into the whole function.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "ir/dtype.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

namespace tessera::codegen::attn {

// Everything static about one kernel: shapes, effective (clamped) knobs and the key-block split.
struct Plan {
  int64_t B = 1, H = 1, HKV = 1, G = 1;  // G = H / HKV query heads per kv head (GQA)
  int64_t SQ = 1, SKV = 1, D = 1;
  int64_t DP = 1;                        // D rounded up to VW: width of Qs/Acc/Vp rows
  int64_t VW = 16;                       // f32 lanes per vector
  int64_t BQ = 48, BK = 128, MR1 = 8, NR1 = 32, MR2 = 6, NR2 = 64, U1 = 2, U2 = 2;
  int64_t NQB = 1, NKB = 1;              // query / key blocks
  int64_t nFull = 1;                     // key blocks with BK valid keys
  int64_t kTail = 0;                     // valid keys in the last block when it is partial, else 0
  int64_t off = 0;                       // causal offset seq_kv - seq_q (bottom-right alignment)
  bool causal = false;
  bool packV = false;                    // V goes through an f32 scratch Vp[SKV][DP]
  double qscale = 1;                     // scale * log2(e): softmax runs in the log2 domain
  ir::ScalarType dtype = ir::ScalarType::F32;
  int64_t threads = 1;                   // workers sharing the query blocks of a kv head
  int64_t bqPad() const { return (BQ + VW - 1) / VW * VW; }
};

// The scratch buffers and kernel arguments the pieces read and write.
struct Buffers {
  mlir::Value Q, K, V, O;    // kernel arguments [B][H|HKV][S][D]
  mlir::Value Kp;            // [NKB][D][BK] f32: K of one kv head, transposed per key block
  mlir::Value Vp;            // [SKV][DP] f32 (only when plan.packV)
  mlir::Value Qs;            // [BQ][DP] f32: the query block times qscale
  mlir::Value Sb;            // [BQ][BK] f32: scores, then probabilities, of one key block
  mlir::Value Acc;           // [BQ][DP] f32: unnormalized output rows
  mlir::Value Mo, Mn, L, Rs, Al;  // [bqPad] f32: running max, new max, row sum, block sum, alpha
};

// How many keys of a block the PV product covers: a static count, or a dynamic one.
struct KeyCount {
  int64_t fixed = 0;
  mlir::Value dynamic;  // when set, `fixed` is ignored
};

// Masking of a key block's scores in the softmax step.
struct BlockMask {
  int64_t validCols = 0;    // static: columns >= validCols are masked (0: none)
  mlir::Value causalLimit;  // dynamic: column j is visible to block row i iff j <= causalLimit + i
  mlir::Value colLimit;     // with causalLimit: columns > colLimit are masked too (keys >= seq_kv)
};

class Emitter {
 public:
  Emitter(mlir::OpBuilder& b, mlir::Location loc, const Plan& p, const Buffers& buf);

  // ---- small helpers
  mlir::Value idx(int64_t v);
  mlir::Value addi(mlir::Value x, int64_t c);
  mlir::Value addi(mlir::Value x, mlir::Value y);
  mlir::Value subi(mlir::Value x, mlir::Value y);
  mlir::Value muli(mlir::Value x, int64_t c);
  mlir::Value mini(mlir::Value x, mlir::Value y);
  mlir::Value splat(float v);
  mlir::VectorType vecF32() const { return vf32_; }
  mlir::arith::FastMathFlagsAttr fast() const { return fm_; }
  // Converts a scalar or vector of the input dtype to f32 (identity for f32), and back.
  mlir::Value toF32(mlir::Value x);
  mlir::Value fromF32(mlir::Value x);

  // scf.for over [lb, ub) with `step`; `body(iv, iterArgs)` returns the values to yield.
  using Body = std::function<llvm::SmallVector<mlir::Value>(mlir::Value, mlir::ValueRange)>;
  llvm::SmallVector<mlir::Value> loop(mlir::Value lb, mlir::Value ub, int64_t step, mlir::ValueRange init,
                                      const Body& body);
  void loop(mlir::Value lb, mlir::Value ub, int64_t step, const std::function<void(mlir::Value)>& body);
  void loop(int64_t lb, int64_t ub, int64_t step, const std::function<void(mlir::Value)>& body);
  // Tiles [0, rows) x [0, cols) by mr x nr: full tiles in loops, remainder tiles peeled statically.
  void tiles2D(int64_t rows, int64_t mr, int64_t cols, int64_t nr,
               const std::function<void(mlir::Value r0, int64_t m, mlir::Value c0, int64_t n)>& tile);

  // exp2 of a vector (argument <= 0): clamp at -127, round, degree-6 polynomial of the fraction,
  // exponent bits; arguments below -126.5 give exactly 0.
  mlir::Value exp2(mlir::Value x);

  // ---- the kernel's pieces
  // Sb[:, 0:cols) = Qs · Kp[kb] (cols a multiple of VW).
  void scores(mlir::Value kb, int64_t cols);
  // Online-softmax row step over Sb[:, 0:chunks*VW): Mn = max(Mo, rowmax), Sb = exp2(Sb - Mn),
  // Rs = rowsum. Then, vectorized over rows, Al = exp2(Mo - Mn), L = L·Al + Rs, Mo = Mn.
  void softmax(int64_t chunks, const BlockMask& mask);
  // Acc = Acc·Al + Sb[:, 0:n) · V[kk0 : kk0+n) of kv head (b, hk).
  void accumulate(mlir::Value b, mlir::Value hk, mlir::Value kk0, KeyCount n);

 private:
  void scoreTile(mlir::Value kb, mlir::Value r0, int64_t mr, mlir::Value c0, int64_t nv);
  void accTile(mlir::Value b, mlir::Value hk, mlir::Value kk0, KeyCount n, mlir::Value r0, int64_t mr,
               mlir::Value c0, int64_t nv);
  mlir::Value loadV(mlir::Value b, mlir::Value hk, mlir::Value key, mlir::Value col);
  // Applies `step(k, accs)` for k in [lb, lb + count) with unroll `u`: a loop over full groups of
  // u, then the remainder (static: straight-line code; dynamic: a step-1 loop).
  using Step = std::function<void(mlir::Value k, llvm::SmallVector<mlir::Value>& accs)>;
  llvm::SmallVector<mlir::Value> unrolled(KeyCount count, int64_t u, llvm::SmallVector<mlir::Value> accs,
                                          const Step& step);

  mlir::OpBuilder& b_;
  mlir::Location loc_;
  const Plan& p_;
  const Buffers& buf_;
  mlir::VectorType vf32_, vi32_;
  mlir::arith::FastMathFlagsAttr fm_;
};

}  // namespace tessera::codegen::attn
