// Owns the typed configs of the kernel families: a config's knobs (ir::Config, name -> value, the
// form the search, the cache and the bundles carry) read once into a struct of fields, with the
// defaults of the knobs a config may leave out in one place. Codegen's legality rules and kernels
// and the analytic estimate read the fields, never the knob names; what a value must be for a
// given kernel (a tile that fits, a pipeline the chip has) stays with the rules that know it.
// Every knob read here is a row of the knob table (targets/knob_table.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "ir/schedule.h"
#include "support/status.h"

namespace tessera {

// A GEMM on the host CPU: schedule plain | packed | blis | bf16dot | amx (the blis family) | kvec |
// nvec; the cache blocks MC x NC x KC and the register tile MR x NR unrolled KU times along K,
// ORDER ij | ji (the plain, packed and blis schedules); kvec's NJ columns per register tile,
// nvec's NV vectors per row; THREADS (1 when absent); PACKB (the blis family: 0 reads B in place;
// 1 when absent).
struct HostGemmConfig {
  std::string schedule;
  int64_t MC = 0, NC = 0, KC = 0, MR = 0, NR = 0, KU = 0;
  std::string ORDER;
  int64_t NJ = 0, NV = 0;
  int64_t THREADS = 1;
  int64_t PACKB = 1;
  bool blisFamily() const { return schedule == "blis" || schedule == "bf16dot" || schedule == "amx"; }
};
// The knobs the schedule reads are needed (kvec: MR, NJ, KU; nvec: MR, NV, KU, KC; the others MC,
// NC, KC, MR, NR, KU, ORDER); the rest are read when present.
Expected<HostGemmConfig> readHostGemmConfig(const ir::Config& c);

// Attention on the host CPU: BQ query rows and BK keys per block, the register tiles MR1 x NR1
// (scores) and MR2 x NR2 (P·V) unrolled U1 and U2 times, VW f32 lanes, THREADS (1 when absent).
struct HostAttentionConfig {
  int64_t BQ = 0, BK = 0, MR1 = 0, NR1 = 0, MR2 = 0, NR2 = 0, U1 = 0, U2 = 0, VW = 0;
  int64_t THREADS = 1;
};
Expected<HostAttentionConfig> readHostAttentionConfig(const ir::Config& c);

// An elementwise chain on the host CPU: VW lanes x UNROLL vectors a step, NT (non-temporal
// stores), CHUNK columns a block (0: whole rows); knobs that came later, with the meaning configs
// stored before them had: ROWS 1, THREADS 1, MATH precise.
struct HostElementwiseConfig {
  int64_t VW = 0, UNROLL = 0, NT = 0, CHUNK = 0;
  int64_t ROWS = 1, THREADS = 1;
  std::string MATH = "precise";
};
Expected<HostElementwiseConfig> readHostElementwiseConfig(const ir::Config& c);

// An elementwise chain on a GPU: TPB threads per block, VW lanes per access, EPT vectors per
// thread, GRID blocks per SM of a grid-stride loop (0: one block per tile).
struct GpuElementwiseConfig {
  int64_t TPB = 0, VW = 0, EPT = 0, GRID = 0;
};
Expected<GpuElementwiseConfig> readGpuElementwiseConfig(const ir::Config& c);

// A GEMM on a GPU: strategy simt | mma | mma-lane | wgmma, the block tile BM x BN stepping BK
// along K, the warp (warpgroup) tile TM x TN, VEC elements per copy, STAGES pipeline slots; wgmma
// only: SPLITK ranges of K per output tile and PERSIST (a grid of one block per SM).
struct GpuGemmConfig {
  std::string strategy;
  int64_t BM = 0, BN = 0, BK = 0, TM = 0, TN = 0, VEC = 0, STAGES = 0;
  int64_t SPLITK = 1;   // absent: 1
  int64_t PERSIST = 0;  // absent: 0
};
// A missing or mistyped knob is an InvalidConfig error naming it (ir::Config::getInt's).
Expected<GpuGemmConfig> readGpuGemmConfig(const ir::Config& c);

// Attention on a GPU: strategy flash-simt (configs stored before the knob: absent) | flash-mma |
// flash-wgmma | flash-mfma; BQ query rows and BK keys per block; DSPLIT threads per query row
// (flash-simt); STAGES key-block slots; PIPE (flash-wgmma): fa2 | fa3 | fa3-overlap |
// fa3-pingpong; WAVES and MFMA (flash-mfma): waves per block (0: absent, one 16- or 32-row group
// each) and the instruction shape.
struct GpuAttentionConfig {
  std::string strategy = "flash-simt";
  int64_t BQ = 0, BK = 0;
  int64_t DSPLIT = 1;   // absent: 1 (only flash-simt needs the knob)
  int64_t STAGES = 2;   // absent: 2
  std::string PIPE = "fa2";
  int64_t WAVES = 0;    // absent: 0, the plan's BQ / rows per group
  std::string MFMA = "16x16x16";
  // flash-mfma's waves per block: WAVES, or (absent) one group of `groupRows` query rows each.
  int64_t wavesFor(int64_t groupRows) const { return WAVES != 0 ? WAVES : std::max<int64_t>(1, BQ / groupRows); }
};
// BQ and BK are needed by every strategy, DSPLIT by flash-simt; a mistyped knob is an error.
Expected<GpuAttentionConfig> readGpuAttentionConfig(const ir::Config& c);

}  // namespace tessera
