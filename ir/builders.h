// Owns the kernel builders of the three families (ARCHITECTURE.md §2.1): GEMM with batch, transposes,
// alpha/beta and a fused epilogue; fused elementwise DAGs from a small expression language with
// numpy broadcasting; FlashAttention-style forward attention (causal, grouped-query).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "support/status.h"

namespace tessera::ir {

using Shape = std::vector<int64_t>;

struct GemmSpec {
  int64_t batch = 0;  // 0: no batch dimension; >= 1: tensors are [batch, ...]
  int64_t m = 0, n = 0, k = 0;
  ScalarType dtype = ScalarType::F32;  // A, B, C and epilogue inputs; accumulation is f32
  bool transA = false, transB = false;  // A stored [K, M], B stored [N, K]
  double alpha = 1.0, beta = 0.0;       // beta != 0 adds input Cin: C = alpha*A@B + beta*Cin
  // Elementwise expression over `acc` (= alpha*A@B + beta*Cin, f32) and extra input tensors,
  // e.g. "gelu(acc + bias)". Empty: identity.
  std::string epilogue;
  // Shapes of epilogue inputs (broadcast against [batch,] M, N); default: the full output shape.
  std::map<std::string, Shape> shapes;
  std::string name;  // empty: derived from the shape
};
Expected<Kernel> buildGemm(const GemmSpec& s);

struct ElementwiseSpec {
  // One or more statements `name = expr` separated by ';' or newlines. Names assigned and used
  // later are temporaries; names assigned and never used are outputs; other names are inputs.
  std::string expr;
  Shape shape;                          // default shape of every input
  std::map<std::string, Shape> shapes;  // per-input shape overrides (numpy broadcasting)
  ScalarType dtype = ScalarType::F32;   // of inputs and outputs; arithmetic is f32
  std::string name;
};
Expected<Kernel> buildElementwise(const ElementwiseSpec& s);

struct AttentionSpec {
  int64_t batch = 1, heads = 0, heads_kv = 0 /* 0: = heads */, seq_q = 0, seq_kv = 0 /* 0: = seq_q */,
          head_dim = 0;
  double scale = 0;  // 0: 1/sqrt(head_dim)
  bool causal = false;  // key j is visible to query i when j <= i + (seq_kv - seq_q)
  ScalarType dtype = ScalarType::F32;
  std::string name;
  // Tensor names (the canonical ones unless a parsed kernel used others).
  std::string q = "Q", k = "K", v = "V", o = "O";
};
// head_dim is at most kMaxHeadDim (each query row keeps that many accumulators).
inline constexpr int64_t kMaxHeadDim = 4096;
Expected<Kernel> buildAttention(const AttentionSpec& s);

// numpy broadcasting of two shapes; error when incompatible.
Expected<Shape> broadcastShapes(const Shape& a, const Shape& b);
std::string shapeStr(const Shape& s);  // "1024x4096"

}  // namespace tessera::ir
