// Owns the table of the knobs each kernel family has on host and GPU targets: the schedule spaces
// (search/space.cpp) build only knobs it lists, and the cache service (service/plausibility.cpp)
// refuses configs naming others, both from this one table.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace tessera {

// Integer knobs take 0..kMaxKnobValue.
inline constexpr int64_t kMaxKnobValue = 65536;

struct KnobRow {
  const char* family;  // "gemm", "elementwise", "attention"
  bool gpu;            // a knob of GPU targets (else of the host)
  const char* name;
  const char* values;  // nullptr: an integer; else '|'-separated strings
};

std::span<const KnobRow> knobTable();
// The row of knob `name` of `family` on a GPU (gpu) or host target, or null.
const KnobRow* findKnob(std::string_view family, bool gpu, std::string_view name);
// Whether `value` is one of a categorical row's values.
bool knobValueListed(const KnobRow& row, std::string_view value);

}  // namespace tessera
