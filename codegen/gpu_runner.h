// Owns the device runners (design.md §8): a thin client of the CUDA driver API or the HIP runtime,
// loaded with dlopen so that Tessera builds and runs on machines without a driver. A runner
// executes a GpuBinary's launch the way the emulation does (same host wrapper: padded copies,
// zeroed workspaces, one launch per batch, copy-back) on host buffers, timed with events.
// MLIR-free; behind the CMake options TESSERA_ENABLE_CUDA_RUNNER / TESSERA_ENABLE_HIP_RUNNER.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "codegen/gpu.h"
#include "ir/ir.h"
#include "support/status.h"
#include "targets/target_desc.h"

namespace tessera::codegen {

class GpuRunner {
 public:
  virtual ~GpuRunner() = default;
  virtual std::string device() const = 0;
  virtual std::string arch() const = 0;  // "sm_86"; "" when the runtime does not say
  // Uploads the user buffers (kernel inputs then outputs, host memory), runs the launch
  // `repeats` times, downloads the outputs. Returns the kernel time per repetition in
  // microseconds (device events around the launches).
  virtual Expected<double> run(const GpuBinary& b, const ir::Kernel& k, void* const* buffers, int repeats = 1) = 0;
};

// Unsupported when the runner was not built, or the driver / runtime library or a device is
// missing: callers (and the `gpu` tests) skip on that.
Expected<std::unique_ptr<GpuRunner>> openCudaRunner(int device = 0);
Expected<std::unique_ptr<GpuRunner>> openHipRunner(int device = 0);
Expected<std::unique_ptr<GpuRunner>> openRunnerFor(const TargetDesc& t, int device = 0);

// The device-independent part, used by both: a table of the few driver entry points needed.
struct DeviceApi {
  std::string name, arch;
  void* handle = nullptr;
  std::function<Status(uint64_t* ptr, size_t bytes)> alloc;
  std::function<void(uint64_t ptr)> free;
  std::function<Status(uint64_t dst, const void* src, size_t bytes)> upload;
  std::function<Status(void* dst, uint64_t src, size_t bytes)> download;
  std::function<Status(uint64_t dst, size_t bytes)> zero;
  // Loads a code object and returns an opaque kernel handle; launches it with bare pointers and
  // returns the elapsed milliseconds.
  std::function<Expected<void*>(const std::string& image, const std::string& kernel)> load;
  std::function<Expected<float>(void* kernel, const GpuLaunch& l, void** params)> launch;
};
std::unique_ptr<GpuRunner> makeDeviceRunner(DeviceApi api);

}  // namespace tessera::codegen
