// Owns the IR of the Hopper GEMM kernel (the plan is gpu_wgmma.h's), built with the OpBuilder at
// the mapped level from nvgpu ops (mbarrier, TMA, warpgroup.mma) and NVVM ops (setmaxnreg, named
// barriers, wait_group), after mlir-recipes/gpu-wgmma-tma (gemm_wgmma_tma_ws.mlir and its pitfalls):
// dynamic shared memory viewed as the ring, 3-D tensor maps (K or N, rows, batch) with 128B
// swizzle, descriptors generated against 2-D views of the same maps (nvgpu's generate.descriptor
// reads the leading byte offset off the map's first box dimension), the producer's loop guarded by
// the split's own K-tile count (no unguarded prologue: nothing is issued past it), the C tile staged
// through shared memory for a coalesced epilogue, and split-K reduced in parallel by the tile's blocks
// (a slice each, by whichever block arrives last on it). A persistent grid runs the same work items
// in a loop per block, the ring's position carried from one to the next.
#include <functional>
#include <map>
#include <string>

#include "codegen/expr_emitter.h"
#include "codegen/nvidia/gpu_wgmma.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace tessera::codegen::wgmma {

using namespace mlir;

namespace {

class KernelBuilder {
 public:
  KernelBuilder(OpBuilder& b, func::FuncOp fn, const Plan& p, const Epilogue& e)
      : b_(b), loc_(fn.getLoc()), p_(p), e_(e), fn_(fn), ctx_(b.getContext()) {
    f32_ = b.getF32Type();
    in_ = p.g.inType == ir::ScalarType::BF16 ? Type(b.getBF16Type()) : Type(b.getF16Type());
    wg_ = gpu::AddressSpaceAttr::get(ctx_, gpu::AddressSpace::Workgroup);
  }

  Status build() {
    b_.setInsertionPointToStart(&fn_.getBody().front());
    Value one = c(1);
    Value gx = p_.persistent ? c(p_.gridBlocks) : c(p_.tilesN), gy = p_.persistent ? one : c(p_.tilesM);
    Value gz = p_.persistent ? one : c(p_.batch * p_.splitK);
    Value dyn = arith::ConstantOp::create(b_, loc_, b_.getI32IntegerAttr(int32_t(p_.dynamicBytes)));
    auto launch = gpu::LaunchOp::create(b_, loc_, gx, gy, gz, c(p_.threads), one, one, dyn);
    func::ReturnOp::create(b_, loc_);
    Block& body = launch.getBody().front();
    b_.setInsertionPointToStart(&body);
    gpu::TerminatorOp::create(b_, loc_);
    b_.setInsertionPointToStart(&body);
    tid_ = launch.getThreadIds().x;
    block_ = launch.getBlockIds().x;
    if (!p_.persistent) setTile(block_, launch.getBlockIds().y, launch.getBlockIds().z);
    dyn_ = gpu::DynamicSharedMemoryOp::create(b_, loc_, MemRefType::get({ShapedType::kDynamic}, b_.getI8Type(), MemRefLayoutAttrInterface(), wg_));
    tmA_ = tensorMap(2, {1, p_.BM, kBK});
    tmB_ = tensorMap(3, {1, kBK, kBoxN});
    auto barT = nvgpu::MBarrierGroupType::get(ctx_, wg_, unsigned(p_.stages));
    full_ = nvgpu::MBarrierCreateOp::create(b_, loc_, barT);
    empty_ = nvgpu::MBarrierCreateOp::create(b_, loc_, barT);
    // Thread 0 initialises the ring's barriers: a slot is full after the producer's one arrival and
    // its bytes; empty after one arrival of every consumer warp.
    ifThen(eq(tid_, c(0)), [&] {
      for (int64_t s = 0; s < p_.stages; ++s) {
        nvgpu::MBarrierInitOp::create(b_, loc_, full_, c(1), c(s), Value());
        nvgpu::MBarrierInitOp::create(b_, loc_, empty_, c(4 * p_.consumers), c(s), Value());
      }
      NVVM::FenceMbarrierInitOp::create(b_, loc_);
    });
    gpu::BarrierOp::create(b_, loc_);
    Status st;
    auto role = scf::IfOp::create(b_, loc_, eq(div(tid_, 128), c(p_.consumers)), /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard g(b_);
      b_.setInsertionPoint(role.thenBlock()->getTerminator());
      producer();
      b_.setInsertionPoint(role.elseBlock()->getTerminator());
      st = consumer();
    }
    return st;
  }

 private:
  // ---- small builders
  Value c(int64_t v) { return arith::ConstantIndexOp::create(b_, loc_, v); }
  Value ci32(int64_t v) { return arith::ConstantOp::create(b_, loc_, b_.getI32IntegerAttr(int32_t(v))); }
  Value add(Value x, Value y) { return arith::AddIOp::create(b_, loc_, x, y); }
  Value sub(Value x, Value y) { return arith::SubIOp::create(b_, loc_, x, y); }
  Value mul(Value x, int64_t v) { return v == 1 ? x : arith::MulIOp::create(b_, loc_, x, c(v)).getResult(); }
  Value mul(Value x, Value y) { return arith::MulIOp::create(b_, loc_, x, y); }
  Value div(Value x, int64_t v) { return v == 1 ? x : arith::DivUIOp::create(b_, loc_, x, c(v)).getResult(); }
  Value rem(Value x, int64_t v) { return v == 1 ? c(0) : arith::RemUIOp::create(b_, loc_, x, c(v)).getResult(); }
  Value eq(Value x, Value y) { return arith::CmpIOp::create(b_, loc_, arith::CmpIPredicate::eq, x, y); }
  Value ult(Value x, Value y) { return arith::CmpIOp::create(b_, loc_, arith::CmpIPredicate::ult, x, y); }
  Value uge(Value x, Value y) { return arith::CmpIOp::create(b_, loc_, arith::CmpIPredicate::uge, x, y); }
  Value band(Value x, Value y) { return arith::AndIOp::create(b_, loc_, x, y); }
  Value parity(Value round) { return arith::IndexCastOp::create(b_, loc_, b_.getI1Type(), rem(round, 2)); }
  void ifThen(Value cond, const std::function<void()>& body) {
    auto op = scf::IfOp::create(b_, loc_, cond, false);
    OpBuilder::InsertionGuard g(b_);
    b_.setInsertionPoint(op.thenBlock()->getTerminator());
    body();
  }
  void forLoop(Value lb, Value ub, const std::function<void(Value)>& body) {
    auto op = scf::ForOp::create(b_, loc_, lb, ub, c(1));
    OpBuilder::InsertionGuard g(b_);
    b_.setInsertionPoint(op.getBody()->getTerminator());
    body(op.getInductionVar());
  }
  MemRefType smem(ArrayRef<int64_t> shape, Type et) { return MemRefType::get(shape, et, MemRefLayoutAttrInterface(), wg_); }
  Value view(int64_t offset, MemRefType t) { return view(c(offset), t); }
  Value view(Value offset, MemRefType t) { return memref::ViewOp::create(b_, loc_, t, dyn_, offset, ValueRange{}); }
  // bar.sync 1, consumers x 128: the consumer warpgroups only (the producer's threads are gone).
  void consumerBarrier() {
    NVVM::BarrierOp::create(b_, loc_, Type(), ci32(1), ci32(128 * p_.consumers), NVVM::BarrierReductionAttr(), Value());
  }
  nvgpu::TensorMapDescriptorType mapType(ArrayRef<int64_t> box) {
    return nvgpu::TensorMapDescriptorType::get(ctx_, smem(box, in_), nvgpu::TensorMapSwizzleKind::SWIZZLE_128B,
                                               nvgpu::TensorMapL2PromoKind::L2PROMO_256B, nvgpu::TensorMapOOBKind::OOB_ZERO,
                                               nvgpu::TensorMapInterleaveKind::INTERLEAVE_NONE);
  }
  // The tensor map argument `arg` (a 128-byte buffer in device memory) as a map of `box`.
  Value tensorMap(unsigned arg, ArrayRef<int64_t> box) {
    Value base = memref::ExtractAlignedPointerAsIndexOp::create(b_, loc_, fn_.getArgument(arg));
    Value i = arith::IndexCastOp::create(b_, loc_, b_.getI64Type(), base);
    Value ptr = LLVM::IntToPtrOp::create(b_, loc_, LLVM::LLVMPointerType::get(ctx_), i);
    mapPtr_[arg] = ptr;
    return UnrealizedConversionCastOp::create(b_, loc_, TypeRange{mapType(box)}, ValueRange{ptr}).getResult(0);
  }
  Value asMap(unsigned arg, ArrayRef<int64_t> box) {
    return UnrealizedConversionCastOp::create(b_, loc_, TypeRange{mapType(box)}, ValueRange{mapPtr_[arg]}).getResult(0);
  }

  // The work item at grid position (bx, by, bz): its batch, K range and output tile.
  void setTile(Value bx, Value by, Value bz) {
    batch_ = div(bz, p_.splitK);
    split_ = rem(bz, p_.splitK);
    n0_ = mul(bx, p_.BN);
    m0_ = mul(by, p_.BM);
    tile_ = add(mul(by, p_.tilesN), bx);
    // This split's K tiles: [split * KTs, min(KT, split * KTs + KTs)).
    kBegin_ = mul(split_, p_.KTs);
    Value kEnd = arith::MinSIOp::create(b_, loc_, add(kBegin_, c(p_.KTs)), c(p_.KT));
    nk_ = sub(kEnd, kBegin_);
  }

  // `body(ring)` for each of this block's work items, `ring` being the ring steps (K tiles) the
  // block ran before it: one item (the block's own) unless persistent, else items block, block +
  // gridBlocks, ... in launch order (tile x fastest, then tile y, then batch x SPLITK). The ring
  // position is carried across items (a 32-bit count), so each slot's mbarrier phases continue
  // where the last item left them.
  Status forEachTile(const std::function<Status(Value ring)>& body) {
    if (!p_.persistent) return body(c(0));
    auto loop = scf::ForOp::create(b_, loc_, block_, c(p_.work), c(p_.gridBlocks), ValueRange{ci32(0)});
    OpBuilder::InsertionGuard g(b_);
    b_.setInsertionPointToStart(loop.getBody());
    Value w = loop.getInductionVar(), ring = loop.getRegionIterArgs()[0];
    setTile(rem(w, p_.tilesN), rem(div(w, p_.tilesN), p_.tilesM), div(w, p_.tilesN * p_.tilesM));
    Status st = body(arith::IndexCastOp::create(b_, loc_, b_.getIndexType(), ring));
    Value next = arith::AddIOp::create(b_, loc_, ring, arith::IndexCastOp::create(b_, loc_, b_.getI32Type(), nk_));
    scf::YieldOp::create(b_, loc_, next);
    return st;
  }

  // ---- producer: one thread keeps the ring full
  void producer() {
    NVVM::SetMaxRegisterOp::create(b_, loc_, uint32_t(kProducerRegs), NVVM::SetMaxRegisterAction::decrease);
    ifThen(eq(tid_, c(128 * p_.consumers)), [&] {
      nvgpu::TmaPrefetchOp::create(b_, loc_, tmA_, Value());
      nvgpu::TmaPrefetchOp::create(b_, loc_, tmB_, Value());
      (void)forEachTile([&](Value ring) {
        forLoop(c(0), nk_, [&](Value i) {
          Value step = add(ring, i), slot = rem(step, p_.stages), round = div(step, p_.stages);
          // A slot's second and later fills wait until every consumer warp released its last use.
          ifThen(uge(step, c(p_.stages)), [&] {
            nvgpu::MBarrierTryWaitParityOp::create(b_, loc_, empty_, parity(sub(round, c(1))), c(10000000), slot);
          });
          nvgpu::MBarrierArriveExpectTxOp::create(b_, loc_, full_, c(p_.txBytes()), slot, Value());
          Value k0 = mul(add(kBegin_, i), kBK);
          Value base = mul(slot, p_.stageBytes);
          Value a = view(base, smem({1, p_.BM, kBK}, in_));
          nvgpu::TmaAsyncLoadOp::create(b_, loc_, a, full_, tmA_, ValueRange{k0, m0_, batch_}, slot, Value(), Value());
          for (int64_t q = 0; q < p_.BN / kBoxN; ++q) {
            Value bq = view(add(base, c(p_.BM * kBK * p_.elementBytes + q * kBoxN * kBK * p_.elementBytes)), smem({1, kBK, kBoxN}, in_));
            nvgpu::TmaAsyncLoadOp::create(b_, loc_, bq, full_, tmB_, ValueRange{add(n0_, c(q * kBoxN)), k0, batch_}, slot, Value(), Value());
          }
        });
        return Status{};
      });
    });
  }

  // ---- consumers: wgmma over the ring, then the C tile through shared memory
  Status consumer() {
    NVVM::SetMaxRegisterOp::create(b_, loc_, uint32_t(p_.consumerRegs), NVVM::SetMaxRegisterAction::increase);
    const int64_t wgCols = p_.BN / p_.TN;
    Value wgi = div(tid_, 128);
    Value wr = div(wgi, wgCols), wc = rem(wgi, wgCols);
    Value lane0 = eq(rem(tid_, 32), c(0));
    auto accT = nvgpu::WarpgroupAccumulatorType::get(ctx_, VectorType::get({p_.TM, p_.TN}, f32_));
    auto aT = smem({p_.TM, kBK}, in_), bT = smem({kBK, p_.TN}, in_);
    auto dAT = nvgpu::WarpgroupMatrixDescriptorType::get(ctx_, aT), dBT = nvgpu::WarpgroupMatrixDescriptorType::get(ctx_, bT);
    Value descMapA = asMap(2, {p_.BM, kBK}), descMapB = asMap(3, {kBK, kBoxN});
    return forEachTile([&](Value ring) { return consumeTile(ring, wr, wc, lane0, accT, aT, bT, dAT, dBT, descMapA, descMapB); });
  }

  // One work item: its K tiles from ring position `ring` on, then its C tile.
  Status consumeTile(Value ring, Value wr, Value wc, Value lane0, nvgpu::WarpgroupAccumulatorType accT, MemRefType aT,
                     MemRefType bT, nvgpu::WarpgroupMatrixDescriptorType dAT, nvgpu::WarpgroupMatrixDescriptorType dBT,
                     Value descMapA, Value descMapB) {
    Value acc0 = nvgpu::WarpgroupMmaInitAccumulatorOp::create(b_, loc_, accT);
    auto loop = scf::ForOp::create(b_, loc_, c(0), nk_, c(1), ValueRange{acc0});
    {
      OpBuilder::InsertionGuard g(b_);
      b_.setInsertionPointToStart(loop.getBody());
      Value i = loop.getInductionVar();
      Value step = add(ring, i), slot = rem(step, p_.stages), round = div(step, p_.stages);
      nvgpu::MBarrierTryWaitParityOp::create(b_, loc_, full_, parity(round), c(10000000), slot);
      Value base = mul(slot, p_.stageBytes);
      Value a = view(add(base, mul(wr, p_.TM * kBK * p_.elementBytes)), aT);
      Value bv = view(add(base, add(c(p_.BM * kBK * p_.elementBytes), mul(wc, (p_.TN / kBoxN) * kBoxN * kBK * p_.elementBytes))), bT);
      Value da = nvgpu::WarpgroupGenerateDescriptorOp::create(b_, loc_, dAT, a, descMapA);
      Value db = nvgpu::WarpgroupGenerateDescriptorOp::create(b_, loc_, dBT, bv, descMapB);
      // One commit group per K step; waiting for all but the newest retires the previous one, whose
      // slot is then released (one arrival per consumer warp).
      Value d = nvgpu::WarpgroupMmaOp::create(b_, loc_, accT, da, db, uint64_t(1), UnitAttr(), b_.getUnitAttr(),
                                              loop.getRegionIterArgs()[0]);
      ifThen(band(uge(i, c(1)), lane0), [&] {
        nvgpu::MBarrierArriveOp::create(b_, loc_, empty_, rem(sub(step, c(1)), p_.stages));
      });
      scf::YieldOp::create(b_, loc_, d);
    }
    NVVM::WgmmaWaitGroupSyncOp::create(b_, loc_, uint64_t(0));
    // Persistent: the item's last slot is released too (its wgmma retired), so the producer fills
    // the next item's K tiles while this one's C tile is staged and stored.
    if (p_.persistent)
      ifThen(lane0, [&] { nvgpu::MBarrierArriveOp::create(b_, loc_, empty_, rem(add(ring, sub(nk_, c(1))), p_.stages)); });
    // Every consumer is past its last wgmma before the ring is overwritten by the C tile (past the
    // ring when persistent: then past the last item's epilogue reads of it).
    consumerBarrier();
    const int64_t rowF = p_.BN + kStagePad;
    Value stage = view(p_.stagingOffset, smem({p_.BM, rowF}, f32_));
    stageAccumulators(loop.getResult(0), stage, mul(wr, p_.TM), mul(wc, p_.TN));
    consumerBarrier();
    return epilogue(stage);
  }

  // The accumulator into the staged tile at (row0, col0), a pair of adjacent columns per 8-byte
  // store: in each half-warp phase lanes g = 0..3, t = 0..3 write words 8g + 2t and + 1 of rows
  // BN + kStagePad floats apart (4 x 8 banks apart), so the 16 lanes cover the 32 banks once.
  // nvgpu's warpgroup.mma.store writes the same fragment as scalar stores, whose 32 lanes per
  // request put rows g and g + 4 on the same banks (2-way, whatever the row pad). The fragment is
  // read as the NVVM lowering holds it: one struct of TN/2 f32 per m64 step, the PTX ISA's wgmma D
  // layout (register 4j + 2h + c at row 16 x warp + lane/4 + 8h, column 8j + 2 x (lane%4) + c).
  void stageAccumulators(Value acc, Value stage, Value row0, Value col0) {
    auto inner = LLVM::LLVMStructType::getLiteral(ctx_, SmallVector<Type>(size_t(p_.TN / 2), f32_));
    auto outer = LLVM::LLVMStructType::getLiteral(ctx_, SmallVector<Type>(size_t(p_.TM / 64), inner));
    Value frag = UnrealizedConversionCastOp::create(b_, loc_, TypeRange{outer}, ValueRange{acc}).getResult(0);
    Value lane = rem(tid_, 32);
    Value row = add(row0, add(mul(rem(div(tid_, 32), 4), 16), div(lane, 4)));
    Value col = add(col0, mul(rem(lane, 4), 2));
    auto v2 = VectorType::get({2}, f32_);
    for (int64_t m = 0; m < p_.TM / 64; ++m)
      for (int64_t j = 0; j < p_.TN / 8; ++j)
        for (int64_t h = 0; h < 2; ++h) {
          const int64_t r = 4 * j + 2 * h;
          Value x0 = LLVM::ExtractValueOp::create(b_, loc_, frag, ArrayRef<int64_t>{m, r});
          Value x1 = LLVM::ExtractValueOp::create(b_, loc_, frag, ArrayRef<int64_t>{m, r + 1});
          Value v = vector::FromElementsOp::create(b_, loc_, v2, ValueRange{x0, x1});
          vector::StoreOp::create(b_, loc_, v, stage, ValueRange{add(row, c(64 * m + 8 * h)), add(col, c(8 * j))});
        }
  }

  // Element e (= r * BN + col of the tile) of this block's own staged tile.
  Value staged(Value stage, Value r, Value col) { return memref::LoadOp::create(b_, loc_, stage, ValueRange{r, col}); }

  Status epilogue(Value stage) {
    const int64_t nt = 128 * p_.consumers, tileElems = p_.BM * p_.BN;
    if (p_.splitK == 1) return finish([&](Value, Value r, Value col) { return staged(stage, r, col); });
    // Split-K, reduced in parallel by the tile's blocks: the tile is cut into SPLITK slices, each
    // with its own arrival counter. Block `split` writes its partial of slice split, split + 1, ...
    // (mod SPLITK), arriving on each slice's counter after its part of it is written; the block
    // that arrives last on a slice sums that slice's partials in split order (the same sum whichever
    // block it is) and runs its epilogue. Blocks that finish their K ranges together (one wave)
    // each arrive last on a different slice: SPLITK blocks reduce a tile, a slice each, instead of
    // one block summing the whole tile while the others have left. Nobody waits for anybody.
    const int64_t sliceElems = tileElems / p_.splitK;  // a multiple of nt: TM x BN / (128 x SPLITK) >= 2 steps
    Value partials = fn_.getArgument(unsigned(e_.partialsArg)), counters = fn_.getArgument(unsigned(e_.countersArg));
    Value tileIndex = add(mul(batch_, p_.tilesM * p_.tilesN), tile_);
    Value tileBase = mul(tileIndex, p_.splitK);
    Value mineBase = mul(add(tileBase, split_), tileElems);
    Value flag = view(p_.flagOffset, smem({4}, b_.getI32Type()));
    Status st;
    forLoop(c(0), c(p_.splitK), [&](Value j) {
      Value slice = rem(add(split_, j), p_.splitK);
      Value sliceBegin = mul(slice, sliceElems);
      forLoop(c(0), c(sliceElems / nt), [&](Value it) {
        Value e = add(sliceBegin, add(mul(it, nt), tid_));
        Value r = div(e, p_.BN), col = rem(e, p_.BN);
        memref::StoreOp::create(b_, loc_, staged(stage, r, col), partials, ValueRange{add(mineBase, e)});
      });
      NVVM::MembarOp::create(b_, loc_, NVVM::MemScopeKind::GPU);
      consumerBarrier();
      ifThen(eq(tid_, c(0)), [&] {
        Value old = memref::AtomicRMWOp::create(b_, loc_, arith::AtomicRMWKind::addi, ci32(1), counters,
                                                ValueRange{add(tileBase, slice)});
        memref::StoreOp::create(b_, loc_, old, flag, ValueRange{c(0)});
      });
      consumerBarrier();
      Value arrived = memref::LoadOp::create(b_, loc_, flag, ValueRange{c(0)});
      Value last = arith::CmpIOp::create(b_, loc_, arith::CmpIPredicate::eq, arrived, ci32(p_.splitK - 1));
      ifThen(last, [&] {
        NVVM::MembarOp::create(b_, loc_, NVVM::MemScopeKind::GPU);
        Status s = gemm::emitTileStores(b_, loc_, fn_, p_.g, e_, tid_, nt, p_.BM, p_.BN, batch_, m0_, n0_,
                                        [&](Value e, Value, Value) {
                                          Value sum;
                                          for (int64_t z = 0; z < p_.splitK; ++z) {
                                            Value v = memref::LoadOp::create(b_, loc_, partials,
                                                                             ValueRange{add(mul(add(tileBase, c(z)), tileElems), e)});
                                            sum = sum ? Value(arith::AddFOp::create(b_, loc_, sum, v)) : v;
                                          }
                                          return sum;
                                        },
                                        Value(), sliceBegin, sliceElems);
        if (!s.ok() && st.ok()) st = std::move(s);
      });
      // The flag is rewritten by the next slice's arrival only after every thread has read it.
      consumerBarrier();
    });
    return st;
  }

  // The epilogue over the tile, one element per consumer thread and step (a warp covers 32
  // consecutive columns of a row: coalesced stores), guarded by the problem's edges.
  Status finish(const std::function<Value(Value e, Value r, Value col)>& accOf) {
    return gemm::emitTileStores(b_, loc_, fn_, p_.g, e_, tid_, 128 * p_.consumers, p_.BM, p_.BN, batch_, m0_, n0_, accOf);
  }

  OpBuilder& b_;
  Location loc_;
  const Plan& p_;
  const Epilogue& e_;
  func::FuncOp fn_;
  MLIRContext* ctx_;
  Type f32_, in_;
  Attribute wg_;
  Value tid_, block_, batch_, split_, n0_, m0_, tile_, kBegin_, nk_, dyn_, tmA_, tmB_, full_, empty_;
  std::map<unsigned, Value> mapPtr_;
};

}  // namespace

Status buildKernel(OpBuilder& b, func::FuncOp fn, const Plan& p, const Epilogue& e) {
  KernelBuilder kb(b, fn, p, e);
  return kb.build();
}

}  // namespace tessera::codegen::wgmma
