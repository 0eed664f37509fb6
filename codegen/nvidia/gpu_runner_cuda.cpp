// Owns the CUDA runner: the driver API (libcuda.so.1) loaded with dlopen, so nothing links
// against CUDA; a machine without a driver gets an Unsupported error, not a loader failure.
#include <dlfcn.h>

#include <vector>

#include "codegen/gpu_runner.h"

namespace tessera::codegen {
namespace {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using Handle = void*;

struct Cuda {
  CUresult (*init)(unsigned);
  CUresult (*deviceGet)(CUdevice*, int);
  CUresult (*deviceGetName)(char*, int, CUdevice);
  CUresult (*deviceGetAttribute)(int*, int, CUdevice);
  CUresult (*primaryCtxRetain)(Handle*, CUdevice);
  CUresult (*ctxSetCurrent)(Handle);
  CUresult (*moduleLoadData)(Handle*, const void*);
  CUresult (*moduleGetFunction)(Handle*, Handle, const char*);
  CUresult (*memAlloc)(CUdeviceptr*, size_t);
  CUresult (*memFree)(CUdeviceptr);
  CUresult (*memcpyHtoD)(CUdeviceptr, const void*, size_t);
  CUresult (*memcpyDtoH)(void*, CUdeviceptr, size_t);
  CUresult (*memsetD8)(CUdeviceptr, unsigned char, size_t);
  CUresult (*memsetD8Async)(CUdeviceptr, unsigned char, size_t, Handle) = nullptr;
  CUresult (*launchKernel)(Handle, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, Handle, void**, void**);
  CUresult (*eventCreate)(Handle*, unsigned);
  CUresult (*eventRecord)(Handle, Handle);
  CUresult (*eventSynchronize)(Handle);
  CUresult (*eventElapsedTime)(float*, Handle, Handle);
  CUresult (*getErrorString)(CUresult, const char**);
  CUresult (*funcSetAttribute)(Handle, int, int);
  // CUDA 12+ drivers (sm_90 tensor maps); null on older ones.
  CUresult (*tensorMapEncodeTiled)(void*, int, unsigned, void*, const unsigned long long*, const unsigned long long*,
                                   const unsigned*, const unsigned*, int, int, int, int) = nullptr;
  Handle ctx = nullptr;
};

template <class F>
bool sym(void* lib, const char* name, F* f) {
  *f = reinterpret_cast<F>(dlsym(lib, name));
  return *f != nullptr;
}

}  // namespace

Expected<DeviceApi> openCudaDevice(int device) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return makeError(ErrorCode::Unsupported, "no CUDA driver (libcuda.so.1 not found)");
  auto cu = std::make_shared<Cuda>();
  bool ok = sym(lib, "cuInit", &cu->init) && sym(lib, "cuDeviceGet", &cu->deviceGet) &&
            sym(lib, "cuDeviceGetName", &cu->deviceGetName) &&
            sym(lib, "cuDeviceGetAttribute", &cu->deviceGetAttribute) && sym(lib, "cuDevicePrimaryCtxRetain", &cu->primaryCtxRetain) &&
            sym(lib, "cuCtxSetCurrent", &cu->ctxSetCurrent) && sym(lib, "cuModuleLoadData", &cu->moduleLoadData) &&
            sym(lib, "cuModuleGetFunction", &cu->moduleGetFunction) && sym(lib, "cuMemAlloc_v2", &cu->memAlloc) &&
            sym(lib, "cuMemFree_v2", &cu->memFree) && sym(lib, "cuMemcpyHtoD_v2", &cu->memcpyHtoD) &&
            sym(lib, "cuMemcpyDtoH_v2", &cu->memcpyDtoH) && sym(lib, "cuMemsetD8_v2", &cu->memsetD8) &&
            sym(lib, "cuLaunchKernel", &cu->launchKernel) && sym(lib, "cuEventCreate", &cu->eventCreate) &&
            sym(lib, "cuEventRecord", &cu->eventRecord) && sym(lib, "cuEventSynchronize", &cu->eventSynchronize) &&
            sym(lib, "cuEventElapsedTime", &cu->eventElapsedTime) && sym(lib, "cuGetErrorString", &cu->getErrorString) &&
            sym(lib, "cuFuncSetAttribute", &cu->funcSetAttribute);
  if (!ok) return makeError(ErrorCode::Unsupported, "libcuda.so.1 lacks a driver entry point Tessera needs");
  sym(lib, "cuTensorMapEncodeTiled", &cu->tensorMapEncodeTiled);
  sym(lib, "cuMemsetD8Async", &cu->memsetD8Async);
  auto check = [cu](CUresult r, const char* what) -> Status {
    if (r == 0) return {};
    const char* s = nullptr;
    cu->getErrorString(r, &s);
    return makeError(ErrorCode::RuntimeError, std::string(what) + ": " + (s ? s : "CUDA error " + std::to_string(r)));
  };
  if (cu->init(0) != 0) return makeError(ErrorCode::Unsupported, "cuInit failed: no usable NVIDIA device");
  CUdevice dev = 0;
  if (cu->deviceGet(&dev, device) != 0) return makeError(ErrorCode::Unsupported, "no CUDA device " + std::to_string(device));
  TESSERA_TRY(check(cu->primaryCtxRetain(&cu->ctx, dev), "cuDevicePrimaryCtxRetain"));
  TESSERA_TRY(check(cu->ctxSetCurrent(cu->ctx), "cuCtxSetCurrent"));
  char name[256] = {0};
  cu->deviceGetName(name, sizeof name, dev);
  DeviceApi api;
  api.name = name;
  int major = 0, minor = 0;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR
  if (cu->deviceGetAttribute(&major, 75, dev) == 0 && cu->deviceGetAttribute(&minor, 76, dev) == 0)
    api.arch = "sm_" + std::to_string(major) + std::to_string(minor);
  int l2 = 0;  // CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE
  if (cu->deviceGetAttribute(&l2, 38, dev) == 0) api.l2Bytes = l2;
  api.handle = lib;
  api.alloc = [cu, check](uint64_t* p, size_t n) {
    CUdeviceptr d = 0;
    Status st = check(cu->memAlloc(&d, n ? n : 1), "cuMemAlloc");
    *p = d;
    return st;
  };
  api.free = [cu](uint64_t p) { cu->memFree(p); };
  api.upload = [cu, check](uint64_t d, const void* s, size_t n) { return check(cu->memcpyHtoD(d, s, n), "cuMemcpyHtoD"); };
  api.download = [cu, check](void* d, uint64_t s, size_t n) { return check(cu->memcpyDtoH(d, s, n), "cuMemcpyDtoH"); };
  api.zero = [cu, check](uint64_t d, size_t n) { return check(cu->memsetD8(d, 0, n), "cuMemsetD8"); };
  if (cu->memsetD8Async)
    api.zeroQueued = [cu, check](uint64_t d, size_t n) { return check(cu->memsetD8Async(d, 0, n, nullptr), "cuMemsetD8Async"); };
  if (cu->tensorMapEncodeTiled)
    api.encodeTensorMap = [cu, check](const TensorMapSpec& m, ir::ScalarType dt, uint64_t global, void* out) -> Status {
      // CUtensorMapDataType: FLOAT16 6, FLOAT32 7, BFLOAT16 9; CUtensorMapSwizzle: NONE 0, 32B 1,
      // 64B 2, 128B 3; interleave NONE, L2 promotion 256B (3), out-of-bounds fill NONE (zeros).
      const int type = dt == ir::ScalarType::F16 ? 6 : dt == ir::ScalarType::BF16 ? 9 : 7;
      const int swizzle = m.swizzleBytes == 128 ? 3 : m.swizzleBytes == 64 ? 2 : m.swizzleBytes == 32 ? 1 : 0;
      unsigned long long dims[3], strides[2];
      unsigned box[3], elementStrides[3] = {1, 1, 1};
      for (int d = 0; d < m.rank; ++d) {
        dims[d] = (unsigned long long)m.dims[size_t(d)];
        box[d] = unsigned(m.box[size_t(d)]);
        if (d > 0) strides[d - 1] = (unsigned long long)m.strides[size_t(d - 1)];
      }
      return check(cu->tensorMapEncodeTiled(out, type, unsigned(m.rank), reinterpret_cast<void*>(global), dims, strides, box,
                                            elementStrides, 0, swizzle, 3, 0),
                   "cuTensorMapEncodeTiled");
    };
  api.load = [cu, check](const std::string& image, const std::string& kernel) -> Expected<void*> {
    Handle mod = nullptr, fn = nullptr;
    TESSERA_TRY(check(cu->moduleLoadData(&mod, image.data()), "cuModuleLoadData"));
    TESSERA_TRY(check(cu->moduleGetFunction(&fn, mod, kernel.c_str()), "cuModuleGetFunction"));
    return fn;
  };
  api.launch = [cu, check](void* fn, const GpuLaunch& l, const std::vector<uint64_t>& args) -> Expected<float> {
    std::vector<uint64_t> vals;
    for (int p : l.kernelParams) vals.push_back(args[size_t(p)]);
    std::vector<void*> params;
    for (auto& v : vals) params.push_back(&v);
    const unsigned dyn = unsigned(l.dynamicSharedBytes);
    // Past 48 KB of shared memory a kernel must opt in (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    // = 8), its static shared memory counted too: flash-wgmma fa3 at head_dim 64, BK 64 asks for 48 KB
    // dynamic + 1 KB static (mbarriers) and its launch failed with "invalid argument" on an H200
    // while the opt-in waited for dynamic > 48 KB. Any dynamic size opts in (always legal).
    if (dyn > 0) TESSERA_TRY(check(cu->funcSetAttribute(fn, 8, int(dyn)), "cuFuncSetAttribute"));
    Handle start = nullptr, stop = nullptr;
    TESSERA_TRY(check(cu->eventCreate(&start, 0), "cuEventCreate"));
    TESSERA_TRY(check(cu->eventCreate(&stop, 0), "cuEventCreate"));
    TESSERA_TRY(check(cu->eventRecord(start, nullptr), "cuEventRecord"));
    TESSERA_TRY(check(cu->launchKernel(fn, unsigned(l.grid[0]), unsigned(l.grid[1]), unsigned(l.grid[2]), unsigned(l.block[0]),
                                       unsigned(l.block[1]), unsigned(l.block[2]), dyn, nullptr, params.data(), nullptr),
                      "cuLaunchKernel"));
    TESSERA_TRY(check(cu->eventRecord(stop, nullptr), "cuEventRecord"));
    TESSERA_TRY(check(cu->eventSynchronize(stop), "kernel execution"));
    float ms = 0;
    TESSERA_TRY(check(cu->eventElapsedTime(&ms, start, stop), "cuEventElapsedTime"));
    return ms;
  };
  return api;
}

Expected<std::unique_ptr<GpuRunner>> openCudaRunner(int device) {
  TESSERA_ASSIGN(DeviceApi api, openCudaDevice(device));
  return makeDeviceRunner(std::move(api));
}

}  // namespace tessera::codegen
