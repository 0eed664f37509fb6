// Owns host tensors: 64-byte aligned row-major storage in the tensor's dtype, seeded fills, and
// element access as double (f16/bf16 converted).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "ir/builders.h"
#include "ir/dtype.h"

namespace tessera::ir {

class Buffer {
 public:
  Buffer() = default;
  Buffer(ScalarType t, Shape shape);
  // A Buffer over memory it does not own (e.g. a shared mapping a measuring child writes into):
  // element access and fills as usual; the memory must outlive the view.
  static Buffer view(ScalarType t, Shape shape, void* data);
  ScalarType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t numel() const { return numel_; }
  size_t bytes() const { return size_t(numel_) * size_t(byteSize(dtype_)); }
  void* data() { return mem_.get(); }
  const void* data() const { return mem_.get(); }
  double get(int64_t i) const;
  void set(int64_t i, double v);  // rounds to the dtype
  // Uniform values in [lo, hi), rounded to the dtype, from a splitmix64 stream seeded by `seed`.
  void fillRandom(uint64_t seed, double lo = -1.0, double hi = 1.0);
  void fill(double v);

 private:
  struct Free {
    Free() noexcept : owned(true) {}
    explicit Free(bool o) noexcept : owned(o) {}
    bool owned;
    void operator()(void* p) const {
      if (owned) std::free(p);
    }
  };
  ScalarType dtype_ = ScalarType::F32;
  Shape shape_;
  int64_t numel_ = 0;
  std::unique_ptr<void, Free> mem_;
};

}  // namespace tessera::ir
