// Owns quantiles and sample summaries.
#include "support/stats.h"

#include <algorithm>
#include <cmath>

namespace tessera {

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  double pos = q * double(v.size() - 1);
  size_t lo = size_t(std::floor(pos)), hi = std::min(v.size() - 1, lo + 1);
  double f = pos - double(lo);
  return v[lo] * (1 - f) + v[hi] * f;
}

SampleSummary summarize(const std::vector<double>& s) {
  SampleSummary r;
  r.n = int64_t(s.size());
  if (s.empty()) return r;
  r.median_us = quantile(s, 0.5);
  r.p20_us = quantile(s, 0.2);
  r.p80_us = quantile(s, 0.8);
  r.min_us = *std::min_element(s.begin(), s.end());
  return r;
}

}  // namespace tessera
