// Owns the static plan of one GPU GEMM (padded extents, tiles, thread counts, copy distribution)
// and the transform schedules that realize it (gpu_gemm_schedule.cpp), shared by the strategy
// (gpu_gemm.cpp) and nothing else.
#pragma once

#include <cstdint>
#include <string>

#include "ir/dtype.h"

namespace tessera::codegen::gemm {

enum class Path { Simt, MmaSync, Mfma };

struct Tiling {
  Path path = Path::Simt;
  int64_t Mp = 0, Np = 0, Kp = 0;   // padded problem (multiples of the block tile)
  int64_t BM = 0, BN = 0, BK = 0;   // block tile
  int64_t TM = 0, TN = 0;           // thread tile (simt) or warp tile (mma.sync / mfma)
  int64_t VEC = 1;                  // elements per global->shared copy
  int64_t stages = 1;               // > 1: cp.async multi-buffered pipeline (mma.sync)
  int warp = 32;                    // warp / wavefront size
  int64_t threads = 0;              // per block
  int64_t blockX = 0, blockY = 0;   // block_dims of the mapping
  int64_t copyA[2] = {0, 0}, copyB[2] = {0, 0};  // num_threads of the A / B copy foralls
  int64_t smemLimit = 0;            // alloc_to_alloca size limit
  ir::ScalarType inType = ir::ScalarType::F32;
};

// The transform module: @pre_main, @map_main and (stages > 1) @map_pipe_main.
std::string schedule(const Tiling& t);

}  // namespace tessera::codegen::gemm
