// Owns honest timing under load for a tune measured on this machine: the machine's load read before
// and after (support/load.h), the control read around each interleaved re-measurement of the
// finalists, and the verdict: busy when the winner's p80/p20 exceeds kNoisySpread or the control
// found the winner's cores shared. A busy verdict is re-measured once; still busy, the run warns in
// one line and its winner is stored without the re-measured mark, so it never outranks a winner
// measured quietly (store/store_core.cpp: best-wins by rank, then median).
#pragma once

#include <functional>
#include <string>

#include "measure/measurer.h"
#include "support/load.h"

namespace tessera::search {

inline constexpr double kNoisySpread = 1.5;  // p80/p20 of the winner above this: the samples disagree

struct TimingLoad {
  bool watched = false;  // measured on this machine with a control (a host tune)
  LoadReading before, after;
  double control = 1;   // the control's largest slowdown around the last re-measurement
  double spread = 0;    // the winner's p80/p20 in it
  int remeasures = 0;   // interleaved re-measurements judged (a busy first one is repeated once)
  bool busy = false;    // still busy after the repeat: the winner's time is uncertain
  bool isBusy() const { return control > kQuietSlowdown || spread > kNoisySpread; }
  // The one-line warning of a busy run (the figures, and what was done about it).
  std::string warning() const;
};

// p80/p20 of a result's samples (0 when unknown).
double spreadOf(const measure::TrialResult& r);

// A measurer whose remeasure() is bracketed by the control at the configs' largest thread count;
// measure() passes through (single candidates are judged by the search, not the verdict).
class LoadWatchingMeasurer : public measure::Measurer {
 public:
  LoadWatchingMeasurer(measure::Measurer& inner, std::function<double(int threads)> control)
      : inner_(inner), control_(std::move(control)) {}
  Expected<std::vector<measure::TrialResult>> measure(const std::vector<ir::Config>& batch) override {
    return inner_.measure(batch);
  }
  Expected<std::vector<measure::TrialResult>> remeasure(const std::vector<ir::Config>& configs, int rounds) override;
  double lastControl() const { return last_; }

 private:
  measure::Measurer& inner_;
  std::function<double(int)> control_;
  double last_ = 1;
};

}  // namespace tessera::search
