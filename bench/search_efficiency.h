// Owns what the two files of the search-efficiency replay benchmark share: its options, a replayed
// table, one strategy's outcome, random search's exact baseline, and the loading and split report
// (search_efficiency_tables.cpp) that the replays (search_efficiency.cpp) run between.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "bench/kerneltuner_models.h"
#include "costmodel/cost_model.h"
#include "measure/replay.h"
#include "search/import.h"
#include "search/strategy.h"
#include "search/transfer.h"
#include "store/record.h"

namespace tessera::bench::efficiency {

struct BenchOptions {
  int seeds = 40;
  double target = 0.95;
  search::SearchSettings search;
  costmodel::ModelSettings model;
  bool pairwise = false;
  bool pow2 = true;
  int batch = 0;
  std::vector<std::string> strategies = {"evolutionary", "ga"};
  bool verbose = false;
  std::string only;  // substring filter on table names
  bool trace = false;  // per-trial normalized throughput on stderr (use with few seeds)
  bool traceConfigs = false;  // the trace also names each trial's config
  int firstSeed = 0;
  bool hostFeatures = true;  // derived host features on host tables (0: knob features only)
  bool warm = true;          // also replay evo+xgboost warm-started from sibling tables
  bool prior = true;         // also replay evo+xgboost with the analytic model's prior (tables with a model)
  bool priorFeature = true;  // evo+prior: the log estimate is also a cost-model feature (as tessera tune does)
  int warmRecords = 256;     // records per sibling table in the warm start
  bool synthetic = true;     // also replay the synthetic hard tables (needle, plateau, categorical)
  bool transferPrior = false;  // transfer replays: the analytic model's prior in both arms
  bool invertedPrior = true;   // also replay evo+prior with the estimate inverted (the control)
  // The kernels every search or prior setting is chosen on (the development split); the rest
  // are held out: a setting is kept when the development split says it helps and the held-out
  // split agrees (docs/search-notes.md).
  std::vector<std::string> dev = {"convolution", "host", "device", "synthetic_plateau_trap"};
  std::string json;  // also write every table's per-seed trials here (bench/results_page.py reads it)
  search::TransferSettings transfer;  // how a session learns from the other tables
};

// Random search without replacement: the first success position T when k of N configs are good
// has P(T > t) = C(N-k, t) / C(N, t).
struct RandomExact {
  double median = 0, p90 = 0, mean = 0;
};
RandomExact randomExact(size_t N, size_t k);

// The best any cold start can do when its first batch is uniformly random (as the evolutionary
// search's is: the model has no data yet): random search for `batch` trials, then an oracle that
// hits at trial batch + 1. On tables where random itself needs few trials this caps the ratio.
RandomExact coldBound(size_t N, size_t k, size_t batch);

// Batch 0 means the tuner's own default (SearchSettings::batchSize), so the replay measures the
// search that `tessera tune` runs.
inline int batchFor(const BenchOptions& o) { return o.batch > 0 ? o.batch : search::SearchSettings{}.batchSize; }

// A replayed table and the records it came from (the warm start of its siblings).
struct Table {
  measure::ReplayTable replay;
  std::vector<cache::Record> records;
  std::optional<bench::KernelTunerModel> model;  // the analytic model of a Kernel Tuner file's kernel
  // Tessera's own GPU tables (record exports of a GPU target): Tessera's analytic model of the
  // kernel on the GPU that measured it, as `tessera tune` on that device takes it (its prior).
  search::Prior analytic;
  bool tesseraGpu = false;
  bool host() const { return replay.key.target == "host"; }
  bool synthetic() const { return replay.key.target == "synthetic"; }
  bool hasPrior() const { return model.has_value() || bool(analytic); }
  search::Prior prior() const { return model ? bench::kernelTunerPrior(*model) : analytic; }
  // The summary's groups: 0 Kernel Tuner GPU files, 1 host tables, 3 synthetic tables, 4 Tessera's
  // GPU tables (2: all of them).
  int group() const { return host() ? 1 : synthetic() ? 3 : tesseraGpu ? 4 : 0; }
  // The kernel it measures, the unit of the development/held-out split: "xgemm", "convolution"
  // (the Kernel Tuner files), "host", "device" (Tessera's tables), each synthetic family by its
  // name, and any other table by its own name (a file named on the command line).
  std::string kernel() const {
    const std::string& n = replay.name;
    if (synthetic()) return n;
    if (host()) return "host";
    if (tesseraGpu) return "device";
    if (model && n.rfind("gemm_", 0) == 0) return "xgemm";
    if (model && n.rfind("convolution_", 0) == 0) return "convolution";
    return n;
  }
};

struct Outcome {
  std::vector<double> hits;  // trials to the first config within target of the best, per seed
  double seconds = 0;
};

// Per strategy, per table replayed: random / strategy at the median and p90, the strategy's
// median trials, and the table's summary group, kernel and cold cap.
struct Column {
  std::vector<double> ratioMed, ratioP90, medians;
  std::vector<int> group;
  std::vector<std::string> kernel, table;
  std::vector<double> cap;  // the table's cold cap at the median
};

// --exclude: configs set aside in the tables they name (search::setAside).
extern std::vector<search::TableExclusion> gExclusions;

// The bundled tables and `extra`, or only `only` when it is given.
std::vector<Table> loadTables(const std::string& dataDir, const std::vector<std::string>& extra,
                              const std::vector<std::string>& only = {}, bool synthetic = false);

double geomean(const std::vector<double>& v);

// The development/held-out split (BenchOptions::dev): per kernel, then per split, the geometric
// mean of random's trials over the strategy's at the median (the cold evo+xgboost, and with the
// prior and the inverted prior where replayed), and issue 49's aims over each split.
void printSplit(const BenchOptions& o, const Column& cold, const Column& prior, const Column& inverted);

}  // namespace tessera::bench::efficiency
