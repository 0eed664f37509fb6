// Owns the GPU GEMM strategy: the plan (padded extents, tiles, threads, copy distribution) from
// the config, the host wrapper (operands padded to the block tile and put in canonical
// row-major [M][K] / [K][N] layout, C accumulated in a zeroed workspace, one launch per batch),
// the linalg payload for the transform schedules of gpu_gemm_schedule.cpp, and the C++ steps
// around them:
//   after @pre : the fused epilogue phase, appended to the block forall behind a gpu.barrier:
//                a linear-thread forall reads the finished C tile, applies the elementwise
//                epilogue (bias, activation, residual, alpha/beta) and writes the real output
//                under `row < M && col < N` (so the padding never leaks);
//   after @map : mma.sync: convert-vector-to-gpu{use-nvgpu}, then for a cp.async pipeline the
//                address-space / alloca fix-ups and @map_pipe (gpu-tensorcore-gemm REPORT §3.4);
//                mfma: our contract -> amdgpu.mfma rewrite (the AMD backend, gpu_backend_amd_mfma.cpp).
// Knobs: strategy (simt | mma), BM BN BK, TM TN (thread tile for simt, warp tile for mma), VEC
// (elements per global->shared copy), STAGES (cp.async buffers, mma.sync only).
#include "codegen/gpu_gemm.h"
#include "codegen/gpu_gemm_epilogue.h"

#include <algorithm>

#include "codegen/expr_emitter.h"
#include "codegen/gpu_backend.h"
#include "codegen/gpu_loops.h"
#include "codegen/gpu_lowering.h"
#include "codegen/gpu_strategies.h"
#include "codegen/kernel_func.h"
#include "codegen/mlir_env.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/NVGPU/Transforms/Transforms.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/AttrTypeSubElements.h"

namespace tessera::codegen {

using namespace mlir;

namespace {

// One epilogue operand: its kernel argument and how the iteration coordinates address it.
struct EpiOperand {
  ir::ElementwiseOperand op;
  int arg = -1;                  // position of its kernel argument (-1: the accumulator C)
  std::vector<int64_t> strides;  // per tensor dim, 0 for broadcast and batch dims
};

struct EpiloguePlan {
  ir::ElementwiseRegion region;
  std::vector<EpiOperand> operands;
  int cArg = 2, outArg = -1;
  int rowDim = 0, colDim = 1;  // iteration dims of row / col
  int64_t M = 0, N = 0;
  int sizesArg = -1;           // runtime M: the sizes argument (rows at or past sizes[0] are not written)
};

int userIndex(const ir::Kernel& k, const std::string& name) {
  int i = 0;
  for (const auto* d : k.inputs()) {
    if (d->name == name) return i;
    ++i;
  }
  for (const auto* d : k.outputs()) {
    if (d->name == name) return i;
    ++i;
  }
  return -1;
}

scf::ForallOp blockForall(func::FuncOp fn) {
  for (Operation& op : fn.getBody().front())
    if (auto f = dyn_cast<scf::ForallOp>(op)) return f;
  return nullptr;
}

// Rewrites the scalar float computation of `blk` on vector<1xT>. MLIR 22 convert-vector-to-gpu
// starts a conversion slice from every op of an MMA-elementwise kind, scalar ones included, and
// then fails on them ("unhandled vector to mma type: arith.mulf"); as vector<1> ops fed by
// vector.load the epilogue forms slices the pass recognizes as unconvertible and leaves alone.
void widenToVector1(Block& blk) {
  auto isF = [](Type t) { return isa<FloatType>(t) || t.isInteger(1); };
  llvm::DenseMap<Value, Value> map;
  SmallVector<Operation*> replaced;
  SmallVector<Operation*> ops;
  for (Operation& op : blk.without_terminator()) ops.push_back(&op);
  for (Operation* op : ops) {
    OpBuilder b(op);
    Location loc = op->getLoc();
    if (auto ld = dyn_cast<memref::LoadOp>(op); ld && isa<FloatType>(ld.getType())) {
      map[ld.getResult()] = vector::LoadOp::create(b, loc, VectorType::get({1}, ld.getType()), ld.getMemRef(), ld.getIndices());
    } else if (auto c = dyn_cast<arith::ConstantOp>(op); c && isa<FloatType>(c.getType())) {
      auto vt = VectorType::get({1}, c.getType());
      map[c.getResult()] = arith::ConstantOp::create(b, loc, vt, DenseElementsAttr::get(vt, c.getValue()));
    } else if (auto st = dyn_cast<memref::StoreOp>(op); st && map.count(st.getValueToStore())) {
      vector::StoreOp::create(b, loc, map[st.getValueToStore()], st.getMemRef(), st.getIndices());
    } else if (llvm::any_of(op->getOperands(), [&](Value v) { return map.count(v) != 0; })) {
      Operation* n = b.clone(*op);
      for (OpOperand& o : n->getOpOperands())
        if (map.count(o.get())) o.set(map[o.get()]);
      for (unsigned i = 0; i < n->getNumResults(); ++i) {
        Value r = n->getResult(i);
        if (isF(r.getType())) r.setType(VectorType::get({1}, r.getType()));
        map[op->getResult(i)] = r;
      }
    } else {
      continue;
    }
    replaced.push_back(op);
  }
  for (Operation* op : llvm::reverse(replaced)) op->erase();
}

// Appends the epilogue phase to the block forall (see the file comment).
Status insertEpilogue(ModuleOp m, const EpiloguePlan& e, const gemm::Tiling& p) {
  auto fn = m.lookupSymbol<func::FuncOp>(kKernelSymbol);
  scf::ForallOp blk = fn ? blockForall(fn) : nullptr;
  if (!blk || blk.getInductionVars().size() != 2) return makeError(ErrorCode::Internal, "gemm: no 2-D block forall after @pre");
  Value bi = blk.getInductionVars()[0], bj = blk.getInductionVars()[1];
  OpBuilder b(blk.getBody()->getTerminator());
  Location loc = blk.getLoc();
  MLIRContext* ctx = b.getContext();
  gpu::BarrierOp::create(b, loc);
  gpuir::forall(b, loc, {p.threads}, gpuir::Level::LinearThread);
  Value tid = b.getInsertionBlock()->getArgument(0);
  gpuir::Idx ix{b, loc};
  Value C = fn.getArgument(unsigned(e.cArg)), Out = fn.getArgument(unsigned(e.outArg));
  // Runtime M, loaded once per thread outside the per-element loop (its arith stays out of the
  // slices convert-vector-to-gpu looks at).
  Value runtimeM = e.sizesArg >= 0 ? gemm::loadSize(b, loc, fn.getArgument(unsigned(e.sizesArg)), 0) : Value();
  Status failure;
  gpuir::forLoop(b, loc, ix.c(0), ix.c(p.BM * p.BN / p.threads), 1, [&](Value it) {
    // Index math as affine.apply: convert-vector-to-gpu (mma.sync) fails on arith index ops
    // (gpu-tensorcore-gemm REPORT pitfall 4).
    AffineExpr d0 = getAffineDimExpr(0, ctx), d1 = getAffineDimExpr(1, ctx), d2 = getAffineDimExpr(2, ctx);
    AffineExpr lin = d2 * p.threads + d1;
    Value row = affine::AffineApplyOp::create(b, loc, AffineMap::get(3, 0, d0 * p.BM + lin.floorDiv(p.BN)), ValueRange{bi, tid, it});
    Value col = affine::AffineApplyOp::create(b, loc, AffineMap::get(3, 0, d0 * p.BN + lin % p.BN), ValueRange{bj, tid, it});
    Value inb = ix.band(runtimeM ? ix.lt(row, runtimeM) : ix.lt(row, e.M), ix.lt(col, e.N));
    gpuir::guarded(b, loc, inb, [&] {
      Value acc = memref::LoadOp::create(b, loc, C, ValueRange{row, col});
      auto coordOf = [&](int dim) { return dim == e.rowDim ? row : dim == e.colDim ? col : ix.c(0); };
      ExprCallbacks cb;
      cb.bitExp2 = false;  // see ExprCallbacks::bitExp2
      cb.load = [&](const ir::Expr& ld) -> Value {
        for (const auto& o : e.operands) {
          if (o.op.tensor != ld.name || o.op.dims.size() != ld.args.size()) continue;
          bool same = true;
          for (size_t d = 0; d < ld.args.size() && same; ++d) {
            const auto& a = ld.args[d];
            same = o.op.dims[d] < 0 ? a->op == ir::Op::IConst
                                    : (a->op == ir::Op::Var && a->name == "d" + std::to_string(o.op.dims[d]));
          }
          if (!same) continue;
          if (o.arg < 0) return acc;
          AffineExpr off = getAffineConstantExpr(0, ctx);
          for (size_t d = 0; d < o.op.dims.size(); ++d)
            if (o.strides[d] && o.op.dims[d] == e.rowDim) off = off + d0 * o.strides[d];
            else if (o.strides[d] && o.op.dims[d] == e.colDim) off = off + d1 * o.strides[d];
          Value idx = affine::AffineApplyOp::create(b, loc, AffineMap::get(2, 0, off), ValueRange{row, col});
          return memref::LoadOp::create(b, loc, fn.getArgument(unsigned(o.arg)), ValueRange{idx});
        }
        return Value();
      };
      cb.indexVar = [&](const std::string& v) { return coordOf(std::stoi(v.substr(1))); };
      auto val = emitExpr(b, loc, e.region.values[0], cb);
      if (!val.ok()) {
        failure = val.takeError();
        return;
      }
      Value o = affine::AffineApplyOp::create(b, loc, AffineMap::get(2, 0, d0 * e.N + d1), ValueRange{row, col});
      memref::StoreOp::create(b, loc, *val, Out, ValueRange{o});
      widenToVector1(*b.getInsertionBlock());
    });
  });
  return failure;
}

// Between the two mapping stages of the cp.async pipeline (gpu-tensorcore-gemm REPORT §3.4 b, c):
// workgroup address space -> 3 (pipeline_shared_memory_copies needs an integer space), the
// dealloc-less workgroup allocs -> alloca, and the K loop tagged for @map_pipe.
Status prepareForPipelining(ModuleOp m) {
  MLIRContext* ctx = m.getContext();
  AttrTypeReplacer rep;
  rep.addReplacement([ctx](MemRefType t) -> std::optional<Type> {
    auto as = dyn_cast_or_null<gpu::AddressSpaceAttr>(t.getMemorySpace());
    if (!as || as.getValue() != gpu::AddressSpace::Workgroup) return std::nullopt;
    return MemRefType::get(t.getShape(), t.getElementType(), t.getLayout(), IntegerAttr::get(IntegerType::get(ctx, 64), 3));
  });
  rep.recursivelyReplaceElementsIn(m, true, false, true);
  SmallVector<memref::AllocOp> allocs;
  m.walk([&](memref::AllocOp a) {
    auto ms = dyn_cast_or_null<IntegerAttr>(a.getType().getMemorySpace());
    if (ms && ms.getInt() == 3) allocs.push_back(a);
  });
  for (auto a : allocs) {
    OpBuilder b(a);
    auto na = memref::AllocaOp::create(b, a.getLoc(), a.getType(), a.getDynamicSizes(), a.getSymbolOperands(), a.getAlignmentAttr());
    a.replaceAllUsesWith(na.getResult());
    a.erase();
  }
  int tagged = 0;
  m.walk([&](scf::ForOp f) {
    for (Operation& op : *f.getBody())
      if (isa<nvgpu::DeviceAsyncCopyOp>(op)) {
        f->setAttr("tessera.kloop", UnitAttr::get(ctx));
        ++tagged;
        return;
      }
  });
  if (tagged != 1) return makeError(ErrorCode::CompileError, "gemm: expected one K loop with cp.async copies, found " + std::to_string(tagged));
  return {};
}

// The A/B tiles' shared-memory accesses XOR-swizzled (nvgpu's optimizeSharedMemoryReadsAndWrites):
// ldmatrix reads 8 rows of 16 B, and with a row of BN f16 (512 B at BN=256) all 8 land in the same
// banks. Measured on an H100 before this step (ncu, GEMM f16 4096^3, 128x256x16, 3 stages): 134 M
// shared-load bank conflicts for 12.6 M ldmatrix, the shared-memory pipe 78 % busy, the tensor
// pipe 21 %; after: no conflicts, tensor pipe 38 %, the tuned GEMM 1022 -> 464 us. Subviews are
// folded into the accesses first; a tile the rewrite cannot take stays as it was: today the
// STAGES=1 path, whose synchronous copies reach the tile through vector transfers it does not
// rewrite (left as is: on the H100 the pipelined configs win).
Status swizzleSharedTiles(ModuleOp m) {
  TESSERA_TRY(runPasses(m, "fold-memref-alias-ops,canonicalize,cse", "fold shared-memory subviews"));
  SmallVector<std::pair<Operation*, Value>> tiles;
  m.walk([&](Operation* op) {
    if (!isa<memref::AllocOp, memref::AllocaOp>(op)) return;
    Value v = op->getResult(0);
    if (!nvgpu::NVGPUDialect::hasSharedMemoryAddressSpace(cast<MemRefType>(v.getType()))) return;
    tiles.push_back({op->getParentOfType<func::FuncOp>(), v});
  });
  for (auto& [fn, v] : tiles)
    if (fn) (void)nvgpu::optimizeSharedMemoryReadsAndWrites(fn, v);
  return runPasses(m, "canonicalize,cse", "swizzle cleanup");
}

}  // namespace

Expected<GpuPlan> buildGpuGemm(MLIRContext* ctx, const ir::Kernel& k, const ir::Config& c, const TargetDesc& t,
                               const RuntimeDims& rt) {
  TESSERA_ASSIGN(ir::GemmInfo g, ir::analyzeGemm(k));
  TESSERA_ASSIGN(GpuGemmConfig cfg, readGpuGemmConfig(c));
  TESSERA_TRY(checkGpuGemm(g, cfg, t));
  if (cfg.strategy == "wgmma") {
    if (rt.any())
      return makeError(ErrorCode::Unsupported, "gemm (wgmma): no runtime sizes (its TMA tensor maps and tile schedule are fixed "
                                               "at the compiled shape): use strategy=mma-lane or mma for a shape-generic kernel");
    return buildGpuGemmWgmma(ctx, k, cfg, t);
  }
  if (cfg.strategy == "mma-lane") return buildGpuGemmLane(ctx, k, cfg, t, rt);
  TESSERA_ASSIGN(gemm::Tiling p, makeGemmTiling(g, cfg, t));
  const bool batched = g.batch > 0;
  GpuPlan plan;
  plan.strategy = p.path == gemm::Path::Simt ? "simt" : p.path == gemm::Path::MmaSync ? "mma.sync" : "mfma";
  plan.launch.batches = batched ? g.batch : 1;
  // Runtime M: the kernel runs on A packed into an upper-bound workspace (rows past M zero) and
  // accumulates into a workspace; the grid has ceil(M / BM) row blocks, M rows are copied back
  // (or written by the epilogue, under sizes[0]). A runtime batch count is the launch count.
  TESSERA_ASSIGN(plan.launch.runtime, gemm::planRuntime(k, g, rt, plan.strategy, p.BM, /*batchInGrid=*/false));

  // ---- host wrapper: A, B (padded / transposed copies when needed), C, epilogue tensors, output
  auto operand = [&](const std::string& name, int64_t rows, int64_t cols, int64_t prows, int64_t pcols, bool trans) {
    GpuArg a;
    a.tensor = userIndex(k, name);
    a.dtype = g.inType;
    a.batchStride = batched ? rows * cols : 0;
    a.rows = rows;
    a.cols = cols;
    a.prows = prows;
    a.pcols = pcols;
    a.transposed = trans;
    a.kind = (!trans && rows == prows && cols == pcols) ? GpuArg::Kind::Tensor : GpuArg::Kind::Packed;
    return a;
  };
  plan.launch.args.push_back(operand(g.a, g.m, g.k, p.Mp, p.Kp, g.transA));
  if (rt.m) {
    plan.launch.args.back().kind = GpuArg::Kind::Packed;
    plan.launch.args.back().rowsFollowM = true;
  }
  plan.launch.args.push_back(operand(g.b, g.k, g.n, p.Kp, p.Np, g.transB));
  GpuArg cArg;
  cArg.dtype = ir::ScalarType::F32;
  cArg.rows = g.m;
  cArg.cols = g.n;
  cArg.prows = p.Mp;
  cArg.pcols = p.Np;
  const int outIdx = userIndex(k, g.c);
  cArg.rowsFollowM = rt.m;
  if (!g.hasEpilogue && p.Mp == g.m && p.Np == g.n && !rt.m) {
    cArg.kind = GpuArg::Kind::Tensor;
    cArg.tensor = outIdx;
    cArg.zeroFirst = true;
    cArg.batchStride = batched ? g.m * g.n : 0;
  } else {
    cArg.kind = GpuArg::Kind::Workspace;
    cArg.copyBack = !g.hasEpilogue;
    cArg.tensor = cArg.copyBack ? outIdx : -1;
    cArg.batchStride = cArg.copyBack && batched ? g.m * g.n : 0;
  }
  plan.launch.args.push_back(cArg);

  EpiloguePlan epi;
  epi.M = g.m;
  epi.N = g.n;
  epi.rowDim = batched ? 1 : 0;
  epi.colDim = batched ? 2 : 1;
  std::vector<std::pair<std::string, int64_t>> flatArgs;  // epilogue tensors: name, per-batch elements
  if (g.hasEpilogue) {
    epi.region = g.epilogue;
    std::map<std::string, int> argOf;
    for (const auto& op : g.epilogue.operands) {
      EpiOperand eo;
      eo.op = op;
      if (op.tensor == g.acc) {
        epi.operands.push_back(eo);
        continue;
      }
      const ir::TensorDecl* td = k.find(op.tensor);
      std::vector<int64_t> stride(td->shape.size(), 1);
      for (int d = int(td->shape.size()) - 2; d >= 0; --d) stride[size_t(d)] = stride[size_t(d + 1)] * td->shape[size_t(d + 1)];
      bool hasBatch = false;
      for (size_t d = 0; d < op.dims.size(); ++d) {
        if (op.dims[d] < 0) stride[d] = 0;
        if (batched && op.dims[d] == 0) {
          hasBatch = true;
          stride[d] = 0;
        }
      }
      eo.strides = stride;
      if (!argOf.count(op.tensor)) {
        int64_t perBatch = td->numel() / (hasBatch ? td->shape[0] : 1);
        GpuArg a;
        a.kind = GpuArg::Kind::Tensor;
        a.tensor = userIndex(k, op.tensor);
        a.dtype = td->dtype;
        a.batchStride = hasBatch ? perBatch : 0;
        argOf[op.tensor] = int(plan.launch.args.size());
        plan.launch.args.push_back(a);
        flatArgs.push_back({op.tensor, perBatch});
      }
      eo.arg = argOf[op.tensor];
      epi.operands.push_back(eo);
    }
    GpuArg o;
    o.kind = GpuArg::Kind::Tensor;
    o.tensor = outIdx;
    o.dtype = g.outType;
    o.batchStride = batched ? g.m * g.n : 0;
    epi.outArg = int(plan.launch.args.size());
    plan.launch.args.push_back(o);
    flatArgs.push_back({g.c, g.m * g.n});
  }

  // ---- payload: func @kernel(A[Mp][Kp], B[Kp][Np], C[Mp][Np] f32, epilogue tensors (flat)...)
  OpBuilder b(ctx);
  Location loc = b.getUnknownLoc();
  plan.module = ModuleOp::create(loc);
  Type inT = mlirType(b, g.inType), f32 = b.getF32Type();
  std::vector<Type> types = {MemRefType::get({p.Mp, p.Kp}, inT), MemRefType::get({p.Kp, p.Np}, inT),
                             MemRefType::get({p.Mp, p.Np}, f32)};
  for (const auto& [name, elems] : flatArgs) types.push_back(MemRefType::get({elems}, mlirType(b, k.find(name)->dtype)));
  if (rt.any()) {
    const int sizes = gemm::appendSizesArg(b, plan.launch.args, types);
    if (rt.m && g.hasEpilogue) epi.sizesArg = sizes;
  }
  b.setInsertionPointToEnd(plan.module->getBody());
  auto fn = func::FuncOp::create(b, loc, kKernelSymbol, b.getFunctionType(types, {}));
  Block* body = fn.addEntryBlock();
  b.setInsertionPointToStart(body);
  auto tensorOf = [&](Value v, bool writable) {
    auto mt = cast<MemRefType>(v.getType());
    return bufferization::ToTensorOp::create(b, loc, RankedTensorType::get(mt.getShape(), mt.getElementType()), v, true, writable);
  };
  Value A = tensorOf(body->getArgument(0), false), B = tensorOf(body->getArgument(1), false);
  Value C = tensorOf(body->getArgument(2), true);
  Value mm = linalg::MatmulOp::create(b, loc, TypeRange{C.getType()}, ValueRange{A, B}, ValueRange{C}).getResult(0);
  bufferization::MaterializeInDestinationOp::create(b, loc, TypeRange{}, mm, body->getArgument(2), true, true);
  func::ReturnOp::create(b, loc);

  plan.schedule = gemm::schedule(p);
  plan.hasPre = true;
  if (g.hasEpilogue) plan.afterPre = [epi, p](ModuleOp m) { return insertEpilogue(m, epi, p); };
  if (p.path == gemm::Path::MmaSync) {
    std::string sched = plan.schedule;
    int64_t stages = p.stages;
    std::shared_ptr<bool> swizzle = plan.sharedSwizzle;
    TESSERA_ASSIGN(const GpuBackend* backend, gpuBackendFor(t));
    plan.afterMap = [sched, stages, swizzle, backend, t](ModuleOp m) -> Status {
      TESSERA_TRY(backend->lowerWarpContracts(m, t));
      // Before multibuffering: the pipeline's rotating subviews hide the tiles from the rewrite.
      if (*swizzle) TESSERA_TRY(swizzleSharedTiles(m));
      if (stages == 1) return {};
      TESSERA_TRY(prepareForPipelining(m));
      TESSERA_TRY(applyNamedSequence(m, sched, "map_pipe_main"));
      return runPasses(m, "canonicalize,cse", "pipelined cleanup");
    };
  } else if (p.path == gemm::Path::Mfma) {
    TESSERA_ASSIGN(const GpuBackend* backend, gpuBackendFor(t));
    plan.afterMap = [backend, t](ModuleOp m) { return backend->lowerWarpContracts(m, t); };
  }
  return plan;
}

}  // namespace tessera::codegen
