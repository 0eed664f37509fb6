// Owns the lane-level tensor-core GEMM for NVIDIA sm_80 and later (strategy=mma-lane): f16 or bf16
// operands on mma.sync m16n8k16 with f32 accumulators, built directly as the mapped kernel from
// NVVM / nvgpu ops the way flash-mma is (MLIR 22's convert-vector-to-gpu, which the `mma` strategy
// goes through, fails on bf16 transfers), so the mapped-kernel emulator is what checks it:
//
//   grid (ceil(N/BN), ceil(M/BM), batch): every batch in one launch; block = warps of TM x TN
//   STAGES-slot cp.async ring of A and B tiles in dynamic shared memory, rows padded by 8 elements
//     (16 B: the 8 rows one ldmatrix phase reads start in 8 different bank groups), chunks past
//     the problem's edges zero-filled (cp.async src-size 0), so odd shapes need no padded copies
//   per K tile: wait for its group, one barrier, the copy of tile kt + STAGES - 1 into the slot
//     freed by tile kt - 1, then per 16-deep slice ldmatrix.x4 fragments (transposed where the
//     operand is stored MN-contiguous: transposed A, plain B) and (TM/16) x (TN/8) mma.sync
//   the accumulators staged through shared memory (f32, reusing the ring: in row bands where the
//     whole tile would not fit in it), then the fused epilogue (gpu_gemm_epilogue.h) with
//     coalesced, edge-guarded stores.
// Operands are read where they are: transposed ones through ldmatrix.trans, none copied, except
// one whose stored rows are not a multiple of 8 elements (16 B, what cp.async moves), which the
// host wrapper copies into a zero-padded row-major matrix first.
// Knobs: BM x BN block tile, TM x TN warp tile, BK (32 or 64), STAGES (2-4); VEC is 8 (16 B).
#include <algorithm>

#include "codegen/expr_emitter.h"
#include "codegen/gpu_backend.h"
#include "codegen/gpu_gemm_epilogue.h"
#include "codegen/gpu_loops.h"
#include "codegen/gpu_strategies.h"
#include "codegen/kernel_func.h"
#include "codegen/nvidia/gpu_mma_ops.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace tessera::codegen {

using namespace mlir;

namespace {

// The plan (ring, operands, staging) is the rule library's (gpu_plans.h).
using LanePlan = lane::Plan;
using lane::kPad;
using lane::kStagePad;
using lane::Operand;

class KernelBuilder {
 public:
  KernelBuilder(OpBuilder& b, func::FuncOp fn, const LanePlan& p, const gemm::Epilogue& e, int sizesArg, bool runtimeM)
      : b_(b), loc_(fn.getLoc()), p_(p), e_(e), fn_(fn), ix_{b, fn.getLoc()}, mm_(b, fn.getLoc(), p.g.inType),
        sizesArg_(sizesArg), runtimeM_(runtimeM) {}

  Status build() {
    MLIRContext* ctx = b_.getContext();
    b_.setInsertionPointToStart(&fn_.getBody().front());
    auto launch = gpu::LaunchOp::create(b_, loc_, ix_.c(p_.tilesN), ix_.c(p_.tilesM), ix_.c(p_.batch), ix_.c(p_.T), ix_.c(1),
                                        ix_.c(1), arith::ConstantOp::create(b_, loc_, b_.getI32IntegerAttr(int32_t(p_.dynamicBytes))));
    func::ReturnOp::create(b_, loc_);
    Block& body = launch.getBody().front();
    b_.setInsertionPointToStart(&body);
    gpu::TerminatorOp::create(b_, loc_);
    b_.setInsertionPointToStart(&body);
    tid_ = launch.getThreadIds().x;
    n0_ = ix_.mul(launch.getBlockIds().x, p_.BN);
    m0_ = ix_.mul(launch.getBlockIds().y, p_.BM);
    batch_ = launch.getBlockIds().z;
    // Runtime M (sizes[0]): A's rows and the stores' edge; the grid's y is ceil(M / BM) at launch.
    if (runtimeM_) mRows_ = gemm::loadSize(b_, loc_, fn_.getArgument(unsigned(sizesArg_)), 0);
    Value warp = ix_.div(tid_, 32);
    lane_ = ix_.rem(tid_, 32);
    wm_ = ix_.mul(ix_.div(warp, p_.warpsN), p_.TM);
    wn_ = ix_.mul(ix_.rem(warp, p_.warpsN), p_.TN);
    auto wg = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
    dyn_ = gpu::DynamicSharedMemoryOp::create(b_, loc_, MemRefType::get({ShapedType::kDynamic}, b_.getI8Type(), MemRefLayoutAttrInterface(), wg));
    auto view = [&](int64_t offset, ArrayRef<int64_t> shape, Type et) {
      return memref::ViewOp::create(b_, loc_, MemRefType::get(shape, et, MemRefLayoutAttrInterface(), wg), dyn_, ix_.c(offset), ValueRange{})
          .getResult();
    };
    Type et = mm_.et_;
    ringA_ = view(0, {p_.S, p_.A.tileR, p_.A.ld}, et);
    ringB_ = view(p_.S * p_.A.slotElems() * 2, {p_.S, p_.B.tileR, p_.B.ld}, et);

    // ---- prologue: tiles 0 .. S-2 in flight, one group each (empty past the last tile)
    for (int64_t s = 0; s + 1 < p_.S; ++s) {
      if (s < p_.KT) copyTile(ix_.c(s), ix_.c(s));
      commit();
    }
    const int64_t nAcc = (p_.TM / 16) * (p_.TN / 8) * 4;
    SmallVector<Value> init(size_t(nAcc), arith::ConstantOp::create(b_, loc_, b_.getF32FloatAttr(0.0f)).getResult());
    auto loop = scf::ForOp::create(b_, loc_, ix_.c(0), ix_.c(p_.KT), ix_.c(1), init);
    {
      OpBuilder::InsertionGuard guard(b_);
      b_.setInsertionPointToStart(loop.getBody());
      Value kt = loop.getInductionVar();
      // Tile kt's group has landed (the S-2 newer ones may still fly), for every thread's copies.
      wait(p_.S - 2);
      gpu::BarrierOp::create(b_, loc_);
      // Tile kt + S - 1 into the slot tile kt - 1 used: every warp is past that tile (the barrier).
      Value next = ix_.add(kt, p_.S - 1);
      gpuir::guarded(b_, loc_, ix_.lt(next, p_.KT), [&] { copyTile(next, ix_.rem(next, p_.S)); });
      commit();
      SmallVector<Value> acc(loop.getRegionIterArgs().begin(), loop.getRegionIterArgs().end());
      computeTile(ix_.rem(kt, p_.S), acc);
      scf::YieldOp::create(b_, loc_, acc);
    }
    // Nothing in flight, every warp done with the ring: the C tile takes its place, band by band.
    wait(0);
    Value staging = view(0, {p_.passRows, p_.BN + kStagePad}, b_.getF32Type());
    for (int64_t pass = 0; pass < p_.passes; ++pass) {
      gpu::BarrierOp::create(b_, loc_);
      stageAccumulators(staging, loop.getResults(), pass);
      gpu::BarrierOp::create(b_, loc_);
      TESSERA_TRY(gemm::emitTileStores(b_, loc_, fn_, p_.g, e_, tid_, p_.T, p_.passRows, p_.BN, batch_,
                                       ix_.add(m0_, pass * p_.passRows), n0_, [&](Value, Value r, Value col) -> Value {
                                         return memref::LoadOp::create(b_, loc_, staging, ValueRange{r, col});
                                       },
                                       mRows_));
    }
    return {};
  }

 private:
  // cp.async of 16 bytes (8 elements), L1 bypassed; with `srcElements` (0 or 8) only that many are
  // read and the rest zero-filled.
  void copy16(Value dst, ValueRange dstIdx, Value src, ValueRange srcIdx, Value srcElements) {
    auto tok = nvgpu::DeviceAsyncTokenType::get(b_.getContext());
    nvgpu::DeviceAsyncCopyOp::create(b_, loc_, tok, dst, dstIdx, src, srcIdx, b_.getIndexAttr(8), srcElements, b_.getUnitAttr());
  }
  // cp.async.commit_group / wait_group as NVVM ops: a group is per thread, whichever of its copies
  // were predicated off, so no token needs to reach the wait.
  void commit() { NVVM::CpAsyncCommitGroupOp::create(b_, loc_); }
  void wait(int64_t pending) { NVVM::CpAsyncWaitGroupOp::create(b_, loc_, uint32_t(pending)); }

  // The stored-tile origin (row, column) of operand `o` for K tile kt.
  std::pair<Value, Value> origin(const Operand& o, Value mn0, Value k0) { return o.kMajor ? std::pair{mn0, k0} : std::pair{k0, mn0}; }

  // A and B tiles of K tile `kt` into ring slot `slot` by cp.async: 16-byte chunks over the threads,
  // chunks past the stored rows or row ends zero-filled (their source clamped inside the operand).
  void copyTile(Value kt, Value slot) {
    Value k0 = ix_.mul(kt, p_.BK);
    copyOperand(p_.A, fn_.getArgument(0), ringA_, origin(p_.A, m0_, k0), slot, mRows_);
    copyOperand(p_.B, fn_.getArgument(1), ringB_, origin(p_.B, n0_, k0), slot, Value());
  }
  // `runtimeRows`: the operand's stored rows at run time (A's M), its rows bound instead of o.rows.
  void copyOperand(const Operand& o, Value src, Value ring, std::pair<Value, Value> org, Value slot, Value runtimeRows) {
    const int64_t perRow = o.tileC / 8, chunks = o.tileR * perRow, steps = ceilDiv(chunks, p_.T);
    // The tile grid's origin is a multiple of the tile: a dim the tile divides never runs over.
    const bool rowsFit = !runtimeRows && o.rows % o.tileR == 0, colsFit = o.pitch % o.tileC == 0;
    Value base = ix_.mul(batch_, o.rows * o.pitch);
    for (int64_t st = 0; st < steps; ++st) {
      Value ch = ix_.add(tid_, st * p_.T);
      gpuir::guarded(b_, loc_, (st + 1) * p_.T > chunks ? ix_.lt(ch, chunks) : Value(), [&] {
        Value r = ix_.div(ch, perRow), col = ix_.mul(ix_.rem(ch, perRow), 8);
        Value gr = ix_.add(org.first, r), gc = ix_.add(org.second, col);
        Value ok;
        if (runtimeRows) {
          ok = ix_.lt(gr, runtimeRows);
          gr = arith::MinSIOp::create(b_, loc_, gr, ix_.add(runtimeRows, -1));
        } else if (!rowsFit) {
          ok = ix_.lt(gr, o.rows);
          gr = ix_.min(gr, o.rows - 1);
        }
        if (!colsFit) {
          Value in = ix_.lt(gc, o.pitch);
          ok = ok ? ix_.band(ok, in) : in;
          gc = ix_.min(gc, o.pitch - 8);
        }
        Value srcElems = ok ? arith::SelectOp::create(b_, loc_, ok, ix_.c(8), ix_.c(0)).getResult() : Value();
        Value at = ix_.add(base, ix_.add(ix_.mul(gr, o.pitch), gc));
        copy16(ring, ValueRange{slot, r, col}, src, ValueRange{at}, srcElems);
      });
    }
  }

  // The 2-D tile of `ring` at `slot`.
  Value slotView(Value ring, const Operand& o, Value slot) {
    auto rt = cast<MemRefType>(ring.getType());
    auto t2 = cast<MemRefType>(memref::SubViewOp::inferRankReducedResultType(
        {o.tileR, o.ld}, rt, ArrayRef<int64_t>{ShapedType::kDynamic, 0, 0}, ArrayRef<int64_t>{1, o.tileR, o.ld},
        ArrayRef<int64_t>{1, 1, 1}));
    return memref::SubViewOp::create(b_, loc_, t2, ring, ArrayRef<OpFoldResult>{slot, b_.getIndexAttr(0), b_.getIndexAttr(0)},
                                     ArrayRef<OpFoldResult>{b_.getIndexAttr(1), b_.getIndexAttr(o.tileR), b_.getIndexAttr(o.ld)},
                                     ArrayRef<OpFoldResult>{b_.getIndexAttr(1), b_.getIndexAttr(1), b_.getIndexAttr(1)})
        .getResult();
  }

  // The warp's (TM/16) x (TN/8) mma.sync per 16-deep slice of the slot's tiles.
  void computeTile(Value slot, SmallVector<Value>& acc) {
    Value As = slotView(ringA_, p_.A, slot), Bs = slotView(ringB_, p_.B, slot);
    Value l8 = ix_.rem(lane_, 8), l8b = ix_.mul(ix_.rem(ix_.div(lane_, 8), 2), 8), l16 = ix_.mul(ix_.div(lane_, 16), 8);
    const int64_t NI = p_.TM / 16, NJ = p_.TN / 8;
    for (int64_t ks = 0; ks < p_.BK / 16; ++ks) {
      // A fragments (16 rows each): matrices (rows 0-7 | 8-15) x (k 0-7 | 8-15) in register order.
      std::vector<SmallVector<Value>> af;
      for (int64_t i = 0; i < NI; ++i) {
        Value mrow = ix_.add(wm_, i * 16);
        if (p_.A.kMajor)  // A [m][k]: lane rows m + l%8 + 8((l/8)%2), k + 8(l/16)
          af.push_back(mm_.ldmatrix(As, ix_.add(ix_.add(mrow, l8), l8b), ix_.add(l16, ks * 16), 4, false));
        else  // A [k][m], transposed per matrix: lane rows k + l%8 + 8(l/16), m + 8((l/8)%2)
          af.push_back(mm_.ldmatrix(As, ix_.add(ix_.add(l8, l16), ks * 16), ix_.add(mrow, l8b), 4, true));
      }
      // B fragments, two n8 tiles per ldmatrix.x4: registers (k 0-7, k 8-15) of tile 2j, then of 2j+1.
      std::vector<SmallVector<Value>> bf;
      for (int64_t j = 0; j < NJ / 2; ++j) {
        Value ncol = ix_.add(wn_, j * 16);
        if (p_.B.kMajor)  // B [n][k]: lane rows n + l%8 + 8(l/16), k + 8((l/8)%2)
          bf.push_back(mm_.ldmatrix(Bs, ix_.add(ix_.add(ncol, l8), l16), ix_.add(l8b, ks * 16), 4, false));
        else  // B [k][n], transposed per matrix: lane rows k + l%16, n + 8(l/16)
          bf.push_back(mm_.ldmatrix(Bs, ix_.add(ix_.add(l8, l8b), ks * 16), ix_.add(ncol, l16), 4, true));
      }
      for (int64_t i = 0; i < NI; ++i)
        for (int64_t j = 0; j < NJ; ++j) {
          const auto& b2 = bf[size_t(j / 2)];
          SmallVector<Value> bb = {b2[size_t(2 * (j % 2))], b2[size_t(2 * (j % 2) + 1)]};
          const size_t at = size_t((i * NJ + j) * 4);
          SmallVector<Value> d = mm_.mma(af[size_t(i)], bb, ArrayRef<Value>(acc).slice(at, 4));
          for (size_t q = 0; q < 4; ++q) acc[at + q] = d[q];
        }
    }
  }

  // Accumulator (row g | g+8, columns 2t, 2t+1) of each 16x8 tile into the staged f32 band `pass`
  // (rows pass * passRows ..): the warp's 8-row halves that fall in it.
  void stageAccumulators(Value staging, ValueRange acc, int64_t pass) {
    Value g = ix_.div(lane_, 4), t2 = ix_.mul(ix_.rem(lane_, 4), 2);
    auto v2 = VectorType::get({2}, b_.getF32Type());
    const int64_t NJ = p_.TN / 8;
    for (int64_t i = 0; i < p_.TM / 16; ++i)
      for (int64_t h = 0; h < 2; ++h) {
        Value half = ix_.add(wm_, i * 16 + 8 * h);
        Value inBand;
        if (p_.passes > 1)
          inBand = arith::CmpIOp::create(b_, loc_, arith::CmpIPredicate::eq, ix_.div(half, p_.passRows), ix_.c(pass));
        gpuir::guarded(b_, loc_, inBand, [&] {
          Value row = ix_.add(ix_.add(half, g), -pass * p_.passRows);
          for (int64_t j = 0; j < NJ; ++j) {
            const size_t at = size_t((i * NJ + j) * 4 + 2 * h);
            Value v = vector::FromElementsOp::create(b_, loc_, v2, ValueRange{acc[at], acc[at + 1]});
            vector::StoreOp::create(b_, loc_, v, staging, ValueRange{row, ix_.add(ix_.add(wn_, j * 8), t2)});
          }
        });
      }
  }

  OpBuilder& b_;
  Location loc_;
  const LanePlan& p_;
  const gemm::Epilogue& e_;
  func::FuncOp fn_;
  gpuir::Idx ix_;
  MmaOps mm_;
  Value tid_, lane_, wm_, wn_, m0_, n0_, batch_, dyn_, ringA_, ringB_;
  int sizesArg_ = -1;
  bool runtimeM_ = false;
  Value mRows_;  // runtime M (null: the compiled M)
};

const char* kNoMapSchedule =
    "module attributes {transform.with_named_sequence} {\n"
    "  transform.named_sequence @map_main(%root: !transform.any_op {transform.readonly}) {\n"
    "    transform.yield\n  }\n}\n";

}  // namespace

Expected<GpuPlan> buildGpuGemmLane(MLIRContext* ctx, const ir::Kernel& k, const GpuGemmConfig& c, const TargetDesc& t,
                                   const RuntimeDims& rt) {
  TESSERA_ASSIGN(ir::GemmInfo g, ir::analyzeGemm(k));
  TESSERA_ASSIGN(LanePlan p, lane::makePlan(g, c, t));
  GpuPlan plan;
  TESSERA_ASSIGN(plan.launch.runtime, gemm::planRuntime(k, g, rt, "mma-lane", p.BM, /*batchInGrid=*/true));
  plan.strategy = "mma-lane";
  plan.laneLevel = true;
  plan.launch.batches = 1;  // every batch in the grid's z
  // ---- host wrapper: A, B as they are (or packed), the epilogue's tensors, the output
  auto operand = [&](const std::string& name, const Operand& o, int64_t rows, int64_t cols, bool trans) {
    GpuArg a;
    a.tensor = gemm::userIndexOf(k, name);
    a.dtype = g.inType;
    a.kind = o.pack ? GpuArg::Kind::Packed : GpuArg::Kind::Tensor;
    a.rows = rows, a.cols = cols, a.prows = rows, a.pcols = o.pitch;
    a.transposed = trans;
    a.packBatches = o.pack ? p.batch : 1;
    return a;
  };
  std::vector<GpuArg>& args = plan.launch.args;
  args.push_back(operand(g.a, p.A, g.m, g.k, g.transA));
  args.back().rowsFollowM = rt.m;  // packed (K not a multiple of 8): M rows copied at run time
  args.push_back(operand(g.b, p.B, g.k, g.n, g.transB));
  OpBuilder b(ctx);
  gemm::Epilogue epi;
  std::vector<std::pair<Type, int64_t>> flat;
  gemm::planEpilogue(b, k, g, args, flat, epi);
  // ---- payload: func @kernel(A, B, epilogue tensors..., out) { gpu.launch ... }, all flat
  Location loc = b.getUnknownLoc();
  plan.module = ModuleOp::create(loc);
  Type inT = mlirType(b, g.inType);
  std::vector<Type> types = {MemRefType::get({p.batch * p.A.rows * p.A.pitch}, inT),
                             MemRefType::get({p.batch * p.B.rows * p.B.pitch}, inT)};
  for (const auto& [ty, n] : flat) types.push_back(MemRefType::get({n}, ty));
  const int sizesArg = rt.any() ? gemm::appendSizesArg(b, args, types) : -1;
  b.setInsertionPointToEnd(plan.module->getBody());
  auto fn = func::FuncOp::create(b, loc, kKernelSymbol, b.getFunctionType(types, {}));
  fn.addEntryBlock();
  KernelBuilder kb(b, fn, p, epi, sizesArg, rt.m);
  TESSERA_TRY(kb.build());
  plan.schedule = kNoMapSchedule;
  plan.hasPre = false;
  return plan;
}

}  // namespace tessera::codegen
