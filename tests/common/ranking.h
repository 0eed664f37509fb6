// Owns helpers shared by the cost-model and search tests: rank correlations (Spearman, Kendall)
// for "does the model order configs like the truth does", and a fixed AVX-512 host description
// so derived features do not depend on the machine running the tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "targets/target_desc.h"

namespace tessera::testutil {

inline std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<size_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < idx.size(); ++i) r[idx[i]] = double(i);
  return r;
}

inline double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  auto ra = ranks(a), rb = ranks(b);
  double n = double(a.size()), m = (n - 1) / 2, num = 0, da = 0, db = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (ra[i] - m) * (rb[i] - m);
    da += (ra[i] - m) * (ra[i] - m);
    db += (rb[i] - m) * (rb[i] - m);
  }
  return num / std::sqrt(da * db);
}

inline double kendall(const std::vector<double>& a, const std::vector<double>& b) {
  double c = 0, d = 0;
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = i + 1; j < a.size(); ++j) {
      double s = (a[i] - a[j]) * (b[i] - b[j]);
      if (s > 0) ++c;
      else if (s < 0) ++d;
    }
  return (c - d) / std::max(1.0, c + d);
}

// 16 f32 lanes, 32 vector registers, 32 KiB L1d, 1 MiB L2, 32 MiB L3 (a Zen 4 core).
inline TargetDesc avx512Host() {
  TargetDesc t;
  t.name = "host";
  t.arch = "x86-64-v4";
  t.simdBits = 512;
  t.vectorRegisters = 32;
  t.l1dBytes = 32 << 10;
  t.l2Bytes = 1 << 20;
  t.l3Bytes = 32 << 20;
  return t;
}

}  // namespace tessera::testutil
