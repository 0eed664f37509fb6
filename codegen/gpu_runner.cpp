// Owns the device-independent runner: the host wrapper of a GpuLaunch executed through a
// DeviceApi (upload, padded copies, zeroed workspaces, per-batch launches, copy-back, download).
#include <cstring>
#include <vector>

#include "codegen/gpu_backend.h"
#include "codegen/gpu_runner.h"

namespace tessera::codegen {
namespace {

class DeviceRunner : public GpuRunner {
 public:
  explicit DeviceRunner(DeviceApi api) : api_(std::move(api)) {}
  std::string device() const override { return api_.name; }
  std::string arch() const override { return api_.arch; }

  Expected<double> run(const GpuBinary& bin, const ir::Kernel& k, void* const* buffers, int repeats) override {
    const GpuLaunch& l = bin.launch;
    TESSERA_ASSIGN(void* fn, api_.load(bin.binary, l.kernel));
    std::vector<const ir::TensorDecl*> decls = k.inputs();
    for (const auto* o : k.outputs()) decls.push_back(o);
    const size_t nIn = k.inputs().size();
    std::vector<uint64_t> user(decls.size(), 0), scratch(l.args.size(), 0);
    std::vector<size_t> userBytes(decls.size());
    auto cleanup = [&] {
      for (uint64_t p : user) if (p) api_.free(p);
      for (uint64_t p : scratch) if (p) api_.free(p);
    };
    auto fail = [&](Error e) -> Expected<double> { cleanup(); return e; };
    for (size_t i = 0; i < decls.size(); ++i) {
      userBytes[i] = size_t(decls[i]->numel()) * size_t(ir::byteSize(decls[i]->dtype));
      if (auto st = api_.alloc(&user[i], userBytes[i]); !st.ok()) return fail(st.takeError());
      if (auto st = api_.upload(user[i], buffers[i], userBytes[i]); !st.ok()) return fail(st.takeError());
    }
    for (size_t i = 0; i < l.args.size(); ++i)
      if (l.args[i].kind != GpuArg::Kind::Tensor)
        if (auto st = api_.alloc(&scratch[i], wrapper::argBytes(l.args[i])); !st.ok()) return fail(st.takeError());
    std::vector<char> staging;
    double totalMs = 0;
    for (int rep = 0; rep < std::max(repeats, 1); ++rep) {
      for (int64_t b = 0; b < l.batches; ++b) {
        std::vector<uint64_t> ptr(l.args.size());
        for (size_t i = 0; i < l.args.size(); ++i) {
          const GpuArg& a = l.args[i];
          size_t es = size_t(ir::byteSize(a.dtype));
          size_t off = a.tensor >= 0 ? size_t(b * a.batchStride) * size_t(ir::byteSize(decls[size_t(a.tensor)]->dtype)) : 0;
          Status st;
          if (a.kind == GpuArg::Kind::Tensor) {
            ptr[i] = user[size_t(a.tensor)] + off;
            if (a.zeroFirst) st = api_.zero(ptr[i], size_t(a.rows * a.cols) * es);
          } else if (a.kind == GpuArg::Kind::Workspace) {
            ptr[i] = scratch[i];
            st = api_.zero(ptr[i], wrapper::argBytes(a));
          } else {
            ptr[i] = scratch[i];
            staging.resize(wrapper::argBytes(a));
            wrapper::pack(a, static_cast<const char*>(buffers[a.tensor]) + off, staging.data());
            st = api_.upload(ptr[i], staging.data(), staging.size());
          }
          if (!st.ok()) return fail(st.takeError());
        }
        std::vector<uint64_t> vals;
        for (int p : l.kernelParams) vals.push_back(ptr[size_t(p)]);
        std::vector<void*> params;
        for (auto& v : vals) params.push_back(&v);
        auto ms = api_.launch(fn, l, params.data());
        if (!ms.ok()) return fail(ms.takeError());
        totalMs += *ms;
        for (size_t i = 0; i < l.args.size(); ++i) {
          const GpuArg& a = l.args[i];
          if (a.kind != GpuArg::Kind::Workspace || !a.copyBack) continue;
          staging.resize(wrapper::argBytes(a));
          if (auto st = api_.download(staging.data(), scratch[i], staging.size()); !st.ok()) return fail(st.takeError());
          size_t off = size_t(b * a.batchStride) * size_t(ir::byteSize(decls[size_t(a.tensor)]->dtype));
          wrapper::copyBack(a, staging.data(), static_cast<char*>(buffers[a.tensor]) + off);
        }
      }
    }
    for (size_t i = nIn; i < decls.size(); ++i) {
      bool copied = false;
      for (const auto& a : l.args) copied |= a.kind == GpuArg::Kind::Workspace && a.copyBack && a.tensor == int(i);
      if (!copied)
        if (auto st = api_.download(buffers[i], user[i], userBytes[i]); !st.ok()) return fail(st.takeError());
    }
    cleanup();
    return totalMs * 1000.0 / std::max(repeats, 1);
  }

 private:
  DeviceApi api_;
};

}  // namespace

std::unique_ptr<GpuRunner> makeDeviceRunner(DeviceApi api) { return std::make_unique<DeviceRunner>(std::move(api)); }

Expected<std::unique_ptr<GpuRunner>> openRunnerFor(const TargetDesc& t, int device) {
  TESSERA_ASSIGN(const GpuBackend* backend, gpuBackendFor(t));
  return backend->openRunner(device);
}

}  // namespace tessera::codegen
