// Owns the per-vendor seam of GPU code generation, in the spirit of Triton's third_party/nvidia
// and third_party/amd: what differs between NVIDIA and AMD — the lowering pipeline and binary
// emission, reading the compiler's resource report, occupancy and limit rules, which matrix
// instruction a GEMM reaches, the --emit stage names and the device runtime — behind one
// interface with one implementation per vendor (gpu_backend_nvidia.cpp, gpu_backend_amd.cpp).
// Capability facts (warp size, register file, shared memory, MMA shapes, peaks) stay data in
// TargetDesc: a backend holds rules, the table holds numbers. MLIR-free (mlir::ModuleOp is only
// named), so the spaces, the CLI and the runners include it cheaply.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codegen/gpu.h"
#include "codegen/gpu_runner.h"
#include "ir/dtype.h"
#include "support/status.h"
#include "targets/target_desc.h"

namespace mlir {
class ModuleOp;
}

namespace tessera::codegen {

// What the target-specific lowering of one outlined kernel produced.
struct GpuObjects {
  std::string assembly;     // PTX or GCN assembly
  std::string binary;       // cubin or hsaco (empty unless requested)
  std::string kernel;       // kernel symbol
  std::vector<int> params;  // kernel parameters as indices of the host function's arguments
  std::string toolLog;      // ptxas -v output (NVIDIA)
  // The gpu.module at the device-dialect cut point (NVVM before convert-nvvm-to-llvm; ROCDL as
  // gpu-module-to-binary gets it), printed: what the mapped-kernel emulator runs.
  std::string deviceIr;
};

// The matrix-instruction families our lowerings reach. Code generation switches on this, never on
// the instruction's name, which is for reports.
enum class MmaFamily { MmaSync, Wgmma, Mfma };

// The matrix-core path a GEMM with some input dtype takes on a target.
struct MmaPath {
  MmaFamily family = MmaFamily::MmaSync;
  std::string kind;          // instruction family as the vendor names it: "mma.sync", "wgmma", "mfma"
  MmaShape shape;            // the instruction shape our lowering emits
  int tnMultiple = 0;        // warp tiles' N must be a multiple of this
  bool asyncCopies = false;  // cp.async multi-stage pipelines (STAGES > 1) are available
};

class GpuBackend {
 public:
  virtual ~GpuBackend() = default;
  virtual Vendor vendor() const = 0;
  // --emit names of the assembly and binary stages ("ptx"/"cubin", "asm"/"hsaco").
  virtual const char* assemblyName() const = 0;
  virtual const char* binaryName() const = 0;
  // --emit name of the device-dialect cut point ("nvvm", "rocdl"): the GPU module the mapped-kernel
  // emulator executes, after every mapping and lowering pass that shapes the binary.
  virtual const char* deviceIrName() const = 0;
  // NVVM or ROCDL lowering of a module whose single kernel is outlined, then emission of the
  // assembly (and of the binary when asked); fills out.assembly/binary/toolLog.
  virtual Status emit(mlir::ModuleOp m, const TargetDesc& t, bool wantBinary, GpuObjects& out) const = 0;
  // Registers, shared memory/LDS, spills, scratch from what the compiler reported.
  virtual void readResources(const GpuObjects& o, ResourceReport& r) const = 0;
  // The vendor's occupancy rules: calls limit(blocks, why) for each resource that bounds the
  // resident blocks per SM/CU, and appends what exceeds the target's limits to r.problems.
  virtual void occupancyLimits(ResourceReport& r, const TargetDesc& t,
                               const std::function<void(int64_t blocks, const char* why)>& limit) const = 0;
  // The matrix instruction a GEMM with `input` operands reaches on `t` through our lowering
  // (nullopt: FMA pipes only). The one place this rule lives: spaces and code generation ask here.
  virtual std::optional<MmaPath> gemmMma(ir::ScalarType input, const TargetDesc& t) const = 0;
  // Turns the warp-level vector.contract ops of a mapped GEMM kernel (unrolled to the shape of
  // gemmMma's instruction) into the vendor's matrix instructions: NVIDIA through nvgpu's mma.sync
  // rewrite, AMD through our own amdgpu.mfma rewrite (gpu_backend_amd_mfma.cpp).
  virtual Status lowerWarpContracts(mlir::ModuleOp m, const TargetDesc& t) const = 0;
  // The lane-level mma.sync path (strategy=mma-lane: ldmatrix + mma.sync m16n8k16 fed by a cp.async
  // ring, built from NVVM ops) for `input` operands, where there is one.
  virtual std::optional<MmaPath> gemmLaneMma(ir::ScalarType, const TargetDesc&) const { return std::nullopt; }
  // The warpgroup-level path (wgmma fed by TMA, sm_90a) for `input` operands, where there is one.
  virtual std::optional<MmaPath> gemmWarpgroupMma(ir::ScalarType, const TargetDesc&) const { return std::nullopt; }
  // One line for `tessera compile/run`: the report in the vendor's words.
  virtual std::string describe(const ResourceReport& r) const = 0;
  // The device runtime's entry points (CUDA driver / HIP), loaded with dlopen; Unsupported
  // without one. makeDeviceRunner turns them into a runner.
  virtual Expected<DeviceApi> openDevice(int device) const = 0;
};

// The backend of a GPU vendor (null for the host).
const GpuBackend* gpuBackend(Vendor v);
// The backend of target `t`; an Unsupported error for the host.
Expected<const GpuBackend*> gpuBackendFor(const TargetDesc& t);

}  // namespace tessera::codegen
