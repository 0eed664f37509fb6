// Owns warm-starting the cost model from stored records of other workloads (issue 3 item 3): the
// store of a team that tuned GEMM at other shapes already says which register tiles, cache
// blocks and schedules this CPU likes. Each stored workload becomes its own ranking group, with
// features computed from its key (costmodel::WorkloadDesc), so the model starts the search
// knowing those landscapes and learns this one on top of them. The same kernel measured on other
// GPUs is not such a workload: it trains the transfer's own model (search/transfer.h), and
// transferSource() below says which records those are.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "store/record.h"
#include "costmodel/cost_model.h"
#include "costmodel/features.h"
#include "ir/schedule.h"
#include "targets/target_desc.h"

namespace tessera::search {

struct WarmStartSettings {
  int maxWorkloads = 8;             // the nearest ones (shape, then dtype and layout) first; 0: off
  int maxRecordsPerWorkload = 256;  // its best quarter plus a seeded random draw of the rest
  uint64_t seed = 0;
  bool siblings = true;             // other workloads of the family on this target
};

struct WarmStart {
  std::vector<costmodel::Sample> samples;  // groups 1..workloads (0 is left to the run itself)
  int workloads = 0;
  std::vector<std::string> from;    // per workload: "<target> <shape>: N records" (reports)
};

// Whether records of `other` may warm-start a search of `self`: another workload of the same
// family on the same target and arch.
bool warmStartSibling(const cache::HardKey& self, const cache::HardKey& other);
// Whether records of `other` are this kernel on another GPU: the same family, workload, shape,
// dtype and layout on another GPU target (another chip, or the same chip with other SMs/CUs).
bool transferSource(const cache::HardKey& self, const cache::HardKey& other);

// Samples from `records` whose key has the family, target and arch of `self` but another key id
// (records of `self` itself are the run's own history: --resume and store seeds). This kernel on
// other GPUs is not among them: it trains the transfer's model (search/transfer.h), which was
// measured to lead better than the same records as samples (docs/search-notes.md). Failed
// candidates are samples of throughput 0; records whose config does not parse are skipped.
// Features of each record's workload come from `features(its key)` (the session's feature
// factory: the space's knob layout plus, on the host, the derived host features of that key).
using FeaturesForKey = std::function<std::unique_ptr<costmodel::FeatureExtractor>(const cache::HardKey&)>;
WarmStart warmStartSamples(const std::vector<cache::Record>& records, const cache::HardKey& self,
                           const FeaturesForKey& features, const WarmStartSettings& s);
// One workload's share of a warm start: its records best first, then, beyond `cap`, its best
// quarter plus a seeded random draw of the rest (the region to aim at and what to avoid).
std::vector<const cache::Record*> warmStartDraw(std::vector<const cache::Record*> recs, size_t cap, uint64_t seed);
// Throughput of a record as the cost model sees it (failures 0).
double recordThroughput(const cache::Record& r);

// The host's factory: `space`'s knob features plus the derived host features of the key's
// workload on `t`.
FeaturesForKey hostFeaturesForKeys(const ir::Space& space, const TargetDesc& t);

}  // namespace tessera::search
