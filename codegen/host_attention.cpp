// Owns the host attention strategy (FlashAttention-style forward built with OpBuilder).
// PLACEHOLDER until the attention strategy lands: reports Unsupported.
#include "codegen/host_strategies.h"

namespace tessera::codegen {

Expected<HostPayload> buildHostAttention(mlir::MLIRContext*, const ir::Kernel&, const ir::Config&, const TargetDesc&) {
  return makeError(ErrorCode::Unsupported, "host attention codegen is not built yet");
}

}  // namespace tessera::codegen
