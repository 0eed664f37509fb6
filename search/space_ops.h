// Owns the operations strategies apply to a schedule space: uniform sampling of legal configs,
// mutation and crossover that stay legal, and exhaustive enumeration of small spaces (a config's
// key for deduplication, configKey, is measure/trial.h's).
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ir/schedule.h"
#include "measure/trial.h"

namespace tessera::search {

using Rng = std::mt19937_64;

// Uniform over the legal configs (rejection sampling on the knob product; falls back to the
// enumeration when the legal fraction is tiny). nullopt when nothing legal was found.
std::optional<ir::Config> sampleLegal(const ir::Space& s, Rng& rng);
// Changes each knob with probability `p` (at least one knob) to another value of its domain;
// retries until legal. nullopt when no legal neighbour was found.
std::optional<ir::Config> mutate(const ir::Space& s, const ir::Config& c, double p, Rng& rng);
// Uniform crossover of two legal parents; retries until legal.
std::optional<ir::Config> crossover(const ir::Space& s, const ir::Config& a, const ir::Config& b, Rng& rng);
// Uniform over the knob product, legal or not (what the legal fraction is estimated from).
ir::Config sampleProduct(const ir::Space& s, Rng& rng);
// Number of configs in the knob product (before the constraint), saturating.
double productSize(const ir::Space& s);
// All legal configs when the product has at most `limit` members; nullopt otherwise.
std::optional<std::vector<ir::Config>> enumerateLegal(const ir::Space& s, size_t limit = 200000);

}  // namespace tessera::search
