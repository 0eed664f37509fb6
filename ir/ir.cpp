// Owns IR node construction and the small queries on kernels and ops.
#include "ir/ir.h"

namespace tessera::ir {

const char* opName(Op op) {
  switch (op) {
    case Op::FConst: return "fconst";
    case Op::IConst: return "iconst";
    case Op::Var: return "var";
    case Op::Load: return "load";
    case Op::Add: return "add";
    case Op::Sub: return "sub";
    case Op::Mul: return "mul";
    case Op::Div: return "div";
    case Op::Min: return "min";
    case Op::Max: return "max";
    case Op::FloorDiv: return "floordiv";
    case Op::Mod: return "mod";
    case Op::Neg: return "neg";
    case Op::Abs: return "abs";
    case Op::Exp: return "exp";
    case Op::Log: return "log";
    case Op::Sqrt: return "sqrt";
    case Op::Rsqrt: return "rsqrt";
    case Op::Tanh: return "tanh";
    case Op::Sigmoid: return "sigmoid";
    case Op::Relu: return "relu";
    case Op::Gelu: return "gelu";
    case Op::GeluErf: return "gelu_erf";
    case Op::Silu: return "silu";
    case Op::Erf: return "erf";
    case Op::Cast: return "cast";
    case Op::CmpLT: return "lt";
    case Op::CmpLE: return "le";
    case Op::CmpEQ: return "eq";
    case Op::Select: return "select";
    case Op::ReduceSum: return "sum";
    case Op::ReduceMax: return "max";
  }
  return "?";
}

bool isUnaryValueOp(Op op) { return op >= Op::Neg && op <= Op::Erf; }
bool isBinaryArith(Op op) { return op >= Op::Add && op <= Op::Mod; }
bool isCompare(Op op) { return op == Op::CmpLT || op == Op::CmpLE || op == Op::CmpEQ; }
bool isReduce(Op op) { return op == Op::ReduceSum || op == Op::ReduceMax; }

namespace {
std::shared_ptr<Expr> node(Op op, ScalarType t) {
  auto e = std::make_shared<Expr>();
  e->op = op;
  e->type = t;
  return e;
}
}  // namespace

ExprRef fconst(double v, ScalarType t) {
  auto e = node(Op::FConst, t);
  e->fval = v;
  return e;
}
ExprRef iconst(int64_t v) {
  auto e = node(Op::IConst, ScalarType::Index);
  e->ival = v;
  return e;
}
ExprRef var(const std::string& name) {
  auto e = node(Op::Var, ScalarType::Index);
  e->name = name;
  return e;
}
ExprRef load(const std::string& tensor, std::vector<ExprRef> idx, ScalarType t) {
  auto e = node(Op::Load, t);
  e->name = tensor;
  e->args = std::move(idx);
  return e;
}
ExprRef binary(Op op, ExprRef a, ExprRef b) {
  // A float operand wins: the verifier reports real clashes (f16 vs f32, index vs float).
  ScalarType t = isFloat(a->type) ? a->type : b->type;
  auto e = node(op, t);
  e->args = {std::move(a), std::move(b)};
  return e;
}
ExprRef unary(Op op, ExprRef a) {
  auto e = node(op, a->type);
  e->args = {std::move(a)};
  return e;
}
ExprRef cast(ScalarType t, ExprRef a) {
  auto e = node(Op::Cast, t);
  e->args = {std::move(a)};
  return e;
}
ExprRef compare(Op op, ExprRef a, ExprRef b) {
  auto e = node(op, ScalarType::Bool);
  e->args = {std::move(a), std::move(b)};
  return e;
}
ExprRef select(ExprRef c, ExprRef a, ExprRef b) {
  auto e = node(Op::Select, isFloat(a->type) ? a->type : b->type);
  e->args = {std::move(c), std::move(a), std::move(b)};
  return e;
}
ExprRef reduce(Op op, const std::string& v, int64_t extent, ExprRef body) {
  auto e = node(op, body->type);
  e->name = v;
  e->ival = extent;
  e->args = {std::move(body)};
  return e;
}

int64_t TensorDecl::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

const char* familyName(Family f) {
  switch (f) {
    case Family::Gemm: return "gemm";
    case Family::Elementwise: return "elementwise";
    case Family::Attention: return "attention";
  }
  return "?";
}

bool parseFamily(const std::string& s, Family* f) {
  if (s == "gemm") *f = Family::Gemm;
  else if (s == "elementwise") *f = Family::Elementwise;
  else if (s == "attention") *f = Family::Attention;
  else return false;
  return true;
}

const TensorDecl* Kernel::find(const std::string& n) const {
  for (const auto& t : tensors)
    if (t.name == n) return &t;
  return nullptr;
}

std::vector<const TensorDecl*> Kernel::inputs() const {
  std::vector<const TensorDecl*> r;
  for (const auto& t : tensors)
    if (t.role == TensorRole::Input) r.push_back(&t);
  return r;
}

std::vector<const TensorDecl*> Kernel::outputs() const {
  std::vector<const TensorDecl*> r;
  for (const auto& t : tensors)
    if (t.role == TensorRole::Output) r.push_back(&t);
  return r;
}

}  // namespace tessera::ir
