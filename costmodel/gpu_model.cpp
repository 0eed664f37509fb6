// Owns the analytic GPU model: occupancy, waves, and the compute / memory / shared / latency /
// launch terms of one launch.
#include "costmodel/gpu_model.h"

#include "targets/occupancy.h"
#include "support/si_format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tessera::costmodel {

namespace {

// Model constants: not chip specifications but typical measured values, the same for every chip
// of a vendor (the ranking depends on their ratios far more than on their exact values).
constexpr double kLaunchUs = 4.0;            // host launch + grid ramp, per launch
constexpr double kDramEfficiency = 0.88;     // sustained share of the quoted DRAM bandwidth
constexpr double kL2Factor = 3.0;            // SM<->L2 bandwidth as a multiple of DRAM's
constexpr double kMemLatencyCycles = 700;    // DRAM load latency under load
constexpr double kFmaLatencyCycles = 4;      // dependent FMA latency
constexpr double kMmaLatencyCycles = 32;     // dependent mma.sync / MFMA latency
constexpr double kSharedBytesPerClock = 128; // shared memory / LDS per SM/CU (32 banks x 4 B)
constexpr double kOverlapShare = 0.1;        // of the non-dominant terms that still adds up
constexpr double kLatencyMargin = 1.05;      // a serial chain this much above throughput is latency-bound

std::string fmt(const char* f, double a, double b = 0, double c = 0) {
  char buf[160];
  std::snprintf(buf, sizeof buf, f, a, b, c);
  return buf;
}

}  // namespace

int residentBlocks(const GpuWorkload& w, const TargetDesc& t, std::string* limiter) {
  const int64_t warp = std::max(t.warpSize, 1);
  const int64_t warps = (std::max<int64_t>(w.threadsPerBlock, 1) + warp - 1) / warp;
  int64_t blocks = std::max(t.maxBlocksPerSM, 1);
  std::string why = "blocks per unit";
  auto limit = [&](int64_t b, const char* what) {
    if (b < blocks) {
      blocks = b;
      why = what;
    }
  };
  limit(std::max(t.maxWarpsPerSM, 1) / warps, "threads");
  // The target's rule, as the code generator's resource reports apply it (targets/occupancy.h).
  occupancyLimits({.threadsPerBlock = w.threadsPerBlock, .registers = std::max(w.regsPerThread, 1),
                   .sharedBytes = w.smemPerBlock},
                  t, limit);
  if (limiter) *limiter = why;
  return int(std::max<int64_t>(blocks, 0));
}

double latencyCycles(MemLevel level, Vendor vendor) {
  const bool amd = vendor == Vendor::Amd;
  switch (level) {
    case MemLevel::Shared: return amd ? 64 : 30;
    case MemLevel::L1: return amd ? 120 : 35;
    case MemLevel::L2: return amd ? 300 : 220;
    case MemLevel::Dram: return kMemLatencyCycles;
  }
  return kMemLatencyCycles;
}

GpuEstimate estimateLaunch(const GpuWorkload& w, const TargetDesc& t) {
  GpuEstimate e;
  std::string limiter = "the compiler's report";
  int bpu = w.blocksPerUnit > 0 ? w.blocksPerUnit : residentBlocks(w, t, &limiter);
  e.fits = bpu > 0 && !w.spills;
  bpu = std::max(bpu, 1);
  e.blocksPerUnit = bpu;
  e.occupancyLimiter = limiter;
  const double units = std::max(t.units, 1);
  const double clockHz = (t.clockGHz > 0 ? t.clockGHz : 1.5) * 1e9;
  const int64_t warp = std::max(t.warpSize, 1);
  const double warpsPerBlock = double((std::max<int64_t>(w.threadsPerBlock, 1) + warp - 1) / warp);
  e.occupancy = t.maxWarpsPerSM > 0 ? std::min(1.0, bpu * warpsPerBlock / t.maxWarpsPerSM) : 0;

  // Waves: full waves of bpu blocks per unit, then a partial one with fewer blocks per unit.
  const double perWave = units * bpu;
  const int64_t full = int64_t(double(w.blocks) / perWave);
  const int64_t rest = w.blocks - int64_t(double(full) * perWave);
  const int restPerUnit = rest > 0 ? int(std::ceil(double(rest) / units)) : 0;
  e.waves = full + (rest > 0 ? 1 : 0);
  e.waveEfficiency = e.waves > 0 ? double(w.blocks) / (double(e.waves) * perWave) : 0;

  // Compute. FMA pipes: FP32 lanes per scheduler from the peak; a warp instruction occupies the
  // pipe warp/lanes clocks while the scheduler issues one instruction per clock, so the other
  // instructions use the slots an FMA leaves (`slots` per FMA: 1 on GA102/Hopper, 2 on Turing,
  // GA100 and CDNA3, 4 on CDNA2's SIMD16 running wave64). Matrix cores: issue efficiency counts
  // the instructions around the MMAs directly (adapters weigh them).
  const double schedulers = double(std::max(t.simdsPerUnit, 1));
  const double lanes = t.peakGflopsF32 > 0 ? t.peakGflopsF32 * 1e9 / (2 * units * schedulers * clockHz) : double(warp);
  const double slots = w.matrixCores ? 1.0 : double(warp) / std::max(lanes, 1.0);
  const double issue = std::min(1.0, slots * std::clamp(w.issueEfficiency, 0.05, 1.0));
  // Latency hiding (Little's law per scheduler): independent operations in flight must cover the
  // pipe's latency times its issue rate (one warp instruction per `slots` clocks for FMAs; an MMA
  // occupies its pipe for several clocks).
  const double latency = w.matrixCores ? kMmaLatencyCycles : kFmaLatencyCycles;
  const double perOpClocks = w.matrixCores ? 8 : std::max(slots, 1.0);
  const double needed = schedulers * latency / perOpClocks;
  // A block whose threads do not fill its last warp issues that warp's instructions for all its
  // lanes: 32 threads on wave64 hardware run at half the rate (every block shape of a space
  // that is not a warp multiple pays this, on AMD's wave64 most of all).
  const double laneUse = double(std::max<int64_t>(w.threadsPerBlock, 1)) / (warpsPerBlock * double(warp));
  // A warp stays on one scheduler (SM sub-partition, SIMD) for its life: fewer resident warps than
  // schedulers leave pipes idle however much independent work each warp has, and the latency to
  // hide is each busy scheduler's. This decides a wave's last blocks: the RTX 2080 Ti Xgemm's
  // 64-thread (two-warp) tiles ran their tail block at the whole SM's rate and ranked 2 % ahead of
  // the measured best (they measure 0.69-0.88 of it).
  auto unitTime = [&](int resident) {
    if (resident <= 0) return 0.0;
    const double warpsHere = resident * warpsPerBlock;
    const double busy = std::min(schedulers, warpsHere);
    double inflight = warpsHere * std::max(w.independentOps, 1.0);
    double hiding = std::min(1.0, inflight / (needed * busy / schedulers));
    double pipes = busy / schedulers;
    double rate = w.pipePeakGflops * 1e9 / units * issue * hiding * laneUse * pipes;
    return rate > 0 ? resident * w.flopsPerBlock / rate : 0.0;
  };
  double compute = (double(full) * unitTime(bpu) + unitTime(restPerUnit)) * 1e6;

  // Memory.
  double dram = w.dramBytes / (t.memBandwidthGBs * 1e9 * kDramEfficiency) * 1e6;
  double l2 = w.l2Bytes / (t.memBandwidthGBs * 1e9 * kL2Factor) * 1e6;
  // Little's law over the whole chip: the bytes one wave keeps in flight, per latency.
  double inflightBytes = units * bpu * double(w.threadsPerBlock) * std::max(w.bytesInFlightPerThread, 1.0);
  double latencySec = kMemLatencyCycles / clockHz;
  double littleBw = inflightBytes / latencySec;
  double inflight = littleBw > 0 ? w.l2Bytes / littleBw * 1e6 : 0;
  // Shared memory and L1 per unit over all waves.
  const double blocksPerUnit = double(full) * bpu + restPerUnit;
  double smemPerUnit = blocksPerUnit * w.smemBytesPerBlock;
  double shared = smemPerUnit / (kSharedBytesPerClock * clockHz) * 1e6;
  const double l1Rate = double(t.l1BytesPerClock > 0 ? t.l1BytesPerClock : kSharedBytesPerClock);
  double l1PerUnit = blocksPerUnit * w.l1BytesPerBlock;
  double l1 = l1PerUnit / (l1Rate * clockHz) * 1e6;
  // Serial rounds per block: each costs its latency plus the block's own work of that step (what
  // the block computes when it has the unit alone). With stages > 1 the loads of the next
  // stages - 1 steps are in flight, so a step waits only for what its own work does not cover.
  // Rounds of different resident blocks overlap each other: the throughput terms above cover
  // the unit when it has enough blocks, this one when it does not.
  const double steps = double(std::max<int64_t>(w.serialSteps, 1));
  const double stepLatency = (w.serialStepCycles > 0 ? w.serialStepCycles : kMemLatencyCycles) / clockHz;
  // A prologue's waits are not filled by other blocks' work: the blocks of a wave start together
  // and finish together (same work), so they stage together and then compute together, wave
  // after wave (the convolution's staged configs measure about the sum of the two on the A100,
  // A4000 and A6000: 64x2 threads, 1x4 tiles, 0.83 ms on the A6000 against 0.43 ms estimated as
  // overlapped). Steps with work between them (a K loop) drift apart and overlap.
  const double stepWork = (w.serialPrologue ? unitTime(bpu) : unitTime(1)) / steps;
  const double stepTime = w.stages > 1 ? std::max(stepWork, stepLatency / double(w.stages - 1)) : stepLatency + stepWork;
  const double tail = double(w.tailRounds) * latencyCycles(MemLevel::L2, t.vendor) / clockHz;
  const double once = double(w.launchRounds) * latencyCycles(MemLevel::L2, t.vendor) / clockHz;
  double lat = (double(e.waves) * (steps * stepTime + tail) + once) * 1e6;
  double launch = double(w.launches) * kLaunchUs;

  const double per = double(w.launches);
  e.terms = {
      {"compute", per * compute,
       formatSi(per * w.flopsPerBlock * double(w.blocks), "FLOP") + fmt(" at %.0f%% issue efficiency", 100 * w.issueEfficiency) +
           (w.matrixCores ? " (matrix cores)" : fmt(" (FMA pipes, %.0f issue slot(s) per FMA)", slots))},
      {"dram", per * dram, formatSi(per * w.dramBytes, "B")},
      {"l2", per * l2, formatSi(per * w.l2Bytes, "B")},
      {"in-flight", per * inflight, formatSi(inflightBytes, "B") + " in flight per wave"},
      {"shared", per * shared, formatSi(smemPerUnit, "B") + " per unit"},
      {"l1", per * l1, formatSi(l1PerUnit, "B") + " per unit"},
      {"latency", per * lat,
       fmt("%.0f serial rounds per block of %.0f clocks", steps, stepLatency * clockHz) +
           (w.tailRounds ? fmt(", then %.0f L2 round trips", double(w.tailRounds)) : std::string()) +
           (w.launchRounds ? fmt(", %.0f more once per launch", double(w.launchRounds)) : std::string())},
      {"launch", launch, fmt("%.0f launch(es)", per)},
  };
  double maxT = 0, sum = 0, maxThroughput = 0;
  std::string name, throughputName;
  for (size_t i = 0; i + 1 < e.terms.size(); ++i) {
    sum += e.terms[i].us;
    if (e.terms[i].us > maxT) {
      maxT = e.terms[i].us;
      name = e.terms[i].name;
    }
    if (e.terms[i].name != "latency" && e.terms[i].us > maxThroughput) {
      maxThroughput = e.terms[i].us;
      throughputName = e.terms[i].name;
    }
  }
  e.timeUs = maxT + kOverlapShare * (sum - maxT) + launch;
  // The serial chain includes the block's own work: it names the bound only when its waits add
  // visibly (5 %) to the largest throughput term.
  if (name == "latency" && per * lat < kLatencyMargin * maxThroughput) name = throughputName;
  if (name == "compute" || name == "shared" || name == "l1") e.bound = "compute";
  else if (name == "dram" || name == "l2") e.bound = "memory";
  else e.bound = "latency";  // in-flight and serial latency: not enough work in flight
  if (launch > maxT) e.bound = "launch";
  e.binding = launch > maxT ? "launch" : name;
  const double bw = t.memBandwidthGBs * 1e9;
  if (e.binding == "dram")
    e.bindingRate = "DRAM at " + formatSi(bw * kDramEfficiency, "B/s") + " (" + fmt("%.0f", 100 * kDramEfficiency) +
                    " % of its quoted " + formatSi(bw, "B/s") + ")";
  else if (e.binding == "l2")
    e.bindingRate = "L2 at " + formatSi(bw * kL2Factor, "B/s") + " (the model's " + fmt("%.0f", kL2Factor) +
                    "x the DRAM's " + formatSi(bw, "B/s") + ")";
  else if (e.binding == "compute")
    e.bindingRate = "compute at " + formatSi(w.pipePeakGflops * 1e9, "FLOP/s") + " peak";
  else if (e.binding == "shared")
    e.bindingRate = "shared memory at " + formatSi(kSharedBytesPerClock * clockHz, "B/s") + " per unit";
  else if (e.binding == "l1")
    e.bindingRate = "L1 at " + formatSi(l1Rate * clockHz, "B/s") + " per unit";
  else if (e.binding == "in-flight")
    e.bindingRate = "bytes in flight: " + formatSi(littleBw, "B/s") + " by Little's law";
  else if (e.binding == "latency")
    e.bindingRate = "serial latency: " + fmt("%.0f", steps) + " dependent rounds per block";
  else
    e.bindingRate = "launch overhead";
  return e;
}

}  // namespace tessera::costmodel
