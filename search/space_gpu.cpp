// Owns the family dispatch of the GPU spaces, and their defaults from device measurements where the
// device tables cover the kernel (search/measured_defaults.h).
#include "search/space_gpu.h"

#include "search/measured_defaults.h"

namespace tessera::search {

Expected<ir::Space> gpuSpace(const ir::Kernel& k, const TargetDesc& t) {
  Expected<ir::Space> s = makeError(ErrorCode::Internal, "unknown family");
  switch (k.family) {
    case ir::Family::Gemm: s = gemmGpuSpace(k, t); break;
    case ir::Family::Elementwise: s = elementwiseGpuSpace(k, t); break;
    case ir::Family::Attention: s = attentionGpuSpace(k, t); break;
  }
  if (s.ok()) applyMeasuredDefault(*s, k, t);
  return s;
}

}  // namespace tessera::search
