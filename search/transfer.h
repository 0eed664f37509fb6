// Owns transfer across GPUs (issue 29): a tune on one GPU learning from the same kernel measured
// on others (the store's or the shared cache's records). The other GPUs' records train a model of
// their own (one ranking group per GPU); its score of a config is one more feature of the
// session's cost model and picks the first batch it leads. It leads only after a probe: the tune's
// first trials are the ones it would make without the records, and the other GPUs' landscape must
// rank them alike. Landscapes that agree (two NVIDIA GPUs running one GEMM, rank correlation 0.93)
// pass it and the score is the strongest feature at once; landscapes that disagree (an A100 and an
// MI250X, 0.46: shared memory wins on one and loses on the other) would lead the search into a
// region that is a local optimum here, so they are kept out and the tune runs as without them.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cache_service/record.h"
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
  bool asSamples = false;           // also warm-start the cost model with the records themselves
  // The probe: this GPU's first `probeTrials` results come from the twin without the transfer
  // (a cold start's first batches: uniform draws), and the transfer leads from then on only when
  // the score's rank correlation with them (Spearman) reaches `probeAgreement`; else the search
  // stays the twin, the very search a tune without other GPUs' records runs (0: no probe).
  int probeTrials = 8;
  double probeAgreement = 0.7;
  // The agreement check: after `checkAfter` of this GPU's own results, while the score's rank
  // correlation with them (Spearman) is below `minAgreement`, the search's batches come from a
  // twin that learns from the same results without the score (0: never checked).
  int checkAfter = 8;
  double minAgreement = 0.4;
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
  // grade) leaves to noise. What the probe's agreement is judged with.
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

// A search that uses the transfer while the other GPUs agree with this one: the first
// `s.probeTrials` results come from `plain` (the tune without the transfer), then batches come from
// `withTransfer` if the landscape ranks them with Spearman >= `s.probeAgreement`, until, after
// `s.checkAfter` results, it ranks this GPU's measurements worse than `s.minAgreement`; otherwise,
// and from then on, from `plain`, whose model learns every result (another GPU's landscape that
// disagrees, an A100 where shared memory wins against an MI250X where it loses, must not steer the
// search). `onSwitch` (may be empty) hears the drop once, with the rank correlation.
std::unique_ptr<SearchStrategy> agreementGate(std::unique_ptr<SearchStrategy> withTransfer, PlainSearch plain,
                                              std::shared_ptr<const Transfer> t, const TransferSettings& s,
                                              std::function<void(double)> onSwitch);

}  // namespace tessera::search
