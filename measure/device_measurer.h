// Owns measuring GPU candidates (ARCHITECTURE.md §2.7, §2.10): the device backend of the measurement
// protocol. Candidates are compiled in the build pool (PTX + ptxas cubin, or hsaco; a config whose
// resources exceed the target's limits or spill is rejected there); each is measured in a child
// process with a watchdog, since an illegal address poisons a CUDA context for good: a crashing
// kernel costs only itself. The child opens the device, checks its arch, runs the host wrapper
// once (the outputs are checked against the reference by the parent) and times the launches
// with device events, the L2 flushed between runs. The emulated device (host memory; a launch
// runs the mapped kernel on this CPU, gpu_emu.h) runs the same path end to end without a GPU; its
// times are labelled emulated.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "codegen/gpu_runner.h"
#include "ir/ir.h"
#include "measure/protocol_measurer.h"
#include "targets/target_desc.h"

namespace tessera::measure {

struct DeviceSettings {
  int device = 0;          // index of the device of the target's vendor
  bool emulated = false;   // the emulated device instead of a real one
  // The emulated device runs the mapped kernel (the NVVM/ROCDL module the binary comes from, one
  // fiber per GPU thread: races, bounds and fragment layouts checked); `emulatePre` runs the
  // faster pre-mapping IR instead, which sees none of the mapping.
  bool emulatePre = false;
  // Fault injection for the isolation tests (wraps the child's device): lets a test make one
  // candidate's launch crash, hang or write wrong values. Null in every front end.
  std::function<codegen::DeviceApi(codegen::DeviceApi, const ir::Config&)> wrapDevice;
};

// What is attached: found by a short-lived measuring helper (measure_helper.h; a GPU driver is
// never initialized in the process whose measuring children fork from it).
struct AttachedDevice {
  std::string name, arch;
  int64_t l2Bytes = 0;
  // The driver's version as it reports it ("CUDA 12.4 (kernel module 550.54.15)", "HIP 6.2"),
  // "none" when it cannot say.
  std::string driverVersion;
};
// The device `index` of t's vendor. Unsupported when there is none; InvalidArgument, naming both,
// when its arch is not t's.
Expected<AttachedDevice> probeDevice(const TargetDesc& t, int index);
// In the probing helper: opens the device, "ok\narch\nname\nl2Bytes\ndriver" or "error\nwhy".
std::string openDeviceReport(const TargetDesc& t, int index);

std::unique_ptr<ExecutionBackend> makeDeviceBackend(const ir::Kernel& k, const TargetDesc& t, const DeviceSettings& d);
std::unique_ptr<Measurer> makeDeviceMeasurer(const ir::Kernel& k, const TargetDesc& t, const DeviceSettings& d,
                                             const MeasureSettings& s);
// Tuning on the emulated device (emulated_measurer.cpp): each candidate's time is the analytic
// model's prediction for `t` (estimated, labelled emulated: never stored), and the emulated
// device (`d`) only refuses candidates with wrong outputs, faults or races.
std::unique_ptr<Measurer> makeEmulatorCheckedMeasurer(const ir::Kernel& k, const TargetDesc& t, const DeviceSettings& d,
                                                      const MeasureSettings& s);

}  // namespace tessera::measure
