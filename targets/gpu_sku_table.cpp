// Owns the built-in GPU products by name: the public figures of each product and where each comes
// from. Per-architecture facts (shared memory, registers, warp size, MMA shapes) come from the
// chip's row in gpu_targets.cpp; a figure a document does not state is derived from ones it does,
// and the source says how.
#include "targets/gpu_sku_table.h"

namespace tessera::detail {

namespace {

struct Row {
  const char* name;
  const char* arch;
  const char* segment;
  std::vector<std::string> aliases;
  int units;
  double clock, fp32, fp16, bf16, bandwidth, l2MB;
  const char* source;                                         // of every figure unless noted
  std::vector<std::pair<std::string, std::string>> notes;     // field -> its own source
};

// Repeated notes.
const char* kCores = "derived: the document's CUDA cores / 128 per SM (64 on Turing and GA100) [CUDA-CC]";
const char* kGeForceTensor =
    "derived: twice the FP32 peak, the GeForce tensor rate with FP32 accumulation [GA102-WP, ADA-WP]";
const char* kTuringTensor = "derived: tensor cores x 64 FMA per clock x boost clock, half rate with FP32 accumulation on GeForce [TU-WP]";
const char* kFp32FromCores = "derived: CUDA cores x 2 x boost clock";
const char* kLaptopClock = "the highest boost clock of the product's range (the laptop maker's power limit decides) [NV-LAPTOP]";
const char* kRdnaPacked = "derived: packed FP16 at twice the FP32 rate (no matrix cores on RDNA2) [RDNA2-ISA]";
const char* kRdna3Wmma = "derived: WMMA f16/bf16 at twice the FP32 rate [RDNA3-ISA]";
const char* kRdnaCu = "derived: stream processors / 64 per CU";
const char* kOneGcd = "one GCD (the runtime's device): half of the package figure";

std::vector<Row> rows() {
  return {
      // ---------------- NVIDIA Turing, sm_75
      {"NVIDIA T4", "sm_75", "data centre", {"T4", "Tesla T4"}, 40, 1.59, 8100, 65000, 0, 320, 4, "[T4-DS]",
       {{"units", kCores}, {"l2", "[TU-WP] TU104"}}},
      {"NVIDIA GeForce RTX 2080 Ti", "sm_75", "desktop", {"RTX 2080 Ti", "2080 Ti", "GeForce RTX 2080 Ti"}, 68, 1.545, 13450, 53800,
       0, 616, 5.5, "[TU-WP]", {}},
      {"NVIDIA GeForce RTX 2080 SUPER", "sm_75", "desktop", {"RTX 2080 SUPER", "2080 SUPER"}, 48, 1.815, 11150, 44600, 0, 496, 4,
       "[NV-SPECS]", {{"units", kCores}, {"fp32", kFp32FromCores}, {"fp16", kTuringTensor}, {"l2", "[TU-WP] TU104"}}},
      {"NVIDIA GeForce RTX 2080", "sm_75", "desktop", {"RTX 2080", "2080"}, 46, 1.71, 10070, 40300, 0, 448, 4, "[TU-WP]", {}},
      {"NVIDIA GeForce RTX 2070", "sm_75", "desktop", {"RTX 2070", "2070"}, 36, 1.62, 7460, 29900, 0, 448, 4, "[TU-WP]",
       {{"fp16", kTuringTensor}}},
      {"NVIDIA GeForce RTX 2060", "sm_75", "desktop", {"RTX 2060", "2060"}, 30, 1.68, 6450, 25800, 0, 336, 3, "[NV-SPECS]",
       {{"units", kCores}, {"fp32", kFp32FromCores}, {"fp16", kTuringTensor}, {"l2", "[TU-WP] TU106 with a 192-bit bus"}}},
      {"NVIDIA TITAN RTX", "sm_75", "desktop", {"TITAN RTX"}, 72, 1.77, 16310, 130500, 0, 672, 6, "[TITAN-RTX]",
       {{"units", kCores}, {"l2", "[TU-WP] TU102"}}},
      {"NVIDIA Quadro RTX 8000", "sm_75", "workstation", {"Quadro RTX 8000", "RTX 8000"}, 72, 1.77, 16300, 130500, 0, 672, 6,
       "[QUADRO-RTX]", {{"units", kCores}, {"l2", "[TU-WP] TU102"}}},
      {"NVIDIA Quadro RTX 6000", "sm_75", "workstation", {"Quadro RTX 6000"}, 72, 1.77, 16300, 130500, 0, 672, 6, "[QUADRO-RTX]",
       {{"units", kCores}, {"l2", "[TU-WP] TU102"}}},
      {"NVIDIA Quadro RTX 5000", "sm_75", "workstation", {"Quadro RTX 5000", "RTX 5000"}, 48, 1.815, 11150, 89200, 0, 448, 4,
       "[QUADRO-RTX]", {{"units", kCores}, {"fp16", kTuringTensor}, {"l2", "[TU-WP] TU104"}}},

      // ---------------- NVIDIA Ampere GA100, sm_80
      {"NVIDIA A100-SXM4-40GB", "sm_80", "data centre", {"A100", "A100 SXM4", "A100 40GB", "A100 SXM4 40GB"}, 108, 1.41, 19500,
       312000, 312000, 1555, 40, "[A100-WP]", {}},
      {"NVIDIA A100-SXM4-80GB", "sm_80", "data centre", {"A100 80GB", "A100 SXM4 80GB"}, 108, 1.41, 19500, 312000, 312000, 2039,
       40, "[A100-DS]", {{"units", "[A100-WP]"}, {"clock", "[A100-WP]"}, {"l2", "[A100-WP]"}}},
      {"NVIDIA A100-PCIE-40GB", "sm_80", "data centre", {"A100 PCIe", "A100 PCIe 40GB"}, 108, 1.41, 19500, 312000, 312000, 1555,
       40, "[A100-DS]", {{"units", "[A100-WP]"}, {"clock", "[A100-WP]"}, {"l2", "[A100-WP]"}}},
      {"NVIDIA A100 80GB PCIe", "sm_80", "data centre", {"A100 PCIe 80GB", "A100-PCIE-80GB"}, 108, 1.41, 19500, 312000, 312000,
       1935, 40, "[A100-DS]", {{"units", "[A100-WP]"}, {"clock", "[A100-WP]"}, {"l2", "[A100-WP]"}}},
      {"NVIDIA A30", "sm_80", "data centre", {"A30"}, 56, 1.44, 10300, 165000, 165000, 933, 24, "[A30-DS]", {{"units", kCores}}},

      // ---------------- NVIDIA Ampere GA10x, sm_86
      {"NVIDIA GeForce RTX 3090 Ti", "sm_86", "desktop", {"RTX 3090 Ti", "3090 Ti"}, 84, 1.86, 40000, 80000, 80000, 1008, 6,
       "[NV-SPECS]", {{"units", kCores}, {"fp16", kGeForceTensor}, {"bf16", kGeForceTensor}, {"l2", "[GA102-WP] GA102"}}},
      {"NVIDIA GeForce RTX 3090", "sm_86", "desktop", {"RTX 3090", "3090"}, 82, 1.695, 35580, 71000, 71000, 936, 6, "[GA102-WP]", {}},
      {"NVIDIA GeForce RTX 3080 Ti", "sm_86", "desktop", {"RTX 3080 Ti", "3080 Ti"}, 80, 1.665, 34100, 68200, 68200, 912, 6,
       "[NV-SPECS]", {{"units", kCores}, {"fp16", kGeForceTensor}, {"bf16", kGeForceTensor}, {"l2", "[GA102-WP] GA102"}}},
      {"NVIDIA GeForce RTX 3080", "sm_86", "desktop", {"RTX 3080", "3080"}, 68, 1.71, 29770, 59500, 59500, 760, 5, "[GA102-WP]", {}},
      {"NVIDIA GeForce RTX 3070", "sm_86", "desktop", {"RTX 3070", "3070"}, 46, 1.725, 20310, 40600, 40600, 448, 4, "[GA102-WP]", {}},
      {"NVIDIA GeForce RTX 3060 Ti", "sm_86", "desktop", {"RTX 3060 Ti", "3060 Ti"}, 38, 1.665, 16200, 32400, 32400, 448, 4,
       "[NV-SPECS]", {{"units", kCores}, {"fp16", kGeForceTensor}, {"bf16", kGeForceTensor}, {"l2", "[GA102-WP] GA104"}}},
      {"NVIDIA GeForce RTX 3060", "sm_86", "desktop", {"RTX 3060", "3060"}, 28, 1.777, 12740, 25500, 25500, 360, 3, "[NV-SPECS]",
       {{"units", kCores}, {"fp16", kGeForceTensor}, {"bf16", kGeForceTensor}, {"l2", "[GA102-WP] GA106"}}},
      {"NVIDIA GeForce RTX 3080 Laptop GPU", "sm_86", "laptop", {"RTX 3080 Laptop", "3080 Laptop"}, 48, 1.71, 21010, 42000,
       42000, 448, 4, "[NV-LAPTOP]",
       {{"units", kCores}, {"clock", kLaptopClock}, {"fp32", kFp32FromCores}, {"fp16", kGeForceTensor},
        {"bf16", kGeForceTensor}, {"bandwidth", "[NV-LAPTOP] 16 GB, 256-bit GDDR6 at 14 Gbps"}, {"l2", "[GA102-WP] GA104"}}},
      {"NVIDIA GeForce RTX 3070 Laptop GPU", "sm_86", "laptop", {"RTX 3070 Laptop", "3070 Laptop"}, 40, 1.62, 16590, 33200,
       33200, 448, 4, "[NV-LAPTOP]",
       {{"units", kCores}, {"clock", kLaptopClock}, {"fp32", kFp32FromCores}, {"fp16", kGeForceTensor},
        {"bf16", kGeForceTensor}, {"bandwidth", "[NV-LAPTOP] 256-bit GDDR6 at 14 Gbps"}, {"l2", "[GA102-WP] GA104"}}},
      {"NVIDIA GeForce RTX 3060 Laptop GPU", "sm_86", "laptop", {"RTX 3060 Laptop", "3060 Laptop"}, 30, 1.703, 13080, 26200,
       26200, 336, 3, "[NV-LAPTOP]",
       {{"units", kCores}, {"clock", kLaptopClock}, {"fp32", kFp32FromCores}, {"fp16", kGeForceTensor},
        {"bf16", kGeForceTensor}, {"bandwidth", "[NV-LAPTOP] 192-bit GDDR6 at 14 Gbps"}, {"l2", "[GA102-WP] GA106"}}},
      {"NVIDIA RTX A6000", "sm_86", "workstation", {"RTX A6000", "A6000"}, 84, 1.80, 38700, 154800, 154800, 768, 6, "[RTX-A-DS]",
       {{"units", kCores}, {"fp16", "[RTX-A-DS] tensor 309.7 TFLOPS with sparsity, half of it dense"},
        {"bf16", "[RTX-A-DS] as fp16"}, {"l2", "[GA102-WP] GA102"}}},
      {"NVIDIA RTX A5000", "sm_86", "workstation", {"RTX A5000", "A5000"}, 64, 1.695, 27800, 111100, 111100, 768, 6, "[RTX-A-DS]",
       {{"units", kCores}, {"fp16", "[RTX-A-DS] tensor 222.2 TFLOPS with sparsity, half of it dense"},
        {"bf16", "[RTX-A-DS] as fp16"}, {"l2", "[GA102-WP] GA102"}}},
      {"NVIDIA RTX A4000", "sm_86", "workstation", {"RTX A4000", "A4000"}, 48, 1.56, 19200, 76700, 76700, 448, 4, "[RTX-A-DS]",
       {{"units", kCores}, {"fp16", "[RTX-A-DS] tensor 153.4 TFLOPS with sparsity, half of it dense"},
        {"bf16", "[RTX-A-DS] as fp16"}, {"l2", "[GA102-WP] GA104"}}},
      {"NVIDIA A40", "sm_86", "data centre", {"A40"}, 84, 1.74, 37400, 149700, 149700, 696, 6, "[A40-DS]",
       {{"units", kCores}, {"l2", "[GA102-WP] GA102"}}},
      {"NVIDIA A10", "sm_86", "data centre", {"A10"}, 72, 1.695, 31200, 125000, 125000, 600, 6, "[A10-DS]",
       {{"units", kCores}, {"l2", "[GA102-WP] GA102"}}},

      // ---------------- NVIDIA Ada, sm_89
      {"NVIDIA GeForce RTX 4090", "sm_89", "desktop", {"RTX 4090", "4090"}, 128, 2.52, 82580, 165200, 165200, 1008, 72, "[ADA-WP]", {}},
      {"NVIDIA GeForce RTX 4080 SUPER", "sm_89", "desktop", {"RTX 4080 SUPER", "4080 SUPER"}, 80, 2.55, 52220, 104400, 104400,
       736, 64, "[NV-SPECS]",
       {{"units", kCores}, {"fp32", kFp32FromCores}, {"fp16", kGeForceTensor}, {"bf16", kGeForceTensor}, {"l2", "[ADA-WP] AD103"}}},
      {"NVIDIA GeForce RTX 4080", "sm_89", "desktop", {"RTX 4080", "4080"}, 76, 2.505, 48740, 97500, 97500, 716.8, 64, "[ADA-WP]", {}},
      {"NVIDIA GeForce RTX 4070 Ti", "sm_89", "desktop", {"RTX 4070 Ti", "4070 Ti"}, 60, 2.61, 40090, 80200, 80200, 504, 48,
       "[NV-SPECS]",
       {{"units", kCores}, {"fp32", kFp32FromCores}, {"fp16", kGeForceTensor}, {"bf16", kGeForceTensor}, {"l2", "[ADA-WP] AD104"}}},
      {"NVIDIA GeForce RTX 4070", "sm_89", "desktop", {"RTX 4070", "4070"}, 46, 2.475, 29150, 58300, 58300, 504, 36, "[NV-SPECS]",
       {{"units", kCores}, {"fp32", kFp32FromCores}, {"fp16", kGeForceTensor}, {"bf16", kGeForceTensor}, {"l2", "[ADA-WP] AD104, cut"}}},
      {"NVIDIA GeForce RTX 4060 Ti", "sm_89", "desktop", {"RTX 4060 Ti", "4060 Ti"}, 34, 2.535, 22060, 44100, 44100, 288, 32,
       "[NV-SPECS]",
       {{"units", kCores}, {"fp32", kFp32FromCores}, {"fp16", kGeForceTensor}, {"bf16", kGeForceTensor}, {"l2", "[ADA-WP] AD106"}}},
      {"NVIDIA GeForce RTX 4060", "sm_89", "desktop", {"RTX 4060", "4060"}, 24, 2.46, 15110, 30200, 30200, 272, 24, "[NV-SPECS]",
       {{"units", kCores}, {"fp32", kFp32FromCores}, {"fp16", kGeForceTensor}, {"bf16", kGeForceTensor}, {"l2", "[ADA-WP] AD107, cut"}}},
      {"NVIDIA GeForce RTX 4090 Laptop GPU", "sm_89", "laptop", {"RTX 4090 Laptop", "4090 Laptop"}, 76, 2.04, 39700, 79400, 79400,
       576, 64, "[NV-LAPTOP]",
       {{"units", kCores}, {"clock", kLaptopClock}, {"fp32", kFp32FromCores}, {"fp16", kGeForceTensor},
        {"bf16", kGeForceTensor}, {"bandwidth", "[NV-LAPTOP] 256-bit GDDR6 at 18 Gbps"}, {"l2", "[ADA-WP] AD103"}}},
      {"NVIDIA GeForce RTX 4080 Laptop GPU", "sm_89", "laptop", {"RTX 4080 Laptop", "4080 Laptop"}, 58, 2.28, 33850, 67700, 67700,
       432, 48, "[NV-LAPTOP]",
       {{"units", kCores}, {"clock", kLaptopClock}, {"fp32", kFp32FromCores}, {"fp16", kGeForceTensor},
        {"bf16", kGeForceTensor}, {"bandwidth", "[NV-LAPTOP] 192-bit GDDR6 at 18 Gbps"}, {"l2", "[ADA-WP] AD104"}}},
      {"NVIDIA GeForce RTX 4070 Laptop GPU", "sm_89", "laptop", {"RTX 4070 Laptop", "4070 Laptop"}, 36, 2.175, 20040, 40100, 40100,
       256, 32, "[NV-LAPTOP]",
       {{"units", kCores}, {"clock", kLaptopClock}, {"fp32", kFp32FromCores}, {"fp16", kGeForceTensor},
        {"bf16", kGeForceTensor}, {"bandwidth", "[NV-LAPTOP] 128-bit GDDR6 at 16 Gbps"}, {"l2", "[ADA-WP] AD106"}}},
      {"NVIDIA L4", "sm_89", "data centre", {"L4"}, 58, 2.04, 30300, 121000, 121000, 300, 48, "[L4-DS]",
       {{"units", kCores}, {"fp16", "[L4-DS] FP16 tensor 242 TFLOPS with sparsity, half of it dense"},
        {"bf16", "[L4-DS] as fp16"}, {"l2", "[ADA-WP] AD104"}}},
      {"NVIDIA L40", "sm_89", "data centre", {"L40"}, 142, 2.49, 90500, 181000, 181000, 864, 96, "[L40-DS]",
       {{"units", kCores}, {"fp16", "[L40-DS] FP16 tensor 362 TFLOPS with sparsity, half of it dense"},
        {"bf16", "[L40-DS] as fp16"}, {"l2", "[ADA-WP] AD102"}}},
      {"NVIDIA L40S", "sm_89", "data centre", {"L40S"}, 142, 2.52, 91600, 362050, 362050, 864, 96, "[L40S-DS]",
       {{"units", kCores}, {"l2", "[ADA-WP] AD102"}}},
      {"NVIDIA RTX 6000 Ada Generation", "sm_89", "workstation", {"RTX 6000 Ada"}, 142, 2.505, 91060, 364200, 364200, 960, 96,
       "[ADA-WP]", {}},

      // ---------------- NVIDIA Hopper, sm_90
      {"NVIDIA H100 SXM5 80GB", "sm_90", "data centre", {"H100", "H100 SXM", "H100 SXM5", "NVIDIA H100 80GB HBM3"}, 132, 1.98,
       66900, 989400, 989400, 3352, 50, "[H100-WP]", {}},
      {"NVIDIA H100 PCIe", "sm_90", "data centre", {"H100 PCIe"}, 114, 1.755, 51200, 756500, 756500, 2039, 50, "[H100-WP]",
       {{"bandwidth", "[H100-DS] 80 GB HBM2e, 2 TB/s"}}},
      {"NVIDIA H100 NVL", "sm_90", "data centre", {"H100 NVL"}, 132, 1.785, 60000, 835500, 835500, 3938, 50, "[H100-DS]",
       {{"units", "[H100-WP] GH100 with 132 SMs"}, {"clock", "derived: the FP32 peak / (132 SMs x 256 FLOPs per clock)"},
        {"fp16", "[H100-DS] FP16 tensor 1671 TFLOPS with sparsity, half of it dense"}, {"bf16", "[H100-DS] as fp16"},
        {"l2", "[H100-WP]"}}},
      {"NVIDIA H200", "sm_90", "data centre", {"H200", "H200 SXM"}, 132, 1.98, 67000, 989500, 989500, 4800, 50, "[H200-DS]",
       {{"units", "[H100-WP] GH100 with 132 SMs"}, {"clock", "[H100-WP] as the H100 SXM5"},
        {"fp16", "[H200-DS] FP16 tensor 1979 TFLOPS with sparsity, half of it dense"}, {"bf16", "[H200-DS] as fp16"},
        {"l2", "[H100-WP]"}}},

      // ---------------- AMD CDNA2, gfx90a (one GCD per device)
      {"AMD Instinct MI250X (one GCD)", "gfx90a", "data centre", {"MI250X", "AMD Instinct MI250X"}, 110, 1.7, 23950, 191500,
       191500, 1638, 8, "[MI200-DS]",
       {{"units", kOneGcd}, {"fp32", kOneGcd}, {"fp16", kOneGcd}, {"bf16", kOneGcd}, {"bandwidth", kOneGcd}, {"l2", "[MI200-DS] 8 MB per GCD"}}},
      {"AMD Instinct MI250 (one GCD)", "gfx90a", "data centre", {"MI250", "AMD Instinct MI250"}, 104, 1.7, 22650, 181050, 181050,
       1638, 8, "[MI200-DS]",
       {{"units", kOneGcd}, {"fp32", kOneGcd}, {"fp16", kOneGcd}, {"bf16", kOneGcd}, {"bandwidth", kOneGcd}, {"l2", "[MI200-DS] 8 MB per GCD"}}},
      {"AMD Instinct MI210", "gfx90a", "data centre", {"MI210"}, 104, 1.7, 22600, 181000, 181000, 1638, 8, "[MI200-DS]", {}},

      // ---------------- AMD CDNA3, gfx942
      {"AMD Instinct MI300X", "gfx942", "data centre", {"MI300X"}, 304, 2.1, 163400, 1307400, 1307400, 5300, 32, "[MI300-DS]",
       {{"l2", "[CDNA3-WP] 4 MB per XCD, 8 XCDs (plus 256 MB Infinity Cache)"}}},
      {"AMD Instinct MI300A", "gfx942", "data centre", {"MI300A"}, 228, 2.1, 122600, 980600, 980600, 5300, 24, "[MI300-DS]",
       {{"l2", "[CDNA3-WP] 4 MB per XCD, 6 XCDs"}}},
      {"AMD Instinct MI325X", "gfx942", "data centre", {"MI325X"}, 304, 2.1, 163400, 1307400, 1307400, 6000, 32, "[MI300-DS]",
       {{"l2", "[CDNA3-WP] 4 MB per XCD, 8 XCDs"}}},

      // ---------------- AMD RDNA2, gfx1030 / gfx1031 / gfx1032 (wave32, no matrix cores, no bf16)
      {"AMD Radeon RX 6900 XT", "gfx1030", "desktop", {"RX 6900 XT", "6900 XT"}, 80, 2.25, 23040, 46080, 0, 512, 4, "[RX6000]",
       {{"fp16", kRdnaPacked}}},
      {"AMD Radeon RX 6800 XT", "gfx1030", "desktop", {"RX 6800 XT", "6800 XT"}, 72, 2.25, 20740, 41470, 0, 512, 4, "[RX6000]",
       {{"fp16", kRdnaPacked}}},
      {"AMD Radeon RX 6800", "gfx1030", "desktop", {"RX 6800", "6800"}, 60, 2.105, 16170, 32330, 0, 512, 4, "[RX6000]",
       {{"fp16", kRdnaPacked}}},
      {"AMD Radeon PRO W6800", "gfx1030", "workstation", {"W6800", "Radeon PRO W6800"}, 60, 2.32, 17830, 35660, 0, 512, 4, "[PRO-W]",
       {{"fp16", kRdnaPacked}}},
      {"AMD Radeon RX 6700 XT", "gfx1031", "desktop", {"RX 6700 XT", "6700 XT"}, 40, 2.581, 13210, 26420, 0, 384, 3, "[RX6000]",
       {{"fp16", kRdnaPacked}}},
      {"AMD Radeon RX 6600 XT", "gfx1032", "desktop", {"RX 6600 XT", "6600 XT"}, 32, 2.589, 10600, 21200, 0, 256, 2, "[RX6000]",
       {{"fp16", kRdnaPacked}}},
      {"AMD Radeon PRO W6600", "gfx1032", "workstation", {"W6600", "Radeon PRO W6600"}, 28, 2.903, 10400, 20800, 0, 224, 2, "[PRO-W]",
       {{"fp16", kRdnaPacked}}},

      // ---------------- AMD RDNA3, gfx1100 / gfx1101 / gfx1102 (wave32, WMMA)
      {"AMD Radeon RX 7900 XTX", "gfx1100", "desktop", {"RX 7900 XTX", "7900 XTX", "Radeon RX 7900 XTX"}, 96, 2.5, 61400, 122800,
       122800, 960, 6, "[RX7000]", {{"bf16", kRdna3Wmma}}},
      {"AMD Radeon RX 7900 XT", "gfx1100", "desktop", {"RX 7900 XT", "7900 XT"}, 84, 2.4, 51610, 103220, 103220, 800, 6, "[RX7000]",
       {{"units", kRdnaCu}, {"fp32", "derived: 84 CUs x 128 dual-issue FP32 lanes x 2 x boost clock"}, {"fp16", kRdna3Wmma},
        {"bf16", kRdna3Wmma}}},
      {"AMD Radeon PRO W7900", "gfx1100", "workstation", {"W7900", "Radeon PRO W7900"}, 96, 2.495, 61300, 122600, 122600, 864, 6,
       "[PRO-W]", {{"bf16", kRdna3Wmma}}},
      {"AMD Radeon PRO W7800", "gfx1100", "workstation", {"W7800", "Radeon PRO W7800"}, 70, 2.499, 45200, 90500, 90500, 576, 6,
       "[PRO-W]", {{"bf16", kRdna3Wmma}, {"l2", "[RDNA3-ISA] Navi 31's L2"}}},
      {"AMD Radeon RX 7800 XT", "gfx1101", "desktop", {"RX 7800 XT", "7800 XT"}, 60, 2.43, 37320, 74640, 74640, 624, 4, "[RX7000]",
       {{"fp16", kRdna3Wmma}, {"bf16", kRdna3Wmma}}},
      {"AMD Radeon RX 7600", "gfx1102", "desktop", {"RX 7600", "7600"}, 32, 2.655, 21750, 43500, 43500, 288, 2, "[RX7000]",
       {{"fp16", kRdna3Wmma}, {"bf16", kRdna3Wmma}}},
  };
}

}  // namespace

std::vector<GpuSku> builtinGpuSkus() {
  std::vector<GpuSku> out;
  for (const Row& r : rows()) {
    GpuSku s;
    s.name = r.name;
    s.aliases = r.aliases;
    s.arch = r.arch;
    s.segment = r.segment;
    s.units = r.units;
    s.clockGHz = r.clock;
    s.fp32Gflops = r.fp32;
    s.fp16Gflops = r.fp16;
    s.bf16Gflops = r.bf16;
    s.bandwidthGBs = r.bandwidth;
    s.l2Bytes = int64_t(r.l2MB * 1024 * 1024);
    for (const char* f : {"units", "clock", "fp32", "fp16", "bf16", "bandwidth", "l2"}) s.sources[f] = r.source;
    if (r.bf16 == 0) s.sources["bf16"] = "no bf16 math on this architecture";
    for (const auto& [field, note] : r.notes) s.sources[field] = note;
    out.push_back(std::move(s));
  }
  return out;
}

const std::map<std::string, std::string>& references() {
  static const std::map<std::string, std::string> refs = {
      {"[CUDA-CC]", "CUDA C++ Programming Guide, Technical Specifications per Compute Capability"},
      {"[TU-WP]", "NVIDIA Turing GPU Architecture whitepaper (2018), Appendix A"},
      {"[T4-DS]", "NVIDIA T4 Tensor Core GPU datasheet"},
      {"[TITAN-RTX]", "NVIDIA TITAN RTX product page (specifications)"},
      {"[QUADRO-RTX]", "NVIDIA Quadro RTX 5000 / 6000 / 8000 datasheets"},
      {"[A100-WP]", "NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020), Tables 1 and 3"},
      {"[A100-DS]", "NVIDIA A100 Tensor Core GPU datasheet (40 GB and 80 GB, SXM4 and PCIe)"},
      {"[A30-DS]", "NVIDIA A30 Tensor Core GPU datasheet"},
      {"[A10-DS]", "NVIDIA A10 Tensor Core GPU datasheet"},
      {"[A40-DS]", "NVIDIA A40 datasheet"},
      {"[GA102-WP]", "NVIDIA Ampere GA102 GPU Architecture whitepaper, Appendix A (RTX 3090, 3080, 3070)"},
      {"[RTX-A-DS]", "NVIDIA RTX A4000 / A5000 / A6000 datasheets"},
      {"[NV-SPECS]", "NVIDIA GeForce product specification pages (CUDA cores, boost clock, memory)"},
      {"[NV-LAPTOP]", "NVIDIA GeForce laptop GPU specification pages (CUDA cores, boost clock range, memory)"},
      {"[ADA-WP]", "NVIDIA Ada GPU Architecture whitepaper, Appendix A (RTX 4090, RTX 4080, RTX 6000 Ada)"},
      {"[L4-DS]", "NVIDIA L4 Tensor Core GPU datasheet"},
      {"[L40-DS]", "NVIDIA L40 GPU datasheet"},
      {"[L40S-DS]", "NVIDIA L40S GPU datasheet"},
      {"[H100-WP]", "NVIDIA H100 Tensor Core GPU Architecture whitepaper, Tables 2 and 3"},
      {"[H100-DS]", "NVIDIA H100 Tensor Core GPU datasheet (SXM, PCIe, NVL)"},
      {"[H200-DS]", "NVIDIA H200 Tensor Core GPU datasheet"},
      {"[MI200-DS]", "AMD Instinct MI250X / MI250 / MI210 data sheets (package figures; a device is one GCD)"},
      {"[MI300-DS]", "AMD Instinct MI300X / MI300A / MI325X data sheets"},
      {"[CDNA2-ISA]", "AMD Instinct MI200 (CDNA2) Instruction Set Architecture reference guide"},
      {"[CDNA3-ISA]", "AMD Instinct MI300 (CDNA3) Instruction Set Architecture reference guide"},
      {"[CDNA3-WP]", "AMD CDNA 3 architecture white paper"},
      {"[RDNA2-ISA]", "AMD RDNA2 Instruction Set Architecture reference guide"},
      {"[RDNA3-ISA]", "AMD RDNA3 Instruction Set Architecture reference guide"},
      {"[RX6000]", "AMD Radeon RX 6000 series product pages (compute units, boost clock, peak FP32, memory, L2)"},
      {"[RX7000]", "AMD Radeon RX 7000 series product pages (compute units, boost clock, peak FP32/FP16, memory, L2)"},
      {"[PRO-W]", "AMD Radeon PRO W6000 / W7000 series product pages"},
      {"[LLVM-AMDGPU]", "LLVM AMDGPU backend: AMDGPUBaseInfo.cpp (VGPRs, allocation granules, waves per SIMD) and AMDGPUUsage"},
  };
  return refs;
}

}  // namespace tessera::detail
