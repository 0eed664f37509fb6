// Owns the GPU target table: one TargetDesc per chip the GPU code generator compiles for. Each
// row describes one concrete product, the chip's default (peaks and bandwidth differ between SKUs of
// one chip: targets/gpu_skus.h has the others by name), and every figure names its public source.
// Sources, abbreviated below:
//   [CUDA-CC]  CUDA C++ Programming Guide, "Technical Specifications per Compute Capability" table
//              and the "Compute Capability 8.x / 9.0" sections (shared memory, 1 KB reserved per block)
//   [A100-WP]  NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020), Tables 1 and 3
//   [GA102-WP] NVIDIA Ampere GA102 GPU Architecture whitepaper, Appendix A table (RTX 3090)
//   [ADA-WP]   NVIDIA Ada GPU Architecture whitepaper, Appendix A table (RTX 4090)
//   [H100-WP]  NVIDIA H100 Tensor Core GPU Architecture whitepaper, Tables 2-3 (H100 SXM5)
//   [PTX-ISA]  PTX ISA 8.x, "Warp-level matrix multiply-accumulate (mma)" shapes, and "wgmma" (sm_90a)
//   [OCC]      CUDA Occupancy Calculator / Nsight Compute: registers allocated per warp in units of 256
//   [CDNA2-ISA] AMD Instinct MI200 (CDNA2) Instruction Set Architecture reference guide
//              (LDS 64 KB per CU, 512 unified VGPRs+AGPRs per lane, MFMA opcodes)
//   [MI250X]   AMD Instinct MI250X data sheet / product page (per-device figures; one GCD is half)
//   [CDNA3-ISA] AMD Instinct MI300 (CDNA3) Instruction Set Architecture reference guide
//   [MI300X]   AMD Instinct MI300X data sheet / product page, and the CDNA3 white paper (4 MB L2 per XCD)
//   [RDNA3-ISA] AMD RDNA3 Instruction Set Architecture reference guide (WMMA, wave32, 1536 VGPRs)
//   [7900XTX]  AMD Radeon RX 7900 XTX product page
//   [TUNING]   NVIDIA Volta/Turing/Ampere tuning guides: unified L1/shared memory, 128 bytes per
//              clock per SM, 128-byte lines of four 32-byte sectors
//   [CC-L1]    Chips and Cheese, "A New Year and New Tests: GPU L1 Cache Bandwidth" (2024): OpenCL
//              loads of an L1-resident buffer, per SM per clock, NVIDIA Turing to Ada
//   [GCN-L1]   AMD GCN architecture documentation (CDNA keeps the GCN CU): the vector L1 cache
//              delivers 64 bytes per clock, 64-byte lines
//   [RDNA-WP]  AMD RDNA architecture whitepaper: the L0 vector cache, 128-byte lines, 128 B/clock
//   [TU-WP]    NVIDIA Turing GPU Architecture whitepaper (2018); [T4-DS] NVIDIA T4 datasheet
//   [RDNA2-ISA] AMD RDNA2 Instruction Set Architecture reference guide (wave32, 1024 VGPRs per SIMD,
//              LDS 64 KB per workgroup, 128 KB per WGP); [RX6000] AMD Radeon RX 6000 product pages
//   [PRO-W]    AMD Radeon PRO W6000/W7000 product pages; [RX7000] AMD Radeon RX 7000 product pages
//   [LLVM-AMDGPU] LLVM AMDGPUBaseInfo.cpp (getMaxWavesPerEU: 8 on gfx90a/gfx94x, 16 on gfx11;
//              getTotalNumVGPRs / getVGPRAllocGranule; getMaxWorkGroupsPerCU: 16 barrier-limited
//              groups per CU on gfx9, 32 in gfx10+ WGP mode) and AMDGPUUsage.rst (processor table)
#include "targets/gpu_targets.h"

namespace tessera {
namespace {

constexpr int64_t KB = 1024, MB = 1024 * 1024;

// Shared by every NVIDIA row: warps of 32 [CUDA-CC], 1024 threads per block [CUDA-CC], 64K 32-bit
// registers per SM and 255 per thread [CUDA-CC], 48 KB static shared memory per block [CUDA-CC],
// 1 KB of shared memory reserved per block on 8.x/9.0 [CUDA-CC], registers allocated per warp in
// units of 256 [OCC], four SM sub-partitions.
TargetDesc nvidiaBase(const std::string& chip) {
  TargetDesc t;
  t.name = chip;
  t.vendor = Vendor::Nvidia;
  t.arch = chip;
  t.warpSize = 32;
  t.maxThreadsPerBlock = 1024;
  t.regsPerSM = 65536;
  t.maxRegsPerThread = 255;
  t.operandRegsPerThread = 255;
  t.smemPerBlock = 48 * KB;
  t.smemReservedPerBlock = 1 * KB;
  t.regAllocGranule = 256;
  t.simdsPerUnit = 4;
  // Global loads that hit L1 reach about half of shared memory's 128 bytes per clock on Turing,
  // Ampere and Ada [CC-L1]; the Xgemm tables agree (staged tiles beat direct loads on the RTX 3090).
  t.l1BytesPerClock = 64;   // [CC-L1]
  t.l1LineBytes = 128;      // [TUNING]
  // mma.sync shapes, sm_80 and later [PTX-ISA]: m16n8k16 for f16 and bf16, m16n8k8 for tf32.
  t.mma = {{"f16", 16, 8, 16, "mma.sync"}, {"bf16", 16, 8, 16, "mma.sync"}, {"f32", 16, 8, 8, "mma.sync"}};
  return t;
}

// Shared by the CDNA rows: wave64 [CDNA2-ISA], 1024 work-items per group [LLVM-AMDGPU], 64 KB LDS
// per workgroup and per CU [CDNA2-ISA, CDNA3-ISA], 4 SIMDs per CU, 512 VGPRs per lane per SIMD
// shared by arch VGPRs and AGPRs, allocated in granules of 8, 8 waves per SIMD, 800 SGPRs per SIMD
// and 102 per wave, 16 barrier-limited workgroups per CU [LLVM-AMDGPU]. MFMA shapes [CDNA2-ISA,
// CDNA3-ISA]: v_mfma_f32_16x16x16f16 / 32x32x8f16, the bf16_1k forms of the same shapes, and
// v_mfma_f32_16x16x4f32 / 32x32x2f32.
TargetDesc cdnaBase(const std::string& chip) {
  TargetDesc t;
  t.name = chip;
  t.vendor = Vendor::Amd;
  t.arch = chip;
  t.warpSize = 64;
  t.maxThreadsPerBlock = 1024;
  t.smemPerBlock = 64 * KB;
  t.smemPerBlockOptIn = 64 * KB;
  t.smemPerSM = 64 * KB;
  t.simdsPerUnit = 4;
  t.regsPerSimd = 512;
  t.regAllocGranule = 8;
  t.maxWavesPerSimd = 8;
  t.maxRegsPerThread = 512;
  t.operandRegsPerThread = 256;
  t.regsPerSM = int64_t(t.simdsPerUnit) * t.regsPerSimd * t.warpSize;
  t.maxWarpsPerSM = t.maxWavesPerSimd * t.simdsPerUnit;
  t.maxBlocksPerSM = 16;
  t.sgprsPerSimd = 800;
  t.maxSgprsPerWave = 102;
  t.l1BytesPerClock = 64;  // [GCN-L1]
  t.l1LineBytes = 64;      // [GCN-L1]
  t.mma = {{"f16", 16, 16, 16, "mfma"}, {"f16", 32, 32, 8, "mfma"},  {"bf16", 16, 16, 16, "mfma"},
           {"bf16", 32, 32, 8, "mfma"}, {"f32", 16, 16, 4, "mfma"},  {"f32", 32, 32, 2, "mfma"}};
  return t;
}

// Shared by the RDNA rows (gfx10.3 and gfx11): wave32, the default for compute on these chips
// [LLVM-AMDGPU], 1024 work-items per group, two SIMD32 per CU, LDS 64 KB per workgroup and 128 KB
// per WGP (64 KB per CU), 16 waves per SIMD, 32 barrier-limited groups in WGP mode [LLVM-AMDGPU],
// 106 SGPRs per wave, the L0 vector cache's 128-byte lines at 128 bytes per clock [RDNA-WP].
TargetDesc rdnaBase(const std::string& chip, int64_t vgprs, int granule) {
  TargetDesc t;
  t.name = chip;
  t.vendor = Vendor::Amd;
  t.arch = chip;
  t.warpSize = 32;
  t.maxThreadsPerBlock = 1024;
  t.smemPerBlock = 64 * KB;
  t.smemPerBlockOptIn = 64 * KB;
  t.smemPerSM = 64 * KB;
  t.simdsPerUnit = 2;
  t.regsPerSimd = vgprs;
  t.regAllocGranule = granule;
  t.maxWavesPerSimd = 16;
  t.maxRegsPerThread = 256;
  t.operandRegsPerThread = 256;
  t.regsPerSM = int64_t(t.simdsPerUnit) * t.regsPerSimd * t.warpSize;
  t.maxWarpsPerSM = t.maxWavesPerSimd * t.simdsPerUnit;
  t.maxBlocksPerSM = 32;
  t.maxSgprsPerWave = 106;
  t.l1BytesPerClock = 128;
  t.l1LineBytes = 128;
  return t;
}

std::vector<TargetDesc> buildTable() {
  std::vector<TargetDesc> v;

  // ---- sm_80: NVIDIA A100-SXM4-40GB
  {
    TargetDesc t = nvidiaBase("sm_80");
    t.model = "NVIDIA A100-SXM4-40GB";
    t.units = 108;                          // SMs [A100-WP Table 1]
    t.clockGHz = 1.41;                      // boost clock [A100-WP Table 1]
    t.smemPerSM = 164 * KB;                 // [CUDA-CC] 8.0: 164 KB shared per SM
    t.smemPerBlockOptIn = 163 * KB;         // [CUDA-CC] 8.0: 163 KB per block with opt-in
    t.maxBlocksPerSM = 32;                  // [CUDA-CC]
    t.maxWarpsPerSM = 64;                   // [CUDA-CC] 2048 threads per SM
    t.l2Bytes_gpu = 40 * MB;                // [A100-WP Table 1]
    t.peakGflopsF32 = 19500;                // [A100-WP Table 1] FP32 19.5 TFLOPS
    t.peakGflopsF16 = 312000;               // [A100-WP Table 1] FP16 tensor (FP32 accumulate) 312 TFLOPS dense
    t.peakGflopsBF16 = 312000;              // [A100-WP Table 1] BF16 tensor 312 TFLOPS dense
    t.memBandwidthGBs = 1555;               // [A100-WP Table 1] HBM2 1555 GB/s (40 GB)
    v.push_back(t);
  }
  // ---- sm_86: NVIDIA GeForce RTX 3090 (GA102)
  {
    TargetDesc t = nvidiaBase("sm_86");
    t.model = "NVIDIA GeForce RTX 3090";
    t.units = 82;                           // SMs [GA102-WP]
    t.clockGHz = 1.695;                     // boost clock [GA102-WP]
    t.smemPerSM = 100 * KB;                 // [CUDA-CC] 8.6: 100 KB shared per SM
    t.smemPerBlockOptIn = 99 * KB;          // [CUDA-CC] 8.6: 99 KB per block with opt-in
    t.maxBlocksPerSM = 16;                  // [CUDA-CC] 8.6
    t.maxWarpsPerSM = 48;                   // [CUDA-CC] 8.6: 1536 threads per SM
    t.l2Bytes_gpu = 6 * MB;                 // [GA102-WP] 6144 KB
    t.peakGflopsF32 = 35580;                // [GA102-WP] 35.6 TFLOPS
    t.peakGflopsF16 = 71000;                // [GA102-WP] FP16 tensor with FP32 accumulate 71 TFLOPS dense
    t.peakGflopsBF16 = 71000;               // [GA102-WP] BF16 tensor with FP32 accumulate 71 TFLOPS dense
    t.memBandwidthGBs = 936;                // [GA102-WP] GDDR6X 936 GB/s
    v.push_back(t);
  }
  // ---- sm_89: NVIDIA GeForce RTX 4090 (AD102)
  {
    TargetDesc t = nvidiaBase("sm_89");
    t.model = "NVIDIA GeForce RTX 4090";
    t.units = 128;                          // SMs [ADA-WP]
    t.clockGHz = 2.52;                      // boost clock [ADA-WP]
    t.smemPerSM = 100 * KB;                 // [CUDA-CC] 8.9: 100 KB shared per SM
    t.smemPerBlockOptIn = 99 * KB;          // [CUDA-CC] 8.9
    t.maxBlocksPerSM = 24;                  // [CUDA-CC] 8.9
    t.maxWarpsPerSM = 48;                   // [CUDA-CC] 8.9: 1536 threads per SM
    t.l2Bytes_gpu = 72 * MB;                // [ADA-WP] 72 MB
    t.peakGflopsF32 = 82580;                // [ADA-WP] 82.6 TFLOPS
    t.peakGflopsF16 = 165200;               // [ADA-WP] FP16 tensor with FP32 accumulate 165.2 TFLOPS dense
    t.peakGflopsBF16 = 165200;              // [ADA-WP] BF16 tensor with FP32 accumulate 165.2 TFLOPS dense
    t.memBandwidthGBs = 1008;               // [ADA-WP] GDDR6X 1008 GB/s
    v.push_back(t);
  }
  // ---- sm_90 / sm_90a: NVIDIA H100 SXM5 80GB. sm_90a adds the arch-specific wgmma/setmaxnreg;
  // plain sm_90 code reaches tensor cores through mma.sync only, below the wgmma peak quoted here.
  for (const char* chip : {"sm_90", "sm_90a"}) {
    TargetDesc t = nvidiaBase(chip);
    t.model = "NVIDIA H100 SXM5 80GB";
    t.units = 132;                          // SMs [H100-WP Table 2]
    t.clockGHz = 1.98;                      // max boost clock [H100-WP Table 2]
    t.smemPerSM = 228 * KB;                 // [CUDA-CC] 9.0: 228 KB shared per SM
    t.smemPerBlockOptIn = 227 * KB;         // [CUDA-CC] 9.0: 227 KB per block with opt-in
    t.maxBlocksPerSM = 32;                  // [CUDA-CC] 9.0
    t.maxWarpsPerSM = 64;                   // [CUDA-CC] 9.0: 2048 threads per SM
    t.l2Bytes_gpu = 50 * MB;                // [H100-WP Table 2] 50 MB
    t.peakGflopsF32 = 66900;                // [H100-WP Table 3] 66.9 TFLOPS
    t.peakGflopsF16 = 989400;               // [H100-WP Table 3] FP16 tensor, FP32 accumulate, 989.4 TFLOPS dense
    t.peakGflopsBF16 = 989400;              // [H100-WP Table 3] BF16 tensor 989.4 TFLOPS dense
    t.memBandwidthGBs = 3352;               // [H100-WP Table 2] HBM3 3.35 TB/s
    // mma.sync (and wmma) sustain about half of the quoted wgmma peak on H100: microbenchmarks of
    // the warp-level instructions top out near 50 % of it (e.g. Luo et al., "Benchmarking and
    // Dissecting the Nvidia Hopper GPU Architecture", IPDPS 2024); wgmma has twice the rate.
    for (auto& m : t.mma) m.peakShare = 0.5;
    if (std::string(chip) == "sm_90a") {
      // wgmma.mma_async m64nNk16, N a multiple of 8 up to 256, for f16/bf16 [PTX-ISA]
      t.mma.push_back({"f16", 64, 256, 16, "wgmma"});
      t.mma.push_back({"bf16", 64, 256, 16, "wgmma"});
    }
    v.push_back(t);
  }
  // ---- gfx90a: AMD Instinct MI250X, one GCD (each GCD is a separate device to the runtime)
  {
    TargetDesc t = cdnaBase("gfx90a");
    t.model = "AMD Instinct MI250X (one GCD)";
    t.units = 110;                          // CUs per GCD [MI250X: 220 CUs per device]
    t.clockGHz = 1.7;                       // peak engine clock [MI250X]
    t.l2Bytes_gpu = 8 * MB;                 // [MI250X] 8 MB L2 per GCD
    t.peakGflopsF32 = 23950;                // [MI250X] FP32 vector 47.9 TFLOPS per device / 2
    t.peakGflopsF16 = 191500;               // [MI250X] FP16 matrix 383 TFLOPS per device / 2
    t.peakGflopsBF16 = 191500;              // [MI250X] BF16 matrix 383 TFLOPS per device / 2
    t.memBandwidthGBs = 1638;               // [MI250X] HBM2e 3.2768 TB/s per device / 2
    v.push_back(t);
  }
  // ---- gfx942: AMD Instinct MI300X
  {
    TargetDesc t = cdnaBase("gfx942");
    t.model = "AMD Instinct MI300X";
    t.units = 304;                          // CUs [MI300X]
    t.clockGHz = 2.1;                       // peak engine clock [MI300X]
    t.l2Bytes_gpu = 32 * MB;                // [MI300X] 4 MB L2 per XCD x 8 XCDs (plus 256 MB Infinity Cache)
    t.peakGflopsF32 = 163400;               // [MI300X] FP32 vector 163.4 TFLOPS
    t.peakGflopsF16 = 1307400;              // [MI300X] FP16 matrix 1307.4 TFLOPS dense
    t.peakGflopsBF16 = 1307400;             // [MI300X] BF16 matrix 1307.4 TFLOPS dense
    t.memBandwidthGBs = 5300;               // [MI300X] HBM3 5.3 TB/s
    v.push_back(t);
  }
  // ---- gfx1100: AMD Radeon RX 7900 XTX (RDNA3, Navi 31), wave32 code
  {
    TargetDesc t;
    t.name = "gfx1100";
    t.vendor = Vendor::Amd;
    t.arch = "gfx1100";
    t.model = "AMD Radeon RX 7900 XTX";
    t.units = 96;                           // CUs (48 WGPs) [7900XTX]
    t.clockGHz = 2.5;                       // boost clock [7900XTX]
    t.warpSize = 32;                        // wave32, the default for gfx11 compute [LLVM-AMDGPU]
    t.maxThreadsPerBlock = 1024;            // [LLVM-AMDGPU]
    t.smemPerBlock = 64 * KB;               // [RDNA3-ISA] 64 KB LDS per workgroup
    t.smemPerBlockOptIn = 64 * KB;
    t.smemPerSM = 64 * KB;                  // [RDNA3-ISA] 128 KB per WGP = 64 KB per CU
    t.simdsPerUnit = 2;                     // [RDNA3-ISA] two SIMD32 per CU
    t.regsPerSimd = 1536;                   // [RDNA3-ISA, LLVM-AMDGPU] Navi31: 1536 VGPRs per lane in wave32
    t.regAllocGranule = 24;                 // [LLVM-AMDGPU] getVGPRAllocGranule, gfx11 full VGPRs, wave32
    t.maxWavesPerSimd = 16;                 // [LLVM-AMDGPU] getMaxWavesPerEU
    t.maxRegsPerThread = 256;               // [RDNA3-ISA] addressable VGPRs per wave
    t.operandRegsPerThread = 256;
    t.regsPerSM = int64_t(t.simdsPerUnit) * t.regsPerSimd * t.warpSize;
    t.maxWarpsPerSM = t.maxWavesPerSimd * t.simdsPerUnit;
    t.maxBlocksPerSM = 32;                  // [LLVM-AMDGPU] 32 barrier-limited groups in WGP mode
    t.maxSgprsPerWave = 106;                // [RDNA3-ISA]
    t.l1BytesPerClock = 128;                // [RDNA-WP] L0 vector cache
    t.l1LineBytes = 128;                    // [RDNA-WP]
    t.l2Bytes_gpu = 6 * MB;                 // [7900XTX] 6 MB L2 (plus 96 MB Infinity Cache)
    t.peakGflopsF32 = 61400;                // [7900XTX] 61.4 TFLOPS (dual-issue FP32)
    t.peakGflopsF16 = 122800;               // [7900XTX] 122.8 TFLOPS FP16 (WMMA)
    t.peakGflopsBF16 = 122800;              // [RDNA3-ISA] WMMA bf16 at the f16 rate
    t.memBandwidthGBs = 960;                // [7900XTX] GDDR6 960 GB/s
    // v_wmma_f32_16x16x16_f16 / _bf16, wave32 [RDNA3-ISA]
    t.mma = {{"f16", 16, 16, 16, "wmma"}, {"bf16", 16, 16, 16, "wmma"}};
    v.push_back(t);
  }
  // ---- Chips added for GPUs by name (issue 29); their default products follow.
  // sm_75: NVIDIA T4 (TU104). Turing's shared memory and threads per SM are smaller [CUDA-CC 7.5],
  // there is no 1 KB per-block reservation (it starts with 8.0) and no cp.async. Turing's mma.sync
  // is m16n8k8; Tessera's MMA lowering emits m16n8k16 (sm_80 and later), so its GEMMs run on the
  // FMA pipes here: no MMA shape is listed.
  {
    TargetDesc t = nvidiaBase("sm_75");
    t.model = "NVIDIA T4";
    t.units = 40;                           // [T4-DS] 2560 CUDA cores, 64 per SM [TU-WP]
    t.clockGHz = 1.59;                      // [T4-DS] boost clock
    t.smemPerSM = 64 * KB;                  // [CUDA-CC] 7.5
    t.smemPerBlockOptIn = 64 * KB;          // [CUDA-CC] 7.5
    t.smemReservedPerBlock = 0;             // [CUDA-CC] the reservation starts with 8.0
    t.maxBlocksPerSM = 16;                  // [CUDA-CC] 7.5
    t.maxWarpsPerSM = 32;                   // [CUDA-CC] 7.5: 1024 threads per SM
    t.l2Bytes_gpu = 4 * MB;                 // [TU-WP] TU104
    t.peakGflopsF32 = 8100;                 // [T4-DS] 8.1 TFLOPS
    t.peakGflopsF16 = 65000;                // [T4-DS] mixed precision (FP16/FP32) 65 TFLOPS
    t.peakGflopsBF16 = 0;                   // Turing has no bf16
    t.memBandwidthGBs = 320;                // [T4-DS] 320 GB/s
    t.mma.clear();
    v.push_back(t);
  }
  // RDNA2 (gfx1030 Navi 21, gfx1031 Navi 22, gfx1032 Navi 23): wave32, two SIMD32 per CU, 1024
  // VGPRs per SIMD lane allocated in granules of 8, 16 waves per SIMD [RDNA2-ISA, LLVM-AMDGPU; llc
  // -mcpu=gfx1030 reports occupancy 9 at 100 VGPRs], LDS 64 KB per workgroup and per CU. No WMMA:
  // f16 runs on the packed FMA pipes (twice the FP32 rate) and there is no bf16 math.
  struct Rdna2 {
    const char* chip;
    const char* model;
    int cus;
    double clock, f32, bw;
    int64_t l2;
  };
  for (const Rdna2& r : {Rdna2{"gfx1030", "AMD Radeon RX 6900 XT", 80, 2.25, 23040, 512, 4 * MB},   // [RX6000]
                         Rdna2{"gfx1031", "AMD Radeon RX 6700 XT", 40, 2.581, 13210, 384, 3 * MB},  // [RX6000]
                         Rdna2{"gfx1032", "AMD Radeon PRO W6600", 28, 2.903, 10400, 224, 2 * MB}}) {  // [PRO-W]
    TargetDesc t = rdnaBase(r.chip, 1024, 8);
    t.model = r.model;
    t.units = r.cus;
    t.clockGHz = r.clock;
    t.l2Bytes_gpu = r.l2;
    t.peakGflopsF32 = r.f32;
    t.peakGflopsF16 = 2 * r.f32;  // packed FP16 (v_pk_fma_f16)
    t.peakGflopsBF16 = 0;
    t.memBandwidthGBs = r.bw;
    t.mma.clear();
    v.push_back(t);
  }
  // RDNA3 beyond Navi 31: gfx1101 (Navi 32) keeps Navi 31's 1536 VGPRs, gfx1102 (Navi 33) has 1024
  // allocated in granules of 16 [LLVM-AMDGPU FeatureGFX11FullVGPRs; llc -mcpu: occupancy 12 and 9
  // at 100 VGPRs]. WMMA as on gfx1100.
  for (const Rdna2& r : {Rdna2{"gfx1101", "AMD Radeon RX 7800 XT", 60, 2.43, 37320, 624, 4 * MB},   // [RX7000]
                         Rdna2{"gfx1102", "AMD Radeon RX 7600", 32, 2.655, 21750, 288, 2 * MB}}) {  // [RX7000]
    const bool full = std::string(r.chip) == "gfx1101";
    TargetDesc t = rdnaBase(r.chip, full ? 1536 : 1024, full ? 24 : 16);
    t.model = r.model;
    t.units = r.cus;
    t.clockGHz = r.clock;
    t.l2Bytes_gpu = r.l2;
    t.peakGflopsF32 = r.f32;           // dual-issue FP32
    t.peakGflopsF16 = 2 * r.f32;       // WMMA f16 at twice the FP32 rate [RX7000]
    t.peakGflopsBF16 = 2 * r.f32;      // [RDNA3-ISA] WMMA bf16 at the f16 rate
    t.memBandwidthGBs = r.bw;
    t.mma = {{"f16", 16, 16, 16, "wmma"}, {"bf16", 16, 16, 16, "wmma"}};
    v.push_back(t);
  }
  return v;
}

}  // namespace

const std::vector<TargetDesc>& gpuTargets() {
  static const std::vector<TargetDesc> table = buildTable();
  return table;
}

std::optional<Vendor> vendorOfChip(std::string_view name) {
  for (const TargetDesc& t : gpuTargets())
    if (t.name == name) return t.vendor;
  if (name.starts_with("sm_")) return Vendor::Nvidia;
  if (name.starts_with("gfx")) return Vendor::Amd;
  return std::nullopt;
}

}  // namespace tessera
