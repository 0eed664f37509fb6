// Owns the host code generator's entry points: dispatch to the family strategy, schedule, lower,
// JIT, and the stage printer behind `tessera compile --emit`. The steps, in order:
//   payload (strategy) -> schedule (transform interpreter) -> LLVM dialect -> JIT | LLVM IR | asm | obj
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <mutex>

#include "codegen/codegen.h"
#include "codegen/expr_emitter.h"
#include "hostgen/host_strategies.h"
#include "codegen/host_lowering.h"
#include "codegen/mlir_env.h"
#include "ir/verifier.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace tessera::codegen {

using namespace mlir;

Expected<Emit> parseEmit(const std::string& s) {
  for (Emit e : {Emit::Payload, Emit::Schedule, Emit::Scheduled, Emit::LLVMDialect, Emit::LLVMIR, Emit::Asm, Emit::Object})
    if (s == emitName(e)) return e;
  return makeError(ErrorCode::InvalidArgument,
                   "unknown --emit '" + s + "' (host: payload, schedule, scheduled, llvm-dialect, llvm-ir, asm, obj)");
}

const char* emitName(Emit e) {
  switch (e) {
    case Emit::Payload: return "payload";
    case Emit::Schedule: return "schedule";
    case Emit::Scheduled: return "scheduled";
    case Emit::LLVMDialect: return "llvm-dialect";
    case Emit::LLVMIR: return "llvm-ir";
    case Emit::Asm: return "asm";
    case Emit::Object: return "obj";
  }
  return "?";
}

namespace {

Expected<HostPayload> buildPayload(MLIRContext* ctx, const ir::Kernel& k, const ir::Config& c, const TargetDesc& t,
                                   const RuntimeDims& dims) {
  if (t.isGpu())
    return makeError(ErrorCode::Unsupported, "target " + t.name + " is not the host CPU");
  TESSERA_TRY(ir::verify(k));
  if (dims.any()) {
    // Shape-generic kernels: the explicit GEMM builds its loops from the runtime sizes; an
    // elementwise kernel views its tensors at the runtime leading dimension.
    if (k.family == ir::Family::Elementwise) return buildHostElementwise(ctx, k, c, t, dims);
    if (k.family == ir::Family::Attention) return buildHostAttention(ctx, k, c, t, dims);
    if (dims.kv) return makeError(ErrorCode::Unsupported, "runtime sizes: a key length is attention's");
    TESSERA_ASSIGN(HostGemmConfig cfg, readHostGemmConfig(c));
    if (!cfg.blisFamily())
      return makeError(ErrorCode::Unsupported, "runtime sizes need a schedule of the blis family, not " + cfg.schedule);
    return buildHostGemmBlis(ctx, k, cfg, t, dims);
  }
  switch (k.family) {
    case ir::Family::Gemm: return buildHostGemm(ctx, k, c, t);
    case ir::Family::Elementwise: return buildHostElementwise(ctx, k, c, t);
    case ir::Family::Attention: return buildHostAttention(ctx, k, c, t);
  }
  return makeError(ErrorCode::Internal, "unknown family");
}

// Every scf.for directly in the kernel function's body (no loop-carried values) becomes an
// scf.parallel with the same bounds; the host pipeline turns those into OpenMP loops.
void parallelizeOuterLoops(ModuleOp m) {
  SmallVector<scf::ForOp> outer;
  m.walk([&](func::FuncOp fn) {
    for (Operation& op : fn.getBody().front())
      if (auto f = dyn_cast<scf::ForOp>(op); f && f.getInitArgs().empty()) outer.push_back(f);
  });
  for (scf::ForOp f : outer) {
    OpBuilder b(f);
    auto par = scf::ParallelOp::create(b, f.getLoc(), ValueRange{f.getLowerBound()}, ValueRange{f.getUpperBound()},
                                       ValueRange{f.getStep()});
    Block* body = par.getBody();
    Block* old = f.getBody();
    old->getArgument(0).replaceAllUsesWith(par.getInductionVars()[0]);
    // Move everything but the scf.yield terminator before the parallel loop's own terminator.
    body->getOperations().splice(Block::iterator(body->getTerminator()), old->getOperations(), old->begin(),
                                 std::prev(old->end()));
    f.erase();
  }
}

// Runs the pipeline up to `stop` (inclusive) on a fresh payload.
Expected<HostPayload> lowerTo(MLIRContext* ctx, const ir::Kernel& k, const ir::Config& c, const TargetDesc& t, Emit stop,
                              const RuntimeDims& dims) {
  TESSERA_ASSIGN(HostPayload p, buildPayload(ctx, k, c, t, dims));
  if (stop == Emit::Payload || stop == Emit::Schedule) return p;
  if (!p.schedule.empty()) TESSERA_TRY(applySchedule(*p.module, p.schedule));
  if (p.parallelOuterLoops) parallelizeOuterLoops(*p.module);
  if (stop == Emit::Scheduled) return p;
  // Native bf16 conversion only where the code is generated for this host's CPU (a --cpu
  // override may name one without it).
  bool nativeBf16 = t.hasIsa("avx512_bf16") && t.simdBits >= 512;
  TESSERA_TRY(lowerHostToLLVMDialect(
      *p.module, {.nontemporalStores = p.nontemporalStores,
                  .threads = p.threads,
                  .amx = p.amx,
                  .nativeBf16 = nativeBf16,
                  .reciprocalEstimates = p.reciprocalEstimates}));
  return p;
}

class JitExecutable : public HostExecutable {
 public:
  JitExecutable(std::unique_ptr<MLIRContext> ctx, std::unique_ptr<ExecutionEngine> e, RawFn fn, size_t nargs)
      : ctx_(std::move(ctx)), engine_(std::move(e)), fn_(fn), nargs_(nargs) {}
  void run(void* const* buffers) const override { invokeRaw(fn_, buffers, nargs_); }
  RawFn raw() const override { return fn_; }

 private:
  std::unique_ptr<MLIRContext> ctx_;
  std::unique_ptr<ExecutionEngine> engine_;
  RawFn fn_;
  size_t nargs_;
};

// Linux hands out the AMX tile state only on request, once per process (children inherit it):
// ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA. Without it the first tile instruction is a SIGILL.
Status requestAmxPermission() {
  static std::once_flag once;
  static long rc = 0;
  std::call_once(once, [] {
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    rc = syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata);
  });
  if (rc != 0) return makeError(ErrorCode::Unsupported, "Linux refused the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM)");
  return {};
}

}  // namespace

Expected<std::unique_ptr<HostExecutable>> compileHost(const ir::Kernel& k, const ir::Config& c, const TargetDesc& t,
                                                      const CompileOptions& o) {
  auto t0 = std::chrono::steady_clock::now();
  size_t nargs = k.inputs().size() + k.outputs().size() + (o.runtime.any() ? 1 : 0);
  if (nargs > 64) return makeError(ErrorCode::Unsupported, "kernels take at most 64 tensors");
  auto ctx = makeContext();
  TESSERA_ASSIGN(HostPayload p, lowerTo(ctx.get(), k, c, t, Emit::LLVMDialect, o.runtime));
  if (p.amx) TESSERA_TRY(requestAmxPermission());
  TESSERA_ASSIGN(auto engine, jitHost(*p.module, o.cpu, p.threads > 1));
  auto fn = engine->lookupPacked(kKernelSymbol);
  if (!fn) return makeError(ErrorCode::CompileError, "JIT lookup failed: " + llvm::toString(fn.takeError()));
  auto exe = std::make_unique<JitExecutable>(std::move(ctx), std::move(engine), *fn, nargs);
  exe->compileSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return std::unique_ptr<HostExecutable>(std::move(exe));
}

Expected<std::string> emitHost(const ir::Kernel& k, const ir::Config& c, const TargetDesc& t, Emit e,
                               const CompileOptions& o) {
  auto ctx = makeContext();
  Emit stop = e == Emit::LLVMIR || e == Emit::Asm || e == Emit::Object ? Emit::LLVMDialect : e;
  TESSERA_ASSIGN(HostPayload p, lowerTo(ctx.get(), k, c, t, stop, o.runtime));
  if (!o.symbol.empty() && stop == Emit::LLVMDialect) {
    auto fn = p.module->lookupSymbol<LLVM::LLVMFuncOp>(kKernelSymbol);
    if (!fn) return makeError(ErrorCode::Internal, "lowered module has no entry point");
    if (p.module->lookupSymbol(o.symbol)) return makeError(ErrorCode::InvalidArgument, "symbol '" + o.symbol + "' is taken");
    fn.setSymName(o.symbol);
  }
  switch (e) {
    case Emit::Schedule: return p.schedule.empty() ? std::string("// no transform schedule: this family is built as explicit loops\n") : p.schedule;
    case Emit::Payload:
    case Emit::Scheduled:
    case Emit::LLVMDialect: return printOp(*p.module);
    case Emit::LLVMIR: return emitHostArtifact(*p.module, HostArtifact::LLVMIR, o.cpu);
    case Emit::Asm: return emitHostArtifact(*p.module, HostArtifact::Asm, o.cpu);
    case Emit::Object: return emitHostArtifact(*p.module, HostArtifact::Object, o.cpu);
  }
  return makeError(ErrorCode::Internal, "unknown emit kind");
}

}  // namespace tessera::codegen
