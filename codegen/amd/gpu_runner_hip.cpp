// Owns the HIP runner: the HIP runtime (libamdhip64.so) loaded with dlopen, so nothing links
// against ROCm; a machine without it gets an Unsupported error.
#include <dlfcn.h>

#include <regex>
#include <vector>

#include "codegen/gpu_runner.h"

namespace tessera::codegen {
namespace {

using hipError = int;
using Handle = void*;

struct Hip {
  hipError (*init)(unsigned);
  hipError (*setDevice)(int);
  hipError (*getDeviceCount)(int*);
  hipError (*getDeviceProperties)(void*, int);
  hipError (*moduleLoadData)(Handle*, const void*);
  hipError (*moduleGetFunction)(Handle*, Handle, const char*);
  hipError (*malloc)(void**, size_t);
  hipError (*free)(void*);
  hipError (*memcpy)(void*, const void*, size_t, int);
  hipError (*memset)(void*, int, size_t);
  hipError (*launch)(Handle, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, Handle, void**, void**);
  hipError (*eventCreate)(Handle*);
  hipError (*eventRecord)(Handle, Handle);
  hipError (*eventSynchronize)(Handle);
  hipError (*eventElapsedTime)(float*, Handle, Handle);
  const char* (*errorString)(hipError);
};

template <class F>
bool sym(void* lib, const char* name, F* f) {
  *f = reinterpret_cast<F>(dlsym(lib, name));
  return *f != nullptr;
}

constexpr int kHostToDevice = 1, kDeviceToHost = 2;  // hipMemcpyKind

}  // namespace

Expected<DeviceApi> openHipDevice(int device) {
  void* lib = dlopen("libamdhip64.so", RTLD_NOW | RTLD_LOCAL);
  if (!lib) lib = dlopen("libamdhip64.so.6", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return makeError(ErrorCode::Unsupported, "no HIP runtime (libamdhip64.so not found)");
  auto h = std::make_shared<Hip>();
  bool ok = sym(lib, "hipInit", &h->init) && sym(lib, "hipSetDevice", &h->setDevice) &&
            sym(lib, "hipGetDeviceCount", &h->getDeviceCount) && sym(lib, "hipModuleLoadData", &h->moduleLoadData) &&
            sym(lib, "hipModuleGetFunction", &h->moduleGetFunction) && sym(lib, "hipMalloc", &h->malloc) &&
            sym(lib, "hipFree", &h->free) && sym(lib, "hipMemcpy", &h->memcpy) && sym(lib, "hipMemset", &h->memset) &&
            sym(lib, "hipModuleLaunchKernel", &h->launch) && sym(lib, "hipEventCreate", &h->eventCreate) &&
            sym(lib, "hipEventRecord", &h->eventRecord) && sym(lib, "hipEventSynchronize", &h->eventSynchronize) &&
            sym(lib, "hipEventElapsedTime", &h->eventElapsedTime) && sym(lib, "hipGetErrorString", &h->errorString);
  if (!ok) return makeError(ErrorCode::Unsupported, "libamdhip64.so lacks an entry point Tessera needs");
  // hipDeviceProp_t's layout changes between ROCm releases: its gcnArchName ("gfx942:sramecc+:xnack-")
  // is found by its form in an oversized, zeroed buffer rather than at an offset.
  if (!sym(lib, "hipGetDevicePropertiesR0600", &h->getDeviceProperties)) sym(lib, "hipGetDeviceProperties", &h->getDeviceProperties);
  int count = 0;
  if (h->init(0) != 0 || h->getDeviceCount(&count) != 0 || device >= count)
    return makeError(ErrorCode::Unsupported, "no usable AMD GPU " + std::to_string(device));
  auto check = [h](hipError r, const char* what) -> Status {
    if (r == 0) return {};
    return makeError(ErrorCode::RuntimeError, std::string(what) + ": " + h->errorString(r));
  };
  TESSERA_TRY(check(h->setDevice(device), "hipSetDevice"));
  DeviceApi api;
  api.name = "HIP device " + std::to_string(device);
  if (h->getDeviceProperties) {
    std::vector<char> props(64 * 1024, 0);
    if (h->getDeviceProperties(props.data(), device) == 0) {
      if (props[0]) api.name = std::string(props.data());  // the struct starts with the device's name
      std::string bytes(props.begin(), props.end());
      std::smatch m;
      if (std::regex_search(bytes, m, std::regex("gfx[0-9a-f]{3,4}"))) api.arch = m.str();
    }
  }
  api.handle = lib;
  api.alloc = [h, check](uint64_t* p, size_t n) {
    void* d = nullptr;
    Status st = check(h->malloc(&d, n ? n : 1), "hipMalloc");
    *p = reinterpret_cast<uint64_t>(d);
    return st;
  };
  api.free = [h](uint64_t p) { h->free(reinterpret_cast<void*>(p)); };
  api.upload = [h, check](uint64_t d, const void* s, size_t n) {
    return check(h->memcpy(reinterpret_cast<void*>(d), s, n, kHostToDevice), "hipMemcpy");
  };
  api.download = [h, check](void* d, uint64_t s, size_t n) {
    return check(h->memcpy(d, reinterpret_cast<void*>(s), n, kDeviceToHost), "hipMemcpy");
  };
  api.zero = [h, check](uint64_t d, size_t n) { return check(h->memset(reinterpret_cast<void*>(d), 0, n), "hipMemset"); };
  api.load = [h, check](const std::string& image, const std::string& kernel) -> Expected<void*> {
    Handle mod = nullptr, fn = nullptr;
    TESSERA_TRY(check(h->moduleLoadData(&mod, image.data()), "hipModuleLoadData"));
    TESSERA_TRY(check(h->moduleGetFunction(&fn, mod, kernel.c_str()), "hipModuleGetFunction"));
    return fn;
  };
  api.launch = [h, check](void* fn, const GpuLaunch& l, const std::vector<uint64_t>& args) -> Expected<float> {
    std::vector<uint64_t> vals;
    for (int p : l.kernelParams) vals.push_back(args[size_t(p)]);
    std::vector<void*> params;
    for (auto& v : vals) params.push_back(&v);
    Handle start = nullptr, stop = nullptr;
    TESSERA_TRY(check(h->eventCreate(&start), "hipEventCreate"));
    TESSERA_TRY(check(h->eventCreate(&stop), "hipEventCreate"));
    TESSERA_TRY(check(h->eventRecord(start, nullptr), "hipEventRecord"));
    TESSERA_TRY(check(h->launch(fn, unsigned(l.grid[0]), unsigned(l.grid[1]), unsigned(l.grid[2]), unsigned(l.block[0]),
                                unsigned(l.block[1]), unsigned(l.block[2]), unsigned(l.dynamicSharedBytes), nullptr,
                                params.data(), nullptr),
                      "hipModuleLaunchKernel"));
    TESSERA_TRY(check(h->eventRecord(stop, nullptr), "hipEventRecord"));
    TESSERA_TRY(check(h->eventSynchronize(stop), "kernel execution"));
    float ms = 0;
    TESSERA_TRY(check(h->eventElapsedTime(&ms, start, stop), "hipEventElapsedTime"));
    return ms;
  };
  return api;
}

Expected<std::unique_ptr<GpuRunner>> openHipRunner(int device) {
  TESSERA_ASSIGN(DeviceApi api, openHipDevice(device));
  return makeDeviceRunner(std::move(api));
}

}  // namespace tessera::codegen
