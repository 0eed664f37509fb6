// Owns transfer across GPUs (issue 29): a tune on one GPU learning from the same kernel measured
// on others (the store's or the shared cache's records). The other GPUs' records train a model of
// their own (one ranking group per GPU); its score of a config is one more feature of the
// session's cost model and picks the first batch. By default the other GPUs lead from that first
// batch, and a check drops them once this GPU's own results rank unlike theirs (the search then
// goes on as without them, its twin having learnt every result): GPUs that agree only at the top
// (an A100 and an MI250X running one convolution, 0.46 over the whole space) lead as well as those
// that agree everywhere (two NVIDIA GPUs running one GEMM, 0.93). A probe is an option
// (TransferSettings::probeTrials): the tune's first trials are the ones it would make without the
// records, and each other GPU's model must rank them alike, by a test that a chance agreement of a
// few draws does not pass; only the GPUs that pass lead. It protects a tune from GPUs whose bulk
// disagrees, at the price of the pairs that agree at the top (TransferSettings says what it cost).
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
  bool asSamples = false;           // also warm-start the cost model with the records themselves
  // The probe: this GPU's first results come from the twin without the transfer (a cold start's
  // own trials, so probing costs nothing), and the transfer leads from then on only once they
  // show that the other GPUs' landscape agrees with this one's: a sequential test of rho, the
  // mean of the rank correlations (Spearman) of the landscape's and the ranking model's scores
  // with the probe's measurements (AgreementGate says why both): from `probeTrials` results on,
  // after each batch, with the Fisher z of rho and its standard error sqrt(1.06 / (n - 3)), the
  // transfer leads when the one-sided lower bound at `probeZ` standard errors reaches
  // `probeAgreement`; the probe ends without it when the upper bound falls below that, or at
  // `probeMaxTrials`. probeTrials 0 (the default): no probe, the other GPUs lead from the first
  // batch, pooled, and the check below drops them once this GPU's results rank unlike theirs;
  // probeZ 0 with probeMaxTrials == probeTrials: one threshold on rho.
  // With a probe: each other GPU judged and leading on its own (perGpu), the probe's rho from the
  // landscape alone (probeModels), each test at the uncorrected level (probeCorrected).
  // Why each default is what it is, with the replays: docs/search-notes.md ("The transfer's
  // settings").
  bool perGpu = true;
  enum class ProbeModels { Landscape, Both };
  ProbeModels probeModels = ProbeModels::Landscape;
  bool probeCorrected = false;
  int probeTrials = 0;  // 8 with a probe (the tests of the probe set it)
  int probeMaxTrials = 16;
  double probeAgreement = 0.5;
  double probeZ = 1.282;
  // The agreement check: after `checkAfter` of this GPU's own results, while the score's rank
  // correlation with them (Spearman) is below `minAgreement`, the search's batches come from a
  // twin that learns from the same results without the score (0: never checked).
  int checkAfter = 8;
  double minAgreement = 0.4;
  // Once they lead, the other GPUs may stop leading after `staleAfter` results in a row without
  // a new best here (its twin has learnt every result; 0: never, the default).
  int staleAfter = 0;
  // The evolution's share of each initial population bred from the best measured configs while
  // other GPUs' records are in the store (EvolutionSettings::offspringShare; a cold search's is 0).
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
  // grade) leaves to noise. What the probe's agreement is judged with.
  std::shared_ptr<costmodel::CostModel> landscape;
  // Each other GPU on its own (the same two models, trained on its records alone; with one other
  // GPU, the models above): the probe judges every GPU by how it ranks this one's results, and
  // only the GPUs that agree lead (leadWith). A team's cache holds GPUs that agree with this one
  // (an RTX A6000 for an RTX A4000, rank correlation 0.92) next to GPUs that do not (a W7800,
  // 0.14): pooled, the ones that disagree blur the order of the ones that agree, and the pool as
  // a whole is judged by an agreement none of them has.
  struct Source {
    std::string name;  // as in `from`
    std::shared_ptr<costmodel::CostModel> model, landscape;
    std::vector<costmodel::Sample> samples;  // its records (group 0)
  };
  std::vector<Source> sources;
  // The GPUs that lead once the probe has judged (empty: all of them, pooled), and the models
  // trained on their records alone; set by leadWith, read by score and landscapeScore.
  struct Lead {
    std::vector<size_t> sources;
    std::shared_ptr<costmodel::CostModel> model, landscape;
  };
  std::shared_ptr<Lead> lead = std::make_shared<Lead>();
  costmodel::ModelSettings settings;  // what the models above were trained with
  // The score of a config (higher: faster on the other GPUs that lead).
  double score(const ir::Config& c) const;
  // The landscape's prediction of a config (higher: faster), for rank agreement over any configs.
  double landscapeScore(const ir::Config& c) const;
  // The same two of one other GPU (`sources[g]`).
  double sourceScore(size_t g, const ir::Config& c) const;
  double sourceLandscape(size_t g, const ir::Config& c) const;
  // From now on score and landscapeScore are those of `gpus` (indices into sources) pooled.
  void leadWith(std::vector<size_t> gpus) const;
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

// The probe's sequential test after `n` results whose agreement with the other GPUs' models (a rank
// correlation) is `rho` (TransferSettings: probeTrials, probeMaxTrials, probeAgreement, probeZ).
enum class ProbeVerdict { Undecided, Agrees, Disagrees };
ProbeVerdict probeVerdict(double rho, size_t n, const TransferSettings& s);

// The search without the transfer: its own strategy, cost model and features (the session's
// analytic prior and warm start, as a tune without other GPUs' records runs).
struct PlainSearch {
  std::unique_ptr<costmodel::CostModel> model;
  std::unique_ptr<costmodel::FeatureExtractor> features;
  std::unique_ptr<SearchStrategy> strategy;  // made with model and features above
};

// A search that uses the transfer while the other GPUs agree with this one: results come from
// `plain` (the tune without the transfer) while the probe runs (from `s.probeTrials` to
// `s.probeMaxTrials` results, probeVerdict over the mean of the two models' rank correlations
// with them); once it shows agreement, batches come from `withTransfer` until, after
// `s.checkAfter` results, the landscape ranks this GPU's measurements worse than `s.minAgreement`;
// otherwise, and from then on, from `plain`, whose model learns every result (another GPU's
// landscape that disagrees, an A100 where shared memory wins against an MI250X where it loses,
// must not steer the search). `onSwitch` (may be empty) hears the drop once, with the rank
// correlation.
// `onLead` (may be empty) hears which of t->sources lead, once the probe trusts them.
std::unique_ptr<SearchStrategy> agreementGate(std::unique_ptr<SearchStrategy> withTransfer, PlainSearch plain,
                                              std::shared_ptr<const Transfer> t, const TransferSettings& s,
                                              std::function<void(double)> onSwitch,
                                              std::function<void(const std::vector<size_t>&)> onLead = {});

}  // namespace tessera::search
