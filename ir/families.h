// Owns family analysis: recognizing a kernel body as GEMM, elementwise or attention and
// extracting what codegen and the reference evaluator need. The verifier calls these, so a
// kernel declared `: gemm` whose body is not a GEMM is rejected with the reason.
#pragma once

#include <string>
#include <vector>

#include "ir/builders.h"
#include "ir/ir.h"
#include "support/status.h"

namespace tessera::ir {

// One input of an elementwise region and how it is indexed: `dims[d]` is the iteration dim read
// by tensor dim d, or -1 for a broadcast size-1 dim (index 0).
struct ElementwiseOperand {
  std::string tensor;
  ScalarType dtype = ScalarType::F32;
  std::vector<int> dims;
};

struct ElementwiseRegion {
  Shape iter;                               // iteration space (= every output's shape)
  std::vector<std::string> vars;            // iteration variable names used in `values`
  std::vector<ElementwiseOperand> operands; // inputs read
  std::vector<std::string> outputs;         // output tensors
  std::vector<ScalarType> outputTypes;
  std::vector<ExprRef> values;              // per output, temporaries inlined
};

struct GemmInfo {
  int64_t batch = 0, m = 0, n = 0, k = 0;  // batch 0: no batch dim
  bool transA = false, transB = false;
  std::string a, b, acc, c;  // acc == c when there is no epilogue stage
  ScalarType inType = ScalarType::F32, outType = ScalarType::F32;
  // Epilogue over the [batch,] M, N space; reads `acc` (f32) and epilogue inputs. Null: identity.
  bool hasEpilogue = false;
  ElementwiseRegion epilogue;
};

struct AttentionInfo {
  AttentionSpec spec;  // recovered parameters
};

Expected<GemmInfo> analyzeGemm(const Kernel& k);
Expected<ElementwiseRegion> analyzeElementwise(const Kernel& k);
Expected<AttentionInfo> analyzeAttention(const Kernel& k);

// Builds the elementwise region computed by stages [first, end) of `k` (temporaries inlined).
Expected<ElementwiseRegion> elementwiseRegion(const Kernel& k, size_t firstStage);

// FLOPs (GEMM: 2·M·N·K·batch; attention: 4·B·H·Sq·Skv·D, halved-ish when causal) and bytes moved
// (inputs read + outputs written), for GFLOP/s and GB/s reporting.
double kernelFlops(const Kernel& k);
double kernelBytes(const Kernel& k);
// Elementwise kernels are bandwidth-bound; GEMM and attention are compute-bound.
bool isComputeBound(const Kernel& k);
// The element type of the kernel's first input (GEMM: A; attention: Q): what its compute peak
// depends on.
ScalarType kernelInputType(const Kernel& k);

namespace detail {
// The error of the verifier and the family analyses (verifier.cpp, families.cpp share it).
inline Error fail(const std::string& msg) { return makeError(ErrorCode::VerifyError, msg); }
}  // namespace detail

}  // namespace tessera::ir
