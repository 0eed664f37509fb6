// Owns the explicit host GEMM (schedules `blis`, `bf16dot`, `amx`): BLIS-style loops built with
// OpBuilder, so that what the transform schedules cannot express is ours to choose — operand
// conversion at packing time, bf16 pair dot products, AMX tiles, and parallel loops.
//
//   for b, ic (MC rows; A block MC x KC packed once per ic, pc, shared by the threads):
//     for pc (KC deep):
//       pack A[ic:ic+MC, pc:pc+KC]  -> Ap[MC/MR][MR][KC]       (f32, or bf16 rows for dot/amx)
//       parallel worker w, for its run of jc (NC columns per block):
//         pack B[pc:pc+KC, jc:jc+NC] -> Bp[w][NC/NR][KC][NR]   (f32; dot/amx: [KC/2][2·NR] pairs;
//                                        one slot per worker, reused block after block in its L2)
//         for ir, jr (ORDER ij: ir outer, the A micro-panel stays in L1 while B micro-panels stream)
//           MR x NR tile in registers over KC; the last pc block applies the epilogue and stores C.
//
// This is BLIS (Low et al., TOMS 2016) on Cᵀ: with row-major C and vectors along N, A is the
// broadcast operand, so BLIS's L1-resident B micro-panel is our A micro-panel (KC from L1), its
// L2-resident A block is our B block (NC from L2) and its L3 panel is our A block (MC from L3).
// f16/bf16 inputs are converted to f32 while packing (vector extf, never element by element);
// `bf16dot` keeps bf16 pairs and multiplies them with vdpbf16ps (avx512_bf16); `amx` multiplies
// 16x32 bf16 tiles into 16x16 f32 tiles (amx_bf16). Knobs: MC NC KC MR NR KU ORDER THREADS, and PACKB (0:
// the fma kernel reads B in place, no packed panels; not in the search space, offered by range tuning).
// The packing is hostgen/host_gemm_pack.cpp; the plan and the builder both files share,
// hostgen/host_gemm_blis.h.
#include <algorithm>

#include "codegen/codegen.h"
#include "codegen/expr_emitter.h"
#include "hostgen/host_gemm_blis.h"
#include "hostgen/host_strategies.h"
#include "hostgen/linalg_elementwise.h"
#include "ir/gemm_epilogue.h"
#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"

namespace tessera::codegen {

using namespace mlir;

namespace blis {

namespace {

// Scratch at least this large is kept from call to call (GemmBuilder::keptScratchBody): glibc maps
// every block past 32 MiB (DEFAULT_MMAP_THRESHOLD_MAX on 64-bit) afresh on each malloc.
constexpr int64_t kKeptScratchBytes = int64_t(32) << 20;

// The width of a column block on `threads` threads: the multiple of `grain` up to `nc` that gives the
// busiest thread the fewest columns (the OpenMP loop hands each thread a contiguous share of the
// blocks, ceil(blocks / threads) for the first ones), the widest of those (more reuse of each A
// micro-panel). N = 3072 with nc = 1024 on 2 threads: 768 (4 blocks, 1536 columns each), not 1024
// (3 blocks: one thread 2048 columns, the other 1024).
int64_t columnBlock(int64_t n, int64_t nc, int64_t grain, int64_t threads) {
  int64_t best = nc, bestCost = -1;
  for (int64_t w = nc; w >= grain; w -= grain) {
    const int64_t cost = ceilDiv(ceilDiv(n, w), threads) * w;
    if (bestCost < 0 || cost < bestCost) best = w, bestCost = cost;
  }
  return best;
}

// The largest balanced K block not above KC (1000 with KC=512 -> 500), rounded to `granule`.
int64_t balancedKC(int64_t K, int64_t KC, int64_t granule) {
  KC = std::max<int64_t>(std::min(KC, K), 1);
  int64_t blocks = ceilDiv(K, KC);
  return roundUp(ceilDiv(K, blocks), granule);
}

Expected<Plan> makePlan(const ir::Kernel& k, const HostGemmConfig& c, const TargetDesc& t, const RuntimeDims& dims) {
  Plan p;
  TESSERA_ASSIGN(p.g, ir::analyzeGemm(k));
  p.dynM = dims.m;
  p.dynBatch = dims.batch;
  // Only the outermost dimension of a row-major operand may vary at run time: its strides stay
  // static. M is outermost in A (not transposed) and C unless a batch dimension precedes it.
  if (p.dynM && p.g.transA) return makeError(ErrorCode::Unsupported, "runtime M needs A stored M x K (not transposed)");
  if (p.dynM && p.g.batch > 0) return makeError(ErrorCode::Unsupported, "runtime M with a batch dimension: choose one of them");
  if (p.dynBatch && p.g.batch == 0) return makeError(ErrorCode::Unsupported, "runtime batch needs a batched GEMM");
  const std::string& sched = c.schedule;
  const int64_t MC = c.MC, NC = c.NC, KC = c.KC;
  p.MR = c.MR, p.NR = c.NR, p.KU = c.KU, p.threads = c.THREADS;
  const std::string& order = c.ORDER;
  auto bad = [](const std::string& m) { return makeError(ErrorCode::InvalidConfig, m); };
  if (order != "ij" && order != "ji") return bad("ORDER must be ij or ji, got " + order);
  p.ijOrder = order == "ij";
  for (auto [n, v] : {std::pair{"MC", MC}, {"NC", NC}, {"KC", KC}, {"MR", p.MR}, {"NR", p.NR}, {"KU", p.KU}, {"THREADS", p.threads}})
    if (v <= 0) return bad(std::string(n) + " must be positive, got " + std::to_string(v));
  if (p.threads > 256) return bad("THREADS must be <= 256");
  if (c.PACKB != 0 && c.PACKB != 1) return bad("PACKB must be 0 or 1");
  p.packB = c.PACKB == 1;
  if (p.KU > 16) return bad("KU must be <= 16");
  p.VW = std::max(4, t.simdBits / 32);
  p.mk = sched == "bf16dot" ? Micro::Dot : sched == "amx" ? Micro::Amx : Micro::Fma;
  if (!p.packB && (p.mk != Micro::Fma || p.g.transB))
    return bad("PACKB=0 reads B in place: the blis schedule with B stored K x N only");
  if (p.mk != Micro::Fma) {
    if (p.g.inType != ir::ScalarType::BF16) return bad("schedule " + sched + " multiplies bf16 inputs only");
    if (p.mk == Micro::Dot && !(t.hasIsa("avx512_bf16") && t.simdBits >= 512))
      return bad("schedule bf16dot needs avx512_bf16 (vdpbf16ps), which target " + t.arch + " lacks");
    if (p.mk == Micro::Amx && !t.hasIsa("amx_bf16")) return bad("schedule amx needs amx_bf16, which this target lacks");
  }
  if (p.NR % p.VW) return bad("NR must be a multiple of the vector width " + std::to_string(p.VW));
  if (p.MR > 64 || p.NR > 256 || p.MR * p.nv() > 64) return bad("register tile MRxNR too large");
  if (p.mk == Micro::Amx && ((p.MR != 16 && p.MR != 32) || (p.NR != 16 && p.NR != 32)))
    return bad("schedule amx takes MR and NR of 16 or 32 (16x16 f32 tiles, at most 2x2)");
  const ir::GemmInfo& g = p.g;
  p.mc = std::max(p.MR, std::min(MC, roundUp(g.m, p.MR)) / p.MR * p.MR);
  p.nc = std::max(p.NR, std::min(NC, roundUp(g.n, p.NR)) / p.NR * p.NR);
  // Column blocks for the threads (BLIS splits this loop: each thread's B block in its L2), as
  // even a share per thread as whole vectors allow: before, blocks of the L2's width could leave
  // one thread twice the columns of the other (N = 3072 with NC = 1024; 1536 with a 1 MB L2's 512).
  // Blocks are whole vectors, not whole NR panels (a block may end in a partial panel, as N's last
  // one does): 200 columns on two threads at NR = 32 split 112 + 88, not 128 + 72. Two Zen 5
  // cores, `tessera run --threads 2`, ten interleaved runs each, panels against vectors: 200^3
  // 44-45 -> 39-41 us, 260^3 89-91 -> 82-83, 400^3 386-415 -> 367-374; 1024x1028x1024 (32-column
  // blocks against 176) and 2048x5000x256 alike. AMX keeps whole panels (its tiles are NR wide).
  if (p.threads > 1) {
    const int64_t grain = p.mk == Micro::Amx ? p.NR : p.VW;
    p.nc = columnBlock(g.n, std::min(p.nc, roundUp(ceilDiv(g.n, p.threads), grain)), grain, p.threads);
  }
  // K blocks: dot products consume k in pairs, AMX tiles in steps of 32 (padding is zero).
  p.kc = balancedKC(g.k, KC, p.mk == Micro::Dot ? 2 : p.mk == Micro::Amx ? 32 : 1);
  p.nkb = ceilDiv(g.k, p.kc);
  p.kLast = g.k - (p.nkb - 1) * p.kc;
  // AMX steps are unrolled (tiles cannot be loop-carried through MLIR's lowering): bounded.
  if (p.mk == Micro::Amx && p.kc > 1024) return bad("schedule amx takes KC <= 1024");
  p.kcs = roundUp(p.kc, p.VW);
  return p;
}

}  // namespace

Status GemmBuilder::build() {
  const ir::GemmInfo& g = p_.g;
  // Partial sums of several K blocks live in C when C is f32; otherwise in an f32 scratch, kept
  // from call to call when it is large and of a static shape (keptScratchBody).
  const bool cIsF32 = g.outType == ir::ScalarType::F32;
  const bool scratch = p_.nkb > 1 && !cIsF32;
  SmallVector<int64_t> caccShape;
  if (g.batch) caccShape.push_back(p_.dynBatch ? ShapedType::kDynamic : g.batch);
  caccShape.append({p_.dynM ? ShapedType::kDynamic : g.m, g.n});
  auto caccType = MemRefType::get(caccShape, f32_);
  std::optional<OpBuilder::InsertPoint> entryRest;
  if (scratch && caccType.hasStaticShape() && caccType.getNumElements() * 4 >= kKeptScratchBytes)
    entryRest = keptScratchBody(caccType);
  A_ = args_[g.a];
  B_ = args_[g.b];
  C_ = args_[g.c];
  inT_ = cast<MemRefType>(A_.getType()).getElementType();
  Type packT = p_.mk == Micro::Fma ? f32_ : inT_;
  IntegerAttr align = b_.getI64IntegerAttr(64);
  auto alloc = [&](ArrayRef<int64_t> shape, Type t) {
    return memref::AllocOp::create(b_, loc_, MemRefType::get(shape, t), align).getResult();
  };
  Ap_ = alloc({p_.mc / p_.MR, p_.MR, p_.kcs}, packT);
  // One slot of B panels per worker (bWorkers), each as wide as a column block, packed again
  // block after block: the slot stays in its worker's L2 instead of N x KC of fresh memory a call.
  if (p_.packB) Bp_ = alloc({bWorkers() * ceilDiv(p_.nc, p_.NR), p_.bRows(), p_.bRow()}, packT);
  if (p_.mk == Micro::Amx) Cs_ = alloc({ceilDiv(g.n, p_.nc), p_.MR, p_.NR}, f32_);
  if (p_.dynM || p_.dynBatch) {
    // sizes[0] = M, sizes[1] = batch count (each read only where it is a runtime size).
    Value sizes = args_[kSizesArg];
    auto size = [&](int64_t i) {
      Value v = memref::LoadOp::create(b_, loc_, sizes, ValueRange{idx(i)});
      return Value(arith::IndexCastOp::create(b_, loc_, b_.getIndexType(), v));
    };
    if (p_.dynM) M_ = size(0);
    if (p_.dynBatch) batch_ = size(1);
  }
  if (!scratch) {
    Cacc_ = C_;
  } else if (!entryRest) {
    SmallVector<Value> dynSizes;
    if (p_.dynBatch) dynSizes.push_back(batch_);
    if (p_.dynM) dynSizes.push_back(M_);
    Cacc_ = memref::AllocOp::create(b_, loc_, caccType, dynSizes, align).getResult();
  }
  auto batchBody = [&](Value bi) {
    bi_ = bi;
    if (!p_.dynM) return tiles(g.m, p_.mc, [&](Value ic, int64_t mcb) { rowBlock(ic, mcb); });
    // Whole row blocks in a loop, then the partial last one (its row count known at run time).
    Value full = floorTo(M_, p_.mc);
    loop(idx(0), full, p_.mc, [&](Value ic) { rowBlock(ic, p_.mc); });
    Value rest = sub(M_, full);
    ifThen(lt(0, rest), [&] { rowBlock(full, Rows(p_.mc, rest)); });
  };
  if (p_.dynBatch) loop(idx(0), batch_, 1, batchBody);
  else if (g.batch) loop(0, g.batch, 1, batchBody);
  else batchBody(Value());
  if (entryRest) {
    func::ReturnOp::create(b_, loc_);
    b_.restoreInsertionPoint(*entryRest);
  }
  return error_;
}

// The f32 partial sums of a large GEMM with a 16-bit C in a buffer the kernel keeps from call to
// call: a private global (zero pages until first touched, then resident), taken by a flag, so that
// a call running beside another on the same kernel allocates its own instead. Allocated afresh,
// the buffer cost a page fault per 4 KiB on every call: glibc maps blocks past 32 MiB anew on each
// malloc and unmaps them on free (measured on a Zen 5 core: 26 ms of a 4096 x 4096 x 512 bf16
// GEMM's 62). The body goes into a private function taking the buffer as its last argument, called
// with the global or with an allocation (the deallocation passes then see one owner each); the
// entry takes the flag, calls it, and gives the flag back where it took it. Leaves the builder in
// the body function, its arguments in args_ and Cacc_; returns where the entry's code continues.
OpBuilder::InsertPoint GemmBuilder::keptScratchBody(MemRefType type) {
  auto entry = cast<func::FuncOp>(b_.getInsertionBlock()->getParentOp());
  auto module = entry->getParentOfType<ModuleOp>();
  std::string name = "tessera_kept_cacc";
  for (int i = 1; SymbolTable::lookupSymbolIn(module, name); ++i) name = "tessera_kept_cacc_" + std::to_string(i);
  auto flagType = MemRefType::get({1}, b_.getI32Type());
  IntegerAttr align = b_.getI64IntegerAttr(64);
  func::FuncOp body;
  {
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(module.getBody());
    StringAttr priv = b_.getStringAttr("private");
    memref::GlobalOp::create(b_, loc_, name, priv, type, b_.getUnitAttr(), false, align);
    auto zero = DenseElementsAttr::get(RankedTensorType::get({1}, b_.getI32Type()), b_.getI32IntegerAttr(0));
    memref::GlobalOp::create(b_, loc_, name + "_busy", priv, flagType, zero, false, IntegerAttr());
    SmallVector<Type> types(entry.getArgumentTypes());
    types.push_back(type);
    b_.setInsertionPointToEnd(module.getBody());
    body = func::FuncOp::create(b_, loc_, name + "_body", b_.getFunctionType(types, {}));
    body.setPrivate();
    body.addEntryBlock();
    for (unsigned i = 0; i < entry.getNumArguments(); ++i)
      for (NamedAttribute a : mlir::function_interface_impl::getArgAttrs(entry, i)) body.setArgAttr(i, a.getName(), a.getValue());
    body.setArgAttr(entry.getNumArguments(), "llvm.noalias", b_.getUnitAttr());
    body.setArgAttr(entry.getNumArguments(), "llvm.align", align);
  }
  Value busy = memref::GetGlobalOp::create(b_, loc_, flagType, name + "_busy").getResult();
  auto i32 = [&](int32_t v) { return Value(arith::ConstantOp::create(b_, loc_, b_.getI32IntegerAttr(v))); };
  Value was = memref::AtomicRMWOp::create(b_, loc_, arith::AtomicRMWKind::assign, i32(1), busy, ValueRange{idx(0)});
  Value taken = arith::CmpIOp::create(b_, loc_, arith::CmpIPredicate::eq, was, i32(0));
  SmallVector<Value> operands(entry.getArguments());
  auto call = [&](Value buffer) {
    operands.push_back(buffer);
    func::CallOp::create(b_, loc_, body, operands);
    operands.pop_back();
  };
  ifThenElse(
      taken,
      [&] {
        call(memref::GetGlobalOp::create(b_, loc_, type, name).getResult());
        memref::AtomicRMWOp::create(b_, loc_, arith::AtomicRMWKind::assign, i32(0), busy, ValueRange{idx(0)});
      },
      [&] { call(memref::AllocOp::create(b_, loc_, type, align).getResult()); });
  OpBuilder::InsertPoint rest = b_.saveInsertionPoint();
  for (auto& [tensor, v] : args_) v = body.getArgument(cast<BlockArgument>(v).getArgNumber());
  Cacc_ = body.getArguments().back();
  b_.setInsertionPointToStart(&body.front());
  return rest;
}

void GemmBuilder::rowBlock(Value ic, Rows mcb) {
  // K blocks: a loop over all but the last (the first of them starts its sums at zero), then
  // the last, peeled: it may be shorter, and it applies the epilogue.
  if (p_.nkb > 1)
    loop(0, p_.nkb - 1, 1, [&](Value kb) {
      Value first = arith::CmpIOp::create(b_, loc_, arith::CmpIPredicate::eq, kb, idx(0));
      depthBlock(ic, mcb, mul(kb, p_.kc), p_.kc, first, false);
    });
  Value first = arith::ConstantOp::create(b_, loc_, b_.getBoolAttr(p_.nkb == 1));
  depthBlock(ic, mcb, idx((p_.nkb - 1) * p_.kc), p_.kLast, first, true);
}

void GemmBuilder::depthBlock(Value ic, Rows mcb, Value pc, int64_t kv, Value first, bool last) {
  packA(ic, mcb, pc, kv);
  const int64_t n = p_.g.n, nJ = ceilDiv(n, p_.nc), fullJ = n / p_.nc;
  auto block = [&](Value jb) {
    Value jc = mul(jb, p_.nc);
    if (fullJ == nJ) return colBlock(ic, mcb, pc, kv, jb, jc, p_.nc, first, last);
    Value isFull = arith::CmpIOp::create(b_, loc_, arith::CmpIPredicate::ult, jb, idx(fullJ));
    ifThenElse(
        isFull, [&] { colBlock(ic, mcb, pc, kv, jb, jc, p_.nc, first, last); },
        [&] { colBlock(ic, mcb, pc, kv, jb, jc, n - fullJ * p_.nc, first, last); });
  };
  const int64_t workers = bWorkers();
  if (workers == 1) {
    bq0_ = idx(0);
    return loop(0, nJ, 1, block);
  }
  // Worker w takes the contiguous column blocks [w·chunk, (w+1)·chunk), as OpenMP's static
  // schedule dealt them out before, and packs them into its own slot of Bp.
  const int64_t chunk = ceilDiv(nJ, workers);
  parallel(workers, [&](Value w) {
    bq0_ = mul(w, ceilDiv(p_.nc, p_.NR));
    Value lo = mul(w, chunk);
    loop(lo, arith::MinUIOp::create(b_, loc_, add(lo, chunk), idx(nJ)), 1, block);
  });
}

// Workers over the column blocks: one per thread while each has a block, the blocks dealt out in
// contiguous runs of ceil(blocks / threads).
int64_t GemmBuilder::bWorkers() const {
  const int64_t nJ = ceilDiv(p_.g.n, p_.nc);
  if (p_.threads <= 1 || nJ <= 1) return 1;
  return ceilDiv(nJ, ceilDiv(nJ, std::min<int64_t>(p_.threads, nJ)));
}

// ---- one column block: pack its B panels (host_gemm_pack.cpp), then every micro-tile

void GemmBuilder::colBlock(Value ic, Rows mcb, Value pc, int64_t kv, Value jb, Value jc, int64_t ncb, Value first, bool last) {
  if (p_.packB) packB(jc, ncb, pc, kv);
  pc_ = pc;
  kv_ = kv;
  Value q0 = bq0_;
  auto tile = [&](Value ir, Rows rows, Value jr, int64_t cols) {
    Value panel = arith::DivUIOp::create(b_, loc_, ir, idx(p_.MR));
    Value jp = add(q0, arith::DivUIOp::create(b_, loc_, jr, idx(p_.NR)));
    microTile(panel, jp, jb, add(ic, ir), rows, add(jc, jr), cols, first, last);
  };
  // Micro-tiles down the block's rows: whole MR tiles, then the partial last one (static, or
  // masked row by row when the block's row count is known only at run time).
  auto rowTiles = [&](const std::function<void(Value, Rows)>& body) {
    if (!mcb.dyn) return tiles(mcb.n, p_.MR, [&](Value ir, int64_t rows) { body(ir, rows); });
    Value full = floorTo(mcb.dyn, p_.MR);
    loop(idx(0), full, p_.MR, [&](Value ir) { body(ir, p_.MR); });
    Value rest = sub(mcb.dyn, full);
    ifThen(lt(0, rest), [&] { body(full, Rows(p_.MR, rest)); });
  };
  if (p_.ijOrder)
    rowTiles([&](Value ir, Rows rows) { tiles(ncb, p_.NR, [&](Value jr, int64_t cols) { tile(ir, rows, jr, cols); }); });
  else
    tiles(ncb, p_.NR, [&](Value jr, int64_t cols) { rowTiles([&](Value ir, Rows rows) { tile(ir, rows, jr, cols); }); });
}

// ---- micro-kernels: MR x NR of C over one K block

void GemmBuilder::microTile(Value panel, Value jp, Value jb, Value row0, Rows rows, Value col0, int64_t cols, Value first, bool last) {
  // A partial column tile multiplies only the vectors that hold its columns (an edge tile of 8
  // columns under NR = 64 runs one vector of FMAs, not four of which three are zero).
  nvt_ = p_.mk == Micro::Amx ? p_.nv() : std::min(p_.nv(), ceilDiv(cols, p_.VW));
  const int64_t nv = nvt_, MR = p_.MR;
  SmallVector<Value> acc;
  first_ = first;
  if (p_.mk != Micro::Amx) {
    // The fma and dot kernels sum from zero and add the old partial sums after the depth loop
    // (BLIS's order), C's lines prefetched for writing first: no FMA waits on C, whose lines come
    // from memory once C outgrows the L3 (4096^3: 64 MiB against a Zen 5's 32). The write-back
    // adds them (writeRow).
    for (int64_t r = 0; r < std::min(rows.n, MR); ++r) {
      if (rows.dyn && r > 0) break;  // rows past the first may not exist: not prefetched
      for (int64_t c = 0; c < nv && c * p_.VW < cols; ++c)
        memref::PrefetchOp::create(b_, loc_, Cacc_, at(add(row0, r), add(col0, c * p_.VW)), /*isWrite=*/true,
                                   /*locality=*/3, /*isDataCache=*/true);
    }
    for (int64_t i = 0; i < MR * nv; ++i) acc.push_back(zeros(vf_));
    col0_ = col0;
    acc = p_.mk == Micro::Fma ? fmaLoop(panel, jp, acc) : dotLoop(panel, jp, acc);
    return writeBack(acc, row0, rows, col0, cols, last);
  }
  // AMX: sums start at zero in the first K block, from the partial sums stored in C otherwise.
  for (int64_t r = 0; r < MR; ++r)
    for (int64_t c = 0; c < nv; ++c) {
      // One K block: nothing to continue from (and Cacc is C itself, maybe not f32).
      if (r >= rows.n || c * p_.VW >= cols || p_.nkb == 1) {
        acc.push_back(zeros(vf_));
        continue;
      }
      auto loadOld = [&] { return load(Cacc_, at(add(row0, r), add(col0, c * p_.VW)), vf_, cols - c * p_.VW); };
      Value old = rows.dyn && r > 0 ? select(vf_, lt(r, rows.dyn), loadOld, [&] { return zeros(vf_); }) : loadOld();
      acc.push_back(arith::SelectOp::create(b_, loc_, first, zeros(vf_), old));
    }
  // Through this block's scratch Cs: tiles load from and store to whole 16-row tiles there.
  for (int64_t r = 0; r < MR; ++r)
    for (int64_t c = 0; c < nv; ++c) vector::StoreOp::create(b_, loc_, acc[r * nv + c], Cs_, ValueRange{jb, idx(r), idx(c * p_.VW)});
  amxTile(panel, jp, jb);
  for (int64_t r = 0; r < MR; ++r)
    for (int64_t c = 0; c < nv; ++c) acc[r * nv + c] = vector::LoadOp::create(b_, loc_, vf_, Cs_, ValueRange{jb, idx(r), idx(c * p_.VW)});
  writeBack(acc, row0, rows, col0, cols, last);
}

// Unrolled by KU: a loop over whole groups, then the remainder straight.
SmallVector<Value> GemmBuilder::unrolledK(int64_t count, SmallVector<Value> acc,
                                          const std::function<void(Value, SmallVector<Value>&)>& step) {
  const int64_t u = std::max<int64_t>(1, std::min(p_.KU, count)), main = count / u * u;
  if (main > 0) {
    auto f = scf::ForOp::create(b_, loc_, idx(0), idx(main), idx(u), acc);
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(f.getBody());
    SmallVector<Value> a(f.getRegionIterArgs().begin(), f.getRegionIterArgs().end());
    for (int64_t j = 0; j < u; ++j) step(add(f.getInductionVar(), j), a);
    scf::YieldOp::create(b_, loc_, a);
    b_.setInsertionPointAfter(f);
    acc.assign(f.getResults().begin(), f.getResults().end());
  }
  for (int64_t kk = main; kk < count; ++kk) step(idx(kk), acc);
  return acc;
}

SmallVector<Value> GemmBuilder::fmaLoop(Value panel, Value jp, SmallVector<Value> acc) {
  const int64_t nv = nvt_;
  // In place, the depth runs to the block's valid rows only (past them B has no rows; A's packed
  // panel is zero there, which the packed path relies on instead). Columns past N read as zero.
  return unrolledK(p_.packB ? p_.kc : kv_, acc, [&](Value kk, SmallVector<Value>& a) {
    SmallVector<Value> bv;
    for (int64_t c = 0; c < nv; ++c)
      bv.push_back(p_.packB ? Value(vector::LoadOp::create(b_, loc_, vf_, Bp_, ValueRange{jp, kk, idx(c * p_.VW)}))
                            : toF32(readRow(B_, at(add(pc_, kk), add(col0_, c * p_.VW)), p_.VW)));
    for (int64_t r = 0; r < p_.MR; ++r) {
      Value x = memref::LoadOp::create(b_, loc_, Ap_, ValueRange{panel, idx(r), kk});
      Value xb = vector::BroadcastOp::create(b_, loc_, vf_, x);
      for (int64_t c = 0; c < nv; ++c) a[r * nv + c] = vector::FMAOp::create(b_, loc_, xb, bv[c], a[r * nv + c]);
    }
  });
}

// vdpbf16ps: each f32 lane adds a0·b0 + a1·b1 of one bf16 pair; A's pair (k, k+1) of a row is
// broadcast as one 32-bit value, B's pairs of NR/16 columns are one 64-byte load each.
SmallVector<Value> GemmBuilder::dotLoop(Value panel, Value jp, SmallVector<Value> acc) {
  const int64_t nv = nvt_;
  auto v32bf = VectorType::get({2 * p_.VW}, inT_), v2bf = VectorType::get({2}, inT_);
  auto v1i = VectorType::get({1}, b_.getI32Type()), vni = VectorType::get({p_.VW}, b_.getI32Type());
  return unrolledK(p_.kc / 2, acc, [&](Value kq, SmallVector<Value>& a) {
    SmallVector<Value> bv;
    for (int64_t c = 0; c < nv; ++c)
      bv.push_back(vector::LoadOp::create(b_, loc_, v32bf, Bp_, ValueRange{jp, kq, idx(2 * c * p_.VW)}));
    Value k0 = mul(kq, 2);
    for (int64_t r = 0; r < p_.MR; ++r) {
      Value pair = vector::LoadOp::create(b_, loc_, v2bf, Ap_, ValueRange{panel, idx(r), k0});
      Value word = vector::BitCastOp::create(b_, loc_, v1i, pair);
      Value xb = vector::BitCastOp::create(b_, loc_, v32bf, vector::BroadcastOp::create(b_, loc_, vni, word));
      for (int64_t c = 0; c < nv; ++c) a[r * nv + c] = x86vector::DotBF16Op::create(b_, loc_, vf_, a[r * nv + c], xb, bv[c]);
    }
  });
}

// AMX: the (MR/16)·(NR/16) C tiles of 16x16 f32 load from this block's scratch Cs, then per
// 32 of depth MR/16 A tiles (16 rows x 32 bf16 of Ap) and NR/16 B tiles (16 pair rows of Bp)
// multiply into them, and they go back to Cs. The depth steps are unrolled: MLIR 22 lowers no
// tile values carried through loops or branches (cf.br of !amx.tile fails to legalize).
void GemmBuilder::amxTile(Value panel, Value jp, Value jb) {
  auto tc = amx::TileType::get({16, 16}, f32_), tab = amx::TileType::get({16, 32}, inT_);
  const int64_t ti = p_.MR / 16, tj = p_.NR / 16;
  SmallVector<Value> acc;
  for (int64_t i = 0; i < ti; ++i)
    for (int64_t j = 0; j < tj; ++j) acc.push_back(amx::TileLoadOp::create(b_, loc_, tc, Cs_, ValueRange{jb, idx(16 * i), idx(16 * j)}));
  for (int64_t k0 = 0; k0 < p_.kc; k0 += 32) {
    SmallVector<Value> at_, bt;
    for (int64_t i = 0; i < ti; ++i) at_.push_back(amx::TileLoadOp::create(b_, loc_, tab, Ap_, ValueRange{panel, idx(16 * i), idx(k0)}));
    for (int64_t j = 0; j < tj; ++j) bt.push_back(amx::TileLoadOp::create(b_, loc_, tab, Bp_, ValueRange{jp, idx(k0 / 2), idx(32 * j)}));
    for (int64_t i = 0; i < ti; ++i)
      for (int64_t j = 0; j < tj; ++j) acc[i * tj + j] = amx::TileMulFOp::create(b_, loc_, tc, at_[i], bt[j], acc[i * tj + j]);
  }
  for (int64_t i = 0; i < ti; ++i)
    for (int64_t j = 0; j < tj; ++j) amx::TileStoreOp::create(b_, loc_, Cs_, ValueRange{jb, idx(16 * i), idx(16 * j)}, acc[i * tj + j]);
}

// ---- write-back: partial sums to Cacc, or (last K block) the epilogue's value to C

void GemmBuilder::writeBack(const SmallVector<Value>& acc, Value row0, Rows rows, Value col0, int64_t cols, bool last) {
  const int64_t nv = nvt_;
  for (int64_t r = 0; r < std::min(rows.n, p_.MR); ++r) {
    // A row count known at run time: row r is written only when it exists (row 0 always does).
    if (rows.dyn && r > 0) {
      ifThen(lt(r, rows.dyn), [&] { writeRow(acc, row0, r, col0, cols, last); });
      continue;
    }
    writeRow(acc, row0, r, col0, cols, last);
  }
}

void GemmBuilder::writeRow(const SmallVector<Value>& acc, Value row0, int64_t r, Value col0, int64_t cols, bool last) {
  const int64_t nv = nvt_;
  for (int64_t c = 0; c < nv && c * p_.VW < cols; ++c) {
    Value row = add(row0, r), col = add(col0, c * p_.VW);
    int64_t valid = cols - c * p_.VW;
    Value v = acc[r * nv + c];
    // The fma and dot kernels summed this block from zero: the earlier blocks' sums are added here
    // (none in the first block; C, or the scratch, holds no sums yet).
    if (p_.mk != Micro::Amx && p_.nkb > 1) {
      Value old = load(Cacc_, at(row, col), vf_, valid);
      v = arith::AddFOp::create(b_, loc_, v, arith::SelectOp::create(b_, loc_, first_, zeros(vf_), old));
    }
    if (last) {
      auto e = epilogue(v, row, col, valid);
      if (!e.ok()) {
        if (error_.ok()) error_ = e.takeError();
        return;
      }
      store(*e, C_, at(row, col), valid);
    } else {
      store(v, Cacc_, at(row, col), valid);
    }
  }
}

// The epilogue on one vector of the accumulator, its operands read with the row's mask.
Expected<Value> GemmBuilder::epilogue(Value acc, Value row, Value col, int64_t valid) {
  return emitRowEpilogue(b_, loc_, p_.g, args_, acc, row, col, bi_, p_.VW,
                         [&](Value mem, ValueRange ix, VectorType t) { return load(mem, ix, t, valid); });
}

}  // namespace blis

// The rule is the kernel's (ir/gemm_epilogue.h): the spaces and the cache service read it without MLIR.
bool hostGemmFusesEpilogue(const ir::GemmInfo& g) { return ir::gemmEpilogueReadsRowwise(g); }

bool epilogueReadIndices(OpBuilder& b, Location loc, const ir::Expr& load, int inner, Value row, Value col, Value batch,
                         llvm::SmallVectorImpl<Value>& ix, bool& vec) {
  vec = false;
  for (size_t d = 0; d < load.args.size(); ++d) {
    const auto& a = load.args[d];
    if (a->op == ir::Op::IConst) {
      ix.push_back(arith::ConstantIndexOp::create(b, loc, a->ival));
      continue;
    }
    int dim = std::stoi(a->name.substr(1));
    if (dim == inner) {
      if (d + 1 != load.args.size()) return false;  // a transposed read: not a vector
      vec = true;
      ix.push_back(col);
    } else if (dim == inner - 1) {
      ix.push_back(row);
    } else {
      ix.push_back(batch);
    }
  }
  return true;
}

Expected<Value> emitRowEpilogue(OpBuilder& b, Location loc, const ir::GemmInfo& g, const std::map<std::string, Value>& args,
                                Value acc, Value row, Value col, Value batch, int64_t lanes, const EpilogueVectorRead& read) {
  if (!g.hasEpilogue) return acc;
  const ir::ElementwiseRegion& r = g.epilogue;
  const int inner = int(r.iter.size()) - 1;
  ExprCallbacks cb;
  cb.lanes = lanes;
  cb.load = [&](const ir::Expr& l) -> Value {
    if (l.name == g.acc) return acc;
    auto it = args.find(l.name);
    if (it == args.end()) return Value();
    SmallVector<Value> ix;
    bool vec = false;
    if (!epilogueReadIndices(b, loc, l, inner, row, col, batch, ix, vec)) return Value();
    Type et = cast<MemRefType>(it->second.getType()).getElementType();
    auto vt = VectorType::get({lanes}, et);
    if (vec) return read ? read(it->second, ix, vt) : Value(vector::LoadOp::create(b, loc, vt, it->second, ix));
    Value s = memref::LoadOp::create(b, loc, it->second, ix);
    return vector::BroadcastOp::create(b, loc, vt, s);
  };
  cb.indexVar = [&](const std::string&) -> Value { return Value(); };
  return emitExpr(b, loc, r.values[0], cb);
}

Expected<HostPayload> buildHostGemmBlis(MLIRContext* ctx, const ir::Kernel& k, const HostGemmConfig& c, const TargetDesc& t,
                                        const RuntimeDims& dims) {
  TESSERA_ASSIGN(blis::Plan p, blis::makePlan(k, c, t, dims));
  if (!hostGemmFusesEpilogue(p.g))
    return makeError(ErrorCode::InvalidConfig, "schedule " + c.schedule +
                                                   " cannot fuse this epilogue (transposed or computed reads)");
  HostPayload out;
  OpBuilder b(ctx);
  Location loc = b.getUnknownLoc();
  out.module = ModuleOp::create(loc);
  std::map<std::string, Value> args;
  createKernelFunc(b, *out.module, k, &args, dims.any());
  blis::GemmBuilder gb(b, loc, p, k, args);
  TESSERA_TRY(gb.build());
  func::ReturnOp::create(b, loc);
  out.threads = int(p.threads);
  out.amx = p.mk == blis::Micro::Amx;
  return out;  // no schedule: the body already is loop + vector code on memrefs
}

}  // namespace tessera::codegen
