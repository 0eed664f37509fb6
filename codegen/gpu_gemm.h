// Owns the transform schedules that realize a GPU GEMM's plan (gemm::Tiling, gpu_plans.h), shared
// by the strategy (gpu_gemm.cpp, gpu_gemm_schedule.cpp) and nothing else.
#pragma once

#include <cstdint>
#include <string>

#include "codegen/gpu_plans.h"

namespace tessera::codegen::gemm {

// The transform module: @pre_main, @map_main and (stages > 1) @map_pipe_main.
std::string schedule(const Tiling& t);

}  // namespace tessera::codegen::gemm
