// Owns the family dispatch of the GPU spaces.
#include "search/space_gpu.h"

namespace tessera::search {

Expected<ir::Space> gpuSpace(const ir::Kernel& k, const TargetDesc& t) {
  switch (k.family) {
    case ir::Family::Gemm: return gemmGpuSpace(k, t);
    case ir::Family::Elementwise: return elementwiseGpuSpace(k, t);
    case ir::Family::Attention: return attentionGpuSpace(k, t);
  }
  return makeError(ErrorCode::Internal, "unknown family");
}

}  // namespace tessera::search
