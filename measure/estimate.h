// Owns estimates of Tessera's GPU kernels for hardware one lacks (ARCHITECTURE.md §2.7, issue 13): each
// family's strategy described in the analytic model's terms (costmodel/gpu_model.h) from its
// config — GEMM (block tile, warp/thread tile, K step, stages, MMA or FMA, padding, epilogue),
// attention (query and key blocks, head_dim split, skipped causal blocks, GQA's shared K/V) and
// elementwise chains (threads, vector width, vectors per thread, grid) — with the compiler's
// resource report when there is one, and the facts `tessera compare` prints. The estimate
// measurer (estimate ranking of spaces, ptxas/AMDGPU checks, `estimated` records) and the search's
// prior on a device build on it.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "codegen/gpu.h"
#include "costmodel/gpu_model.h"
#include "ir/ir.h"
#include "ir/schedule.h"
#include "measure/measurer.h"
#include "support/status.h"
#include "targets/target_desc.h"

namespace tessera::measure {

struct KernelEstimate {
  costmodel::GpuWorkload workload;
  costmodel::GpuEstimate model;
  double flops = 0, bytes = 0;  // the kernel's useful FLOPs and bytes (ir::kernelFlops/Bytes)
  // What the config chose, for reports: "block tile" -> "128x128x32", "MMA" -> "mma.sync m16n8k16", ...
  std::vector<std::pair<std::string, std::string>> facts;
};

// The estimate of `k` with config `c` on GPU target `t`; `resources` (from compileGpu) replaces
// the model's own register and occupancy guesses when given.
Expected<KernelEstimate> estimateKernel(const ir::Kernel& k, const ir::Config& c, const TargetDesc& t,
                                        const codegen::ResourceReport* resources = nullptr);

// The estimate backend of the Measurer interface: each config compiled through ptxas / the AMDGPU
// backend in a thread pool (its resource report replaces the guesses; spills and over-limit
// resources are invalid-config, as on a device), then predicted. Results are ok trials marked
// `estimated`: stored with status estimated, the model's name and the bound. Nothing runs.
std::unique_ptr<Measurer> makeEstimateMeasurer(const ir::Kernel& k, const TargetDesc& t, int buildThreads = 2);

// The prior of a search on a device: the predicted time of a config (lower is better), without
// compiling; nullopt for a config the model cannot describe.
std::function<std::optional<double>(const ir::Config&)> estimatePrior(const ir::Kernel& k, const TargetDesc& t);

}  // namespace tessera::measure
