// Owns the host pipeline (ARCHITECTURE.md §2.5: schedule -> LLVM dialect -> JIT or object code) and the
// LLVM target machine for this CPU.
#include "codegen/host_lowering.h"

#include <mutex>

#include "codegen/host_soft_half.h"
#include "codegen/mlir_env.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"

namespace tessera::codegen {
namespace {

void initLLVM() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

// Buffer hygiene first: hoisted packing buffers must be freed once per call (cpu-gemm-packed
// REPORT pitfall 6), small scratch goes to the stack. Then cse before canonicalize (ARCHITECTURE.md
// §5: otherwise bufferization's self-copies survive).
// scf.parallel loops (the kernels emit them only when they run on several threads) become
// OpenMP worksharing loops here, before the loops are lowered to branches.
std::string prepare(const HostLoweringOptions& o) {
  std::string s =
      "canonicalize,cse,canonicalize,"
      "func.func(buffer-loop-hoisting,promote-buffers-to-stack{max-alloc-size-in-bytes=4096}),"
      "buffer-deallocation-pipeline,"
      "func.func(convert-linalg-to-loops),lower-affine,";
  if (o.threads > 1) s += "convert-scf-to-openmp{num-threads=" + std::to_string(o.threads) + "},";
  return s + "func.func(convert-vector-to-scf{full-unroll=true}),canonicalize";
}

std::string toLLVM(const HostLoweringOptions& o) {
  return std::string("arith-expand{include-bf16=") + (o.nativeBf16 ? "false" : "true") + "},convert-scf-to-cf," +
         "convert-vector-to-llvm{vector-contract-lowering=outerproduct enable-x86vector=true" +
         (o.amx ? " enable-amx=true" : "") + "},expand-strided-metadata,lower-affine," +
         "finalize-memref-to-llvm,convert-arith-to-llvm,convert-math-to-llvm,convert-ub-to-llvm," +
         "convert-func-to-llvm{use-bare-ptr-memref-call-conv=1},convert-cf-to-llvm,convert-index-to-llvm," +
         (o.threads > 1 ? "convert-openmp-to-llvm," : "") + "reconcile-unrealized-casts";
}

// `linkable`: code for a relocatable object that ends up in executables and shared libraries (an
// ahead-of-time bundle): position-independent, small code model. The JIT's default (the large
// code model) puts code in .ltext with absolute relocations, which a PIE link turns into text
// relocations.
Expected<std::unique_ptr<llvm::TargetMachine>> hostMachine(const std::string& cpu, bool linkable = false) {
  initLLVM();
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb) return makeError(ErrorCode::Internal, "cannot detect the host target: " + llvm::toString(jtmb.takeError()));
  jtmb->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  if (linkable) {
    jtmb->setRelocationModel(llvm::Reloc::PIC_);
    jtmb->setCodeModel(llvm::CodeModel::Small);
  }
  if (!cpu.empty()) {
    jtmb->setCPU(cpu);
    jtmb->getFeatures() = llvm::SubtargetFeatures();
  }
  auto tm = jtmb->createTargetMachine();
  if (!tm) return makeError(ErrorCode::Internal, "cannot create the host target machine: " + llvm::toString(tm.takeError()));
  return std::move(*tm);
}

// Scratch buffers promoted to the stack inside conditionals in loops (edge-tile pads) become
// allocas in loop bodies: every iteration grows the stack until it overflows (seen: segfaults
// at 1024³ with MC=48). Each such buffer lives within one iteration, so a single allocation in the
// entry block (where LLVM wants static allocas anyway) serves all iterations.
void hoistStaticAllocas(mlir::ModuleOp m) {
  using namespace mlir;
  m.walk([](LLVM::LLVMFuncOp fn) {
    if (fn.getBody().empty()) return;
    Block& entry = fn.getBody().front();
    SmallVector<LLVM::AllocaOp> moves;
    // Allocas inside an OpenMP region belong to the thread that runs it: never hoisted out.
    auto inParallelRegion = [&](Operation* op) {
      for (Operation* p = op->getParentOp(); p && p != fn.getOperation(); p = p->getParentOp())
        if (p->getName().getDialectNamespace() == "omp") return true;
      return false;
    };
    fn.walk([&](LLVM::AllocaOp a) {
      if (a->getBlock() != &entry && a.getArraySize().getDefiningOp<LLVM::ConstantOp>() && !inParallelRegion(a))
        moves.push_back(a);
    });
    for (LLVM::AllocaOp a : moves) {
      OpBuilder b(&entry, entry.begin());
      Operation* size = b.clone(*a.getArraySize().getDefiningOp());
      a->moveAfter(size);
      a->setOperand(0, size->getResult(0));
    }
  });
}

}  // namespace

Status lowerHostToLLVMDialect(mlir::ModuleOp m, const HostLoweringOptions& o) {
  TESSERA_TRY(runPasses(m, prepare(o), "host preparation (buffers, loops)"));
  TESSERA_TRY(approximateMath(m));
  TESSERA_TRY(runPasses(m, toLLVM(o), "host lowering to the LLVM dialect"));
  // 16-bit floats that only move become i16 (host_soft_half.cpp): no soft-promotion calls
  // (__truncsfbf2) without avx512_bf16, and no legalization of odd-sized masked f16/bf16
  // vectors, which aborts the process ("Do not know how to soft promote this operator's
  // operand", seen with bf16 GEMM edge tiles of 17 lanes). Conversions the CPU has (fptrunc to
  // bf16 with avx512_bf16, f16 through F16C) keep their types at their boundaries.
  softHalfToInt(m, [](mlir::Type t) { return t.isF16() || t.isBF16(); });
  if (o.reciprocalEstimates) {
    mlir::OpBuilder b(m.getContext());
    m.walk([&](mlir::LLVM::LLVMFuncOp fn) {
      if (fn.isExternal()) return;
      llvm::SmallVector<mlir::Attribute> attrs;
      if (auto old = fn.getPassthroughAttr()) attrs.append(old.begin(), old.end());
      attrs.push_back(b.getArrayAttr({b.getStringAttr("reciprocal-estimates"), b.getStringAttr("divf:1,vec-divf:1")}));
      fn.setPassthroughAttr(b.getArrayAttr(attrs));
    });
  }
  hoistStaticAllocas(m);
  if (o.nontemporalStores) {
    // LLVM emits movnt only where it can prove the vector alignment; other stores stay plain.
    m.walk([](mlir::LLVM::StoreOp op) {
      if (mlir::isa<mlir::VectorType>(op.getValue().getType())) op.setNontemporal(true);
    });
  }
  return {};
}

Expected<std::unique_ptr<mlir::ExecutionEngine>> jitHost(mlir::ModuleOp m, const std::string& cpu, bool openmp) {
  TESSERA_ASSIGN(auto tm, hostMachine(cpu));
  mlir::ExecutionEngineOptions opts;
  // Kernels with parallel loops call the OpenMP runtime (__kmpc_fork_call ...): LLVM's libomp,
  // loaded into the process once. It re-initializes itself in forked children (its own
  // pthread_atfork handlers), so measuring a candidate in a child gets a fresh thread pool.
  std::string omp = TESSERA_LIBOMP;
  llvm::SmallVector<llvm::StringRef, 1> libs;
  if (openmp) {
    if (omp.empty()) return makeError(ErrorCode::Unsupported, "no OpenMP runtime (libomp-22-dev) for THREADS > 1");
    libs.push_back(omp);
    opts.sharedLibPaths = libs;
  }
  auto transformer = mlir::makeOptimizingTransformer(3, 0, tm.get());
  opts.transformer = transformer;
  opts.jitCodeGenOptLevel = llvm::CodeGenOptLevel::Aggressive;
  opts.enableGDBNotificationListener = false;
  opts.enablePerfNotificationListener = false;
  DiagnosticCollector diags(m.getContext());
  auto engine = mlir::ExecutionEngine::create(m, opts, std::move(tm));
  if (!engine)
    return makeError(ErrorCode::CompileError, "JIT failed: " + llvm::toString(engine.takeError()) + " " + diags.message());
  registerConversionBuiltins(**engine);
  return std::move(*engine);
}

Expected<std::string> emitHostArtifact(mlir::ModuleOp m, HostArtifact kind, const std::string& cpu) {
  TESSERA_ASSIGN(auto tm, hostMachine(cpu, kind == HostArtifact::Object));
  llvm::LLVMContext llctx;
  DiagnosticCollector diags(m.getContext());
  auto mod = mlir::translateModuleToLLVMIR(m, llctx, "tessera_kernel");
  if (!mod) return makeError(ErrorCode::CompileError, "translation to LLVM IR failed: " + diags.message());
  mod->setDataLayout(tm->createDataLayout());
  mod->setTargetTriple(tm->getTargetTriple());
  auto opt = mlir::makeOptimizingTransformer(3, 0, tm.get());
  if (auto err = opt(mod.get())) return makeError(ErrorCode::CompileError, "LLVM optimization failed: " + llvm::toString(std::move(err)));
  std::string out;
  llvm::raw_string_ostream os(out);
  if (kind == HostArtifact::LLVMIR) {
    mod->print(os, nullptr);
    return out;
  }
  llvm::SmallVector<char, 0> buf;
  llvm::raw_svector_ostream bos(buf);
  llvm::legacy::PassManager pm;
  auto ft = kind == HostArtifact::Asm ? llvm::CodeGenFileType::AssemblyFile : llvm::CodeGenFileType::ObjectFile;
  if (tm->addPassesToEmitFile(pm, bos, nullptr, ft))
    return makeError(ErrorCode::CompileError, "the host target cannot emit this file type");
  pm.run(*mod);
  return std::string(buf.begin(), buf.end());
}

}  // namespace tessera::codegen
