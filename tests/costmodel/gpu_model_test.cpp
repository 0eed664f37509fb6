// Tests the analytic GPU model's invariants (more work is never faster, a block that cannot be
// resident is flagged, the occupancy limiter and the bound are named, wave quantization, Little's
// law, serial latency, the FMA issue slots and a warp's one scheduler) and the warp-level access costs (bank cycles,
// broadcast, L1 wavefronts) on the table's GPU targets.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "costmodel/gpu_access.h"
#include "costmodel/gpu_model.h"
#include "targets/target_desc.h"

using namespace tessera;
using namespace tessera::costmodel;

namespace {

TargetDesc target(const std::string& name) {
  auto t = getTarget(name);
  EXPECT_TRUE(t.ok()) << name;
  return t.ok() ? *t : TargetDesc{};
}

// A compute-bound FMA kernel on `t`: many FLOPs per block, little traffic, 256 threads.
GpuWorkload computeBound(const TargetDesc& t) {
  GpuWorkload w;
  w.pipePeakGflops = t.peakGflopsF32;
  w.blocks = 1000;
  w.threadsPerBlock = 256;
  w.regsPerThread = 64;
  w.flopsPerBlock = 2e8;
  w.issueEfficiency = 1.0;
  w.independentOps = 8;
  w.dramBytes = 1e6;
  w.l2Bytes = 1e6;
  w.bytesInFlightPerThread = 64;
  return w;
}

// A streaming kernel: a few FLOPs per byte.
GpuWorkload memoryBound(const TargetDesc& t) {
  GpuWorkload w = computeBound(t);
  w.flopsPerBlock = 1e4;
  w.dramBytes = 4e9;
  w.l2Bytes = 4e9;
  return w;
}

double timeOf(const GpuWorkload& w, const TargetDesc& t) { return estimateLaunch(w, t).timeUs; }

std::vector<int64_t> addrs(int lanes, int64_t stride, int64_t base = 0) {
  std::vector<int64_t> a;
  for (int l = 0; l < lanes; ++l) a.push_back(base + l * stride);
  return a;
}

}  // namespace

TEST(GpuModel, MoreWorkIsNeverFaster) {
  for (const char* name : {"sm_80", "sm_86", "sm_90", "gfx90a", "gfx942"}) {
    TargetDesc t = target(name);
    for (GpuWorkload base : {computeBound(t), memoryBound(t)}) {
      ASSERT_GT(timeOf(base, t), 0);
      double last = 0;
      for (double scale : {1.0, 1.5, 2.0, 4.0}) {
        GpuWorkload w = base;
        w.flopsPerBlock *= scale;
        double us = timeOf(w, t);
        EXPECT_GE(us, last) << name << " flops x" << scale;
        last = us;
      }
      last = 0;
      for (double scale : {1.0, 2.0, 8.0}) {
        GpuWorkload w = base;
        w.dramBytes *= scale;
        w.l2Bytes *= scale;
        w.smemBytesPerBlock = 1e5 * scale;
        w.l1BytesPerBlock = 1e5 * scale;
        double us = timeOf(w, t);
        EXPECT_GE(us, last) << name << " bytes x" << scale;
        last = us;
      }
    }
  }
}

TEST(GpuModel, BlockThatDoesNotFitIsFlagged) {
  TargetDesc t = target("sm_86");
  GpuWorkload w = computeBound(t);
  w.smemPerBlock = t.smemPerSM + 1;
  auto e = estimateLaunch(w, t);
  EXPECT_FALSE(e.fits);
  EXPECT_EQ(e.occupancyLimiter, "shared memory");
  EXPECT_GT(e.timeUs, 0);  // still ranked, as if one block fitted
  w.smemPerBlock = 0;
  w.threadsPerBlock = 1024;
  w.regsPerThread = 255;  // 255 x 1024 registers exceed the 64K register file
  e = estimateLaunch(w, t);
  EXPECT_FALSE(e.fits);
  EXPECT_EQ(e.occupancyLimiter, "registers");
}

TEST(GpuModel, OccupancyLimiterIsNamed) {
  TargetDesc t = target("sm_80");
  GpuWorkload w = computeBound(t);
  w.threadsPerBlock = 1024;
  w.regsPerThread = 32;
  EXPECT_EQ(estimateLaunch(w, t).occupancyLimiter, "threads");  // 2048 threads per SM: 2 blocks
  EXPECT_EQ(estimateLaunch(w, t).blocksPerUnit, 2);
  w.threadsPerBlock = 32;
  EXPECT_EQ(estimateLaunch(w, t).occupancyLimiter, "blocks per unit");  // 32 blocks of one warp
  w.threadsPerBlock = 256;
  w.regsPerThread = 128;  // 128 x 256 = 32K registers: 2 blocks
  EXPECT_EQ(estimateLaunch(w, t).occupancyLimiter, "registers");
  EXPECT_EQ(estimateLaunch(w, t).blocksPerUnit, 2);
  w.regsPerThread = 32;
  w.smemPerBlock = 60 * 1024;  // 164 KB per SM, 1 KB reserved per block: 2 blocks
  EXPECT_EQ(estimateLaunch(w, t).occupancyLimiter, "shared memory");
  EXPECT_EQ(estimateLaunch(w, t).blocksPerUnit, 2);
  // CDNA: VGPRs per SIMD lane (512), granules of 8, 8 waves per SIMD.
  TargetDesc a = target("gfx90a");
  w.smemPerBlock = 0;
  w.threadsPerBlock = 256;  // 4 waves
  w.regsPerThread = 256;    // 2 waves per SIMD = 8 per CU: 2 blocks
  EXPECT_EQ(estimateLaunch(w, a).occupancyLimiter, "registers");
  EXPECT_EQ(estimateLaunch(w, a).blocksPerUnit, 2);
}

TEST(GpuModel, BoundsAreNamed) {
  TargetDesc t = target("sm_90");
  EXPECT_EQ(estimateLaunch(computeBound(t), t).bound, "compute");
  EXPECT_EQ(estimateLaunch(memoryBound(t), t).bound, "memory");
  GpuWorkload tiny = computeBound(t);
  tiny.blocks = 1;
  tiny.flopsPerBlock = 1e3;
  tiny.dramBytes = tiny.l2Bytes = 1e3;
  EXPECT_EQ(estimateLaunch(tiny, t).bound, "launch");
  GpuWorkload chain = computeBound(t);
  chain.flopsPerBlock = 1e5;
  chain.serialSteps = 4096;  // dependent loads, nothing to overlap them with
  EXPECT_EQ(estimateLaunch(chain, t).bound, "latency");
  // Every term is reported, in the documented order.
  std::vector<std::string> names;
  for (const auto& term : estimateLaunch(computeBound(t), t).terms) names.push_back(term.name);
  EXPECT_EQ(names, (std::vector<std::string>{"compute", "dram", "l2", "in-flight", "shared", "l1", "latency", "launch"}));
}

// Issue 48: a memory-bound estimate names the level that binds and cites that level's rate. An
// L2-bound launch (4x the DRAM bytes in L2 traffic: a GEMM's tiles re-read from L2) is not called
// DRAM-bound nor held to DRAM's bandwidth; the DRAM-bound neighbour is, and every estimate's
// binding term is its largest.
TEST(GpuModel, TheBindingTermIsNamedWithItsOwnRate) {
  TargetDesc t = target("sm_80");
  GpuWorkload l2Bound = memoryBound(t);
  l2Bound.dramBytes = 1e9;
  l2Bound.l2Bytes = 4e9 * 3;
  GpuEstimate e = estimateLaunch(l2Bound, t);
  EXPECT_EQ(e.bound, "memory");
  EXPECT_EQ(e.binding, "l2");
  EXPECT_EQ(e.bindingRate.rfind("L2 at ", 0), 0u) << e.bindingRate;
  EXPECT_EQ(e.bindingRate.find("DRAM at"), std::string::npos) << e.bindingRate;
  GpuEstimate dram = estimateLaunch(memoryBound(t), t);  // equal bytes: DRAM is the slower level
  EXPECT_EQ(dram.binding, "dram");
  EXPECT_EQ(dram.bindingRate.rfind("DRAM at ", 0), 0u) << dram.bindingRate;
  for (const GpuEstimate& x : {e, dram, estimateLaunch(computeBound(t), t)}) {
    const GpuEstimate::Term* largest = nullptr;
    for (const auto& term : x.terms)
      if (term.name != "launch" && term.name != "latency" && (!largest || term.us > largest->us)) largest = &term;
    ASSERT_NE(largest, nullptr);
    if (x.binding != "latency") {
      EXPECT_EQ(x.binding, largest->name);
    }
  }
  EXPECT_EQ(estimateLaunch(computeBound(t), t).bindingRate.rfind("compute at ", 0), 0u);
}

TEST(GpuModel, OneBlockMoreThanFullWavesCostsAboutAWave) {
  // Blocks of one warp without independent work: a block needs the other resident blocks to hide
  // its FMA latency, so the lone block of a second wave takes as long as the whole first wave.
  TargetDesc t = target("sm_86");
  GpuWorkload w = computeBound(t);
  w.threadsPerBlock = 32;
  w.independentOps = 1;
  const int bpu = residentBlocks(w, t);
  ASSERT_EQ(bpu, t.maxBlocksPerSM);
  w.blocks = int64_t(t.units) * bpu;
  auto full = estimateLaunch(w, t);
  EXPECT_EQ(full.waves, 1);
  EXPECT_NEAR(full.waveEfficiency, 1.0, 1e-9);
  EXPECT_EQ(full.bound, "compute");
  w.blocks += 1;
  auto more = estimateLaunch(w, t);
  EXPECT_EQ(more.waves, 2);
  EXPECT_LT(more.waveEfficiency, 0.51);
  EXPECT_NEAR(more.timeUs / full.timeUs, 2.0, 0.1);
  // A block that fills its unit alone (8 warps, 8 independent FMAs each) finishes the extra wave
  // in its share of one: 1 + 1/bpu.
  GpuWorkload big = computeBound(t);
  const int bigBpu = residentBlocks(big, t);
  big.blocks = int64_t(t.units) * bigBpu;
  double one = timeOf(big, t);
  big.blocks += 1;
  EXPECT_NEAR(timeOf(big, t) / one, 1.0 + 1.0 / bigBpu, 0.05);
}

// A warp stays on one of the SM's four schedulers: a wave's last block of two warps, each with
// plenty of independent FMAs, runs on two of them, at half the SM's rate. The RTX 2080 Ti Xgemm's
// 64-thread tiles ranked ahead of its measured best while their tail block ran at the whole SM's
// rate. Control: a block of four warps fills the schedulers alone, and its tail costs its share.
TEST(GpuModel, AWarpRunsOnOneScheduler) {
  TargetDesc t = target("sm_75");
  auto tail = [&](int64_t threads) {
    GpuWorkload w = computeBound(t);
    w.threadsPerBlock = threads;
    w.independentOps = 128;
    w.flopsPerBlock = 2e8 * double(threads) / 256;  // the same work per thread
    const int bpu = residentBlocks(w, t);
    w.blocks = int64_t(t.units) * bpu;
    const double full = timeOf(w, t);
    w.blocks += t.units;  // one more block per unit
    return std::pair{(timeOf(w, t) - full) / full, bpu};
  };
  auto [two, bpu2] = tail(64);
  auto [four, bpu4] = tail(128);
  // The extra block's share of a full wave: 1/bpu at the SM's rate (plus the small terms that
  // overlap), twice that on half its pipes.
  EXPECT_NEAR(four * bpu4, 1.0, 0.15);
  EXPECT_NEAR(two * bpu2, 2.0, 0.25);
  EXPECT_NEAR((two * bpu2) / (four * bpu4), 2.0, 0.1);
}

TEST(GpuModel, LittlesLawTermShrinksWithBytesInFlight) {
  TargetDesc t = target("sm_80");
  GpuWorkload w = memoryBound(t);
  auto term = [&](double inflight) {
    w.bytesInFlightPerThread = inflight;
    for (const auto& x : estimateLaunch(w, t).terms)
      if (x.name == "in-flight") return x.us;
    return -1.0;
  };
  double a = term(4), b = term(16), c = term(64);
  EXPECT_GT(a, b);
  EXPECT_GT(b, c);
  EXPECT_NEAR(a / b, 4.0, 1e-6);
}

TEST(GpuModel, StagesHideSerialLatency) {
  TargetDesc t = target("sm_90");
  GpuWorkload w = computeBound(t);
  w.flopsPerBlock = 1e6;
  w.serialSteps = 256;
  auto latency = [&](int stages) {
    w.stages = stages;
    for (const auto& x : estimateLaunch(w, t).terms)
      if (x.name == "latency") return x.us;
    return -1.0;
  };
  EXPECT_GT(latency(1), latency(2));
  EXPECT_GT(latency(2), latency(4));
  // A shorter round (an L2 hit instead of DRAM) costs less.
  w.stages = 1;
  double dram = latency(1);
  w.serialStepCycles = latencyCycles(MemLevel::L2, t.vendor);
  EXPECT_LT(latency(1), dram);
}

// A staging prologue (all serial steps before the block's work): the blocks a wave starts together
// wait together, so the unit's whole work follows the waits; steps with work between them (a K
// loop) overlap other blocks' work and cost one block's work per step. With the unit's blocks
// computing after the waits, the latency term is the waits plus the compute term.
TEST(GpuModel, APrologueWaitsBeforeTheWavesWork) {
  TargetDesc t = target("sm_86");
  GpuWorkload w = computeBound(t);
  w.serialSteps = 20;
  auto terms = [&](bool prologue) {
    w.serialPrologue = prologue;
    double lat = -1, compute = -1;
    for (const auto& x : estimateLaunch(w, t).terms) {
      if (x.name == "latency") lat = x.us;
      if (x.name == "compute") compute = x.us;
    }
    return std::pair{lat, compute};
  };
  const auto [overlapped, compute] = terms(false);
  const auto [prologue, compute2] = terms(true);
  EXPECT_EQ(compute, compute2);
  EXPECT_GT(prologue, overlapped);
  EXPECT_GT(prologue, compute) << "the waits add to the wave's work";
}

TEST(GpuModel, FmaIssueSlotsFollowTheChip) {
  // Half the instructions are FMAs: on Turing/GA100-style SMs (16 FP32 lanes per scheduler) an
  // FMA leaves a free issue slot, on GA102 and Hopper (32 lanes) it does not.
  TargetDesc a100 = target("sm_80"), ga102 = target("sm_86");
  GpuWorkload w = computeBound(a100);
  w.issueEfficiency = 0.5;
  GpuWorkload full = w;
  full.issueEfficiency = 1.0;
  EXPECT_NEAR(timeOf(w, a100) / timeOf(full, a100), 1.0, 0.02);
  EXPECT_NEAR(timeOf(w, ga102) / timeOf(full, ga102), 2.0, 0.1);
  // Matrix cores count the instructions around the MMAs directly.
  w.matrixCores = full.matrixCores = true;
  w.pipePeakGflops = full.pipePeakGflops = a100.peakGflopsF16;
  EXPECT_NEAR(timeOf(w, a100) / timeOf(full, a100), 2.0, 0.1);
}

TEST(GpuAccess, SharedBankCyclesAndBroadcast) {
  EXPECT_EQ(sharedCycles(addrs(32, 4), 4), 1);    // consecutive words: one per bank
  EXPECT_EQ(sharedCycles(addrs(32, 8), 4), 2);    // stride 2: two words per bank
  EXPECT_EQ(sharedCycles(addrs(32, 128), 4), 32); // stride 32 words: all in bank 0
  EXPECT_EQ(sharedCycles(addrs(32, 0), 4), 1);    // one word: broadcast
  EXPECT_EQ(sharedCycles(addrs(32, 16), 16), 4);  // 512 bytes: four phases of 128
  EXPECT_EQ(sharedCycles(addrs(32, 32), 16), 8);  // 16 B at a 32 B stride: 2-way in each phase
  EXPECT_EQ(sharedCycles(addrs(64, 4), 4), 2);    // wave64: two sets of 32 lanes
  // 16 lanes per row of 30 floats (Kernel Tuner's convolution, 16 threads wide, no padding):
  // the second row's words land on the first row's banks.
  std::vector<int64_t> rows;
  for (int l = 0; l < 32; ++l) rows.push_back(((l / 16) * 30 + l % 16) * 4);
  EXPECT_EQ(sharedCycles(rows, 4), 2);
  rows.clear();
  for (int l = 0; l < 32; ++l) rows.push_back(((l / 16) * 48 + l % 16) * 4);  // padded to 48
  EXPECT_EQ(sharedCycles(rows, 4), 1);
}

// AMD's unaligned access mode: a thread's consecutive dwords merged into one wide LDS read at a
// dword-aligned address are served lane by lane, a clock per 8 bytes; the same reads at aligned
// addresses keep the banked rate.
TEST(GpuAccess, UnderAlignedWideSharedReadsGoLaneByLane) {
  EXPECT_EQ(sharedCycles(addrs(64, 4), 8), 64);        // thread l reads words l, l+1: lane by lane
  EXPECT_EQ(sharedCycles(addrs(64, 4), 16), 128);      // 16 bytes: two clocks a lane
  EXPECT_EQ(sharedCycles(addrs(64, 4), 12), 128);      // 12 bytes (ds_read_b96): two clocks a lane
  EXPECT_EQ(sharedCycles(addrs(64, 16, 4), 16), 128);  // an aligned stride, a dword offset
  // Controls: aligned wide reads are banked as before.
  EXPECT_EQ(sharedCycles(addrs(64, 8), 8), 4);
  EXPECT_EQ(sharedCycles(addrs(64, 16), 16), 8);
  EXPECT_EQ(sharedCycles(addrs(64, 16), 12), 13);  // phases of 10 lanes, 2-way (lanes 8 apart), the last 4 lanes 1
  EXPECT_EQ(sharedCycles(addrs(64, 4), 4), 2);
}

TEST(GpuAccess, LinesAndL1Wavefronts) {
  EXPECT_EQ(linesTouched(addrs(32, 4), 4, 128), 1);
  EXPECT_EQ(linesTouched(addrs(32, 4, 4), 4, 128), 2);  // misaligned by one word
  EXPECT_EQ(linesTouched(addrs(32, 4), 4, 32), 4);      // four 32-byte sectors
  EXPECT_EQ(l1Wavefronts(addrs(32, 4), 4, 128, 128), 1);
  EXPECT_EQ(l1Wavefronts(addrs(32, 16), 16, 128, 128), 4);  // 512 bytes at 128 per clock
  EXPECT_EQ(l1Wavefronts(addrs(32, 0), 16, 128, 128), 4);   // broadcast still returns 512 bytes
  EXPECT_EQ(l1Wavefronts(addrs(32, 64), 4, 128, 128), 16);  // a line per two lanes
  EXPECT_EQ(l1Wavefronts(addrs(64, 4), 4, 64, 64), 4);      // CDNA: wave64, 64 B per clock
}

// The bank and line counts against their definitions, written the plain way (a set of words per
// bank, a set of lines), on random warps: aligned strides, negative and scattered addresses, every
// access width. The control: a count off by one word somewhere is caught.
TEST(GpuAccess, CountsMatchTheirDefinitionsOnRandomWarps) {
  auto banked = [](const std::vector<int64_t>& a, int width, int banks) {
    int cycles = 0;
    const size_t perPhase = size_t(std::max(1, 128 / width));
    for (size_t s = 0; s < a.size(); s += perPhase) {
      std::map<int64_t, std::set<int64_t>> words;
      for (size_t l = s; l < std::min(a.size(), s + perPhase); ++l)
        for (int b = 0; b < width; b += 4) words[(((a[l] + b) / 4 % banks) + banks) % banks].insert((a[l] + b) / 4);
      size_t worst = 1;
      for (const auto& w : words) worst = std::max(worst, w.second.size());
      cycles += int(worst);
    }
    return cycles;
  };
  auto lines = [](const std::vector<int64_t>& a, int bytes, int64_t line) {
    std::set<int64_t> seen;
    auto floorDiv = [&](int64_t x) { return x >= 0 ? x / line : (x - line + 1) / line; };
    for (int64_t x : a)
      for (int64_t l = floorDiv(x); l <= floorDiv(x + std::max(1, bytes) - 1); ++l) seen.insert(l);
    return int(seen.size());
  };
  std::mt19937_64 rng(7);
  int compared = 0, offByOne = 0;
  for (int i = 0; i < 4000; ++i) {
    const int width = std::vector<int>{4, 8, 16, 32}[rng() % 4], banks = rng() % 2 ? 32 : 64;
    const int64_t stride = (int64_t(rng() % 40) - 8) * width, base = (int64_t(rng() % 2000) - 1000) * width;
    std::vector<int64_t> a(1 + rng() % 64);
    for (size_t l = 0; l < a.size(); ++l) a[l] = rng() % 4 ? base + int64_t(l) * stride : (int64_t(rng() % 512) - 256) * width;
    EXPECT_EQ(sharedCycles(a, width, banks), banked(a, width, banks)) << i;
    const int64_t line = rng() % 2 ? 128 : 32;
    EXPECT_EQ(linesTouched(a, width, int(line)), lines(a, width, line)) << i;
    ++compared;
    std::vector<int64_t> moved = a;
    moved.back() += 4;  // one lane a word further: the definitions move, or the check is blind
    offByOne += banked(moved, width, banks) != banked(a, width, banks) || lines(moved, width, line) != lines(a, width, line);
  }
  EXPECT_EQ(compared, 4000);
  EXPECT_GT(offByOne, 100) << "the random warps never tell a moved word apart";
}
