// Owns the verdict of timing_load.h: the control around re-measurements and the busy run's warning.
#include "search/timing_load.h"
#include "support/si_format.h"

#include <algorithm>
#include <cstdio>

namespace tessera::search {

using measure::TrialResult;

double spreadOf(const TrialResult& r) { return r.samples.p20_us > 0 ? r.samples.p80_us / r.samples.p20_us : 0; }

Expected<std::vector<TrialResult>> LoadWatchingMeasurer::remeasure(const std::vector<ir::Config>& configs, int rounds) {
  int threads = 1;
  for (const auto& c : configs) threads = std::max(threads, c.hostThreads());
  const double before = control_(threads);
  auto out = inner_.remeasure(configs, rounds);
  last_ = std::max(before, control_(threads));
  return out;
}

namespace {

std::string loadText(const LoadReading& r) {
  if (r.loadavg1 < 0) return "?";
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", r.loadavg1);
  return b;
}

}  // namespace

std::string TimingLoad::warning() const {
  char b[512];
  std::string steal = after.stealPct >= 0 ? ", steal " + std::to_string(int(after.stealPct + 0.5)) + " %" : "";
  std::snprintf(b, sizeof b,
                "timing under load: the winner's p80/p20 is %s and the control found its cores %s slower than "
                "free (load %s before, %s after on %s%s), after %d interleaved re-measurement%s; its time is "
                "uncertain and it is stored without the re-measured mark, never over a winner measured quietly",
                formatRatio(spread).c_str(), formatRatio(control).c_str(), loadText(before).c_str(), loadText(after).c_str(), countOf(after.cores, "core").c_str(), steal.c_str(),
                remeasures, remeasures == 1 ? "" : "s");
  return b;
}

}  // namespace tessera::search
