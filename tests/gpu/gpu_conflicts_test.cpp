// Tests that the analytic model's bank-conflict assumption for each matrix-core strategy's default
// kernel (GpuWorkload::sharedConflictWays: what the estimator folds into the shared term) is what
// the mapped-kernel emulator's conflict counter measures on the same kernel: the calibration the
// model's shared term rests on. Control: the counter does see conflicts (the Hopper GEMM with its
// staged C tile's rows unpadded is 4-way on its writes), so an agreement at 1.0 is not a counter
// that is blind.
#include <gtest/gtest.h>

#include "codegen/gpu.h"
#include "gpu_check.h"
#include "ir/builders.h"
#include "measure/estimate.h"
#include "targets/kernel_io.h"

using namespace tessera;
using namespace tessera::ir;

namespace {

Kernel gemm(int64_t n, ScalarType t) {
  GemmSpec g;
  g.m = g.n = g.k = n;
  g.dtype = t;
  auto r = buildGemm(g);
  EXPECT_TRUE(r.ok());
  return *r;
}

struct Measured {
  double ways = 0;
  uint64_t requests = 0;
};

Measured emulate(const Kernel& k, const TargetDesc& t, const Config& cfg, const codegen::MappedEmuOptions& o = {}) {
  KernelIO io(k, 3);
  auto rep = testutil::runMapped(k, cfg, t, io, o);
  EXPECT_TRUE(rep.ok()) << (rep.ok() ? "" : rep.error().str());
  if (!rep.ok()) return {};
  EXPECT_TRUE(rep->ok) << k.name << ": " << (rep->errors.empty() ? "" : rep->errors[0]);
  const auto& c = rep->counters;
  return {c.sharedIdealWavefronts ? double(c.sharedWavefronts) / double(c.sharedIdealWavefronts) : 1.0, c.sharedRequests};
}

}  // namespace

TEST(GpuConflicts, TheModelsConflictWaysAreTheEmulatorsCount) {
  struct Case {
    const char* target;
    Kernel k;
  };
  std::vector<Case> cases = {
      {"sm_80", gemm(256, ScalarType::F16)},  // mma.sync
      {"sm_80", gemm(256, ScalarType::BF16)}, // mma-lane
      {"sm_90a", gemm(256, ScalarType::F16)}, // wgmma + TMA
      {"sm_80", testutil::attentionKernel(1, 1, 128, 128, 64, false, ScalarType::F16)},   // flash-mma
      {"gfx942", testutil::attentionKernel(1, 1, 128, 128, 64, false, ScalarType::F16)},  // flash-mfma
  };
  for (const auto& c : cases) {
    const TargetDesc& t = testutil::gpuTarget(c.target);
    auto cfg = testutil::gpuConfig(c.k, t);
    ASSERT_TRUE(cfg.ok()) << cfg.error().str();
    auto est = measure::estimateKernel(c.k, *cfg, t);
    ASSERT_TRUE(est.ok()) << est.error().str();
    Measured m = emulate(c.k, t, *cfg);
    ASSERT_GT(m.requests, 0u) << c.target << " " << cfg->str() << ": no shared accesses counted";
    EXPECT_NEAR(est->workload.sharedConflictWays, m.ways, 0.05)
        << c.target << " " << c.k.name << " " << cfg->str() << ": the model assumes " << est->workload.sharedConflictWays
        << " wavefronts per ideal one, the emulator counts " << m.ways;
  }
  // The control: the Hopper GEMM's staging pitch rewritten from BN + 8 floats to BN (writes and
  // reads alike) puts a half-warp's four rows of 8-byte stores on the same banks.
  const TargetDesc& t = testutil::gpuTarget("sm_90a");
  Kernel k = gemm(256, ScalarType::F16);
  auto cfg = testutil::gpuConfig(k, t);
  ASSERT_TRUE(cfg.ok()) << cfg.error().str();
  const int64_t BN = std::get<int64_t>(cfg->values.at("BN"));
  codegen::MappedEmuOptions unpadded;
  unpadded.deviceHook = [BN](std::string s) {
    const std::string pitch = "llvm.mlir.constant(" + std::to_string(BN + 8) + " : index)";
    size_t at = s.find(pitch);
    EXPECT_NE(at, std::string::npos) << "no staging pitch in the kernel";
    for (; at != std::string::npos; at = s.find(pitch, at))
      s.replace(at, pitch.size(), "llvm.mlir.constant(" + std::to_string(BN) + " : index)");
    return s;
  };
  EXPECT_GT(emulate(k, t, *cfg, unpadded).ways, 1.2) << "the counter saw no conflict even with the staging rows unpadded";
}
