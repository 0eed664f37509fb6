// Tests the GPU spaces' defaults against the device tables (bench/data/device_*.jsonl.gz, Tessera's
// own kernels measured on an H200 and an H100): the generated table (search/measured_defaults_table.inc)
// is what the device tables give now (derived here again from the files, by the rule
// bench/gpu/defaults_table.py states); on every measured key the space's default is a config the
// device measured there, at most 5 % slower than the best one measured; where no table reaches (the
// sm_90a GEMM at 1024^3-class shapes) the default is the analytic model's pick and fills the SMs.
// Negative controls: a deliberately slower default (a measured config > 5 % off, put in the table the
// spaces read) fails the same check; the hand rule's 128x256 tiles at 1024^3 (32 blocks on 132 SMs)
// fail the fill check.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "ir/builders.h"
#include "ir/text.h"
#include "measure/estimate.h"
#include "measure/records.h"
#include "measure/replay.h"
#include "search/import.h"
#include "search/measured_defaults.h"
#include "search/space.h"
#include "targets/gpu_skus.h"

using namespace tessera;

namespace {

// One measured key of one device table: what the device ran and how long each config took.
struct Group {
  std::string file, product, kernelIr;
  cache::HardKey key;
  std::map<std::string, double> us;  // config (Config::str) -> best median of its ok records
  double best() const {
    double b = 1e300;
    for (const auto& [c, t] : us) b = std::min(b, t);
    return b;
  }
};

std::vector<Group> load() {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(TESSERA_BENCH_DATA_DIR)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("device_", 0) == 0 && n.ends_with(".jsonl.gz")) files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  EXPECT_GE(files.size(), 2u);
  std::vector<Group> out;
  for (const auto& f : files) {
    auto recs = search::readRecordFile(f);
    EXPECT_TRUE(recs.ok()) << f;
    if (!recs.ok()) continue;
    for (const auto& rs : measure::groupByKey(*recs)) {
      Group g;
      g.file = std::filesystem::path(f).filename().string();
      g.key = rs.front().key;
      g.product = rs.front().provenance.cpu_model;
      for (const auto& r : rs) {
        if (g.kernelIr.empty()) g.kernelIr = r.kernel_ir;
        if (r.status != cache::RecordStatus::Ok) continue;
        auto c = ir::Config::fromJson(r.config);
        if (!c.ok()) continue;
        auto [it, fresh] = g.us.emplace(c->str(), r.median_us);
        if (!fresh) it->second = std::min(it->second, r.median_us);
      }
      out.push_back(std::move(g));
    }
  }
  return out;
}

std::string classOf(const Group& g) {
  return g.key.family + "|" + g.key.target + "|" + g.key.dtype + "|" + search::sizeClassOf(g.key.layout, g.key.shape);
}

// "" when `cfg` was measured on `g`'s key and is at most 5 % slower than the best config measured
// there; else why not.
// `cfg` as the device table writes it: without the knobs its configs lack (measured before those
// knobs existed; the space's default fills them in, as applyMeasuredDefault does).
std::string measuredText(const Group& g, const ir::Config& cfg) {
  if (g.us.empty()) return cfg.str();
  auto any = ir::Config::parseAssignments(g.us.begin()->first);
  if (!any.ok()) return cfg.str();
  ir::Config out;
  for (const auto& [name, v] : cfg.values)
    if (any->has(name)) out.set(name, v);
  return out.str();
}

std::string slowerThanMeasured(const Group& g, const ir::Config& cfg) {
  auto it = g.us.find(measuredText(g, cfg));
  if (it == g.us.end()) return g.file + " " + classOf(g) + ": the default " + cfg.str() + " was not measured there";
  if (it->second > 1.05 * g.best())
    return g.file + " " + classOf(g) + ": the default " + cfg.str() + " took " + std::to_string(it->second) +
           " us, the best measured config " + std::to_string(g.best()) + " us";
  return "";
}

// The kernel and the measuring product's target of a group.
std::pair<ir::Kernel, TargetDesc> problemOf(const Group& g) {
  auto k = ir::parseKernel(g.kernelIr);
  EXPECT_TRUE(k.ok()) << g.file << " " << classOf(g);
  auto t = getTarget(g.key.target);
  EXPECT_TRUE(t.ok()) << g.key.target;
  TargetDesc td = *t;
  if (auto sku = gpuForDeviceName(g.product))
    if (auto own = targetOfGpu(sku->name, td); own.ok()) td = *own;
  return {*k, td};
}

ir::Kernel gemm(int64_t m, int64_t n, int64_t k, ir::ScalarType t) {
  ir::GemmSpec g;
  g.m = m, g.n = n, g.k = k, g.dtype = t;
  auto r = ir::buildGemm(g);
  EXPECT_TRUE(r.ok());
  return *r;
}

}  // namespace

// The generated table holds, per class the device tables measure, the config with the lowest worst
// ratio to each measured key's best among the configs measured on all of them (ties: the lower sum
// of ratios, then the config text), and nothing else: a device table added or re-measured without
// running bench/gpu/defaults_table.py fails here.
TEST(MeasuredDefaults, TheTableIsWhatTheDeviceTablesGive) {
  std::map<std::string, std::vector<const Group*>> classes;
  const auto groups = load();
  for (const auto& g : groups) classes[classOf(g)].push_back(&g);
  std::map<std::string, std::pair<std::string, double>> derived;
  for (const auto& [cls, gs] : classes) {
    std::tuple<double, double, std::string> best{1e300, 1e300, ""};
    for (const auto& [c, t] : gs.front()->us) {
      double worst = 0, sum = 0;
      bool everywhere = true;
      for (const Group* g : gs) {
        auto it = g->us.find(c);
        if (it == g->us.end()) {
          everywhere = false;
          break;
        }
        worst = std::max(worst, it->second / g->best());
        sum += it->second / g->best();
      }
      if (everywhere) best = std::min(best, std::tuple{worst, sum, c});
    }
    derived[cls] = {std::get<2>(best), std::get<0>(best)};
  }
  std::map<std::string, std::pair<std::string, double>> table;
  for (const auto& row : search::measuredDefaults())
    table[std::string(row.family) + "|" + row.target + "|" + row.dtype + "|" + row.sizeClass] = {row.config, row.worstRatio};
  ASSERT_EQ(table.size(), derived.size()) << "re-run bench/gpu/defaults_table.py";
  for (const auto& [cls, d] : derived) {
    ASSERT_TRUE(table.count(cls)) << cls << ": not in the table; re-run bench/gpu/defaults_table.py";
    EXPECT_EQ(table[cls].first, d.first) << cls << ": re-run bench/gpu/defaults_table.py";
    EXPECT_NEAR(table[cls].second, d.second, 1e-3) << cls;
  }
}

// On every key a device measured, the space's default is the table's config, measured there and at
// most 5 % slower than the best config measured.
TEST(MeasuredDefaults, EveryMeasuredDefaultIsWithinFivePercentOfTheBest) {
  const auto groups = load();
  ASSERT_GE(groups.size(), 8u);
  for (const auto& g : groups) {
    auto [k, t] = problemOf(g);
    EXPECT_TRUE(search::measuredDefault(k, t).has_value()) << g.file << " " << classOf(g) << ": no row covers a measured key";
    auto s = search::makeSpace(k, t);
    ASSERT_TRUE(s.ok()) << s.error().str();
    EXPECT_EQ(slowerThanMeasured(g, s->defaults()), "");
  }
}

// The control: a default slower than another measured config by more than 5 % (the slowest config
// measured on the key, placed in the table the space reads) is caught by the same check, while the
// best measured config (a legitimate neighbour) passes it.
TEST(MeasuredDefaults, ASlowerDefaultIsCaught) {
  const auto groups = load();
  int caught = 0, spread = 0;
  for (const auto& g : groups) {
    auto [k, t] = problemOf(g);
    std::string slowest, fastest;
    double worst = 0, best = 1e300;
    auto space = search::makeSpace(k, t);
    ASSERT_TRUE(space.ok());
    for (const auto& [c, us] : g.us) {
      auto parsed = ir::Config::parseAssignments(c);
      ASSERT_TRUE(parsed.ok());
      auto cfg = space->complete(*parsed);  // knobs added since it was measured: their defaults
      if (!cfg.ok() || space->check(*cfg)) continue;  // not one this space offers now
      if (us > worst) worst = us, slowest = c;
      if (us < best) best = us, fastest = c;
    }
    // A key measured at one config the space offers (or at configs all within 5 %) has no slower
    // default to catch: the controls need a spread.
    if (!(worst > 1.05 * g.best())) continue;
    ++spread;
    const cache::HardKey key = measure::hardKeyFor(k, t);
    const std::string cls = search::sizeClassOf(key.layout, key.shape);
    for (const auto& [cfgText, expectCaught] : {std::pair{slowest, true}, std::pair{fastest, false}}) {
      const search::MeasuredDefault row{key.family.c_str(), key.target.c_str(), key.dtype.c_str(), cls.c_str(),
                                        cfgText.c_str(), 1.0, 1, "control"};
      auto s = search::makeSpace(k, t);
      ASSERT_TRUE(s.ok());
      ASSERT_TRUE(search::applyMeasuredDefault(*s, k, t, std::span(&row, 1))) << cfgText;
      const std::string why = slowerThanMeasured(g, s->defaults());
      EXPECT_EQ(!why.empty(), expectCaught) << classOf(g) << " " << cfgText << ": " << why;
      caught += !why.empty();
    }
  }
  EXPECT_GT(spread, 3);
  EXPECT_EQ(caught, spread);
}

// Size classes round every dimension up to a power of two; a row covers its family, target, dtype
// and class only.
TEST(MeasuredDefaults, ARowCoversItsClassOnly) {
  EXPECT_EQ(search::sizeClassOf("row", {1000, 1000, 1000}), "row 1024x1024x1024");
  EXPECT_EQ(search::sizeClassOf("causal", {1, 16, 16, 4096, 4096, 128}), "causal 1x16x16x4096x4096x128");
  auto sm90a = getTarget("sm_90a");
  auto sm90 = getTarget("sm_90");
  ASSERT_TRUE(sm90a.ok() && sm90.ok());
  EXPECT_TRUE(search::measuredDefault(gemm(4096, 4096, 4096, ir::ScalarType::F16), *sm90a).has_value());
  EXPECT_TRUE(search::measuredDefault(gemm(3000, 4000, 2500, ir::ScalarType::F16), *sm90a).has_value());
  auto sm80 = getTarget("sm_80");
  ASSERT_TRUE(sm80.ok());
  EXPECT_FALSE(search::measuredDefault(gemm(2048, 2048, 2048, ir::ScalarType::BF16), *sm90a).has_value());  // no such key
  EXPECT_FALSE(search::measuredDefault(gemm(4096, 4096, 4096, ir::ScalarType::F16), *sm80).has_value());    // no such target
  EXPECT_FALSE(search::measuredDefault(gemm(512, 512, 512, ir::ScalarType::F16), *sm90a).has_value());      // no such class
}

// Where no table reaches the sm_90a GEMM at 1024^3-class shapes (bf16; f16's classes were
// measured on 2026-11-30 and their configs fill the SMs too), the hand rule's 128x256 tiles would
// launch 32 blocks on an H100's 132 SMs. The default is the analytic model's fastest wgmma config
// of the space and launches at least as many blocks as there are SMs less a wave's 25 %; the hand
// rule's config (the control) fails that and is estimated slower.
TEST(GpuGemmDefaults, TilesFillTheSmsWhereNoTableReaches) {
  auto t = getTarget("sm_90a");
  ASSERT_TRUE(t.ok());
  for (ir::ScalarType dt : {ir::ScalarType::F16, ir::ScalarType::BF16})
    for (auto [m, n, kk] : {std::tuple{1024, 1024, 1024}, {1000, 1000, 1000}, {1024, 1024, 16384}}) {
      ir::Kernel k = gemm(m, n, kk, dt);
      auto s = search::makeSpace(k, *t);
      ASSERT_TRUE(s.ok());
      const ir::Config d = s->defaults();
      ASSERT_EQ(std::get<std::string>(d.values.at("strategy")), "wgmma");
      auto e = measure::estimateKernel(k, d, *t);
      ASSERT_TRUE(e.ok());
      std::printf("%s %dx%dx%d: %s, %lld blocks, %.1f us estimated\n", std::string(ir::typeName(dt)).c_str(), m, n, kk, d.str().c_str(),
                  (long long)e->workload.blocks, e->model.timeUs);
      EXPECT_GE(double(e->workload.blocks), 0.75 * t->units) << d.str();
      ir::Config hand = d;
      for (auto [name, v] : {std::pair{"BM", 128}, {"BN", 256}, {"TM", 64}, {"TN", 256}, {"STAGES", 4}, {"SPLITK", 1}})
        hand.set(name, int64_t(v));
      ASSERT_FALSE(s->check(hand).has_value());
      auto eh = measure::estimateKernel(k, hand, *t);
      ASSERT_TRUE(eh.ok());
      EXPECT_LT(double(eh->workload.blocks), 0.75 * t->units) << "the control fills the SMs: the check means nothing";
      EXPECT_LT(e->model.timeUs, eh->model.timeUs);
    }
}
