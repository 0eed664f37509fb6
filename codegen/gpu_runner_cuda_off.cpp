// Owns the stand-in for the CUDA runner when it is disabled at configure time
// (TESSERA_ENABLE_CUDA_RUNNER=OFF): it reports Unsupported, like a machine without a driver.
#include "codegen/gpu_runner.h"

namespace tessera::codegen {

Expected<std::unique_ptr<GpuRunner>> openCudaRunner(int) {
  return makeError(ErrorCode::Unsupported, "built without the CUDA runner (TESSERA_ENABLE_CUDA_RUNNER=OFF)");
}

}  // namespace tessera::codegen
