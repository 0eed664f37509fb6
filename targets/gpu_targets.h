// Owns the table of GPU target descriptions (NVIDIA sm_80..sm_90a, AMD gfx90a/gfx942/gfx1100).
#pragma once

#include <vector>

#include "targets/target_desc.h"

namespace tessera {

const std::vector<TargetDesc>& gpuTargets();

}  // namespace tessera
