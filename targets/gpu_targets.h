// Owns the table of GPU target descriptions, one per chip (NVIDIA sm_75..sm_90a, AMD gfx90a/gfx942,
// RDNA2 gfx1030-gfx1032, RDNA3 gfx1100-gfx1102), each with its default product.
#pragma once

#include <vector>

#include "targets/target_desc.h"

namespace tessera {

const std::vector<TargetDesc>& gpuTargets();

}  // namespace tessera
