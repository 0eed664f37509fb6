// Owns how a resources line shows a block's shared memory (LDS), for both vendors' backends.
#pragma once

#include <string>

#include "codegen/gpu.h"

namespace tessera::codegen {

// Static and dynamic together, each part named when both are used ("49.15 kB (16 B static +
// 49.15 kB dynamic)"): the device compiler's report counts only the static part, and a kernel whose
// ring is dynamic (mma-lane's) read "smem 0 B".
std::string sharedText(const ResourceReport& r);

}  // namespace tessera::codegen
