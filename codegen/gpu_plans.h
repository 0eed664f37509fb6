// Owns the static plans of the GPU strategies (tiles, threads, copy distribution, shared memory/LDS,
// register estimates) and the rules that make them from a config: plain arithmetic, no MLIR
// (library tessera_gpu_rules, gpu_rules.h). The strategies build their kernels from these plans;
// a config whose plan fails is one the space never offers and the cache service refuses.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "codegen/gpu_rules.h"
#include "ir/families.h"

namespace tessera::codegen {

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// ---- GEMM, strategy simt | mma (gpu_gemm.cpp)
namespace gemm {

enum class Path { Simt, MmaSync, Mfma };

struct Tiling {
  Path path = Path::Simt;
  int64_t Mp = 0, Np = 0, Kp = 0;   // padded problem (multiples of the block tile)
  int64_t BM = 0, BN = 0, BK = 0;   // block tile
  int64_t TM = 0, TN = 0;           // thread tile (simt) or warp tile (mma.sync / mfma)
  int64_t VEC = 1;                  // elements per global->shared copy
  int64_t stages = 1;               // > 1: cp.async multi-buffered pipeline (mma.sync)
  int warp = 32;                    // warp / wavefront size
  int64_t threads = 0;              // per block
  int64_t blockX = 0, blockY = 0;   // block_dims of the mapping
  int64_t copyA[2] = {0, 0}, copyB[2] = {0, 0};  // num_threads of the A / B copy foralls
  int64_t smemLimit = 0;            // alloc_to_alloca size limit
  ir::ScalarType inType = ir::ScalarType::F32;
};

}  // namespace gemm

Expected<gemm::Tiling> makeGemmTiling(const ir::GemmInfo& g, const GpuGemmConfig& c, const TargetDesc& t);

// ---- GEMM, strategy mma-lane (gpu_gemm_lane.cpp)
namespace lane {

inline constexpr int64_t kPad = 8;        // elements of row padding of the A / B tiles
inline constexpr int64_t kStagePad = 8;   // floats of row padding of the staged C tile (8-byte stores, no conflicts)

// One operand as the kernel reads it: stored rows of `pitch` elements per batch, and its shared
// tile of tileR x tileC (+ kPad) per ring slot.
struct Operand {
  bool kMajor = true;     // K is the contiguous dim (A [M][K], B [N][K]): ldmatrix without .trans
  bool pack = false;      // the host wrapper copies it (row-major, rows padded to 8 elements)
  int64_t rows = 0;       // stored rows per batch
  int64_t pitch = 0;      // elements per stored row (a multiple of 8)
  int64_t tileR = 0, tileC = 0, ld = 0;
  int64_t slotElems() const { return tileR * ld; }
};

struct Plan {
  ir::GemmInfo g;
  int64_t batch = 1;
  int64_t BM = 0, BN = 0, BK = 0, TM = 0, TN = 0, S = 0;
  int64_t warpsN = 0, warps = 0, T = 0;
  int64_t KT = 0, tilesM = 0, tilesN = 0;
  Operand A, B;
  int64_t ringBytes = 0, stagingBytes = 0, dynamicBytes = 0;
  int64_t passes = 1, passRows = 0;  // the C tile is staged in `passes` row bands of passRows rows
};

Expected<Plan> makePlan(const ir::GemmInfo& g, const GpuGemmConfig& c, const TargetDesc& t);

}  // namespace lane

// ---- GEMM, strategy wgmma (gpu_wgmma.cpp, gpu_wgmma_kernel.cpp)
namespace wgmma {

// K step: one 128-byte swizzled row of 2-byte elements (the only K-major layout nvgpu's
// warpgroup.mma steps its descriptors through correctly, mlir-recipes/gpu-wgmma-tma pitfall 3).
inline constexpr int64_t kBK = 64;
// B is loaded as boxes of 64 columns (128 bytes, the swizzle span) x kBK rows: 8 KB each.
inline constexpr int64_t kBoxN = 64;
// Registers a producer warpgroup keeps after setmaxnreg.dec (it only issues TMA from one thread).
inline constexpr int kProducerRegs = 40;
// Row padding of the f32 C tile staged in shared memory: 8 floats make rows 4 banks x 8 apart,
// so the accumulator's 8-byte stores (4 rows x 4 lanes per phase) hit 32 distinct banks.
inline constexpr int64_t kStagePad = 8;

struct Plan {
  ir::GemmInfo g;
  int64_t batch = 1;               // max(g.batch, 1)
  int64_t BM = 0, BN = 0;          // block tile
  int64_t TM = 0, TN = 0;          // one consumer warpgroup's tile (TM rows = TM/64 wgmma m64 steps)
  int64_t stages = 0;              // mbarrier ring slots (A and B tiles of one K step each)
  int64_t splitK = 1;              // K ranges per output tile, reduced a slice per block (gpu_wgmma_kernel.cpp)
  // PERSIST=1: gridBlocks (at most one per SM) blocks loop over the work items, carrying the ring's
  // slots and mbarrier phases from one tile to the next, with the C tile staged past the ring so
  // the producer fills the next tile's slots during this one's epilogue. PERSIST=0: one block per
  // work item (grid tilesN x tilesM x batch * SPLITK), the C tile staged over the ring.
  bool persistent = false;
  int64_t work = 0;                // output tiles x batch x SPLITK
  int64_t gridBlocks = 0;          // blocks launched
  int consumers = 0;               // consumer warpgroups: (BM/TM) x (BN/TN)
  int64_t threads = 0;             // 128 x (consumers + 1): the last warpgroup is the producer
  int64_t KT = 0, KTs = 0;         // K tiles, K tiles per split
  int64_t tilesM = 0, tilesN = 0;
  int64_t pitchA = 0, pitchB = 0;  // elements per row of the A / B operands as the kernel reads them
  bool packA = false, packB = false;  // the host wrapper makes a (transposed / row-padded) copy
  // Dynamic shared memory: the ring of `stages` slots [A tile BM x 64][B tile BN/64 boxes of 64x64],
  // then the f32 C tile [BM][BN + kStagePad] at stagingOffset (0: reusing the ring once the K loop
  // is done; persistent: past it), then 16 bytes for the split-K flag.
  int64_t stageBytes = 0, ringBytes = 0, stagingBytes = 0, stagingOffset = 0, flagOffset = 0, dynamicBytes = 0;
  int consumerRegs = 0;            // setmaxnreg.inc of the consumers
  int64_t elementBytes = 2;
  int64_t txBytes() const { return stageBytes; }  // what one slot's TMA copies deliver
};

// The plan of `c` (strategy=wgmma) for `g` on `t`, or an InvalidConfig error saying which rule fails.
struct PlanInputs {
  int64_t BM, BN, BK, TM, TN, VEC, STAGES, SPLITK, PERSIST;
  int64_t units;  // SMs: a persistent grid's size
  int64_t smemOptIn;
  int64_t maxThreads;
};
Expected<Plan> makePlan(const ir::GemmInfo& g, const PlanInputs& in);

// Whether the ptxas register count `regs` (per thread at launch) leaves the block's register pool
// enough for the setmaxnreg split of `p`; "" when it does, else why not.
std::string registerPoolProblem(const Plan& p, int regs);

}  // namespace wgmma

// The plan of a strategy=wgmma config (checkGpuGemm's rules for it, and the kernel's).
Expected<wgmma::Plan> planGpuGemmWgmma(const ir::GemmInfo& g, const GpuGemmConfig& c, const TargetDesc& t);

// ---- elementwise (gpu_elementwise.cpp)
struct EwKnobs {
  int64_t tpb, vw, ept, grid;
};
Expected<EwKnobs> readEwKnobs(const ir::Config& c, const ir::ElementwiseRegion& r, const ir::Kernel& k, const TargetDesc& t);

// ---- attention (gpu_attention*.cpp)

// The attention problem as every family sees it; a family's plan adds its tiles and limits.
struct AttnDims {
  int64_t B = 0, H = 0, HKV = 0, G = 1, SQ = 0, SKV = 0, D = 0, off = 0;  // off = Skv - Sq
  bool causal = false;
  ir::ScalarType dtype = ir::ScalarType::F32;
  int64_t BQ = 0, BK = 0, NQB = 0, NKB = 0;  // query / key rows per block, block counts
  double qscale = 0;                          // scale * log2(e): the softmax runs on 2^x
  ir::AttentionSpec spec;                     // the tensors' names, for the kernel's arguments
  // Takes the problem from `s`; BQ and BK must be set (they give the block counts).
  void setProblem(const ir::AttentionSpec& s);
};

// The tensor-core families' input rule: f16 or bf16, head_dim a multiple of `dimStep` up to 256
// (else `dimRule`), as InvalidConfig errors naming `strategy`.
Status tensorCoreInputs(const ir::AttentionSpec& s, const std::string& strategy, int64_t dimStep, const std::string& dimRule);

// flash-simt (gpu_attention.cpp): one query row per thread, or DSPLIT threads per row.
struct SimtAttnPlan : AttnDims {
  int64_t DSPLIT, T, VW, DP, DC, DCS;
  int64_t smemBytes() const {
    int64_t es = ir::byteSize(dtype);
    return 2 * BK * DP * es + BQ * DP * 4 + 2 * T * 4 + (DSPLIT > 1 ? DSPLIT * BQ * BK * 4 : 0);
  }
};
Expected<SimtAttnPlan> makeSimtAttnPlan(const ir::AttentionSpec& s, const GpuAttentionConfig& c, const TargetDesc& t);

// flash-mma (gpu_attention_mma.cpp).
struct MmaAttnPlan : AttnDims {
  int64_t W, STAGES, LD, NKD, NJ, NC, ND, T;
  bool qInRegs;
  int64_t qBytes() const { return BQ * LD * 2; }
  int64_t kvBytes() const { return STAGES * BK * LD * 2; }
  int64_t smemBytes() const { return qBytes() + 2 * kvBytes(); }
};
Expected<MmaAttnPlan> makeMmaAttnPlan(const ir::AttentionSpec& s, const GpuAttentionConfig& c, const TargetDesc& t);

// flash-wgmma (gpu_attention_wgmma.cpp).
struct WgmmaAttnPlan : AttnDims {
  bool fa3 = false;  // PIPE=fa3*: producer warpgroup, TMA + mbarrier ring, P from registers
  bool overlap = false;   // fa3-overlap, fa3-pingpong: S of block j issued with P·V of block j - 1
  bool pingpong = false;  // fa3-pingpong: the two consumer warpgroups take turns issuing
  int64_t WG, STAGES, NP, T;
  int consumerRegs = 0;  // fa3: setmaxnreg.inc of the consumers
  int producerRegs = wgmma::kProducerRegs;  // fa3: setmaxnreg.dec of the producer
  // Byte offsets in the dynamic window (each a multiple of 1024: the swizzle atom).
  int64_t qOff() const { return 0; }
  int64_t kOff(int64_t st) const { return BQ * D * 2 + st * BK * D * 2; }
  int64_t vOff(int64_t st) const { return kOff(STAGES) + st * BK * D * 2; }
  int64_t pOff(int64_t wg) const { return vOff(STAGES) + wg * 64 * BK * 2; }
  int64_t smemBytes() const { return fa3 ? vOff(STAGES) : pOff(WG); }
};
Expected<WgmmaAttnPlan> makeWgmmaAttnPlan(const ir::AttentionSpec& s, const GpuAttentionConfig& c, const TargetDesc& t);

// flash-mfma (gpu_attention_mfma.cpp).
struct MfmaAttnPlan : AttnDims {
  int64_t MN, KI, NR;      // instruction: MN x MN x KI, NR accumulator registers per lane
  int64_t W, NG, STAGES;   // waves, query groups per wave, LDS buffers
  int64_t LK, LV, T;
  int64_t kBytes() const { return BK * LK * 2; }
  int64_t vBytes() const { return D * LV * 2; }
  int64_t ldsBytes() const { return STAGES * (kBytes() + vBytes()); }
  // VGPRs the kernel keeps live per lane: Oᵀ, Sᵀ/P, Q and the prefetched copies, plus addressing.
  int64_t regEstimate() const {
    const int64_t perGroup = D * MN / 64 + BK * MN / 64 + BK * MN / 128 + 2 * D / KI + 4;
    const int64_t prefetch = STAGES == 2 ? 2 * 4 * ceilDiv(BK * D / 8, T) : 0;
    return NG * perGroup + prefetch + 32;
  }
};
Expected<MfmaAttnPlan> makeMfmaAttnPlan(const ir::AttentionSpec& s, const GpuAttentionConfig& c, const TargetDesc& t);

}  // namespace tessera::codegen
