// Owns the device backend of the measurement protocol and the probe of the attached device.
#include "measure/device_measurer.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include "emulator/gpu_emu.h"
#include "codegen/gpu.h"
#include "codegen/gpu_backend.h"
#include "measure/isolation.h"
#include "measure/measure_helper.h"

namespace tessera::measure {

namespace {

class GpuCandidate : public Executable {
 public:
  codegen::GpuBinary binary;
  std::shared_ptr<const codegen::EmulatedKernel> emulation;  // the emulated device, pre-mapping IR
  std::shared_ptr<const codegen::MappedKernel> mapped;       // the emulated device, mapped kernel
};

Status archMatches(const TargetDesc& t, const codegen::DeviceApi& api) {
  if (api.arch.empty())
    return makeError(ErrorCode::Unsupported, "cannot read the architecture of " + api.name + " (tuning " + t.name +
                                                 " needs a device of that architecture)");
  // An arch-specific target (sm_90a: wgmma, setmaxnreg) runs on exactly its base chip (sm_90).
  const bool specific = t.vendor == Vendor::Nvidia && t.arch == api.arch + "a";
  if (api.arch != t.arch && !specific)
    return makeError(ErrorCode::InvalidArgument, "the attached device is " + api.arch + " (" + api.name + "), the target is " +
                                                     t.name + (t.model.empty() ? "" : " (" + t.model + ")") +
                                                     ": tune --target " + api.arch + ", or --estimate for " + t.name);
  return {};
}

class DeviceBackend : public ExecutionBackend {
 public:
  DeviceBackend(const ir::Kernel& k, const TargetDesc& t, const DeviceSettings& d) : k_(k), t_(t), d_(d) {}

  Expected<std::shared_ptr<const Executable>> build(const ir::Config& c) override {
    auto cand = std::make_shared<GpuCandidate>();
    TESSERA_ASSIGN(cand->binary, codegen::compileGpu(k_, c, t_, {.wantBinary = !d_.emulated}));
    const codegen::ResourceReport& r = cand->binary.resources;
    if (!r.ok) {
      std::string why;
      for (const auto& p : r.problems) why += (why.empty() ? "" : "; ") + p;
      return makeError(ErrorCode::InvalidConfig, "over " + t_.name + "'s limits: " + why);
    }
    double seconds = cand->binary.compileSeconds;
    if (d_.emulated && d_.emulatePre) {
      // The mapping was already checked by compileGpu; the emulation JIT runs unoptimized.
      TESSERA_ASSIGN(cand->emulation, codegen::compileEmulatedKernel(k_, c, t_, {.checkMapping = false}));
      seconds += cand->emulation->compileSeconds;
    } else if (d_.emulated) {
      TESSERA_ASSIGN(cand->mapped, codegen::compileMapped(cand->binary, t_));
      seconds += cand->mapped->compileSeconds;
    }
    cand->compileSeconds = seconds;
    cand->config = c;
    return std::shared_ptr<const Executable>(std::move(cand));
  }

  // In the measuring child.
  Expected<std::vector<double>> run(const Executable& e, KernelIO& io, const MeasureOptions& m) override {
    const auto& cand = static_cast<const GpuCandidate&>(e);
    codegen::DeviceApi api;
    MeasureOptions opts = m;
    if (d_.emulated) {
      api = cand.mapped ? codegen::mappedEmulatedDevice(cand.mapped, t_.name) : codegen::emulatedDevice(cand.emulation, t_.name);
      // An emulation's time says nothing of the GPU's: the checked launch and one timed one
      // (the protocol runs whole, at the least cost).
      opts.warmup = 0, opts.minRuns = std::min(m.minRuns, 2), opts.minTimeSec = 0;
    } else {
      TESSERA_ASSIGN(const codegen::GpuBackend* backend, codegen::gpuBackendFor(t_));
      TESSERA_ASSIGN(api, backend->openDevice(d_.device));
      TESSERA_TRY(archMatches(t_, api));
    }
    if (d_.wrapDevice) api = d_.wrapDevice(std::move(api), cand.config);
    // Writing twice the L2 between runs evicts it (Triton's do_bench); the device's own figure
    // wins over the table's when it reports one.
    int64_t flush = 2 * std::max(t_.l2Bytes_gpu, api.l2Bytes);
    auto runner = codegen::makeDeviceRunner(std::move(api));
    return runner->measure(cand.binary, k_, io.buffers(), opts, d_.emulated ? 0 : flush);
  }

  bool emulated() const override { return d_.emulated; }

 private:
  const ir::Kernel& k_;
  TargetDesc t_;
  DeviceSettings d_;
};

// The version of the driver behind t's vendor, asked of the driver library itself (loaded already
// by openDevice): cuDriverGetVersion / hipDriverGetVersion, and NVIDIA's kernel module where its
// /proc file says. "none" when no driver answers.
std::string driverVersion(const TargetDesc& t) {
  const bool nvidia = t.vendor == Vendor::Nvidia;
  void* lib = dlopen(nvidia ? "libcuda.so.1" : "libamdhip64.so", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (!lib && !nvidia) lib = dlopen("libamdhip64.so.6", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (!lib) return "none";
  using GetVersion = int (*)(int*);
  auto get = reinterpret_cast<GetVersion>(dlsym(lib, nvidia ? "cuDriverGetVersion" : "hipDriverGetVersion"));
  int v = 0;
  if (!get || get(&v) != 0 || v <= 0) return "none";
  std::string out = nvidia ? "CUDA " + std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10)
                           : "HIP " + std::to_string(v / 10000000) + "." + std::to_string(v / 100000 % 100);
  if (nvidia) {
    std::ifstream in("/proc/driver/nvidia/version");
    std::string line;
    std::getline(in, line);
    // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 ..."
    auto at = line.find("Kernel Module");
    if (at != std::string::npos) {
      std::istringstream words(line.substr(at + 13));
      std::string module;
      if (words >> module) out += " (kernel module " + module + ")";
    }
  }
  return out;
}

}  // namespace

std::string openDeviceReport(const TargetDesc& t, int index) {
  auto backend = codegen::gpuBackendFor(t);
  if (!backend.ok()) return "error\n" + backend.error().message;
  auto api = (*backend)->openDevice(index);
  return api.ok() ? "ok\n" + api->arch + "\n" + api->name + "\n" + std::to_string(api->l2Bytes) + "\n" + driverVersion(t)
                  : "error\n" + api.error().message;
}

Expected<AttachedDevice> probeDevice(const TargetDesc& t, int index) {
  if (auto backend = codegen::gpuBackendFor(t); !backend.ok()) return backend.takeError();
  // In a fresh measuring helper (a driver opened here would be unusable in measuring children,
  // and a forked child of a process that has opened one cannot open it again).
  TESSERA_ASSIGN(std::string out, probeThroughHelper(t, index, ""));
  std::vector<std::string> lines;
  size_t p = 0;
  while (p <= out.size()) {
    size_t e = out.find('\n', p);
    if (e == std::string::npos) e = out.size();
    lines.push_back(out.substr(p, e - p));
    p = e + 1;
  }
  if (lines.empty() || lines[0] != "ok")
    return makeError(ErrorCode::Unsupported, lines.size() > 1 ? lines[1] : "the device probe gave no answer");
  AttachedDevice d;
  d.arch = lines.size() > 1 ? lines[1] : "";
  d.name = lines.size() > 2 ? lines[2] : "";
  d.l2Bytes = lines.size() > 3 ? std::atoll(lines[3].c_str()) : 0;
  d.driverVersion = lines.size() > 4 && !lines[4].empty() ? lines[4] : "none";
  codegen::DeviceApi api;
  api.arch = d.arch;
  api.name = d.name;
  TESSERA_TRY(archMatches(t, api));
  return d;
}

std::unique_ptr<ExecutionBackend> makeDeviceBackend(const ir::Kernel& k, const TargetDesc& t, const DeviceSettings& d) {
  return std::make_unique<DeviceBackend>(k, t, d);
}

std::unique_ptr<Measurer> makeDeviceMeasurer(const ir::Kernel& k, const TargetDesc& t, const DeviceSettings& d,
                                             const MeasureSettings& s) {
  // A fault-injecting wrapper lives in this process: it cannot cross into the helper.
  if (s.isolation == Isolation::Helper && !d.wrapDevice)
    return makeHelperMeasurer(k, t, HelperBackend{.device = true, .deviceIndex = d.device, .emulated = d.emulated,
                                                  .emulatePre = d.emulatePre},
                              s);
  return makeProtocolMeasurer(k, t, makeDeviceBackend(k, t, d), s);
}

}  // namespace tessera::measure
