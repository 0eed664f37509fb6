// Owns the target registry and TargetDesc queries.
#include "targets/target_desc.h"

#include <algorithm>

#include "targets/gpu_targets.h"

namespace tessera {

const char* vendorName(Vendor v) {
  switch (v) {
    case Vendor::Host: return "host";
    case Vendor::Nvidia: return "nvidia";
    case Vendor::Amd: return "amd";
  }
  return "?";
}

bool TargetDesc::hasIsa(const std::string& f) const { return std::find(isa.begin(), isa.end(), f) != isa.end(); }

const MmaShape* TargetDesc::findMma(const std::string& dtype, const std::string& kind) const {
  for (const auto& m : mma)
    if (m.dtype == dtype && m.kind == kind) return &m;
  return nullptr;
}

double TargetDesc::computePeakGflops(ir::ScalarType input) const {
  if (!isGpu()) return peakGflopsF32;
  if (input == ir::ScalarType::F16 && peakGflopsF16 > 0) return peakGflopsF16;
  if (input == ir::ScalarType::BF16 && peakGflopsBF16 > 0) return peakGflopsBF16;
  return peakGflopsF32;
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
  std::string list;
  for (const auto& n : knownTargets()) list += (list.empty() ? "" : ", ") + n;
  return makeError(ErrorCode::InvalidArgument, "unknown target '" + name + "' (known: " + list + ")");
}

}  // namespace tessera
