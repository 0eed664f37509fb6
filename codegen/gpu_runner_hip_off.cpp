// Owns the stand-in for the HIP runner when it is disabled at configure time
// (TESSERA_ENABLE_HIP_RUNNER=OFF): it reports Unsupported, like a machine without a driver.
#include "codegen/gpu_runner.h"

namespace tessera::codegen {

Expected<std::unique_ptr<GpuRunner>> openHipRunner(int) {
  return makeError(ErrorCode::Unsupported, "built without the HIP runner (TESSERA_ENABLE_HIP_RUNNER=OFF)");
}

}  // namespace tessera::codegen
