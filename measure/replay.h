// Owns replay: measuring by looking up recorded results instead of executing (a full table of
// measured configs for one workload). The files such tables come from (record exports, Kernel
// Tuner cache files of brute-forced GPU spaces, bench/data/README.md) are read by search/import.h.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "store/record.h"
#include "ir/schedule.h"
#include "measure/measurer.h"
#include "support/status.h"

namespace tessera::measure {

// One workload's recorded landscape: every config with its result.
struct ReplayTable {
  std::string name;                  // e.g. "gemm_RTX_3090"
  cache::HardKey key;                // of the recorded workload
  ir::Space space;                   // knobs from the recorded configs; legal = recorded (space.members)
  std::vector<TrialResult> results;  // one per recorded config (failures included), in space.members order
  double bestThroughput() const;
  // Configs whose throughput reaches `fraction` of the best (the replay benchmark's "good" set).
  size_t countAtLeast(double fraction) const;
};

// Measurer answering from a table; a config absent from it is invalid-config (the recorded
// space excluded it). Deterministic; counts lookups so tests can see what was measured.
class ReplayMeasurer : public Measurer {
 public:
  virtual size_t lookups() const = 0;  // configs answered by measure() and remeasure() so far
};
std::unique_ptr<ReplayMeasurer> makeReplayMeasurer(const ReplayTable& table);

// Builds a table from the records of one key (all statuses) held in a store export or list.
// A config recorded more than once keeps its best record (an ok one beats a failure).
// Throughput is 1e6 / median_us (= 1000 / time_ms), proportional to GFLOP/s within a workload.
Expected<ReplayTable> tableFromRecords(const std::string& name, const std::vector<cache::Record>& records);
// Records split by key_id (a store export may hold several workloads), in first-seen order.
std::vector<std::vector<cache::Record>> groupByKey(const std::vector<cache::Record>& records);

}  // namespace tessera::measure
