// Owns the data side of the one measurement protocol every backend shares (ARCHITECTURE.md §2.7): the
// kernel's inputs filled from a seed, its outputs poisoned before every checked run (one poison
// for every backend: a kernel that skips elements cannot pass on stale or zeroed memory), the
// reference evaluated once per seed, and the check of the outputs against it. The host runner,
// the host and device measurers, `tessera run` and the tests all run kernels through it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ir/buffer.h"
#include "ir/ir.h"
#include "ir/reference.h"
#include "support/status.h"

namespace tessera {

// Every output byte before a checked run. As f32 and bf16 it reads 3.39e38, as f16 a NaN: no
// reference value is near either, so an element the kernel did not write fails the check.
inline constexpr unsigned char kOutputPoisonByte = 0x7f;

class KernelIO {
 public:
  // Private outputs live in this process; Shared outputs in MAP_SHARED memory, so what a forked
  // measuring child writes is what the parent checks.
  enum class Outputs { Private, Shared };
  KernelIO(const ir::Kernel& k, uint64_t seed, Outputs where = Outputs::Private, ir::RefOptions ref = {});
  ~KernelIO();
  KernelIO(const KernelIO&) = delete;
  KernelIO& operator=(const KernelIO&) = delete;

  const ir::Kernel& kernel() const { return k_; }
  // Inputs then outputs (Kernel::inputs() then Kernel::outputs() order): the HostExecutable
  // calling convention and the GPU runners' user buffers.
  void* const* buffers() const { return ptrs_.data(); }
  size_t count() const { return ptrs_.size(); }
  std::vector<const ir::Buffer*> inputs() const;
  std::vector<const ir::Buffer*> outputs() const;

  void poisonOutputs();
  // The reference for these inputs (evaluated on first use).
  Expected<const ir::Reference*> reference();
  // The current outputs against the reference.
  Expected<ir::Comparison> check();

 private:
  const ir::Kernel& k_;
  ir::RefOptions refOptions_;
  std::vector<ir::Buffer> ins_, outs_;
  std::vector<std::pair<void*, size_t>> shared_;  // mappings behind outs_ (Outputs::Shared)
  std::vector<void*> ptrs_;
  std::unique_ptr<ir::Reference> ref_;
};

}  // namespace tessera
