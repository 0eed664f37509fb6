// Owns the range dimension of a shape-generic kernel (GEMM's M, elementwise rows, attention's seq),
// the kernel at a point of a range, and the host measurer of shape-generic kernels compiled once
// with the runtime size: what a range tune (session/range_tune.h) and a dispatch bundle
// (dispatch_bundle.h) both use.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ir/ir.h"
#include "measure/protocol_measurer.h"
#include "support/status.h"
#include "targets/target_desc.h"

namespace tessera::bundle {

// The dimension a shape range runs over: GEMM's M ("M"), an elementwise kernel's leading
// dimension ("rows"), attention's sequence length ("seq": query and key lengths together, so the
// kernel's must be equal; causal masking stays bottom-right aligned, i.e. the usual one). Each is
// sizes[0] of a shape-generic kernel (codegen::RuntimeDims::m; attention's key length follows it).
// Other families and layouts get a one-line error.
Expected<int64_t> rangeExtent(const ir::Kernel& k);
const char* rangeDimName(const ir::Kernel& k);
// The positions in the kernel's key shape (measure::hardKeyFor) that take the range's value: {0}
// for GEMM's M and elementwise rows, {3, 4} for attention's seq_q and seq_kv.
std::vector<int> rangeKeyDims(const ir::Kernel& k);
// The kernel `top` (at the range's top) with its range dimension set to `v`: GEMM's A, C and
// row-indexed epilogue inputs; elementwise's tensors whose outermost dimension is the leading one;
// attention rebuilt with both sequence lengths `v` (Q, K, V, O and the reductions over keys).
Expected<ir::Kernel> kernelAtExtent(const ir::Kernel& top, int64_t v);

// The host measurer of shape-generic kernels: each config compiled once (runtime M, the
// kernel `maxKernel`) and shared by every point's measurer made from the same cache; runs on the
// buffers of `pointKernel` with that kernel's M. `runtimeM` false: `maxKernel`'s own shape only
// (a fixed bucket's kernel, measured at that size).
struct SizedCompileCache;
std::shared_ptr<SizedCompileCache> makeSizedCompileCache(const ir::Kernel& maxKernel, const TargetDesc& t,
                                                         bool runtimeM = true);
std::unique_ptr<measure::Measurer> makeSizedHostMeasurer(const std::shared_ptr<SizedCompileCache>& cache,
                                                         const ir::Kernel& pointKernel,
                                                         const measure::MeasureSettings& s);

}  // namespace tessera::bundle
