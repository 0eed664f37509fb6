// Owns the analytic GPU model's descriptions of the kernels in the Kernel Tuner files of bench/data
// (issue 13, "validation on real data"): per file, the GPU it was measured on (its public facts as
// a TargetDesc) and a function from a config of that file's knobs to the model's workload
// (costmodel::GpuWorkload), written from the kernels' sources the way measure/estimate.cpp writes
// Tessera's own. Bench-only: the validation bench ranks the files' spaces with it and the replay
// bench uses it as the search's prior.
//
// The kernels (public sources):
//   gemm_RTX_3090, gemm_RTX_2080_Ti, gemm_RTX_Titan, gemm_RTX_3060_laptop: CLBlast's Xgemm (OpenCL, CNugteren/CLBlast
//     src/kernels/level3/xgemm_part1..3; the copy the files were measured with is in
//     AutoTuningAssociation/benchmark_hub currently_unused/kernels/gemm/, tuned by gemm.py there):
//     C = alpha A B + beta C, M = N = K = 4096, f32, column-major, beta = 1 (C is read).
//   dedispersion (any file of it, e.g. benchmark_hub's dedispersion_milo tables): the radio-astronomy
//     dedispersion kernel of the same collection (dedisp_milo/dedispersion.cu), 25000 samples,
//     2048 dispersion measures, 1536 channels of u8 input.
//   convolution_A100, _MI250X, _A4000, _A6000, _W6600, _W7800: Kernel Tuner's 2-D convolution with use_shmem/use_cmem
//     (MiloLurati/AutoTuning_AMD_vs_Nvidia_GPUs cache_scripts/convolution/convolution.cu and its
//     .hip twin; the space of benchmark_hub kernels/convolution_milo.py): a 4096x4096 f32 image,
//     a 15x15 filter in constant memory.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "costmodel/gpu_model.h"
#include "ir/schedule.h"
#include "support/status.h"
#include "targets/target_desc.h"

namespace tessera::bench {

struct KernelTunerModel {
  std::string table;   // the file's base name: "gemm_RTX_3090"
  std::string kernel;  // what ran: "CLBlast Xgemm 4096^3 f32 (OpenCL)"
  TargetDesc target;   // the GPU it ran on
  std::string targetNote;  // where the TargetDesc comes from and how it differs from Tessera's row
  // The workload of one config (knob values as search::importKernelTuner stores them); an error
  // for a config the kernel's restrictions exclude.
  std::function<Expected<costmodel::GpuWorkload>(const ir::Config&)> workload;
  // One line of the config's knobs in the kernel's terms (threads, tiles, what is staged where).
  std::function<std::string(const ir::Config&)> describe;
};

// The model of a Kernel Tuner file by its base name (the part before the first '.'), if any: the
// bundled files of bench/data, on the GPU each was measured on.
std::optional<KernelTunerModel> kernelTunerModel(const std::string& table);
// The base names of the bundled files (all of them have a model), in bench/data order; with
// `family` (a kernel_name: "Xgemm", "convolution_kernel"), only that kernel's.
std::vector<std::string> kernelTunerModelNames(const std::string& family = "");
// The model of a kernel by the family its records carry (the file's kernel_name: "Xgemm",
// "convolution_kernel", "dedispersion_kernel") on `gpu`; nullopt for a kernel it does not know.
std::optional<KernelTunerModel> kernelTunerModelFor(const std::string& family, const TargetDesc& gpu);
// The GPU of a file: `gpu` (a GPU name or a chip) when given, else the GPU table's row of the
// file's device_name; an error naming --gpu when neither is known.
Expected<TargetDesc> kernelTunerGpu(const std::string& deviceName, const std::string& gpu);

// The predicted time (us) of a config, nullopt for a config the model cannot describe or that does
// not fit on the GPU: the prior of a replayed search (search::Prior).
std::function<std::optional<double>(const ir::Config&)> kernelTunerPrior(const KernelTunerModel& m);

// The dedispersion kernel (bench/kerneltuner_dedispersion.cpp), used by kernelTunerModelFor.
Expected<costmodel::GpuWorkload> dedispersionWorkload(const ir::Config& c, const TargetDesc& t);
std::string describeDedispersion(const ir::Config& c);

// Spearman's rank correlation of a and b (ranks 1..n, ties averaged); 0 when either is constant.
// Shared by the estimator bench and its tests.
double spearman(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace tessera::bench
