// Owns the MLIR-free interface of the mapped-kernel emulator: the GPU module a GpuBinary was made
// from, at its NVVM / ROCDL cut point (after every mapping and lowering pass, the module ptxas or
// the AMDGPU backend gets), rewritten for the host and JIT-compiled, then launched with one fiber
// per GPU thread (emu_runtime.h). Also the emulated device that runs it behind the same host
// wrapper as the CUDA and HIP runners, and the text of an emulation report.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "emulator/emu_runtime.h"
#include "codegen/gpu.h"
#include "codegen/gpu_runner.h"
#include "support/status.h"
#include "targets/target_desc.h"

namespace tessera::codegen {

struct MappedEmuOptions {
  emu::Options run;
  // LLVM optimization level of the JIT (0-3): the kernels are small once mapped; 1 compiles in
  // a fraction of a second and runs within 2x of 3.
  int optLevel = 1;
  // Fault injection for negative controls: rewrites the device-dialect text before it is
  // compiled (a dropped barrier, one wait_group short, a store one element off).
  std::function<std::string(const std::string&)> deviceHook;
};

// A GPU kernel's mapped form, runnable on this CPU.
class MappedKernel {
 public:
  virtual ~MappedKernel() = default;
  // One launch of the grid: `args` holds a pointer per GpuLaunch::args entry (host memory); the
  // kernel's parameters are launch().kernelParams of them; `extents` are the buffers it may
  // touch (anything else is out of bounds); `grid` (optional) replaces the compiled grid: a
  // shape-generic kernel's at its runtime sizes (launchAtSizes); `schedules` (>= 1) replaces the
  // options' count of fiber orders (a timed launch after a checked one runs the fixed order only).
  virtual emu::Report run(const std::vector<uint64_t>& args, const std::vector<emu::Extent>& extents,
                          const std::array<int64_t, 3>* grid = nullptr, int schedules = 0) const = 0;
  virtual const GpuLaunch& launch() const = 0;
  virtual const emu::SiteTable& sites() const = 0;
  virtual int64_t sharedBytes() const = 0;
  double compileSeconds = 0;
};

// Builds the mapped emulation of `b` (compiled for `t`; b.mlirDevice must be set).
Expected<std::shared_ptr<const MappedKernel>> compileMapped(const GpuBinary& b, const TargetDesc& t,
                                                            const MappedEmuOptions& o = {});

// The emulated device's tensor map (emu::TensorMapForm in `out`'s 128 bytes) of `m` over the
// device address `global`, refused where cuTensorMapEncodeTiled refuses.
Status encodeEmulatedTensorMap(const TensorMapSpec& m, ir::ScalarType dt, uint64_t global, void* out);

// The emulated device running `kernel`: host memory (exact allocation sizes are the bounds), a
// launch runs the mapped kernel with fibers and is timed with the wall clock. A launch whose
// emulation reports an error (race, out of bounds, ...) fails with WrongResult and the report's
// first errors. The first launch runs every fiber order the kernel's options ask for, later ones
// (a measurement's repeats) the fixed order only. `last` (optional) receives every launch's report.
DeviceApi mappedEmulatedDevice(std::shared_ptr<const MappedKernel> kernel, const std::string& target,
                               std::shared_ptr<emu::Report> last = nullptr);

// Who wrote element `element` (flat index, batch 0) of output `output` (Kernel::outputs() order)
// in the launch `r` reports: "written by block (..) thread (..) [warp w lane l] at <site>, address
// 0x..", found through the launch's arguments (the output itself or the workspace copied back into
// it); "" when no emulated store wrote it.
std::string whoWrote(const emu::Report& r, const emu::SiteTable& sites, const GpuLaunch& l, const ir::Kernel& k,
                     int output, int64_t element);

// The report's text: errors, then counters (bank conflicts per shared access, sectors per global
// request, lane instructions), the worst sites first.
std::string formatEmulationReport(const emu::Report& r, const emu::SiteTable& sites, int warpSize);

}  // namespace tessera::codegen
