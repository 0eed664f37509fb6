// Owns family recognition (GEMM, elementwise, attention) and the work/bytes of a kernel.
#include "ir/families.h"

#include <map>
#include <set>

#include "ir/expr_utils.h"
#include "ir/text.h"

namespace tessera::ir {
namespace {

using detail::fail;

bool isVar(const ExprRef& e, const std::string& n) { return e->op == Op::Var && e->name == n; }

// Strips a cast to f32 around a load: returns the load, or null.
const Expr* loadUnder(const ExprRef& e) {
  if (e->op == Op::Load) return e.get();
  if (e->op == Op::Cast && e->type == ScalarType::F32 && e->args[0]->op == Op::Load) return e->args[0].get();
  return nullptr;
}

}  // namespace

Expected<ElementwiseRegion> elementwiseRegion(const Kernel& k, size_t first) {
  ElementwiseRegion r;
  std::map<std::string, const Stage*> written;
  for (size_t i = first; i < k.stages.size(); ++i) {
    const Stage& st = k.stages[i];
    if (containsReduce(st.value)) return fail("elementwise stage '" + st.out + "' contains a reduction");
    written[st.out] = &st;
  }
  // Inline temporaries (written in the region) into their readers.
  std::function<ExprRef(const ExprRef&)> inlineTemps = [&](const ExprRef& e) -> ExprRef {
    return rewriteLoads(e, [&](const Expr& l) -> ExprRef {
      auto it = written.find(l.name);
      if (it == written.end()) return nullptr;
      const Stage& st = *it->second;
      std::map<std::string, ExprRef> sub;
      for (size_t d = 0; d < st.vars.size() && d < l.args.size(); ++d) sub[st.vars[d]] = l.args[d];
      return substituteVars(inlineTemps(st.value), sub);
    });
  };
  for (size_t i = first; i < k.stages.size(); ++i) {
    const Stage& st = k.stages[i];
    const TensorDecl* out = k.find(st.out);
    if (!out || out->role != TensorRole::Output) continue;
    if (r.outputs.empty()) {
      r.iter = out->shape;
    } else if (r.iter != out->shape) {
      return fail("elementwise outputs have different shapes: [" + shapeStr(r.iter) + "] and [" + shapeStr(out->shape) +
                  "]");
    }
    // Canonical iteration variables d0..dn-1.
    std::map<std::string, ExprRef> ren;
    for (size_t d = 0; d < st.vars.size(); ++d) ren[st.vars[d]] = var("d" + std::to_string(d));
    r.outputs.push_back(st.out);
    r.outputTypes.push_back(out->dtype);
    r.values.push_back(substituteVars(inlineTemps(st.value), ren));
  }
  if (r.outputs.empty()) return fail("elementwise region writes no output");
  for (size_t d = 0; d < r.iter.size(); ++d) r.vars.push_back("d" + std::to_string(d));
  // Operands: every load must be a broadcast/permutation of the iteration variables.
  Expected<int> bad = 0;
  std::set<std::pair<std::string, std::vector<int>>> seen;
  for (const auto& v : r.values) {
    rewriteLoads(v, [&](const Expr& l) -> ExprRef {
      const TensorDecl* t = k.find(l.name);
      ElementwiseOperand op;
      op.tensor = l.name;
      op.dtype = t ? t->dtype : ScalarType::F32;
      std::set<int> used;
      for (size_t d = 0; d < l.args.size(); ++d) {
        const ExprRef& a = l.args[d];
        if (a->op == Op::IConst && a->ival == 0 && t && t->shape[d] == 1) {
          op.dims.push_back(-1);
          continue;
        }
        int dim = -1;
        if (a->op == Op::Var && a->name.size() > 1 && a->name[0] == 'd') dim = std::stoi(a->name.substr(1));
        if (dim < 0 || dim >= int(r.iter.size()) || used.count(dim) || !t || t->shape[d] != r.iter[dim]) {
          if (bad.ok()) bad = fail("load " + printExpr(std::make_shared<Expr>(l)) +
                                   " is not a broadcast of the iteration space [" + shapeStr(r.iter) + "]");
          return nullptr;
        }
        used.insert(dim);
        op.dims.push_back(dim);
      }
      if (seen.insert({op.tensor, op.dims}).second) r.operands.push_back(op);
      return nullptr;
    });
  }
  if (!bad.ok()) return bad.takeError();
  return r;
}

Expected<ElementwiseRegion> analyzeElementwise(const Kernel& k) { return elementwiseRegion(k, 0); }

Expected<GemmInfo> analyzeGemm(const Kernel& k) {
  const char* form =
      "gemm: expected C[(b,) i, j] = sum(k < K: A[(b,) i, k] * B[(b,) k, j]) (f32 casts of f16/bf16 loads "
      "allowed, A or B transposed allowed), optionally followed by one elementwise epilogue stage";
  if (k.stages.empty() || k.stages.size() > 2) return fail(form);
  const Stage& s0 = k.stages[0];
  GemmInfo g;
  const ExprRef& red = s0.value;
  if (red->op != Op::ReduceSum || red->args[0]->op != Op::Mul) return fail(form);
  const Expr* la = loadUnder(red->args[0]->args[0]);
  const Expr* lb = loadUnder(red->args[0]->args[1]);
  if (!la || !lb) return fail(form);
  bool batched = s0.vars.size() == 3;
  if (s0.vars.size() != 2 && !batched) return fail(form);
  size_t off = batched ? 1 : 0;
  if (la->args.size() != 2 + off || lb->args.size() != 2 + off) return fail(form);
  if (batched && (!isVar(la->args[0], s0.vars[0]) || !isVar(lb->args[0], s0.vars[0]))) return fail(form);
  const std::string &vi = s0.vars[off], &vj = s0.vars[off + 1], &vk = red->name;
  if (isVar(la->args[off], vi) && isVar(la->args[off + 1], vk)) g.transA = false;
  else if (isVar(la->args[off], vk) && isVar(la->args[off + 1], vi)) g.transA = true;
  else return fail(form);
  if (isVar(lb->args[off], vk) && isVar(lb->args[off + 1], vj)) g.transB = false;
  else if (isVar(lb->args[off], vj) && isVar(lb->args[off + 1], vk)) g.transB = true;
  else return fail(form);
  const TensorDecl *A = k.find(la->name), *B = k.find(lb->name), *X = k.find(s0.out);
  if (!A || !B || !X) return fail(form);
  if (A->role != TensorRole::Input || B->role != TensorRole::Input) return fail("gemm: A and B must be inputs");
  if (A->dtype != B->dtype) return fail("gemm: dtype clash between A (" + std::string(typeName(A->dtype)) + ") and B (" +
                                        std::string(typeName(B->dtype)) + ")");
  if (X->dtype != ScalarType::F32) return fail("gemm: the accumulator must be f32");
  g.a = A->name;
  g.b = B->name;
  g.acc = s0.out;
  g.inType = A->dtype;
  g.batch = batched ? X->shape[0] : 0;
  g.m = X->shape[off];
  g.n = X->shape[off + 1];
  g.k = red->ival;
  Shape pre = batched ? Shape{g.batch} : Shape{};
  auto want = [&](int64_t r, int64_t c) {
    Shape s = pre;
    s.push_back(r);
    s.push_back(c);
    return s;
  };
  Shape wa = g.transA ? want(g.k, g.m) : want(g.m, g.k), wb = g.transB ? want(g.n, g.k) : want(g.k, g.n);
  if (A->shape != wa) return fail("gemm: shape mismatch: " + g.a + " is [" + shapeStr(A->shape) + "], expected [" + shapeStr(wa) + "]");
  if (B->shape != wb) return fail("gemm: shape mismatch: " + g.b + " is [" + shapeStr(B->shape) + "], expected [" + shapeStr(wb) + "]");
  if (k.stages.size() == 1) {
    if (X->role != TensorRole::Output) return fail(form);
    g.c = g.acc;
    g.outType = X->dtype;
    return g;
  }
  if (X->role != TensorRole::Temp) return fail("gemm: with an epilogue, the accumulator must be a temporary");
  TESSERA_ASSIGN(g.epilogue, elementwiseRegion(k, 1));
  if (g.epilogue.outputs.size() != 1 || g.epilogue.iter != X->shape)
    return fail("gemm: the epilogue must write one output of the accumulator's shape [" + shapeStr(X->shape) + "]");
  for (const auto& op : g.epilogue.operands) {
    if (op.tensor == g.acc) {
      for (size_t d = 0; d < op.dims.size(); ++d)
        if (op.dims[d] != int(d)) return fail("gemm: the epilogue must read the accumulator elementwise");
    } else {
      const TensorDecl* t = k.find(op.tensor);
      if (!t || t->role != TensorRole::Input) return fail("gemm: epilogue reads '" + op.tensor + "', which is not an input");
    }
  }
  g.hasEpilogue = true;
  g.c = g.epilogue.outputs[0];
  g.outType = g.epilogue.outputTypes[0];
  return g;
}

Expected<AttentionInfo> analyzeAttention(const Kernel& k) {
  auto ins = k.inputs();
  auto outs = k.outputs();
  const char* form = "attention: expected inputs Q[B, H, Sq, D], K[B, Hkv, Skv, D], V[B, Hkv, Skv, D] and output O[B, H, Sq, D]";
  if (ins.size() != 3 || outs.size() != 1) return fail(form);
  const TensorDecl &Q = *ins[0], &K = *ins[1], &V = *ins[2], &O = *outs[0];
  if (Q.shape.size() != 4 || K.shape.size() != 4 || V.shape.size() != 4 || O.shape.size() != 4) return fail(form);
  if (K.shape != V.shape) return fail("attention: shape mismatch: K is [" + shapeStr(K.shape) + "] but V is [" + shapeStr(V.shape) + "]");
  if (O.shape != Q.shape) return fail("attention: shape mismatch: O is [" + shapeStr(O.shape) + "] but Q is [" + shapeStr(Q.shape) + "]");
  if (K.shape[0] != Q.shape[0] || K.shape[3] != Q.shape[3])
    return fail("attention: shape mismatch: Q is [" + shapeStr(Q.shape) + "], K is [" + shapeStr(K.shape) + "] (batch and head_dim must agree)");
  if (Q.dtype != K.dtype || Q.dtype != V.dtype || Q.dtype != O.dtype) return fail("attention: Q, K, V and O must share one dtype");
  AttentionSpec s;
  s.batch = Q.shape[0];
  s.heads = Q.shape[1];
  s.heads_kv = K.shape[1];
  s.seq_q = Q.shape[2];
  s.seq_kv = K.shape[2];
  s.head_dim = Q.shape[3];
  s.dtype = Q.dtype;
  s.q = Q.name;
  s.k = K.name;
  s.v = V.name;
  s.o = O.name;
  s.name = k.name;
  if (k.stages.empty()) return fail(form);
  ExprRef sv = k.stages[0].value;
  if (sv->op == Op::Select) {
    s.causal = true;
    sv = sv->args[1];
  }
  if (sv->op != Op::Mul || sv->args[1]->op != Op::FConst) return fail("attention: the score stage must be S = sum(...) * scale");
  s.scale = sv->args[1]->fval;
  TESSERA_ASSIGN(Kernel canon, buildAttention(s));
  if (printKernel(canon, {true}) != printKernel(k, {true}))
    return fail("attention: the kernel body does not match the canonical attention form "
                "(print one with `tessera compile attention ... --emit ir`)");
  AttentionInfo info;
  info.spec = s;
  return info;
}

double kernelFlops(const Kernel& k) {
  switch (k.family) {
    case Family::Gemm: {
      auto g = analyzeGemm(k);
      if (!g.ok()) return 0;
      return 2.0 * double(std::max<int64_t>(g->batch, 1)) * double(g->m) * double(g->n) * double(g->k);
    }
    case Family::Attention: {
      auto a = analyzeAttention(k);
      if (!a.ok()) return 0;
      const AttentionSpec& s = a->spec;
      double pairs = double(s.seq_q) * double(s.seq_kv);
      if (s.causal) {
        pairs = 0;
        int64_t off = s.seq_kv - s.seq_q;
        for (int64_t i = 0; i < s.seq_q; ++i) pairs += double(std::min(s.seq_kv, i + off + 1));
      }
      return 4.0 * double(s.batch) * double(s.heads) * pairs * double(s.head_dim);
    }
    case Family::Elementwise: {
      double n = 0;
      for (const auto* o : k.outputs()) n += double(o->numel());
      return n;  // one "op" per output element; elementwise kernels report GB/s instead
    }
  }
  return 0;
}

double kernelBytes(const Kernel& k) {
  double b = 0;
  for (const auto& t : k.tensors)
    if (t.role != TensorRole::Temp) b += double(t.numel()) * double(byteSize(t.dtype));
  return b;
}

bool isComputeBound(const Kernel& k) { return k.family != Family::Elementwise; }

ScalarType kernelInputType(const Kernel& k) {
  auto ins = k.inputs();
  return ins.empty() ? ScalarType::F32 : ins.front()->dtype;
}

}  // namespace tessera::ir
