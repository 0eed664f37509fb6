// Owns the registry of GPU backends: one per vendor.
#include "codegen/gpu_backend.h"

namespace tessera::codegen {

const GpuBackend& nvidiaBackend();  // gpu_backend_nvidia.cpp
const GpuBackend& amdBackend();     // gpu_backend_amd.cpp

const GpuBackend* gpuBackend(Vendor v) {
  switch (v) {
    case Vendor::Nvidia: return &nvidiaBackend();
    case Vendor::Amd: return &amdBackend();
    case Vendor::Host: return nullptr;
  }
  return nullptr;
}

Expected<const GpuBackend*> gpuBackendFor(const TargetDesc& t) {
  if (const GpuBackend* b = gpuBackend(t.vendor)) return b;
  return makeError(ErrorCode::Unsupported, "target " + t.name + " is not a GPU");
}

}  // namespace tessera::codegen
