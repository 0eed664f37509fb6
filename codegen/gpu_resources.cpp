// Owns GPU resource reports: the theoretical occupancy of a report on a TargetDesc and its limit
// checks (the vendor rules come from the backend, gpu_backend.h), their one-line summary, and the
// --emit stage names.
#include <algorithm>
#include <cmath>

#include "codegen/gpu_backend.h"
#include "codegen/gpu_resource_text.h"
#include "support/si_format.h"

namespace tessera::codegen {

// The vendor-neutral part: threads per block and the blocks-per-unit cap; the backend adds its
// register, shared memory/LDS and spill rules.
void finishResourceReport(ResourceReport& r, const TargetDesc& t) {
  r.vendor = t.vendor;
  r.target = t.name;
  r.problems.clear();
  const int64_t T = std::max<int64_t>(r.threadsPerBlock, 1);
  const int64_t W = (T + t.warpSize - 1) / std::max(t.warpSize, 1);
  int64_t blocks = t.maxBlocksPerSM;
  r.limiter = "blocks per unit";
  auto limit = [&](int64_t b, const char* why) {
    if (b < blocks) {
      blocks = b;
      r.limiter = why;
    }
  };
  limit(t.maxWarpsPerSM / W, "threads");
  if (const GpuBackend* backend = gpuBackend(t.vendor)) backend->occupancyLimits(r, t, limit);
  if (r.threadsPerBlock > t.maxThreadsPerBlock)
    r.problems.push_back(std::to_string(r.threadsPerBlock) + " threads per block exceed " + std::to_string(t.maxThreadsPerBlock));
  blocks = std::max<int64_t>(blocks, 0);
  if (blocks == 0) r.problems.push_back("a block does not fit on one SM/CU");
  r.blocksPerUnit = int(blocks);
  r.wavesPerUnit = int(blocks * W);
  r.occupancy = t.maxWarpsPerSM > 0 ? double(r.wavesPerUnit) / double(t.maxWarpsPerSM) : 0;
  r.ok = r.problems.empty();
}

std::string sharedText(const ResourceReport& r) {
  const int64_t total = r.sharedBytes + r.dynamicSharedBytes;
  std::string s = formatSi(double(total), "B");
  if (r.sharedBytes > 0 && r.dynamicSharedBytes > 0)
    s += " (" + formatSi(double(r.sharedBytes), "B") + " static + " + formatSi(double(r.dynamicSharedBytes), "B") + " dynamic)";
  else if (r.dynamicSharedBytes > 0)
    s += " dynamic";
  return s;
}

std::string ResourceReport::summary() const {
  const GpuBackend* backend = gpuBackend(vendor);
  std::string s = backend ? backend->describe(*this) : target + ": no GPU resources";
  if (!ok) {
    s += "; REJECTED:";
    for (const auto& p : problems) s += " " + p + ";";
  }
  return s;
}

Expected<GpuEmit> parseGpuEmit(const std::string& s, Vendor v) {
  const GpuBackend* b = gpuBackend(v);
  if (s == "payload") return GpuEmit::Payload;
  if (s == "schedule") return GpuEmit::Schedule;
  if (s == "pre") return GpuEmit::Pre;
  if (s == "mlir") return GpuEmit::Mapped;
  if (b && s == b->deviceIrName()) return GpuEmit::Device;
  if (b && s == b->assemblyName()) return GpuEmit::Asm;
  if (b && s == b->binaryName()) return GpuEmit::Binary;
  return makeError(ErrorCode::InvalidArgument, "unknown --emit '" + s + "' for a " + vendorName(v) + " target (" +
                                                   (b ? std::string(b->assemblyName()) + ", " + b->binaryName() + ", " +
                                                            b->deviceIrName()
                                                      : "") +
                                                   ", mlir, pre, payload, schedule)");
}

const char* gpuEmitName(GpuEmit e, Vendor v) {
  const GpuBackend* b = gpuBackend(v);
  switch (e) {
    case GpuEmit::Payload: return "payload";
    case GpuEmit::Schedule: return "schedule";
    case GpuEmit::Pre: return "pre";
    case GpuEmit::Mapped: return "mlir";
    case GpuEmit::Device: return b ? b->deviceIrName() : "device";
    case GpuEmit::Asm: return b ? b->assemblyName() : "asm";
    case GpuEmit::Binary: return b ? b->binaryName() : "binary";
  }
  return "?";
}

}  // namespace tessera::codegen
