// Owns the target-specific half of GPU code generation and the CPU-emulation preparation
// (mlir-recipes/emulation REPORT): applying named transform sequences, the clone fix-ups that let
// the host pipeline run pre-mapping IR, the generic @map of OpBuilder kernels, the NVVM/ROCDL
// pipelines to PTX/cubin and GCN assembly/hsaco, and reading launch dimensions back.
#pragma once

#include <array>
#include <filesystem>
#include <string>
#include <vector>

#include "codegen/gpu.h"
#include "codegen/gpu_backend.h"
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


// Mapped IR (one gpu.launch) -> device math expanded -> outlining (kernel parameters read off the
// launch) -> the vendor backend's pipeline and emission: PTX (+ ptxas: cubin and the -v report) or
// GCN assembly (+ hsaco through ld.lld). Consumes `m`.
Expected<GpuObjects> lowerToTarget(mlir::ModuleOp m, const TargetDesc& t, bool wantBinary);

// Drops the "see current operation: <module dump>" notes from a failed pipeline's message.
Status trimDiagnostics(Status st);

// Shared by the vendor backends' emission (gpu_lowering.cpp): a fresh file name in this process's
// scratch folder (removed at exit), a command's exit status and combined output, a file's bytes,
// and the single object of the module's gpu.binary (text: without PTX's trailing NUL).
std::string scratchFileName(const std::string& stem);
int runCommand(const std::string& cmd, std::string* out);
std::string readWholeFile(const std::string& path);
const std::filesystem::path& scratchFolder();
Expected<std::string> binaryObject(mlir::ModuleOp m, bool text);
// The module's gpu.module printed on its own (generic form off: the emulator parses it back).
std::string gpuModuleText(mlir::ModuleOp m);

}  // namespace tessera::codegen
