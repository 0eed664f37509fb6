// Tests the analytic estimates of Tessera's GPU kernels: every family and vendor gives a positive
// time and a named bound; the model follows the kernels' structure (a causal mask skips about half
// the key blocks, GQA shares K/V traffic, a larger problem never runs faster, a block that cannot
// fit ranks last); the estimate measurer checks configs through ptxas / the AMDGPU backend and
// marks its results estimated; the ranked strategy proposes legal configs best-predicted first.
#include <gtest/gtest.h>

#include "ir/builders.h"
#include "measure/estimate.h"
#include "search/space.h"
#include "search/strategy.h"

using namespace tessera;
using namespace tessera::search;
using namespace tessera::measure;

namespace {

ir::Kernel gemm(int64_t m, int64_t n, int64_t k, ir::ScalarType dt = ir::ScalarType::F16) {
  ir::GemmSpec g;
  g.m = m;
  g.n = n;
  g.k = k;
  g.dtype = dt;
  return *ir::buildGemm(g);
}

ir::Kernel attention(bool causal, int64_t headsKv = 0) {
  ir::AttentionSpec a;
  a.heads = 16;
  a.heads_kv = headsKv;
  a.seq_q = 2048;
  a.head_dim = 128;
  a.causal = causal;
  a.dtype = ir::ScalarType::F16;
  return *ir::buildAttention(a);
}

KernelEstimate estimateDefault(const ir::Kernel& k, const std::string& target) {
  const TargetDesc t = *getTarget(target);
  auto space = makeSpace(k, t);
  EXPECT_TRUE(space.ok());
  auto e = estimateKernel(k, space->defaults(), t);
  EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().message);
  return e.ok() ? *e : KernelEstimate{};
}

}  // namespace

TEST(Estimate, EveryFamilyAndVendorHasATimeAndABound) {
  ir::ElementwiseSpec ew;
  ew.expr = "y = gelu(x + b)";
  ew.shape = {4096, 4096};
  ew.shapes["b"] = {4096};
  ew.dtype = ir::ScalarType::F16;
  const ir::Kernel kernels[] = {gemm(1024, 1024, 1024), attention(true, 4), *ir::buildElementwise(ew)};
  for (const auto& k : kernels)
    for (const char* target : {"sm_80", "sm_90", "gfx90a", "gfx942", "gfx1100"}) {
      KernelEstimate e = estimateDefault(k, target);
      EXPECT_GT(e.model.timeUs, 0) << k.name << " on " << target;
      EXPECT_TRUE(e.model.bound == "compute" || e.model.bound == "memory" || e.model.bound == "latency" ||
                  e.model.bound == "launch")
          << e.model.bound;
      EXPECT_FALSE(e.facts.empty());
      EXPECT_GE(e.model.terms.size(), 5u);
    }
  // A bandwidth-bound chain is memory-bound on every GPU.
  EXPECT_EQ(estimateDefault(kernels[2], "sm_90").model.bound, "memory");
}

TEST(Estimate, FollowsTheKernelsStructure) {
  // Causal attention visits about half of the key blocks.
  double full = estimateDefault(attention(false), "sm_90").workload.flopsPerBlock;
  double causal = estimateDefault(attention(true), "sm_90").workload.flopsPerBlock;
  EXPECT_GT(causal, 0.45 * full);
  EXPECT_LT(causal, 0.60 * full);
  // GQA: four query heads share one K/V head: less DRAM traffic.
  EXPECT_LT(estimateDefault(attention(false, 4), "sm_90").workload.dramBytes,
            estimateDefault(attention(false), "sm_90").workload.dramBytes);
  // A larger problem is never predicted faster.
  EXPECT_LT(estimateDefault(gemm(1024, 1024, 1024), "gfx942").model.timeUs,
            estimateDefault(gemm(4096, 4096, 4096), "gfx942").model.timeUs);
  // The matrix path on the table's f16 targets; FMA pipes for f32.
  EXPECT_TRUE(estimateDefault(gemm(1024, 1024, 1024), "sm_90").workload.matrixCores);
  EXPECT_FALSE(estimateDefault(gemm(1024, 1024, 1024, ir::ScalarType::F32), "sm_90").workload.matrixCores);
}

// The Hopper GEMM (wgmma + TMA) is costed at the table's full f16/bf16 peak, where mma.sync gets
// its share of it: on the same H100 its 4096^3 default is predicted well ahead of sm_90's mma.sync
// default and below the peak; split-K raises the block count of a tile-starved shape and adds its
// partials to the L2 traffic.
TEST(Estimate, WarpgroupGemmRunsAtTheFullTensorPeak) {
  for (ir::ScalarType dt : {ir::ScalarType::F16, ir::ScalarType::BF16}) {
    ir::Kernel k = gemm(4096, 4096, 4096, dt);
    const TargetDesc t = *getTarget("sm_90a");
    auto space = makeSpace(k, t);
    ASSERT_TRUE(space.ok());
    ASSERT_EQ(std::get<std::string>(space->defaults().values.at("strategy")), "wgmma");
    KernelEstimate wg = estimateDefault(k, "sm_90a");
    EXPECT_TRUE(wg.workload.matrixCores);
    EXPECT_DOUBLE_EQ(wg.workload.pipePeakGflops, t.computePeakGflops(dt));
    const double flops = 2.0 * 4096.0 * 4096.0 * 4096.0;
    EXPECT_GT(wg.model.timeUs * 1e-6 * t.computePeakGflops(dt) * 1e9, flops);  // never past the peak
    if (dt == ir::ScalarType::F16) {
      KernelEstimate ms = estimateDefault(k, "sm_90");
      EXPECT_LT(1.3 * wg.model.timeUs, ms.model.timeUs) << wg.model.timeUs << " vs " << ms.model.timeUs;
    }
    bool named = false;
    for (const auto& [key, value] : wg.facts) named |= key == "MMA" && value.find("wgmma") != std::string::npos;
    EXPECT_TRUE(named);
  }
  ir::Kernel k = gemm(1024, 1024, 16384);
  const TargetDesc t = *getTarget("sm_90a");
  auto space = makeSpace(k, t);
  ASSERT_TRUE(space.ok());
  ir::Config one = space->defaults();
  for (auto [name, v] : {std::pair{"BM", 128}, {"BN", 256}, {"TM", 64}, {"TN", 256}, {"STAGES", 4}, {"SPLITK", 1}})
    one.set(name, int64_t(v));  // 32 tiles of 128x256
  ir::Config four = one;
  four.set("SPLITK", int64_t(4));
  auto e1 = estimateKernel(k, one, t), e4 = estimateKernel(k, four, t);
  ASSERT_TRUE(e1.ok() && e4.ok()) << (e1.ok() ? e4.error().message : e1.error().message);
  EXPECT_EQ(e4->workload.blocks, 4 * e1->workload.blocks);
  EXPECT_GT(e4->workload.l2Bytes, e1->workload.l2Bytes * 0.99);
  EXPECT_LT(e4->model.timeUs, e1->model.timeUs) << "split-K fills the SMs of a 32-tile problem";
}

// Tensor-core attention (flash-mma) is costed on the tensor pipe: on sm_80 and sm_90 its default
// is predicted several times faster than the FMA-pipe kernel at the same blocks, and says so.
TEST(Estimate, TensorCoreAttentionRunsOnTheMatrixPipe) {
  for (const char* target : {"sm_80", "sm_90"}) {
    const TargetDesc t = *getTarget(target);
    ir::Kernel k = attention(true);
    auto space = makeSpace(k, t);
    ASSERT_TRUE(space.ok());
    ir::Config mma = space->defaults();
    ASSERT_EQ(std::get<std::string>(mma.values.at("strategy")), "flash-mma") << target;
    ir::Config simt = mma;
    simt.set("strategy", std::string("flash-simt"));
    simt.set("STAGES", int64_t(1));
    simt.set("BK", int64_t(32));
    auto em = estimateKernel(k, mma, t), es = estimateKernel(k, simt, t);
    ASSERT_TRUE(em.ok() && es.ok());
    EXPECT_TRUE(em->workload.matrixCores);
    EXPECT_FALSE(es->workload.matrixCores);
    EXPECT_LT(3 * em->model.timeUs, es->model.timeUs) << target << ": " << em->model.timeUs << " vs " << es->model.timeUs;
    bool named = false;
    for (const auto& [key, value] : em->facts) named |= key == "MMA" && value.find("mma.sync") != std::string::npos;
    EXPECT_TRUE(named);
  }
}

// bf16 GEMMs on sm_80-90 default to the lane-level mma.sync kernel: the model puts it on the tensor
// pipe (not the FMA pipes simt uses), several times faster than simt; a batched GEMM is one launch.
TEST(Estimate, LaneMmaGemmRunsOnTheTensorPipeInOneLaunch) {
  for (const char* target : {"sm_80", "sm_86", "sm_89", "sm_90"}) {
    const TargetDesc t = *getTarget(target);
    ir::Kernel k = gemm(4096, 4096, 4096, ir::ScalarType::BF16);
    auto space = makeSpace(k, t);
    ASSERT_TRUE(space.ok()) << space.error().str();
    ir::Config lane = space->defaults();
    ASSERT_EQ(std::get<std::string>(lane.values.at("strategy")), "mma-lane") << target;
    ir::Config simt = *ir::Config::parseAssignments("strategy=simt,BM=64,BN=64,BK=16,TM=4,TN=4,VEC=8,STAGES=1");
    auto el = estimateKernel(k, lane, t), es = estimateKernel(k, simt, t);
    ASSERT_TRUE(el.ok() && es.ok()) << (el.ok() ? es.error().str() : el.error().str());
    EXPECT_TRUE(el->workload.matrixCores);
    EXPECT_FALSE(es->workload.matrixCores);
    // GeForce chips (sm_86, sm_89) accumulate in f32 at half their f16 rate: about twice the FMA
    // peak there, eight times on the data-centre chips.
    EXPECT_GT(el->workload.pipePeakGflops, 1.5 * t.peakGflopsF32) << target;
    EXPECT_LT(2 * el->model.timeUs, es->model.timeUs) << target << ": " << el->model.timeUs << " vs " << es->model.timeUs;
    bool named = false;
    for (const auto& [key, value] : el->facts) named |= key == "MMA" && value.find("mma.sync") != std::string::npos;
    EXPECT_TRUE(named);
  }
  // Batch 64 of 256^3 (f16): mma-lane is the default, one launch of 64 x tiles blocks.
  ir::GemmSpec g;
  g.batch = 64; g.m = 256; g.n = 256; g.k = 256; g.dtype = ir::ScalarType::F16;
  ir::Kernel kb = *ir::buildGemm(g);
  const TargetDesc t = *getTarget("sm_90");
  auto space = makeSpace(kb, t);
  ASSERT_TRUE(space.ok());
  ir::Config d = space->defaults();
  ASSERT_EQ(std::get<std::string>(d.values.at("strategy")), "mma-lane");
  auto e = estimateKernel(kb, d, t);
  ASSERT_TRUE(e.ok()) << e.error().str();
  EXPECT_EQ(e->workload.launches, 1);
  EXPECT_EQ(e->workload.blocks, 64 * 4);
  ir::Config perBatch = d;  // the transform-built mma.sync kernel launches once per batch
  perBatch.set("strategy", std::string("mma"));
  auto ep = estimateKernel(kb, perBatch, t);
  ASSERT_TRUE(ep.ok()) << ep.error().str();
  EXPECT_EQ(ep->workload.launches, 64);
  EXPECT_LT(e->model.timeUs, ep->model.timeUs);
}

// Matrix-core attention on CDNA (flash-mfma) is costed on the matrix pipe: on gfx90a and gfx942
// its default is predicted several times faster than the FMA-pipe kernel at the same blocks,
// names its MFMA shape, and the 32x32x8 shape is costed too.
TEST(Estimate, MatrixCoreAttentionRunsOnTheMatrixPipeOnCdna) {
  for (const char* target : {"gfx90a", "gfx942"}) {
    const TargetDesc t = *getTarget(target);
    ir::Kernel k = attention(true);
    auto space = makeSpace(k, t);
    ASSERT_TRUE(space.ok());
    ir::Config mfma = space->defaults();
    ASSERT_EQ(std::get<std::string>(mfma.values.at("strategy")), "flash-mfma") << target;
    ir::Config simt = mfma;
    simt.set("strategy", std::string("flash-simt"));
    simt.set("STAGES", int64_t(1));
    simt.set("BK", int64_t(32));
    auto em = estimateKernel(k, mfma, t), es = estimateKernel(k, simt, t);
    ASSERT_TRUE(em.ok() && es.ok()) << (em.ok() ? es.error().message : em.error().message);
    EXPECT_TRUE(em->workload.matrixCores);
    EXPECT_FALSE(es->workload.matrixCores);
    EXPECT_GT(em->workload.pipePeakGflops, 4 * t.peakGflopsF32) << target;
    EXPECT_LT(3 * em->model.timeUs, es->model.timeUs) << target << ": " << em->model.timeUs << " vs " << es->model.timeUs;
    bool named = false;
    for (const auto& [key, value] : em->facts) named |= key == "MMA" && value.find("mfma 16x16x16") != std::string::npos;
    EXPECT_TRUE(named);
    ir::Config big = mfma;
    big.set("MFMA", std::string("32x32x8"));
    big.set("WAVES", int64_t(2));
    auto eb = estimateKernel(k, big, t);
    ASSERT_TRUE(eb.ok()) << eb.error().message;
    EXPECT_TRUE(eb->workload.matrixCores);
    EXPECT_GT(eb->model.timeUs, 0);
  }
}

// sm_90a's flash-wgmma (offered beside flash-mma): on the matrix pipe at wgmma's share of the peak
// (twice mma.sync's on Hopper), named as wgmma, and a legal point of the space.
TEST(Estimate, WgmmaAttentionUsesTheWarpgroupPeak) {
  const TargetDesc t = *getTarget("sm_90a");
  ir::Kernel k = attention(true);
  auto space = makeSpace(k, t);
  ASSERT_TRUE(space.ok());
  ir::Config mma = space->defaults();
  ir::Config wg = mma;
  wg.set("strategy", std::string("flash-wgmma"));
  wg.set("BQ", int64_t(128));
  wg.set("BK", int64_t(64));
  wg.set("STAGES", int64_t(2));
  auto why = space->check(wg);
  ASSERT_FALSE(why.has_value()) << *why;
  auto em = estimateKernel(k, mma, t), ew = estimateKernel(k, wg, t);
  ASSERT_TRUE(em.ok() && ew.ok());
  EXPECT_TRUE(ew->workload.matrixCores);
  EXPECT_GT(ew->workload.pipePeakGflops, 1.5 * em->workload.pipePeakGflops);
  bool named = false;
  for (const auto& [key, value] : ew->facts) named |= key == "MMA" && value.find("wgmma") != std::string::npos;
  EXPECT_TRUE(named);
}

// PIPE=fa3: the same products with a producer warpgroup: the consumers issue no copies and no P
// stores, so the issue term improves over fa2 at the same tiles; named as FlashAttention-3.
TEST(Estimate, Fa3AttentionFreesTheConsumersIssueSlots) {
  const TargetDesc t = *getTarget("sm_90a");
  ir::Kernel k = attention(true);
  auto space = makeSpace(k, t);
  ASSERT_TRUE(space.ok());
  ir::Config fa2 = space->defaults();
  fa2.set("strategy", std::string("flash-wgmma"));
  fa2.set("BQ", int64_t(128));
  fa2.set("BK", int64_t(64));
  fa2.set("STAGES", int64_t(2));
  ir::Config fa3 = fa2;
  fa3.set("PIPE", std::string("fa3"));
  for (const auto& c : {fa2, fa3}) {
    auto why = space->check(c);
    ASSERT_FALSE(why.has_value()) << *why;
  }
  auto e2 = estimateKernel(k, fa2, t), e3 = estimateKernel(k, fa3, t);
  ASSERT_TRUE(e2.ok() && e3.ok());
  EXPECT_GT(e3->workload.issueEfficiency, e2->workload.issueEfficiency);
  EXPECT_EQ(e3->workload.threadsPerBlock, e2->workload.threadsPerBlock + 128);  // the producer
  bool named = false;
  for (const auto& [key, value] : e3->facts) named |= key == "strategy" && value.find("FlashAttention-3") != std::string::npos;
  EXPECT_TRUE(named);
}

TEST(Estimate, ABlockThatCannotFitRanksLast) {
  ir::Kernel k = gemm(4096, 4096, 4096);
  const TargetDesc t = *getTarget("sm_90");
  auto space = makeSpace(k, t);
  ASSERT_TRUE(space.ok());
  ir::Config big = space->defaults();
  big.set("BM", int64_t(256));
  big.set("BN", int64_t(256));
  big.set("TM", int64_t(64));
  big.set("TN", int64_t(64));
  big.set("BK", int64_t(16));
  big.set("STAGES", int64_t(1));
  auto e = estimateKernel(k, big, t);
  ASSERT_TRUE(e.ok());
  EXPECT_FALSE(e->model.fits);  // 16 warps of ~200 registers: more than an SM's register file
  auto prior = estimatePrior(k, t);
  EXPECT_FALSE(prior(big).has_value());
  EXPECT_TRUE(prior(space->defaults()).has_value());
}

TEST(Estimate, MeasurerChecksThroughTheCompilerAndMarksEstimates) {
  ir::Kernel k = gemm(512, 384, 256);
  for (const char* target : {"sm_90", "gfx942"}) {
    const TargetDesc t = *getTarget(target);
    auto space = makeSpace(k, t);
    ASSERT_TRUE(space.ok());
    auto m = makeEstimateMeasurer(k, t);
    auto rs = *m->measure({space->defaults()});
    ASSERT_EQ(rs.size(), 1u);
    EXPECT_EQ(rs[0].status, TrialStatus::Ok) << rs[0].message;
    EXPECT_TRUE(rs[0].estimated);
    EXPECT_FALSE(rs[0].estimator.empty());
    EXPECT_FALSE(rs[0].bound.empty());
    EXPECT_GT(rs[0].samples.median_us, 0);
    EXPECT_GT(rs[0].compileSeconds, 0);  // it went through the compiler
    auto again = *m->remeasure({space->defaults()}, 3);
    EXPECT_EQ(again[0].samples.median_us, rs[0].samples.median_us);  // a prediction does not drift
  }
}

TEST(Estimate, RankedStrategyProposesLegalConfigsBestPredictedFirst) {
  ir::Kernel k = gemm(1024, 1024, 1024);
  const TargetDesc t = *getTarget("gfx942");
  auto space = makeSpace(k, t);
  ASSERT_TRUE(space.ok());
  Prior prior = estimatePrior(k, t);
  SearchSettings s;
  s.strategy = "ranked";
  auto strat = makeStrategy(s, *space, nullptr, nullptr, &prior);
  ASSERT_TRUE(strat.ok()) << strat.error().message;
  auto first = (*strat)->propose(8);
  auto next = (*strat)->propose(8);
  ASSERT_EQ(first.size(), 8u);
  double worstFirst = 0, bestNext = 1e30;
  for (const auto& c : first) {
    EXPECT_FALSE(space->check(c)) << c.str();
    worstFirst = std::max(worstFirst, prior(c).value_or(1e30));
  }
  for (const auto& c : next) bestNext = std::min(bestNext, prior(c).value_or(1e30));
  EXPECT_LE(worstFirst, bestNext);
  EXPECT_FALSE(makeStrategy(s, *space, nullptr, nullptr, nullptr).ok());  // ranked needs a prior
}
