// Owns the stand-in for the HIP runner when it is disabled at configure time
// (TESSERA_ENABLE_HIP_RUNNER=OFF): it reports Unsupported, like a machine without a driver.
#include "codegen/gpu_runner.h"

namespace tessera::codegen {

Expected<DeviceApi> openHipDevice(int) {
  return makeError(ErrorCode::Unsupported, "built without the HIP runner (TESSERA_ENABLE_HIP_RUNNER=OFF)");
}

Expected<std::unique_ptr<GpuRunner>> openHipRunner(int device) {
  TESSERA_ASSIGN(DeviceApi api, openHipDevice(device));
  return makeDeviceRunner(std::move(api));
}

}  // namespace tessera::codegen
