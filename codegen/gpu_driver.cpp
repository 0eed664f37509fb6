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
#include "codegen/gpu_runner.h"
#include "codegen/gpu_strategies.h"
#include "codegen/host_lowering.h"
#include "codegen/host_soft_half.h"
#include "codegen/kernel_func.h"
#include "codegen/mlir_env.h"
#include "ir/verifier.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "llvm/Support/TargetSelect.h"

namespace tessera::codegen {

using namespace mlir;

namespace {

using Clock = std::chrono::steady_clock;

Expected<GpuPlan> buildPlan(MLIRContext* ctx, const ir::Kernel& k, const ir::Config& c, const TargetDesc& t,
                            const RuntimeDims& rt) {
  TESSERA_TRY(gpuBackendFor(t));  // a GPU target
  TESSERA_TRY(ir::verify(k));
  switch (k.family) {
    case ir::Family::Gemm: return buildGpuGemm(ctx, k, c, t, rt);
    case ir::Family::Elementwise: return buildGpuElementwise(ctx, k, c, t, rt);
    case ir::Family::Attention: return buildGpuAttention(ctx, k, c, t, rt);
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
  // As for the host JIT: bf16/f16 conversions LLVM turns into calls on CPUs without them.
  registerConversionBuiltins(**engine);
  return std::move(*engine);
}

int64_t threadsOf(const GpuLaunch& l) { return l.block[0] * l.block[1] * l.block[2]; }

// The emulated form of one kernel: its pre-mapping IR JIT-compiled for the CPU, called with one
// pointer per launch argument.
class JitEmulatedKernel : public EmulatedKernel {
 public:
  JitEmulatedKernel(std::unique_ptr<MLIRContext> ctx, std::unique_ptr<ExecutionEngine> e, HostExecutable::RawFn fn,
                    GpuLaunch l)
      : ctx_(std::move(ctx)), engine_(std::move(e)), fn_(fn), launch_(std::move(l)) {}
  void call(void* const* args) const override { invokeRaw(fn_, args, launch_.args.size()); }
  const GpuLaunch& launch() const override { return launch_; }
  HostExecutable::RawFn raw() const { return fn_; }

 private:
  std::unique_ptr<MLIRContext> ctx_;
  std::unique_ptr<ExecutionEngine> engine_;
  HostExecutable::RawFn fn_;
  GpuLaunch launch_;
};

// The emulated form behind the GPU host wrapper: the emulated device runs the same wrapper code
// (padded copies, workspaces, per-batch launches, copy-back) as the CUDA and HIP runners.
class EmulatedExecutable : public HostExecutable {
 public:
  EmulatedExecutable(const ir::Kernel& k, std::shared_ptr<const JitEmulatedKernel> kernel, const std::string& target)
      : k_(k), kernel_(kernel), runner_(makeDeviceRunner(emulatedDevice(kernel, target))) {
    bin_.launch = kernel->launch();
  }

  void run(void* const* buffers) const override {
    // A shape-generic kernel's sizes follow the tensors (codegen.h RuntimeDims).
    const GpuLaunch::Runtime& rt = bin_.launch.runtime;
    const size_t n = k_.inputs().size() + k_.outputs().size();
    const int64_t* sizes = rt.m || rt.batch ? static_cast<const int64_t*>(buffers[n]) : nullptr;
    auto r = runner_->run(bin_, k_, buffers, 1, sizes);
    (void)r;  // host memory: the emulated device cannot fail (sizes out of range: nothing runs)
  }
  // The wrapper (padding, batch loop) is part of running this kernel: the raw entry is only the
  // whole story when there is none.
  RawFn raw() const override {
    const GpuLaunch& l = bin_.launch;
    if (l.batches != 1 || l.runtime.m || l.runtime.batch) return nullptr;
    for (const auto& a : l.args)
      if (a.kind != GpuArg::Kind::Tensor) return nullptr;
    return kernel_->raw();
  }

 private:
  ir::Kernel k_;
  std::shared_ptr<const JitEmulatedKernel> kernel_;
  GpuBinary bin_;
  std::unique_ptr<GpuRunner> runner_;
};

Expected<std::shared_ptr<const JitEmulatedKernel>> emulateImpl(const ir::Kernel& k, const ir::Config& c,
                                                               const TargetDesc& t, const EmulateOptions& o) {
  auto t0 = Clock::now();
  auto ctx = makeContext();
  TESSERA_ASSIGN(GpuPlan p, buildPlan(ctx.get(), k, c, t, o.runtime));
  if (p.laneLevel)
    return makeError(ErrorCode::Unsupported, "strategy " + p.strategy +
                                                 " is built as the mapped kernel (lane-level tensor-core code): it has no "
                                                 "pre-mapping form; the mapped-kernel emulator runs it (--emulate)");
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
  auto kernel = std::make_shared<JitEmulatedKernel>(std::move(ctx), std::move(engine), *fn, p.launch);
  kernel->compileSeconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return std::shared_ptr<const JitEmulatedKernel>(std::move(kernel));
}

Expected<GpuBinary> compileImpl(const ir::Kernel& k, const ir::Config& c, const TargetDesc& t, const GpuCompileOptions& o,
                                std::optional<GpuEmit> stop, std::string* stageText) {
  auto t0 = Clock::now();
  const bool wantBinary = o.wantBinary;
  auto ctx = makeContext();
  TESSERA_ASSIGN(GpuPlan p, buildPlan(ctx.get(), k, c, t, o.runtime));
  *p.sharedSwizzle = o.sharedSwizzle;
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
  out.mlirDevice = std::move(obj.deviceIr);
  p.launch.kernel = obj.kernel;
  p.launch.kernelParams = obj.params;
  out.launch = p.launch;
  r.threadsPerBlock = threadsOf(p.launch);
  r.dynamicSharedBytes = p.launch.dynamicSharedBytes;
  finishResourceReport(r, t);
  if (p.checkResources) p.checkResources(r);
  out.compileSeconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return out;
}

}  // namespace

Expected<GpuBinary> compileGpu(const ir::Kernel& k, const ir::Config& c, const TargetDesc& t, const GpuCompileOptions& o) {
  return compileImpl(k, c, t, o, std::nullopt, nullptr);
}

Expected<std::string> emitGpu(const ir::Kernel& k, const ir::Config& c, const TargetDesc& t, GpuEmit e) {
  std::string text;
  bool early = e != GpuEmit::Asm && e != GpuEmit::Binary && e != GpuEmit::Device;
  TESSERA_ASSIGN(GpuBinary b, compileImpl(k, c, t, {.wantBinary = e == GpuEmit::Binary},
                                          early ? std::optional<GpuEmit>(e) : std::nullopt, &text));
  if (e == GpuEmit::Asm) return b.assembly;
  if (e == GpuEmit::Binary) return b.binary;
  if (e == GpuEmit::Device) return b.mlirDevice;
  return text;
}

Expected<std::unique_ptr<HostExecutable>> compileEmulated(const ir::Kernel& k, const ir::Config& c, const TargetDesc& t,
                                                          const EmulateOptions& o) {
  TESSERA_ASSIGN(auto kernel, emulateImpl(k, c, t, o));
  auto exe = std::make_unique<EmulatedExecutable>(k, kernel, t.name);
  exe->compileSeconds = kernel->compileSeconds;
  return std::unique_ptr<HostExecutable>(std::move(exe));
}

Expected<std::shared_ptr<const EmulatedKernel>> compileEmulatedKernel(const ir::Kernel& k, const ir::Config& c,
                                                                     const TargetDesc& t, const EmulateOptions& o) {
  TESSERA_ASSIGN(auto kernel, emulateImpl(k, c, t, o));
  return std::shared_ptr<const EmulatedKernel>(std::move(kernel));
}

}  // namespace tessera::codegen
