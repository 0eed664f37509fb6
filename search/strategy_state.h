// Owns the per-run state every strategy keeps (style.md 3: settings are separate): the random
// generator, the keys of every config proposed or observed (so nothing is proposed twice), the
// measured results, and drawing fresh random legal configs until the space runs dry.
#pragma once

#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "ir/schedule.h"
#include "search/space_ops.h"
#include "measure/trial.h"

namespace tessera::search {

class SearchState {
 public:
  SearchState(const ir::Space& space, uint64_t seed);

  Rng& rng() { return rng_; }
  const ir::Space& space() const { return space_; }

  bool seen(const ir::Config& c) const { return seen_.count(measure::configKey(c)) != 0; }
  // Marks `c` as proposed; false when it was proposed or observed before.
  bool claim(const ir::Config& c) { return seen_.insert(measure::configKey(c)).second; }
  void observe(const std::vector<measure::TrialResult>& results);

  // Measured results, ok or not, in observation order.
  const std::vector<measure::TrialResult>& measured() const { return measured_; }
  // The `n` best ok results, best first.
  std::vector<const measure::TrialResult*> best(size_t n) const;

  // Up to `n` uniformly drawn legal configs never seen before, claimed. When draws keep hitting
  // seen configs, switches to the enumerated remainder; `exhausted()` once nothing is left.
  std::vector<ir::Config> fresh(size_t n);
  bool exhausted() const { return exhausted_; }

 private:
  bool refillRemainder();

  ir::Space space_;
  Rng rng_;
  std::unordered_set<std::string> seen_;
  std::vector<measure::TrialResult> measured_;
  std::optional<size_t> legalCount_;       // known for replayed and enumerable spaces
  std::vector<ir::Config> remainder_;      // unseen legal configs, shuffled (once draws collide)
  bool usingRemainder_ = false;
  bool exhausted_ = false;
};

}  // namespace tessera::search
