// Owns the stand-in driver tests' scaffolding (gpu_wrapper_test.cpp, gpu_range_test.cpp): typed
// symbols of a dlopen'ed library, the stand-in CUDA driver's controls, and a bundle's C runtime
// built with a plain `cc` as a shared library and loaded.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace tessera::test {

template <class F>
F sym(void* lib, const char* name) {
  return reinterpret_cast<F>(dlsym(lib, name));
}

// The stand-in CUDA driver (fake_cuda.c) and its test controls. It is loaded first and globally, so
// that the runtime's later dlopen("libcuda.so.1") finds it by its soname. Members are nullptr (lib
// too) when it or a symbol is missing.
struct FakeCuda {
  void (*setParams)(int) = nullptr;                                   // kernel parameters per launch
  void (*setKernel)(void (*)(void*, void**, int), void*) = nullptr;  // what a launch runs
  int (*live)() = nullptr;                                            // device allocations not freed
  int (*launches)() = nullptr;
  size_t (*bytesFrom)(const void*) = nullptr;  // bytes of the allocation from a device address on
  void (*lastGrid)(unsigned*) = nullptr;
  void* lib = nullptr;
};
inline FakeCuda loadFakeCuda(const char* path) {
  FakeCuda f;
  f.lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (!f.lib) return f;
  f.setParams = sym<void (*)(int)>(f.lib, "fake_cuda_set_params");
  f.setKernel = sym<void (*)(void (*)(void*, void**, int), void*)>(f.lib, "fake_cuda_set_kernel");
  f.live = sym<int (*)()>(f.lib, "fake_cuda_live_allocations");
  f.launches = sym<int (*)()>(f.lib, "fake_cuda_launches");
  f.bytesFrom = sym<size_t (*)(const void*)>(f.lib, "fake_cuda_bytes_from");
  f.lastGrid = sym<void (*)(unsigned*)>(f.lib, "fake_cuda_last_grid");
  return f;
}

// Builds the bundle in `bundleDir` (runtime, kernel table, images) into the shared library `so`
// with `cc` and loads it (RTLD_LOCAL); nullptr, with the test failed, when either step fails.
inline void* loadBundleRuntime(const std::string& bundleDir, const std::string& so) {
  const std::string b = bundleDir + "/";
  const std::string cc = "cc -std=c11 -O1 -shared -fPIC -I" + b + " " + b + "tessera_runtime.c " + b + "tessera_runtime_gpu.c " + b +
                         "tessera_bundle_table.c " + b + "tessera_bundle_images.c -o " + so + " -ldl -lpthread";
  if (std::system(cc.c_str()) != 0) {
    ADD_FAILURE() << "cannot build the bundle's runtime: " << cc;
    return nullptr;
  }
  void* lib = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) ADD_FAILURE() << dlerror();
  return lib;
}

}  // namespace tessera::test
