// Tests the analytic model's descriptions of the Kernel Tuner kernels (bench/kerneltuner_models.h)
// against the real measurements in bench/data: every measured config is described, and the
// measured-best config of each file ranks in the estimate's top 10 %; on the GEMM files and
// A100's convolution the estimate's order agrees with the measured one (Spearman >= 0.7). These
// are what the model achieves robustly (the validation bench prints the full figures).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "bench/kerneltuner_models.h"
#include "search/replay.h"

using namespace tessera;

namespace {

struct Ranked {
  size_t n = 0, described = 0;
  size_t bestRank = 0;  // 1-based rank of the measured best in the estimate's order
  double spearman = 0;
};

Ranked rank(const std::string& name) {
  Ranked out;
  auto model = bench::kernelTunerModel(name);
  EXPECT_TRUE(model.has_value()) << name;
  if (!model) return out;
  auto recs = search::importKernelTuner(std::string(TESSERA_BENCH_DATA_DIR) + "/" + name + ".json.gz",
                                        name.find("MI250X") != std::string::npos ? "MI250X" : "");
  EXPECT_TRUE(recs.ok()) << name;
  if (!recs.ok()) return out;
  auto table = search::tableFromRecords(name, *recs);
  EXPECT_TRUE(table.ok());
  if (!table.ok()) return out;
  auto prior = bench::kernelTunerPrior(*model);
  std::vector<double> est, meas;
  for (const auto& r : table->results) {
    if (!r.ok()) continue;
    auto us = prior(r.config);
    if (model->workload(r.config).ok()) ++out.described;
    est.push_back(us ? *us : 1e30);
    meas.push_back(r.samples.median_us);
  }
  out.n = meas.size();
  const size_t best = size_t(std::min_element(meas.begin(), meas.end()) - meas.begin());
  out.bestRank = 1 + size_t(std::count_if(est.begin(), est.end(), [&](double e) { return e < est[best]; }));
  out.spearman = bench::spearman(est, meas);
  return out;
}

}  // namespace

TEST(KernelTunerModels, EveryFileHasAModelAndItsGpu) {
  for (const auto& name : bench::kernelTunerModelNames()) {
    auto m = bench::kernelTunerModel(name);
    ASSERT_TRUE(m.has_value()) << name;
    EXPECT_GT(m->target.units, 0) << name;
    EXPECT_GT(m->target.peakGflopsF32, 0) << name;
    EXPECT_GT(m->target.memBandwidthGBs, 0) << name;
  }
  EXPECT_FALSE(bench::kernelTunerModel("gemm_unknown_gpu").has_value());
  // The 2080 Ti comes from the GPU table (sm_75: Turing's limits).
  TargetDesc t = bench::kernelTunerModel("gemm_RTX_2080_Ti")->target;
  EXPECT_EQ(t.units, 68);
  EXPECT_EQ(t.maxWarpsPerSM, 32);
  EXPECT_EQ(t.smemPerSM, 64 * 1024);
}

TEST(KernelTunerModels, RejectsConfigsOutsideTheKernelsRestrictions) {
  auto m = bench::kernelTunerModel("gemm_RTX_3090");
  ASSERT_TRUE(m.has_value());
  auto c = ir::Config::parseAssignments(
      "MWG=128,NWG=128,KWG=32,MDIMC=16,NDIMC=8,MDIMA=16,NDIMB=32,KWI=2,VWM=8,VWN=2,STRM=0,STRN=0,SA=1,SB=1,PRECISION=32");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(m->workload(*c).ok());
  c->set("VWM", int64_t(16));  // MWG % (MDIMC * VWM) != 0
  EXPECT_FALSE(m->workload(*c).ok());
  c->set("VWM", int64_t(8));
  c->values.erase("SA");
  EXPECT_FALSE(m->workload(*c).ok());
}

TEST(KernelTunerModels, MeasuredBestRanksHighInTheEstimate) {
  for (const auto& name : bench::kernelTunerModelNames()) {
    Ranked r = rank(name);
    ASSERT_GT(r.n, 1000u) << name;
    EXPECT_EQ(r.described, r.n) << name;
    EXPECT_LE(double(r.bestRank), 0.10 * double(r.n)) << name << ": the measured best ranks " << r.bestRank << " of " << r.n;
    if (name.find("MI250X") == std::string::npos)
      EXPECT_GE(r.spearman, 0.7) << name;
    else
      EXPECT_GT(r.spearman, 0.2) << name;
  }
}
