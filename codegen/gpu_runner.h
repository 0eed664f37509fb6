// Owns the device runners (ARCHITECTURE.md §5): a thin client of the CUDA driver API or the HIP runtime,
// loaded with dlopen so that Tessera builds and runs on machines without a driver, and the
// emulated device (host memory; a launch runs the kernel's emulated form on this CPU). A runner
// executes a GpuBinary's launch through the host wrapper (padded copies, zeroed workspaces, one
// launch per batch, copy-back) on host buffers, timed with device events around the launches
// only. MLIR-free; the real runners sit behind TESSERA_ENABLE_CUDA_RUNNER / _HIP_RUNNER.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "codegen/gpu.h"
#include "ir/ir.h"
#include "support/status.h"
#include "targets/host_runner.h"
#include "targets/target_desc.h"

namespace tessera::codegen {

class GpuRunner {
 public:
  virtual ~GpuRunner() = default;
  virtual std::string device() const = 0;
  virtual std::string arch() const = 0;  // "sm_86", "gfx942"; "" when the runtime does not say
  virtual int64_t l2Bytes() const { return 0; }  // as the device reports it (0: unknown)
  // Uploads the user buffers (kernel inputs then outputs, host memory), runs the launch
  // `repeats` times, downloads the outputs. Returns the kernel time per repetition in
  // microseconds (device events around the launches). A shape-generic kernel (GpuLaunch::runtime)
  // runs at `sizes` (int64_t[kRuntimeSizeCount]; null: its upper bounds), its buffers holding
  // that many rows / batches.
  virtual Expected<double> run(const GpuBinary& b, const ir::Kernel& k, void* const* buffers, int repeats = 1,
                               const int64_t* sizes = nullptr) = 0;
  // The device half of the measurement protocol (ARCHITECTURE.md §2.7): one checked run whose outputs are
  // downloaded into `buffers`, then m.warmup untimed runs and timed runs until m.minTimeSec and
  // m.minRuns; before each timed launch, after its arguments are uploaded (untimed), `flushBytes` of
  // device memory are written, which evicts the L2 when it is at least twice its size (as Triton's
  // do_bench does) and keeps the device busy until the launch arrives (no host launch latency in
  // the time). Host-side
  // packing and copies are never timed: a sample is the sum of the event times of its launches.
  virtual Expected<std::vector<double>> measure(const GpuBinary& b, const ir::Kernel& k, void* const* buffers,
                                                const MeasureOptions& m, int64_t flushBytes) = 0;
};

// Unsupported when the runner was not built, or the driver / runtime library or a device is
// missing: callers (and the `gpu` tests) skip on that.
Expected<std::unique_ptr<GpuRunner>> openCudaRunner(int device = 0);
Expected<std::unique_ptr<GpuRunner>> openHipRunner(int device = 0);
Expected<std::unique_ptr<GpuRunner>> openRunnerFor(const TargetDesc& t, int device = 0);

// The device-independent part, used by all: a table of the few driver entry points needed.
struct DeviceApi {
  std::string name, arch;
  int64_t l2Bytes = 0;  // as the device reports it (0: unknown)
  void* handle = nullptr;
  std::function<Status(uint64_t* ptr, size_t bytes)> alloc;
  std::function<void(uint64_t ptr)> free;
  std::function<Status(uint64_t dst, const void* src, size_t bytes)> upload;
  std::function<Status(void* dst, uint64_t src, size_t bytes)> download;
  std::function<Status(uint64_t dst, size_t bytes)> zero;
  // Enqueues the zeroing on the device's default stream and returns before it is done (a
  // measurement's L2 flush, gpu_runner.cpp); unset: `zero`.
  std::function<Status(uint64_t dst, size_t bytes)> zeroQueued;
  // Loads a code object and returns an opaque kernel handle.
  std::function<Expected<void*>(const std::string& image, const std::string& kernel)> load;
  // Encodes the tensor map `m` over the device buffer at `global` (elements of `dtype`) into the
  // 128 bytes at `out` (host memory, then uploaded): cuTensorMapEncodeTiled on a CUDA device, the
  // emulator's own form on the emulated one. Unset where the device has no tensor maps.
  std::function<Status(const TensorMapSpec& m, ir::ScalarType dtype, uint64_t global, void* out)> encodeTensorMap;
  // Launches a kernel and returns the elapsed milliseconds. `args` holds the device pointer of
  // every argument of l.args (in order); the kernel's own parameters are l.kernelParams of them.
  std::function<Expected<float>(void* kernel, const GpuLaunch& l, const std::vector<uint64_t>& args)> launch;
};
std::unique_ptr<GpuRunner> makeDeviceRunner(DeviceApi api);
// The driver tables behind openCudaRunner / openHipRunner (same errors).
Expected<DeviceApi> openCudaDevice(int device = 0);
Expected<DeviceApi> openHipDevice(int device = 0);

// A GPU kernel's emulated form: its pre-mapping IR JIT-compiled for this CPU (gpu.h
// compileEmulated), called with one pointer per argument of its launch (GpuLaunch::args order),
// the whole grid sequentially.
class EmulatedKernel {
 public:
  virtual ~EmulatedKernel() = default;
  virtual void call(void* const* args) const = 0;
  virtual const GpuLaunch& launch() const = 0;
  double compileSeconds = 0;
};
Expected<std::shared_ptr<const EmulatedKernel>> compileEmulatedKernel(const ir::Kernel& k, const ir::Config& c,
                                                                     const TargetDesc& t, const EmulateOptions& o = {});

// The emulated device: memory is host memory, a launch runs `kernel`'s emulated form (whatever
// code object is loaded) and is timed with the wall clock. Its times are an emulation's:
// labelled, never stored as device measurements.
DeviceApi emulatedDevice(std::shared_ptr<const EmulatedKernel> kernel, const std::string& target);

}  // namespace tessera::codegen
