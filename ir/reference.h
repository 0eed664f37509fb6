// Owns the reference evaluator: plain C++ evaluation of any kernel with f64 arithmetic, the
// family fast paths (GEMM, attention) with optional row sampling for large problems, and the
// comparison of a compiled kernel's outputs against it with per-dtype tolerances.
#pragma once

#include <string>
#include <vector>

#include "ir/buffer.h"
#include "ir/ir.h"
#include "support/status.h"

namespace tessera::ir {

struct RefOptions {
  // Above this many multiply-adds, only a sample of rows is computed and checked (GEMM: rows of
  // C; attention: query rows). Sampled rows always include the last 8, where tile edges are.
  double maxWork = 3e9;
  bool generic = false;  // force the generic interpreter (tests cross-check the fast paths)
};

struct Reference {
  std::vector<std::vector<double>> outputs;  // per kernel output, row-major
  int rowAxis = -1;                          // axis sampled, -1: everything computed
  // The scale of an output's unavoidable absolute rounding error (0: none); compareOutputs lets
  // 2 u * magnitude pass (u the output type's unit roundoff). Attention's outputs are weighted
  // averages of V's rows: rounding the probabilities to the input type, as every tensor-core
  // attention does, errs by up to u/2 * max|V| however small an average comes out (random-sign
  // values of V average to near 0), so the scale is max|V|.
  double magnitude = 0;
  int64_t rowStride = 1;
  bool rowComputed(int64_t row, int64_t rows) const {
    return rowAxis < 0 || row % rowStride == 0 || row >= rows - 8;
  }
};

// `inputs` follow Kernel::inputs() order.
Expected<Reference> evaluateReference(const Kernel& k, const std::vector<const Buffer*>& inputs,
                                      const RefOptions& opts = {});

struct Comparison {
  bool ok = false;
  double maxAbsErr = 0;
  double maxRelErr = 0;    // max |out - ref| / (|ref| + 0.01 * max|ref|)
  double tolerance = 0;    // bound on maxRelErr for the output dtype
  int64_t checked = 0, bad = 0;
  std::string firstBad;    // "O[3, 17]: got 1.5, want 0.25"
  int firstBadOutput = -1;        // which output (Kernel::outputs() order) and its flat element index
  int64_t firstBadElement = -1;
};

double toleranceFor(ScalarType outType);
Comparison compareOutputs(const Kernel& k, const Reference& ref, const std::vector<const Buffer*>& outputs);

// Allocates and fills the kernel's inputs (seeded) and zeroed outputs.
std::vector<Buffer> makeInputs(const Kernel& k, uint64_t seed);
std::vector<Buffer> makeOutputs(const Kernel& k);

}  // namespace tessera::ir
