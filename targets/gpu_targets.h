// Owns the table of GPU target descriptions, one per chip (NVIDIA sm_75..sm_90a, AMD gfx90a/gfx942,
// RDNA2 gfx1030-gfx1032, RDNA3 gfx1100-gfx1102), each with its default product.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "targets/target_desc.h"

namespace tessera {

const std::vector<TargetDesc>& gpuTargets();

// The vendor of a chip name: a chip of the table by its row, else by the vendors' naming
// ("sm_NN" NVIDIA, "gfxNNN" AMD), so that a chip newer than the table is still known as a GPU;
// nullopt for anything else (the host, a device name imported with a table of timings).
std::optional<Vendor> vendorOfChip(std::string_view name);

}  // namespace tessera
