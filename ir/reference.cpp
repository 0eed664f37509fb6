// Owns the reference evaluator (generic f64 interpreter + GEMM/attention fast paths) and the
// output comparison.
#include "ir/reference.h"

#include <cmath>
#include <map>

#include "ir/families.h"

namespace tessera::ir {
namespace {

using Store = std::map<std::string, std::vector<double>>;

std::vector<int64_t> stridesOf(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int d = int(s.size()) - 2; d >= 0; --d) st[d] = st[d + 1] * s[d + 1];
  return st;
}

double applyUnary(Op op, double x) {
  switch (op) {
    case Op::Neg: return -x;
    case Op::Abs: return std::fabs(x);
    case Op::Exp: return std::exp(x);
    case Op::Log: return std::log(x);
    case Op::Sqrt: return std::sqrt(x);
    case Op::Rsqrt: return 1.0 / std::sqrt(x);
    case Op::Tanh: return std::tanh(x);
    case Op::Sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case Op::Relu: return x > 0 ? x : 0.0;
    case Op::Gelu: return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    case Op::GeluErf: return 0.5 * x * (1.0 + std::erf(x * 0.7071067811865476));
    case Op::Silu: return x / (1.0 + std::exp(-x));
    case Op::Erf: return std::erf(x);
    default: return NAN;
  }
}

class Interp {
 public:
  Interp(const Kernel& k, Store& store) : k_(k), store_(store) {}

  struct Node {
    Op op;
    ScalarType type;
    double f = 0;
    int64_t i = 0;
    int slot = -1;
    const double* data = nullptr;
    std::vector<int64_t> strides;
    std::vector<Node> kids;
  };

  Node compile(const ExprRef& e, std::map<std::string, int>& slots) {
    Node n;
    n.op = e->op;
    n.type = e->type;
    n.f = e->fval;
    n.i = e->ival;
    if (e->op == Op::Var) n.slot = slots.at(e->name);
    if (e->op == Op::Load) {
      n.data = store_.at(e->name).data();
      n.strides = stridesOf(k_.find(e->name)->shape);
    }
    if (isReduce(e->op)) {
      int s = int(slots.size());
      auto saved = slots.count(e->name) ? std::optional<int>(slots[e->name]) : std::nullopt;
      slots[e->name] = s;
      n.slot = s;
      n.kids.push_back(compile(e->args[0], slots));
      if (saved) slots[e->name] = *saved;
      else slots.erase(e->name);
      nslots_ = std::max(nslots_, s + 1);
      return n;
    }
    for (const auto& a : e->args) n.kids.push_back(compile(a, slots));
    return n;
  }

  int64_t evalI(const Node& n) {
    switch (n.op) {
      case Op::IConst: return n.i;
      case Op::Var: return vals_[n.slot];
      case Op::Add: return evalI(n.kids[0]) + evalI(n.kids[1]);
      case Op::Sub: return evalI(n.kids[0]) - evalI(n.kids[1]);
      case Op::Mul: return evalI(n.kids[0]) * evalI(n.kids[1]);
      case Op::Min: return std::min(evalI(n.kids[0]), evalI(n.kids[1]));
      case Op::Max: return std::max(evalI(n.kids[0]), evalI(n.kids[1]));
      case Op::FloorDiv: {
        int64_t a = evalI(n.kids[0]), b = evalI(n.kids[1]);
        int64_t q = a / b;
        return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
      }
      case Op::Mod: {
        int64_t a = evalI(n.kids[0]), b = evalI(n.kids[1]);
        int64_t r = a % b;
        return r < 0 ? r + b : r;
      }
      default: return 0;
    }
  }

  bool evalB(const Node& n) {
    int64_t a = evalI(n.kids[0]), b = evalI(n.kids[1]);
    switch (n.op) {
      case Op::CmpLT: return a < b;
      case Op::CmpLE: return a <= b;
      default: return a == b;
    }
  }

  double evalF(const Node& n) {
    switch (n.op) {
      case Op::FConst: return n.f;
      case Op::Load: {
        int64_t off = 0;
        for (size_t d = 0; d < n.kids.size(); ++d) off += evalI(n.kids[d]) * n.strides[d];
        return n.data[off];
      }
      case Op::Add: return evalF(n.kids[0]) + evalF(n.kids[1]);
      case Op::Sub: return evalF(n.kids[0]) - evalF(n.kids[1]);
      case Op::Mul: return evalF(n.kids[0]) * evalF(n.kids[1]);
      case Op::Div: return evalF(n.kids[0]) / evalF(n.kids[1]);
      case Op::Min: return std::fmin(evalF(n.kids[0]), evalF(n.kids[1]));
      case Op::Max: return std::fmax(evalF(n.kids[0]), evalF(n.kids[1]));
      case Op::Cast: {
        double v = evalF(n.kids[0]);
        return n.type == ScalarType::F32 ? v : roundTo(n.type, v);  // f32 is the "ideal" type here
      }
      case Op::Select: return evalB(n.kids[0]) ? evalF(n.kids[1]) : evalF(n.kids[2]);
      case Op::ReduceSum: {
        double s = 0;
        for (int64_t v = 0; v < n.i; ++v) {
          vals_[n.slot] = v;
          s += evalF(n.kids[0]);
        }
        return s;
      }
      case Op::ReduceMax: {
        double m = -INFINITY;
        for (int64_t v = 0; v < n.i; ++v) {
          vals_[n.slot] = v;
          m = std::max(m, evalF(n.kids[0]));
        }
        return m;
      }
      default: return applyUnary(n.op, evalF(n.kids[0]));
    }
  }

  // Evaluates one stage into the store; rows of `axis` not kept by `keep` are skipped.
  void runStage(const Stage& st, int axis, const Reference* filter) {
    const TensorDecl* out = k_.find(st.out);
    std::map<std::string, int> slots;
    for (size_t d = 0; d < st.vars.size(); ++d) slots[st.vars[d]] = int(d);
    nslots_ = int(st.vars.size());
    std::vector<double>& dst = store_[st.out];
    dst.assign(size_t(out->numel()), 0.0);
    Node root = compile(st.value, slots);
    vals_.assign(size_t(nslots_) + 1, 0);
    std::vector<int64_t> idx(out->shape.size(), 0);
    for (int64_t flat = 0; flat < out->numel(); ++flat) {
      int64_t rem = flat;
      for (int d = int(idx.size()) - 1; d >= 0; --d) {
        idx[d] = rem % out->shape[d];
        rem /= out->shape[d];
      }
      if (filter && axis >= 0 && !filter->rowComputed(idx[axis], out->shape[axis])) continue;
      for (size_t d = 0; d < idx.size(); ++d) vals_[d] = idx[d];
      dst[size_t(flat)] = evalF(root);
    }
  }

 private:
  const Kernel& k_;
  Store& store_;
  std::vector<int64_t> vals_;
  int nslots_ = 0;
};

std::vector<double> toDoubles(const Buffer& b) {
  std::vector<double> v(size_t(b.numel()));
  for (int64_t i = 0; i < b.numel(); ++i) v[size_t(i)] = b.get(i);
  return v;
}

int64_t sampleStride(double work, double maxWork) {
  if (work <= maxWork) return 1;
  auto s = int64_t(std::ceil(work / maxWork));
  while (s % 2 == 0 || s % 3 == 0) ++s;  // coprime with common tile sizes: rows hit every tile offset
  return s;
}

void gemmAccumulate(const GemmInfo& g, const Store& store, std::vector<double>& acc, const Reference& ref) {
  const std::vector<double>& A = store.at(g.a);
  const std::vector<double>& B = store.at(g.b);
  int64_t batches = std::max<int64_t>(g.batch, 1);
  acc.assign(size_t(batches * g.m * g.n), 0.0);
  std::vector<double> row(size_t(g.n));
  for (int64_t b = 0; b < batches; ++b) {
    const double* Ab = A.data() + b * g.m * g.k;
    const double* Bb = B.data() + b * g.k * g.n;
    for (int64_t i = 0; i < g.m; ++i) {
      if (!ref.rowComputed(i, g.m)) continue;
      std::fill(row.begin(), row.end(), 0.0);
      for (int64_t kk = 0; kk < g.k; ++kk) {
        double a = g.transA ? Ab[kk * g.m + i] : Ab[i * g.k + kk];
        if (g.transB) {
          for (int64_t j = 0; j < g.n; ++j) row[size_t(j)] += a * Bb[j * g.k + kk];
        } else {
          const double* br = Bb + kk * g.n;
          for (int64_t j = 0; j < g.n; ++j) row[size_t(j)] += a * br[j];
        }
      }
      std::copy(row.begin(), row.end(), acc.begin() + (b * g.m + i) * g.n);
    }
  }
}

void attentionRows(const AttentionSpec& s, const Store& store, std::vector<double>& out, const Reference& ref) {
  const std::vector<double>& Q = store.at(s.q);
  const std::vector<double>& K = store.at(s.k);
  const std::vector<double>& V = store.at(s.v);
  const int64_t H = s.heads, HK = s.heads_kv, SQ = s.seq_q, SK = s.seq_kv, D = s.head_dim, G = H / HK;
  out.assign(size_t(s.batch * H * SQ * D), 0.0);
  std::vector<double> p(static_cast<size_t>(SK)), acc(static_cast<size_t>(D));
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const double* Kh = K.data() + (b * HK + h / G) * SK * D;
      const double* Vh = V.data() + (b * HK + h / G) * SK * D;
      for (int64_t i = 0; i < SQ; ++i) {
        if (!ref.rowComputed(i, SQ)) continue;
        const double* q = Q.data() + ((b * H + h) * SQ + i) * D;
        double m = -INFINITY;
        for (int64_t j = 0; j < SK; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += q[d] * Kh[j * D + d];
          double sc = dot * s.scale;
          if (s.causal && j > i + (SK - SQ)) sc = -INFINITY;
          p[size_t(j)] = sc;
          m = std::max(m, sc);
        }
        double l = 0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = 0; j < SK; ++j) {
          double e = std::exp(p[size_t(j)] - m);
          l += e;
          for (int64_t d = 0; d < D; ++d) acc[size_t(d)] += e * Vh[j * D + d];
        }
        double* o = out.data() + ((b * H + h) * SQ + i) * D;
        for (int64_t d = 0; d < D; ++d) {
          double v = acc[size_t(d)] / l;
          o[d] = s.dtype == ScalarType::F32 ? v : roundTo(s.dtype, v);
        }
      }
    }
}

}  // namespace

Expected<Reference> evaluateReference(const Kernel& k, const std::vector<const Buffer*>& inputs, const RefOptions& opts) {
  auto ins = k.inputs();
  if (inputs.size() != ins.size())
    return makeError(ErrorCode::InvalidArgument, "reference: expected " + std::to_string(ins.size()) + " inputs, got " +
                                                     std::to_string(inputs.size()));
  Store store;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (inputs[i]->numel() != ins[i]->numel())
      return makeError(ErrorCode::InvalidArgument, "reference: input '" + ins[i]->name + "' has the wrong size");
    store[ins[i]->name] = toDoubles(*inputs[i]);
  }
  Reference ref;
  Interp interp(k, store);
  bool done = false;
  if (!opts.generic && k.family == Family::Gemm) {
    TESSERA_ASSIGN(GemmInfo g, analyzeGemm(k));
    double work = double(std::max<int64_t>(g.batch, 1)) * double(g.m) * double(g.n) * double(g.k);
    ref.rowStride = sampleStride(work, opts.maxWork);
    ref.rowAxis = ref.rowStride > 1 ? (g.batch ? 1 : 0) : -1;
    gemmAccumulate(g, store, store[g.acc], ref);
    if (k.stages.size() > 1) interp.runStage(k.stages[1], ref.rowAxis, &ref);
    done = true;
  } else if (!opts.generic && k.family == Family::Attention) {
    TESSERA_ASSIGN(AttentionInfo a, analyzeAttention(k));
    const AttentionSpec& s = a.spec;
    double work = 2.0 * double(s.batch * s.heads) * double(s.seq_q) * double(s.seq_kv) * double(s.head_dim);
    ref.rowStride = sampleStride(work, opts.maxWork);
    ref.rowAxis = ref.rowStride > 1 ? 2 : -1;
    attentionRows(s, store, store[s.o], ref);
    done = true;
  }
  if (k.family == Family::Attention) {
    TESSERA_ASSIGN(AttentionInfo a, analyzeAttention(k));
    for (double v : store[a.spec.v]) ref.magnitude = std::max(ref.magnitude, std::fabs(v));
  }
  if (!done)
    for (const auto& st : k.stages) interp.runStage(st, -1, nullptr);
  for (const auto* o : k.outputs()) ref.outputs.push_back(std::move(store[o->name]));
  return ref;
}

double toleranceFor(ScalarType t) {
  switch (t) {
    case ScalarType::F16: return 4e-3;
    case ScalarType::BF16: return 3e-2;
    default: return 2e-4;
  }
}

Comparison compareOutputs(const Kernel& k, const Reference& ref, const std::vector<const Buffer*>& outputs) {
  Comparison c;
  auto outs = k.outputs();
  if (outputs.size() != outs.size() || ref.outputs.size() != outs.size()) {
    c.firstBad = "output count mismatch";
    return c;
  }
  c.ok = true;
  for (size_t o = 0; o < outs.size(); ++o) {
    const TensorDecl& t = *outs[o];
    const std::vector<double>& r = ref.outputs[o];
    const Buffer& b = *outputs[o];
    c.tolerance = std::max(c.tolerance, toleranceFor(t.dtype));
    double tol = toleranceFor(t.dtype);
    int64_t rows = ref.rowAxis >= 0 ? t.shape[size_t(ref.rowAxis)] : 1;
    int64_t inner = 1;
    for (size_t d = size_t(std::max(ref.rowAxis, 0)) + 1; d < t.shape.size(); ++d) inner *= t.shape[d];
    double maxRef = 0;
    for (int64_t i = 0; i < t.numel(); ++i)
      if (std::isfinite(r[size_t(i)])) maxRef = std::max(maxRef, std::fabs(r[size_t(i)]));
    // The floor under |want|: 1 % of the output's largest value, and where the reference names a
    // magnitude, enough that an absolute error of 2 u * magnitude passes (u the unit roundoff of
    // the output's type: 2^-11 f16, 2^-8 bf16). For attention that is twice the worst case of
    // rounding the probabilities (u/2 * max|V|) plus rounding O itself (u/2 * |O| <= u/2 * max|V|).
    const double u = t.dtype == ScalarType::F16 ? 0x1p-11 : t.dtype == ScalarType::BF16 ? 0x1p-8 : 0x1p-24;
    double floor = std::max(0.01 * maxRef, 2 * u * ref.magnitude / tol) + 1e-30;
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (ref.rowAxis >= 0 && !ref.rowComputed((i / inner) % rows, rows)) continue;
      double want = r[size_t(i)], got = b.get(i);
      ++c.checked;
      double abs = std::fabs(got - want), rel;
      // NaN never matches, not even a NaN reference: a NaN input (e.g. --alpha nan) would otherwise
      // make every kernel "correct".
      if (std::isinf(want) && got == want) continue;
      if (!std::isfinite(got) || !std::isfinite(want)) abs = rel = INFINITY;
      else rel = abs / (std::fabs(want) + floor);
      c.maxAbsErr = std::max(c.maxAbsErr, abs);
      c.maxRelErr = std::max(c.maxRelErr, rel);
      if (!(rel <= tol)) {
        if (c.bad++ == 0) {
          std::string idx;
          int64_t rem = i;
          std::vector<int64_t> ix(t.shape.size());
          for (int d = int(t.shape.size()) - 1; d >= 0; --d) {
            ix[size_t(d)] = rem % t.shape[size_t(d)];
            rem /= t.shape[size_t(d)];
          }
          for (size_t d = 0; d < ix.size(); ++d) idx += (d ? ", " : "") + std::to_string(ix[d]);
          c.firstBad = t.name + "[" + idx + "]: got " + std::to_string(got) + ", want " + std::to_string(want);
          c.firstBadOutput = int(o);
          c.firstBadElement = i;
        }
        c.ok = false;
      }
    }
  }
  return c;
}

std::vector<Buffer> makeInputs(const Kernel& k, uint64_t seed) {
  std::vector<Buffer> v;
  uint64_t n = 0;
  for (const auto* t : k.inputs()) {
    v.emplace_back(t->dtype, t->shape);
    v.back().fillRandom(seed * 1000003ull + n++);
  }
  return v;
}

std::vector<Buffer> makeOutputs(const Kernel& k) {
  std::vector<Buffer> v;
  for (const auto* t : k.outputs()) v.emplace_back(t->dtype, t->shape);
  return v;
}

}  // namespace tessera::ir
