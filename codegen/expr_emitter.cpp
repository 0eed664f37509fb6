// Owns Expr -> arith/math emission. Transcendental functions stay math ops here; the host
// pipeline turns them into polynomials after vectorization (mlir_env approximateMath).
#include "codegen/expr_emitter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/TypeUtilities.h"

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

  // A float type of element `t`: a vector of cb.lanes when the caller emits vector code.
  Type floatOf(Type t) { return cb.lanes > 0 ? Type(VectorType::get({cb.lanes}, t)) : t; }
  Value f32c(double v) { return cst(floatOf(b.getF32Type()), v); }
  Value add(Value x, Value y) { return arith::AddFOp::create(b, loc, x, y, fm); }
  Value mul(Value x, Value y) { return arith::MulFOp::create(b, loc, x, y, fm); }
  Value divf(Value x, Value y) {
    if (!cb.fastMath) return arith::DivFOp::create(b, loc, x, y, fm);
    // LLVM replaces x / y with x * rcp(y) refined only when the division may assume finite
    // operands and result (ninf) too: MATH=fast is for finite data.
    auto arcp = arith::FastMathFlagsAttr::get(
        b.getContext(), arith::FastMathFlags::contract | arith::FastMathFlags::arcp | arith::FastMathFlags::ninf);
    return arith::DivFOp::create(b, loc, x, y, arcp);
  }
  // An f32 constant of `ft` (a scalar inside linalg bodies, a splat where the caller is vectorized).
  Value cst(Type ft, double v) {
    auto attr = b.getF32FloatAttr(float(v));
    if (auto vt = dyn_cast<VectorType>(ft)) return arith::ConstantOp::create(b, loc, DenseElementsAttr::get(vt, attr));
    return arith::ConstantOp::create(b, loc, attr);
  }
  // Clamps as compare + select, one vmaxps/vminps each (arith.maxnumf is expanded into four
  // NaN-aware instructions per clamp before LLVM sees it). pick: x where the compare holds, else
  // the bound, so a NaN x becomes the bound.
  Value pick(arith::CmpFPredicate p, Value x, Value bound) {
    return arith::SelectOp::create(b, loc, arith::CmpFOp::create(b, loc, p, x, bound), x, bound);
  }
  // v where v is not `beyond` the bound, else the bound: a NaN v fails the compare and passes.
  Value limit(arith::CmpFPredicate beyond, Value v, double bound) {
    Value c = cst(v.getType(), bound);
    return arith::SelectOp::create(b, loc, arith::CmpFOp::create(b, loc, beyond, v, c), c, v);
  }
  Value horner(Value x, const double* coef, int n) {  // coef[0] + coef[1] x + ... + coef[n-1] x^(n-1)
    Type ft = x.getType();
    Value p = cst(ft, coef[n - 1]);
    for (int i = n - 2; i >= 0; --i) p = math::FmaOp::create(b, loc, p, x, cst(ft, coef[i]));
    return p;
  }
  // erf(x) = x P(x^2) / Q(x^2) on [-4, 4], x clamped there, the result kept within [-1, 1].
  // Fitted here (Lawson-weighted least squares for relative error, degrees 11/10) to erf plus a
  // bump of 8e-7 rising from 3.6 to 4, so that R >= 1 + 2 ulp on [3.85, 4] and the limit makes
  // it exactly 1 there (1 - erf < 5e-8 beyond 3.85): gelu_erf of a large negative x is then
  // exactly 0, not x times the fit's last ulp. Measured on the host: 2.4e-7 max relative error
  // (math.erf's polynomial expansion: 1.7e-7), in 19 vector instructions instead of about 90
  // (that expansion picks each coefficient of three intervals with a blend): bias+gelu_erf went
  // from 0.23-0.28x to 0.51-0.60x of memcpy on an AVX2 VM. NaN passes through.
  // MATH=fast: degrees 9/6 (P of degree 4 and Q of degree 3 in x^2), fitted the same way
  // without the bump: 4.9e-6 max relative error in f32, 7 FMAs instead of 10. (A 3/3 fit, 2.3e-5,
  // failed the reference check in gelu_erf: 1 + erf(x) cancels for negative x.)
  Value erfRational(Value x) {
    static const double P[] = {1.1283790884764788,    0.21106687338029229,    0.055299330523244303,
                               0.0045840522012369775, 0.00029227016811836717, 1.7637054318120349e-06};
    static const double Q[] = {1.0,                  0.52038435531092597,    0.12247972184747975,
                               0.016639828843230772, 0.0013388367339800811, 3.5465153015230844e-05};
    static const double Pf[] = {1.1283844132462204, 0.16336086035614084, 0.04722892715286424, 0.0010736872673705068,
                                -4.505341854662974e-06};
    static const double Qf[] = {1.0, 0.4782073525148894, 0.1009136511979064, 0.01104875817402452};
    auto within = [&](Value v, double bound) {
      return limit(arith::CmpFPredicate::OLT, limit(arith::CmpFPredicate::OGT, v, bound), -bound);
    };
    Value xc = within(x, 4.0);
    Value w = mul(xc, xc);
    if (cb.fastMath) return within(divf(mul(xc, horner(w, Pf, 5)), horner(w, Qf, 4)), 1.0);
    return within(divf(mul(xc, horner(w, P, 6)), horner(w, Q, 6)), 1.0);
  }
  // 2^t for the saturating uses below (sigmoid, GELU): clamp to [-126, 126], split t = n + f
  // (round to even), a degree-5 polynomial for 2^f (see below) and
  // n added to its exponent bits — 13 vector instructions, against ~21 for math.exp's general expansion
  // (measured, cache-resident bias+GELU: 20 -> 25 GB/s). Saturation is harmless here because
  // the result only ever feeds 1 / (1 + 2^t).
  Value exp2Sat(Value t) {
    if (!cb.bitExp2) return math::ExpOp::create(b, loc, mul(t, f32c(0.6931471805599453)), fm);
    Type ft = t.getType();
    auto c = [&](double v) { return cst(ft, v); };
    // A NaN t, which only a NaN input gives, becomes a bound (its bits would otherwise reach the
    // integer exponent arithmetic below) and the numerator still carries the NaN to the result.
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
    static const double P[] = {1.0000000716553,      6.931469670628816e-1, 2.402211972075222e-1,
                               5.550713275067905e-2, 9.675541502606800e-3, 1.327647195903091e-3};
    // MATH=fast: degree 3, fitted the same way: 7.5e-5 max relative, two FMAs less.
    static const double Pf[] = {0.9999280727914266, 0.6932609870111994, 0.24261113509452512, 0.055171666814685126};
    Value p = cb.fastMath ? horner(f, Pf, 4) : horner(f, P, 6);
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
      case Op::FConst: {
        auto attr = FloatAttr::get(mlirType(b, e->type), e->fval);
        if (cb.lanes > 0)
          return Value(arith::ConstantOp::create(b, loc, DenseElementsAttr::get(cast<ShapedType>(floatOf(attr.getType())), attr)));
        return Value(arith::ConstantOp::create(b, loc, attr));
      }
      case Op::IConst: return Value(arith::ConstantIndexOp::create(b, loc, e->ival));
      case Op::Var: return cb.indexVar(e->name);
      case Op::Load: return cb.load(*e);
      case Op::Cast: {
        TESSERA_ASSIGN(Value x, emit(e->args[0]));
        Type to = floatOf(mlirType(b, e->type));
        unsigned from = getElementTypeOrSelf(x.getType()).getIntOrFloatBitWidth(),
                 want = getElementTypeOrSelf(to).getIntOrFloatBitWidth();
        if (x.getType() == to) return x;
        if (want > from) return Value(arith::ExtFOp::create(b, loc, to, x));
        if (want < from) return Value(arith::TruncFOp::create(b, loc, to, x));
        // f16 <-> bf16: through f32
        Value w = arith::ExtFOp::create(b, loc, floatOf(b.getF32Type()), x);
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
      case Op::Tanh: {
        if (!cb.fastMath) return Value(math::TanhOp::create(b, loc, x, fm));
        // MATH=fast: x P(x^2) / Q(x^2) on [-9, 9] with P and Q of degree 3, fitted here like erf
        // (6.1e-6 max relative error in f32; 1 - tanh(9) is below f32's half ulp of 1), kept
        // within [-1, 1]: 6 FMAs and a division instead of MLIR's longer expansion.
        static const double P[] = {0.999994100092969, 0.1205846245327262, 0.002066844704519545, 3.023808842751542e-06};
        static const double Q[] = {1.0, 0.45388027867949116, 0.020068234340656514, 0.00012039090787633472};
        auto within = [&](Value v, double bound) {
          return limit(arith::CmpFPredicate::OLT, limit(arith::CmpFPredicate::OGT, v, bound), -bound);
        };
        Value xc = within(x, 9.0);
        Value w = mul(xc, xc);
        return within(divf(mul(xc, horner(w, P, 4)), horner(w, Q, 4)), 1.0);
      }
      case Op::Erf: return erfRational(x);
      case Op::Sigmoid: return sigmoid(x);
      case Op::Relu: return Value(arith::MaxNumFOp::create(b, loc, x, f32c(0.0), fm));
      case Op::Silu: return mul(x, sigmoid(x));
      case Op::Gelu: {  // 0.5 x (1 + tanh(u)) = x / (1 + e^(-2u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
        Value x2 = mul(x, x);
        Value poly = math::FmaOp::create(b, loc, x2, f32c(-2.0 * 0.7978845608028654 * 0.044715 * 1.4426950408889634),
                                         f32c(-2.0 * 0.7978845608028654 * 1.4426950408889634));
        return divf(x, add(f32c(1.0), exp2Sat(mul(x, poly))));
      }
      case Op::GeluErf: {  // 0.5 x (1 + erf(x / sqrt 2)) = h + h erf(..), h = x / 2
        Value h = mul(f32c(0.5), x);
        return Value(math::FmaOp::create(b, loc, h, erfRational(mul(x, f32c(0.7071067811865476))), h));
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
