// Owns the AMD backend's vector.contract -> amdgpu.mfma rewrite for CDNA (there is no upstream one; plan in
// mlir-recipes/gpu-tensorcore-gemm REPORT §7). Input: a mapped kernel whose warp-level contracts
// were unrolled to 16x16x16 (f16 or bf16 operands, f32 accumulator) and whose accumulators were
// hoisted into scf.for iter_args. Each whole-wave 16x16 value becomes the lane's fragment of
// v_mfma_f32_16x16x16{f16,bf16_1k} (wave64, lane l, i = l % 16, q = l / 16):
//   A: A[i][4q + j]   (j = 0..3, contiguous: one 8-byte load from a row-major tile)
//   B: B[4q + j][i]   (strided in a k-major tile: four 2-byte loads)
//   C/D: C[4q + j][i] (four rows of one column)
// Fragments are loaded where the 16x16 transfer_read was, accumulators travel through the K
// loop as vector<4xf32>, and the final transfer_write becomes four per-lane stores. Anything else
// touching a converted value is refused (the caller reports a compile error), never miscompiled.
// The CPU emulation cannot see this layout; tests check the instructions and resources.
#include <functional>
#include <map>

#include "codegen/amd/gpu_backend_amd.h"
#include "codegen/gpu_strategies.h"
#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"

namespace tessera::codegen {

using namespace mlir;

namespace {

enum class Role { A, B, Acc };

bool is16x16(Type t) {
  auto v = dyn_cast<VectorType>(t);
  return v && v.getRank() == 2 && v.getDimSize(0) == 16 && v.getDimSize(1) == 16;
}

bool isMatmulContract(vector::ContractionOp c) {
  if (!is16x16(c.getLhsType()) || !is16x16(c.getRhsType()) || !is16x16(c.getAccType())) return false;
  Type et = c.getLhsType().getElementType();
  if (!(et.isF16() || et.isBF16()) || c.getRhsType().getElementType() != et) return false;
  if (!cast<VectorType>(c.getAccType()).getElementType().isF32()) return false;
  MLIRContext* ctx = c.getContext();
  AffineExpr m = getAffineDimExpr(0, ctx), n = getAffineDimExpr(1, ctx), k = getAffineDimExpr(2, ctx);
  auto maps = c.getIndexingMapsArray();
  return maps.size() == 3 && maps[0] == AffineMap::get(3, 0, {m, k}, ctx) && maps[1] == AffineMap::get(3, 0, {k, n}, ctx) &&
         maps[2] == AffineMap::get(3, 0, {m, n}, ctx) && c.getKind() == vector::CombiningKind::ADD;
}

class MfmaRewriter {
 public:
  MfmaRewriter(int wave) : wave_(wave) {}

  LogicalResult run(gpu::LaunchOp launch) {
    Block& body = launch.getBody().front();
    OpBuilder b(&body, body.begin());
    Location loc = launch.getLoc();
    Value lane = gpu::LaneIdOp::create(b, loc, /*upper_bound=*/nullptr);
    i_ = arith::RemUIOp::create(b, loc, lane, arith::ConstantIndexOp::create(b, loc, 16));
    q_ = arith::DivUIOp::create(b, loc, lane, arith::ConstantIndexOp::create(b, loc, 16));
    if (failed(walkBlock(body))) return failure();
    // Erase replaced ops once nothing uses them (results or block arguments): a fixpoint, since
    // the old loop's arguments are used by old contracts and vice versa.
    auto unused = [](Operation* op) {
      if (!op->use_empty()) return false;
      for (Region& r : op->getRegions())
        for (Block& blk : r)
          for (BlockArgument a : blk.getArguments())
            if (!a.use_empty()) return false;
      return true;
    };
    for (bool progress = true; progress;) {
      progress = false;
      for (Operation*& op : dead_)
        if (op && unused(op)) {
          op->erase();
          op = nullptr;
          progress = true;
        }
    }
    return success();
  }
  std::string error;
  int converted = 0;

 private:
  LogicalResult fail(Operation* op, const std::string& why) {
    if (error.empty()) {
      std::string s;
      llvm::raw_string_ostream os(s);
      op->print(os, OpPrintingFlags().skipRegions());
      error = why + ": " + s;
    }
    return failure();
  }

  Value cst(OpBuilder& b, Location loc, int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }

  // Memory address of element (r, c) of a 16x16 value produced by a 2-D-minor transfer_read
  // (optionally through vector.extract_strided_slice).
  LogicalResult address(OpBuilder& b, Value v, Value r, Value c, Value* mem, SmallVector<Value>* idx, bool* rowMajor) {
    Location loc = v.getLoc();
    if (auto sl = v.getDefiningOp<vector::ExtractStridedSliceOp>()) {
      auto offs = sl.getOffsets();
      int64_t o0 = cast<IntegerAttr>(offs[0]).getInt(), o1 = offs.size() > 1 ? cast<IntegerAttr>(offs[1]).getInt() : 0;
      return address(b, sl.getSource(), arith::AddIOp::create(b, loc, r, cst(b, loc, o0)),
                     arith::AddIOp::create(b, loc, c, cst(b, loc, o1)), mem, idx, rowMajor);
    }
    auto rd = v.getDefiningOp<vector::TransferReadOp>();
    if (!rd || rd.getMask() || cast<VectorType>(rd.getVector().getType()).getRank() != 2) return failure();
    AffineMap map = rd.getPermutationMap();
    unsigned rank = map.getNumDims();
    if (map.getNumResults() != 2) return failure();
    auto d0 = dyn_cast<AffineDimExpr>(map.getResult(0)), d1 = dyn_cast<AffineDimExpr>(map.getResult(1));
    if (!d0 || !d1) return failure();
    idx->assign(rd.getIndices().begin(), rd.getIndices().end());
    (*idx)[d0.getPosition()] = arith::AddIOp::create(b, loc, (*idx)[d0.getPosition()], r);
    (*idx)[d1.getPosition()] = arith::AddIOp::create(b, loc, (*idx)[d1.getPosition()], c);
    *rowMajor = d1.getPosition() == rank - 1;  // vector columns run along the memref's last dim
    *mem = rd.getBase();
    return success();
  }

  // The lane's fragment of `v` (role A, B or Acc), emitted right after the op defining `v`.
  FailureOr<Value> fragment(Value v, Role role) {
    auto it = frag_.find(v);
    if (it != frag_.end()) return it->second;
    Operation* def = v.getDefiningOp();
    if (!def) return failure();
    OpBuilder b(def->getContext());
    b.setInsertionPointAfter(def);
    Location loc = v.getLoc();
    auto vt = cast<VectorType>(v.getType());
    auto ft = VectorType::get({4}, vt.getElementType());
    if (auto c = dyn_cast<arith::ConstantOp>(def)) {
      auto dense = dyn_cast<SplatElementsAttr>(c.getValue());
      if (!dense) return failure();
      Value r = arith::ConstantOp::create(b, loc, ft, DenseElementsAttr::get(ft, dense.getSplatValue<Attribute>()));
      return frag_[v] = r;
    }
    // element j: A (i, 4q+j); B (4q+j, i); Acc (4q+j, i)
    Value q4 = arith::MulIOp::create(b, loc, q_, cst(b, loc, 4));
    SmallVector<Value> elems;
    if (role == Role::A) {
      Value mem;
      SmallVector<Value> idx;
      bool rowMajor = false;
      if (failed(address(b, v, i_, q4, &mem, &idx, &rowMajor))) return failure();
      if (rowMajor) {
        Value r = vector::LoadOp::create(b, loc, ft, mem, idx);
        dead_.push_back(def);
        return frag_[v] = r;
      }
    }
    for (int64_t j = 0; j < 4; ++j) {
      Value kj = arith::AddIOp::create(b, loc, q4, cst(b, loc, j));
      Value r = role == Role::A ? i_ : kj, c = role == Role::A ? kj : i_;
      Value mem;
      SmallVector<Value> idx;
      bool rowMajor = false;
      if (failed(address(b, v, r, c, &mem, &idx, &rowMajor))) return failure();
      elems.push_back(memref::LoadOp::create(b, loc, mem, idx));
    }
    dead_.push_back(def);
    return frag_[v] = vector::FromElementsOp::create(b, loc, ft, elems).getResult();
  }

  LogicalResult walkBlock(Block& block) {
    SmallVector<Operation*> ops;
    for (Operation& op : block) ops.push_back(&op);
    for (Operation* op : ops) {
      if (auto c = dyn_cast<vector::ContractionOp>(op)) {
        if (!isMatmulContract(c)) return fail(op, "contract is not a 16x16x16 f16/bf16 -> f32 matmul");
        auto a = fragment(c.getLhs(), Role::A), bb = fragment(c.getRhs(), Role::B), acc = fragment(c.getAcc(), Role::Acc);
        if (failed(a) || failed(bb) || failed(acc)) return fail(op, "cannot form MFMA fragments for the operands of");
        OpBuilder b(op);
        auto mfma = amdgpu::MFMAOp::create(b, op->getLoc(), (*acc).getType(), 16u, 16u, 16u, 1u, *a, *bb, *acc);
        frag_[c.getResult()] = mfma.getResult();
        dead_.push_back(op);
        ++converted;
      } else if (auto f = dyn_cast<scf::ForOp>(op)) {
        if (failed(rewriteLoop(f))) return failure();
      } else if (auto w = dyn_cast<vector::TransferWriteOp>(op)) {
        if (!frag_.count(w.getVector())) continue;
        OpBuilder b(op);
        Location loc = op->getLoc();
        Value q4 = arith::MulIOp::create(b, loc, q_, cst(b, loc, 4));
        AffineMap map = w.getPermutationMap();
        auto d0 = dyn_cast<AffineDimExpr>(map.getResult(0)), d1 = dyn_cast<AffineDimExpr>(map.getResult(1));
        if (w.getMask() || !d0 || !d1) return fail(op, "unsupported accumulator store");
        for (int64_t j = 0; j < 4; ++j) {
          SmallVector<Value> idx(w.getIndices().begin(), w.getIndices().end());
          Value r = arith::AddIOp::create(b, loc, q4, cst(b, loc, j));
          idx[d0.getPosition()] = arith::AddIOp::create(b, loc, idx[d0.getPosition()], r);
          idx[d1.getPosition()] = arith::AddIOp::create(b, loc, idx[d1.getPosition()], i_);
          Value e = vector::ExtractOp::create(b, loc, frag_[w.getVector()], j);
          memref::StoreOp::create(b, loc, e, w.getBase(), idx);
        }
        op->erase();
      } else {
        for (Value v : op->getOperands())
          if (frag_.count(v) && !isa<scf::YieldOp>(op)) return fail(op, "unsupported user of an MFMA accumulator");
        for (Region& r : op->getRegions())
          for (Block& blk : r)
            if (failed(walkBlock(blk))) return failure();
      }
    }
    return success();
  }

  // scf.for carrying whole-wave accumulators: rebuilt with per-lane vector<4xf32> iter_args.
  LogicalResult rewriteLoop(scf::ForOp f) {
    SmallVector<unsigned> conv;
    for (unsigned i = 0; i < f.getNumRegionIterArgs(); ++i) {
      BlockArgument arg = f.getRegionIterArgs()[i];
      bool feedsContract = llvm::any_of(arg.getUsers(), [](Operation* u) { return isa<vector::ContractionOp>(u); });
      if (is16x16(arg.getType()) && feedsContract) conv.push_back(i);
    }
    if (conv.empty()) {
      for (Block& blk : f.getRegion()) if (failed(walkBlock(blk))) return failure();
      return success();
    }
    SmallVector<Value> inits(f.getInitArgs().begin(), f.getInitArgs().end());
    for (unsigned i : conv) {
      auto fr = fragment(inits[i], Role::Acc);
      if (failed(fr)) return fail(f, "cannot load the initial accumulator of");
      inits[i] = *fr;
    }
    OpBuilder b(f);
    auto nf = scf::ForOp::create(b, f.getLoc(), f.getLowerBound(), f.getUpperBound(), f.getStep(), inits);
    nf->setDiscardableAttrs(f->getDiscardableAttrDictionary());
    Block* nb = nf.getBody();
    Block* ob = f.getBody();
    // move the body, then rewire the block arguments
    nb->getOperations().splice(nb->end(), ob->getOperations());
    ob->getArgument(0).replaceAllUsesWith(nb->getArgument(0));
    for (unsigned i = 0; i < f.getNumRegionIterArgs(); ++i) {
      Value o = ob->getArgument(i + 1), n = nb->getArgument(i + 1);
      if (llvm::is_contained(conv, i)) frag_[o] = n;
      else o.replaceAllUsesWith(n);
    }
    // the default terminator from the builder is replaced by the moved yield
    for (Operation& op : llvm::make_early_inc_range(*nb))
      if (isa<scf::YieldOp>(op) && &op != nb->getTerminator()) op.erase();
    if (nb->getOperations().size() >= 2) {
      Operation* first = &nb->front();
      if (isa<scf::YieldOp>(first) && first != &nb->back()) first->erase();
    }
    if (failed(walkBlock(*nb))) return failure();
    auto y = cast<scf::YieldOp>(nb->getTerminator());
    for (unsigned i : conv) {
      auto it = frag_.find(y.getOperand(i));
      if (it == frag_.end()) return fail(y, "accumulator yielded without an MFMA");
      y->setOperand(i, it->second);
    }
    for (unsigned i = 0; i < f.getNumResults(); ++i) {
      if (llvm::is_contained(conv, i)) frag_[f.getResult(i)] = nf.getResult(i);
      else f.getResult(i).replaceAllUsesWith(nf.getResult(i));
    }
    dead_.push_back(f);
    return success();
  }

  int wave_;
  Value i_, q_;
  llvm::DenseMap<Value, Value> frag_;
  SmallVector<Operation*> dead_;
};

}  // namespace

Status rewriteContractsToMfma(ModuleOp m, int waveSize) {
  if (waveSize != 64) return makeError(ErrorCode::InvalidConfig, "MFMA needs wave64");
  Status st;
  int total = 0;
  m.walk([&](gpu::LaunchOp launch) {
    if (!st.ok()) return;
    MfmaRewriter rw(waveSize);
    if (failed(rw.run(launch))) st = makeError(ErrorCode::CompileError, "mfma rewrite: " + rw.error);
    total += rw.converted;
  });
  if (!st.ok()) return st;
  if (total == 0) return makeError(ErrorCode::CompileError, "mfma rewrite: no vector.contract to convert");
  return {};
}

}  // namespace tessera::codegen
