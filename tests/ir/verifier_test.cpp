// Tests that the verifier rejects bad kernels with a message naming the problem.
#include <gtest/gtest.h>

#include "ir/builders.h"
#include "ir/text.h"
#include "ir/verifier.h"

using namespace tessera;
using namespace tessera::ir;

namespace {

// Parses then verifies; returns the error message ("" when the kernel is fine).
std::string problem(const std::string& text) {
  auto k = parseKernel(text);
  if (!k.ok()) return "PARSE: " + k.error().message;
  auto st = verify(*k);
  return st.ok() ? "" : st.error().message;
}

void expectProblem(const std::string& text, const std::string& needle) {
  std::string p = problem(text);
  EXPECT_NE(p.find(needle), std::string::npos) << "got: '" << p << "'\nfor:\n" << text;
}

}  // namespace

TEST(Verifier, AcceptsBuiltKernels) {
  GemmSpec g;
  g.m = 1; g.n = 1; g.k = 1;
  EXPECT_TRUE(verify(*buildGemm(g)).ok());
  EXPECT_EQ(problem("kernel k : elementwise {\n in x: f32[4, 3]\n in b: f32[3]\n out y: f32[4, 3]\n"
                    " y[i, j] = relu(x[i, j] + b[j])\n}"),
            "");
}

TEST(Verifier, ZeroAndNegativeDims) {
  expectProblem("kernel k : elementwise {\n in x: f32[4, 0]\n out y: f32[4, 0]\n y[i, j] = x[i, j]\n}",
                "dimension 1 is 0");
  expectProblem("kernel k : elementwise {\n in x: f32[-3]\n out y: f32[3]\n y[i] = x[i]\n}", "dimension 0 is -3");
  GemmSpec g;
  g.m = 0; g.n = 4; g.k = 4;
  auto r = buildGemm(g);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("m must be positive"), std::string::npos);
}

TEST(Verifier, ShapeMismatch) {
  expectProblem("kernel k : gemm {\n in A: f32[4, 8]\n in B: f32[4, 5]\n out C: f32[4, 5]\n"
                " C[i, j] = sum(k < 8: A[i, k] * B[k, j])\n}",
                "shape mismatch");
  expectProblem("kernel k : elementwise {\n in x: f32[4]\n out y: f32[4, 4]\n y[i] = x[i]\n}", "shape mismatch");
  expectProblem("kernel k : elementwise {\n in x: f32[4, 4]\n out y: f32[4]\n y[i] = x[i]\n}", "rank 2");
}

TEST(Verifier, DtypeClash) {
  expectProblem("kernel k : elementwise {\n in x: f16[4]\n in z: f32[4]\n out y: f32[4]\n y[i] = x[i] * z[i]\n}",
                "dtype clash: f16 mul f32");
  expectProblem("kernel k : elementwise {\n in x: f32[4]\n out y: f16[4]\n y[i] = x[i]\n}",
                "stores f32 into a f16 tensor");
  expectProblem("kernel k : elementwise {\n in x: f32[4]\n out y: f32[4]\n y[i] = x[i] + i\n}", "dtype clash");
}

TEST(Verifier, UnknownOpAndNames) {
  expectProblem("kernel k : elementwise {\n in x: f32[4]\n out y: f32[4]\n y[i] = softplus(x[i])\n}",
                "unknown function 'softplus'");
  expectProblem("kernel k : elementwise {\n in x: f32[4]\n out y: f32[4]\n y[i] = w[i]\n}", "unknown tensor 'w'");
  Kernel k = *parseKernel("kernel k : elementwise {\n in x: f32[4]\n out y: f32[4]\n y[i] = exp(x[i])\n}");
  auto bad = std::make_shared<Expr>(*k.stages[0].value);
  bad->op = static_cast<Op>(200);
  k.stages[0].value = bad;
  EXPECT_NE(verify(k).error().message.find("unknown op"), std::string::npos);
}

TEST(Verifier, HeadsNotDivisible) {
  AttentionSpec a;
  a.heads = 6; a.heads_kv = 4; a.seq_q = 8; a.head_dim = 16;
  auto r = buildAttention(a);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("not divisible by heads_kv"), std::string::npos);
  // The same problem in a hand-written text kernel is caught by the family check.
  a.heads_kv = 2;
  std::string text = printKernel(*buildAttention(a));
  auto pos = text.find("K: f32[1, 2, 8, 16]");
  ASSERT_NE(pos, std::string::npos);
  text.replace(pos, 19, "K: f32[1, 4, 8, 16]");
  pos = text.find("V: f32[1, 2, 8, 16]");
  text.replace(pos, 19, "V: f32[1, 4, 8, 16]");
  EXPECT_NE(problem(text).find("not divisible by heads_kv"), std::string::npos) << problem(text);
}

TEST(Verifier, StructuralErrors) {
  expectProblem("kernel k : elementwise {\n in x: f32[4]\n out y: f32[4]\n x[i] = y[i]\n}", "writes input");
  expectProblem("kernel k : elementwise {\n in x: f32[4]\n tmp t: f32[4]\n out y: f32[4]\n y[i] = t[i]\n t[i] = x[i]\n}",
                "before any stage writes it");
  expectProblem("kernel k : elementwise {\n in x: f32[4]\n out y: f32[4]\n out z: f32[4]\n y[i] = x[i]\n}",
                "never written");
  expectProblem("kernel k : elementwise {\n in x: f32[4]\n out y: f32[4]\n y[i] = x[i]\n y[i] = x[i]\n}",
                "written by two stages");
  expectProblem("kernel k : elementwise {\n in x: f32[4]\n out y: f32[4]\n y[i] = x[i + 1]\n}", "spans [1, 4]");
}

TEST(Verifier, FamilyContract) {
  // Declared gemm, but the body is elementwise.
  expectProblem("kernel k : gemm {\n in x: f32[4]\n out y: f32[4]\n y[i] = x[i]\n}", "gemm: expected");
  // Declared elementwise, but the body reduces.
  expectProblem("kernel k : elementwise {\n in x: f32[4, 4]\n out y: f32[4]\n y[i] = sum(j < 4: x[i, j])\n}",
                "contains a reduction");
  // Attention whose scale stage was altered.
  AttentionSpec a;
  a.heads = 2; a.seq_q = 8; a.head_dim = 16;
  std::string text = printKernel(*buildAttention(a));
  auto pos = text.find("exp(");
  text.replace(pos, 4, "tanh(");
  EXPECT_NE(problem(text).find("does not match the canonical attention form"), std::string::npos) << problem(text);
}

// Kernels built in code are held to depth limits too, checked without recursion.
TEST(Verifier, DeepExpressionIsAnErrorNotACrash) {
  Kernel k;
  k.name = "deep";
  k.family = Family::Elementwise;
  k.tensors.push_back({"x", TensorRole::Input, ScalarType::F32, {4}});
  k.tensors.push_back({"y", TensorRole::Output, ScalarType::F32, {4}});
  ExprRef e = load("x", {var("i")}, ScalarType::F32);
  for (int i = 0; i < kMaxVerifiedExprDepth + 10; ++i) e = binary(Op::Add, e, load("x", {var("i")}, ScalarType::F32));
  k.stages.push_back({"y", {"i"}, e});
  Status s = verify(k);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("deeper than"), std::string::npos) << s.error().message;
}
