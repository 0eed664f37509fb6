// Owns "every winner for some targets": the kernels behind a store's winners, rebuilt from their
// hard keys. A key names the family, shape, dtype and layout, not the whole kernel: plain GEMMs
// (batch, transposes) and attention (causal or not, default scale) are rebuilt and kept only when
// the rebuilt kernel's workload hash equals the key's; the others (elementwise chains, epilogues,
// alpha/beta) are reported, to be listed by spec or IR file instead.
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
