// Owns the NVIDIA backend: NVVM lowering (mlir-recipes/emulation/h/nv_from_pre.sh in process),
// PTX emission and ptxas (the check that the PTX is valid for the chip, the cubin and the -v
// resource report), occupancy by registers per warp and shared memory per SM, mma.sync as the
// GEMM's matrix path, and the CUDA driver runner.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>

#include "codegen/gpu_backend.h"
#include "codegen/gpu_lowering.h"
#include "codegen/gpu_resource_text.h"
#include "codegen/gpu_rules.h"
#include "codegen/mlir_env.h"
#include "targets/occupancy.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace tessera::codegen {

namespace {

// CUDA 13 ptxas (ARCHITECTURE.md §2.6).
constexpr const char* kCudaToolkit = "/usr/local/cuda";

int64_t firstInt(const std::string& text, const std::string& re) {
  std::smatch m;
  if (std::regex_search(text, m, std::regex(re))) return std::stoll(m[1].str());
  return 0;
}

// To the NVVM cut point (the module the mapped-kernel emulator runs: NVVM ops still ops, before
// convert-nvvm-to-llvm turns some of them into inline PTX), then the rest to PTX. Two pass
// managers in a row give the PTX of one.
std::string pipelineToCut(const TargetDesc& t) {
  return "nvvm-attach-target{chip=" + t.arch + " features=+ptx80 O=3},"
         "convert-nvgpu-to-nvvm,"
         "gpu.module(convert-vector-to-scf{full-unroll=true},convert-vector-to-llvm{use-vector-alignment=1}),"
         "lower-affine,convert-scf-to-cf,expand-strided-metadata,lower-affine,"
         "gpu.module(strip-debuginfo,convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=1},canonicalize,cse,"
         "reconcile-unrealized-casts)";
}
const char* kPipelineFromCut = "gpu.module(convert-nvvm-to-llvm,canonicalize,cse,reconcile-unrealized-casts)";

// gpu.dynamic_shared_memory lowers to an internal zero-sized shared global, which the NVPTX back
// end demotes to a 1-byte `.shared` variable among the static ones: offsets past it land on them
// and the alignment is lost (mlir-recipes/gpu-wgmma-tma pitfall 1). As an external, 1024-byte
// aligned global it becomes `.extern .shared .align 1024 .b8 x[]`, the dynamic window.
void externalDynamicShared(mlir::ModuleOp m) {
  m.walk([](mlir::LLVM::GlobalOp g) {
    if (g.getAddrSpace() != 3 || !g.getSymName().starts_with("__dynamic_shmem")) return;
    g.setLinkage(mlir::LLVM::Linkage::External);
    g.setDsoLocal(true);
    g.setAlignment(1024);
  });
}

// setmaxnreg moves registers between the warpgroups of a block's pool, which ptxas sizes only when
// the kernel's register count at entry is known: with .maxntid alone it ignores the instruction
// (C7508); .minnctapersm 1 fixes the entry count at what one block per SM allows.
void registerCountAtEntry(mlir::ModuleOp m) {
  m.walk([&](mlir::LLVM::LLVMFuncOp f) {
    bool uses = false;
    f.walk([&](mlir::NVVM::SetMaxRegisterOp) { uses = true; });
    if (uses && !f->hasAttr("nvvm.minctasm"))
      f->setAttr("nvvm.minctasm", mlir::IntegerAttr::get(mlir::IntegerType::get(m.getContext(), 32), 1));
  });
}

class NvidiaBackend : public GpuBackend {
 public:
  Vendor vendor() const override { return Vendor::Nvidia; }
  const char* assemblyName() const override { return "ptx"; }
  const char* binaryName() const override { return "cubin"; }
  const char* deviceIrName() const override { return "nvvm"; }

  Status emit(mlir::ModuleOp m, const TargetDesc& t, bool wantBinary, GpuObjects& out) const override {
    TESSERA_TRY(trimDiagnostics(runPasses(m, pipelineToCut(t), "NVVM lowering")));
    externalDynamicShared(m);
    registerCountAtEntry(m);
    out.deviceIr = gpuModuleText(m);
    TESSERA_TRY(trimDiagnostics(runPasses(m, kPipelineFromCut, "NVVM to LLVM")));
    TESSERA_TRY(trimDiagnostics(runPasses(m, std::string("gpu-module-to-binary{format=isa toolkit=") + kCudaToolkit + "}",
                                          "PTX emission")));
    TESSERA_ASSIGN(out.assembly, binaryObject(m, true));
    std::string base = scratchFileName("k");
    auto ptxas = [&](const std::string& stem, const std::string& ptx, std::string* log) {
      std::ofstream(stem + ".ptx", std::ios::binary) << ptx;
      int rc = runCommand(std::string(kCudaToolkit) + "/bin/ptxas -v -arch=" + t.arch + " " + stem + ".ptx -o " + stem + ".cubin", log);
      std::filesystem::remove(stem + ".ptx");
      return rc;
    };
    int rc = ptxas(base, out.assembly, &out.toolLog);
    // With only .maxntid, ptxas aims at two blocks per SM and caps a 256-thread block at 128
    // registers even when that spills (the swizzled mma.sync GEMM at 256^3: 128 registers and a
    // 4-byte spill; with .minnctapersm 1: 158 registers, no spill). A spill is what the resource
    // check rejects, so ptxas gets a second try with one block per SM allowed, kept only when it
    // does not spill; occupancy is then what the registers give, and the search weighs it.
    if (rc == 0 && firstInt(out.toolLog, R"((\d+) bytes spill stores)") > 0 &&
        out.assembly.find(".minnctapersm") == std::string::npos) {
      std::string relaxed = std::regex_replace(out.assembly, std::regex(R"((\.maxntid[^\n]*\n))"), "$1.minnctapersm 1\n");
      std::string log;
      if (relaxed != out.assembly && ptxas(base + "r", relaxed, &log) == 0 &&
          firstInt(log, R"((\d+) bytes spill stores)") == 0) {
        std::filesystem::rename(base + "r.cubin", base + ".cubin");
        out.assembly = std::move(relaxed);
        out.toolLog = std::move(log);
      }
      std::filesystem::remove(base + "r.cubin");
    }
    if (rc != 0) return makeError(ErrorCode::CompileError, "ptxas failed (" + std::to_string(rc) + "): " + out.toolLog);
    if (wantBinary) out.binary = readWholeFile(base + ".cubin");
    std::filesystem::remove(base + ".cubin");
    return {};
  }

  void readResources(const GpuObjects& o, ResourceReport& r) const override {
    const std::string& log = o.toolLog;
    r.registers = int(firstInt(log, R"(Used (\d+) registers)"));
    r.sharedBytes = firstInt(log, R"((\d+) bytes smem)");
    r.localBytes = firstInt(log, R"((\d+) bytes stack frame)");
    r.spillStoreBytes = firstInt(log, R"((\d+) bytes spill stores)");
    r.spillLoadBytes = firstInt(log, R"((\d+) bytes spill loads)");
    r.wgmmaArrivesInjected = 0;
    for (size_t at = log.find("(C7519)"); at != std::string::npos; at = log.find("(C7519)", at + 1)) ++r.wgmmaArrivesInjected;
    r.wgmmaSerialized = log.find("wgmma.mma_async instructions are serialized") != std::string::npos;
  }

  // The target's occupancy rule (targets/occupancy.h); static shared memory is capped per block.
  void occupancyLimits(ResourceReport& r, const TargetDesc& t,
                       const std::function<void(int64_t, const char*)>& limit) const override {
    tessera::occupancyLimits({.threadsPerBlock = r.threadsPerBlock, .registers = r.registers,
                              .sharedBytes = r.sharedBytes + r.dynamicSharedBytes},
                             t, limit);
    if (r.registers > t.maxRegsPerThread) r.problems.push_back("registers exceed " + std::to_string(t.maxRegsPerThread));
    if (r.sharedBytes + r.dynamicSharedBytes > std::max(t.smemPerBlock, t.smemPerBlockOptIn))
      r.problems.push_back("shared memory " + std::to_string(r.sharedBytes + r.dynamicSharedBytes) + " B exceeds " +
                           std::to_string(std::max(t.smemPerBlock, t.smemPerBlockOptIn)) + " B");
    if (r.sharedBytes > t.smemPerBlock)
      r.problems.push_back("static shared memory " + std::to_string(r.sharedBytes) + " B exceeds " +
                           std::to_string(t.smemPerBlock) + " B");
    if (r.spillStoreBytes + r.spillLoadBytes > 0)
      r.problems.push_back("spills (" + std::to_string(r.spillStoreBytes) + " B stores, " +
                           std::to_string(r.spillLoadBytes) + " B loads)");
    else if (r.localBytes > 0)
      r.problems.push_back("uses " + std::to_string(r.localBytes) + " B of local memory per thread");
  }

  // The rules (mma.sync m16n8k16, f16; lane-level m16n8k16 f16/bf16 with cp.async; wgmma on sm_90a)
  // are the rule library's (gpu_rules_gemm.cpp), which the spaces and the cache service link too.
  std::optional<MmaPath> gemmMma(ir::ScalarType input, const TargetDesc& t) const override { return gemmMmaPath(input, t); }

  // nvgpu's vector-to-mma.sync conversion of the warp contracts.
  Status lowerWarpContracts(mlir::ModuleOp m, const TargetDesc&) const override {
    return runPasses(m, "func.func(convert-vector-to-gpu{use-nvgpu=true}),canonicalize,cse", "vector to mma.sync");
  }

  std::optional<MmaPath> gemmLaneMma(ir::ScalarType input, const TargetDesc& t) const override {
    return gemmLaneMmaPath(input, t);
  }

  std::optional<MmaPath> gemmWarpgroupMma(ir::ScalarType input, const TargetDesc& t) const override {
    return gemmWarpgroupMmaPath(input, t);
  }

  std::string describe(const ResourceReport& r) const override {
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "%s: %lld threads/block, %d registers, smem %s, spills %lld B st / %lld B ld, local %lld B; "
                  "occupancy %d block%s = %d warps/SM (%.0f%%, limited by %s)",
                  r.target.c_str(), (long long)r.threadsPerBlock, r.registers, sharedText(r).c_str(),
                  (long long)r.spillStoreBytes, (long long)r.spillLoadBytes, (long long)r.localBytes, r.blocksPerUnit,
                  r.blocksPerUnit == 1 ? "" : "s",
                  r.wavesPerUnit, 100 * r.occupancy, r.limiter.c_str());
    std::string s = buf;
    if (r.wgmmaArrivesInjected > 0)
      s += "; ptxas fenced " + std::to_string(r.wgmmaArrivesInjected) + " wgmma" + (r.wgmmaArrivesInjected == 1 ? "" : "s") +
           " (registers written since wgmma.fence)";
    if (r.wgmmaSerialized) s += "; ptxas serialized the wgmmas";
    return s;
  }

  Expected<DeviceApi> openDevice(int device) const override { return openCudaDevice(device); }
};

}  // namespace

const GpuBackend& nvidiaBackend() {
  static const NvidiaBackend b;
  return b;
}

}  // namespace tessera::codegen
