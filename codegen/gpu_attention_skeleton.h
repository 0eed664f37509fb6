// Owns the one FlashAttention forward skeleton the GPU attention strategies are built on: the
// problem every matrix family sees (GQA head mapping, query and key blocks, the causal offset, the
// score scale), the key-block loop with its online-softmax state, the cooperative chunk copies,
// the launch around a lane-level kernel, and the step interface a family fills in.
//
//   open:   the family's launch, Q tile, and state (O = 0, m = -1e30, l = 0)
//   for kb < kbEnd (causal: up to the block holding the diagonal):
//     stageIn   K/V block kb where the products read it (its staging schedule)
//     scores    S = Q·Kᵀ of the block, in the family's fragment layout
//     softmax   scale·log2e, keys past Skv / right of the diagonal masked, row maxima over the
//               lanes that share a row, p = 2^(s - m), alpha = 2^(m_old - m), l = l·alpha + Σp
//     accumulate O = O·alpha + P·V
//     stageOut  what the schedule does once the block is read (release, refill, barrier)
//   store:  O / l for rows < Sq
//
// FlashAttention-3's intra-warpgroup overlap is the same steps in another order
// (runAttentionOverlapped), for a family whose products are asynchronous: S of block j is issued
// with P·V of block j - 1 behind it, the softmax of block j runs while that P·V is in flight, and
// O is rescaled once it retired:
//
//   block 0:  stageIn, issue S, await S, softmax, rescale
//   for 1 <= j < kbEnd:
//             stageIn j; issue S(j) and P(j-1)·V(j-1); await S(j) (P·V still in flight);
//             softmax j; await P·V; stageOut j - 1; rescale O by alpha(j)
//   last:     issue and await P·V of the last block; stageOut
//
// Each issue is bracketed by the family's issueBegin/issueEnd, where ping-pong warpgroups take
// turns (named barriers), so one warpgroup's softmax runs under the other's products.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "codegen/gpu_loops.h"
#include "codegen/gpu_plans.h"
#include "codegen/gpu_strategies.h"
#include "ir/ir.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace tessera::codegen {

// One key block as it passes through a family's steps.
struct AttnBlock {
  mlir::Value kb, stage, k0;           // block index, the slot its K/V sit in, its first key
  mlir::SmallVector<mlir::Value> s;    // S = Q·Kᵀ fragments in the family's layout
  mlir::SmallVector<mlir::Value> m, alpha, l;  // per owned row: new max, 2^(m_old - m), new sum
  mlir::SmallVector<mlir::Value> p;    // 2^(s - m) (masked: 0) in the layout P·V reads
  bool masked = true;                  // false: every key of the block is visible to every row
  mlir::Value sInFlight;               // overlapped: S's accumulators until awaitScores
};

// A matrix family's steps of the skeleton (SIMT, mma.sync, wgmma, MFMA): how S is computed, which
// rows a thread's fragments belong to, how O += P·V is issued, where K/V are staged.
class AttnFamily {
 public:
  virtual ~AttnFamily() = default;
  // Before the loop: the staging schedule's prologue (the first block's copies).
  virtual void beforeLoop(mlir::Value kbEnd) {}
  // The state carried in registers from block to block (O, then each owned row's m and l); none
  // when the family keeps it in workgroup memory.
  virtual mlir::SmallVector<mlir::Value> initState() = 0;
  // Makes block kb readable; sets blk.stage (and blk.k0 where the family wants it first).
  virtual void stageIn(AttnBlock& blk, mlir::Value kbEnd) = 0;
  virtual void scores(AttnBlock& blk) = 0;
  virtual void softmax(AttnBlock& blk, mlir::ValueRange state) = 0;
  // O = O·alpha + P·V: the next state (empty for a family without carried state).
  virtual mlir::SmallVector<mlir::Value> accumulate(AttnBlock& blk, mlir::ValueRange state) = 0;
  virtual void stageOut(AttnBlock& blk) {}
  virtual void afterLoop() {}  // the schedule's drain
  // O / l for rows < Sq from the final state.
  virtual void store(mlir::ValueRange state) = 0;

  // ---- The overlapped order's steps (runAttentionOverlapped); unused by runAttention.
  // Around each point where the products are issued (`last`: the final P·V).
  virtual void issueBegin() {}
  virtual void issueEnd(bool last) {}
  // S = Q·Kᵀ of `blk` issued, its accumulators in blk.sInFlight.
  virtual void issueScores(AttnBlock& blk) {}
  // O + P·V of `prev` issued (O from `state`); returns O in flight.
  virtual mlir::Value issueAccumulate(AttnBlock& prev, mlir::ValueRange state) { return {}; }
  // Until at most `pending` later issues are in flight; then blk.s from blk.sInFlight.
  virtual void awaitScores(AttnBlock& blk, int pending) {}
  // Until every issue retired: `state` with O replaced by `oInFlight`.
  virtual mlir::SmallVector<mlir::Value> awaitAccumulate(mlir::Value oInFlight, mlir::ValueRange state) { return {}; }
  // O·alpha with blk's m and l: the state after block blk's softmax.
  virtual mlir::SmallVector<mlir::Value> rescale(AttnBlock& blk, mlir::ValueRange state) { return {}; }
  // What of block blk its P·V needs one iteration later (P in the form the product reads, the
  // slot), carried by the loop, and back.
  virtual mlir::SmallVector<mlir::Value> carry(AttnBlock& blk) { return {}; }
  virtual void uncarry(AttnBlock& blk, mlir::ValueRange carried) {}
};

// A family's steps as functions, for a builder whose steps share its locals (null: nothing to do;
// initState, stageIn, scores, softmax, accumulate and store are required).
struct AttnSteps : AttnFamily {
  std::function<void(mlir::Value kbEnd)> before;
  std::function<mlir::SmallVector<mlir::Value>()> init;
  std::function<void(AttnBlock&, mlir::Value kbEnd)> in;
  std::function<void(AttnBlock&)> s;
  std::function<void(AttnBlock&, mlir::ValueRange)> sm;
  std::function<mlir::SmallVector<mlir::Value>(AttnBlock&, mlir::ValueRange)> acc;
  std::function<void(AttnBlock&)> out;
  std::function<void()> after;
  std::function<void(mlir::ValueRange)> st;
  // The overlapped order's steps (null: nothing to do; runAttentionOverlapped needs the rest).
  std::function<void()> issueBeg;
  std::function<void(bool last)> issueFin;
  std::function<void(AttnBlock&)> issueS;
  std::function<mlir::Value(AttnBlock&, mlir::ValueRange)> issueAcc;
  std::function<void(AttnBlock&, int)> awaitS;
  std::function<mlir::SmallVector<mlir::Value>(mlir::Value, mlir::ValueRange)> awaitAcc;
  std::function<mlir::SmallVector<mlir::Value>(AttnBlock&, mlir::ValueRange)> resc;
  std::function<mlir::SmallVector<mlir::Value>(AttnBlock&)> keep;
  std::function<void(AttnBlock&, mlir::ValueRange)> restore;

  void beforeLoop(mlir::Value kbEnd) override { if (before) before(kbEnd); }
  mlir::SmallVector<mlir::Value> initState() override { return init(); }
  void stageIn(AttnBlock& blk, mlir::Value kbEnd) override { in(blk, kbEnd); }
  void scores(AttnBlock& blk) override { s(blk); }
  void softmax(AttnBlock& blk, mlir::ValueRange state) override { sm(blk, state); }
  mlir::SmallVector<mlir::Value> accumulate(AttnBlock& blk, mlir::ValueRange state) override { return acc(blk, state); }
  void stageOut(AttnBlock& blk) override { if (out) out(blk); }
  void afterLoop() override { if (after) after(); }
  void store(mlir::ValueRange state) override { st(state); }
  void issueBegin() override { if (issueBeg) issueBeg(); }
  void issueEnd(bool last) override { if (issueFin) issueFin(last); }
  void issueScores(AttnBlock& blk) override { issueS(blk); }
  mlir::Value issueAccumulate(AttnBlock& prev, mlir::ValueRange state) override { return issueAcc(prev, state); }
  void awaitScores(AttnBlock& blk, int pending) override { awaitS(blk, pending); }
  mlir::SmallVector<mlir::Value> awaitAccumulate(mlir::Value o, mlir::ValueRange state) override { return awaitAcc(o, state); }
  mlir::SmallVector<mlir::Value> rescale(AttnBlock& blk, mlir::ValueRange state) override { return resc(blk, state); }
  mlir::SmallVector<mlir::Value> carry(AttnBlock& blk) override { return keep(blk); }
  void uncarry(AttnBlock& blk, mlir::ValueRange carried) override { restore(blk, carried); }
};

// The key-block loop over [0, kbEnd) and the store after it, at the builder's insertion point.
// With `kbUnmasked` (at most kbEnd): two loops, the blocks below it built with AttnBlock::masked
// false (no key of theirs is past Skv or right of the diagonal for any row of the query block, so
// the softmax skips the masks), the rest masked; the state passes from one loop to the next.
void runAttention(mlir::OpBuilder& b, mlir::Location loc, mlir::Value kbEnd, AttnFamily& f,
                  mlir::Value kbUnmasked = {});
// The same in the overlapped order (see the top of this file): S of each block issued with the
// previous block's P·V, kbEnd >= 1 (every query block sees a key: causal needs Sq <= Skv), the
// state in registers. Block 0 is built masked; with `kbUnmasked`, blocks 1..kbUnmasked-1 are not.
void runAttentionOverlapped(mlir::OpBuilder& b, mlir::Location loc, mlir::Value kbEnd, AttnFamily& f,
                            mlir::Value kbUnmasked = {});

// The cooperative copy of `rows` rows of `perRow` chunks by the T threads of a block: thread tid
// takes chunks tid, tid + T, ...; body(r, j, inRange) for row r, chunk j, under `inRange` (null
// where every thread has a chunk) — the guard is already open around the body.
void forEachChunk(gpuir::Idx& ix, mlir::Value tid, int64_t T, int64_t rows, int64_t perRow,
                  const std::function<void(mlir::Value r, mlir::Value j, mlir::Value inRange)>& body);

// A family's plan of kernel `k`'s attention under config `c` (`make` checks it; no IR built).
template <class Plan>
Expected<Plan> planAttn(const ir::Kernel& k, const GpuAttentionConfig& c, const TargetDesc& t,
                        Expected<Plan> (*make)(const ir::AttentionSpec&, const GpuAttentionConfig&, const TargetDesc&)) {
  TESSERA_ASSIGN(ir::AttentionInfo info, ir::analyzeAttention(k));
  return make(info.spec, c, t);
}

// The module a family builds into: `plan` named `strategy` (lane-level or not), its module holding
// the kernel function (with the runtime sizes argument when `sizes`), the function's arguments
// (Q, K, V, O of `d.spec`; the sizes), the builder inside its body.
struct AttnModule {
  AttnModule(mlir::MLIRContext* ctx, GpuPlan& plan, const ir::Kernel& k, const AttnDims& d, const char* strategy,
             bool laneLevel, bool sizes = false);
  mlir::OpBuilder b;
  mlir::Location loc;
  std::map<std::string, mlir::Value> args;
  mlir::func::FuncOp fn;
  mlir::Value q, k, v, o, sizes;
};

// A family's entry point: plans kernel `k` under `make`, opens its module named `strategy`, the
// launch's runtime sizes (none unless `rt` asks), then `build` builds the kernel into it.
template <class Plan>
Expected<GpuPlan> buildAttn(mlir::MLIRContext* ctx, const ir::Kernel& k, const GpuAttentionConfig& c, const TargetDesc& t,
                            const RuntimeDims& rt,
                            Expected<Plan> (*make)(const ir::AttentionSpec&, const GpuAttentionConfig&, const TargetDesc&),
                            const char* strategy, bool laneLevel,
                            Status (*build)(const Plan&, AttnModule&, GpuPlan&, const TargetDesc&, const RuntimeDims&)) {
  TESSERA_ASSIGN(Plan p, planAttn<Plan>(k, c, t, make));
  GpuPlan plan;
  AttnModule m(ctx, plan, k, p, strategy, laneLevel, rt.any());
  TESSERA_ASSIGN(plan.launch.runtime, planAttentionRuntime(p.spec, rt, plan.strategy, p.BQ));
  TESSERA_TRY(build(p, m, plan, t, rt));
  return plan;
}

// The launch of a lane-level kernel: grid (query blocks, heads, batch), T threads, `dynSmem` bytes
// of dynamic shared memory (< 0: no dynamic window). The builder stays before the launch.
mlir::gpu::LaunchOp attnLaunch(mlir::OpBuilder& b, mlir::Location loc, const AttnDims& d, int64_t T, int64_t dynSmem);

// The block's query block, head and batch, with the builder moved into `launch`'s body. With
// `heaviestFirst` (causal: query block i reads about i + 1 key blocks) the device, which hands out
// blocks in launch order with x fastest, gets the heaviest first across every head, so the last
// wave holds the light ones: block (x, y) takes query block gridDim.x - 1 - L / H of head L % H,
// L = x + y·gridDim.x; the grid is unchanged.
struct AttnBlockIds {
  mlir::Value qb, h, bi;
};
AttnBlockIds enterAttnLaunch(mlir::OpBuilder& b, mlir::Location loc, mlir::gpu::LaunchOp launch, int64_t H,
                             bool heaviestFirst);
// Closes a lane-level kernel: the launch's terminator, the function's return; nothing to map.
void closeAttnLaunch(mlir::OpBuilder& b, mlir::Location loc, mlir::gpu::LaunchOp launch, GpuPlan& plan);

}  // namespace tessera::codegen
