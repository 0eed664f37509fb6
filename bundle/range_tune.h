// Owns tuning over a shape range (`tessera tune gemm --m 1..8192 ...`): each training point of the
// range tuned as its own kernel (its records stored like any tune's), the winners of every point
// then measured as shape-generic kernels (compiled once with runtime M for the range's top, run
// at each training and held-out point), and the dispatch rule fitted to those times.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "bundle/dispatch_rule.h"
#include "store/store.h"
#include "ir/ir.h"
#include "measure/protocol_measurer.h"
#include "search/tune_session.h"
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

struct RangeTuneSettings {
  search::SessionSettings session;   // per training point
  measure::MeasureSettings measure;   // per point and for the cross measurement
  std::string spaceSpec;             // narrows each point's space; the schedule is the blis family's
  int candidatesPerPoint = 2;        // each point's best configs that join the candidates
  FitSettings fit;
  int maxTrain = 14;
  // Pruning the cross measurement where runs are long: once the best candidate at the point below
  // took at least `pruneAboveUs`, a candidate more than `pruneFactor` times slower than that best
  // is not measured at the larger points (it counts as failed there), keeping at least the
  // `keepAtLeast` fastest. 0 turns it off.
  double pruneAboveUs = 50000;
  double pruneFactor = 1.5;
  int keepAtLeast = 8;
  // GEMM: the few-row kernels with no shape-generic form (the space's default at M = lo, lo+1, ...
  // when it is nvec, plain or kvec) measured, interleaved, against the rule's kernel at that M;
  // each at least `fixedGain` faster answers its M alone (a fixed bucket). The walk stops at the
  // second M in a row where it is not (the breakpoint), or above `fixedUpTo`. 0: off.
  int64_t fixedUpTo = 8;
  double fixedGain = 0.05;
  // Each boundary between two shape-generic buckets of different kernels is searched between the
  // measured points either side by halving (log scale), both kernels measured at the midpoint, at
  // most this many steps. 0: the fitted boundary stays.
  int boundarySteps = 3;
};

struct RangeTuneCallbacks {
  std::function<void(const std::string&)> onProgress;  // one line per step
  std::function<void(const std::string&)> onWarning;
  std::function<bool()> shouldStop;                     // e.g. Ctrl-C: stop after the point in flight
};

struct RangeTuneResult {
  DispatchRule rule;
  TimeTable table;                 // candidates x points, microseconds (shape-generic kernels)
  std::vector<size_t> train, heldOut;  // indices into table.points
  std::string kernelIr;            // the kernel at the range's top, IR text (what the bundle compiles)
  std::string kernelName;
  std::string dim = "M";           // rangeDimName of the kernel
  // The measurements behind the boundaries and the fixed buckets (also in the rule file).
  struct Probe {
    int64_t m = 0;
    std::string left, right;  // configs (boundary: the buckets' either side; fixed: fixed, rule's)
    double leftUs = 0, rightUs = 0;
    bool fixed = false;  // a fixed kernel's trial at m (left) against the rule's kernel (right)
  };
  std::vector<Probe> probes;
};

// Which of `t`'s candidates the cross measurement runs at the point after `prev` (indices into
// t.configs, ascending): every one while the best run at `prev` is shorter than s.pruneAboveUs;
// then those within s.pruneFactor of that best and at least the s.keepAtLeast fastest; never one
// that failed at `prev`.
std::vector<size_t> rangeCandidatesToMeasure(const TimeTable& t, size_t prev, const RangeTuneSettings& s);

// The range's points (rangePoints: training and held out, log-spaced) into `r`'s table, train and
// heldOut; both range tunes start from them. Returns the points.
RangePoints placeRangePoints(RangeTuneResult& r, const ShapeRange& range, int maxTrain);

// `kernelAt(m)`: the kernel with M (GEMM), its leading dimension (elementwise) or its sequence
// length (attention) = m, everything else fixed. `store`: where each point's records
// go (may be null: nothing stored or reused).
Expected<RangeTuneResult> tuneRange(const std::function<Expected<ir::Kernel>(int64_t)>& kernelAt, const ShapeRange& range,
                                    const TargetDesc& t, cache::RecordStore* store, const cache::Provenance& prov,
                                    const RangeTuneSettings& s, const RangeTuneCallbacks& cb = {});

// The same on an NVIDIA target, through the estimate (range_tune_gpu.cpp; GEMM's M, elementwise's
// rows, attention's seq): each point tuned with the estimate measurer, the shape-generic winners
// compiled with the runtime size and estimated at every point. The table's times are the analytic model's.
Expected<RangeTuneResult> tuneRangeGpuEstimate(const std::function<Expected<ir::Kernel>(int64_t)>& kernelAt,
                                               const ShapeRange& range, const TargetDesc& t, cache::RecordStore* store,
                                               const cache::Provenance& prov, const RangeTuneSettings& s,
                                               const RangeTuneCallbacks& cb = {});

// The rule file `tessera tune` writes and `tessera bundle --dispatch` reads: the rule plus the
// kernel (IR text at the range's top), its name and the target's ISA level and threads.
std::string rangeRuleFile(const RangeTuneResult& r, const TargetDesc& t);

// The host measurer of shape-generic kernels: each config compiled once (runtime M, the
// kernel `maxKernel`) and shared by every point's measurer made from the same cache; runs on the
// buffers of `pointKernel` with that kernel's M.
struct SizedCompileCache;
std::shared_ptr<SizedCompileCache> makeSizedCompileCache(const ir::Kernel& maxKernel, const TargetDesc& t);
std::unique_ptr<measure::Measurer> makeSizedHostMeasurer(const std::shared_ptr<SizedCompileCache>& cache,
                                                         const ir::Kernel& pointKernel,
                                                         const measure::MeasureSettings& s);

}  // namespace tessera::bundle
