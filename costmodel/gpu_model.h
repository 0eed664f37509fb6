// Owns the analytic performance model of one GPU kernel launch (ARCHITECTURE.md §2.8, issue 13): a
// kernel's work described in the model's terms (blocks, threads, resources, FLOPs, traffic at each
// level, serial steps), turned into a predicted time on a TargetDesc with the bound that decides
// it (compute, memory, latency, launch) and every term behind it. Family adapters describe
// Tessera's kernels (measure/estimate.h) and other tuners' kernels (the validation bench) in these
// terms; the model itself knows nothing of knobs. MLIR-free and cheap: the search ranks whole
// spaces with it.
//
// The terms, per launch:
//   occupancy  resident blocks per SM/CU from warps, registers (granules), shared memory/LDS and
//              the block limit (the vendor's register file rules: unified VGPR/AGPR on CDNA);
//   waves      blocks over units x resident blocks; the last wave's share (wave quantization);
//   compute    FLOPs at the pipe's per-unit rate (FMA or matrix cores, the instruction's share of
//              the dtype's peak), scaled by the lanes a block's warps fill, by issue (FMA pipes: a scheduler issues one instruction
//              per clock, and where its FP32 lanes are fewer than a warp's threads an FMA leaves
//              issue slots free for the other instructions: Turing, GA100 and CDNA have them, GA102
//              and Hopper do not) and by latency hiding (independent work in flight per scheduler,
//              Little's law: latency x issue rate);
//   memory     DRAM bytes over the bandwidth, SM<->L2 bytes over the L2 bandwidth, and bytes in
//              flight over the memory latency (Little's law: too few loads in flight cannot reach
//              the bandwidth);
//   shared     shared-memory/LDS bytes over its per-unit bandwidth (128 B per clock);
//   l1         L1 wavefronts of global accesses over the L1's per-unit bandwidth;
//   latency    serial dependent rounds per block (a global load, or a round of waits on shared
//              memory), each its latency plus the block's own work of the step; pipeline stages
//              prefetch ahead; other resident blocks run meanwhile, so throughput terms cover it
//              when they are larger;
//   launch     a fixed cost per launch.
// time = the largest term + 10 % of the others (they overlap well, not perfectly) + launch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "targets/target_desc.h"

namespace tessera::costmodel {

// The estimator's name and version, stored with every estimated record. Bump it when the model
// changes what it predicts: records of an older model are then re-estimated, not trusted.
inline constexpr const char* kGpuModelName = "analytic-v6";  // v6: rounds after the main loop (split-K's reduction)

// One launch in the model's terms (the adapter fills it from a kernel and its config).
struct GpuWorkload {
  std::string what;             // short description for the report ("mma.sync 128x128x32, 8 warps")
  int64_t blocks = 1;           // blocks of one launch
  int64_t launches = 1;         // identical launches (e.g. one per batch)
  int64_t threadsPerBlock = 1;
  // Resources: from the compiler's report when known, else the adapter's estimate.
  int regsPerThread = 32;
  // The adapter's estimate of registers exceeds the per-thread limit: the compiler would spill, and
  // Tessera refuses kernels that spill (set only where the estimate is fitted to the compiler's).
  bool spills = false;
  int64_t smemPerBlock = 0;
  int blocksPerUnit = 0;        // 0: derived here from threads, registers and shared memory
  // Compute.
  double flopsPerBlock = 0;     // executed FLOPs (padding included)
  bool matrixCores = false;     // the pipe: matrix cores (MMA/MFMA) or the FMA pipes
  double pipePeakGflops = 0;    // chip-wide peak of that pipe for this kernel's dtype and instruction
  double issueEfficiency = 1;   // share of issued instructions that are the math
  double independentOps = 1;    // independent math ops per warp in flight (ILP), for latency hiding
  // Memory.
  double dramBytes = 0;         // DRAM traffic of one launch (compulsory plus what misses L2)
  double l2Bytes = 0;           // SM <-> L2 traffic of one launch (every block's loads and stores)
  double bytesInFlightPerThread = 0;  // global bytes a thread has outstanding at once
  double smemBytesPerBlock = 0; // shared memory / LDS traffic per block, in bank cycles x 128 B
  // Wavefronts per ideal wavefront of the shared accesses threads issue themselves (TMA and wgmma
  // operand traffic excluded): the bank conflicts the estimator folded into smemBytesPerBlock,
  // stated so that a test can hold it to the mapped-kernel emulator's conflict counter.
  double sharedConflictWays = 1;
  double l1BytesPerBlock = 0;   // L1 wavefronts of global accesses per block x the line size
  // Latency.
  int64_t serialSteps = 1;      // dependent rounds per block (global loads, or waits on shared memory)
  int stages = 1;               // buffers in flight: steps overlap stages - 1 loads
  // The serial steps all come before the block's work (a staging prologue ending in a barrier):
  // the blocks a wave starts together wait together, so the unit's work follows the waits.
  bool serialPrologue = false;
  double serialStepCycles = 0;  // latency of one round in clocks (0: a DRAM load's)
  // Dependent L2 round trips every block makes after its main loop, with nothing of its own to
  // overlap them (split-K's partials written, arrivals on counters, the slices summed): they add to
  // the serial chain, wave after wave.
  int64_t tailRounds = 0;
  // Dependent L2 round trips paid once per launch rather than per wave (a persistent grid's first
  // ring fill and last epilogue: its other items' fills run under their predecessors' epilogues).
  int64_t launchRounds = 0;
};

// Load-to-use latency in clocks of each level under load, per vendor (microbenchmarks: Jia et al.,
// "Dissecting the NVIDIA Volta / Turing GPU architecture via microbenchmarking" (2018, 2019):
// shared ~20-30, L1 hit ~30, L2 hit ~200, DRAM 400-700 under load; AMD CDNA measured by
// Chips and Cheese (MI210, 2023): LDS ~60, vector L1 hit ~120, L2 ~300). Adapters pick the
// level of a serial round; only their ratios matter to a ranking.
enum class MemLevel { Shared, L1, L2, Dram };
double latencyCycles(MemLevel level, Vendor vendor);

struct GpuEstimate {
  double timeUs = 0;
  std::string bound;  // compute | memory | latency | launch
  // The term that decides the time (one of the terms' names) and, in words, the rate the model
  // holds it to: "L2 at 4.666 TB/s (the model's 3x the DRAM's 1.555 TB/s)". A memory-bound estimate
  // names its level: L2-bound is not DRAM-bound, and neither is cited with the other's bandwidth.
  std::string binding;
  std::string bindingRate;
  struct Term {
    std::string name;  // compute, dram, l2, in-flight, shared, l1, latency, launch
    double us = 0;
    std::string detail;
  };
  std::vector<Term> terms;  // in the order above
  int blocksPerUnit = 0;
  bool fits = true;  // false: not one block fits on a unit (the time is then ranked as if one did)
  std::string occupancyLimiter;
  double occupancy = 0;       // resident warps / the unit's maximum
  int64_t waves = 0;
  double waveEfficiency = 0;  // blocks / (waves x units x blocksPerUnit)
};

GpuEstimate estimateLaunch(const GpuWorkload& w, const TargetDesc& t);

// Resident blocks per SM/CU and what limits them (threads, registers, shared memory, blocks),
// by the target's data and its vendor's allocation rules.
int residentBlocks(const GpuWorkload& w, const TargetDesc& t, std::string* limiter = nullptr);

}  // namespace tessera::costmodel
