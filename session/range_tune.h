// Owns a range tune (`tessera tune gemm --m LO..HI`, elementwise `--rows`, attention `--seq`): the
// engine (range_tune_host.cpp, range_tune_gpu.cpp: each training point of the
// range tuned as its own kernel, its records stored like any tune's, the winners of every point
// then measured as shape-generic kernels at each training and held-out point, and the dispatch
// rule fitted to those times), and the request every front end asks for (the RangeTuneRequest, its
// checks, the target, the store, the per-point session settings, the one call that runs it;
// range_tune.cpp), with the reading of the range option itself. Front ends make the kernel at a
// point; they print the rule and write its file.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bundle/dispatch_rule.h"
#include "bundle/range_dims.h"
#include "measure/protocol_measurer.h"
#include "measure/records.h"
#include "session/tune_session.h"
#include "store/store.h"
#include "session/target_choice.h"
#include "support/status.h"
#include "targets/target_desc.h"

namespace tessera::session {

struct RangeTuneSettings {
  SessionSettings session;           // per training point
  measure::MeasureSettings measure;   // per point and for the cross measurement
  std::string spaceSpec;             // narrows each point's space; the schedule is the blis family's
  int candidatesPerPoint = 2;        // each point's best configs that join the candidates
  bundle::FitSettings fit;
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
  // each at least `fixedGain` faster answers its M alone (a fixed bucket). Every M up to
  // `fixedUpTo` is tried (0: off).
  int64_t fixedUpTo = 16;
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
  bundle::DispatchRule rule;
  bundle::TimeTable table;         // candidates x points, microseconds (shape-generic kernels)
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
std::vector<size_t> rangeCandidatesToMeasure(const bundle::TimeTable& t, size_t prev, const RangeTuneSettings& s);

// Where both range tunes start, given `top`, the kernel at the range's top: its checks (GEMM: A
// stored M x K, no batch; attention: equal lengths), then `r` begun with its IR text, name and
// range dimension, and the range's points (rangePoints: training and held out, log-spaced) in its
// table, train and heldOut. Returns the points.
Expected<bundle::RangePoints> startRangeTune(RangeTuneResult& r, const ir::Kernel& top, const bundle::ShapeRange& range,
                                             int maxTrain);

// `kernelAt(m)`: the kernel with M (GEMM), its leading dimension (elementwise) or its sequence
// length (attention) = m, everything else fixed. `store`: where each point's records
// go (may be null: nothing stored or reused).
Expected<RangeTuneResult> tuneRange(const std::function<Expected<ir::Kernel>(int64_t)>& kernelAt, const bundle::ShapeRange& range,
                                    const TargetDesc& t, cache::RecordStore* store, const cache::Provenance& prov,
                                    const RangeTuneSettings& s, const RangeTuneCallbacks& cb = {});

// The same on an NVIDIA target, through the estimate (session/range_tune_gpu.cpp; GEMM's M, elementwise's
// rows, attention's seq): each point tuned with the estimate measurer, the shape-generic winners
// compiled with the runtime size and estimated at every point. The table's times are the analytic model's.
Expected<RangeTuneResult> tuneRangeGpuEstimate(const std::function<Expected<ir::Kernel>(int64_t)>& kernelAt,
                                               const bundle::ShapeRange& range, const TargetDesc& t, cache::RecordStore* store,
                                               const cache::Provenance& prov, const RangeTuneSettings& s,
                                               const RangeTuneCallbacks& cb = {});

// The rule file `tessera tune` writes and `tessera bundle --dispatch` reads: the rule plus the
// kernel (IR text at the range's top), its name and the target's ISA level and threads.
std::string rangeRuleFile(const RangeTuneResult& r, const TargetDesc& t);

struct RangeTuneRequest {
  // The kernel with its range dimension at a value (M, rows or seq), everything else fixed.
  std::function<Expected<ir::Kernel>(int64_t)> kernelAt;
  bundle::ShapeRange range;
  std::string rangeOption = "m";  // the option that gave the range ("m", "rows", "seq"), for messages
  std::string target = "host";
  int threads = kAllCores;
  int64_t maxElements = kDefaultMaxElements;  // the kernel at the range's top, allocated here
  bool estimate = false;                      // a GPU target: through the estimate (nothing runs)
  std::string space;                          // narrowed knob domains, every point's
  // Budget per point, and the rule.
  std::optional<int> trials;  // default: 200 measured, 32 when estimating (tune_request.h), as a single tune
  int batch = search::SearchSettings{}.batchSize, topK = 5;
  double timeBudget = 0, timeout = 20, minTime = 0.05;
  uint64_t seed = 0;
  int maxKernels = 16;  // configs the rule may use
  int points = 14;      // training points at most (a list tunes all of its values)
  int fixedUpTo = 16;   // GEMM: sizes from the range's low end that may get a fixed few-row kernel (0: none)
  // The store (a SQLite file) and what is reused from it.
  std::string db;
  CachePolicy policy = CachePolicy::UseStored;
  bool warmStart = true;
  measure::ProvenanceInputs provenance;
  Dialect dialect;
  RangeTuneCallbacks callbacks;
};

struct RangeTuneOutcome {
  TargetDesc target;
  RangeTuneResult result;
  std::string ruleFile;  // rangeRuleFile: what `bundle --dispatch` reads
};

// Whether an option's text asks for a range or a list ("1..8192", "1,7,64") rather than one size.
bool asksForRange(const std::string& text);
// The range `text` of option `flag` ("--m", "--rows", "--seq"): LO..HI or a list, one line
// naming the flag otherwise (bundle::parseShapeRange's rules: the bundle's rule files hold it).
Expected<bundle::ShapeRange> parseRange(const std::string& text, const std::string& flag);

// The request's own checks (one line each, InvalidArgument): its numbers, and what its target
// allows (a GPU range goes through the estimate only, a host range is measured), the latter once
// the kernel at the range's top builds and fits and the target resolves. A front end may report
// them as its option errors.
Status checkRangeTune(const RangeTuneRequest& r);
// checkRangeTune, then the kernel at the range's top and its size, the target, the store, and the
// range tuned: every point's records stored, the shape-generic winners measured (or estimated)
// at every point, the dispatch rule fitted.
Expected<RangeTuneOutcome> runRangeTune(const RangeTuneRequest& r);

}  // namespace tessera::session
