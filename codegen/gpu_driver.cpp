// Owns the GPU code generator's entry points. One schedule, one cut point, two consumers
// (mlir-recipes/emulation REPORT), in this order:
//   strategy -> payload -> @pre_main -> pre-mapping IR --clone--> NaN-fill, strip, host pipeline, JIT
//                                                     \--> @map_main -> tensor-core / pipelining steps
//                                                          -> NVVM | ROCDL -> PTX + ptxas | asm + hsaco
//                                                          -> resource report + occupancy
#include <chrono>
#include <cstring>
#include <mutex>

#include "codegen/gpu.h"
#include "codegen/gpu_lowering.h"
#include "codegen/gpu_strategies.h"
#include "codegen/host_lowering.h"
#include "codegen/host_strategies.h"
#include "codegen/mlir_env.h"
#include "ir/verifier.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "llvm/Support/TargetSelect.h"

namespace tessera::codegen {

using namespace mlir;

namespace {

using Clock = std::chrono::steady_clock;

Expected<GpuPlan> buildPlan(MLIRContext* ctx, const ir::Kernel& k, const ir::Config& c, const TargetDesc& t) {
  TESSERA_TRY(gpuBackendFor(t));  // a GPU target
  TESSERA_TRY(ir::verify(k));
  switch (k.family) {
    case ir::Family::Gemm: return buildGpuGemm(ctx, k, c, t);
    case ir::Family::Elementwise: return buildGpuElementwise(ctx, k, c, t);
    case ir::Family::Attention: return buildGpuAttention(ctx, k, c, t);
  }
  return makeError(ErrorCode::Internal, "unknown family");
}

// Payload -> pre-mapping IR (in place).
Status toPreMapping(GpuPlan& p) {
  if (p.hasPre) {
    TESSERA_TRY(applyNamedSequence(*p.module, p.schedule, "pre_main"));
    TESSERA_TRY(runPasses(*p.module, "canonicalize,cse,canonicalize", "pre-mapping cleanup"));
  }
  if (p.afterPre) TESSERA_TRY(p.afterPre(*p.module));
  return {};
}

// Pre-mapping IR -> mapped IR (in place), launch dimensions read back.
Status toMapped(GpuPlan& p) {
  TESSERA_TRY(applyNamedSequence(*p.module, p.schedule, "map_main"));
  TESSERA_TRY(runPasses(*p.module, "canonicalize,cse", "mapped cleanup"));
  if (p.afterMap) TESSERA_TRY(p.afterMap(*p.module));
  return readLaunchDims(*p.module, p.launch);
}

// The emulation JIT: the pre-mapping IR is fully unrolled warp- and thread-level vector code
// (a 64x32x32 warp contraction alone is 2048 outer-product FMAs), which LLVM O3 takes ~10 s to
// optimize; correctness needs none of that, so it runs at O1 with fast instruction selection.
Expected<std::unique_ptr<ExecutionEngine>> jitEmulation(ModuleOp m, int optLevel) {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
  ExecutionEngineOptions opts;
  auto transformer = makeOptimizingTransformer(unsigned(optLevel), 0, nullptr);
  opts.transformer = transformer;
  opts.jitCodeGenOptLevel = optLevel == 0 ? llvm::CodeGenOptLevel::None : llvm::CodeGenOptLevel::Less;
  opts.enableGDBNotificationListener = false;
  opts.enablePerfNotificationListener = false;
  DiagnosticCollector diags(m.getContext());
  auto engine = ExecutionEngine::create(m, opts);
  if (!engine)
    return makeError(ErrorCode::CompileError, "emulation JIT failed: " + llvm::toString(engine.takeError()) + " " + diags.message());
  return std::move(*engine);
}

int64_t threadsOf(const GpuLaunch& l) { return l.block[0] * l.block[1] * l.block[2]; }

// The emulated form: the pre-mapping kernel JIT-compiled for the CPU, behind the GPU host wrapper.
class EmulatedExecutable : public HostExecutable {
 public:
  EmulatedExecutable(std::unique_ptr<MLIRContext> ctx, std::unique_ptr<ExecutionEngine> e, RawFn fn, GpuLaunch l,
                     std::vector<int64_t> elemBytes)
      : ctx_(std::move(ctx)), engine_(std::move(e)), fn_(fn), launch_(std::move(l)), elemBytes_(std::move(elemBytes)) {}

  void run(void* const* buffers) const override {
    const size_t n = launch_.args.size();
    std::vector<std::unique_ptr<char[]>> scratch(n);
    std::vector<void*> args(n);
    for (size_t i = 0; i < n; ++i) {
      const GpuArg& a = launch_.args[i];
      if (a.kind == GpuArg::Kind::Tensor) continue;
      size_t bytes = size_t(a.elements()) * size_t(ir::byteSize(a.dtype)) + 64;
      scratch[i].reset(new char[bytes]);
      args[i] = aligned(scratch[i].get());
    }
    for (int64_t b = 0; b < launch_.batches; ++b) {
      for (size_t i = 0; i < n; ++i) {
        const GpuArg& a = launch_.args[i];
        char* user = a.tensor >= 0 ? static_cast<char*>(buffers[a.tensor]) + b * a.batchStride * elemBytes_[size_t(a.tensor)]
                                   : nullptr;
        if (a.kind == GpuArg::Kind::Tensor) {
          args[i] = user;
          if (a.zeroFirst) std::memset(user, 0, size_t(a.rows * a.cols) * size_t(ir::byteSize(a.dtype)));
        } else if (a.kind == GpuArg::Kind::Workspace) {
          std::memset(args[i], 0, size_t(a.elements()) * size_t(ir::byteSize(a.dtype)));
        } else {
          wrapper::pack(a, user, args[i]);
        }
      }
      invokeRaw(fn_, args.data(), n);
      for (size_t i = 0; i < n; ++i) {
        const GpuArg& a = launch_.args[i];
        if (a.kind != GpuArg::Kind::Workspace || !a.copyBack) continue;
        char* user = static_cast<char*>(buffers[a.tensor]) + b * a.batchStride * elemBytes_[size_t(a.tensor)];
        wrapper::copyBack(a, args[i], user);
      }
    }
  }
  // The wrapper (padding, batch loop) is part of running this kernel: the raw entry is only the
  // whole story when there is none.
  RawFn raw() const override {
    if (launch_.batches != 1) return nullptr;
    for (const auto& a : launch_.args)
      if (a.kind != GpuArg::Kind::Tensor) return nullptr;
    return fn_;
  }

 private:
  static void* aligned(char* p) { return reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(p) + 63) & ~uintptr_t(63)); }
  std::unique_ptr<MLIRContext> ctx_;
  std::unique_ptr<ExecutionEngine> engine_;
  RawFn fn_;
  GpuLaunch launch_;
  std::vector<int64_t> elemBytes_;  // per user buffer
};

Expected<GpuBinary> compileImpl(const ir::Kernel& k, const ir::Config& c, const TargetDesc& t, bool wantBinary,
                                std::optional<GpuEmit> stop, std::string* stageText) {
  auto t0 = Clock::now();
  auto ctx = makeContext();
  TESSERA_ASSIGN(GpuPlan p, buildPlan(ctx.get(), k, c, t));
  GpuBinary out;
  out.target = t.name;
  out.strategy = p.strategy;
  if (stop == GpuEmit::Payload) {
    *stageText = printOp(*p.module);
    return out;
  }
  if (stop == GpuEmit::Schedule) {
    *stageText = p.schedule;
    return out;
  }
  TESSERA_TRY(toPreMapping(p));
  out.mlirPre = printOp(*p.module);
  if (stop == GpuEmit::Pre) {
    *stageText = out.mlirPre;
    return out;
  }
  TESSERA_TRY(toMapped(p));
  out.mlirMapped = printOp(*p.module);
  if (stop == GpuEmit::Mapped) {
    *stageText = out.mlirMapped;
    return out;
  }
  TESSERA_ASSIGN(GpuObjects obj, lowerToTarget(*p.module, t, wantBinary));
  TESSERA_ASSIGN(const GpuBackend* backend, gpuBackendFor(t));
  ResourceReport& r = out.resources;
  backend->readResources(obj, r);
  out.assembly = std::move(obj.assembly);
  out.binary = std::move(obj.binary);
  p.launch.kernel = obj.kernel;
  p.launch.kernelParams = obj.params;
  out.launch = p.launch;
  r.threadsPerBlock = threadsOf(p.launch);
  finishResourceReport(r, t);
  out.compileSeconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return out;
}

}  // namespace

Status checkGpuConfig(const ir::Kernel& k, const ir::Config& c, const TargetDesc& t) {
  switch (k.family) {
    case ir::Family::Gemm: return checkGpuGemm(k, c, t);
    case ir::Family::Elementwise: return checkGpuElementwise(k, c, t);
    case ir::Family::Attention: return checkGpuAttention(k, c, t);
  }
  return makeError(ErrorCode::Internal, "unknown family");
}

Expected<GpuBinary> compileGpu(const ir::Kernel& k, const ir::Config& c, const TargetDesc& t, const GpuCompileOptions& o) {
  return compileImpl(k, c, t, o.wantBinary, std::nullopt, nullptr);
}

Expected<std::string> emitGpu(const ir::Kernel& k, const ir::Config& c, const TargetDesc& t, GpuEmit e) {
  std::string text;
  bool early = e != GpuEmit::Asm && e != GpuEmit::Binary;
  TESSERA_ASSIGN(GpuBinary b, compileImpl(k, c, t, e == GpuEmit::Binary, early ? std::optional<GpuEmit>(e) : std::nullopt, &text));
  if (e == GpuEmit::Asm) return b.assembly;
  if (e == GpuEmit::Binary) return b.binary;
  return text;
}

Expected<std::unique_ptr<HostExecutable>> compileEmulated(const ir::Kernel& k, const ir::Config& c, const TargetDesc& t,
                                                          const EmulateOptions& o) {
  auto t0 = Clock::now();
  auto ctx = makeContext();
  TESSERA_ASSIGN(GpuPlan p, buildPlan(ctx.get(), k, c, t));
  if (p.launch.args.size() > 64) return makeError(ErrorCode::Unsupported, "kernels take at most 64 arguments");
  TESSERA_TRY(toPreMapping(p));
  OwningOpRef<ModuleOp> host = cast<ModuleOp>((*p.module)->clone());
  if (o.preHook) {
    TESSERA_ASSIGN(host, parseModule(ctx.get(), o.preHook(printOp(*host))));
  }
  if (o.checkMapping) {
    // IR that emulates can still be unmappable: map it and lower it for the target as well.
    TESSERA_TRY(toMapped(p));
    TESSERA_ASSIGN(GpuObjects obj, lowerToTarget(*p.module, t, /*wantBinary=*/false));
    (void)obj;
  }
  TESSERA_ASSIGN(int poisoned, prepareForHost(*host));
  (void)poisoned;
  TESSERA_TRY(lowerHostToLLVMDialect(*host));
  TESSERA_ASSIGN(auto engine, jitEmulation(*host, o.optLevel));
  auto fn = engine->lookupPacked(kKernelSymbol);
  if (!fn) return makeError(ErrorCode::CompileError, "JIT lookup failed: " + llvm::toString(fn.takeError()));
  std::vector<int64_t> elemBytes;
  for (const auto* d : k.inputs()) elemBytes.push_back(ir::byteSize(d->dtype));
  for (const auto* d : k.outputs()) elemBytes.push_back(ir::byteSize(d->dtype));
  auto exe = std::make_unique<EmulatedExecutable>(std::move(ctx), std::move(engine), *fn, p.launch, std::move(elemBytes));
  exe->compileSeconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return std::unique_ptr<HostExecutable>(std::move(exe));
}

}  // namespace tessera::codegen
