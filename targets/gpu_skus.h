// Owns GPUs by name (issue 29): a table of public facts per GPU product (SMs/CUs, clock, FP32 and
// matrix peaks, DRAM bandwidth, L2, on-chip memory and registers per unit, warp/wave size, the
// chip it is), every figure with its source, plus the GPUs a user adds with a facts file. A
// product becomes a TargetDesc by taking its chip's per-architecture description
// (targets/gpu_targets.cpp: limits, MMA shapes, allocation rules) and its own figures: an RTX 4090
// and an L4 are both sm_89, with 128 and 58 SMs and 1008 and 300 GB/s.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/status.h"
#include "targets/target_desc.h"

namespace tessera {

struct GpuSku {
  std::string name;                  // canonical: "NVIDIA GeForce RTX 4090"
  std::vector<std::string> aliases;  // short names and the names drivers report ("NVIDIA H100 80GB HBM3")
  std::string arch;                  // the chip Tessera compiles for: "sm_89", "gfx942", ...
  std::string segment;               // data centre | workstation | desktop | laptop
  int units = 0;                     // SMs / CUs (one GCD of a multi-die Instinct part)
  double clockGHz = 0;               // boost clock
  double fp32Gflops = 0;             // FMA pipes, dense
  double fp16Gflops = 0;             // matrix pipes with f32 accumulation, dense (FMA pipes where none)
  double bf16Gflops = 0;             // 0: no bf16 math
  double bandwidthGBs = 0;           // DRAM
  int64_t l2Bytes = 0;
  // Per-architecture facts, from the chip's row unless a facts file says otherwise.
  int64_t smemPerUnit = 0;           // shared memory / LDS per SM / CU, bytes
  int64_t regsPerUnit = 0;           // 32-bit registers per SM / CU
  int warpSize = 0;
  // Field ("units", "clock", "fp32", "fp16", "bf16", "bandwidth", "l2", "smem", "registers",
  // "warp") -> where the figure comes from.
  std::map<std::string, std::string> sources;
  std::string origin = "built-in";   // or the facts file it came from
};

// The fields every row has, in display order, with their units: {"units", "SMs/CUs"}, ...
const std::vector<std::pair<std::string, std::string>>& gpuSkuFields();
// The value of a field of `s` (the names of gpuSkuFields), as printed.
double gpuSkuValue(const GpuSku& s, const std::string& field);

// The built-in rows and those added by facts files (added ones first), and the references their
// sources abbreviate ("[ADA-WP]" -> "NVIDIA Ada GPU Architecture whitepaper, Appendix A").
std::vector<GpuSku> gpuSkus();
const std::map<std::string, std::string>& gpuSkuReferences();

// A product by name: its canonical name, an alias or a driver's device name, compared without case,
// spaces, dashes or the vendor's brand words ("nvidia", "geforce", "amd", "radeon"), so "RTX 4090",
// "rtx4090" and "NVIDIA GeForce RTX 4090" are the same GPU; else the one row whose name contains the
// words given. Unknown names are NotFound (with the closest rows), names of several GPUs
// InvalidArgument (listing them).
Expected<GpuSku> findGpu(const std::string& name);
// The product a driver reports by name, if the table has it (no error for unknown devices).
std::optional<GpuSku> gpuForDeviceName(const std::string& deviceName);
// The default product of a chip (the per-architecture row of gpu_targets.cpp), if any.
std::optional<GpuSku> defaultGpuOf(const std::string& arch);

// Whether code for chip `chip` runs on product `s`: its own chip, or that chip's arch-specific
// variant (sm_90a is sm_90 silicon with the arch-specific instructions enabled).
bool chipRunsProduct(std::string_view chip, const GpuSku& s);
// The TargetDesc of a product: its chip's description with the product's figures.
Expected<TargetDesc> targetOfGpu(const GpuSku& s);
// `t` (a chip's description) with the figures of the product of that chip named `name`: an error when
// the product is another chip's (sm_90a accepts sm_90's products: the same silicon).
Expected<TargetDesc> targetOfGpu(const std::string& name, const TargetDesc& chip);

// A facts file (JSON, see docs/gpus.md): one GPU object or {"gpus": [...]}. Every field is checked
// (missing, unknown, absurd, inconsistent with the chip's per-unit rates) with one line naming the
// file, the GPU and the field. Returns the rows; `addGpuFacts` also registers them for this process.
Expected<std::vector<GpuSku>> parseGpuFacts(const std::string& text, const std::string& origin);
Expected<std::vector<GpuSku>> readGpuFactsFile(const std::string& path);
Status addGpuFacts(const std::vector<GpuSku>& rows);

}  // namespace tessera
