// Owns transfer across GPUs (issue 29): a tune on one GPU learning from the same kernel measured
// on others (the store's or the shared cache's records). The other GPUs' records train a model of
// their own (one ranking group per GPU); its score of a config is one more feature of the
// session's cost model and picks the first batch. The other GPUs lead from that first batch, and
// a check drops them once this GPU's own results rank unlike theirs (the search then goes on as
// without them, its twin having learnt every result): GPUs that agree only at the top (an A100
// and an MI250X running one convolution, 0.46 over the whole space) lead as well as those that
// agree everywhere (two NVIDIA GPUs running one GEMM, 0.93). docs/search-notes.md has why each
// setting is what it is, and the options measured and deleted (a probe of agreement before the
// lead, a stale rule, the records as cost-model samples).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "store/record.h"
#include "costmodel/cost_model.h"
#include "costmodel/features.h"
#include "search/strategy.h"
#include "search/warm_start.h"

namespace tessera::search {

struct TransferSettings {
  bool enabled = true;
  int maxGpus = 8;                  // other GPUs learned from at most (the most records first)
  int maxRecordsPerGpu = 256;       // per GPU: its best quarter plus a seeded draw of the rest
  bool asFeature = true;            // the score is a column of the cost model's features
  bool asPrior = true;              // the first batch comes from the score's top
  // The agreement check: after `checkAfter` of this GPU's own results, while the landscape's rank
  // correlation with them (Spearman) is below `minAgreement`, the search's batches come from a
  // twin that learns from the same results without the score (0: never checked).
  int checkAfter = 8;
  double minAgreement = 0.4;
  // The evolution's share of each initial population bred from the best measured configs while
  // other GPUs' records lead (EvolutionSettings::offspringShare; a cold search's is 0).
  double offspringShare = 0.5;
  uint64_t seed = 0;
  costmodel::ModelSettings model;   // the transfer model's (seed and threads come from here)
};

// What a session learned from other GPUs; empty (`gpus == 0`) when nothing usable was there.
struct Transfer {
  std::shared_ptr<costmodel::CostModel> model;  // trained on the other GPUs' records
  std::shared_ptr<const costmodel::FeatureExtractor> knobs;  // the features it was trained on
  int gpus = 0;
  size_t records = 0;
  std::vector<std::string> from;  // per GPU: "NVIDIA GeForce RTX 3090 (...): 256 records"
  // The same records regressed on their share of their GPU's best: it orders the bulk of slow
  // configs too, which `model` (graded ranking labels: everything below ~30 % of the best is one
  // grade) leaves to noise. What the agreement check judges with.
  std::shared_ptr<costmodel::CostModel> landscape;
  // The score of a config (higher: faster on the other GPUs).
  double score(const ir::Config& c) const;
  // The landscape's prediction of a config (higher: faster), for rank agreement over any configs.
  double landscapeScore(const ir::Config& c) const;
};

// Trains the transfer model on the records of `self`'s kernel on other GPUs (transferSource()) in
// `records`, with `features(self)` (the knob features: the same knobs mean the same on every GPU).
Transfer makeTransfer(const std::vector<cache::Record>& records, const cache::HardKey& self,
                      const FeaturesForKey& features, const TransferSettings& s);

// `base` plus the column "transfer_score" (every key gets it: the score is of this kernel).
FeaturesForKey withTransferFeature(FeaturesForKey base, std::shared_ptr<const Transfer> t);
// The first batch's order: the negated score (a Prior is a time: lower is better).
Prior transferPrior(std::shared_ptr<const Transfer> t);

// Spearman's rank correlation of a and b (ties averaged); 0 when either is constant or n < 3.
double rankCorrelation(const std::vector<double>& a, const std::vector<double>& b);

// The search without the transfer: its own strategy, cost model and features (the session's
// analytic prior and warm start, as a tune without other GPUs' records runs).
struct PlainSearch {
  std::unique_ptr<costmodel::CostModel> model;
  std::unique_ptr<costmodel::FeatureExtractor> features;
  std::unique_ptr<SearchStrategy> strategy;  // made with model and features above
};

// A search that uses the transfer while the other GPUs agree with this one: batches come from
// `withTransfer` until, after `s.checkAfter` results, the landscape ranks this GPU's measurements
// worse than `s.minAgreement`; from then on from `plain` (the tune without the transfer), whose
// model learns every result (another GPU's landscape that disagrees, an A100 where shared memory
// wins against an MI250X where it loses, must not steer the search). `onSwitch` (may be empty)
// hears the drop once, with the rank correlation.
std::unique_ptr<SearchStrategy> agreementGate(std::unique_ptr<SearchStrategy> withTransfer, PlainSearch plain,
                                              std::shared_ptr<const Transfer> t, const TransferSettings& s,
                                              std::function<void(double)> onSwitch);

}  // namespace tessera::search
