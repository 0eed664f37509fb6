// Owns the JSON the dashboard's read routes answer (GET /v1/kernels, /v1/kernels/{key_id}) and
// that `tessera report` embeds, so the page reads the same document from either: the overview's
// rows with their throughput in the unit of their family, and a kernel's summary with the
// roofline facts and the winners of the nearest shapes.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "store/kernel_list.h"
#include "store/store.h"

namespace tessera::cache {

// Elementwise kernels are bound by memory (GB/s); the others by compute (GFLOP/s).
bool memoryBoundFamily(std::string_view family);

nlohmann::json kernelRowJson(const KernelRow& row);
// With a store, each row says whether its kernel's text is in the kernel table ("rebuildable").
nlohmann::json kernelPageJson(const KernelPage& page, const KernelQuery& q, RecordStore* store = nullptr);

// The roofs a key's records are held against and where each comes from: for GPUs the target
// table (the products' figures), for the host the peak its tuner measured the shown record's
// share against (gflops / peak_fraction, or gbps / peak_fraction for memory-bound kernels); the
// arithmetic intensity from the tuner's own FLOP and byte counts (gflops / gbps), else from the
// minimum work of the key. Absent roofs are null with the reason.
nlohmann::json rooflineJson(const KernelRow& row);

// GET /v1/kernels/{key_id}: the key's row, its roofline facts and up to 8 winners of the nearest
// shapes. NotFound when the store has no such key.
Expected<nlohmann::json> kernelSummaryJson(RecordStore& store, const std::string& key_id);

}  // namespace tessera::cache
