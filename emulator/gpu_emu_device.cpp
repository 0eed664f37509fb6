// Owns the emulated device that runs a GPU kernel's mapped form (gpu_emu.h): host memory whose
// exact allocation sizes bound the kernel's global accesses, launches through the emulator's
// fibers, a launch that the emulation finds faulty failing with its report, and the report's text.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "emulator/gpu_emu.h"

namespace tessera::codegen {

namespace {

// Live allocations of one emulated device: the extents a launch may touch, each between red
// zones that belong to no buffer (an overrun of one buffer lands there, not in its neighbour).
struct Allocations {
  std::mutex mu;
  std::map<uint64_t, size_t> live;
  std::map<uint64_t, void*> raw;
};
constexpr size_t kRedZone = 4096;

std::string ratio(uint64_t a, uint64_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", b ? double(a) / double(b) : 0.0);
  return buf;
}

}  // namespace

// The emulator's own tensor-map form, refused where cuTensorMapEncodeTiled refuses (so that an
// emulated run does not pass what the driver would not encode).
Status encodeEmulatedTensorMap(const TensorMapSpec& m, ir::ScalarType dt, uint64_t global, void* out) {
  emu::TensorMapForm f;
  f.global = global;
  f.rank = m.rank;
  f.elemBytes = int32_t(ir::byteSize(dt));
  f.swizzleBytes = m.swizzleBytes;
  auto bad = [&](const std::string& why) { return makeError(ErrorCode::InvalidArgument, "tensor map: " + why); };
  if (m.rank < 1 || m.rank > 3) return bad("rank " + std::to_string(m.rank) + " (1..3)");
  if (global % 16) return bad("global address not 16-byte aligned");
  if (m.swizzleBytes != 0 && m.swizzleBytes != 32 && m.swizzleBytes != 64 && m.swizzleBytes != 128)
    return bad("swizzle " + std::to_string(m.swizzleBytes));
  for (int d = 0; d < m.rank; ++d) {
    if (m.dims[size_t(d)] < 1 || m.box[size_t(d)] < 1 || m.box[size_t(d)] > 256)
      return bad("dimension " + std::to_string(d) + ": extent " + std::to_string(m.dims[size_t(d)]) + ", box " +
                 std::to_string(m.box[size_t(d)]) + " (box 1..256)");
    f.dims[d] = m.dims[size_t(d)];
    f.box[d] = int32_t(m.box[size_t(d)]);
    if (d > 0) {
      const int64_t st = m.strides[size_t(d - 1)];
      if (st % 16 || st <= 0) return bad("stride " + std::to_string(st) + " B is not a positive multiple of 16");
      f.strides[d - 1] = st;
    }
  }
  if (m.swizzleBytes && int64_t(f.box[0]) * f.elemBytes > m.swizzleBytes)
    return bad("the inner box (" + std::to_string(int64_t(f.box[0]) * f.elemBytes) + " B) exceeds the swizzle span");
  if ((int64_t(f.box[0]) * f.elemBytes) % 16) return bad("the inner box is not a multiple of 16 bytes");
  std::memset(out, 0, 128);
  std::memcpy(out, &f, sizeof f);
  return {};
}

DeviceApi mappedEmulatedDevice(std::shared_ptr<const MappedKernel> kernel, const std::string& target,
                               std::shared_ptr<emu::Report> last) {
  auto allocs = std::make_shared<Allocations>();
  DeviceApi api;
  api.name = "emulated " + target + " (the mapped kernel on this CPU, one fiber per GPU thread)";
  api.arch = target;
  api.alloc = [allocs](uint64_t* p, size_t n) -> Status {
    // 64-byte aligned like a device allocation; the padding is not the buffer's (bounds are n).
    void* m = std::aligned_alloc(64, kRedZone + (n + 63) / 64 * 64 + kRedZone);
    if (!m) return makeError(ErrorCode::RuntimeError, "emulated device: out of memory");
    *p = reinterpret_cast<uint64_t>(m) + kRedZone;
    std::lock_guard<std::mutex> g(allocs->mu);
    allocs->live[*p] = n;
    allocs->raw[*p] = m;
    return {};
  };
  api.free = [allocs](uint64_t p) {
    void* m = nullptr;
    {
      std::lock_guard<std::mutex> g(allocs->mu);
      allocs->live.erase(p);
      auto it = allocs->raw.find(p);
      if (it != allocs->raw.end()) m = it->second, allocs->raw.erase(it);
    }
    std::free(m);
  };
  api.upload = [](uint64_t d, const void* s, size_t n) -> Status {
    std::memcpy(reinterpret_cast<void*>(d), s, n);
    return {};
  };
  api.download = [](void* d, uint64_t s, size_t n) -> Status {
    std::memcpy(d, reinterpret_cast<const void*>(s), n);
    return {};
  };
  api.zero = [](uint64_t d, size_t n) -> Status {
    std::memset(reinterpret_cast<void*>(d), 0, n);
    return {};
  };
  api.load = [kernel](const std::string&, const std::string&) -> Expected<void*> {
    return const_cast<void*>(static_cast<const void*>(kernel.get()));
  };
  api.encodeTensorMap = encodeEmulatedTensorMap;
  auto launches = std::make_shared<std::atomic<int64_t>>(0);
  api.launch = [allocs, last, launches](void* fn, const GpuLaunch& launch, const std::vector<uint64_t>& args) -> Expected<float> {
    const auto* k = static_cast<const MappedKernel*>(fn);
    std::vector<emu::Extent> extents;
    {
      std::lock_guard<std::mutex> g(allocs->mu);
      int i = 0;
      for (const auto& [p, n] : allocs->live)
        extents.push_back({reinterpret_cast<const void*>(p), n, "allocation " + std::to_string(i++)});
    }
    // Name the kernel's own arguments in reports.
    for (size_t a = 0; a < args.size(); ++a)
      for (auto& e : extents)
        if (reinterpret_cast<uint64_t>(e.base) <= args[a] && args[a] < reinterpret_cast<uint64_t>(e.base) + e.bytes)
          e.name = "launch argument " + std::to_string(a);
    emu::Report r = k->run(args, extents, &launch.grid, (*launches)++ == 0 ? 0 : 1);
    r.launchArgs = args;
    if (last) *last = r;
    if (!r.ok) {
      std::string msg = "emulation found " + std::to_string(r.errorCount) + " error" + (r.errorCount == 1 ? "" : "s");
      for (size_t i = 0; i < r.errors.size() && i < 3; ++i) msg += "; " + r.errors[i];
      return makeError(ErrorCode::WrongResult, msg);
    }
    return float(r.seconds * 1e3);
  };
  return api;
}

std::string whoWrote(const emu::Report& r, const emu::SiteTable& sites, const GpuLaunch& l, const ir::Kernel& k,
                     int output, int64_t element) {
  const int tensor = int(k.inputs().size()) + output;
  auto outs = k.outputs();
  if (output < 0 || size_t(output) >= outs.size() || element < 0) return "";
  const ir::TensorDecl& d = *outs[size_t(output)];
  const int64_t cols = d.shape.empty() ? 1 : d.shape.back();
  const int64_t row = element / cols, col = element % cols;
  for (size_t i = 0; i < l.args.size() && i < r.launchArgs.size(); ++i) {
    const GpuArg& a = l.args[i];
    if (a.tensor != tensor || (a.kind == GpuArg::Kind::Packed) || (a.kind == GpuArg::Kind::Workspace && !a.copyBack))
      continue;
    const int64_t es = ir::byteSize(a.dtype);
    const int64_t off = a.kind == GpuArg::Kind::Workspace ? (row * a.pcols + col) * es : element * es;
    const char* addr = reinterpret_cast<const char*>(r.launchArgs[i]) + off;
    auto it = std::upper_bound(r.lastWriter.begin(), r.lastWriter.end(), static_cast<const void*>(addr),
                               [](const void* a, const emu::GlobalWriter& w) { return std::less<const void*>()(a, w.addr); });
    if (it == r.lastWriter.begin()) continue;
    --it;
    const char* at = static_cast<const char*>(it->addr);
    if (addr - at >= 16) continue;
    char buf[64];
    std::snprintf(buf, sizeof buf, "0x%llx", (unsigned long long)reinterpret_cast<uintptr_t>(addr));
    return "written by " + emu::writerName(r, *it) + " at " + sites.name(it->site) + ", address " + buf +
           (a.kind == GpuArg::Kind::Workspace ? " (its workspace)" : "");
  }
  return "";
}

std::string formatEmulationReport(const emu::Report& r, const emu::SiteTable& sites, int warpSize) {
  std::string out;
  char buf[512];
  out += r.ok ? "emulation  ok: no race, out-of-bounds access, uninitialised read or async-copy misuse found\n"
              : "emulation  " + std::to_string(r.errorCount) + " error(s)\n";
  for (const auto& e : r.errors) out += "  error: " + e + "\n";
  const emu::Counters& c = r.counters;
  std::snprintf(buf, sizeof buf,
                "shared     %llu requests, %llu wavefronts (ideal %llu): %llu bank conflicts, %s per request\n",
                (unsigned long long)c.sharedRequests, (unsigned long long)c.sharedWavefronts,
                (unsigned long long)c.sharedIdealWavefronts, (unsigned long long)c.bankConflicts,
                ratio(c.bankConflicts, c.sharedRequests).c_str());
  out += buf;
  std::snprintf(buf, sizeof buf, "global     %llu requests, %llu sectors of 32 B (ideal %llu): %s sectors per request\n",
                (unsigned long long)c.globalRequests, (unsigned long long)c.globalSectors,
                (unsigned long long)c.globalIdealSectors, ratio(c.globalSectors, c.globalRequests).c_str());
  out += buf;
  std::snprintf(buf, sizeof buf, "execution  %llu barriers, %llu warp collectives (warps of %d), %llu fiber switches",
                (unsigned long long)c.barriers, (unsigned long long)c.collectives, warpSize, (unsigned long long)c.switches);
  out += buf;
  if (c.laneInstructions) {
    std::snprintf(buf, sizeof buf, ", %llu lane instructions (%.1f M/s emulated)", (unsigned long long)c.laneInstructions,
                  r.seconds > 0 ? double(c.laneInstructions) / r.seconds * 1e-6 : 0.0);
    out += buf;
  }
  std::snprintf(buf, sizeof buf, " in %.3f s\n", r.seconds);
  out += buf;
  if (r.schedules > 1)
    out += "schedules  " + std::to_string(r.schedules) + " fiber orders: the fixed one over the grid, " +
           std::to_string(r.schedules - 1) + " PCT orders (seeds " + std::to_string(r.seed) + ".." +
           std::to_string(r.seed + uint64_t(r.schedules) - 2) + ") over sampled blocks\n";
  else if (!r.schedulesNote.empty())
    out += "schedules  1: " + r.schedulesNote + "\n";
  else
    out += "schedules  1: the fixed fiber order only\n";
  if (c.partial) out += "           (some warps ran too far between barriers to group every access: counts are upper bounds)\n";
  auto top = [&](const std::map<int, std::array<uint64_t, 3>>& bySite, const char* what, const char* unit) {
    std::vector<std::pair<int, std::array<uint64_t, 3>>> v(bySite.begin(), bySite.end());
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second[2] > b.second[2]; });
    for (size_t i = 0; i < v.size() && i < 5; ++i) {
      if (v[i].second[2] == 0) break;
      std::snprintf(buf, sizeof buf, "  %s %s: %llu requests, %s %s per request (%llu extra)\n", what,
                    sites.name(v[i].first).c_str(), (unsigned long long)v[i].second[0],
                    ratio(v[i].second[1], v[i].second[0]).c_str(), unit, (unsigned long long)v[i].second[2]);
      out += buf;
    }
  };
  top(c.sharedBySite, "shared", "wavefronts");
  top(c.globalBySite, "global", "sectors");
  return out;
}

}  // namespace tessera::codegen
