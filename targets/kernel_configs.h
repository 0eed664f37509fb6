// Owns the typed configs of the kernel families: a config's knobs (ir::Config, name -> value, the
// form the search, the cache and the bundles carry) read once into a struct of fields, with the
// defaults of the knobs a config may leave out in one place. Codegen's legality rules and kernels
// and the analytic estimate read the fields, never the knob names; what a value must be for a
// given kernel (a tile that fits, a pipeline the chip has) stays with the rules that know it.
// Every knob read here is a row of the knob table (targets/knob_table.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "ir/schedule.h"
#include "support/status.h"

namespace tessera {

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
};
// BQ and BK are needed by every strategy, DSPLIT by flash-simt; a mistyped knob is an error.
Expected<GpuAttentionConfig> readGpuAttentionConfig(const ir::Config& c);

}  // namespace tessera
