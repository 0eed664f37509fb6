// Owns the three family builders and numpy broadcasting.
#include "ir/builders.h"

#include <cctype>
#include <cmath>
#include <set>

#include "ir/expr_utils.h"
#include "ir/text.h"
#include "support/strings.h"

namespace tessera::ir {

std::string shapeStr(const Shape& s) {
  std::string r;
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "x" : "") + std::to_string(s[i]);
  return r.empty() ? "scalar" : r;
}

Expected<Shape> broadcastShapes(const Shape& a, const Shape& b) {
  size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1)
      return makeError(ErrorCode::VerifyError,
                       "shapes [" + shapeStr(a) + "] and [" + shapeStr(b) + "] are not broadcastable");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

namespace {

Status checkDims(const std::string& what, std::initializer_list<std::pair<const char*, int64_t>> dims) {
  for (const auto& [n, v] : dims)
    if (v <= 0)
      return makeError(ErrorCode::VerifyError, what + ": " + n + " must be positive, got " + std::to_string(v));
  return {};
}

std::vector<std::string> iterVars(size_t rank) {
  std::vector<std::string> v;
  for (size_t i = 0; i < rank; ++i) v.push_back("d" + std::to_string(i));
  return v;
}

ExprRef toF32(ExprRef e) { return e->type == ScalarType::F32 ? e : cast(ScalarType::F32, std::move(e)); }
ExprRef fromF32(ScalarType t, ExprRef e) { return t == ScalarType::F32 ? e : cast(t, std::move(e)); }

// Load of `t` (shape ts) broadcast into an iteration space of shape `iter` with variables `vars`.
Expected<ExprRef> broadcastLoad(const std::string& t, const Shape& ts, ScalarType dt, const Shape& iter,
                                const std::vector<std::string>& vars) {
  if (ts.size() > iter.size())
    return makeError(ErrorCode::VerifyError, "tensor '" + t + "' of shape [" + shapeStr(ts) +
                                                 "] has more dims than the result [" + shapeStr(iter) + "]");
  size_t off = iter.size() - ts.size();
  std::vector<ExprRef> idx;
  for (size_t d = 0; d < ts.size(); ++d) {
    int64_t want = iter[off + d];
    if (ts[d] == want) idx.push_back(var(vars[off + d]));
    else if (ts[d] == 1) idx.push_back(iconst(0));
    else
      return makeError(ErrorCode::VerifyError, "tensor '" + t + "' of shape [" + shapeStr(ts) +
                                                   "] does not broadcast to [" + shapeStr(iter) + "]");
  }
  return load(t, std::move(idx), dt);
}

std::string dtypeSuffix(ScalarType t) { return std::string(typeName(t)); }

}  // namespace

Expected<Kernel> buildGemm(const GemmSpec& s) {
  TESSERA_TRY(checkDims("gemm", {{"m", s.m}, {"n", s.n}, {"k", s.k}}));
  if (s.batch < 0) return makeError(ErrorCode::VerifyError, "gemm: batch must be >= 0, got " + std::to_string(s.batch));
  Kernel k;
  k.family = Family::Gemm;
  k.name = s.name;
  if (k.name.empty()) {
    k.name = "gemm_" + (s.batch ? std::to_string(s.batch) + "x" : std::string()) + std::to_string(s.m) + "x" +
             std::to_string(s.n) + "x" + std::to_string(s.k) + "_" + dtypeSuffix(s.dtype);
    if (s.transA) k.name += "_ta";
    if (s.transB) k.name += "_tb";
    if (!s.epilogue.empty() || s.alpha != 1.0 || s.beta != 0.0) k.name += "_epi";
  }
  Shape pre = s.batch ? Shape{s.batch} : Shape{};
  auto withPre = [&](std::initializer_list<int64_t> d) {
    Shape r = pre;
    r.insert(r.end(), d);
    return r;
  };
  Shape outShape = withPre({s.m, s.n});
  std::vector<std::string> vars = s.batch ? std::vector<std::string>{"b", "i", "j"} : std::vector<std::string>{"i", "j"};
  auto ix = [&](std::initializer_list<const char*> names) {
    std::vector<ExprRef> r;
    if (s.batch) r.push_back(var("b"));
    for (const char* n : names) r.push_back(var(n));
    return r;
  };
  k.tensors.push_back({"A", TensorRole::Input, s.dtype, s.transA ? withPre({s.k, s.m}) : withPre({s.m, s.k})});
  k.tensors.push_back({"B", TensorRole::Input, s.dtype, s.transB ? withPre({s.n, s.k}) : withPre({s.k, s.n})});
  ExprRef a = toF32(load("A", s.transA ? ix({"k", "i"}) : ix({"i", "k"}), s.dtype));
  ExprRef b = toF32(load("B", s.transB ? ix({"j", "k"}) : ix({"k", "j"}), s.dtype));
  ExprRef dot = reduce(Op::ReduceSum, "k", s.k, mul(a, b));

  bool identity = s.epilogue.empty() && s.alpha == 1.0 && s.beta == 0.0 && s.dtype == ScalarType::F32;
  if (identity) {
    k.tensors.push_back({"C", TensorRole::Output, s.dtype, outShape});
    k.stages.push_back({"C", vars, dot});
    return k;
  }
  if (s.beta != 0.0) k.tensors.push_back({"Cin", TensorRole::Input, s.dtype, outShape});
  ExprRef accLoad = load("acc", ix({"i", "j"}), ScalarType::F32);
  ExprRef value = s.alpha == 1.0 ? accLoad : mul(fconst(s.alpha), accLoad);
  if (s.beta != 0.0) value = add(value, mul(fconst(s.beta), toF32(load("Cin", ix({"i", "j"}), s.dtype))));

  if (!s.epilogue.empty()) {
    std::vector<std::pair<std::string, Shape>> extra;
    ExprEnv env;
    env.bareTensorNames = true;
    env.tensorType = [&](const std::string& n) -> std::optional<ScalarType> {
      if (n == "acc") return ScalarType::F32;
      if (n == "A" || n == "B" || n == "C" || n == "Cin") return std::nullopt;
      return s.dtype;
    };
    TESSERA_ASSIGN(ExprRef epi, parseExpr(s.epilogue, env));
    std::set<std::string> names;
    collectLoads(epi, &names);
    for (const auto& n : names) {
      if (n == "acc") continue;
      auto it = s.shapes.find(n);
      Shape sh = it == s.shapes.end() ? outShape : it->second;
      for (int64_t d : sh)
        if (d <= 0) return makeError(ErrorCode::VerifyError, "epilogue input '" + n + "': dims must be positive");
      k.tensors.push_back({n, TensorRole::Input, s.dtype, sh});
    }
    Expected<ExprRef> failure = ExprRef();
    ExprRef body = rewriteLoads(epi, [&](const Expr& l) -> ExprRef {
      if (l.name == "acc") return value;
      const TensorDecl* d = k.find(l.name);
      auto r = broadcastLoad(l.name, d->shape, d->dtype, outShape, vars);
      if (!r.ok()) {
        failure = r.takeError();
        return fconst(0);
      }
      return toF32(*r);
    });
    if (!failure.ok()) return failure.takeError();
    value = body;
  }
  k.tensors.push_back({"acc", TensorRole::Temp, ScalarType::F32, outShape});
  k.tensors.push_back({"C", TensorRole::Output, s.dtype, outShape});
  k.stages.push_back({"acc", vars, dot});
  k.stages.push_back({"C", vars, fromF32(s.dtype, value)});
  return k;
}

Expected<Kernel> buildElementwise(const ElementwiseSpec& s) {
  struct Stmt {
    std::string name;
    std::string text;
  };
  std::vector<Stmt> stmts;
  std::string all = s.expr;
  for (char& c : all)
    if (c == '\n') c = ';';
  for (const auto& part : split(all, ';')) {
    auto t = trim(part);
    if (t.empty()) continue;
    size_t eq = t.find('=');
    if (eq == std::string_view::npos || (eq + 1 < t.size() && t[eq + 1] == '='))
      return makeError(ErrorCode::ParseError, "expected 'name = expression', got '" + std::string(t) + "'");
    std::string name(trim(t.substr(0, eq)));
    bool okName = !name.empty() && (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_');
    for (char c : name) okName = okName && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
    if (!okName) return makeError(ErrorCode::ParseError, "bad result name '" + name + "'");
    stmts.push_back({name, std::string(t.substr(eq + 1))});
  }
  if (stmts.empty()) return makeError(ErrorCode::ParseError, "empty elementwise expression");

  Kernel k;
  k.family = Family::Elementwise;
  std::map<std::string, Shape> shapes;   // every known tensor
  std::set<std::string> assigned;
  std::vector<ExprRef> parsed;
  std::vector<Shape> stmtShapes;
  std::vector<std::string> inputOrder;
  for (const auto& st : stmts) {
    if (assigned.count(st.name)) return makeError(ErrorCode::VerifyError, "'" + st.name + "' assigned twice");
    ExprEnv env;
    env.bareTensorNames = true;
    env.tensorType = [&](const std::string& n) -> std::optional<ScalarType> {
      return assigned.count(n) ? ScalarType::F32 : s.dtype;
    };
    TESSERA_ASSIGN(ExprRef e, parseExpr(st.text, env));
    std::set<std::string> names;
    collectLoads(e, &names);
    if (names.empty())
      return makeError(ErrorCode::VerifyError, "'" + st.name + "' reads no tensor (a constant has no shape)");
    if (names.count(st.name)) return makeError(ErrorCode::VerifyError, "'" + st.name + "' reads itself");
    Shape sh;
    bool first = true;
    for (const auto& n : names) {
      if (!shapes.count(n)) {  // a new input
        auto it = s.shapes.find(n);
        Shape in = it == s.shapes.end() ? s.shape : it->second;
        if (in.empty()) return makeError(ErrorCode::InvalidArgument, "no shape given for input '" + n + "'");
        for (int64_t d : in)
          if (d <= 0)
            return makeError(ErrorCode::VerifyError, "input '" + n + "' has a non-positive dimension: [" +
                                                         shapeStr(in) + "]");
        shapes[n] = in;
        inputOrder.push_back(n);
      }
      if (first) { sh = shapes[n]; first = false; }
      else { TESSERA_ASSIGN(sh, broadcastShapes(sh, shapes[n])); }
    }
    shapes[st.name] = sh;
    assigned.insert(st.name);
    parsed.push_back(e);
    stmtShapes.push_back(sh);
  }
  for (const auto& [n, _] : s.shapes)
    if (!shapes.count(n)) return makeError(ErrorCode::InvalidArgument, "--shape given for unknown tensor '" + n + "'");
  // Outputs: assigned and never read afterwards.
  std::set<std::string> readLater;
  for (const auto& e : parsed) collectLoads(e, &readLater);
  for (const auto& n : inputOrder) k.tensors.push_back({n, TensorRole::Input, s.dtype, shapes[n]});
  for (size_t i = 0; i < stmts.size(); ++i) {
    bool isOut = !readLater.count(stmts[i].name);
    k.tensors.push_back({stmts[i].name, isOut ? TensorRole::Output : TensorRole::Temp,
                         isOut ? s.dtype : ScalarType::F32, stmtShapes[i]});
  }
  Shape outShape;
  for (size_t i = 0; i < stmts.size(); ++i) {
    const Shape& sh = stmtShapes[i];
    auto vars = iterVars(sh.size());
    Expected<ExprRef> failure = ExprRef();
    ExprRef body = rewriteLoads(parsed[i], [&](const Expr& l) -> ExprRef {
      const TensorDecl* d = k.find(l.name);
      auto r = broadcastLoad(l.name, d->shape, d->dtype, sh, vars);
      if (!r.ok()) {
        failure = r.takeError();
        return fconst(0);
      }
      return toF32(*r);
    });
    if (!failure.ok()) return failure.takeError();
    bool isOut = !readLater.count(stmts[i].name);
    if (isOut) {
      if (outShape.empty()) outShape = sh;
      else if (outShape != sh)
        return makeError(ErrorCode::VerifyError, "outputs have different shapes: [" + shapeStr(outShape) + "] and [" +
                                                     shapeStr(sh) + "] ('" + stmts[i].name + "')");
      body = fromF32(s.dtype, body);
    }
    k.stages.push_back({stmts[i].name, vars, body});
  }
  k.name = s.name.empty() ? "elementwise_" + shapeStr(outShape) + "_" + dtypeSuffix(s.dtype) : s.name;
  return k;
}

Expected<Kernel> buildAttention(const AttentionSpec& s) {
  int64_t hkv = s.heads_kv ? s.heads_kv : s.heads;
  int64_t skv = s.seq_kv ? s.seq_kv : s.seq_q;
  TESSERA_TRY(checkDims("attention", {{"batch", s.batch},
                                      {"heads", s.heads},
                                      {"heads_kv", hkv},
                                      {"seq_q", s.seq_q},
                                      {"seq_kv", skv},
                                      {"head_dim", s.head_dim}}));
  // Each query row keeps head_dim accumulators: past a few thousand the kernel is no attention any
  // model runs, and building and checking it takes minutes (a 10^6 head dimension ran for 90 s).
  if (s.head_dim > kMaxHeadDim)
    return makeError(ErrorCode::VerifyError, "attention: head_dim " + std::to_string(s.head_dim) + " is more than " +
                                                 std::to_string(kMaxHeadDim));
  if (s.heads % hkv != 0)
    return makeError(ErrorCode::VerifyError, "attention: heads (" + std::to_string(s.heads) +
                                                 ") not divisible by heads_kv (" + std::to_string(hkv) + ")");
  if (s.causal && s.seq_q > skv)
    return makeError(ErrorCode::VerifyError, "causal attention needs seq_q <= seq_kv (rows without keys)");
  double scale = s.scale != 0 ? s.scale : 1.0 / std::sqrt(double(s.head_dim));
  if (!std::isfinite(scale)) return makeError(ErrorCode::VerifyError, "attention: scale must be finite");
  Kernel k;
  k.family = Family::Attention;
  k.name = s.name;
  if (k.name.empty()) {
    k.name = "attention_b" + std::to_string(s.batch) + "_h" + std::to_string(s.heads) +
             (hkv != s.heads ? "_kv" + std::to_string(hkv) : "") + "_s" + std::to_string(s.seq_q) +
             (skv != s.seq_q ? "x" + std::to_string(skv) : "") + "_d" + std::to_string(s.head_dim) + "_" +
             dtypeSuffix(s.dtype) + (s.causal ? "_causal" : "");
  }
  const int64_t B = s.batch, H = s.heads, SQ = s.seq_q, D = s.head_dim;
  k.tensors.push_back({s.q, TensorRole::Input, s.dtype, {B, H, SQ, D}});
  k.tensors.push_back({s.k, TensorRole::Input, s.dtype, {B, hkv, skv, D}});
  k.tensors.push_back({s.v, TensorRole::Input, s.dtype, {B, hkv, skv, D}});
  k.tensors.push_back({"S", TensorRole::Temp, ScalarType::F32, {B, H, SQ, skv}});
  k.tensors.push_back({"M", TensorRole::Temp, ScalarType::F32, {B, H, SQ}});
  k.tensors.push_back({"P", TensorRole::Temp, ScalarType::F32, {B, H, SQ, skv}});
  k.tensors.push_back({"L", TensorRole::Temp, ScalarType::F32, {B, H, SQ}});
  k.tensors.push_back({s.o, TensorRole::Output, s.dtype, {B, H, SQ, D}});
  int64_t group = H / hkv;
  ExprRef hk = group == 1 ? var("h") : binary(Op::FloorDiv, var("h"), iconst(group));
  ExprRef q = toF32(load(s.q, {var("b"), var("h"), var("i"), var("d")}, s.dtype));
  ExprRef kk = toF32(load(s.k, {var("b"), hk, var("j"), var("d")}, s.dtype));
  ExprRef score = mul(reduce(Op::ReduceSum, "d", D, mul(q, kk)), fconst(scale));
  if (s.causal) {
    int64_t off = skv - SQ;
    ExprRef lim = off == 0 ? var("i") : add(var("i"), iconst(off));
    score = select(compare(Op::CmpLE, var("j"), lim), score, fconst(-INFINITY));
  }
  k.stages.push_back({"S", {"b", "h", "i", "j"}, score});
  k.stages.push_back({"M", {"b", "h", "i"},
                      reduce(Op::ReduceMax, "j", skv, load("S", {var("b"), var("h"), var("i"), var("j")}, ScalarType::F32))});
  k.stages.push_back({"P", {"b", "h", "i", "j"},
                      unary(Op::Exp, sub(load("S", {var("b"), var("h"), var("i"), var("j")}, ScalarType::F32),
                                         load("M", {var("b"), var("h"), var("i")}, ScalarType::F32)))});
  k.stages.push_back({"L", {"b", "h", "i"},
                      reduce(Op::ReduceSum, "j", skv, load("P", {var("b"), var("h"), var("i"), var("j")}, ScalarType::F32))});
  ExprRef vv = toF32(load(s.v, {var("b"), hk, var("j"), var("d")}, s.dtype));
  ExprRef pv = reduce(Op::ReduceSum, "j", skv, mul(load("P", {var("b"), var("h"), var("i"), var("j")}, ScalarType::F32), vv));
  k.stages.push_back({s.o, {"b", "h", "i", "d"},
                      fromF32(s.dtype, div(pv, load("L", {var("b"), var("h"), var("i")}, ScalarType::F32)))});
  return k;
}

}  // namespace tessera::ir
