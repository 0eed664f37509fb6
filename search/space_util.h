// Owns the integer and config helpers that every space file shares.
#pragma once

#include <cstdint>
#include <variant>

#include "ir/schedule.h"

namespace tessera::search::space_detail {

inline int64_t roundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

inline int64_t geti(const ir::Config& c, const char* k) { return std::get<int64_t>(c.values.at(k)); }

}  // namespace tessera::search::space_detail
