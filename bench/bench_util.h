// Owns what the kernel benchmarks share: interleaved same-run timing of a candidate and its
// anchor (machines here are noisy: only ratios measured in one run mean anything).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cache_service/store.h"

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

// The kernel benchmarks' command line: `[--db PATH] [N...]`, N positive integers; --db opens the
// store whose winners the benchmark runs. Returns false after printing the usage (to stdout for
// --help, with *exitCode 0) or why the arguments or the store are bad (to stderr, 2).
struct Args {
  std::unique_ptr<cache::RecordStore> store;  // null without --db
  std::vector<int64_t> numbers;
};
inline bool parseArgs(int argc, char** argv, const char* usage, Args* out, int* exitCode) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::printf("usage: %s %s\n", argv[0], usage);
      *exitCode = 0;
      return false;
    }
    if (a == "--db" && i + 1 < argc) {
      auto st = cache::openSqliteStore(argv[++i]);
      if (!st.ok()) {
        std::fprintf(stderr, "%s\n", st.error().str().c_str());
        *exitCode = 2;
        return false;
      }
      out->store = std::move(*st);
      continue;
    }
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(a, &used);
    } catch (...) {
      used = 0;
    }
    if (used != a.size() || v <= 0) {
      std::fprintf(stderr, "%s: '%s' is not a positive integer\nusage: %s %s\n", argv[0], a.c_str(), argv[0], usage);
      *exitCode = 2;
      return false;
    }
    out->numbers.push_back(v);
  }
  return true;
}

}  // namespace tessera::bench
