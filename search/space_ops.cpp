// Owns the operations strategies apply to a schedule space: uniform legal sampling, legal
// mutation and crossover, enumeration and config keys.
#include "search/space_ops.h"

#include <algorithm>

namespace tessera::search {
namespace {

// Rejection sampling gives up after this many draws and enumerates instead: below ~0.1% legal it
// is cheaper to list the legal set once than to keep drawing.
constexpr int kMaxRejections = 2000;
// Mutation and crossover retry this often before reporting that no legal offspring exists.
constexpr int kMaxRetries = 100;

bool legal(const ir::Space& s, const ir::Config& c) { return !s.check(c).has_value(); }

}  // namespace

ir::Config sampleProduct(const ir::Space& s, Rng& rng) {
  ir::Config c;
  for (const auto& k : s.knobs) {
    std::uniform_int_distribution<size_t> d(0, k.domain.size() - 1);
    c.values[k.name] = k.domain[d(rng)];
  }
  return c;
}

std::optional<ir::Config> sampleLegal(const ir::Space& s, Rng& rng) {
  if (s.members) {
    if (s.members->empty()) return std::nullopt;
    std::uniform_int_distribution<size_t> d(0, s.members->size() - 1);
    return (*s.members)[d(rng)];
  }
  for (const auto& k : s.knobs)
    if (k.domain.empty()) return std::nullopt;
  for (int i = 0; i < kMaxRejections; ++i) {
    ir::Config c = sampleProduct(s, rng);
    if (!s.constraint || !s.constraint(c)) return c;
  }
  auto all = enumerateLegal(s);
  if (!all || all->empty()) return std::nullopt;
  std::uniform_int_distribution<size_t> d(0, all->size() - 1);
  return (*all)[d(rng)];
}

std::optional<ir::Config> mutate(const ir::Space& s, const ir::Config& c, double p, Rng& rng) {
  std::vector<const ir::Knob*> mutable_;
  for (const auto& k : s.knobs)
    if (k.domain.size() > 1) mutable_.push_back(&k);
  if (mutable_.empty()) return std::nullopt;
  std::bernoulli_distribution flip(std::clamp(p, 0.0, 1.0));
  std::uniform_int_distribution<size_t> pickKnob(0, mutable_.size() - 1);
  auto changeKnob = [&](ir::Config& out, const ir::Knob& k) {
    // Another value of the domain, uniformly (never the current one).
    int cur = k.indexOf(out.values[k.name]);
    std::uniform_int_distribution<size_t> d(0, k.domain.size() - (cur >= 0 ? 2 : 1));
    size_t j = d(rng);
    if (cur >= 0 && j >= size_t(cur)) ++j;
    out.values[k.name] = k.domain[j];
  };
  for (int attempt = 0; attempt < kMaxRetries; ++attempt) {
    ir::Config out = c;
    bool changed = false;
    for (const auto* k : mutable_)
      if (flip(rng)) {
        changeKnob(out, *k);
        changed = true;
      }
    if (!changed) changeKnob(out, *mutable_[pickKnob(rng)]);
    if (!(out == c) && legal(s, out)) return out;
  }
  return std::nullopt;
}

std::optional<ir::Config> crossover(const ir::Space& s, const ir::Config& a, const ir::Config& b, Rng& rng) {
  std::bernoulli_distribution coin(0.5);
  for (int attempt = 0; attempt < kMaxRetries; ++attempt) {
    ir::Config out;
    for (const auto& k : s.knobs) {
      auto ia = a.values.find(k.name), ib = b.values.find(k.name);
      if (ia == a.values.end() || ib == b.values.end()) return std::nullopt;
      out.values[k.name] = coin(rng) ? ia->second : ib->second;
    }
    if (legal(s, out)) return out;
  }
  return std::nullopt;
}

double productSize(const ir::Space& s) {
  double n = 1;
  for (const auto& k : s.knobs) {
    n *= double(k.domain.size());
    if (n > 1e300) return 1e300;
  }
  return n;
}

std::optional<std::vector<ir::Config>> enumerateLegal(const ir::Space& s, size_t limit) {
  if (s.members) return *s.members;
  if (productSize(s) > double(limit)) return std::nullopt;
  std::vector<ir::Config> out;
  for (const auto& k : s.knobs)
    if (k.domain.empty()) return out;
  // Odometer over the knob domains, last knob fastest.
  std::vector<size_t> idx(s.knobs.size(), 0);
  ir::Config c;
  for (size_t i = 0; i < s.knobs.size(); ++i) c.values[s.knobs[i].name] = s.knobs[i].domain[0];
  for (;;) {
    if (!s.constraint || !s.constraint(c)) out.push_back(c);
    size_t i = s.knobs.size();
    while (i > 0) {
      --i;
      const auto& k = s.knobs[i];
      if (++idx[i] < k.domain.size()) {
        c.values[k.name] = k.domain[idx[i]];
        break;
      }
      idx[i] = 0;
      c.values[k.name] = k.domain[0];
      if (i == 0) return out;
    }
    if (s.knobs.empty()) return out;
  }
}

}  // namespace tessera::search
