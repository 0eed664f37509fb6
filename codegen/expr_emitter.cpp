// Owns Expr -> arith/math emission. Transcendental functions stay math ops here; the host
// pipeline turns them into polynomials after vectorization (mlir_env approximateMath).
#include "codegen/expr_emitter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

namespace tessera::codegen {

using namespace mlir;

Type mlirType(OpBuilder& b, ir::ScalarType t) {
  switch (t) {
    case ir::ScalarType::F32: return b.getF32Type();
    case ir::ScalarType::F16: return b.getF16Type();
    case ir::ScalarType::BF16: return b.getBF16Type();
    case ir::ScalarType::Index: return b.getIndexType();
    case ir::ScalarType::Bool: return b.getI1Type();
  }
  return b.getF32Type();
}

namespace {

struct Emitter {
  OpBuilder& b;
  Location loc;
  const ExprCallbacks& cb;
  arith::FastMathFlagsAttr fm;

  Value f32c(double v) { return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(float(v))); }
  Value add(Value x, Value y) { return arith::AddFOp::create(b, loc, x, y, fm); }
  Value mul(Value x, Value y) { return arith::MulFOp::create(b, loc, x, y, fm); }
  Value divf(Value x, Value y) { return arith::DivFOp::create(b, loc, x, y, fm); }
  // 2^t for the saturating uses below (sigmoid, GELU): clamp to [-126, 126], split t = n + f
  // (round to even), a degree-5 polynomial for 2^f (see below) and
  // n added to its exponent bits — 13 vector instructions, against ~21 for math.exp's general expansion
  // (measured, cache-resident bias+GELU: 20 -> 25 GB/s). Saturation is harmless here because
  // the result only ever feeds 1 / (1 + 2^t).
  Value exp2Sat(Value t) {
    if (!cb.bitExp2) return math::ExpOp::create(b, loc, mul(t, f32c(0.6931471805599453)), fm);
    Type ft = t.getType();
    auto c = [&](double v) -> Value {
      auto attr = b.getF32FloatAttr(float(v));
      if (auto vt = dyn_cast<VectorType>(ft)) return arith::ConstantOp::create(b, loc, DenseElementsAttr::get(vt, attr));
      return arith::ConstantOp::create(b, loc, attr);
    };
    // Clamps as compare + select (one vmaxps/vminps each; a NaN t, which only a NaN input gives,
    // becomes a bound and the numerator still carries the NaN to the result). arith.maxnumf is
    // expanded into four NaN-aware instructions per clamp before LLVM sees it.
    auto pick = [&](arith::CmpFPredicate p, Value x, Value bound) -> Value {
      return arith::SelectOp::create(b, loc, arith::CmpFOp::create(b, loc, p, x, bound), x, bound);
    };
    t = pick(arith::CmpFPredicate::OGT, t, c(-126.0));
    t = pick(arith::CmpFPredicate::OLT, t, c(126.0));
    // n = roundeven(t) by the 1.5*2^23 trick: t + M rounds t to an integer held in M's low
    // mantissa bits, so the same value also gives the exponent bits of 2^n with integer ops only
    // (no fptosi: a GPU vector pattern mistypes fptosi on vector<1xf32> during mapping).
    const double M = 12582912.0;  // 0x4B400000
    Value j = arith::AddFOp::create(b, loc, t, c(M), fm);
    Value n = arith::SubFOp::create(b, loc, j, c(M), fm);
    Value f = arith::SubFOp::create(b, loc, t, n, fm);
    // Degree 5, fitted here for relative error on [-0.5, 0.5] (Lawson-weighted least squares):
    // 2.3e-7 max relative in f32, against 9.6e-8 for Cephes' degree 6 — one FMA less on the pipe
    // that bounds sigmoid/GELU.
    const double P[] = {1.327647195903091e-3, 9.675541502606800e-3, 5.550713275067905e-2,
                        2.402211972075222e-1, 6.931469670628816e-1, 1.0000000716553};
    Value p = c(P[0]);
    for (int i = 1; i < 6; ++i) p = math::FmaOp::create(b, loc, p, f, c(P[i]));
    Type it = b.getI32Type();
    if (auto vt = dyn_cast<VectorType>(ft)) it = VectorType::get(vt.getShape(), b.getI32Type());
    auto ic = [&](int32_t v) -> Value {
      auto attr = b.getI32IntegerAttr(v);
      if (auto vt = dyn_cast<VectorType>(it)) return arith::ConstantOp::create(b, loc, DenseElementsAttr::get(vt, attr));
      return arith::ConstantOp::create(b, loc, attr);
    };
    // p * 2^n by adding n to p's exponent field (p in [0.70, 1.42], |n| <= 126 keeps it in range):
    // integer ops instead of a multiply on the FMA pipes.
    Value ji = arith::BitcastOp::create(b, loc, it, j);
    Value nShifted = arith::ShLIOp::create(b, loc, arith::SubIOp::create(b, loc, ji, ic(0x4B400000)), ic(23));
    Value bits = arith::AddIOp::create(b, loc, arith::BitcastOp::create(b, loc, it, p), nShifted);
    return arith::BitcastOp::create(b, loc, ft, bits);
  }
  // 1 / (1 + e^-x)
  Value sigmoid(Value x) {
    Value t = mul(x, f32c(-1.4426950408889634));
    return divf(f32c(1.0), add(f32c(1.0), exp2Sat(t)));
  }

  Expected<Value> emit(const ir::ExprRef& e) {
    using ir::Op;
    bool isIndex = e->type == ir::ScalarType::Index;
    switch (e->op) {
      case Op::FConst:
        return Value(arith::ConstantOp::create(b, loc, FloatAttr::get(mlirType(b, e->type), e->fval)));
      case Op::IConst: return Value(arith::ConstantIndexOp::create(b, loc, e->ival));
      case Op::Var: return cb.indexVar(e->name);
      case Op::Load: return cb.load(*e);
      case Op::Cast: {
        TESSERA_ASSIGN(Value x, emit(e->args[0]));
        Type to = mlirType(b, e->type);
        unsigned from = cast<FloatType>(x.getType()).getWidth(), want = cast<FloatType>(to).getWidth();
        if (x.getType() == to) return x;
        if (want > from) return Value(arith::ExtFOp::create(b, loc, to, x));
        if (want < from) return Value(arith::TruncFOp::create(b, loc, to, x));
        // f16 <-> bf16: through f32
        Value w = arith::ExtFOp::create(b, loc, b.getF32Type(), x);
        return Value(arith::TruncFOp::create(b, loc, to, w));
      }
      case Op::CmpLT: case Op::CmpLE: case Op::CmpEQ: {
        TESSERA_ASSIGN(Value x, emit(e->args[0]));
        TESSERA_ASSIGN(Value y, emit(e->args[1]));
        auto pred = e->op == Op::CmpLT ? arith::CmpIPredicate::slt
                    : e->op == Op::CmpLE ? arith::CmpIPredicate::sle
                                         : arith::CmpIPredicate::eq;
        return Value(arith::CmpIOp::create(b, loc, pred, x, y));
      }
      case Op::Select: {
        TESSERA_ASSIGN(Value c, emit(e->args[0]));
        TESSERA_ASSIGN(Value x, emit(e->args[1]));
        TESSERA_ASSIGN(Value y, emit(e->args[2]));
        return Value(arith::SelectOp::create(b, loc, c, x, y));
      }
      case Op::ReduceSum: case Op::ReduceMax:
        return makeError(ErrorCode::Internal, "reduction inside an elementwise region");
      default: break;
    }
    if (ir::isBinaryArith(e->op)) {
      TESSERA_ASSIGN(Value x, emit(e->args[0]));
      TESSERA_ASSIGN(Value y, emit(e->args[1]));
      if (isIndex) {
        switch (e->op) {
          case Op::Add: return Value(arith::AddIOp::create(b, loc, x, y));
          case Op::Sub: return Value(arith::SubIOp::create(b, loc, x, y));
          case Op::Mul: return Value(arith::MulIOp::create(b, loc, x, y));
          case Op::Min: return Value(arith::MinSIOp::create(b, loc, x, y));
          case Op::Max: return Value(arith::MaxSIOp::create(b, loc, x, y));
          case Op::FloorDiv: return Value(arith::FloorDivSIOp::create(b, loc, x, y));
          case Op::Mod: {
            Value r = arith::RemSIOp::create(b, loc, x, y);
            Value neg = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, r, arith::ConstantIndexOp::create(b, loc, 0));
            return Value(arith::SelectOp::create(b, loc, neg, arith::AddIOp::create(b, loc, r, y), r));
          }
          default: return makeError(ErrorCode::Internal, "bad index op");
        }
      }
      switch (e->op) {
        case Op::Add: return add(x, y);
        case Op::Sub: return Value(arith::SubFOp::create(b, loc, x, y, fm));
        case Op::Mul: return mul(x, y);
        case Op::Div: return divf(x, y);
        case Op::Min: return Value(arith::MinNumFOp::create(b, loc, x, y, fm));
        case Op::Max: return Value(arith::MaxNumFOp::create(b, loc, x, y, fm));
        default: return makeError(ErrorCode::Internal, "bad float op");
      }
    }
    TESSERA_ASSIGN(Value x, emit(e->args[0]));
    switch (e->op) {
      case Op::Neg: return Value(arith::NegFOp::create(b, loc, x, fm));
      case Op::Abs: return Value(math::AbsFOp::create(b, loc, x, fm));
      case Op::Exp: return Value(math::ExpOp::create(b, loc, x, fm));
      case Op::Log: return Value(math::LogOp::create(b, loc, x, fm));
      case Op::Sqrt: return Value(math::SqrtOp::create(b, loc, x, fm));
      case Op::Rsqrt: return Value(math::RsqrtOp::create(b, loc, x, fm));
      case Op::Tanh: return Value(math::TanhOp::create(b, loc, x, fm));
      case Op::Erf: return Value(math::ErfOp::create(b, loc, x, fm));
      case Op::Sigmoid: return sigmoid(x);
      case Op::Relu: return Value(arith::MaxNumFOp::create(b, loc, x, f32c(0.0), fm));
      case Op::Silu: return mul(x, sigmoid(x));
      case Op::Gelu: {  // 0.5 x (1 + tanh(u)) = x / (1 + e^(-2u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
        Value x2 = mul(x, x);
        Value poly = math::FmaOp::create(b, loc, x2, f32c(-2.0 * 0.7978845608028654 * 0.044715 * 1.4426950408889634),
                                         f32c(-2.0 * 0.7978845608028654 * 1.4426950408889634));
        return divf(x, add(f32c(1.0), exp2Sat(mul(x, poly))));
      }
      case Op::GeluErf: {  // 0.5 x (1 + erf(x / sqrt 2))
        Value t = math::ErfOp::create(b, loc, mul(x, f32c(0.7071067811865476)), fm);
        return mul(mul(f32c(0.5), x), add(f32c(1.0), t));
      }
      default: return makeError(ErrorCode::Internal, std::string("no lowering for op ") + ir::opName(e->op));
    }
  }
};

}  // namespace

Expected<Value> emitExpr(OpBuilder& b, Location loc, const ir::ExprRef& e, const ExprCallbacks& cb) {
  Emitter em{b, loc, cb, arith::FastMathFlagsAttr::get(b.getContext(), arith::FastMathFlags::contract)};
  return em.emit(e);
}

}  // namespace tessera::codegen
