// Owns a range tune as every front end asks for it (`tessera tune gemm --m LO..HI`, elementwise
// `--rows`, attention `--seq`): the RangeTuneRequest, its checks, the target, the store, the
// per-point session settings, and the one call that tunes every training point, measures the
// shape-generic winners at every point and fits the dispatch rule (bundle/range_tune.h). Front
// ends parse the range and make the kernel at a point; they print the rule and write its file.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "bundle/dispatch_rule.h"
#include "bundle/range_tune.h"
#include "measure/records.h"
#include "search/tune_session.h"
#include "session/target_choice.h"
#include "support/status.h"
#include "targets/target_desc.h"

namespace tessera::session {

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
  int fixedUpTo = 8;    // GEMM: sizes from the range's low end that may get a fixed few-row kernel (0: none)
  // The store (a SQLite file) and what is reused from it.
  std::string db;
  search::CachePolicy policy = search::CachePolicy::UseStored;
  bool warmStart = true;
  measure::ProvenanceInputs provenance;
  Dialect dialect;
  bundle::RangeTuneCallbacks callbacks;
};

struct RangeTuneOutcome {
  TargetDesc target;
  bundle::RangeTuneResult result;
  std::string ruleFile;  // bundle::rangeRuleFile: what `bundle --dispatch` reads
};

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
