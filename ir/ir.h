// Owns the tensor-expression IR: tensors, expressions (value and index), stages and kernels.
//
// A kernel is a list of tensor declarations and a list of stages `out[v0, v1, ...] = expr`, run in
// order. Expressions are immutable DAG nodes shared through ExprRef. Value arithmetic is typed:
// inputs of f16/bf16 are converted explicitly (`f32(A[i, k])`), arithmetic happens in one float
// type, and a store into an f16/bf16 tensor casts explicitly. Index expressions (vars, constants,
// + - * floordiv mod) address tensors; comparisons of index expressions drive `select` (masks).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace tessera::ir {

enum class Op : uint8_t {
  // leaves
  FConst,   // float literal (fval), type f32 unless cast
  IConst,   // index literal (ival)
  Var,      // index variable (name)
  Load,     // name[args...]
  // arithmetic on values or indices (operands share one type)
  Add, Sub, Mul, Div, Min, Max,
  FloorDiv, Mod,  // index only
  // unary value ops
  Neg, Abs, Exp, Log, Sqrt, Rsqrt, Tanh, Sigmoid, Relu, Gelu, GeluErf, Silu, Erf,
  Cast,     // to `type`
  // index comparisons -> bool
  CmpLT, CmpLE, CmpEQ,
  Select,   // select(bool, a, b)
  // reductions over a fresh index variable `name` in [0, ival)
  ReduceSum, ReduceMax,
};

struct Expr;
using ExprRef = std::shared_ptr<const Expr>;

struct Expr {
  Op op;
  ScalarType type = ScalarType::F32;  // result type (filled by constructors / type inference)
  double fval = 0;                    // FConst
  int64_t ival = 0;                   // IConst value, reduction extent
  std::string name;                   // Var name, Load tensor, reduction variable
  std::vector<ExprRef> args;
};

const char* opName(Op op);             // text spelling: "add", "exp", "sum", ...
bool isUnaryValueOp(Op op);            // Neg..Erf
bool isBinaryArith(Op op);             // Add..Mod
bool isCompare(Op op);
bool isReduce(Op op);

// Constructors. They set `type` from the operands; the verifier reports mismatches.
ExprRef fconst(double v, ScalarType t = ScalarType::F32);
ExprRef iconst(int64_t v);
ExprRef var(const std::string& name);
ExprRef load(const std::string& tensor, std::vector<ExprRef> idx, ScalarType t);
ExprRef binary(Op op, ExprRef a, ExprRef b);
ExprRef unary(Op op, ExprRef a);
ExprRef cast(ScalarType t, ExprRef a);
ExprRef compare(Op op, ExprRef a, ExprRef b);
ExprRef select(ExprRef c, ExprRef a, ExprRef b);
ExprRef reduce(Op op, const std::string& v, int64_t extent, ExprRef body);
inline ExprRef add(ExprRef a, ExprRef b) { return binary(Op::Add, std::move(a), std::move(b)); }
inline ExprRef sub(ExprRef a, ExprRef b) { return binary(Op::Sub, std::move(a), std::move(b)); }
inline ExprRef mul(ExprRef a, ExprRef b) { return binary(Op::Mul, std::move(a), std::move(b)); }
inline ExprRef div(ExprRef a, ExprRef b) { return binary(Op::Div, std::move(a), std::move(b)); }

enum class TensorRole : uint8_t { Input, Output, Temp };

struct TensorDecl {
  std::string name;
  TensorRole role = TensorRole::Input;
  ScalarType dtype = ScalarType::F32;
  std::vector<int64_t> shape;
  int64_t numel() const;
};

struct Stage {
  std::string out;                // tensor written
  std::vector<std::string> vars;  // one index variable per dim of `out`
  ExprRef value;
};

enum class Family : uint8_t { Gemm, Elementwise, Attention };
const char* familyName(Family f);
bool parseFamily(const std::string& s, Family* f);

struct Kernel {
  std::string name;
  Family family = Family::Elementwise;
  std::vector<TensorDecl> tensors;
  std::vector<Stage> stages;

  const TensorDecl* find(const std::string& name) const;
  std::vector<const TensorDecl*> inputs() const;   // declaration order
  std::vector<const TensorDecl*> outputs() const;  // declaration order
};

}  // namespace tessera::ir
