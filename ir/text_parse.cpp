// Owns the IR parser (kernel text form and the expression language), with line:col errors.
#include <cctype>
#include <cmath>
#include <set>
#include <unordered_map>

#include "ir/text.h"
#include "support/strings.h"

namespace tessera::ir {
namespace {

enum class Tok { Ident, Int, Float, Punct, End };

struct Token {
  Tok kind = Tok::End;
  std::string text;
  int line = 1, col = 1;
};

Expected<std::vector<Token>> lex(std::string_view s) {
  std::vector<Token> out;
  int line = 1, col = 1;
  size_t i = 0;
  auto adv = [&](size_t n) {
    for (size_t k = 0; k < n; ++k) {
      if (s[i] == '\n') { ++line; col = 1; } else { ++col; }
      ++i;
    }
  };
  while (i < s.size()) {
    char c = s[i];
    if (c == '#') {  // comment to end of line
      while (i < s.size() && s[i] != '\n') adv(1);
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(c))) { adv(1); continue; }
    Token t;
    t.line = line;
    t.col = col;
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      t.kind = Tok::Ident;
      t.text = std::string(s.substr(i, j - i));
      adv(j - i);
    } else if (std::isdigit(static_cast<unsigned char>(c)) ||
               (c == '.' && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1])))) {
      size_t j = i;
      bool isFloat = false;
      while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      if (j < s.size() && s[j] == '.') {
        isFloat = true;
        ++j;
        while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      }
      if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
        size_t k = j + 1;
        if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
        if (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k]))) {
          isFloat = true;
          j = k;
          while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
        }
      }
      t.kind = isFloat ? Tok::Float : Tok::Int;
      t.text = std::string(s.substr(i, j - i));
      adv(j - i);
    } else {
      static const char* two[] = {"<=", "==", "//"};
      t.kind = Tok::Punct;
      bool matched = false;
      for (const char* p : two) {
        if (s.substr(i, 2) == p) {
          t.text = p;
          adv(2);
          matched = true;
          break;
        }
      }
      if (!matched) {
        if (std::string_view("+-*/%()[],:<={}").find(c) == std::string_view::npos)
          return makeError(ErrorCode::ParseError, std::to_string(line) + ":" + std::to_string(col) +
                                                      ": unexpected character '" + std::string(1, c) + "'");
        t.text = std::string(1, c);
        adv(1);
      }
    }
    out.push_back(std::move(t));
  }
  Token end;
  end.line = line;
  end.col = col;
  out.push_back(end);
  return out;
}

const std::set<std::string>& unaryFuncs() {
  static const std::set<std::string> s = {"neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid",
                                          "relu", "gelu", "gelu_erf", "gelu_tanh", "silu", "erf"};
  return s;
}

Op unaryOp(const std::string& n) {
  if (n == "neg") return Op::Neg;
  if (n == "abs") return Op::Abs;
  if (n == "exp") return Op::Exp;
  if (n == "log") return Op::Log;
  if (n == "sqrt") return Op::Sqrt;
  if (n == "rsqrt") return Op::Rsqrt;
  if (n == "tanh") return Op::Tanh;
  if (n == "sigmoid") return Op::Sigmoid;
  if (n == "relu") return Op::Relu;
  if (n == "gelu" || n == "gelu_tanh") return Op::Gelu;
  if (n == "gelu_erf") return Op::GeluErf;
  if (n == "silu") return Op::Silu;
  return Op::Erf;
}

class Parser {
 public:
  Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

  const Token& peek(size_t k = 0) const { return t_[std::min(p_ + k, t_.size() - 1)]; }
  bool at(const char* punct) const { return peek().kind == Tok::Punct && peek().text == punct; }
  bool atEnd() const { return peek().kind == Tok::End; }

  Error err(const std::string& msg) const {
    const Token& t = peek();
    std::string where = std::to_string(t.line) + ":" + std::to_string(t.col) + ": ";
    std::string got = t.kind == Tok::End ? "end of input" : "'" + t.text + "'";
    return makeError(ErrorCode::ParseError, where + msg + " (at " + got + ")");
  }
  Status expect(const char* punct) {
    if (!at(punct)) return err(std::string("expected '") + punct + "'");
    ++p_;
    return {};
  }
  Expected<std::string> ident(const char* what) {
    if (peek().kind != Tok::Ident) return err(std::string("expected ") + what);
    return t_[p_++].text;
  }
  Expected<int64_t> integer(const char* what) {
    bool neg = false;
    if (at("-")) { neg = true; ++p_; }
    if (peek().kind != Tok::Int) return err(std::string("expected ") + what);
    auto v = parseInt(t_[p_].text);
    if (!v) return err("integer out of range");
    ++p_;
    return neg ? -*v : *v;
  }

  ExprEnv env;
  std::vector<std::string> scope;  // index variables in scope

  // Parentheses, unary minus, call arguments, indices and reduction bodies recurse: past
  // kMaxExprNesting the input is refused long before the stack is at risk.
  class Nested {
   public:
    explicit Nested(int& n) : n_(n) { ++n_; }
    ~Nested() { --n_; }
    Nested(const Nested&) = delete;
    Nested& operator=(const Nested&) = delete;

   private:
    int& n_;
  };
  Status checkNesting() const {
    if (nesting_ > kMaxExprNesting)
      return err("expression nested deeper than " + std::to_string(kMaxExprNesting) + " levels");
    return {};
  }

  // Every later pass walks expressions recursively, and a flat chain (a + b + ... ) parses in a
  // loop into a tree as deep as it is long: each composite node's depth is checked as it is built.
  Expected<ExprRef> track(ExprRef e) {
    int d = 0;
    for (const ExprRef& a : e->args) {
      auto it = depth_.find(a);
      d = std::max(d, it == depth_.end() ? 1 : it->second);
    }
    if (++d > kMaxExprDepth)
      return err("expression deeper than " + std::to_string(kMaxExprDepth) +
                 " operations (a chain like a + b + ... is as deep as it is long); split it into statements");
    depth_.emplace(e, d);
    return e;
  }

  bool inScope(const std::string& n) const {
    for (const auto& v : scope) if (v == n) return true;
    return false;
  }

  // Promote an index literal next to a float operand: `x * 2` means 2.0.
  static ExprRef promote(ExprRef e, const ExprRef& other) {
    if (e->op == Op::IConst && isFloat(other->type)) return fconst(double(e->ival), other->type);
    return e;
  }
  Expected<ExprRef> bin(Op op, ExprRef a, ExprRef b) {
    a = promote(a, b);
    b = promote(b, a);
    return track(binary(op, a, b));
  }

  Expected<ExprRef> comparison() {
    TESSERA_ASSIGN(ExprRef a, additive());
    Op op;
    if (at("<")) op = Op::CmpLT;
    else if (at("<=")) op = Op::CmpLE;
    else if (at("==")) op = Op::CmpEQ;
    else return a;
    ++p_;
    TESSERA_ASSIGN(ExprRef b, additive());
    return track(compare(op, a, b));
  }

  Expected<ExprRef> additive() {
    TESSERA_ASSIGN(ExprRef a, multiplicative());
    while (at("+") || at("-")) {
      Op op = at("+") ? Op::Add : Op::Sub;
      ++p_;
      TESSERA_ASSIGN(ExprRef b, multiplicative());
      TESSERA_ASSIGN(a, bin(op, a, b));
    }
    return a;
  }

  Expected<ExprRef> multiplicative() {
    TESSERA_ASSIGN(ExprRef a, unaryExpr());
    while (at("*") || at("/") || at("//") || at("%")) {
      Op op = at("*") ? Op::Mul : at("/") ? Op::Div : at("//") ? Op::FloorDiv : Op::Mod;
      ++p_;
      TESSERA_ASSIGN(ExprRef b, unaryExpr());
      TESSERA_ASSIGN(a, bin(op, a, b));
    }
    return a;
  }

  Expected<ExprRef> unaryExpr() {
    if (at("-")) {
      ++p_;
      if (peek().kind == Tok::Int) {
        auto v = parseInt(t_[p_].text);
        if (!v) return err("integer out of range");
        ++p_;
        return iconst(-*v);
      }
      if (peek().kind == Tok::Float) {
        auto v = parseDouble(t_[p_].text);
        if (!v) return err("bad float literal");
        ++p_;
        return fconst(-*v);
      }
      if (peek().kind == Tok::Ident && peek().text == "inf") {
        ++p_;
        return fconst(-INFINITY);
      }
      Nested nest(nesting_);
      TESSERA_TRY(checkNesting());
      TESSERA_ASSIGN(ExprRef a, unaryExpr());
      return track(unary(Op::Neg, a));
    }
    return primary();
  }

  Expected<std::vector<ExprRef>> callArgs() {
    std::vector<ExprRef> args;
    Nested nest(nesting_);
    TESSERA_TRY(checkNesting());
    TESSERA_TRY(expect("("));
    if (!at(")")) {
      for (;;) {
        TESSERA_ASSIGN(ExprRef a, comparison());
        args.push_back(a);
        if (at(",")) { ++p_; continue; }
        break;
      }
    }
    TESSERA_TRY(expect(")"));
    return args;
  }

  Expected<ExprRef> primary() {
    const Token& t = peek();
    if (t.kind == Tok::Int) {
      auto v = parseInt(t.text);
      if (!v) return err("integer out of range");
      ++p_;
      return iconst(*v);
    }
    if (t.kind == Tok::Float) {
      auto v = parseDouble(t.text);
      if (!v) return err("bad float literal");
      ++p_;
      return fconst(*v);
    }
    if (at("(")) {
      Nested nest(nesting_);
      TESSERA_TRY(checkNesting());
      ++p_;
      TESSERA_ASSIGN(ExprRef e, comparison());
      TESSERA_TRY(expect(")"));
      return e;
    }
    if (t.kind != Tok::Ident) return err("expected an expression");
    std::string name = t.text;
    ++p_;
    if (name == "inf") return fconst(INFINITY);
    if (name == "nan") return fconst(NAN);
    // reductions: sum(k < N: e), max(k < N: e)
    if ((name == "sum" || name == "max") && at("(") && peek(1).kind == Tok::Ident && peek(2).kind == Tok::Punct &&
        peek(2).text == "<" && peek(4).kind == Tok::Punct && peek(4).text == ":") {
      ++p_;
      std::string v = t_[p_].text;
      p_ += 2;
      TESSERA_ASSIGN(int64_t extent, integer("reduction extent"));
      TESSERA_TRY(expect(":"));
      if (inScope(v)) return err("reduction variable '" + v + "' shadows a variable in scope");
      Nested nest(nesting_);
      TESSERA_TRY(checkNesting());
      scope.push_back(v);
      auto body = comparison();
      scope.pop_back();
      if (!body.ok()) return body.takeError();
      TESSERA_TRY(expect(")"));
      return track(reduce(name == "sum" ? Op::ReduceSum : Op::ReduceMax, v, extent, *body));
    }
    if (at("[")) {  // load
      auto ty = env.tensorType ? env.tensorType(name) : std::nullopt;
      if (!ty) return err("unknown tensor '" + name + "'");
      ++p_;
      Nested nest(nesting_);
      TESSERA_TRY(checkNesting());
      std::vector<ExprRef> idx;
      if (!at("]")) {
        for (;;) {
          TESSERA_ASSIGN(ExprRef a, additive());
          idx.push_back(a);
          if (at(",")) { ++p_; continue; }
          break;
        }
      }
      TESSERA_TRY(expect("]"));
      return track(load(name, std::move(idx), *ty));
    }
    if (at("(")) {  // call
      TESSERA_ASSIGN(auto args, callArgs());
      auto want = [&](size_t n) -> Status {
        if (args.size() != n)
          return makeError(ErrorCode::ParseError, name + "() takes " + std::to_string(n) + " argument(s), got " +
                                                      std::to_string(args.size()));
        return {};
      };
      if (auto dt = parseDType(name)) {
        TESSERA_TRY(want(1));
        return track(cast(*dt, args[0]));
      }
      if (unaryFuncs().count(name)) {
        TESSERA_TRY(want(1));
        ExprRef a = args[0];
        if (a->op == Op::IConst) a = fconst(double(a->ival));
        return track(unary(unaryOp(name), a));
      }
      if (name == "min" || name == "max") {
        TESSERA_TRY(want(2));
        return bin(name == "min" ? Op::Min : Op::Max, args[0], args[1]);
      }
      if (name == "select") {
        TESSERA_TRY(want(3));
        ExprRef a = promote(args[1], args[2]), b = promote(args[2], args[1]);
        return track(select(args[0], a, b));
      }
      return makeError(ErrorCode::ParseError, "unknown function '" + name + "'");
    }
    if (inScope(name)) return var(name);
    if (env.bareTensorNames && env.tensorType) {
      if (auto ty = env.tensorType(name)) return load(name, {}, *ty);
    }
    if (env.tensorType && env.tensorType(name))
      return makeError(ErrorCode::ParseError, "tensor '" + name + "' needs indices: " + name + "[...]");
    return makeError(ErrorCode::ParseError, "unknown name '" + name + "'");
  }

  Expected<Kernel> kernel() {
    Kernel k;
    if (!(peek().kind == Tok::Ident && peek().text == "kernel")) return err("expected 'kernel'");
    ++p_;
    TESSERA_ASSIGN(k.name, ident("kernel name"));
    TESSERA_TRY(expect(":"));
    TESSERA_ASSIGN(std::string fam, ident("family (gemm, elementwise, attention)"));
    if (!parseFamily(fam, &k.family)) {
      --p_;
      return err("unknown family '" + fam + "' (expected gemm, elementwise or attention)");
    }
    TESSERA_TRY(expect("{"));
    env.tensorType = [&k](const std::string& n) -> std::optional<ScalarType> {
      if (const TensorDecl* d = k.find(n)) return d->dtype;
      return std::nullopt;
    };
    while (!at("}")) {
      if (atEnd()) return err("missing '}'");
      if (peek().kind != Tok::Ident) return err("expected a tensor declaration or a stage");
      const std::string& w = peek().text;
      if ((w == "in" || w == "out" || w == "tmp") && peek(1).kind == Tok::Ident) {
        ++p_;
        TensorDecl d;
        d.role = w == "in" ? TensorRole::Input : w == "out" ? TensorRole::Output : TensorRole::Temp;
        TESSERA_ASSIGN(d.name, ident("tensor name"));
        if (k.find(d.name)) return err("tensor '" + d.name + "' declared twice");
        TESSERA_TRY(expect(":"));
        TESSERA_ASSIGN(std::string dt, ident("dtype"));
        auto ty = parseDType(dt);
        if (!ty) { --p_; return err("unknown dtype '" + dt + "' (expected f32, f16 or bf16)"); }
        d.dtype = *ty;
        TESSERA_TRY(expect("["));
        if (!at("]")) {
          for (;;) {
            TESSERA_ASSIGN(int64_t dim, integer("a dimension"));
            d.shape.push_back(dim);
            if (at(",")) { ++p_; continue; }
            break;
          }
        }
        TESSERA_TRY(expect("]"));
        k.tensors.push_back(std::move(d));
        continue;
      }
      Stage st;
      TESSERA_ASSIGN(st.out, ident("stage output"));
      if (!k.find(st.out)) { --p_; return err("stage writes undeclared tensor '" + st.out + "'"); }
      TESSERA_TRY(expect("["));
      if (!at("]")) {
        for (;;) {
          TESSERA_ASSIGN(std::string v, ident("an index variable"));
          for (const auto& x : st.vars)
            if (x == v) { --p_; return err("index variable '" + v + "' repeated"); }
          st.vars.push_back(v);
          if (at(",")) { ++p_; continue; }
          break;
        }
      }
      TESSERA_TRY(expect("]"));
      TESSERA_TRY(expect("="));
      scope = st.vars;
      TESSERA_ASSIGN(st.value, comparison());
      k.stages.push_back(std::move(st));
    }
    ++p_;
    if (!atEnd()) return err("unexpected text after the kernel");
    return k;
  }

  Expected<ExprRef> wholeExpr() {
    scope = env.indexVars;
    TESSERA_ASSIGN(ExprRef e, comparison());
    if (!atEnd()) return err("unexpected text after the expression");
    return e;
  }

 private:
  std::vector<Token> t_;
  size_t p_ = 0;
  int nesting_ = 0;
  std::unordered_map<ExprRef, int> depth_;
};

Status checkTextSize(std::string_view text) {
  if (text.size() > kMaxIrTextBytes)
    return makeError(ErrorCode::ParseError, "text of " + std::to_string(text.size()) + " bytes is larger than the limit of " +
                                                std::to_string(kMaxIrTextBytes));
  return {};
}

}  // namespace

Expected<Kernel> parseKernel(std::string_view text) {
  TESSERA_TRY(checkTextSize(text));
  TESSERA_ASSIGN(auto toks, lex(text));
  Parser p(std::move(toks));
  return p.kernel();
}

Expected<ExprRef> parseExpr(std::string_view text, const ExprEnv& env) {
  TESSERA_TRY(checkTextSize(text));
  TESSERA_ASSIGN(auto toks, lex(text));
  Parser p(std::move(toks));
  p.env = env;
  return p.wholeExpr();
}

}  // namespace tessera::ir
