// Owns the Hopper GEMM strategy (strategy=wgmma, sm_90a, f16/bf16 operands, f32 accumulation):
// its legality rules, the host wrapper (operands as they are when TMA can read them, else row-padded
// or transposed copies; TMA tensor maps over them; all batches in one launch) and the payload, a
// kernel written directly at the mapped level (gpu.launch) by gpu_wgmma_kernel.cpp:
//
//   grid (ceil(N/BN), ceil(M/BM), batch x SPLITK), or with PERSIST=1 min(those work items, SMs)
//   blocks that loop over them, block 128 x (consumers + 1), dynamic smem
//   producer warpgroup (the last): setmaxnreg.dec, one thread runs the ring: wait empty[s],
//     arrive.expect_tx full[s], TMA A (box 64 x BM) and B (BN/64 boxes of 64 x 64), 128B swizzle
//   consumer warpgroups: setmaxnreg.inc, each owns TM x TN of the tile: wait full[s],
//     nvgpu.warpgroup.mma (wgmma m64nTNk16, A and B from shared memory), wait_group 1, release the
//     previous slot; then the accumulators staged through shared memory, the split-K reduction
//     (partials in a workspace; each of a tile's SPLITK slices summed by the block that arrives
//     last on its counter, so the tile's blocks share the reduction) and the fused epilogue.
//
// Knobs (the GEMM space's, read the wgmma way): BM x BN block tile, TM x TN per consumer
// warpgroup (consumers = BM/TM x BN/TN), STAGES ring slots, SPLITK, PERSIST. BK is 64 (one swizzled row)
// and VEC is not used (TMA moves the tiles).
#include "codegen/nvidia/gpu_wgmma.h"

#include <algorithm>
#include <map>

#include "codegen/expr_emitter.h"
#include "codegen/gpu_backend.h"
#include "codegen/gpu_strategies.h"
#include "codegen/kernel_func.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace tessera::codegen {

namespace {

using gemm::userIndexOf;

const char* kMapSchedule =
    "module attributes {transform.with_named_sequence} {\n"
    "  transform.named_sequence @map_main(%root: !transform.any_op {transform.readonly}) {\n"
    "    transform.yield\n  }\n}\n";

}  // namespace

Expected<GpuPlan> buildGpuGemmWgmma(mlir::MLIRContext* ctx, const ir::Kernel& k, const GpuGemmConfig& c, const TargetDesc& t) {
  using namespace mlir;
  TESSERA_ASSIGN(ir::GemmInfo g, ir::analyzeGemm(k));
  TESSERA_ASSIGN(wgmma::Plan p, planGpuGemmWgmma(g, c, t));
  GpuPlan plan;
  plan.strategy = "wgmma";
  plan.laneLevel = true;
  plan.launch.batches = 1;  // every batch in the grid's z
  const int64_t B = p.batch, bytes = p.elementBytes;

  // ---- host wrapper
  auto operand = [&](const std::string& name, int64_t rows, int64_t cols, int64_t pitch, bool pack, bool trans) {
    GpuArg a;
    a.tensor = userIndexOf(k, name);
    a.dtype = g.inType;
    a.rows = rows, a.cols = cols, a.prows = rows, a.pcols = pitch;
    a.transposed = trans;
    a.kind = pack ? GpuArg::Kind::Packed : GpuArg::Kind::Tensor;
    a.packBatches = pack ? B : 1;
    return a;
  };
  auto tensorMap = [&](int of, int64_t d0, int64_t d1, int64_t pitch, int64_t box0, int64_t box1) {
    GpuArg a;
    a.kind = GpuArg::Kind::TensorMap;
    a.dtype = g.inType;
    a.tensorMap.of = of;
    a.tensorMap.rank = 3;
    a.tensorMap.dims = {d0, d1, B};
    a.tensorMap.strides = {pitch * bytes, d1 * pitch * bytes};
    a.tensorMap.box = {box0, box1, 1};
    a.tensorMap.swizzleBytes = 128;
    return a;
  };
  std::vector<GpuArg>& args = plan.launch.args;
  args.push_back(operand(g.a, g.m, g.k, p.pitchA, p.packA, g.transA));        // 0: A [batch][M][K]
  args.push_back(operand(g.b, g.k, g.n, p.pitchB, p.packB, g.transB));        // 1: B [batch][K][N]
  args.push_back(tensorMap(0, g.k, g.m, p.pitchA, wgmma::kBK, p.BM));         // 2: A's map, box 64 x BM
  args.push_back(tensorMap(1, g.n, g.k, p.pitchB, wgmma::kBoxN, wgmma::kBK)); // 3: B's map, box 64 x 64
  wgmma::Epilogue epi;
  std::vector<std::pair<Type, int64_t>> flat;  // the flat kernel arguments after the maps: type, elements
  OpBuilder b(ctx);
  gemm::planEpilogue(b, k, g, args, flat, epi);
  if (p.splitK > 1) {
    GpuArg partials;  // [batch x tiles x SPLITK][BM x BN] f32, every element written before it is read
    partials.kind = GpuArg::Kind::Workspace;
    partials.dtype = ir::ScalarType::F32;
    partials.prows = B * p.tilesM * p.tilesN * p.splitK;
    partials.pcols = p.BM * p.BN;
    epi.partialsArg = int(args.size());
    args.push_back(partials);
    flat.push_back({b.getF32Type(), partials.prows * partials.pcols});
    GpuArg counters = partials;  // one 32-bit arrival counter per slice of an output tile, zeroed per launch
    counters.prows = B * p.tilesM * p.tilesN * p.splitK;
    counters.pcols = 1;
    epi.countersArg = int(args.size());
    args.push_back(counters);
    flat.push_back({b.getI32Type(), counters.prows});
  }

  // ---- payload: func @kernel(A, B, mapA, mapB, flat...) { gpu.launch ... }
  Location loc = b.getUnknownLoc();
  plan.module = ModuleOp::create(loc);
  Type inT = mlirType(b, g.inType), i64 = b.getI64Type();
  SmallVector<Type> types = {MemRefType::get({B * g.m * p.pitchA}, inT), MemRefType::get({B * g.k * p.pitchB}, inT),
                             MemRefType::get({16}, i64), MemRefType::get({16}, i64)};
  for (const auto& [ty, n] : flat) types.push_back(MemRefType::get({n}, ty));
  b.setInsertionPointToEnd(plan.module->getBody());
  auto fn = func::FuncOp::create(b, loc, kKernelSymbol, b.getFunctionType(types, {}));
  fn.addEntryBlock();
  TESSERA_TRY(wgmma::buildKernel(b, fn, p, epi));
  plan.schedule = kMapSchedule;
  plan.hasPre = false;
  const wgmma::Plan pc = p;
  plan.checkResources = [pc](ResourceReport& r) {
    std::string why = wgmma::registerPoolProblem(pc, r.registers);
    if (!why.empty()) {
      r.ok = false;
      r.problems.push_back(why);
    }
  };
  return plan;
}

}  // namespace tessera::codegen
