// Owns Buffer storage and seeded fills.
#include "ir/buffer.h"

#include <cstring>
#include <new>

namespace tessera::ir {

Buffer::Buffer(ScalarType t, Shape shape) : dtype_(t), shape_(std::move(shape)) {
  numel_ = 1;
  for (int64_t d : shape_) numel_ *= d;
  size_t n = bytes();
  size_t alloc = (n + 63) / 64 * 64 + 64;  // padded: vector tails may touch the last line
  void* p = std::aligned_alloc(64, alloc);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, alloc);
  mem_.reset(p);
}

Buffer Buffer::view(ScalarType t, Shape shape, void* data) {
  Buffer b;
  b.dtype_ = t;
  b.shape_ = std::move(shape);
  b.numel_ = 1;
  for (int64_t d : b.shape_) b.numel_ *= d;
  b.mem_ = std::unique_ptr<void, Free>(data, Free(false));
  return b;
}

double Buffer::get(int64_t i) const {
  switch (dtype_) {
    case ScalarType::F32: return static_cast<const float*>(data())[i];
    case ScalarType::F16: return f16ToF32(static_cast<const uint16_t*>(data())[i]);
    case ScalarType::BF16: return bf16ToF32(static_cast<const uint16_t*>(data())[i]);
    default: return 0;
  }
}

void Buffer::set(int64_t i, double v) {
  switch (dtype_) {
    case ScalarType::F32: static_cast<float*>(data())[i] = float(v); break;
    case ScalarType::F16: static_cast<uint16_t*>(data())[i] = f32ToF16(float(v)); break;
    case ScalarType::BF16: static_cast<uint16_t*>(data())[i] = f32ToBF16(float(v)); break;
    default: break;
  }
}

void Buffer::fillRandom(uint64_t seed, double lo, double hi) {
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
  for (int64_t i = 0; i < numel_; ++i) {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    double u = double(z >> 11) * (1.0 / 9007199254740992.0);
    set(i, lo + (hi - lo) * u);
  }
}

void Buffer::fill(double v) {
  for (int64_t i = 0; i < numel_; ++i) set(i, v);
}

}  // namespace tessera::ir
