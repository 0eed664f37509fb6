// Owns search strategies behind one interface (style.md 2): `evolutionary` (cost-model guided,
// default), `ga` (the same evolution without a model: the honest baseline), `random` and
// `exhaustive`. Settings are a typed struct, separate from per-run state (style.md 3, 10).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "costmodel/cost_model.h"
#include "costmodel/features.h"
#include "ir/schedule.h"
#include "measure/trial.h"
#include "support/status.h"

namespace tessera::search {

// The evolution's operators (TVM's evolutionary search): how each round's candidates are bred.
struct EvolutionSettings {
  int population = 128;          // candidates scored by the model each round
  int generations = 4;           // evolution steps per round
  double mutationProb = 0.15;    // per knob (at least one knob always changes)
  double crossoverProb = 0.5;    // offspring made by crossover of two parents (else a mutated parent)
  int seedsFromStore = 8;        // best measured/stored configs put into each initial population
  int parents = 8;               // best measured configs that breed (ga: its population)
  // Share of the initial population bred from them: none in a cold search (the held-out split
  // disowns it there, docs/search-notes.md); a tune led by other GPUs' records breeds from their
  // best (TransferSettings::offspringShare, set by session/tune_session.cpp).
  double offspringShare = 0.0;
  int tournament = 2;            // parent selection: best of this many draws
};

// Categorical slots: each value of a categorical knob (a kernel family) gets the greedy slot of
// its best-predicted candidate in every batch, so one family's plateau cannot starve another the
// model has not seen; values take turns when the batch has less room than they.
struct CategoricalSlots {
  bool on = true;
  // A value's slot stops once at least `tries` of its configs were measured (failures count) and
  // its best is under `dominated` of the best so far (0: never).
  double dominated = 0.25;
  int tries = 2;
  // Two-valued integer knobs (switches) get slots too, in every batch including a prior's first.
  // Off for a cold search; a tune led by other GPUs' records sets it (session/tune_session.cpp).
  bool switches = false;
};

// The niche slot: the `knobs` knobs of at most `maxValues` values (0: any) that explain most of
// the measured log throughput split the space into niches; each batch gives one greedy slot to
// the niche of highest upper confidence bound (best share of the best, plus explore *
// sqrt(ln trials / (1 + visits))), its first `draws` visits uniform inside it. By default over
// knobs of two or three values: switches, whose two kernels' landscapes differ and which a model
// extrapolates across badly, and three-valued knobs, one value of which can hold a plateau that
// traps the search while the best is under another (issue 49 item 3; docs/search-notes.md).
struct NicheSettings {
  int knobs = 2;  // 0: off
  double explore = 1.0;
  int draws = 2;
  int maxValues = 3;
};

// How a prior (the analytic model's estimate, or other GPUs' score in a transfer) steers the
// evolutionary search once the cost model leads; before that its top is the first batch.
struct PriorSettings {
  bool tiebreak = true;    // candidates the model scores alike go in the prior's order
  bool fitsFirst = true;   // candidates the prior takes for unlaunchable go last
  // A categorical value whose best estimate is under CategoricalSlots::dominated of the prior's
  // best gets no slot until measured at that share (off for a prior that is not a time).
  bool dominated = true;
  // The model's order and the prior's are blended, the prior counting as this many trials'
  // worth of evidence (0: the prior only breaks ties).
  double weight = 8;
  // Checked, not believed: each batch the weight is scaled by the upper confidence bound, at this
  // many standard errors, of the prior's rank correlation with this run's measurements; at zero
  // its tie order, unlaunchable-last and family rules are off too (below 0: believed).
  double checkZ = 1.282;
  // The prior as a column of the cost model (costmodel::kEstimateFeature, what a GPU tune adds):
  // a column like any other (Believed), or held at one value, so no tree splits on it, while the
  // check has disowned the prior (Disowned: the bound above is zero). Believed by default: the
  // development split keeps the column even for an inverted estimate (docs/search-notes.md).
  enum class Column { Believed, Disowned };
  Column column = Column::Believed;
  // Disowned: the share of the model's trees, the first among them, in which a disowned prior's
  // column still counts (0: none); the other trees must rank by the knobs alone.
  double columnShare = 0;
  // A paired check (0: off): while the prior is on trial, this many picks of each batch are the
  // cold search's own (in the first batch its first uniform draws, after it the cost model's
  // order without the prior), beside the prior's; once the best of them beats the best of the
  // prior's picks of the same batch and the best measured before it, the prior is disowned for
  // the rest of the search (no say, as at a check of zero). On trial for the first
  // `pairedBatches` batches; the correlation check above goes on beside it (docs/
  // search-notes.md, "A paired check").
  int paired = 0;
  int pairedBatches = 1;
};

// Every setting's evidence (the replays that chose it, on which split) is in docs/search-notes.md.
struct SearchSettings {
  std::string strategy = "evolutionary";  // evolutionary | ga | random | exhaustive | ranked
  uint64_t seed = 0;
  int batchSize = 4;  // candidates measured per round (the model retrains after each)
  double eps = 0.1;   // fraction of each batch drawn uniformly at random (eps-greedy)
  EvolutionSettings evolution;
  CategoricalSlots categorical;
  NicheSettings niche;
  PriorSettings prior;
  size_t exhaustiveLimit = 200000;  // exhaustive refuses spaces whose knob product is larger
  // ranked: the legal configs it orders (the whole space when it can be listed within this,
  // else this many uniform draws); evolutionary with a prior: candidates scored for its first batch.
  size_t rankedLimit = 20000;
};

// The names makeStrategy accepts, in the order help texts list them. `ranked` proposes the legal
// space in the order of a prior (GPU targets: the analytic model's predicted time).
inline constexpr const char* kStrategyNames[] = {"evolutionary", "ga", "random", "exhaustive", "ranked"};

// A prior over configs: the predicted time (lower is better), nullopt when it cannot tell. On a
// GPU the evolutionary search's first batch (before the model has data) comes from its top.
using Prior = std::function<std::optional<double>(const ir::Config&)>;
// "evolutionary, ga, random, exhaustive"
std::string strategyNameList();

// The rank of each of `v` (1: the smallest), ties sharing their mean rank (Spearman's correlation
// of a transfer's agreement, the evolutionary search's blend of its model and a prior).
std::vector<double> ranks(const std::vector<double>& v);

class SearchStrategy {
 public:
  virtual ~SearchStrategy() = default;
  // Up to `n` legal configs never proposed or observed before (fewer when the space runs dry).
  virtual std::vector<ir::Config> propose(size_t n) = 0;
  // Measured results (of proposals or of seeds from the store).
  virtual void observe(const std::vector<measure::TrialResult>& results) = 0;
  // True once every legal config has been proposed (exhaustive, or a space that ran dry).
  virtual bool exhausted() const = 0;
};

// `model` and `features` may be null for strategies that do not use them; `evolutionary`
// requires both, `ranked` a prior. Unknown strategy names are an InvalidArgument error listing
// the known ones.
Expected<std::unique_ptr<SearchStrategy>> makeStrategy(const SearchSettings& s, const ir::Space& space,
                                                       costmodel::CostModel* model,
                                                       const costmodel::FeatureExtractor* features,
                                                       const Prior* prior = nullptr);

}  // namespace tessera::search
