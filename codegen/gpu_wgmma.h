// Owns the static plan of the Hopper GEMM (wgmma + TMA, warp-specialized): tiles, warpgroups,
// the shared-memory layout and the register split, shared by the strategy (gpu_wgmma.cpp: rules,
// host wrapper) and its kernel builder (gpu_wgmma_kernel.cpp), and by nothing else.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/gpu_gemm_epilogue.h"
#include "ir/dtype.h"
#include "ir/families.h"
#include "ir/schedule.h"
#include "support/status.h"
#include "targets/target_desc.h"

namespace mlir {
class OpBuilder;
namespace func {
class FuncOp;
}
}  // namespace mlir

namespace tessera::codegen::wgmma {

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
  int consumers = 0;               // consumer warpgroups: (BM/TM) x (BN/TN)
  int64_t threads = 0;             // 128 x (consumers + 1): the last warpgroup is the producer
  int64_t KT = 0, KTs = 0;         // K tiles, K tiles per split
  int64_t tilesM = 0, tilesN = 0;
  int64_t pitchA = 0, pitchB = 0;  // elements per row of the A / B operands as the kernel reads them
  bool packA = false, packB = false;  // the host wrapper makes a (transposed / row-padded) copy
  // Dynamic shared memory: the ring of `stages` slots [A tile BM x 64][B tile BN/64 boxes of 64x64],
  // then (reusing it once the K loop is done) the f32 C tile [BM][BN + kStagePad], then 16 bytes
  // for the split-K flag.
  int64_t stageBytes = 0, ringBytes = 0, stagingBytes = 0, flagOffset = 0, dynamicBytes = 0;
  int consumerRegs = 0;            // setmaxnreg.inc of the consumers
  int64_t elementBytes = 2;
  int64_t txBytes() const { return stageBytes; }  // what one slot's TMA copies deliver
};

// The plan of `c` (strategy=wgmma) for `g` on `t`, or an InvalidConfig error saying which rule fails.
struct PlanInputs {
  int64_t BM, BN, BK, TM, TN, VEC, STAGES, SPLITK;
  int64_t smemOptIn;
  int64_t maxThreads;
};
Expected<Plan> makePlan(const ir::GemmInfo& g, const PlanInputs& in);

// Whether the ptxas register count `regs` (per thread at launch) leaves the block's register pool
// enough for the setmaxnreg split of `p`; "" when it does, else why not.
std::string registerPoolProblem(const Plan& p, int regs);

// The epilogue as the kernel reads it (shared with the mma-lane GEMM: gpu_gemm_epilogue.h).
using EpiOperand = gemm::EpiOperand;
using Epilogue = gemm::Epilogue;

// Fills the entry block of `fn` (arguments: A, B, A's map, B's map, then Epilogue's) with the
// gpu.launch of the kernel (gpu_wgmma_kernel.cpp).
Status buildKernel(mlir::OpBuilder& b, mlir::func::FuncOp fn, const Plan& p, const Epilogue& e);

}  // namespace tessera::codegen::wgmma

namespace tessera::codegen {
// The plan of a strategy=wgmma config (checkGpuGemm's rules for it, and the kernel's).
Expected<wgmma::Plan> planGpuGemmWgmma(const ir::GemmInfo& g, const ir::Config& c, const TargetDesc& t);
}  // namespace tessera::codegen
