// Owns scalar types of the IR (tensor dtypes plus the index and bool types of expressions) and
// the f16/bf16 bit conversions used by buffers and the reference evaluator.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tessera::ir {

enum class ScalarType : uint8_t { F32, F16, BF16, Index, Bool };

inline bool isFloat(ScalarType t) {
  return t == ScalarType::F32 || t == ScalarType::F16 || t == ScalarType::BF16;
}
std::string_view typeName(ScalarType t);
std::optional<ScalarType> parseDType(std::string_view s);  // tensor dtypes only: f32, f16, bf16
int64_t byteSize(ScalarType t);                            // storage size of a tensor element

uint16_t f32ToF16(float f);    // IEEE binary16, round to nearest even
float f16ToF32(uint16_t h);
uint16_t f32ToBF16(float f);   // round to nearest even
float bf16ToF32(uint16_t h);
// Rounds a value to what the dtype can store (identity for f32 apart from the f32 rounding).
double roundTo(ScalarType t, double v);

}  // namespace tessera::ir
