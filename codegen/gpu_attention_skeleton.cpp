// Owns the FlashAttention skeleton's loop, copies and launch (gpu_attention_skeleton.h).
#include "codegen/gpu_attention_skeleton.h"

#include <cmath>

#include "codegen/kernel_func.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace tessera::codegen {

using namespace mlir;

AttnModule::AttnModule(MLIRContext* ctx, GpuPlan& plan, const ir::Kernel& kernel, const AttnDims& d, const char* strategy,
                       bool laneLevel, bool withSizes)
    : b(ctx), loc(b.getUnknownLoc()) {
  plan.strategy = strategy;
  plan.laneLevel = laneLevel;
  plan.module = ModuleOp::create(loc);
  fn = createKernelFunc(b, *plan.module, kernel, &args, withSizes);
  q = args[d.spec.q], k = args[d.spec.k], v = args[d.spec.v], o = args[d.spec.o];
  if (withSizes) sizes = args[kSizesArg];
}

void runAttention(OpBuilder& b, Location loc, Value kbEnd, AttnFamily& f, Value kbUnmasked) {
  gpuir::Idx ix{b, loc};
  f.beforeLoop(kbEnd);
  SmallVector<Value> init = f.initState();
  bool masked = true;
  auto body = [&](Value kb, ValueRange state) {
    AttnBlock blk;
    blk.kb = kb;
    blk.masked = masked;
    f.stageIn(blk, kbEnd);
    f.scores(blk);
    f.softmax(blk, state);
    SmallVector<Value> next = f.accumulate(blk, state);
    f.stageOut(blk);
    return next;
  };
  if (init.empty()) {
    // State in workgroup memory: a plain loop.
    gpuir::forLoop(b, loc, ix.c(0), kbEnd, 1, [&](Value kb) { (void)body(kb, ValueRange{}); });
    f.afterLoop();
    f.store(ValueRange{});
    return;
  }
  auto blocks = [&](Value from, Value to, ValueRange state) {
    auto loop = scf::ForOp::create(b, loc, from, to, ix.c(1), state);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    SmallVector<Value> next = body(loop.getInductionVar(), loop.getRegionIterArgs());
    scf::YieldOp::create(b, loc, next);
    return SmallVector<Value>(loop.getResults());
  };
  SmallVector<Value> state = init;
  if (kbUnmasked) {
    masked = false;
    state = blocks(ix.c(0), kbUnmasked, state);
    masked = true;
  }
  state = blocks(kbUnmasked ? kbUnmasked : ix.c(0), kbEnd, state);
  f.afterLoop();
  f.store(state);
}

void runAttentionOverlapped(OpBuilder& b, Location loc, Value kbEnd, AttnFamily& f, Value kbUnmasked) {
  gpuir::Idx ix{b, loc};
  f.beforeLoop(kbEnd);
  SmallVector<Value> state = f.initState();
  const size_t n = state.size();
  // Block 0: S and its softmax (O is still zero: nothing to add).
  AttnBlock first;
  first.kb = ix.c(0);
  f.stageIn(first, kbEnd);
  f.issueBegin();
  f.issueScores(first);
  f.issueEnd(false);
  f.awaitScores(first, 0);
  f.softmax(first, state);
  SmallVector<Value> carried = f.rescale(first, state);
  for (Value v : f.carry(first)) carried.push_back(v);
  auto blocks = [&](Value from, Value to, bool masked, ValueRange in) {
    auto loop = scf::ForOp::create(b, loc, from, to, ix.c(1), in);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    ValueRange args = loop.getRegionIterArgs();
    SmallVector<Value> st(args.begin(), args.begin() + n);
    AttnBlock prev, blk;
    prev.kb = ix.add(loop.getInductionVar(), -1);
    f.uncarry(prev, args.drop_front(n));
    blk.kb = loop.getInductionVar();
    blk.masked = masked;
    f.stageIn(blk, kbEnd);
    f.issueBegin();
    f.issueScores(blk);
    Value o = f.issueAccumulate(prev, st);
    f.issueEnd(false);
    f.awaitScores(blk, 1);  // P·V of the previous block stays in flight through the softmax
    f.softmax(blk, st);
    st = f.awaitAccumulate(o, st);
    f.stageOut(prev);
    SmallVector<Value> next = f.rescale(blk, st);
    for (Value v : f.carry(blk)) next.push_back(v);
    scf::YieldOp::create(b, loc, next);
    return SmallVector<Value>(loop.getResults());
  };
  if (kbUnmasked) {
    Value mid = arith::MaxSIOp::create(b, loc, kbUnmasked, ix.c(1));
    carried = blocks(ix.c(1), mid, false, carried);
    carried = blocks(mid, kbEnd, true, carried);
  } else {
    carried = blocks(ix.c(1), kbEnd, true, carried);
  }
  // The last block's P·V.
  state.assign(carried.begin(), carried.begin() + n);
  AttnBlock last;
  last.kb = ix.add(kbEnd, -1);
  f.uncarry(last, ValueRange(carried).drop_front(n));
  f.issueBegin();
  Value o = f.issueAccumulate(last, state);
  f.issueEnd(true);
  state = f.awaitAccumulate(o, state);
  f.stageOut(last);
  f.afterLoop();
  f.store(state);
}

void forEachChunk(gpuir::Idx& ix, Value tid, int64_t T, int64_t rows, int64_t perRow,
                  const std::function<void(Value r, Value j, Value inRange)>& body) {
  const int64_t chunks = rows * perRow, steps = ceilDiv(chunks, T);
  for (int64_t st = 0; st < steps; ++st) {
    Value ch = ix.add(tid, st * T);
    Value inRange = (st + 1) * T > chunks ? ix.lt(ch, chunks) : Value();
    gpuir::guarded(ix.b, ix.loc, inRange, [&] {
      Value r = ix.div(ch, perRow), j = ix.rem(ch, perRow);
      body(r, j, inRange);
    });
  }
}

gpu::LaunchOp attnLaunch(OpBuilder& b, Location loc, const AttnDims& d, int64_t T, int64_t dynSmem) {
  gpuir::Idx ix{b, loc};
  if (dynSmem < 0) return gpu::LaunchOp::create(b, loc, ix.c(d.NQB), ix.c(d.H), ix.c(d.B), ix.c(T), ix.c(1), ix.c(1));
  return gpu::LaunchOp::create(b, loc, ix.c(d.NQB), ix.c(d.H), ix.c(d.B), ix.c(T), ix.c(1), ix.c(1),
                               arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(int32_t(dynSmem))));
}

AttnBlockIds enterAttnLaunch(OpBuilder& b, Location loc, gpu::LaunchOp launch, int64_t H, bool heaviestFirst) {
  b.setInsertionPointToStart(&launch.getBody().front());
  AttnBlockIds ids{launch.getBlockIds().x, launch.getBlockIds().y, launch.getBlockIds().z};
  if (heaviestFirst) {
    gpuir::Idx ix{b, loc};
    Value gx = launch.getGridSize().x;  // NQB, or fewer at a runtime length
    Value lin = arith::AddIOp::create(b, loc, ids.qb, arith::MulIOp::create(b, loc, ids.h, gx)).getResult();
    ids.h = ix.rem(lin, H);
    ids.qb = arith::SubIOp::create(b, loc, arith::SubIOp::create(b, loc, gx, ix.c(1)), ix.div(lin, H)).getResult();
  }
  return ids;
}

namespace {

// The transform module of a kernel built already mapped (lane-level): nothing to map.
std::string noMapSchedule() {
  return "module attributes {transform.with_named_sequence} {\n"
         "  transform.named_sequence @map_main(%root: !transform.any_op {transform.readonly}) {\n"
         "    transform.yield\n  }\n}\n";
}

}  // namespace

void closeAttnLaunch(OpBuilder& b, Location loc, gpu::LaunchOp launch, GpuPlan& plan) {
  gpu::TerminatorOp::create(b, loc);
  b.setInsertionPointAfter(launch);
  func::ReturnOp::create(b, loc);
  plan.schedule = noMapSchedule();
  plan.hasPre = false;
}

}  // namespace tessera::codegen
