// Owns the least time a kernel can take, computed from its hard key alone (family, shape, dtype,
// target, units) without codegen: the work any correct implementation must do (FLOPs, and bytes
// it must at least touch) over the peaks of the compiler's target tables (targets/gpu_targets.h,
// targets/gpu_skus.h; the host's per ISA level here). The service refuses records
// faster than this bound (plausibility.h); the table is deliberately generous (upper bounds of
// any machine of that name), so an honest measurement is never refused.
#pragma once

#include <optional>
#include <string_view>

#include "store/record.h"

namespace tessera::cache {

// Peak rates of a target as the cache sees it: for GPUs the whole chip (the figures of
// targets/gpu_targets.cpp, scaled up when the key names more SMs/CUs than that product has, and
// at least the key's SMs/CUs at the rate of the chip's fastest product, with room for products
// users add);
// for the host, per-core upper bounds of its ISA level times the key's core count.
struct TargetPeaks {
  double gflops_f32 = 0, gflops_f16 = 0, gflops_bf16 = 0;
  double gbs = 0;  // bytes a kernel may touch per second (cache-resident data included)
};
// `config`: the record's (canonical JSON); a host GEMM of the amx schedule may claim AMX's peak.
std::optional<TargetPeaks> peaksOf(const HardKey& k, std::string_view config = "");  // nullopt: unknown target

struct MinimumWork {
  double flops = 0;  // arithmetic any implementation must do
  double bytes = 0;  // bytes it must at least read or write once
};
std::optional<MinimumWork> minimumWork(const HardKey& k);  // nullopt: a family it does not know

// The roofline bound in microseconds (max of FLOPs over peak and bytes over bandwidth); nullopt
// when the family or the target is unknown.
std::optional<double> rooflineBoundUs(const HardKey& k, std::string_view config = "");

// The fastest built-in product of a chip per SM/CU (GFLOP/s, rounded up) and its DRAM bandwidth,
// read from the product table (targets/gpu_skus.h); nullopt for a chip the table lacks.
struct ChipPeakBound {
  double f32, f16, bf16, gbs;
};
std::optional<ChipPeakBound> chipPeakBound(std::string_view chip);

// GPU rows of the bound: one per chip of targets/gpu_targets.cpp (its default product's peaks).
struct GpuPeakRow {
  const char* name;
  int units;
  double gflops_f32, gflops_f16, gflops_bf16, gbs_dram;
};
const GpuPeakRow* gpuPeakRows(size_t* count);

}  // namespace tessera::cache
