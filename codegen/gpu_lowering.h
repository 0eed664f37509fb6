// Owns the target-specific half of GPU code generation and the CPU-emulation preparation
// (mlir-recipes/emulation REPORT): applying named transform sequences, the clone fix-ups that let
// the host pipeline run pre-mapping IR, the generic @map of OpBuilder kernels, the NVVM/ROCDL
// pipelines to PTX/cubin and GCN assembly/hsaco, and reading launch dimensions back.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "codegen/gpu.h"
#include "mlir/IR/BuiltinOps.h"
#include "support/status.h"
#include "targets/target_desc.h"

namespace tessera::codegen {

// Parses `scheduleText` and applies its named sequence `entry` to `payload`.
Status applyNamedSequence(mlir::ModuleOp payload, const std::string& scheduleText, const std::string& entry);

// The emulation clone: fill every workgroup buffer with NaN (all-ones bytes) right after its
// allocation, strip #gpu.address_space from every memref type, drop gpu.barrier (sequential
// foralls need none), lower scf.forall to scf.for and drop explicit deallocs (the host pipeline
// re-derives them). Returns the number of workgroup buffers poisoned.
Expected<int> prepareForHost(mlir::ModuleOp m);

// @map_main for kernels built directly as pre-mapping IR: workgroup allocs become 16-byte aligned
// shared/LDS globals, the block forall a gpu.launch, nested thread foralls threads.
std::string genericMapSchedule(std::array<int64_t, 3> blockDims, int warpSize, int64_t smemLimit);

// Grid and block sizes of the single gpu.launch in `m` (after @map).
Status readLaunchDims(mlir::ModuleOp m, GpuLaunch& launch);

struct GpuObjects {
  std::string assembly;  // PTX or GCN assembly
  std::string binary;    // cubin or hsaco (empty unless requested)
  std::string kernel;    // kernel symbol
  std::vector<int> params;  // kernel parameters as indices of the host function's arguments
  std::string toolLog;   // ptxas -v output (NVIDIA)
};

// Mapped IR (one gpu.launch) -> outlining -> NVVM or ROCDL -> PTX (+ ptxas: cubin and the -v
// report) or GCN assembly (+ hsaco through ld.lld). Consumes `m`.
Expected<GpuObjects> lowerToTarget(mlir::ModuleOp m, const TargetDesc& t, bool wantBinary);

// Drops the "see current operation: <module dump>" notes from a failed pipeline's message.
Status trimDiagnostics(Status st);

// Resource readers (gpu_resources.cpp).
void parsePtxasReport(const std::string& log, ResourceReport& r);
void parseAmdAssembly(const std::string& assembly, ResourceReport& r);

}  // namespace tessera::codegen
