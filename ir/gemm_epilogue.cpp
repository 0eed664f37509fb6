// Owns the rule of ir/gemm_epilogue.h.
#include "ir/gemm_epilogue.h"

#include <functional>
#include <string>

namespace tessera::ir {

bool gemmEpilogueReadsRowwise(const GemmInfo& g) {
  if (!g.hasEpilogue) return true;
  const ElementwiseRegion& r = g.epilogue;
  if (r.values.size() != 1 || r.iter.size() < 2) return false;
  const int inner = int(r.iter.size()) - 1;
  std::function<bool(const ExprRef&)> ok = [&](const ExprRef& e) {
    if (e->type == ScalarType::Index || e->op == Op::Var || e->op == Op::Select || e->op == Op::CmpLT ||
        e->op == Op::CmpLE || e->op == Op::CmpEQ)
      return false;
    if (e->op == Op::Load) {
      for (size_t d = 0; d < e->args.size(); ++d) {
        const auto& a = e->args[d];
        if (a->op == Op::IConst) continue;
        if (a->op != Op::Var || a->name.size() < 2 || a->name[0] != 'd') return false;
        if (std::stoi(a->name.substr(1)) == inner && d + 1 != e->args.size()) return false;
      }
      return true;
    }
    for (const auto& a : e->args)
      if (!ok(a)) return false;
    return true;
  };
  return ok(r.values[0]);
}

}  // namespace tessera::ir
