// Owns the synthetic hard landscapes (bench/synthetic_tables.h): each kind a function from a
// config's value indices to a time, drawn from a seed with a generator of our own (the standard
// distributions differ between library versions: a table must be the same everywhere).
#include "bench/synthetic_tables.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "support/hash.h"

namespace tessera::bench {

namespace {

// splitmix64: small, seedable, identical on every platform.
struct Gen {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform(double lo, double hi) { return lo + (hi - lo) * double(next() >> 11) * 0x1.0p-53; }
  size_t index(size_t n) { return size_t(next() % std::max<size_t>(n, 1)); }
};

struct Knob {
  std::string name;
  std::vector<nlohmann::json> values;
};

Knob intKnob(const std::string& name, size_t n) {
  Knob k{name, {}};
  for (size_t i = 0; i < n; ++i) k.values.push_back(int64_t(1) << i);  // 1, 2, 4, ...: GPU-like sizes
  return k;
}

Knob textKnob(const std::string& name, size_t n) {
  Knob k{name, {}};
  for (size_t i = 0; i < n; ++i) k.values.push_back(name + "_" + std::string(1, char('a' + i)));
  return k;
}

size_t scaled(size_t n, double scale) { return std::max<size_t>(2, size_t(std::lround(double(n) * scale))); }

// Every config of the knobs' product, timed by `time` (value indices -> microseconds).
std::vector<cache::Record> tabulate(const std::string& kind, uint64_t seed, const std::vector<Knob>& knobs,
                                    const std::function<double(const std::vector<size_t>&)>& time) {
  cache::HardKey key;
  key.family = "synthetic_" + kind;
  key.shape = {int64_t(seed) + 1};
  key.dtype = "f32";
  key.layout = "row";
  key.target = "synthetic";
  key.arch = "synthetic";
  key.units = 1;
  key.workload = sha256Hex("synthetic/1\x1f" + kind + "\x1f" + std::to_string(seed) + "\x1f" + std::to_string(knobs.size()) +
                           "\x1f" + std::to_string(knobs.empty() ? 0 : knobs.back().values.size()));
  std::vector<cache::Record> out;
  std::vector<size_t> idx(knobs.size(), 0);
  while (true) {
    cache::Record r;
    r.key = key;
    r.provenance.cpu_model = "synthetic";
    r.provenance.host = "synthetic";
    r.provenance.created_at = "1970-01-01T00:00:00Z";
    nlohmann::json cfg = nlohmann::json::object();
    for (size_t i = 0; i < knobs.size(); ++i) cfg[knobs[i].name] = knobs[i].values[idx[i]];
    r.config = cfg.dump();
    r.status = cache::RecordStatus::Ok;
    r.median_us = r.p20_us = r.p80_us = time(idx);
    r.n = 1;
    if (cache::finalizeRecord(r).ok()) out.push_back(std::move(r));
    size_t i = 0;
    for (; i < knobs.size(); ++i) {
      if (++idx[i] < knobs[i].values.size()) break;
      idx[i] = 0;
    }
    if (i == knobs.size()) break;
  }
  return out;
}

// A narrow, tilted basin with ridges, its bottom made a needle: the best config is 1/0.9 faster
// than the runner-up, so exactly one config is within 95 %.
std::vector<cache::Record> needle(uint64_t seed, double scale) {
  Gen g{seed * 0x51ed27ULL + 11};
  const size_t n = scaled(6, scale);
  std::vector<Knob> knobs;
  for (int i = 0; i < 5; ++i) knobs.push_back(intKnob("n" + std::to_string(i), n));
  std::vector<double> best(5), weight(5), tilt(5);
  for (int i = 0; i < 5; ++i) {
    best[size_t(i)] = double(g.index(n));
    weight[size_t(i)] = g.uniform(0.08, 0.35);
    tilt[size_t(i)] = g.uniform(-0.15, 0.15);
  }
  const uint64_t noiseSeed = g.next();
  auto base = [=](const std::vector<size_t>& x) {
    double t = 100;
    for (size_t i = 0; i < 5; ++i) {
      // Ridges: the best n1 moves with n0, the best n3 against n2.
      double at = best[i];
      if (i == 1) at += double(x[0]) - best[0];
      if (i == 3) at -= double(x[2]) - best[2];
      const double d = double(x[i]) - at;
      t *= (1 + weight[i] * d * d) * (1 + tilt[i] * double(x[i]) / double(n));
    }
    uint64_t h = noiseSeed;
    for (size_t v : x) h = (h ^ v) * 0x100000001b3ULL;
    return t * Gen{h}.uniform(0.98, 1.02);
  };
  // The runner-up's time, to carve the needle.
  std::vector<double> all;
  std::vector<size_t> x(5, 0);
  while (true) {
    all.push_back(base(x));
    size_t i = 0;
    for (; i < 5; ++i) {
      if (++x[i] < n) break;
      x[i] = 0;
    }
    if (i == 5) break;
  }
  std::sort(all.begin(), all.end());
  const double fastest = all[0], runnerUp = all.size() > 1 ? all[1] : all[0];
  return tabulate("needle", seed, knobs, [=](const std::vector<size_t>& v) {
    const double t = base(v);
    return t == fastest ? runnerUp * 0.9 : t;
  });
}

// Flat levels almost everywhere; a graded basin where two knobs take particular values.
std::vector<cache::Record> plateau(uint64_t seed, double scale) {
  Gen g{seed * 0x2545f491ULL + 7};
  const size_t n = scaled(5, scale);
  std::vector<Knob> knobs;
  for (int i = 0; i < 6; ++i) knobs.push_back(intKnob("p" + std::to_string(i), n));
  const size_t gateA = g.index(n), gateB = g.index(n), levelKnob = 2 + g.index(4);
  std::vector<double> best(6), weight(6);
  for (int i = 0; i < 6; ++i) {
    best[size_t(i)] = double(g.index(n));
    weight[size_t(i)] = g.uniform(0.03, 0.2);
  }
  const uint64_t noiseSeed = g.next();
  return tabulate("plateau", seed, knobs, [=](const std::vector<size_t>& x) {
    // Outside the gate the fast path is not taken: two flat levels (what the other knobs do does
    // not matter there), both slower than anything inside.
    if (x[0] != gateA || x[1] != gateB) return x[levelKnob] % 2 ? 300.0 : 330.0;
    double t = 100;
    for (size_t i = 2; i < 6; ++i) {
      const double d = double(x[i]) - best[i];
      t *= 1 + weight[i] * d * d;
    }
    uint64_t h = noiseSeed;
    for (size_t v : x) h = (h ^ v) * 0x100000001b3ULL;
    return std::min(t * Gen{h}.uniform(0.98, 1.02), 290.0);
  });
}

// Text-valued knobs: main effects times interactions of four disjoint pairs.
std::vector<cache::Record> categorical(uint64_t seed, double scale) {
  Gen g{seed * 0x9e3779b1ULL + 3};
  const size_t n = scaled(3, scale), knobCount = 8;
  std::vector<Knob> knobs;
  for (size_t i = 0; i < knobCount; ++i) knobs.push_back(textKnob("c" + std::to_string(i), n));
  std::vector<std::vector<double>> main(knobCount, std::vector<double>(n));
  for (auto& m : main)
    for (auto& f : m) f = g.uniform(1.0, 1.5);
  std::vector<std::vector<double>> pair(knobCount / 2, std::vector<double>(n * n));
  for (auto& p : pair)
    for (auto& f : p) f = g.uniform(1.0, 1.8);
  return tabulate("categorical", seed, knobs, [=](const std::vector<size_t>& x) {
    double t = 100;
    for (size_t i = 0; i < knobCount; ++i) t *= main[i][x[i]];
    for (size_t p = 0; p < knobCount / 2; ++p) t *= pair[p][x[2 * p] * n + x[2 * p + 1]];
    return t;
  });
}

// A deceptive pair: a broad basin reaching 0.85 where two structural knobs take one pair of
// values, the global basin where both take another, and either knob moved alone slow.
std::vector<cache::Record> trap(uint64_t seed, double scale) {
  Gen g{seed * 0x7f4a7c15ULL + 5};
  const size_t n = scaled(4, scale);
  std::vector<Knob> knobs;
  for (int i = 0; i < 6; ++i) knobs.push_back(intKnob("t" + std::to_string(i), n));
  const size_t a1 = g.index(n), b1 = g.index(n);
  size_t a2 = g.index(n), b2 = g.index(n);
  if (a2 == a1) a2 = (a1 + 1 + g.index(n - 1)) % n;
  if (b2 == b1) b2 = (b1 + 1 + g.index(n - 1)) % n;
  std::vector<double> best1(6), best2(6), weight(6);
  for (int i = 2; i < 6; ++i) {
    best1[size_t(i)] = double(g.index(n));
    best2[size_t(i)] = double(g.index(n));
    weight[size_t(i)] = g.uniform(0.02, 0.12);
  }
  const uint64_t noiseSeed = g.next();
  return tabulate("trap", seed, knobs, [=](const std::vector<size_t>& x) {
    auto bowl = [&](const std::vector<double>& at) {
      double t = 1;
      for (size_t i = 2; i < 6; ++i) {
        const double d = double(x[i]) - at[i];
        t *= 1 + weight[i] * d * d;
      }
      return t;
    };
    double t;
    if (x[0] == a2 && x[1] == b2) t = 100 * bowl(best2);
    else if (x[0] == a1 && x[1] == b1) t = 100 / 0.85 * bowl(best1);
    else if (x[0] == a1 || x[1] == b1) t = 100 / 0.7 * bowl(best1);  // the trap's slopes
    else t = 100 / 0.3 * bowl(best2);
    uint64_t h = noiseSeed;
    for (size_t v : x) h = (h ^ v) * 0x100000001b3ULL;
    return t * Gen{h}.uniform(0.98, 1.02);
  });
}

// A plateau on one value of a three-valued knob: with `variant` at its plateau value nearly every
// config runs at 0.80-0.87 of the best, so the first draws and the model favour it; the other
// two values are slow on average (narrow basins) and hold every config within 95 % of the best.
std::vector<cache::Record> plateauTrap(uint64_t seed, double scale) {
  Gen g{seed * 0x3c6ef372ULL + 13};
  const size_t n = scaled(5, scale);
  std::vector<Knob> knobs{intKnob("variant", 3)};
  for (int i = 0; i < 5; ++i) knobs.push_back(intKnob("q" + std::to_string(i), n));
  const size_t flat = g.index(3);
  std::vector<std::vector<double>> best(3, std::vector<double>(6)), weight(3, std::vector<double>(6));
  for (size_t v = 0; v < 3; ++v)
    for (size_t i = 1; i < 6; ++i) {
      best[v][i] = double(g.index(n));
      // The plateau is nearly flat; the other values' basins are narrow.
      weight[v][i] = v == flat ? g.uniform(0.001, 0.005) : g.uniform(0.03, 0.1);
    }
  // The two basins' bottoms: the best of all, and one just inside 95 % of it.
  const size_t top = (flat + 1 + g.index(2)) % 3;
  const uint64_t noiseSeed = g.next();
  return tabulate("plateau_trap", seed, knobs, [=](const std::vector<size_t>& x) {
    const size_t v = x[0];
    double t = v == flat ? 100 / 0.87 : v == top ? 100 : 100 / 0.97;
    for (size_t i = 1; i < 6; ++i) {
      const double d = double(x[i]) - best[v][i];
      t *= 1 + weight[v][i] * d * d;
    }
    uint64_t h = noiseSeed;
    for (size_t w : x) h = (h ^ w) * 0x100000001b3ULL;
    return t * Gen{h}.uniform(0.99, 1.01);
  });
}

}  // namespace

std::vector<std::string> syntheticKinds() { return {"needle", "plateau", "categorical", "trap", "plateau_trap"}; }

std::vector<cache::Record> syntheticTable(const std::string& kind, uint64_t seed, double scale) {
  if (kind == "needle") return needle(seed, scale);
  if (kind == "plateau") return plateau(seed, scale);
  if (kind == "categorical") return categorical(seed, scale);
  if (kind == "trap") return trap(seed, scale);
  if (kind == "plateau_trap") return plateauTrap(seed, scale);
  return {};
}

}  // namespace tessera::bench
