// Owns the stand-in CUDA driver's kernel for the bundle's GPU tests: a launch run as its emulated
// form (gpu_wrapper_test.cpp and gpu_stream_test.cpp share it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "emulator/gpu_emu.h"
#include "codegen/gpu.h"

namespace bundle_test {

// The stand-in driver's kernel: the launch's emulated form, given the device pointers of the
// kernel's parameters (the arguments the kernel body does not use get a zeroed dummy). The
// pre-mapping form where the strategy has one, else the mapped kernel (lane-level tensor-core
// code), whose emulation must also find no race or out-of-bounds access in the bundle's buffers.
struct Emulated {
  std::shared_ptr<const tessera::codegen::EmulatedKernel> kernel;
  std::shared_ptr<const tessera::codegen::MappedKernel> mapped;
  std::vector<int> params;  // the compiled launch's kernel parameters (indices into its args)
  std::vector<unsigned char> dummy;
  size_t (*bytesFrom)(const void*) = nullptr;
  std::vector<std::string> problems;
  std::vector<const void*> mapGlobals;  // the addresses the launch's tensor maps describe
};

extern "C" inline void callEmulated(void* ctx, void** params, int n) {
  auto* e = static_cast<Emulated*>(ctx);
  const tessera::codegen::GpuLaunch& l = e->kernel ? e->kernel->launch() : e->mapped->launch();
  std::vector<void*> args(l.args.size(), e->dummy.data());
  for (int p = 0; p < n && p < int(e->params.size()); ++p) args[size_t(e->params[size_t(p)])] = params[p];
  if (e->kernel) return e->kernel->call(args.data());
  std::vector<uint64_t> a;
  std::vector<tessera::emu::Extent> extents{{e->dummy.data(), e->dummy.size(), "unused argument"}};
  for (void* p : args) {
    a.push_back(uint64_t(uintptr_t(p)));
    if (p != e->dummy.data()) extents.push_back({p, e->bytesFrom(p), "bundle buffer"});
  }
  // Buffers reached only through a tensor map (the kernel reads them by TMA, not by parameter).
  for (const void* g : e->mapGlobals) extents.push_back({g, e->bytesFrom(g), "bundle buffer (tensor map)"});
  tessera::emu::Report r = e->mapped->run(a, extents);
  for (const auto& m : r.errors) e->problems.push_back(m);
  if (!r.ok && r.errors.empty()) e->problems.push_back("emulation failed");
}

}  // namespace bundle_test
