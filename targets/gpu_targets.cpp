// Owns the GPU target table. GPU code generation is not built yet, so no GPU target is offered:
// an unknown-target error is more honest than a target that cannot compile anything.
#include "targets/gpu_targets.h"

namespace tessera {

const std::vector<TargetDesc>& gpuTargets() {
  static const std::vector<TargetDesc> table;
  return table;
}

}  // namespace tessera
