// Owns the K/V staging schedule the NVIDIA attention families share (flash-mma, flash-wgmma's
// fa2): a cp.async ring of shared-memory slots, or plain copies between barriers.
#pragma once

#include <functional>

#include "codegen/gpu_attention_skeleton.h"
#include "codegen/gpu_loops.h"
#include "ir/ir.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace tessera::codegen {

// K/V blocks into shared memory: STAGES = 2 is a cp.async ring (block kb+1 copied into the other slot while kb is read, one group per block); STAGES = 1
// plain copies between barriers. The family says where a chunk goes: chunk(r, j, k0, put) calls
// put(dst, dstIndices, src, srcIndices) for K's and V's 8-element chunk j of key row k0 + r.
class KvRing {
 public:
  using Put = std::function<void(mlir::Value dst, mlir::ValueRange dstIdx, mlir::Value src, mlir::ValueRange srcIdx)>;
  using Chunk = std::function<void(mlir::Value stage, mlir::Value r, mlir::Value j, mlir::Value k0, const Put& put)>;
  KvRing(mlir::OpBuilder& b, mlir::Location loc, mlir::Value tid, int64_t T, int64_t BK, int64_t D, ir::ScalarType dtype,
         int64_t stages, Chunk chunk, std::function<void(mlir::Value stage)> prepare = {})
      : b_(b), loc_(loc), ix_{b, loc}, tid_(tid), T_(T), BK_(BK), D_(D), async_(stages == 2), chunk_(std::move(chunk)),
        prepare_(std::move(prepare)) {
    et_ = dtype == ir::ScalarType::BF16 ? mlir::Type(b.getBF16Type()) : mlir::Type(b.getF16Type());
  }
  bool async() const { return async_; }
  // Before the loop: block 0 into slot 0.
  void prologue() {
    if (async_) (void)copy(ix_.c(0), ix_.c(0), true);
  }
  // Block kb readable in the slot it returns.
  mlir::Value stageIn(mlir::Value kb, mlir::Value kbEnd) {
    mlir::Value stage = ix_.c(0);
    if (async_) {
      // The next block (or this one again at the end: a harmless copy) into the other stage, then
      // this block's group completes.
      stage = ix_.rem(kb, 2);
      mlir::Value next = mlir::arith::MinSIOp::create(b_, loc_, ix_.add(kb, 1), ix_.add(kbEnd, -1));
      mlir::Value group = copy(next, ix_.rem(ix_.add(kb, 1), 2), true);
      wait(group, 1);
      barrier();
    } else {
      barrier();
      (void)copy(kb, stage, false);
      barrier();
    }
    return stage;
  }
  // Nothing left in flight when the block ends (the last iteration's redundant copy).
  void drain() {
    if (!async_) return;
    auto tok = mlir::nvgpu::DeviceAsyncTokenType::get(b_.getContext());
    mlir::Value none = mlir::nvgpu::DeviceAsyncCreateGroupOp::create(b_, loc_, tok, mlir::ValueRange{}).getResult();
    wait(none, 0);
  }
  void barrier() { mlir::gpu::BarrierOp::create(b_, loc_); }

 private:
  // Rows past Skv repeat the last key (the family masks them in S). A thread past the chunks
  // copies nothing: a guarded cp.async's token joins no group (the commit covers every copy the
  // thread issued; copying chunk 0 again instead would be two threads writing the same shared
  // bytes unordered, a race however equal the values).
  mlir::Value copy(mlir::Value kb, mlir::Value stage, bool async) {
    using namespace mlir;
    SmallVector<Value> tokens;
    Value k0 = ix_.mul(kb, BK_);
    auto tok = nvgpu::DeviceAsyncTokenType::get(b_.getContext());
    if (prepare_) prepare_(stage);
    VectorType v8 = VectorType::get({8}, et_);
    forEachChunk(ix_, tid_, T_, BK_, D_ / 8, [&](Value r, Value j, Value inRange) {
      chunk_(stage, r, j, k0, [&](Value dst, ValueRange dstIdx, Value src, ValueRange srcIdx) {
        if (async) {
          Value t = nvgpu::DeviceAsyncCopyOp::create(b_, loc_, tok, dst, dstIdx, src, srcIdx, b_.getIndexAttr(8), Value(),
                                                     b_.getUnitAttr());
          if (!inRange) tokens.push_back(t);
        } else {
          Value v = vector::LoadOp::create(b_, loc_, v8, src, srcIdx);
          vector::StoreOp::create(b_, loc_, v, dst, dstIdx);
        }
      });
    });
    if (async) return Value(nvgpu::DeviceAsyncCreateGroupOp::create(b_, loc_, tok, tokens).getResult());
    return Value();
  }
  void wait(mlir::Value group, int64_t pending) {
    mlir::nvgpu::DeviceAsyncWaitOp::create(b_, loc_, group, b_.getI32IntegerAttr(int32_t(pending)));
  }

  mlir::OpBuilder& b_;
  mlir::Location loc_;
  gpuir::Idx ix_;
  mlir::Value tid_;
  int64_t T_, BK_, D_;
  bool async_;
  Chunk chunk_;
  std::function<void(mlir::Value stage)> prepare_;
  mlir::Type et_;
};

}  // namespace tessera::codegen
