// Owns the MLIR-free interface of the code generator: (kernel, config, target) -> a runnable host
// executable, or MLIR/LLVM text at a chosen stage. Includes no MLIR header, so the CLI, runner
// and search stay cheap to compile.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/families.h"
#include "ir/ir.h"
#include "ir/schedule.h"
#include "support/status.h"
#include "targets/target_desc.h"

namespace tessera::codegen {

// Stages of the host pipeline that `tessera compile --emit` can print or write.
enum class Emit {
  Payload,    // the kernel as MLIR (linalg / explicit loops), before any schedule
  Schedule,   // the transform-dialect schedule built from the config (empty for OpBuilder kernels)
  Scheduled,  // after the schedule: vector code on memrefs
  LLVMDialect,
  LLVMIR,     // optimized LLVM IR
  Asm,        // host assembly
  Object,     // ELF relocatable object (binary)
};
Expected<Emit> parseEmit(const std::string& s);
const char* emitName(Emit e);

// A compiled host kernel. Calling convention: one pointer per tensor, kernel inputs first (in
// Kernel::inputs() order), then outputs (Kernel::outputs() order); each points to a row-major,
// 64-byte aligned buffer of the tensor's dtype.
class HostExecutable {
 public:
  virtual ~HostExecutable() = default;
  virtual void run(void* const* buffers) const = 0;
  // Raw entry point, callable without this object (e.g. in a forked child).
  using RawFn = void (*)(void**);
  virtual RawFn raw() const = 0;
  double compileSeconds = 0;  // MLIR lowering + LLVM JIT
};

// Dimensions a kernel takes at run time instead of from its shape (shape-generic kernels: one
// kernel serves a range of token counts). The kernel's shape gives their upper bounds; the entry
// point takes one more pointer after the tensors, to `int64_t sizes[3] = {M, batch count, key length}` (an
// entry is read only where that dimension is a runtime one). Host GEMM, blis family: M when A is
// stored M x K and there is no batch dimension, or the batch count of a batched GEMM. Host
// elementwise: `m` is the leading dimension (the iteration space's first, sizes[0]), which must be
// the outermost dimension of every tensor that has it.
// Host attention: `m` is the query length (sizes[0]), `batch` the batch (sizes[1]) and `kv` the key
// length (sizes[2]; with `m` alone on a kernel whose lengths are equal, the key length follows the
// query length). Causal attention needs seq_q <= seq_kv at run time too (other sizes write nothing).
struct RuntimeDims {
  bool m = false;
  bool batch = false;
  bool kv = false;
  bool any() const { return m || batch || kv; }
};
inline constexpr int kRuntimeSizeCount = 3;

struct CompileOptions {
  // Extra LLVM CPU override ("" = the host's own, like -mcpu=native).
  std::string cpu;
  // Name of the entry point in LLVM IR / asm / object output ("" = "kernel"). Objects linked
  // together (an ahead-of-time bundle) each need their own. The entry point takes one bare
  // pointer per tensor (HostExecutable order) and returns nothing: a plain C function.
  std::string symbol;
  RuntimeDims runtime;
};

Expected<std::unique_ptr<HostExecutable>> compileHost(const ir::Kernel& k, const ir::Config& c,
                                                      const TargetDesc& t, const CompileOptions& o = {});
// Text (or binary for Object) of stage `e`.
Expected<std::string> emitHost(const ir::Kernel& k, const ir::Config& c, const TargetDesc& t, Emit e,
                               const CompileOptions& o = {});

// Whether the explicit host GEMM schedules (blis, bf16dot, amx) can apply this GEMM's epilogue in
// their write-back: one output, reads of other tensors along the rows or broadcast (no transposed
// or index-computed reads).
bool hostGemmFusesEpilogue(const ir::GemmInfo& g);

// Floating-point vector operations per element of an elementwise kernel's expression under config
// `c` (its MATH forms), as the host pipeline expands them: each add, multiply, FMA, min/max or
// conversion counts one issue slot of the FMA pipes, a division or square root 5 (a reciprocal
// estimate 4). At one op per lane per cycle of the FMA pipes this gives the kernel's compute roof
// (bench/elementwise_bench.cpp).
Expected<double> elementwiseOpsPerElement(const ir::Kernel& k, const ir::Config& c);

// Calls fn(buffers) the way HostExecutable::run does (packs the pointer arguments).
void invokeRaw(HostExecutable::RawFn fn, void* const* buffers, size_t count);

}  // namespace tessera::codegen
