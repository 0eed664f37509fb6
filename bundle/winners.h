// Owns "every winner for some targets": the kernels behind a store's winners, rebuilt from the
// store's kernel table (cache_service/kernel_text.h: the kernel's canonical text, whatever its
// family, fused elementwise chains and GEMM epilogues included), kept only when the parsed kernel's
// workload hash equals the key's. Stores written before the table existed have no text: plain
// GEMMs (batch, transposes) and attention (causal or not, default scale) are then rebuilt from
// their hard keys; the others are reported, to be listed by spec or IR file instead.
#pragma once

#include <string>
#include <vector>

#include "bundle/bundle.h"
#include "cache_service/store.h"

namespace tessera::bundle {

struct WinnerKernels {
  std::vector<KernelRequest> kernels;
  std::vector<std::string> notRebuilt;  // "elementwise 4096x4096 f32 (key 1a2b3c4d5e6f)"
};

Expected<WinnerKernels> kernelsFromWinners(cache::RecordStore& store, const std::vector<TargetDesc>& targets);

}  // namespace tessera::bundle
