// Owns the Hopper GEMM strategy (strategy=wgmma, sm_90a, f16/bf16 operands, f32 accumulation):
// its legality rules, the host wrapper (operands as they are when TMA can read them, else row-padded
// or transposed copies; TMA tensor maps over them; all batches in one launch) and the payload, a
// kernel written directly at the mapped level (gpu.launch) by gpu_wgmma_kernel.cpp:
//
//   grid (ceil(N/BN), ceil(M/BM), batch x SPLITK), block 128 x (consumers + 1), dynamic smem
//   producer warpgroup (the last): setmaxnreg.dec, one thread runs the ring: wait empty[s],
//     arrive.expect_tx full[s], TMA A (box 64 x BM) and B (BN/64 boxes of 64 x 64), 128B swizzle
//   consumer warpgroups: setmaxnreg.inc, each owns TM x TN of the tile: wait full[s],
//     nvgpu.warpgroup.mma (wgmma m64nTNk16, A and B from shared memory), wait_group 1, release the
//     previous slot; then the accumulators staged through shared memory, the split-K reduction
//     (partials in a workspace; each of a tile's SPLITK slices summed by the block that arrives
//     last on its counter, so the tile's blocks share the reduction) and the fused epilogue.
//
// Knobs (the GEMM space's, read the wgmma way): BM x BN block tile, TM x TN per consumer
// warpgroup (consumers = BM/TM x BN/TN), STAGES ring slots, SPLITK. BK is 64 (one swizzled row)
// and VEC is not used (TMA moves the tiles).
#include "codegen/gpu_wgmma.h"

#include <algorithm>
#include <map>

#include "codegen/expr_emitter.h"
#include "codegen/gpu_backend.h"
#include "codegen/gpu_strategies.h"
#include "codegen/host_strategies.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace tessera::codegen {

namespace wgmma {

namespace {

int64_t roundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }
Error bad(const std::string& m) { return makeError(ErrorCode::InvalidConfig, "gemm (wgmma): " + m); }

}  // namespace

Expected<Plan> makePlan(const ir::GemmInfo& g, const PlanInputs& in) {
  Plan p;
  p.g = g;
  p.batch = std::max<int64_t>(g.batch, 1);
  p.BM = in.BM, p.BN = in.BN, p.TM = in.TM, p.TN = in.TN, p.stages = in.STAGES, p.splitK = in.SPLITK;
  p.elementBytes = ir::byteSize(g.inType);
  if (g.inType != ir::ScalarType::F16 && g.inType != ir::ScalarType::BF16)
    return bad("wgmma takes f16 or bf16 operands, not " + std::string(ir::typeName(g.inType)));
  if (in.BK != kBK) return bad("BK must be 64: a K step is one 128-byte swizzled row of 2-byte elements");
  if (in.VEC != 16 / p.elementBytes) return bad("VEC is not used (TMA moves the tiles): only VEC=" + std::to_string(16 / p.elementBytes) + " is offered");
  if (p.TM != 64 && p.TM != 128) return bad("TM (rows per consumer warpgroup) must be 64 or 128 (wgmma m64 steps)");
  if (p.TN % kBoxN || p.TN > 256 || p.TN <= 0) return bad("TN (columns per consumer warpgroup) must be 64, 128, 192 or 256");
  if (p.BM <= 0 || p.BN <= 0 || p.BM % p.TM || p.BN % p.TN) return bad("the block tile must be a multiple of TM x TN");
  // nvgpu's warpgroup.mma.store places a warp's rows at 16 x (tid.x / 32): warpgroup w's fragments
  // land 64 w rows down, so the consumers must split the block's rows in warpgroup order.
  if (p.TN != p.BN) return bad("TN must equal BN: the consumer warpgroups split the block's rows (BM / TM of them)");
  if (p.BM > 256) return bad("BM must be at most 256 (a TMA box has at most 256 rows)");
  if (p.TM * p.TN > 128 * 128) return bad("a warpgroup tile of " + std::to_string(p.TM) + "x" + std::to_string(p.TN) +
                                          " needs " + std::to_string(p.TM * p.TN / 128) + " accumulator registers per thread (at most 128)");
  // MLIR 22's lowering of warpgroup.mma.store places the second m64 half of a 128-row accumulator
  // as many rows down as one half holds registers per thread (TN / 2) instead of 64: right at
  // TN=128 only. At 128x64 the halves overlap (the NVVM adds 32 rows; the mapped-kernel emulator
  // reports the write-after-write race, and an H200 measured the result wrong, 2026-11-27).
  if (p.TM == 128 && p.TN != 128)
    return bad("TM=128 needs TN=128: MLIR 22's warpgroup store puts a 128-row accumulator's second half TN/2 rows "
               "down, not 64");
  p.consumers = int((p.BM / p.TM) * (p.BN / p.TN));
  if (p.consumers > 4) return bad(std::to_string(p.consumers) + " consumer warpgroups: at most 4 share the register file");
  p.threads = 128 * (int64_t(p.consumers) + 1);
  if (p.threads > in.maxThreads) return bad(std::to_string(p.threads) + " threads per block exceed " + std::to_string(in.maxThreads));
  if (p.stages < 2) return bad("STAGES must be at least 2: the producer refills a slot while the consumers read the other");
  if (p.stages > 8) return bad("STAGES must be at most 8");
  // The register split: at launch every thread holds R = 64K / threads (ptxas, .minnctapersm 1);
  // the producer gives back all but kProducerRegs, the consumers take the rest (multiples of 8).
  const int entry = int(std::min<int64_t>(248, 65536 / p.threads / 8 * 8));
  p.consumerRegs = std::min(240, (entry * (p.consumers + 1) - kProducerRegs) / p.consumers / 8 * 8);
  const int accRegs = int(p.TM * p.TN / 128);
  if (p.consumerRegs < accRegs + 40)
    return bad(std::to_string(p.consumers) + " consumer warpgroups get " + std::to_string(p.consumerRegs) + " registers each, " +
               std::to_string(accRegs) + " accumulators need about " + std::to_string(accRegs + 40));
  p.KT = (g.k + kBK - 1) / kBK;
  if (p.splitK < 1) return bad("SPLITK must be positive");
  if (p.splitK > p.KT) return bad("SPLITK=" + std::to_string(p.splitK) + " exceeds the " + std::to_string(p.KT) + " K tiles");
  p.KTs = (p.KT + p.splitK - 1) / p.splitK;
  if ((p.splitK - 1) * p.KTs >= p.KT)
    return bad("SPLITK=" + std::to_string(p.splitK) + " leaves a split without K tiles (" + std::to_string(p.KT) + " tiles)");
  p.tilesM = (g.m + p.BM - 1) / p.BM;
  p.tilesN = (g.n + p.BN - 1) / p.BN;
  if (p.batch * p.splitK > 65535) return bad("batch x SPLITK exceeds the grid's z limit (65535)");
  // TMA reads rows whose pitch is a multiple of 16 bytes from 16-byte aligned addresses: A as
  // [M][K] and B as [K][N]; anything else (transposed, or a pitch that is not) is copied first.
  p.packA = g.transA || (g.k * p.elementBytes) % 16 != 0;
  p.packB = g.transB || (g.n * p.elementBytes) % 16 != 0;
  p.pitchA = p.packA ? roundUp(g.k, 8) : g.k;
  p.pitchB = p.packB ? roundUp(g.n, 8) : g.n;
  p.stageBytes = (p.BM + p.BN) * kBK * p.elementBytes;
  p.ringBytes = p.stages * p.stageBytes;
  p.stagingBytes = p.BM * (p.BN + kStagePad) * 4;
  p.flagOffset = roundUp(std::max(p.ringBytes, p.stagingBytes), 1024);
  p.dynamicBytes = p.flagOffset + 16;
  // Static shared memory holds the 2 x STAGES mbarriers (ptxas reports 1 KB with its padding).
  if (p.dynamicBytes + 1024 > in.smemOptIn)
    return bad("the ring and the C tile need " + std::to_string(p.dynamicBytes) + " B of shared memory, the limit is " +
               std::to_string(in.smemOptIn - 1024) + " B");
  return p;
}

std::string registerPoolProblem(const Plan& p, int regs) {
  const int64_t pool = int64_t(regs) * p.threads, want = 128 * (int64_t(kProducerRegs) + int64_t(p.consumers) * p.consumerRegs);
  if (regs > p.consumerRegs)
    return "setmaxnreg: the consumers ask for " + std::to_string(p.consumerRegs) + " registers but start with " + std::to_string(regs);
  if (pool < want)
    return "setmaxnreg: the block holds " + std::to_string(pool) + " registers, its warpgroups ask for " + std::to_string(want);
  return "";
}

}  // namespace wgmma

namespace {

using gemm::userIndexOf;

const char* kMapSchedule =
    "module attributes {transform.with_named_sequence} {\n"
    "  transform.named_sequence @map_main(%root: !transform.any_op {transform.readonly}) {\n"
    "    transform.yield\n  }\n}\n";

}  // namespace

Expected<wgmma::Plan> planGpuGemmWgmma(const ir::GemmInfo& g, const ir::Config& c, const TargetDesc& t) {
  TESSERA_ASSIGN(const GpuBackend* backend, gpuBackendFor(t));
  if (!backend->gemmWarpgroupMma(g.inType, t))
    return makeError(ErrorCode::InvalidConfig, "gemm: " + t.name + " has no wgmma for " + std::string(ir::typeName(g.inType)) +
                                                   " operands (sm_90a, f16/bf16): use strategy=mma or simt");
  wgmma::PlanInputs in{};
  TESSERA_ASSIGN(in.BM, c.getInt("BM"));
  TESSERA_ASSIGN(in.BN, c.getInt("BN"));
  TESSERA_ASSIGN(in.BK, c.getInt("BK"));
  TESSERA_ASSIGN(in.TM, c.getInt("TM"));
  TESSERA_ASSIGN(in.TN, c.getInt("TN"));
  TESSERA_ASSIGN(in.VEC, c.getInt("VEC"));
  TESSERA_ASSIGN(in.STAGES, c.getInt("STAGES"));
  in.SPLITK = 1;
  if (c.has("SPLITK")) {
    TESSERA_ASSIGN(in.SPLITK, c.getInt("SPLITK"));
  }
  in.smemOptIn = std::max(t.smemPerBlock, t.smemPerBlockOptIn);
  in.maxThreads = t.maxThreadsPerBlock;
  return wgmma::makePlan(g, in);
}

Expected<GpuPlan> buildGpuGemmWgmma(mlir::MLIRContext* ctx, const ir::Kernel& k, const ir::Config& c, const TargetDesc& t) {
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
