// Owns the target half of GPU code generation: named transform sequences, the emulation clone,
// the NVIDIA and AMD pipelines (mlir-recipes/emulation/h/nv_from_pre.sh and amd_from_pre.sh in
// process: symbol-dce after outlining, expand-strided-metadata before convert-gpu-to-*), ptxas
// and the ld.lld "toolkit folder" for hsaco.
#include "codegen/gpu_lowering.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "codegen/mlir_env.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Transform/Interfaces/TransformInterfaces.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Transform/Transforms/TransformInterpreterUtils.h"
#include "mlir/IR/AttrTypeSubElements.h"
#include "mlir/IR/BuiltinOps.h"

namespace tessera::codegen {

using namespace mlir;

namespace {

// Outlining comes first, on its own, so that the kernel parameters can be read off the
// gpu.launch_func before the host side is touched.
const char* kOutline = "func.func(gpu-launch-sink-index-computations),gpu-kernel-outlining,symbol-dce";

// Math the device libraries would provide (libdevice / ocml) is expanded into polynomials, the
// same ones the CPU emulation runs: rsqrt becomes 1/sqrt and exp2 exp(x ln 2) first, the
// polynomial expansion then leaves only ops both backends have as instructions, except floor,
// which convert-gpu-to-rocdl would still turn into an ocml call: floor(x) = r - (r > x), r =
// roundeven(x) (exact for every finite x).
Status expandDeviceMath(ModuleOp m) {
  m.walk([](Operation* op) {
    OpBuilder b(op);
    Location loc = op->getLoc();
    if (auto r = dyn_cast<math::RsqrtOp>(op)) {
      Value one = arith::ConstantOp::create(b, loc, b.getFloatAttr(r.getType(), 1.0));
      Value s = math::SqrtOp::create(b, loc, r.getOperand(), r.getFastmathAttr());
      r.replaceAllUsesWith(arith::DivFOp::create(b, loc, one, s, r.getFastmathAttr()).getResult());
      r.erase();
    } else if (auto e = dyn_cast<math::Exp2Op>(op)) {
      Value ln2 = arith::ConstantOp::create(b, loc, b.getFloatAttr(e.getType(), 0.6931471805599453));
      Value x = arith::MulFOp::create(b, loc, e.getOperand(), ln2, e.getFastmathAttr());
      e.replaceAllUsesWith(math::ExpOp::create(b, loc, x, e.getFastmathAttr()).getResult());
      e.erase();
    }
  });
  TESSERA_TRY(approximateMath(m));
  m.walk([](math::FloorOp op) {
    OpBuilder b(op);
    Location loc = op->getLoc();
    Value x = op.getOperand();
    Value r = math::RoundEvenOp::create(b, loc, x);
    Value gt = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, r, x);
    Value one = arith::ConstantOp::create(b, loc, b.getFloatAttr(getElementTypeOrSelf(x.getType()), 1.0));
    if (auto vt = dyn_cast<VectorType>(x.getType())) one = vector::BroadcastOp::create(b, loc, vt, one);
    Value rm1 = arith::SubFOp::create(b, loc, r, one);
    op.replaceAllUsesWith(arith::SelectOp::create(b, loc, gt, rm1, r).getResult());
    op.erase();
  });
  return {};
}

}  // namespace

std::string readWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A scratch directory per process, removed at exit.
const std::filesystem::path& scratchFolder() {
  static std::filesystem::path dir = [] {
    std::string tmpl = (std::filesystem::temp_directory_path() / "tessera-gpu-XXXXXX").string();
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    char* d = mkdtemp(buf.data());
    std::filesystem::path p = d ? std::filesystem::path(d) : std::filesystem::temp_directory_path();
    // Removed at exit by the process that made it (not by forked children that exit normally).
    static struct Cleanup {
      std::filesystem::path p;
      pid_t owner;
      ~Cleanup() {
        std::error_code ec;
        if (getpid() == owner) std::filesystem::remove_all(p, ec);
      }
    } cleanup{p, getpid()};
    return p;
  }();
  return dir;
}

int runCommand(const std::string& cmd, std::string* out) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out->append(buf, n);
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::string scratchFileName(const std::string& stem) {
  static std::atomic<int> counter{0};
  return (scratchFolder() / (stem + "-" + std::to_string(getpid()) + "-" + std::to_string(counter++))).string();
}

// Objects of the single gpu.binary; PTX and ISA text carry a trailing NUL (ARCHITECTURE.md §5).
Expected<std::string> binaryObject(ModuleOp m, bool text) {
  std::string out;
  int n = 0;
  m.walk([&](gpu::BinaryOp bin) {
    for (Attribute a : bin.getObjects()) {
      StringRef bytes = cast<gpu::ObjectAttr>(a).getObject().getValue();
      out = bytes.str();
      ++n;
    }
  });
  if (n != 1) return makeError(ErrorCode::Internal, "expected one GPU object, got " + std::to_string(n));
  if (text && !out.empty() && out.back() == '\0') out.pop_back();
  return out;
}

std::string gpuModuleText(ModuleOp m) {
  std::string out;
  m.walk([&](gpu::GPUModuleOp g) { out = printOp(g); });
  return out;
}

Status trimDiagnostics(Status st) {
  if (st.ok()) return st;
  Error e = st.takeError();
  // "note: see current operation: <the whole module>" makes errors unreadable
  const std::string key = "; note: see current operation:";
  for (size_t p = e.message.find(key); p != std::string::npos; p = e.message.find(key, p)) {
    size_t end = e.message.find(" | ", p);
    e.message.erase(p, end == std::string::npos ? std::string::npos : end - p);
  }
  if (e.message.size() > 4000) e.message = e.message.substr(0, 4000) + " ...";
  return e;
}

Status applyNamedSequence(ModuleOp payload, const std::string& scheduleText, const std::string& entry) {
  TESSERA_ASSIGN(auto sched, parseModule(payload.getContext(), scheduleText));
  DiagnosticCollector diags(payload.getContext());
  auto root = transform::detail::findTransformEntryPoint(payload, *sched, entry);
  if (!root) return makeError(ErrorCode::Internal, "schedule has no @" + entry);
  transform::TransformOptions opts;
  opts.enableExpensiveChecks(false);
#ifndef NDEBUG
  opts.enableExpensiveChecks(true);
#endif
  if (failed(transform::applyTransformNamedSequence(payload, root, *sched, opts)))
    return trimDiagnostics(makeError(ErrorCode::CompileError, "@" + entry + " failed: " + diags.message()));
  return {};
}

Expected<int> prepareForHost(ModuleOp m) {
  int poisoned = 0;
  m.walk([&](Operation* op) {
    if (!isa<memref::AllocOp, memref::AllocaOp>(op)) return;
    auto t = cast<MemRefType>(op->getResult(0).getType());
    auto as = dyn_cast_or_null<gpu::AddressSpaceAttr>(t.getMemorySpace());
    if (!as || as.getValue() != gpu::AddressSpace::Workgroup) return;
    OpBuilder b(op->getContext());
    b.setInsertionPointAfter(op);
    Type et = t.getElementType();
    TypedAttr pat;
    if (auto it = dyn_cast<IntegerType>(et)) pat = b.getIntegerAttr(it, APInt::getAllOnes(it.getWidth()));
    else if (auto ft = dyn_cast<FloatType>(et)) pat = b.getFloatAttr(ft, APFloat::getNaN(ft.getFloatSemantics()));
    if (!pat) return;
    Value v = arith::ConstantOp::create(b, op->getLoc(), pat);
    linalg::FillOp::create(b, op->getLoc(), ValueRange{v}, ValueRange{op->getResult(0)});
    ++poisoned;
  });
  AttrTypeReplacer rep;
  rep.addReplacement([](MemRefType t) -> std::optional<Type> {
    if (!isa_and_nonnull<gpu::AddressSpaceAttr>(t.getMemorySpace())) return std::nullopt;
    return MemRefType::get(t.getShape(), t.getElementType(), t.getLayout(), Attribute());
  });
  rep.recursivelyReplaceElementsIn(m, /*replaceAttrs=*/true, /*replaceLocs=*/false, /*replaceTypes=*/true);
  // 16-bit operands of contractions are widened to f32 first (exact): lowered as they are, the
  // outer-product transposes move bf16 lanes one by one, which x86 code generation takes seconds
  // to legalize per warp tile.
  m.walk([](vector::ContractionOp c) {
    OpBuilder b(c);
    for (unsigned i = 0; i < 2; ++i) {
      auto vt = cast<VectorType>(c->getOperand(i).getType());
      if (vt.getElementType().getIntOrFloatBitWidth() != 16 || !isa<FloatType>(vt.getElementType())) continue;
      c->setOperand(i, arith::ExtFOp::create(b, c.getLoc(), VectorType::get(vt.getShape(), b.getF32Type()), c->getOperand(i)));
    }
  });
  SmallVector<Operation*> dead;
  m.walk([&](Operation* op) {
    if (isa<gpu::BarrierOp, memref::DeallocOp>(op)) dead.push_back(op);
  });
  for (Operation* op : dead) op->erase();
  TESSERA_TRY(runPasses(m, "func.func(scf-forall-to-for),canonicalize", "emulation: scf.forall to loops"));
  return poisoned;
}

std::string genericMapSchedule(std::array<int64_t, 3> bd, int warpSize, int64_t smemLimit) {
  return "module attributes {transform.with_named_sequence} {\n"
         "  transform.named_sequence @map_main(%root: !transform.any_op {transform.readonly}) {\n"
         "    %f = transform.structured.match ops{[\"func.func\"]} in %root : (!transform.any_op) -> !transform.any_op\n"
         "    transform.apply_patterns to %f { transform.apply_patterns.memref.alloc_to_alloca size_limit(" +
         std::to_string(smemLimit) + ") } : !transform.any_op\n"
         "    %allocas = transform.structured.match ops{[\"memref.alloca\"]} in %f : (!transform.any_op) -> !transform.any_op\n"
         "    %allocas_t = transform.cast %allocas : !transform.any_op to !transform.op<\"memref.alloca\">\n"
         "    %get_g, %glob = transform.memref.alloca_to_global %allocas_t : (!transform.op<\"memref.alloca\">) -> (!transform.any_op, !transform.any_op)\n"
         // alloca_to_global drops the alignment while the kernels use 16-byte shared accesses
         // (mlir-recipes/gpu-flash-attention REPORT pitfall 1)
         "    %a16 = transform.param.constant 16 : i64 -> !transform.param<i64>\n"
         "    transform.annotate %glob \"alignment\" = %a16 : !transform.any_op, !transform.param<i64>\n"
         "    %gl = transform.gpu.map_forall_to_blocks %f { generate_gpu_launch } : (!transform.any_op) -> !transform.any_op\n"
         "    %th = transform.gpu.map_nested_forall_to_threads %gl block_dims = [" +
         std::to_string(bd[0]) + ", " + std::to_string(bd[1]) + ", " + std::to_string(bd[2]) + "] warp_size = " +
         std::to_string(warpSize) + " : (!transform.any_op) -> !transform.any_op\n"
         "    transform.apply_patterns to %th { transform.apply_patterns.canonicalization } : !transform.any_op\n"
         "    transform.apply_cse to %th : !transform.any_op\n"
         "    transform.yield\n  }\n}\n";
}

Status readLaunchDims(ModuleOp m, GpuLaunch& launch) {
  int n = 0;
  Status st;
  m.walk([&](gpu::LaunchOp op) {
    ++n;
    Value dims[6] = {op.getGridSizeX(), op.getGridSizeY(), op.getGridSizeZ(),
                     op.getBlockSizeX(), op.getBlockSizeY(), op.getBlockSizeZ()};
    for (int i = 0; i < 6; ++i) {
      std::optional<int64_t> c = getConstantIntValue(dims[i]);
      if (!c) {
        st = makeError(ErrorCode::Internal, "gpu.launch with a dynamic size");
        return;
      }
      (i < 3 ? launch.grid[size_t(i)] : launch.block[size_t(i - 3)]) = *c;
    }
    if (Value dyn = op.getDynamicSharedMemorySize()) {
      std::optional<int64_t> c = getConstantIntValue(dyn);
      if (!c) st = makeError(ErrorCode::Internal, "gpu.launch with a dynamic shared memory size that is not a constant");
      else launch.dynamicSharedBytes = *c;
    }
  });
  if (!st.ok()) return st;
  if (n != 1) return makeError(ErrorCode::CompileError, "the mapping produced " + std::to_string(n) + " gpu.launch ops, expected 1");
  return {};
}

Expected<GpuObjects> lowerToTarget(ModuleOp m, const TargetDesc& t, bool wantBinary) {
  GpuObjects out;
  TESSERA_TRY(expandDeviceMath(m));
  TESSERA_TRY(trimDiagnostics(runPasses(m, kOutline, "kernel outlining")));
  // Kernel parameters: each is a buffer argument of the host function, possibly seen through a
  // view (the flat views of the elementwise kernels share the base pointer).
  Status st;
  int launches = 0;
  m.walk([&](gpu::LaunchFuncOp op) {
    ++launches;
    out.kernel = op.getKernelName().str();
    for (Value v : op.getKernelOperands()) {
      while (Operation* def = v.getDefiningOp()) {
        if (auto c = dyn_cast<memref::CollapseShapeOp>(def)) v = c.getSrc();
        else if (auto e = dyn_cast<memref::ExpandShapeOp>(def)) v = e.getSrc();
        else if (auto c2 = dyn_cast<memref::CastOp>(def)) v = c2.getSource();
        else break;
      }
      auto arg = dyn_cast<BlockArgument>(v);
      if (!arg || !isa<func::FuncOp>(arg.getOwner()->getParentOp()) || !isa<MemRefType>(v.getType())) {
        st = makeError(ErrorCode::CompileError, "a kernel parameter is not a buffer argument (" + printOp(v.getDefiningOp() ? v.getDefiningOp() : op.getOperation()) + ")");
        return;
      }
      out.params.push_back(int(arg.getArgNumber()));
    }
  });
  TESSERA_TRY(st);
  if (launches != 1) return makeError(ErrorCode::CompileError, "expected one kernel launch, got " + std::to_string(launches));
  TESSERA_ASSIGN(const GpuBackend* backend, gpuBackendFor(t));
  TESSERA_TRY(backend->emit(m, t, wantBinary, out));
  return out;
}

}  // namespace tessera::codegen
