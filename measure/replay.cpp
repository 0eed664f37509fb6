// Owns replay tables built from records and the replay measurer.
#include "measure/replay.h"

#include <algorithm>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "measure/records.h"

namespace tessera::measure {

double ReplayTable::bestThroughput() const {
  double best = 0;
  for (const auto& r : results)
    if (r.ok()) best = std::max(best, r.throughput);
  return best;
}

size_t ReplayTable::countAtLeast(double fraction) const {
  double bar = fraction * bestThroughput();
  size_t n = 0;
  for (const auto& r : results)
    if (r.ok() && r.throughput >= bar) ++n;
  return n;
}

namespace {

class TableMeasurer : public ReplayMeasurer {
 public:
  explicit TableMeasurer(const ReplayTable& t) {
    for (const auto& r : t.results) byKey_.emplace(configKey(r.config), r);
  }
  Expected<std::vector<TrialResult>> measure(const std::vector<ir::Config>& batch) override {
    std::vector<TrialResult> out;
    out.reserve(batch.size());
    for (const auto& c : batch) out.push_back(lookup(c));
    return out;
  }
  // A table holds one number per config: re-measuring returns it again (rounds only count).
  Expected<std::vector<TrialResult>> remeasure(const std::vector<ir::Config>& configs, int rounds) override {
    for (int r = 1; r < rounds; ++r) (void)measure(configs);
    return measure(configs);
  }
  size_t lookups() const override { return lookups_; }

 private:
  TrialResult lookup(const ir::Config& c) {
    ++lookups_;
    auto it = byKey_.find(configKey(c));
    if (it != byKey_.end()) return it->second;
    TrialResult r;
    r.config = c;
    r.status = TrialStatus::InvalidConfig;
    r.message = "config was not recorded (excluded by the recorded space)";
    return r;
  }
  std::unordered_map<std::string, TrialResult> byKey_;
  size_t lookups_ = 0;
};


// Prefers ok over failures, then the lower median (the store's "better" order).
bool betterResult(const TrialResult& a, const TrialResult& b) {
  if (a.ok() != b.ok()) return a.ok();
  return a.ok() && a.samples.median_us < b.samples.median_us;
}

}  // namespace

std::unique_ptr<ReplayMeasurer> makeReplayMeasurer(const ReplayTable& table) {
  return std::make_unique<TableMeasurer>(table);
}

std::vector<std::vector<cache::Record>> groupByKey(const std::vector<cache::Record>& records) {
  std::vector<std::vector<cache::Record>> out;
  std::unordered_map<std::string, size_t> index;
  for (const auto& r : records) {
    std::string id = r.key_id.empty() ? cache::keyIdOf(r.key) : r.key_id;
    auto [it, fresh] = index.emplace(id, out.size());
    if (fresh) out.emplace_back();
    out[it->second].push_back(r);
  }
  return out;
}

Expected<ReplayTable> tableFromRecords(const std::string& name, const std::vector<cache::Record>& records) {
  if (records.empty()) return makeError(ErrorCode::InvalidArgument, "replay table " + name + ": no records");
  const std::string keyId = cache::keyIdOf(records.front().key);
  std::vector<TrialResult> results;
  std::unordered_map<std::string, size_t> index;
  for (const auto& rec : records) {
    if (cache::keyIdOf(rec.key) != keyId)
      return makeError(ErrorCode::InvalidArgument, "replay table " + name + ": records of more than one key");
    auto status = trialStatusOf(rec.status);
    if (!status) continue;
    TESSERA_ASSIGN(ir::Config cfg, ir::Config::fromJson(rec.config));
    TrialResult r;
    r.config = std::move(cfg);
    r.status = *status;
    if (r.ok()) {
      r.samples = SampleSummary{rec.n, rec.median_us, rec.p20_us, rec.p80_us, rec.p20_us};
      r.throughput = rec.median_us > 0 ? 1e6 / rec.median_us : 0;
      r.gflops = rec.gflops;
      r.gbps = rec.gbps;
      r.peakFraction = rec.peak_fraction;
    }
    r.maxAbsErr = rec.max_abs_err;
    r.maxRelErr = rec.max_rel_err;
    auto [it, fresh] = index.emplace(configKey(r.config), results.size());
    if (fresh) results.push_back(std::move(r));
    else if (betterResult(r, results[it->second])) results[it->second] = std::move(r);
  }
  if (results.empty()) return makeError(ErrorCode::InvalidArgument, "replay table " + name + ": no measurements");

  // Knob domains: the values that occur, ints ascending, strings in text order.
  std::map<std::string, std::set<int64_t>> ints;
  std::map<std::string, std::set<std::string>> strs;
  for (const auto& r : results)
    for (const auto& [k, v] : r.config.values) {
      if (const auto* i = std::get_if<int64_t>(&v)) ints[k].insert(*i);
      else strs[k].insert(std::get<std::string>(v));
    }
  ReplayTable t;
  t.name = name;
  t.key = records.front().key;
  t.space.family = records.front().key.family;
  const ir::Config& first = results.front().config;
  for (const auto& [k, vals] : ints) {
    if (strs.count(k)) return makeError(ErrorCode::InvalidArgument, "replay table " + name + ": knob " + k + " mixes types");
    t.space.knobs.push_back({k, std::vector<ir::KnobValue>(vals.begin(), vals.end()), first.values.count(k) ? first.values.at(k) : ir::KnobValue(*vals.begin()), "recorded"});
  }
  for (const auto& [k, vals] : strs)
    t.space.knobs.push_back({k, std::vector<ir::KnobValue>(vals.begin(), vals.end()), first.values.count(k) ? first.values.at(k) : ir::KnobValue(*vals.begin()), "recorded"});
  for (const auto& r : results)
    if (r.config.values.size() != t.space.knobs.size())
      return makeError(ErrorCode::InvalidArgument, "replay table " + name + ": configs with different knobs (" +
                                                       r.config.str() + ")");
  auto members = std::make_shared<std::vector<ir::Config>>();
  auto keys = std::make_shared<std::unordered_set<std::string>>();
  for (const auto& r : results) {
    members->push_back(r.config);
    keys->insert(configKey(r.config));
  }
  t.space.members = members;
  t.space.constraint = [keys](const ir::Config& c) -> std::optional<std::string> {
    if (keys->count(configKey(c))) return std::nullopt;
    return std::string("config was not recorded");
  };
  t.results = std::move(results);
  return t;
}

}  // namespace tessera::measure
