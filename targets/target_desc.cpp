// Owns the target registry and TargetDesc queries.
#include "targets/target_desc.h"

#include <algorithm>
#include <cstdio>

#include "targets/gpu_skus.h"
#include "targets/gpu_targets.h"

namespace tessera {

const VendorWords& vendorWords(Vendor v) {
  static const VendorWords host{"host", "core", "cores", "threads", "threads", "memory", "memory", "the host compiler",
                                "LLVM"};
  static const VendorWords nvidia{"nvidia", "SM", "SMs", "warps", "warps", "shared memory", "smem", "ptxas", "NVVM"};
  static const VendorWords amd{"amd", "CU", "CUs", "waves", "wavefronts", "LDS", "LDS", "the AMDGPU backend", "ROCDL"};
  switch (v) {
    case Vendor::Host: return host;
    case Vendor::Nvidia: return nvidia;
    case Vendor::Amd: return amd;
  }
  return host;
}

const char* vendorName(Vendor v) { return vendorWords(v).name; }

bool TargetDesc::hasIsa(const std::string& f) const { return std::find(isa.begin(), isa.end(), f) != isa.end(); }

const MmaShape* TargetDesc::findMma(const std::string& dtype, const std::string& kind) const {
  for (const auto& m : mma)
    if (m.dtype == dtype && m.kind == kind) return &m;
  return nullptr;
}

double TargetDesc::computePeakGflops(ir::ScalarType input, int threads) const {
  if (!isGpu()) {
    double p = input == ir::ScalarType::BF16 ? peakGflopsBF16 : input == ir::ScalarType::F16 ? peakGflopsF16 : peakGflopsF32;
    return (p > 0 ? p : peakGflopsF32) * std::clamp(threads, 1, std::max(1, cores));
  }
  if (input == ir::ScalarType::F16 && peakGflopsF16 > 0) return peakGflopsF16;
  if (input == ir::ScalarType::BF16 && peakGflopsBF16 > 0) return peakGflopsBF16;
  return peakGflopsF32;
}

double TargetDesc::bandwidthGBs(int threads) const {
  if (!copyDoubt.empty()) return 0;
  if (isGpu() || threads <= 1 || memBandwidthAllCoresGBs <= 0 || cores <= 1) return memBandwidthGBs;
  if (threads >= cores) return memBandwidthAllCoresGBs;
  // Between one core and all: the copy scales at most linearly and never past all cores'.
  double step = (memBandwidthAllCoresGBs - memBandwidthGBs) / double(cores - 1);
  return memBandwidthGBs + step * double(threads - 1);
}

std::string peakShareText(double fraction, const std::string& ofWhat, const std::string& whyAbove) {
  char buf[512];
  if (fraction <= 0) return "share of " + ofWhat + " not known";
  if (fraction <= 1.0)
    std::snprintf(buf, sizeof buf, "%.1f%% of %s", 100 * fraction, ofWhat.c_str());
  else
    std::snprintf(buf, sizeof buf, "%.0f%% of %s; above it: %s", 100 * fraction, ofWhat.c_str(), whyAbove.c_str());
  return buf;
}

std::string whyAboveBandwidth(const TargetDesc& t, double bytes) {
  int64_t cache = std::max({t.l3Bytes, t.l2Bytes, int64_t(0)});
  if (!t.isGpu() && bytes <= double(cache))
    return "its data fit in the caches, and the copy is measured past them";
  return kProbeReadLow;
}

std::string bandwidthShareText(const TargetDesc& t, double fraction, const std::string& ofWhat, double bytes) {
  if (!t.copyDoubt.empty()) return "no share of " + ofWhat + ": " + t.copyDoubt;
  return peakShareText(fraction, ofWhat, whyAboveBandwidth(t, bytes));
}

std::string TargetDesc::keyString() const { return name + "/" + arch + "/" + std::to_string(units); }

std::vector<std::string> knownTargets() {
  std::vector<std::string> r = {"host"};
  for (const auto& t : gpuTargets()) r.push_back(t.name);
  return r;
}

Expected<TargetDesc> getTarget(const std::string& name) {
  if (name == "host" || name.empty()) return hostTarget();
  for (const auto& t : gpuTargets())
    if (t.name == name) return t;
  // A GPU by name ("RTX 4090", "L4"): its chip's description with its own figures.
  auto gpu = findGpu(name);
  if (gpu.ok()) return targetOfGpu(*gpu);
  if (gpu.error().code != ErrorCode::NotFound) return gpu.takeError();  // a name of several GPUs
  std::string list;
  for (const auto& n : knownTargets()) list += (list.empty() ? "" : ", ") + n;
  return makeError(ErrorCode::InvalidArgument,
                   "unknown target '" + name + "' (known: " + list + "; or a GPU by name: tessera gpus lists them)");
}

}  // namespace tessera
