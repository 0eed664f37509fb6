// Owns the stand-in for the CUDA runner when it is disabled at configure time
// (TESSERA_ENABLE_CUDA_RUNNER=OFF): it reports Unsupported, like a machine without a driver.
#include "codegen/gpu_runner.h"

namespace tessera::codegen {

Expected<DeviceApi> openCudaDevice(int) {
  return makeError(ErrorCode::Unsupported, "built without the CUDA runner (TESSERA_ENABLE_CUDA_RUNNER=OFF)");
}

Expected<std::unique_ptr<GpuRunner>> openCudaRunner(int device) {
  TESSERA_ASSIGN(DeviceApi api, openCudaDevice(device));
  return makeDeviceRunner(std::move(api));
}

}  // namespace tessera::codegen
