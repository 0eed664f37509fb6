// Owns the selection of stored records that warm-start the cost model and their conversion to
// grouped training samples.
#include "search/warm_start.h"

#include <algorithm>
#include <map>
#include <random>

#include "measure/records.h"

namespace tessera::search {

using measure::trialStatusOf;
using measure::workloadOf;
namespace {

// How far another workload is from `self`: shape distance (sum of |log ratios|), plus a penalty
// for another rank, dtype or layout; the nearest landscapes transfer best.
double workloadDistance(const cache::HardKey& self, const cache::HardKey& other) {
  double d = cache::shapeDistance(self.shape, other.shape).value_or(20.0);
  if (self.dtype != other.dtype) d += 4;
  if (self.layout != other.layout) d += 1;
  return d;
}

// Records measured on the same kind of machine for the same kernel family: their landscapes transfer.
bool sameFamilyAndMachine(const cache::HardKey& self, const cache::HardKey& other) {
  return other.family == self.family && other.target == self.target && other.arch == self.arch;
}

}  // namespace

bool warmStartSibling(const cache::HardKey& self, const cache::HardKey& other) {
  return sameFamilyAndMachine(self, other) && cache::keyIdOf(other) != cache::keyIdOf(self);
}

double recordThroughput(const cache::Record& r) {
  return r.status == cache::RecordStatus::Ok && r.median_us > 0 ? 1e6 / r.median_us : 0.0;
}

std::vector<const cache::Record*> warmStartDraw(std::vector<const cache::Record*> recs, size_t cap, uint64_t seed) {
  std::stable_sort(recs.begin(), recs.end(),
                   [](const cache::Record* a, const cache::Record* b) { return recordThroughput(*a) > recordThroughput(*b); });
  if (recs.size() > cap) {
    std::mt19937_64 rng(seed);
    const size_t top = cap / 4;
    std::shuffle(recs.begin() + std::ptrdiff_t(top), recs.end(), rng);
    recs.resize(cap);
  }
  return recs;
}

bool transferSource(const cache::HardKey& self, const cache::HardKey& other) {
  const bool gpus = self.target != "host" && other.target != "host";
  const bool sameKernel = other.family == self.family && other.workload == self.workload && other.shape == self.shape &&
                          other.dtype == self.dtype && other.layout == self.layout;
  const bool otherGpu = other.target != self.target || other.arch != self.arch || other.units != self.units;
  return gpus && sameKernel && otherGpu;
}

FeaturesForKey hostFeaturesForKeys(const ir::Space& space, const TargetDesc& t) {
  return [space, t](const cache::HardKey& key) { return costmodel::makeHostFeatures(workloadOf(key), space, t); };
}

WarmStart warmStartSamples(const std::vector<cache::Record>& records, const cache::HardKey& self,
                           const FeaturesForKey& featuresFor, const WarmStartSettings& s) {
  WarmStart out;
  if (s.maxWorkloads <= 0 || s.maxRecordsPerWorkload <= 0) return out;
  const std::string selfId = cache::keyIdOf(self);
  // Other workloads of this family on this target, by key id (std::map: a deterministic order).
  std::map<std::string, std::vector<const cache::Record*>> byKey;
  for (const auto& r : records) {
    const bool sibling = s.siblings && sameFamilyAndMachine(self, r.key);
    if (!sibling) continue;
    std::string id = r.key_id.empty() ? cache::keyIdOf(r.key) : r.key_id;
    if (id == selfId || !trialStatusOf(r.status)) continue;  // own history; estimates are no measurements
    byKey[id].push_back(&r);
  }
  // The other shapes, nearest first.
  std::vector<std::pair<double, std::string>> nearest;
  for (const auto& [id, recs] : byKey) nearest.push_back({workloadDistance(self, recs.front()->key), id});
  std::sort(nearest.begin(), nearest.end());
  if (nearest.size() > size_t(s.maxWorkloads)) nearest.resize(size_t(s.maxWorkloads));

  int group = 0;
  for (const auto& [dist, id] : nearest) {
    auto throughput = [](const cache::Record* r) { return recordThroughput(*r); };
    std::vector<const cache::Record*> recs = warmStartDraw(byKey[id], size_t(s.maxRecordsPerWorkload), s.seed + uint64_t(group));
    auto features = featuresFor(recs.front()->key);
    std::vector<costmodel::Sample> samples;
    for (const auto* r : recs) {
      auto cfg = ir::Config::fromJson(r->config);
      if (!cfg.ok()) continue;
      samples.push_back({features->extract(*cfg), throughput(r), group + 1});
    }
    bool anyOk = std::any_of(samples.begin(), samples.end(), [](const costmodel::Sample& x) { return x.throughput > 0; });
    if (!anyOk) continue;  // nothing to rank against
    ++group;
    const cache::HardKey& k = recs.front()->key;
    out.from.push_back(k.family + " " + cache::formatShape(k.shape) + " " + k.dtype + ": " + std::to_string(samples.size()) +
                       " records");
    out.samples.insert(out.samples.end(), samples.begin(), samples.end());
  }
  out.workloads = group;
  return out;
}

}  // namespace tessera::search
