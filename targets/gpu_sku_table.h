// Owns the interface between the GPU product table's data (gpu_sku_table.cpp) and its queries
// (gpu_skus.cpp): the built-in rows and the references their sources abbreviate.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "targets/gpu_skus.h"

namespace tessera::detail {

std::vector<GpuSku> builtinGpuSkus();  // product figures only; per-architecture facts are the chip's
const std::map<std::string, std::string>& references();

}  // namespace tessera::detail
