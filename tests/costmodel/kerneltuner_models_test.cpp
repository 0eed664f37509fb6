// Tests the analytic model's descriptions of the Kernel Tuner kernels (bench/kerneltuner_models.h)
// against the real measurements in bench/data: every measured config is described, and the
// measured-best config of each file ranks in the estimate's top 10 %, the estimate's order agrees
// with the measured one (Spearman >= 0.8 on the Xgemm files, less on the convolution's), and the
// estimate's top 10 hold a config within 80 % of the best on all ten files but the A100's. These
// are what the model achieves robustly (the validation bench prints the full figures). As the
// search's prior, the estimate saves trials on the RTX 2080 Ti's Xgemm, where its flat top once
// cost them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "bench/kerneltuner_models.h"
#include "costmodel/features.h"
#include "measure/replay.h"
#include "search/import.h"
#include "session/tune_session.h"

using namespace tessera;

namespace {

struct Ranked {
  size_t n = 0, described = 0;
  size_t bestRank = 0;  // 1-based rank of the measured best in the estimate's order
  double spearman = 0;
  double top10 = 0;     // the true best over the best measured among the estimate's 10 fastest
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
  auto table = measure::tableFromRecords(name, *recs);
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
  std::vector<size_t> order(est.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return est[a] < est[b]; });
  double bestOfTop = INFINITY;
  for (size_t i = 0; i < std::min<size_t>(10, order.size()); ++i) bestOfTop = std::min(bestOfTop, meas[order[i]]);
  out.top10 = meas[best] / bestOfTop;
  return out;
}

measure::ReplayTable table(const std::string& name) {
  auto recs = search::importKernelTuner(std::string(TESSERA_BENCH_DATA_DIR) + "/" + name + ".json.gz", "");
  EXPECT_TRUE(recs.ok()) << name;
  if (!recs.ok()) return {};
  auto t = measure::tableFromRecords(name, *recs);
  EXPECT_TRUE(t.ok()) << name;
  return t.ok() ? *t : measure::ReplayTable{};
}

// Trials a replayed tune (the evolutionary search, batch 4, as search_efficiency runs it for this
// seed) needs to reach 95 % of the table's best; with `prior`, the analytic model's estimate is its
// prior and a feature of its cost model, as `tessera tune` makes them for a GPU target.
int trialsTo95(const measure::ReplayTable& t, const bench::KernelTunerModel* prior, int seed) {
  const ir::Space space = t.space;
  session::TuneProblem problem{t.key, t.space, TargetDesc{}, [space](const cache::HardKey&) {
                                return costmodel::makeKnobFeatures(space, {.powerOfTwo = true});
                              }};
  if (prior) {
    problem.prior = bench::kernelTunerPrior(*prior);
    search::Prior p = problem.prior;
    problem.features = [space, p](const cache::HardKey&) {
      return costmodel::withFeature(costmodel::makeKnobFeatures(space, {.powerOfTwo = true}), "log2_estimated_us",
                                    [p](const ir::Config& c) {
                                      auto us = p(c);
                                      return us && *us > 0 ? float(std::log2(*us)) : -1.f;
                                    });
    };
  }
  session::SessionSettings ss;
  ss.loop.search.seed = uint64_t(seed) * 7919 + 1;
  ss.loop.trials = int(t.results.size());
  ss.loop.topK = 0;
  ss.loop.measureDefault = false;
  ss.cache = session::CachePolicy::Force;
  ss.warmStart = false;
  ss.model.seed = uint64_t(seed);
  ss.model.threads = 1;
  const double bar = 0.95 * t.bestThroughput();
  int hit = 0;
  session::SessionCallbacks cb;
  cb.onTrial = [&](const measure::TrialResult& r, const search::TuneProgress& p) {
    if (!hit && r.ok() && r.throughput >= bar) hit = p.trial;
  };
  cb.shouldStop = [&](const search::TuneProgress&) { return hit > 0; };
  auto m = measure::makeReplayMeasurer(t);
  auto session = session::runTuneSession(problem, *m, nullptr, nullptr, {}, ss, cb);
  EXPECT_TRUE(session.ok());
  return hit > 0 ? hit : int(t.results.size());
}

double median3(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
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
    // Rank agreement: the Xgemm files and the A100 well; the other convolution files less (the
    // RTX A4000 / A6000 between staged and unstaged configs of like time, the RDNA files' compute
    // rate, see the W7800's line below), and the W7800 least.
    if (name.rfind("gemm_", 0) == 0)
      EXPECT_GE(r.spearman, 0.8) << name;
    else if (name == "convolution_A100")
      EXPECT_GE(r.spearman, 0.75) << name;
    else if (name == "convolution_W7800")
      EXPECT_GT(r.spearman, 0.3) << name;
    else
      EXPECT_GT(r.spearman, 0.58) << name;
    // The aim: the estimate's top 10 hold a config within 80 % of the best. Not on the
    // A100's convolution: its configs within 80 % are fast by the order they were measured in,
    // and their twins of the same code take 1.4-1.8x longer (bench/data/README.md); the test
    // below keeps the model from being fitted to them.
    if (name != "convolution_A100") {
      EXPECT_GE(r.top10, 0.8) << name;
    }
    // On the Xgemm files the best ranks in the top 1 % (the 2080 Ti's ranked 229th of 17956 while
    // a wave's last two-warp block was costed at the whole SM's rate).
    if (name.rfind("gemm_", 0) == 0) {
      EXPECT_LE(double(r.bestRank), 0.01 * double(r.n)) << name << ": " << r.bestRank;
    }
  }
}

// Staged, the convolution's blocks copy their tile (22 dependent loads at 64x2 threads, 1x4 tiles)
// before any FMA: the blocks of a wave start together, wait together and then compute together,
// so the waits add to the work. On the RTX A6000 the staged 64x2 / 1x4 config measures 0.83 ms and
// the unstaged 128x1 / 2x4 one 0.60 ms (the file's best); with the waits overlapped by other
// blocks' work the model had them 0.43 against 0.55 ms (its top 10 then held only staged configs,
// 0.73 of the best). Unstaged, a warp's 128 contiguous bytes at an unaligned address cost two L1
// clocks (the bytes at 64 per clock), not three (half-warps each touching both lines): measured,
// the unstaged configs took 1/1.5 of that estimate on the A4000 at every tile shape.
TEST(KernelTunerModels, StagedBlocksWaitTogetherOnTheRtxA6000) {
  auto a6000 = bench::kernelTunerModel("convolution_A6000");
  ASSERT_TRUE(a6000.has_value());
  auto time = [&](const std::string& knobs) {
    auto c = ir::Config::parseAssignments(knobs + ",read_only=0,use_padding=0,use_cmem=1,filter_height=15,filter_width=15");
    EXPECT_TRUE(c.ok());
    auto us = bench::kernelTunerPrior(*a6000)(*c);
    EXPECT_TRUE(us.has_value());
    return us ? *us : 0.0;
  };
  const double staged = time("block_size_x=64,block_size_y=2,tile_size_x=1,tile_size_y=4,use_shmem=1");
  const double direct = time("block_size_x=128,block_size_y=1,tile_size_x=2,tile_size_y=4,use_shmem=0");
  EXPECT_GT(staged, direct) << "measured 827 vs 603 us";
  EXPECT_LT(direct, 1.1 * 603) << "no term may exceed the measured time by much: the unaligned L1 reads";
}

// RDNA's LDS: the W7800's measured best is staged (32x2 threads, 1x4 tiles, 0.82 ms). Costed as
// CDNA2's LDS serves the compiler's under-aligned merged reads (lane by lane), its shared-memory
// term alone came to 4.0 ms, five times the measured time, and the config ranked 345th; RDNA reads
// a word per lane at the full rate.
TEST(KernelTunerModels, TheRdnaLdsReadsAtFullRate) {
  auto w7800 = bench::kernelTunerModel("convolution_W7800");
  ASSERT_TRUE(w7800.has_value());
  auto c = ir::Config::parseAssignments(
      "block_size_x=32,block_size_y=2,tile_size_x=1,tile_size_y=4,use_shmem=1,read_only=0,use_padding=0,use_cmem=1,"
      "filter_height=15,filter_width=15");
  ASSERT_TRUE(c.ok());
  auto us = bench::kernelTunerPrior(*w7800)(*c);
  ASSERT_TRUE(us.has_value());
  EXPECT_LT(*us, 1.5 * 816) << "measured 816 us";
}

// The convolution's staged and unstaged variants rank opposite ways on the two GPUs, as measured:
// on the A100 staging the input in shared memory wins (1x1 tiles, 32x4 threads: 1.76 vs 2.84 ms);
// on the MI250X the compiler's under-aligned LDS reads lose to the unstaged global loads (64x1
// threads: 9.9 vs 1.8 ms).
TEST(KernelTunerModels, StagingWinsOnTheA100AndLosesOnTheMi250x) {
  auto a100 = bench::kernelTunerModel("convolution_A100"), mi = bench::kernelTunerModel("convolution_MI250X");
  ASSERT_TRUE(a100 && mi);
  auto time = [](const bench::KernelTunerModel& m, const char* bs, int sh) {
    auto c = ir::Config::parseAssignments(std::string(bs) +
                                          ",tile_size_x=1,tile_size_y=1,read_only=1,use_padding=0,use_cmem=1,filter_height=15,"
                                          "filter_width=15,use_shmem=" + std::to_string(sh));
    EXPECT_TRUE(c.ok());
    auto us = bench::kernelTunerPrior(m)(*c);
    EXPECT_TRUE(us.has_value());
    return us ? *us : 0.0;
  };
  EXPECT_LT(time(*a100, "block_size_x=32,block_size_y=4", 1), time(*a100, "block_size_x=32,block_size_y=4", 0));
  const double staged = time(*mi, "block_size_x=64,block_size_y=1", 1), direct = time(*mi, "block_size_x=64,block_size_y=1", 0);
  EXPECT_GT(staged, 3 * direct) << "measured 9.9 vs 1.8 ms";
}

// read_only (__ldg) on NVIDIA changes the code only where the products read global memory: staged,
// the kernel reads the shared copy after the barrier, and the CUDA 11.8, 12.2 and 12.3 compilers
// (NVRTC and ptxas, sm_80 and sm_86) emit the same code for both values there (675 FFMA and 345
// LDS at 32x4 threads, 1x3 tiles; only the 7 staging loads differ, LDG.E vs LDG.E.CONSTANT). The
// A100 file's 1.6x between such twins tracks the order they were measured in, not the code
// (bench/data/README.md), so the estimate must not separate them; unstaged, __ldg loads are not
// merged (1800 loads for 1800 FMAs at 2x4 tiles) and the twins differ, in the model as measured
// on every NVIDIA GPU (the control: the comparison does see read_only where the code changes).
// The same test's last assertion holds the __ldg address arithmetic of the unstaged code.
TEST(KernelTunerModels, ReadOnlyChangesTheEstimateOnlyWithoutStaging) {
  auto a100 = bench::kernelTunerModel("convolution_A100");
  ASSERT_TRUE(a100.has_value());
  auto time = [&](const std::string& knobs, int ro) {
    auto c = ir::Config::parseAssignments(knobs + ",use_padding=0,use_cmem=1,filter_height=15,filter_width=15,read_only=" +
                                          std::to_string(ro));
    EXPECT_TRUE(c.ok());
    auto us = bench::kernelTunerPrior(*a100)(*c);
    EXPECT_TRUE(us.has_value());
    return us ? *us : 0.0;
  };
  for (const char* staged : {"block_size_x=32,block_size_y=4,tile_size_x=1,tile_size_y=3,use_shmem=1",
                             "block_size_x=128,block_size_y=2,tile_size_x=1,tile_size_y=3,use_shmem=1",
                             "block_size_x=32,block_size_y=4,tile_size_x=2,tile_size_y=4,use_shmem=1"})
    EXPECT_EQ(time(staged, 0), time(staged, 1)) << staged;
  const std::string direct = "block_size_x=64,block_size_y=4,tile_size_x=2,tile_size_y=4,use_shmem=0";
  EXPECT_GT(time(direct, 1), 1.5 * time(direct, 0)) << "measured 6.5 vs 0.86 ms";
  // Bounds-checked, every product loads (no merging either way), but each __ldg computes its own
  // 64-bit address where a plain load takes an immediate offset: 9.0 against 2.7 instructions
  // per FMA in the sm_80 code. The model without that rule estimated the two alike; with it the
  // __ldg one is slower, though by less than measured (the L1 term, 2.3 ms, bounds both).
  const std::string guarded = "block_size_x=32,block_size_y=4,tile_size_x=1,tile_size_y=3,use_shmem=0";
  EXPECT_GT(time(guarded, 1), 1.02 * time(guarded, 0)) << "measured 4.20 vs 1.70 ms";
}

// Any Kernel Tuner file's kernel by its family, on any GPU of the table: the dedispersion kernel
// (no bundled file) is described on several GPUs, faster on the product of a chip with more SMs and
// bandwidth (an RTX 4090 against an L4, both sm_89), and its bad configs are errors, not estimates.
TEST(KernelTunerModels, AKernelByItsFamilyOnAnyGpu) {
  auto a100 = bench::kernelTunerGpu("NVIDIA A100-PCIE-40GB", "");
  ASSERT_TRUE(a100.ok()) << a100.error().message;
  auto l4 = bench::kernelTunerGpu("", "L4");
  ASSERT_TRUE(l4.ok()) << l4.error().message;
  EXPECT_EQ(l4->units, 58);
  // A device the table does not know is an error naming --gpu; a --gpu that is the host too.
  auto unknown = bench::kernelTunerGpu("Some Future GPU 9000", "");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("--gpu"), std::string::npos);
  EXPECT_FALSE(bench::kernelTunerGpu("", "host").ok());
  EXPECT_FALSE(bench::kernelTunerModelFor("some_other_kernel", *a100).has_value());

  auto onA100 = bench::kernelTunerModelFor("dedispersion_kernel", *a100);
  auto onL4 = bench::kernelTunerModelFor("dedispersion_kernel", *l4);
  auto rtx4090 = bench::kernelTunerGpu("NVIDIA GeForce RTX 4090", "");
  ASSERT_TRUE(rtx4090.ok());
  auto on4090 = bench::kernelTunerModelFor("dedispersion_kernel", *rtx4090);
  ASSERT_TRUE(onA100 && onL4 && on4090);
  auto c = ir::Config::parseAssignments("block_size_x=64,block_size_y=4,tile_size_x=2,tile_size_y=2,tile_stride_x=1,tile_stride_y=0");
  ASSERT_TRUE(c.ok());
  auto wa = onA100->workload(*c), wl = onL4->workload(*c), w4 = on4090->workload(*c);
  ASSERT_TRUE(wa.ok() && wl.ok() && w4.ok());
  EXPECT_EQ(wa->threadsPerBlock, 256);
  EXPECT_GT(wa->flopsPerBlock, 0);
  EXPECT_GT(costmodel::estimateLaunch(*wa, *a100).timeUs, 0);
  const double t4 = costmodel::estimateLaunch(*w4, *rtx4090).timeUs, tl = costmodel::estimateLaunch(*wl, *l4).timeUs;
  EXPECT_LT(t4, tl) << "the RTX 4090 (128 SMs, 1008 GB/s) predicted slower than the L4 (58 SMs, 300 GB/s)";
  EXPECT_FALSE(onA100->describe(*c).empty());
  auto big = *c;
  big.set("block_size_x", int64_t(512));  // 2048 threads
  EXPECT_FALSE(onA100->workload(big).ok());
  auto zero = *c;
  zero.set("tile_size_y", int64_t(0));
  EXPECT_FALSE(onA100->workload(zero).ok());
  auto missing = *c;
  missing.values.erase("tile_stride_x");
  EXPECT_FALSE(onA100->workload(missing).ok());
}

// The estimate as the search's prior saves trials on the RTX 2080 Ti's Xgemm. Its two-warp tiles
// (64x128, A and B read directly) used to rank first, 2 % ahead of the measured best, because
// their wave's last block was costed at the whole SM's rate; the first batch landed on those 226
// look-alikes (0.69-0.88 of the best) and the search stayed: 190 trials against a cold 103 (seeds
// 0-2; 186 / 117 at the median of 20). Now the measured best ranks 48th and the prior's search
// needs 26. The control is the cold search itself, on the same seeds.
TEST(KernelTunerModels, TheEstimateAsPriorSavesTrialsOnTheRtx2080Ti) {
  const measure::ReplayTable t = table("gemm_RTX_2080_Ti");
  ASSERT_GT(t.results.size(), 1000u);
  auto model = bench::kernelTunerModel("gemm_RTX_2080_Ti");
  ASSERT_TRUE(model.has_value());
  std::vector<int> cold, prior;
  for (int seed = 0; seed < 3; ++seed) {
    cold.push_back(trialsTo95(t, nullptr, seed));
    prior.push_back(trialsTo95(t, &*model, seed));
  }
  EXPECT_LT(median3(prior), median3(cold)) << "prior " << prior[0] << " " << prior[1] << " " << prior[2] << ", cold " << cold[0]
                                            << " " << cold[1] << " " << cold[2];
}
