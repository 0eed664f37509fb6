// Owns the AMD backend: ROCDL lowering (mlir-recipes/emulation/h/amd_from_pre.sh in process), GCN
// assembly from LLVM's AMDGPU backend and hsaco through Debian's ld.lld, resources from the
// assembly's comments and amdhsa metadata, occupancy by the unified VGPR/AGPR file, SGPRs and LDS,
// MFMA as the GEMM's matrix path, and the HIP runner.
#include <algorithm>
#include <filesystem>
#include <mutex>
#include <regex>

#include "codegen/amd/gpu_backend_amd.h"
#include "codegen/gpu_backend.h"
#include "codegen/gpu_lowering.h"
#include "codegen/gpu_resource_text.h"
#include "codegen/gpu_rules.h"
#include "codegen/mlir_env.h"
#include "targets/occupancy.h"

namespace tessera::codegen {

namespace {

constexpr const char* kLld = "/usr/lib/llvm-22/bin/ld.lld";

int64_t roundUp(int64_t v, int64_t m) { return m <= 1 ? v : (v + m - 1) / m * m; }

int64_t firstInt(const std::string& text, const std::string& re, int64_t def = 0) {
  std::smatch m;
  if (std::regex_search(text, m, std::regex(re))) return std::stoll(m[1].str());
  return def;
}

// gpu-module-to-binary{format=bin} for AMD runs `<toolkit>/llvm/bin/ld.lld`: a folder whose
// llvm/bin/ld.lld links to Debian's lld stands in for a ROCm install (scripts/amd_lower.sh).
Expected<std::string> rocmToolkit() {
  static std::mutex mu;
  std::lock_guard<std::mutex> g(mu);
  std::filesystem::path dir = scratchFolder() / "rocm";
  std::filesystem::path lld = dir / "llvm" / "bin" / "ld.lld";
  std::error_code ec;
  if (!std::filesystem::exists(lld)) {
    std::filesystem::create_directories(lld.parent_path(), ec);
    std::filesystem::create_symlink(kLld, lld, ec);
    if (ec) return makeError(ErrorCode::Internal, "cannot link " + lld.string() + " -> " + kLld + ": " + ec.message());
  }
  return dir.string();
}

std::string pipeline(const TargetDesc& t) {
  std::string chip = t.arch;
  std::string wave = t.warpSize == 32 ? " wave64=false" : "";
  return "rocdl-attach-target{chip=" + chip + " O=3" + wave + "},"
         "convert-amdgpu-to-rocdl{chipset=" + chip + "},"
         "gpu.module(convert-vector-to-scf{full-unroll=true},convert-vector-to-llvm),"
         "lower-affine,convert-scf-to-cf,expand-strided-metadata,lower-affine,"
         // math left after the polynomial expansion (floor, exp2) as LLVM intrinsics: the AMDGPU
         // backend has them, while convert-gpu-to-rocdl would call ocml (no ROCm device libs here)
         "gpu.module(strip-debuginfo,convert-math-to-llvm,"
         "convert-gpu-to-rocdl{chipset=" + chip + " use-bare-ptr-memref-call-conv=1},"
         "canonicalize,cse,reconcile-unrealized-casts)";
}

class AmdBackend : public GpuBackend {
 public:
  Vendor vendor() const override { return Vendor::Amd; }
  const char* assemblyName() const override { return "asm"; }
  const char* binaryName() const override { return "hsaco"; }
  const char* deviceIrName() const override { return "rocdl"; }

  Status emit(mlir::ModuleOp m, const TargetDesc& t, bool wantBinary, GpuObjects& out) const override {
    TESSERA_TRY(trimDiagnostics(runPasses(m, pipeline(t), "ROCDL lowering")));
    // The ROCDL cut point is what gpu-module-to-binary receives (the emulator runs it).
    out.deviceIr = gpuModuleText(m);
    mlir::OwningOpRef<mlir::ModuleOp> binMod;
    if (wantBinary) binMod = mlir::cast<mlir::ModuleOp>(m->clone());
    TESSERA_TRY(trimDiagnostics(runPasses(m, "gpu-module-to-binary{format=isa}", "AMDGPU assembly emission")));
    TESSERA_ASSIGN(out.assembly, binaryObject(m, true));
    if (wantBinary) {
      TESSERA_ASSIGN(std::string tk, rocmToolkit());
      TESSERA_TRY(trimDiagnostics(
          runPasses(*binMod, "gpu-module-to-binary{format=bin toolkit=" + tk + "}", "hsaco emission (ld.lld)")));
      TESSERA_ASSIGN(out.binary, binaryObject(*binMod, false));
    }
    return {};
  }

  // The AMDGPU asm printer writes "; NumVgprs: 66"-style comments per kernel and the amdhsa
  // metadata block (.vgpr_spill_count, .group_segment_fixed_size, ...).
  void readResources(const GpuObjects& o, ResourceReport& r) const override {
    const std::string& a = o.assembly;
    r.vgprs = int(firstInt(a, R"(\.vgpr_count:\s+(\d+))", firstInt(a, R"(; NumVgprs: (\d+))")));
    r.sgprs = int(firstInt(a, R"(\.sgpr_count:\s+(\d+))", firstInt(a, R"(; NumSgprs: (\d+))")));
    r.agprs = int(firstInt(a, R"(\.agpr_count:\s+(\d+))", firstInt(a, R"(; NumAgprs: (\d+))")));
    r.sharedBytes = firstInt(a, R"(\.group_segment_fixed_size:\s+(\d+))", firstInt(a, R"(; LDSByteSize: (\d+))"));
    r.scratchBytes = firstInt(a, R"(\.private_segment_fixed_size:\s+(\d+))", firstInt(a, R"(; ScratchSize: (\d+))"));
    r.vgprSpills = int(firstInt(a, R"(\.vgpr_spill_count:\s+(\d+))"));
    r.sgprSpills = int(firstInt(a, R"(\.sgpr_spill_count:\s+(\d+))"));
  }

  // The target's occupancy rule (targets/occupancy.h: the unified VGPR/AGPR file, SGPRs, LDS),
  // then what exceeds the per-wave and per-block limits.
  void occupancyLimits(ResourceReport& r, const TargetDesc& t,
                       const std::function<void(int64_t, const char*)>& limit) const override {
    tessera::occupancyLimits({.threadsPerBlock = r.threadsPerBlock, .registers = r.vgprs, .agprs = r.agprs,
                              .sgprs = r.sgprs, .sharedBytes = r.sharedBytes + r.dynamicSharedBytes},
                             t, limit);
    const int64_t vg = r.agprs > 0 ? roundUp(r.vgprs, 4) + r.agprs : r.vgprs;
    if (vg > t.maxRegsPerThread) r.problems.push_back("VGPRs exceed " + std::to_string(t.maxRegsPerThread));
    if (r.sharedBytes + r.dynamicSharedBytes > t.smemPerBlock)
      r.problems.push_back("LDS " + std::to_string(r.sharedBytes + r.dynamicSharedBytes) + " B exceeds " +
                           std::to_string(t.smemPerBlock) + " B");
    if (r.vgprSpills + r.sgprSpills > 0)
      r.problems.push_back("spills (" + std::to_string(r.vgprSpills) + " VGPRs, " + std::to_string(r.sgprSpills) + " SGPRs)");
    else if (r.scratchBytes > 0)
      r.problems.push_back("uses " + std::to_string(r.scratchBytes) + " B of scratch per work-item");
  }

  // 16x16x16 MFMA with f16 or bf16 operands, synchronous copies: the rule library's rule
  // (gpu_rules_gemm.cpp), which the spaces and the cache service link too.
  std::optional<MmaPath> gemmMma(ir::ScalarType input, const TargetDesc& t) const override { return gemmMmaPath(input, t); }

  // Our per-lane vector.contract -> amdgpu.mfma rewrite (gpu_backend_amd_mfma.cpp), then cleanup.
  Status lowerWarpContracts(mlir::ModuleOp m, const TargetDesc& t) const override {
    TESSERA_TRY(rewriteContractsToMfma(m, t.warpSize));
    return runPasses(m, "canonicalize,cse", "mfma cleanup");
  }

  std::string describe(const ResourceReport& r) const override {
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "%s: %lld threads/block, VGPR %d, SGPR %d, AGPR %d, LDS %s, scratch %lld B, spills %d VGPR / %d SGPR; "
                  "occupancy %d block%s = %d waves/CU (%.0f%%, limited by %s)",
                  r.target.c_str(), (long long)r.threadsPerBlock, r.vgprs, r.sgprs, r.agprs, sharedText(r).c_str(),
                  (long long)r.scratchBytes, r.vgprSpills, r.sgprSpills, r.blocksPerUnit,
                  r.blocksPerUnit == 1 ? "" : "s", r.wavesPerUnit,
                  100 * r.occupancy, r.limiter.c_str());
    return buf;
  }

  Expected<DeviceApi> openDevice(int device) const override { return openHipDevice(device); }
};

}  // namespace

const GpuBackend& amdBackend() {
  static const AmdBackend b;
  return b;
}

}  // namespace tessera::codegen
