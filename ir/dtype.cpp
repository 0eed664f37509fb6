// Owns dtype names and the f16/bf16 conversions (bit-exact, round to nearest even).
#include "ir/dtype.h"

#include <cmath>
#include <cstring>

namespace tessera::ir {

std::string_view typeName(ScalarType t) {
  switch (t) {
    case ScalarType::F32: return "f32";
    case ScalarType::F16: return "f16";
    case ScalarType::BF16: return "bf16";
    case ScalarType::Index: return "index";
    case ScalarType::Bool: return "bool";
  }
  return "?";
}

std::optional<ScalarType> parseDType(std::string_view s) {
  if (s == "f32") return ScalarType::F32;
  if (s == "f16") return ScalarType::F16;
  if (s == "bf16") return ScalarType::BF16;
  return std::nullopt;
}

int64_t byteSize(ScalarType t) {
  switch (t) {
    case ScalarType::F32: return 4;
    case ScalarType::F16:
    case ScalarType::BF16: return 2;
    case ScalarType::Index: return 8;
    case ScalarType::Bool: return 1;
  }
  return 0;
}

uint16_t f32ToF16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t exp = (x >> 23) & 0xffu;
  uint32_t man = x & 0x7fffffu;
  if (exp == 0xff) return uint16_t(sign | 0x7c00u | (man ? 0x200u : 0));  // inf / nan
  int32_t e = int32_t(exp) - 127 + 15;
  if (e >= 31) return uint16_t(sign | 0x7c00u);                            // overflow -> inf
  if (e <= 0) {                                                            // subnormal or zero
    if (e < -10) return uint16_t(sign);
    man |= 0x800000u;
    uint32_t shift = uint32_t(14 - e);
    uint32_t half = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return uint16_t(sign | half);
  }
  uint32_t half = sign | (uint32_t(e) << 10) | (man >> 13);
  uint32_t rem = man & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) ++half;  // may carry into exponent: correct
  return uint16_t(half);
}

float f16ToF32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (man == 0) {
      x = sign;
    } else {
      int e = -1;
      do { ++e; man <<= 1; } while (!(man & 0x400u));
      x = sign | (uint32_t(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    x = sign | 0x7f800000u | (man << 13);
  } else {
    x = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

uint16_t f32ToBF16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);  // quiet nan
  uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return uint16_t((x + rounding) >> 16);
}

float bf16ToF32(uint16_t h) {
  uint32_t x = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

double roundTo(ScalarType t, double v) {
  switch (t) {
    case ScalarType::F32: return double(float(v));
    case ScalarType::F16: return double(f16ToF32(f32ToF16(float(v))));
    case ScalarType::BF16: return double(bf16ToF32(f32ToBF16(float(v))));
    default: return v;
  }
}

}  // namespace tessera::ir
