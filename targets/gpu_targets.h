// Owns the table of GPU target descriptions (filled by the GPU codegen work; empty until then).
#pragma once

#include <vector>

#include "targets/target_desc.h"

namespace tessera {

const std::vector<TargetDesc>& gpuTargets();

}  // namespace tessera
