// Owns the search-efficiency replay's tables and its reports between the replays: random search's
// exact trials on a table, the loading of the bundled tables (Kernel Tuner files, Tessera's host and
// device tables, the synthetic ones) and of the files named on the command line, and the
// development/held-out split's report (bench/search_efficiency.cpp runs the replays).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "bench/search_efficiency.h"
#include "bench/synthetic_tables.h"
#include "measure/records.h"
#include "session/tune_session.h"

namespace tessera::bench::efficiency {

namespace fs = std::filesystem;

RandomExact randomExact(size_t N, size_t k) {
  RandomExact r;
  r.mean = double(N + 1) / double(k + 1);
  double survive = 1;  // P(T > t)
  bool haveMedian = false;
  for (size_t t = 1; t <= N; ++t) {
    survive *= t - 1 + k <= N ? double(N - k - (t - 1)) / double(N - (t - 1)) : 0.0;
    if (!haveMedian && 1 - survive >= 0.5) {
      r.median = double(t);
      haveMedian = true;
    }
    if (1 - survive >= 0.9) {
      r.p90 = double(t);
      break;
    }
  }
  return r;
}

RandomExact coldBound(size_t N, size_t k, size_t batch) {
  RandomExact r = randomExact(N, k);
  r.median = std::min(r.median, double(batch + 1));
  r.p90 = std::min(r.p90, double(batch + 1));
  return r;
}

std::vector<search::TableExclusion> gExclusions;

std::vector<Table> loadTables(const std::string& dataDir, const std::vector<std::string>& extra,
                              const std::vector<std::string>& only, bool synthetic) {
  std::vector<Table> tables;
  auto add = [&](const std::string& path) {
    if (!fs::exists(path)) {
      std::printf("note: %s is missing: skipped\n", path.c_str());
      return;
    }
    std::string base = fs::path(path).filename().string();
    base = base.substr(0, base.find('.'));
    bool kernelTuner = path.find(".jsonl") == std::string::npos;
    auto recs = kernelTuner ? search::importKernelTuner(path, base.find("MI250X") != std::string::npos ? "MI250X" : "")
                            : search::readRecordFile(path);
    if (!recs.ok()) {
      std::printf("note: %s: %s: skipped\n", path.c_str(), recs.error().message.c_str());
      return;
    }
    for (const auto& x : gExclusions)
      if (base.find(x.table) != std::string::npos)
        std::printf("note: %s: %zu measured configs set aside (--exclude)\n", base.c_str(), search::setAside(*recs, x.match));
    auto groups = measure::groupByKey(*recs);
    for (size_t g = 0; g < groups.size(); ++g) {
      const cache::HardKey& k = groups[g].front().key;
      std::string name = groups.size() == 1 ? base
                                            : base + "_" + k.family + "_" + cache::formatShape(k.shape) +
                                                  (k.layout.empty() || k.layout == "row" ? "" : "_" + k.layout);
      auto t = measure::tableFromRecords(name, groups[g]);
      if (!t.ok()) {
        std::printf("note: %s: %s: skipped\n", path.c_str(), t.error().message.c_str());
        continue;
      }
      Table tab{std::move(*t), groups[g], kernelTuner ? bench::kernelTunerModel(base) : std::nullopt};
      if (!kernelTuner && k.target != "host") {
        tab.tesseraGpu = true;
        tab.analytic = session::recordsPrior(groups[g]);
      }
      tables.push_back(std::move(tab));
    }
  };
  if (!only.empty()) {
    for (const auto& f : only) add(f);
    return tables;
  }
  // Every bundled Kernel Tuner file: the four the aims name, then the same kernels on six more
  // GPUs (bench/data/README.md; which of them settings were chosen on: docs/search-notes.md).
  for (const auto& f : bench::kernelTunerModelNames()) add(dataDir + "/" + f + ".json.gz");
  std::vector<std::string> host;
  if (fs::is_directory(dataDir))
    for (const auto& e : fs::directory_iterator(dataDir)) {
      std::string n = e.path().filename().string();
      // host_*: measured on the host; device_*: Tessera's GPU kernels measured on a lent GPU
      // (bench/gpu/device_tables.sh).
      if ((n.rfind("host_", 0) == 0 || n.rfind("device_", 0) == 0) && n.find(".jsonl") != std::string::npos)
        host.push_back(e.path().string());
    }
  std::sort(host.begin(), host.end());
  if (host.empty()) std::printf("note: no host tables (%s/host_*.jsonl.gz) yet: Kernel Tuner files only\n", dataDir.c_str());
  for (const auto& h : host) add(h);
  // Synthetic landscapes (bench/synthetic_tables.h): a needle, plateaus, many categorical knobs,
  // deceptive pairs, a plateau on one value of a three-valued knob.
  if (synthetic)
    for (const auto& kind : bench::syntheticKinds()) {
      auto recs = bench::syntheticTable(kind, 1);
      auto t = measure::tableFromRecords("synthetic_" + kind, recs);
      if (t.ok()) tables.push_back({std::move(*t), std::move(recs), std::nullopt});
    }
  for (const auto& x : extra) add(x);
  return tables;
}

double geomean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += std::log(x);
  return v.empty() ? 0 : std::exp(s / double(v.size()));
}

void printSplit(const BenchOptions& o, const Column& cold, const Column& prior, const Column& inverted) {
  auto isDev = [&](const std::string& k) { return std::find(o.dev.begin(), o.dev.end(), k) != o.dev.end(); };
  std::vector<std::string> kernels;
  for (const auto& k : cold.kernel)
    if (std::find(kernels.begin(), kernels.end(), k) == kernels.end()) kernels.push_back(k);
  auto geo = [](const Column& c, const std::function<bool(const std::string&)>& in, size_t* n) {
    std::vector<double> m;
    for (size_t i = 0; i < c.ratioMed.size(); ++i)
      if (in(c.kernel[i])) m.push_back(c.ratioMed[i]);
    *n = m.size();
    return geomean(m);
  };
  auto cell = [&](const Column& c, const std::function<bool(const std::string&)>& in) {
    size_t n = 0;
    const double g = geo(c, in, &n);
    char b[32];
    if (n) std::snprintf(b, sizeof b, " %9.1fx", g);
    else std::snprintf(b, sizeof b, " %10s", "-");
    return std::string(b);
  };
  std::string devList;
  for (const auto& k : o.dev) devList += (devList.empty() ? "" : ", ") + k;
  std::printf("\ndevelopment / held-out split: settings are chosen on the development kernels (%s; --dev), the rest\n"
              "are held out; per kernel and per split, geomean of random / strategy at the median\n", devList.c_str());
  std::printf("  %-24s %6s %10s %10s %10s\n", "kernel", "tables", "evo", "evo+prior", "evo+inv");
  auto line = [&](const std::string& name, const std::function<bool(const std::string&)>& in) {
    size_t n = 0;
    geo(cold, in, &n);
    std::printf("  %-24s %6zu%s%s%s\n", name.c_str(), n, cell(cold, in).c_str(), cell(prior, in).c_str(), cell(inverted, in).c_str());
  };
  for (const auto& k : kernels) line(k + (isDev(k) ? " (dev)" : ""), [&](const std::string& x) { return x == k; });
  line("development", isDev);
  line("held-out", [&](const std::string& x) { return !isDev(x); });
  // The bars: 5x at the median wherever the cold cap allows it (at least 5x), never worse than
  // random at p90 anywhere; geomeans 12x (development) and 10x (held-out).
  for (bool dev : {true, false}) {
    double worstMed = 1e30, worstP90 = 1e30;
    std::string wm, wp;
    for (size_t i = 0; i < cold.ratioMed.size(); ++i) {
      if (isDev(cold.kernel[i]) != dev) continue;
      if (cold.cap[i] >= 5 && cold.ratioMed[i] < worstMed) {
        worstMed = cold.ratioMed[i];
        wm = cold.table[i];
      }
      if (cold.ratioP90[i] < worstP90) {
        worstP90 = cold.ratioP90[i];
        wp = cold.table[i];
      }
    }
    size_t n = 0;
    const double g = geo(cold, [&](const std::string& x) { return isDev(x) == dev; }, &n);
    if (!n) continue;
    const char* split = dev ? "development" : "held-out";
    std::printf("aim (issue 49), %s, evo+xgboost cold: >= 5x at the median where the cold cap allows it (worst %.1fx, %s): %s; "
                "never worse than random at p90 (worst %.2fx, %s): %s; geomean >= %dx (%.1fx): %s\n",
                split, worstMed, wm.c_str(), worstMed >= 5 ? "met" : "NOT met", worstP90, wp.c_str(),
                worstP90 >= 1 ? "met" : "NOT met", dev ? 12 : 10, g, g >= (dev ? 12 : 10) ? "met" : "NOT met");
  }
}

}  // namespace tessera::bench::efficiency
