// Owns the IR printer: canonical text (exact round trip) and the anonymized form for hashing.
#include <map>

#include "ir/text.h"
#include "support/strings.h"

namespace tessera::ir {
namespace {

int precedence(const Expr& e) {
  switch (e.op) {
    case Op::Add:
    case Op::Sub: return 1;
    case Op::Mul:
    case Op::Div:
    case Op::FloorDiv:
    case Op::Mod: return 2;
    default: return 3;  // primaries and calls
  }
}

const char* infix(Op op) {
  switch (op) {
    case Op::Add: return " + ";
    case Op::Sub: return " - ";
    case Op::Mul: return " * ";
    case Op::Div: return " / ";
    case Op::FloorDiv: return " // ";
    case Op::Mod: return " % ";
    case Op::CmpLT: return " < ";
    case Op::CmpLE: return " <= ";
    case Op::CmpEQ: return " == ";
    default: return nullptr;
  }
}

std::string floatLiteral(double v) {
  std::string s = formatDouble(v);
  if (s.find_first_of(".en") == std::string::npos && s.find("inf") == std::string::npos) s += ".0";
  return s;
}

struct Printer {
  std::map<std::string, std::string> tensorNames, varNames;
  bool anonymize = false;
  int nextVar = 0;

  std::string tensor(const std::string& n) const {
    auto it = tensorNames.find(n);
    return it == tensorNames.end() ? n : it->second;
  }
  std::string varName(const std::string& n) {
    if (!anonymize) return n;
    auto it = varNames.find(n);
    if (it != varNames.end()) return it->second;
    return varNames[n] = "v" + std::to_string(nextVar++);
  }

  std::string expr(const Expr& e) {
    switch (e.op) {
      case Op::FConst: return floatLiteral(e.fval);
      case Op::IConst: return std::to_string(e.ival);
      case Op::Var: return varName(e.name);
      case Op::Load: {
        std::string s = tensor(e.name) + "[";
        for (size_t i = 0; i < e.args.size(); ++i) s += (i ? ", " : "") + expr(*e.args[i]);
        return s + "]";
      }
      case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::FloorDiv: case Op::Mod: {
        int p = precedence(e);
        std::string l = expr(*e.args[0]), r = expr(*e.args[1]);
        if (precedence(*e.args[0]) < p) l = "(" + l + ")";
        if (precedence(*e.args[1]) <= p) r = "(" + r + ")";
        return l + infix(e.op) + r;
      }
      case Op::Min: case Op::Max:
        return std::string(opName(e.op)) + "(" + expr(*e.args[0]) + ", " + expr(*e.args[1]) + ")";
      case Op::CmpLT: case Op::CmpLE: case Op::CmpEQ:
        return expr(*e.args[0]) + infix(e.op) + expr(*e.args[1]);
      case Op::Cast: return std::string(typeName(e.type)) + "(" + expr(*e.args[0]) + ")";
      case Op::Select:
        return "select(" + expr(*e.args[0]) + ", " + expr(*e.args[1]) + ", " + expr(*e.args[2]) + ")";
      case Op::ReduceSum: case Op::ReduceMax: {
        std::string v = varName(e.name);
        return std::string(opName(e.op)) + "(" + v + " < " + std::to_string(e.ival) + ": " +
               expr(*e.args[0]) + ")";
      }
      default:  // unary value ops
        return std::string(opName(e.op)) + "(" + expr(*e.args[0]) + ")";
    }
  }
};

const char* roleWord(TensorRole r) {
  switch (r) {
    case TensorRole::Input: return "in";
    case TensorRole::Output: return "out";
    case TensorRole::Temp: return "tmp";
  }
  return "?";
}

}  // namespace

std::string printExpr(const ExprRef& e) {
  Printer p;
  return p.expr(*e);
}

std::string printKernel(const Kernel& k, const PrintOptions& opts) {
  Printer p;
  p.anonymize = opts.anonymize;
  if (opts.anonymize)
    for (size_t i = 0; i < k.tensors.size(); ++i) p.tensorNames[k.tensors[i].name] = "t" + std::to_string(i);
  std::string s = "kernel " + (opts.anonymize ? std::string("_") : k.name) + " : " + familyName(k.family) + " {\n";
  for (const auto& t : k.tensors) {
    s += "  " + std::string(roleWord(t.role)) + " " + p.tensor(t.name) + ": " + std::string(typeName(t.dtype)) + "[";
    for (size_t i = 0; i < t.shape.size(); ++i) s += (i ? ", " : "") + std::to_string(t.shape[i]);
    s += "]\n";
  }
  for (const auto& st : k.stages) {
    // Variables are scoped per stage: anonymized numbering restarts so equal stages print equally.
    p.varNames.clear();
    p.nextVar = 0;
    s += "  " + p.tensor(st.out) + "[";
    for (size_t i = 0; i < st.vars.size(); ++i) s += (i ? ", " : "") + p.varName(st.vars[i]);
    s += "] = " + p.expr(*st.value) + "\n";
  }
  return s + "}\n";
}

}  // namespace tessera::ir
