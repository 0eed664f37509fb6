// Owns KernelIO: seeded inputs, poisoned private or shared outputs, the reference and the check.
#include "targets/kernel_io.h"

#include <sys/mman.h>

#include <cstring>
#include <new>

namespace tessera {

KernelIO::KernelIO(const ir::Kernel& k, uint64_t seed, Outputs where, ir::RefOptions ref)
    : k_(k), refOptions_(ref), ins_(ir::makeInputs(k, seed)) {
  for (auto& b : ins_) ptrs_.push_back(b.data());
  for (const auto* o : k.outputs()) {
    if (where == Outputs::Private) {
      outs_.emplace_back(o->dtype, o->shape);
    } else {
      // Padded like Buffer's own storage: vector tails may touch the last cache line.
      size_t bytes = (size_t(o->numel()) * size_t(ir::byteSize(o->dtype)) + 63) / 64 * 64 + 64;
      void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      shared_.push_back({p, bytes});
      outs_.push_back(ir::Buffer::view(o->dtype, o->shape, p));
    }
    ptrs_.push_back(outs_.back().data());
  }
}

KernelIO::~KernelIO() {
  outs_.clear();  // views first
  for (auto& [p, n] : shared_) munmap(p, n);
}

std::vector<const ir::Buffer*> KernelIO::inputs() const {
  std::vector<const ir::Buffer*> r;
  for (const auto& b : ins_) r.push_back(&b);
  return r;
}

std::vector<const ir::Buffer*> KernelIO::outputs() const {
  std::vector<const ir::Buffer*> r;
  for (const auto& b : outs_) r.push_back(&b);
  return r;
}

void KernelIO::poisonOutputs() {
  for (auto& b : outs_) std::memset(b.data(), kOutputPoisonByte, b.bytes());
}

Expected<const ir::Reference*> KernelIO::reference() {
  if (!ref_) {
    TESSERA_ASSIGN(ir::Reference r, ir::evaluateReference(k_, inputs(), refOptions_));
    ref_ = std::make_unique<ir::Reference>(std::move(r));
  }
  return ref_.get();
}

Expected<ir::Comparison> KernelIO::check() {
  TESSERA_ASSIGN(const ir::Reference* ref, reference());
  return ir::compareOutputs(k_, *ref, outputs());
}

}  // namespace tessera
