// Owns "every winner for some targets": the kernels behind a store's winners, rebuilt from the
// store's kernel table (store/kernel_text.h: the kernel's canonical text, whatever its
// family, fused elementwise chains and GEMM epilogues included), kept only when the parsed kernel's
// workload hash equals the key's. Stores written before the table existed have no text: plain
// GEMMs (batch, transposes) and attention (causal or not, default scale) are then rebuilt from
// their hard keys; the others are reported, to be listed by spec or IR file instead.
#pragma once

#include <string>
#include <vector>

#include "bundle/bundle.h"
#include "client/client.h"
#include "store/store.h"

namespace tessera::bundle {

struct WinnerKernels {
  std::vector<KernelRequest> kernels;
  std::vector<std::string> notRebuilt;  // "elementwise 4096x4096 f32 (key 1a2b3c4d5e6f)"
  size_t shared = 0;                    // winners that came from the shared cache
  std::string warning;                  // the shared cache's first refusal or failure
};

// With an enabled `client`, the shared cache's winners for the targets are taken too (after the
// store's own, one kernel per workload), and the texts of their kernels that `store` lacks are
// fetched, checked (cache::fetchKernelTexts) and filed in `store`'s kernel table.
Expected<WinnerKernels> kernelsFromWinners(cache::RecordStore& store, const std::vector<TargetDesc>& targets,
                                           cache::CacheClient* client = nullptr);

}  // namespace tessera::bundle
