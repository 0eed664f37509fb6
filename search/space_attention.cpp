// Owns the host attention space (PLACEHOLDER until the attention strategy lands).
#include "search/space.h"

namespace tessera::search {

Expected<ir::Space> attentionHostSpace(const ir::Kernel&, const TargetDesc&) {
  return makeError(ErrorCode::Unsupported, "host attention space not built yet");
}

}  // namespace tessera::search
