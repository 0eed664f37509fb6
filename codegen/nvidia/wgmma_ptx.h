// Owns the text of wgmma with its A operand in registers (FlashAttention-3's P·V): MLIR 22 has no
// op for it (nvvm.wgmma.mma_async takes A by descriptor only), so the kernel emits it as inline PTX
// and the mapped-kernel emulator recognises the same text. One function writes it, one reads it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tessera::codegen {

// wgmma.mma_async m64nNk16, f32 accumulators, A from four 32-bit registers per thread (mma.sync
// m16n8k16's A fragment for the thread's warp's 16 rows), B by a shared-memory descriptor, always
// accumulating (scale-d 1).
struct WgmmaRegA {
  int n = 0;              // 8..256 by 8
  bool bf16 = false;      // else f16
  bool bMnMajor = false;  // B's imm-trans-b: N contiguous (MN-major) rather than K
};

// Operands of the asm: $0..$(n/2-1) the accumulators (outputs, each tied to an input at the end),
// then the four A registers, then B's descriptor.
std::string wgmmaRegAPtx(const WgmmaRegA& w);
std::string wgmmaRegAConstraints(int n);
// The shape of an asm string written by wgmmaRegAPtx; nullopt for any other text.
std::optional<WgmmaRegA> parseWgmmaRegAPtx(std::string_view text);

}  // namespace tessera::codegen
