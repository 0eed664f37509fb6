// Owns warm-starting the cost model from stored records of other workloads (issue 3 item 3): the
// store of a team that tuned GEMM at other shapes already says which register tiles, cache
// blocks and schedules this CPU likes. Each stored workload becomes its own ranking group, with
// features computed from its key (costmodel::WorkloadDesc), so the model starts the search
// knowing those landscapes and learns this one on top of them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cache_service/record.h"
#include "costmodel/cost_model.h"
#include "costmodel/features.h"
#include "ir/schedule.h"
#include "targets/target_desc.h"

namespace tessera::search {

struct WarmStartSettings {
  int maxWorkloads = 8;             // the nearest ones (shape, then dtype and layout) first; 0: off
  int maxRecordsPerWorkload = 256;  // its best quarter plus a seeded random draw of the rest
  uint64_t seed = 0;
};

struct WarmStart {
  std::vector<costmodel::Sample> samples;  // groups 1..workloads (0 is left to the run itself)
  int workloads = 0;
};

// Whether records of `other` may warm-start a search of `self`: another workload of the same
// family on the same target and arch.
bool warmStartSibling(const cache::HardKey& self, const cache::HardKey& other);

// Samples from `records` whose key has the family, target and arch of `self` but another key id
// (records of `self` itself are the run's own history: --resume and store seeds). Failed
// candidates are samples of throughput 0; records whose config does not parse are skipped.
// Features of each record's workload come from `features(its key)` (the session's feature
// factory: the space's knob layout plus, on the host, the derived host features of that key).
using FeaturesForKey = std::function<std::unique_ptr<costmodel::FeatureExtractor>(const cache::HardKey&)>;
WarmStart warmStartSamples(const std::vector<cache::Record>& records, const cache::HardKey& self,
                           const FeaturesForKey& features, const WarmStartSettings& s);
// The host's factory: `space`'s knob features plus the derived host features of the key's
// workload on `t`.
FeaturesForKey hostFeaturesForKeys(const ir::Space& space, const TargetDesc& t);

}  // namespace tessera::search
