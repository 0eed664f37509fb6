// Owns the tuning loop: strategy proposes a batch -> measurer measures it -> named callbacks
// (update the cost model, commit records, report progress) -> repeat until the trial count or
// time budget is spent; then the top-k are re-measured interleaved and the winner reported with
// its spread. The same loop drives real host tuning and deterministic replay.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "costmodel/cost_model.h"
#include "costmodel/features.h"
#include "ir/schedule.h"
#include "measure/measurer.h"
#include "search/strategy.h"
#include "measure/trial.h"

namespace tessera::search {

struct TuneSettings {
  SearchSettings search;
  int trials = 200;              // measured candidates at most (seeds from the store excluded)
  double timeBudgetSec = 0;      // 0: no time limit
  int topK = 5;                  // re-measured interleaved at the end (0: skip)
  int remeasureRounds = 3;
  bool measureDefault = true;    // also measure the space's default (for "speedup over default")
};

struct TuneProgress {
  int trial = 0, trials = 0;     // done / planned
  double elapsedSec = 0, etaSec = 0;
  std::optional<measure::TrialResult> best;  // best ok result so far
};

// Named callbacks after each measured batch (style.md 3). Any may be empty.
struct TuneCallbacks {
  std::function<void(const std::vector<measure::TrialResult>&)> commitRecords;
  std::function<void(const measure::TrialResult&, const TuneProgress&)> onTrial;
  std::function<void(const std::vector<measure::TrialResult>&)> afterRemeasure;
  // Checked after every batch: true ends the search early (e.g. the replay benchmark stops once
  // a run has reached its target). The final re-measurement still runs.
  std::function<bool(const TuneProgress&)> shouldStop;
};

struct TuneResult {
  std::vector<measure::TrialResult> trials;      // every measured candidate, in order
  std::optional<measure::TrialResult> best;      // after the final re-measurement
  std::optional<measure::TrialResult> defaultConfig;
  std::vector<measure::TrialResult> remeasured;  // the top-k after interleaved re-measurement
  bool exhausted = false;                        // the strategy ran out of legal configs
  double seconds = 0;
};

// `previous` are results already known for this workload (resume / store seeds): they are
// observed by the strategy and the model but not measured again and not counted as trials. The
// measurer's error (measurer.h: the backend itself gone) ends the loop at once and is returned;
// the batches measured before it were committed.
Expected<TuneResult> tune(const ir::Space& space, measure::Measurer& measurer, SearchStrategy& strategy,
                          costmodel::CostModel* model, const costmodel::FeatureExtractor* features,
                          const TuneSettings& settings, const TuneCallbacks& callbacks,
                          const std::vector<measure::TrialResult>& previous = {});

}  // namespace tessera::search
