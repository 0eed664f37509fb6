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

struct SearchSettings {
  std::string strategy = "evolutionary";  // evolutionary | ga | random | exhaustive
  uint64_t seed = 0;
  // Candidates measured per round (the model retrains after each). Replay, 40 seeds, cold:
  // batch 4 needs 73 / 27 trials (geomean of medians, GPU files / host tables) against 82 / 32 at
  // 8 and 45 on the host tables at 16; 2 is no better than 4 and leaves a 2-core host's second
  // build slot idle half the time.
  int batchSize = 4;
  int population = 128;          // evolution population scored by the model each round
  int generations = 4;           // evolution steps per round
  double mutationProb = 0.15;    // per-knob mutation probability (at least one knob always changes)
  double crossoverProb = 0.5;    // offspring made by crossover of two parents (else a mutated parent)
  double eps = 0.1;              // fraction of each batch drawn uniformly at random (eps-greedy)
  int seedsFromStore = 8;        // best measured/stored configs put into each initial population
  int parents = 8;               // best measured configs that breed (ga: its population)
  double offspringShare = 0.5;   // evolutionary: share of the initial population bred from them
  int tournament = 2;            // parent selection: best of this many draws (model score or measurement)
  // Greedy picks of one batch differ from each other in at least this many knobs while enough
  // candidates allow (0: off): a batch spread over several promising regions instead of one.
  // Off by default: on the replay benchmark 2 or 3 changed the GPU files' ratios by -15..+30 %
  // depending on the seed range, with no robust gain.
  int diversity = 0;
  // Each value of a categorical knob (GEMM's schedule family) gets the greedy slot of its
  // best-predicted candidate in every batch: one family's plateau cannot starve another whose
  // good region the model has not seen yet. Replay, 40 seeds, cold: skinny GEMM 200/654 ->
  // 146/540 trials (seeds 100-139: 252/724 -> 81/455), GEMM 128³ p90 51 -> 46; warm-started,
  // the skinny GEMM pays the slot (22 -> 30 median); tables without categorical knobs unchanged.
  // When a knob has more values than the batch has room (pickTop), they take turns and the
  // model's best value keeps the first slot: in domain order the GEMM tables' four families
  // (simt, mma, mma-lane, wgmma) filled a batch whose random share took one slot without wgmma,
  // the best one. Replay (search_efficiency --seeds 20), evo+prior median / p90: H100 GEMM f16
  // 4096^3 7/11 -> 1/4, H200 11/15 -> 1/4 (40 seeds: 4/11 -> 4/4, 4/15 -> 4/4); batch 1 (`--batch 1`, 40 seeds), cold: 25 -> 8
  // (H100), 38 -> 10 (H200), where wgmma waited for the other three; synthetic categorical
  // 181 -> 189 (8 knobs of 3 values: seed noise), every other table unchanged.
  bool categoricalSlots = true;
  // A value's slot stops once it is plainly dominated: at least `categoricalTries` of its configs
  // measured (failures count) and its best under `categoricalDominated` of the best so far
  // (0: the slot plays in every batch). Found on the spaces an H200 measured (bench/data/
  // device_h200.jsonl.gz), where a SIMT family at 1-5 % of the tensor-core ones took one pick in
  // four of every batch. Replay, 40 seeds, cold median / p90: GEMM f16 4096^3 (sm_90a) 16/32 ->
  // 11/19, attention D64 12/18 -> 10/15, causal D128 13/18 -> 12/15, D128 8/13 -> 8/11, bias+GELU
  // unchanged; the host and synthetic tables unchanged (their values stay within a quarter);
  // 8 tries instead of 2 kept most of the waste (GEMM 16/24).
  double categoricalDominated = 0.25;
  int categoricalTries = 2;
  // Two-valued integer knobs (switches) get those slots too, in every batch including a prior's
  // first (a tune with other GPUs' records sets it: their landscape is most often wrong about a
  // switch); the knobs' order turns each batch so that every switch gets its turn.
  bool flagSlots = false;
  // Trials without a better measurement after which a batch explores away from the best config
  // (0: never): its greedy picks differ from it in at least `stagnationDistance` knobs.
  int stagnation = 0;
  int stagnationDistance = 2;
  // The batch's random share while stagnating; below 0 it grows with the stale trials, to
  // max(eps, 1 - stagnation / stale): a search stuck on a plateau turns into random search.
  double stagnationEps = -1;
  // The random share's picks: of this many uniform unseen configs, the one with the most pairs
  // of knob values never measured (1 or less: uniform draws).
  int noveltyDraws = 0;
  // Niche slot (0: off): the `nicheKnobs` knobs that explain most of the measured log throughput
  // (correlation ratio) split the space into niches, one per joint value of theirs; each batch
  // gives one greedy slot to the niche of highest upper confidence bound (its best measured share
  // of the best, plus nicheExplore * sqrt(ln trials / (1 + its trials))), filled with the model's
  // best unseen config inside it. The model (trees over single knobs, trained where the search has
  // been) ranks a joint move of two knobs it has only seen changed alone, and slow, as slow: the
  // host GEMM's register tile (MR 4 -> 8 with NR 64 -> 32, and plain), the synthetic trap; the
  // niche's own measurements, not the model's extrapolation, decide whether it earns a trial.
  //
  // On by default over switches (nicheMaxValues 2: two-valued knobs, a code path on or off):
  // a switch selects one of two kernels whose landscapes differ, and the model trained on the
  // variant the first draws favoured extrapolates to the other. Evidence: docs/search-notes.md.
  int nicheKnobs = 2;
  double nicheExplore = 1.0;
  // A niche's first visits draw uniformly inside it: where the search has not been, the model
  // extrapolates from the incumbent's region (the host GEMM's 8x32 tile is fast only with the
  // plain schedule, which the model has seen slower everywhere else).
  int nicheDraws = 2;
  // The slot plays once this many trials brought no better measurement (0: every batch).
  int nicheAfter = 0;
  bool nicheInRandomShare = false;  // the slot replaces the batch's random pick, not a greedy one
  int nicheMaxValues = 2;           // niche knobs only among those of at most this many values (0: any)
  // Evolutionary with a prior: its first this-many batches come from the prior's top even when the
  // model already has data (a transfer across GPUs that takes the lead after a probe of this GPU:
  // its first batch is the other GPUs' best). 0: the prior leads only while the model has none.
  int priorBatches = 0;
  // Evolutionary with a prior, once the cost model leads: candidates it scores alike go in the
  // prior's order (a model trained on a few batches has few distinct leaf values), and candidates
  // the prior takes for unlaunchable (a trial the compiler refuses) go after every one it can
  // estimate. Evidence: docs/search-notes.md.
  bool priorTiebreak = true;
  bool priorFitsFirst = true;
  // A categorical value (a kernel family) whose best estimate is under categoricalDominated of the
  // prior's best gets no slot until one of its configs measures at that share of the best (the
  // slot is for a family the model has not seen, and the prior has seen it); the random share
  // still draws from it. Off for a prior that is not a time (the other GPUs' score in a
  // transfer: search/tune_session.cpp). Evidence: docs/search-notes.md.
  bool priorDominated = true;
  // Evolutionary with a prior, once the cost model leads: the model's order and the prior's are
  // blended, each candidate ranked by both (as a fraction of the candidates) and weighted
  // priorWeight / (priorWeight + trials) toward the prior: the prior counts as this many trials'
  // worth of evidence (0: off; the prior then only breaks the model's ties). A model trained on
  // one batch scores configs with knob values it has not seen by what it learnt of the others.
  // Evidence: docs/search-notes.md.
  double priorWeight = 8;
  // The prior is checked, not believed: each batch, the rank correlation (Spearman) of its
  // estimate with this run's measurements (a failed trial the slowest, a config it cannot launch
  // predicted slowest) bounds its say. The blend's weight is priorWeight times the upper
  // confidence bound of that correlation (Fisher's z, standard error sqrt(1.06 / (n - 3)), this
  // many standard errors), clamped to [0, 1]; at none, the prior's tie order, unlaunchable-last
  // and family rules are off too. Before four measurements the prior is taken at its word (its
  // first batch). Below 0: the prior believed at its fixed weight. docs/search-notes.md.
  double priorCheckZ = 1.282;
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
  virtual void observe(const std::vector<TrialResult>& results) = 0;
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
