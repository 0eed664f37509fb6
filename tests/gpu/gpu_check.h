// Owns the GPU test helpers: default config + overrides from the GPU space, emulated run against
// the reference evaluator, and compilation to a binary with its resource report.
#pragma once

#include <string>
#include <vector>

#include "../codegen/host_check.h"
#include "emulator/gpu_emu.h"
#include "codegen/gpu.h"
#include "targets/kernel_io.h"
#include "ir/ir.h"
#include "ir/schedule.h"
#include "support/status.h"
#include "targets/target_desc.h"

namespace tessera::testutil {

const TargetDesc& gpuTarget(const std::string& name);

// The space's default config with `overrides` on top; the space must accept it.
Expected<ir::Config> gpuConfig(const ir::Kernel& k, const TargetDesc& t, const ir::Config& overrides = {});

using EmuCheck = CheckResult;

// compileEmulated (with the @map + lowering check) -> run on seeded inputs -> compareOutputs; a
// lane-level strategy, which has no pre-mapping form, through checkMappedEmulated.
EmuCheck checkEmulated(const ir::Kernel& k, const TargetDesc& t, const ir::Config& overrides = {}, uint64_t seed = 1,
                       const codegen::EmulateOptions& o = {});

// The mapped kernel (after every mapping and lowering pass) on the mapped-kernel emulator behind
// the host wrapper -> compareOutputs; a race or out-of-bounds access found fails it too.
EmuCheck checkMappedEmulated(const ir::Kernel& k, const TargetDesc& t, const ir::Config& cfg, uint64_t seed = 1);

// The mapped kernel of `k` compiled with `cfg` (the whole config), run once on `io` (seeded inputs,
// outputs as the caller prepared them) on the mapped-kernel emulator with `o` (fault injection,
// a device-text hook); the emulation's report. The outputs are left in `io` for io.check().
Expected<emu::Report> runMapped(const ir::Kernel& k, const ir::Config& cfg, const TargetDesc& t, KernelIO& io,
                                const codegen::MappedEmuOptions& o = {});

// A shape-generic kernel (compiled with runtime sizes at its upper bounds) and its mapped emulation.
struct ShapeGeneric {
  codegen::GpuBinary bin;
  std::shared_ptr<const codegen::MappedKernel> mk;
};
// The space's default config of `maxK` with `overrides` (assignments), compiled with runtime `rt`.
Expected<ShapeGeneric> compileShapeGeneric(const ir::Kernel& maxK, const TargetDesc& t, const std::string& overrides,
                                           codegen::RuntimeDims rt, bool binary = false);
// Runs `g` at sizes {m, batch, 0} on the inputs of `actual` (the kernel at that shape) on the
// mapped-kernel emulator (exact allocations: any access past the runtime sizes is an error); the
// first output's buffer holds `spareRows` more of its outermost rows, filled with a pattern that
// must survive. "" when the outputs match the reference, the emulation found nothing wrong and the
// pattern is intact; else what went wrong.
std::string runAtSizes(const ShapeGeneric& g, const TargetDesc& t, const ir::Kernel& actual, int64_t m, int64_t batch,
                       int64_t spareRows = 0);

// An attention kernel: h query heads over hkv key/value heads, Sq x Skv, head_dim d, batch b.
ir::Kernel attentionKernel(int64_t h, int64_t hkv, int64_t sq, int64_t skv, int64_t d, bool causal, ir::ScalarType t,
                           int64_t b = 1);

// Halves the trip count of the `nth` (0-based) scf.forall of the pre-mapping IR whose trip counts
// match `dims` (1 or 2): a copy phase that then leaves part of a workgroup tile unwritten.
std::string breakNthForall(const std::string& pre, int nth, int dims);

// Every knob at the first and the last value of its domain that the space accepts (others at the
// defaults): the configs the extremes tests run.
std::vector<ir::Config> knobExtremes(const ir::Space& s);

// compileGpu with the space's default + overrides.
Expected<codegen::GpuBinary> compileFor(const ir::Kernel& k, const TargetDesc& t, const ir::Config& overrides = {});

int countOccurrences(const std::string& text, const std::string& needle);

// The Hopper GEMM cases the device test runs on an sm_90 (ragged shapes, a pitch TMA cannot read,
// transposed operands, batches, split-K, each block shape, bf16 with an epilogue), each kernel with
// its config overrides (strategy=wgmma included). The CPU suite compiles and assembles every one,
// so a case the space refuses fails here, not first on a lent GPU.
struct WgmmaCase {
  ir::Kernel kernel;
  ir::Config cfg;
};
std::vector<WgmmaCase> wgmmaDeviceCases();
// The Hopper attention (strategy=flash-wgmma, both pipelines) cases the device test runs.
std::vector<WgmmaCase> flashWgmmaDeviceCases();

// The lane-level mma.sync GEMM cases the device test (label gpu) runs on an sm_80+ GPU, with their
// config overrides (strategy=mma-lane included); the CPU suite runs every one on the mapped-kernel
// emulator, so what the GPU is asked to run has been checked lane by lane first.
std::vector<WgmmaCase> laneMmaDeviceCases();

}  // namespace tessera::testutil
