// Owns what the kernel benchmarks share: interleaved same-run timing of a candidate and its
// anchor (machines here are noisy: only ratios measured in one run mean anything).
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace tessera::bench {

struct Timing {
  double best_s = 1e30;   // fastest single call
  double median_s = 0;    // median of all calls
};

// Alternates rounds of `a` and `b` (each round runs a function for at least `roundSec`).
inline std::pair<Timing, Timing> interleave(const std::function<void()>& a, const std::function<void()>& b,
                                            int rounds = 5, double roundSec = 0.15) {
  auto now = [] { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); };
  std::vector<double> sa, sb;
  a();
  b();
  for (int r = 0; r < rounds; ++r)
    for (int which = 0; which < 2; ++which) {
      auto& fn = which ? b : a;
      auto& s = which ? sb : sa;
      double start = now();
      do {
        double t0 = now();
        fn();
        s.push_back(now() - t0);
      } while (now() - start < roundSec);
    }
  auto summarize = [](std::vector<double> v) {
    Timing t;
    std::sort(v.begin(), v.end());
    t.best_s = v.front();
    t.median_s = v[v.size() / 2];
    return t;
  };
  return {summarize(sa), summarize(sb)};
}

}  // namespace tessera::bench
