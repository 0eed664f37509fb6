// Owns kernel verification (structure, types, bounds by interval arithmetic, family contract)
// and the structural workload hash.
#include "ir/verifier.h"

#include <cctype>
#include <map>
#include <set>

#include "ir/families.h"
#include "ir/text.h"
#include "support/hash.h"

namespace tessera::ir {
namespace {

using detail::fail;

struct Range {
  int64_t lo = 0, hi = 0;  // inclusive
};

// Limits keep interval arithmetic far from overflow; real kernels are far smaller.
constexpr int64_t kMaxDim = int64_t(1) << 31;
constexpr int64_t kMaxNumel = int64_t(1) << 36;
constexpr size_t kMaxRank = 8;  // a cache key holds at most 8 dims

class ExprChecker {
 public:
  ExprChecker(const Kernel& k, const std::set<std::string>& readable, const std::string& stage)
      : k_(k), readable_(readable), stage_(stage) {}

  std::map<std::string, int64_t> extents;  // variables in scope -> extent

  Expected<ScalarType> type(const ExprRef& e) {
    std::string where = " in stage '" + stage_ + "'";
    switch (e->op) {
      case Op::FConst:
        if (!isFloat(e->type)) return fail("float literal with non-float type" + where);
        return e->type;
      case Op::IConst: return ScalarType::Index;
      case Op::Var:
        if (!extents.count(e->name)) return fail("unknown index variable '" + e->name + "'" + where);
        return ScalarType::Index;
      case Op::Load: {
        const TensorDecl* t = k_.find(e->name);
        if (!t) return fail("load of undeclared tensor '" + e->name + "'" + where);
        if (!readable_.count(e->name))
          return fail("stage '" + stage_ + "' reads '" + e->name + "' before any stage writes it");
        if (e->args.size() != t->shape.size())
          return fail("shape mismatch: '" + e->name + "' has rank " + std::to_string(t->shape.size()) + " but is indexed with " +
                      std::to_string(e->args.size()) + " indices" + where);
        if (e->type != t->dtype) return fail("load of '" + e->name + "' has the wrong type" + where);
        for (size_t d = 0; d < e->args.size(); ++d) {
          TESSERA_ASSIGN(ScalarType it, type(e->args[d]));
          if (it != ScalarType::Index) return fail("index " + std::to_string(d) + " of '" + e->name + "' is not an index" + where);
          Range r = range(e->args[d]);
          if (r.lo < 0 || r.hi >= t->shape[d])
            return fail("shape mismatch: index " + printExpr(e->args[d]) + " of '" + e->name + "' spans [" +
                        std::to_string(r.lo) + ", " + std::to_string(r.hi) + "] but dim " + std::to_string(d) + " has size " +
                        std::to_string(t->shape[d]) + where);
        }
        return t->dtype;
      }
      case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::Min: case Op::Max:
      case Op::FloorDiv: case Op::Mod: {
        TESSERA_ASSIGN(ScalarType a, type(e->args[0]));
        TESSERA_ASSIGN(ScalarType b, type(e->args[1]));
        if (a != b)
          return fail("dtype clash: " + std::string(typeName(a)) + " " + opName(e->op) + " " + std::string(typeName(b)) +
                      " in " + printExpr(e) + where + " (insert a cast such as f32(...))");
        if ((e->op == Op::FloorDiv || e->op == Op::Mod) && a != ScalarType::Index)
          return fail(std::string(opName(e->op)) + " needs index operands" + where);
        if (e->op == Op::Div && a == ScalarType::Index) return fail("use // for index division" + where);
        if (a == ScalarType::Bool) return fail("arithmetic on a comparison" + where);
        if ((e->op == Op::FloorDiv || e->op == Op::Mod) && range(e->args[1]).lo <= 0)
          return fail("index division by a non-positive value" + where);
        return a;
      }
      case Op::Cast: {
        TESSERA_ASSIGN(ScalarType a, type(e->args[0]));
        if (!isFloat(a) || !isFloat(e->type)) return fail("cast needs float types" + where);
        return e->type;
      }
      case Op::CmpLT: case Op::CmpLE: case Op::CmpEQ: {
        TESSERA_ASSIGN(ScalarType a, type(e->args[0]));
        TESSERA_ASSIGN(ScalarType b, type(e->args[1]));
        if (a != ScalarType::Index || b != ScalarType::Index) return fail("comparisons take index operands" + where);
        return ScalarType::Bool;
      }
      case Op::Select: {
        TESSERA_ASSIGN(ScalarType c, type(e->args[0]));
        TESSERA_ASSIGN(ScalarType a, type(e->args[1]));
        TESSERA_ASSIGN(ScalarType b, type(e->args[2]));
        if (c != ScalarType::Bool) return fail("select needs a comparison as its condition" + where);
        if (a != b || !isFloat(a)) return fail("dtype clash in select branches" + where);
        return a;
      }
      case Op::ReduceSum: case Op::ReduceMax: {
        if (e->ival <= 0 || e->ival > kMaxDim)
          return fail("reduction over '" + e->name + "' has extent " + std::to_string(e->ival) + " (must be positive)" + where);
        if (extents.count(e->name)) return fail("reduction variable '" + e->name + "' shadows another variable" + where);
        extents[e->name] = e->ival;
        auto t = type(e->args[0]);
        extents.erase(e->name);
        if (!t.ok()) return t.takeError();
        if (!isFloat(*t)) return fail("reduction of a non-float value" + where);
        return *t;
      }
      default:
        if (isUnaryValueOp(e->op)) {
          TESSERA_ASSIGN(ScalarType a, type(e->args[0]));
          if (!isFloat(a)) return fail(std::string(opName(e->op)) + " needs a float operand" + where);
          return a;
        }
        return fail("unknown op " + std::to_string(int(e->op)) + where);
    }
  }

  Range range(const ExprRef& e) const {
    auto clamp = [](__int128 v) {
      const __int128 lim = (__int128(1) << 62);
      return int64_t(v > lim ? lim : v < -lim ? -lim : v);
    };
    switch (e->op) {
      case Op::IConst: return {e->ival, e->ival};
      case Op::Var: {
        auto it = extents.find(e->name);
        return it == extents.end() ? Range{0, 0} : Range{0, it->second - 1};
      }
      case Op::Add: {
        Range a = range(e->args[0]), b = range(e->args[1]);
        return {clamp(__int128(a.lo) + b.lo), clamp(__int128(a.hi) + b.hi)};
      }
      case Op::Sub: {
        Range a = range(e->args[0]), b = range(e->args[1]);
        return {clamp(__int128(a.lo) - b.hi), clamp(__int128(a.hi) - b.lo)};
      }
      case Op::Mul: {
        Range a = range(e->args[0]), b = range(e->args[1]);
        __int128 c[4] = {__int128(a.lo) * b.lo, __int128(a.lo) * b.hi, __int128(a.hi) * b.lo, __int128(a.hi) * b.hi};
        __int128 lo = c[0], hi = c[0];
        for (auto v : c) { lo = std::min(lo, v); hi = std::max(hi, v); }
        return {clamp(lo), clamp(hi)};
      }
      case Op::FloorDiv: {
        Range a = range(e->args[0]), b = range(e->args[1]);
        if (b.lo <= 0) return {a.lo, a.hi};
        auto fd = [](int64_t x, int64_t y) { return x >= 0 ? x / y : -((-x + y - 1) / y); };
        return {std::min(fd(a.lo, b.lo), fd(a.lo, b.hi)), std::max(fd(a.hi, b.lo), fd(a.hi, b.hi))};
      }
      case Op::Mod: {
        Range b = range(e->args[1]);
        return {0, std::max<int64_t>(0, b.hi - 1)};
      }
      case Op::Min: {
        Range a = range(e->args[0]), b = range(e->args[1]);
        return {std::min(a.lo, b.lo), std::min(a.hi, b.hi)};
      }
      case Op::Max: {
        Range a = range(e->args[0]), b = range(e->args[1]);
        return {std::max(a.lo, b.lo), std::max(a.hi, b.hi)};
      }
      default: return {0, 0};
    }
  }

 private:
  const Kernel& k_;
  const std::set<std::string>& readable_;
  std::string stage_;
};

// Depth and node count of `e` by an explicit stack, stopping as soon as either limit is passed.
Status checkExprSize(const ExprRef& e, const std::string& stage) {
  std::vector<std::pair<const Expr*, int>> todo = {{e.get(), 1}};
  int64_t nodes = 0;
  while (!todo.empty()) {
    auto [x, depth] = todo.back();
    todo.pop_back();
    if (!x) return fail("stage '" + stage + "' has an empty expression node");
    if (depth > kMaxVerifiedExprDepth)
      return fail("expression of stage '" + stage + "' is deeper than " + std::to_string(kMaxVerifiedExprDepth) +
                  " operations");
    if (++nodes > kMaxVerifiedExprNodes)
      return fail("expression of stage '" + stage + "' has more than " + std::to_string(kMaxVerifiedExprNodes) +
                  " nodes");
    for (const ExprRef& a : x->args) todo.emplace_back(a.get(), depth + 1);
  }
  return {};
}

bool validName(const std::string& n) {
  if (n.empty() || !(std::isalpha(static_cast<unsigned char>(n[0])) || n[0] == '_')) return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

}  // namespace

Status verify(const Kernel& k) {
  if (!validName(k.name)) return fail("kernel name '" + k.name + "' is not an identifier");
  std::set<std::string> names;
  int nin = 0, nout = 0;
  for (const auto& t : k.tensors) {
    if (!validName(t.name)) return fail("tensor name '" + t.name + "' is not an identifier");
    if (!names.insert(t.name).second) return fail("tensor '" + t.name + "' declared twice");
    if (!isFloat(t.dtype)) return fail("tensor '" + t.name + "' has a non-float dtype");
    if (t.shape.empty()) return fail("tensor '" + t.name + "' has rank 0 (use shape [1] for a scalar)");
    if (t.shape.size() > kMaxRank) return fail("tensor '" + t.name + "' has rank " + std::to_string(t.shape.size()) +
                                               " (at most " + std::to_string(kMaxRank) + ")");
    __int128 numel = 1;
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (t.shape[d] <= 0)
        return fail("tensor '" + t.name + "': dimension " + std::to_string(d) + " is " + std::to_string(t.shape[d]) +
                    " (dimensions must be positive)");
      if (t.shape[d] > kMaxDim) return fail("tensor '" + t.name + "': dimension " + std::to_string(d) + " is too large");
      numel *= t.shape[d];
      if (numel > kMaxNumel) return fail("tensor '" + t.name + "' has too many elements");
    }
    nin += t.role == TensorRole::Input;
    nout += t.role == TensorRole::Output;
  }
  if (nin == 0) return fail("kernel has no input");
  if (nout == 0) return fail("kernel has no output");
  std::set<std::string> readable, written;
  for (const auto& t : k.tensors)
    if (t.role == TensorRole::Input) readable.insert(t.name);
  for (const auto& st : k.stages) {
    const TensorDecl* out = k.find(st.out);
    if (!out) return fail("stage writes undeclared tensor '" + st.out + "'");
    if (out->role == TensorRole::Input) return fail("stage writes input tensor '" + st.out + "'");
    if (!written.insert(st.out).second) return fail("tensor '" + st.out + "' is written by two stages");
    if (st.vars.size() != out->shape.size())
      return fail("shape mismatch: stage '" + st.out + "' has " + std::to_string(st.vars.size()) + " index variables but '" +
                  st.out + "' has rank " + std::to_string(out->shape.size()));
    ExprChecker c(k, readable, st.out);
    for (size_t d = 0; d < st.vars.size(); ++d) {
      if (!validName(st.vars[d])) return fail("bad index variable name '" + st.vars[d] + "'");
      if (c.extents.count(st.vars[d])) return fail("index variable '" + st.vars[d] + "' repeated in stage '" + st.out + "'");
      c.extents[st.vars[d]] = out->shape[d];
    }
    if (!st.value) return fail("stage '" + st.out + "' has no value");
    TESSERA_TRY(checkExprSize(st.value, st.out));
    TESSERA_ASSIGN(ScalarType t, c.type(st.value));
    if (t != out->dtype)
      return fail("dtype clash: stage '" + st.out + "' stores " + std::string(typeName(t)) + " into a " +
                  std::string(typeName(out->dtype)) + " tensor (wrap the value in " + std::string(typeName(out->dtype)) + "(...))");
    readable.insert(st.out);
  }
  for (const auto& t : k.tensors)
    if (t.role != TensorRole::Input && !written.count(t.name)) return fail("tensor '" + t.name + "' is never written");
  switch (k.family) {
    case Family::Gemm: TESSERA_TRY(analyzeGemm(k)); break;
    case Family::Elementwise: TESSERA_TRY(analyzeElementwise(k)); break;
    case Family::Attention: TESSERA_TRY(analyzeAttention(k)); break;
  }
  return {};
}

std::string workloadHash(const Kernel& k) { return sha256Hex(printKernel(k, {true})); }

}  // namespace tessera::ir
