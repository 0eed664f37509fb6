// Owns the device-independent runner: the host wrapper of a GpuLaunch executed through a
// DeviceApi (upload, padded copies, zeroed workspaces, per-batch launches, copy-back, download),
// the timing protocol on a device, and the emulated device.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "codegen/codegen.h"
#include "codegen/gpu_backend.h"
#include "codegen/gpu_runner.h"

namespace tessera::codegen {
namespace {

// One kernel's buffers on a device, for the lifetime of a run or a measurement.
class DeviceBuffers {
 public:
  DeviceBuffers(const DeviceApi& api, const GpuLaunch& l, const ir::Kernel& k, void* const* buffers, const int64_t* sizes)
      : api_(api), l_(l), buffers_(buffers) {
    if (sizes) std::copy(sizes, sizes + kRuntimeSizeCount, sizes_);
    else sizes_[0] = l.runtime.maxM, sizes_[1] = l.runtime.maxBatch;
    decls_ = k.inputs();
    for (const auto* o : k.outputs()) decls_.push_back(o);
    nIn_ = k.inputs().size();
  }
  ~DeviceBuffers() {
    for (uint64_t p : user_)
      if (p) api_.free(p);
    for (uint64_t p : scratch_)
      if (p) api_.free(p);
  }

  Status upload(const GpuBinary& bin) {
    TESSERA_ASSIGN(fn_, api_.load(bin.binary, l_.kernel));
    user_.assign(decls_.size(), 0);
    scratch_.assign(l_.args.size(), 0);
    userBytes_.resize(decls_.size());
    for (size_t i = 0; i < decls_.size(); ++i) {
      userBytes_[i] = userBytesAt(l_, int(i), *decls_[i], sizes_);
      TESSERA_TRY(api_.alloc(&user_[i], userBytes_[i]));
      TESSERA_TRY(api_.upload(user_[i], buffers_[i], userBytes_[i]));
    }
    for (size_t i = 0; i < l_.args.size(); ++i)
      if (l_.args[i].kind != GpuArg::Kind::Tensor) TESSERA_TRY(api_.alloc(&scratch_[i], wrapper::argBytes(l_.args[i])));
    return {};
  }

  // Every batch: arguments prepared (untimed), `beforeLaunch` (the L2 flush of a measurement), the
  // launch (timed by the device), workspaces copied back (untimed). Returns the launches' milliseconds.
  Expected<double> launchAll(const std::function<Status()>& beforeLaunch = {}) {
    double totalMs = 0;
    for (int64_t b = 0; b < l_.batches; ++b) {
      std::vector<uint64_t> ptr(l_.args.size());
      for (size_t i = 0; i < l_.args.size(); ++i) {
        const GpuArg& a = l_.args[i];
        size_t es = size_t(ir::byteSize(a.dtype));
        size_t off = a.tensor >= 0 ? size_t(b * a.batchStride) * size_t(ir::byteSize(decls_[size_t(a.tensor)]->dtype)) : 0;
        if (a.kind == GpuArg::Kind::Tensor) {
          ptr[i] = user_[size_t(a.tensor)] + off;
          if (a.zeroFirst) TESSERA_TRY(api_.zero(ptr[i], size_t(a.rows * a.cols) * es));
        } else if (a.kind == GpuArg::Kind::Workspace) {
          ptr[i] = scratch_[i];
          TESSERA_TRY(api_.zero(ptr[i], wrapper::argBytes(a)));
        } else if (a.kind == GpuArg::Kind::Packed) {
          ptr[i] = scratch_[i];
          staging_.resize(wrapper::argBytes(a));
          wrapper::pack(a, static_cast<const char*>(buffers_[a.tensor]) + off, staging_.data());
          TESSERA_TRY(api_.upload(ptr[i], staging_.data(), staging_.size()));
        } else if (a.kind == GpuArg::Kind::Sizes) {
          ptr[i] = scratch_[i];
          TESSERA_TRY(api_.upload(ptr[i], sizes_, sizeof sizes_));
        }
      }
      // Tensor maps last: they hold the device addresses of the arguments they describe.
      for (size_t i = 0; i < l_.args.size(); ++i) {
        const GpuArg& a = l_.args[i];
        if (a.kind != GpuArg::Kind::TensorMap) continue;
        const int of = a.tensorMap.of;
        if (of < 0 || size_t(of) >= l_.args.size() || l_.args[size_t(of)].kind == GpuArg::Kind::TensorMap)
          return makeError(ErrorCode::Internal, "a tensor map describes launch argument " + std::to_string(of) + ", which is not a buffer");
        if (!api_.encodeTensorMap)
          return makeError(ErrorCode::Unsupported, api_.name + " has no tensor maps (TMA): the kernel needs an sm_90 device or the mapped emulator");
        alignas(64) unsigned char map[128] = {};
        TESSERA_TRY(api_.encodeTensorMap(a.tensorMap, a.dtype, ptr[size_t(of)], map));
        ptr[i] = scratch_[i];
        TESSERA_TRY(api_.upload(ptr[i], map, sizeof map));
      }
      if (beforeLaunch) TESSERA_TRY(beforeLaunch());
      TESSERA_ASSIGN(float ms, api_.launch(fn_, l_, ptr));
      totalMs += ms;
      for (size_t i = 0; i < l_.args.size(); ++i) {
        const GpuArg& a = l_.args[i];
        if (a.kind != GpuArg::Kind::Workspace || !a.copyBack) continue;
        staging_.resize(wrapper::argBytes(a));
        TESSERA_TRY(api_.download(staging_.data(), scratch_[i], staging_.size()));
        size_t off = size_t(b * a.batchStride) * size_t(ir::byteSize(decls_[size_t(a.tensor)]->dtype));
        wrapper::copyBack(a, staging_.data(), static_cast<char*>(buffers_[a.tensor]) + off);
      }
    }
    return totalMs;
  }

  // Outputs not produced through a copied-back workspace come back from their device buffers.
  Status download() {
    for (size_t i = nIn_; i < decls_.size(); ++i) {
      bool copied = false;
      for (const auto& a : l_.args) copied |= a.kind == GpuArg::Kind::Workspace && a.copyBack && a.tensor == int(i);
      if (!copied) TESSERA_TRY(api_.download(buffers_[i], user_[i], userBytes_[i]));
    }
    return {};
  }

 private:
  const DeviceApi& api_;
  GpuLaunch l_;  // at the runtime sizes
  int64_t sizes_[kRuntimeSizeCount] = {};
  void* const* buffers_;
  std::vector<const ir::TensorDecl*> decls_;
  size_t nIn_ = 0;
  void* fn_ = nullptr;
  std::vector<uint64_t> user_, scratch_;
  std::vector<size_t> userBytes_;
  std::vector<char> staging_;
};

std::array<int64_t, kRuntimeSizeCount> maxSizes(const GpuLaunch& l) {
  return {std::max<int64_t>(l.runtime.maxM, 1), std::max<int64_t>(l.runtime.maxBatch, 1), 0};
}

class DeviceRunner : public GpuRunner {
 public:
  explicit DeviceRunner(DeviceApi api) : api_(std::move(api)) {}
  ~DeviceRunner() override {
    if (flush_) api_.free(flush_);
  }
  std::string device() const override { return api_.name; }
  std::string arch() const override { return api_.arch; }
  int64_t l2Bytes() const override { return api_.l2Bytes; }

  Expected<double> run(const GpuBinary& bin, const ir::Kernel& k, void* const* buffers, int repeats,
                       const int64_t* sizes) override {
    TESSERA_ASSIGN(GpuLaunch l, launchAtSizes(bin.launch, sizes ? sizes : maxSizes(bin.launch).data()));
    DeviceBuffers d(api_, l, k, buffers, sizes);
    TESSERA_TRY(d.upload(bin));
    double totalMs = 0;
    for (int rep = 0; rep < std::max(repeats, 1); ++rep) {
      TESSERA_ASSIGN(double ms, d.launchAll());
      totalMs += ms;
    }
    TESSERA_TRY(d.download());
    return totalMs * 1000.0 / std::max(repeats, 1);
  }

  Expected<std::vector<double>> measure(const GpuBinary& bin, const ir::Kernel& k, void* const* buffers,
                                        const MeasureOptions& m, int64_t flushBytes) override {
    DeviceBuffers d(api_, bin.launch, k, buffers, nullptr);  // a shape-generic kernel at its upper bounds
    TESSERA_TRY(d.upload(bin));
    TESSERA_TRY(d.launchAll());  // the checked run
    TESSERA_TRY(d.download());
    if (flushBytes > 0 && flushBytes_ < flushBytes) {
      if (flush_) api_.free(flush_);
      flush_ = 0;
      TESSERA_TRY(api_.alloc(&flush_, size_t(flushBytes)));
      flushBytes_ = flushBytes;
    }
    // The flush is enqueued after the arguments' uploads, right before the start event: the device
    // is still writing it when the launch arrives, so the start event does not fire on an idle
    // device and the time is the kernel's, not the kernel's plus the host's launch latency (5-8 us
    // on an H200: gemm 1000^3 read 20.3 us so against 12.8 us in Nsight Compute). Torch's anchor
    // (bench/gpu/torch_anchor.py) is timed the same way.
    std::function<Status()> flush;
    if (flushBytes > 0)
      flush = [&] { return api_.zeroQueued ? api_.zeroQueued(flush_, size_t(flushBytes)) : api_.zero(flush_, size_t(flushBytes)); };
    Status failed;
    auto timed = [&]() -> double {
      if (!failed.ok()) return 0;
      auto ms = d.launchAll(flush);
      if (!ms.ok()) {
        failed = ms.takeError();
        return 0;
      }
      return *ms * 1000.0;
    };
    MeasureOptions mm = m;
    mm.maxRuns = std::min(mm.maxRuns, 4096);
    std::vector<double> samples = sampleRuns(timed, mm, {});
    if (!failed.ok()) return failed.takeError();
    return samples;
  }

 private:
  DeviceApi api_;
  uint64_t flush_ = 0;
  int64_t flushBytes_ = 0;
};

}  // namespace

std::unique_ptr<GpuRunner> makeDeviceRunner(DeviceApi api) { return std::make_unique<DeviceRunner>(std::move(api)); }

Expected<std::unique_ptr<GpuRunner>> openRunnerFor(const TargetDesc& t, int device) {
  TESSERA_ASSIGN(const GpuBackend* backend, gpuBackendFor(t));
  TESSERA_ASSIGN(DeviceApi api, backend->openDevice(device));
  return makeDeviceRunner(std::move(api));
}

DeviceApi emulatedDevice(std::shared_ptr<const EmulatedKernel> kernel, const std::string& target) {
  DeviceApi api;
  api.name = "emulated " + target + " (this CPU, the whole grid sequentially)";
  api.arch = target;
  // Host memory, 64-byte aligned and padded like ir::Buffer (vector tails may touch the last line).
  api.alloc = [](uint64_t* p, size_t n) -> Status {
    void* m = std::aligned_alloc(64, (n + 63) / 64 * 64 + 64);
    if (!m) return makeError(ErrorCode::RuntimeError, "emulated device: out of memory");
    *p = reinterpret_cast<uint64_t>(m);
    return {};
  };
  api.free = [](uint64_t p) { std::free(reinterpret_cast<void*>(p)); };
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
  api.launch = [](void* fn, const GpuLaunch&, const std::vector<uint64_t>& args) -> Expected<float> {
    const auto* k = static_cast<const EmulatedKernel*>(fn);
    std::vector<void*> ptrs;
    for (uint64_t a : args) ptrs.push_back(reinterpret_cast<void*>(a));
    auto t0 = std::chrono::steady_clock::now();
    k->call(ptrs.data());
    return float(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  };
  return api;
}

}  // namespace tessera::codegen
