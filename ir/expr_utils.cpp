// Owns expression rewriting helpers shared by builders, family analysis and codegen.
#include "ir/expr_utils.h"

namespace tessera::ir {
namespace {

ExprRef rebuild(const ExprRef& e, std::vector<ExprRef> args) {
  bool same = args.size() == e->args.size();
  for (size_t i = 0; same && i < args.size(); ++i) same = args[i] == e->args[i];
  if (same) return e;
  auto n = std::make_shared<Expr>(*e);
  n->args = std::move(args);
  return n;
}

}  // namespace

ExprRef substituteVars(const ExprRef& e, const std::map<std::string, ExprRef>& m) {
  if (e->op == Op::Var) {
    auto it = m.find(e->name);
    return it == m.end() ? e : it->second;
  }
  if (isReduce(e->op) && m.count(e->name)) {
    auto inner = m;
    inner.erase(e->name);
    return rebuild(e, {substituteVars(e->args[0], inner)});
  }
  std::vector<ExprRef> args;
  args.reserve(e->args.size());
  for (const auto& a : e->args) args.push_back(substituteVars(a, m));
  return rebuild(e, std::move(args));
}

ExprRef rewriteLoads(const ExprRef& e, const std::function<ExprRef(const Expr& load)>& f) {
  std::vector<ExprRef> args;
  args.reserve(e->args.size());
  for (const auto& a : e->args) args.push_back(rewriteLoads(a, f));
  ExprRef r = rebuild(e, std::move(args));
  if (r->op == Op::Load) {
    if (ExprRef rep = f(*r)) return rep;
  }
  return r;
}

void collectLoads(const ExprRef& e, std::set<std::string>* names) {
  if (e->op == Op::Load) names->insert(e->name);
  for (const auto& a : e->args) collectLoads(a, names);
}

bool containsReduce(const ExprRef& e) {
  if (isReduce(e->op)) return true;
  for (const auto& a : e->args)
    if (containsReduce(a)) return true;
  return false;
}

bool structurallyEqual(const ExprRef& a, const ExprRef& b) {
  if (a == b) return true;
  if (a->op != b->op || a->type != b->type || a->ival != b->ival || a->name != b->name ||
      a->args.size() != b->args.size())
    return false;
  if (a->op == Op::FConst && !(a->fval == b->fval || (a->fval != a->fval && b->fval != b->fval))) return false;
  for (size_t i = 0; i < a->args.size(); ++i)
    if (!structurallyEqual(a->args[i], b->args[i])) return false;
  return true;
}

}  // namespace tessera::ir
