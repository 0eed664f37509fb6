// Owns the sample summary used by every measurement (n, median, p20, p80; ARCHITECTURE.md §2.7).
#pragma once

#include <cstdint>
#include <vector>

namespace tessera {

struct SampleSummary {
  int64_t n = 0;
  double median_us = 0, p20_us = 0, p80_us = 0, min_us = 0;
};

// Linear-interpolated quantile of an unsorted sample (q in [0,1]); 0 for an empty sample.
double quantile(std::vector<double> v, double q);
SampleSummary summarize(const std::vector<double>& samples_us);

}  // namespace tessera
