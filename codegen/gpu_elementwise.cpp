// Owns the GPU elementwise strategy: any fused elementwise region (numpy broadcasting, several
// outputs) over the flattened iteration space, built directly as pre-mapping IR:
//
//   scf.forall (bid) in (G)                                  #gpu.block<x>
//     scf.forall (tid) in (TPB)                              #gpu.thread<x>
//       scf.for s < STEPS                                    grid-stride steps (GRID > 0)
//         e = 0..EPT-1 (unrolled):  v = ((s*G + bid)*EPT + e)*TPB + tid      (consecutive threads,
//           if v < vectors:            consecutive vectors: coalesced)
//             load VW lanes per operand (vector / broadcast scalar / strided gather), compute per
//             lane in f32, store VW lanes per output
//
// Knobs: TPB threads per block, VW vector lanes (must divide the innermost dim; <= 16 bytes),
// EPT vectors per thread per step, GRID (0: one tile per block; k: k blocks per SM/CU with a
// grid-stride loop). The tail is predicated (`v < vectors`), so every shape is legal.
//
// Runtime rows (RuntimeDims::m, the leading dimension, sizes[0] = M): vectors = M * (vectors a
// row) and the block count G' = min(ceil(vectors / (TPB*EPT)), G) are computed in the kernel from
// the sizes argument; the launch's grid.x is the same G' (launchAtSizes), so blocks past it do
// nothing and a grid-stride kernel strides by G'. Every tensor indexed by the leading dimension
// must have it outermost (a buffer of fewer rows is the same buffer cut short).
#include <algorithm>

#include "codegen/expr_emitter.h"
#include "codegen/gpu_gemm_epilogue.h"
#include "codegen/gpu_loops.h"
#include "codegen/gpu_lowering.h"
#include "codegen/gpu_strategies.h"
#include "codegen/kernel_func.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace tessera::codegen {

using namespace mlir;

Expected<GpuPlan> buildGpuElementwise(MLIRContext* ctx, const ir::Kernel& k, const ir::Config& c, const TargetDesc& t,
                                      const RuntimeDims& rt) {
  TESSERA_ASSIGN(ir::ElementwiseRegion region, ir::analyzeElementwise(k));
  TESSERA_ASSIGN(EwKnobs kn, readEwKnobs(c, region, k, t));
  const int rank = int(region.iter.size());
  int64_t total = 1;
  for (int64_t d : region.iter) total *= d;
  const int64_t VW = kn.vw, vectors = total / VW, perBlock = kn.tpb * kn.ept;
  const int64_t cover = std::max<int64_t>(1, ceilDiv(vectors, perBlock));
  const int64_t G = kn.grid == 0 ? cover : std::min(cover, kn.grid * int64_t(t.units));
  const int64_t steps = ceilDiv(cover, G);
  const bool dynRows = rt.m;
  const bool guard = dynRows || G * steps * perBlock != vectors;
  auto refuse = [](const std::string& m) { return makeError(ErrorCode::Unsupported, "elementwise (GPU): " + m); };
  if (rt.batch || rt.kv) return refuse("an elementwise kernel takes only its leading dimension (rows) at run time");
  if (dynRows) {
    if (rank == 0) return refuse("a scalar kernel has no leading dimension to take at run time");
    for (const auto& op : region.operands)
      for (size_t d = 1; d < op.dims.size(); ++d)
        if (op.dims[d] == 0) return refuse("runtime leading dimension: " + op.tensor + " is indexed by it below its outermost dimension");
    if (rank == 1 && VW > 1)
      return refuse("a runtime length of a one-dimensional kernel needs VW=1 (a vector of " + std::to_string(VW) + " lanes would cross its end)");
  }
  const int64_t rowVectors = rank == 0 ? 1 : vectors / region.iter[0];  // vectors a row (VW divides a row)

  GpuPlan p;
  p.strategy = "elementwise";
  OpBuilder b(ctx);
  Location loc = b.getUnknownLoc();
  p.module = ModuleOp::create(loc);
  std::map<std::string, Value> args;
  createKernelFunc(b, *p.module, k, &args, dynRows);
  Value sizesArg = dynRows ? args[kSizesArg] : Value();
  args.erase(kSizesArg);
  gpuir::Idx ix{b, loc};

  // Flat 1-D views of every buffer.
  std::map<std::string, Value> flat;
  for (auto& [name, v] : args) {
    auto mt = cast<MemRefType>(v.getType());
    if (mt.getRank() == 1) {
      flat[name] = v;
    } else if (mt.getRank() == 0) {
      flat[name] = memref::ExpandShapeOp::create(b, loc, ArrayRef<int64_t>{1}, v, ArrayRef<ReassociationIndices>{});
    } else {
      ReassociationIndices all;
      for (int64_t d = 0; d < mt.getRank(); ++d) all.push_back(d);
      flat[name] = memref::CollapseShapeOp::create(b, loc, v, ArrayRef<ReassociationIndices>{all});
    }
  }

  gpuir::forall(b, loc, {G}, gpuir::Level::Block);
  Value bid = b.getInsertionBlock()->getArgument(0);
  gpuir::forall(b, loc, {kn.tpb}, gpuir::Level::Thread);
  Value tid = b.getInsertionBlock()->getArgument(0);
  // Runtime rows: the vectors of M rows and the blocks that cover them (capped at G: a grid-stride
  // kernel strides by the launched count), loaded per thread inside the launch.
  Value vectorsV = ix.c(vectors), strideG = ix.c(G), stepsV = ix.c(steps);
  if (dynRows) {
    vectorsV = ix.mul(gemm::loadSize(b, loc, sizesArg, 0), rowVectors);
    Value coverV = ix.div(ix.add(vectorsV, perBlock - 1), perBlock);
    if (steps > 1) {
      strideG = ix.min(coverV, G);
      stepsV = ix.div(ix.add(coverV, ix.add(strideG, -1)), strideG);
    }
  }

  Status failure;
  auto step = [&](Value s) {
    for (int64_t e = 0; e < kn.ept; ++e) {
      Value blk = s ? ix.add(ix.mul(s, strideG), bid) : bid;
      Value v = ix.add(ix.mul(ix.add(ix.mul(blk, kn.ept), e), kn.tpb), tid);
      Value inside = guard ? ix.lt(v, vectorsV) : Value();
      // A grid-stride block past the launched count (the CPU emulation runs all G) does nothing.
      if (dynRows && steps > 1) inside = ix.band(inside, ix.lt(bid, strideG));
      gpuir::guarded(b, loc, inside, [&] {
        Value elem = ix.mul(v, VW);
        // iteration coordinates of the vector's first element
        SmallVector<Value> coord(static_cast<size_t>(rank), Value());
        Value rest = elem;
        for (int d = rank - 1; d >= 0; --d) {
          coord[size_t(d)] = d == 0 ? rest : ix.rem(rest, region.iter[size_t(d)]);
          if (d > 0) rest = ix.div(rest, region.iter[size_t(d)]);
        }
        // per operand: VW lane values in the operand's dtype
        std::vector<SmallVector<Value>> lanes;
        for (const auto& op : region.operands) {
          const ir::TensorDecl* td = k.find(op.tensor);
          Type et = mlirType(b, td->dtype);
          std::vector<int64_t> stride(td->shape.size(), 1);
          for (int d = int(td->shape.size()) - 2; d >= 0; --d) stride[size_t(d)] = stride[size_t(d + 1)] * td->shape[size_t(d + 1)];
          Value off = ix.c(0);
          int innerDim = -1;
          for (size_t d = 0; d < op.dims.size(); ++d) {
            if (op.dims[d] < 0) continue;
            off = ix.add(off, ix.mul(coord[size_t(op.dims[d])], stride[d]));
            if (op.dims[d] == rank - 1) innerDim = int(d);
          }
          SmallVector<Value> ls;
          Value buf = flat[op.tensor];
          if (VW > 1 && innerDim == int(op.dims.size()) - 1) {
            Value vec = vector::LoadOp::create(b, loc, VectorType::get({VW}, et), buf, ValueRange{off});
            for (int64_t l = 0; l < VW; ++l) ls.push_back(vector::ExtractOp::create(b, loc, vec, l));
          } else if (innerDim < 0 || VW == 1) {
            Value x = memref::LoadOp::create(b, loc, buf, ValueRange{off});
            ls.assign(size_t(VW), x);
          } else {
            for (int64_t l = 0; l < VW; ++l)
              ls.push_back(memref::LoadOp::create(b, loc, buf, ValueRange{ix.add(off, l * stride[size_t(innerDim)])}));
          }
          lanes.push_back(ls);
        }
        std::vector<SmallVector<Value>> results(region.outputs.size());
        for (int64_t l = 0; l < VW; ++l) {
          ExprCallbacks cb;
          cb.load = [&](const ir::Expr& ld) -> Value {
            for (size_t i = 0; i < region.operands.size(); ++i) {
              const auto& op = region.operands[i];
              if (op.tensor != ld.name || op.dims.size() != ld.args.size()) continue;
              bool same = true;
              for (size_t d = 0; d < ld.args.size() && same; ++d) {
                const auto& a = ld.args[d];
                same = op.dims[d] < 0 ? a->op == ir::Op::IConst
                                      : (a->op == ir::Op::Var && a->name == "d" + std::to_string(op.dims[d]));
              }
              if (same) return lanes[i][size_t(l)];
            }
            return Value();
          };
          cb.indexVar = [&](const std::string& var) -> Value {
            int d = std::stoi(var.substr(1));
            return d == rank - 1 ? ix.add(coord[size_t(d)], l) : coord[size_t(d)];
          };
          for (size_t o = 0; o < region.values.size(); ++o) {
            auto val = emitExpr(b, loc, region.values[o], cb);
            if (!val.ok()) {
              failure = val.takeError();
              return;
            }
            results[o].push_back(*val);
          }
        }
        for (size_t o = 0; o < region.outputs.size(); ++o) {
          Value buf = flat[region.outputs[o]];
          if (VW == 1) {
            memref::StoreOp::create(b, loc, results[o][0], buf, ValueRange{elem});
          } else {
            auto vt = VectorType::get({VW}, results[o][0].getType());
            Value vec = vector::FromElementsOp::create(b, loc, vt, results[o]);
            vector::StoreOp::create(b, loc, vec, buf, ValueRange{elem});
          }
        }
      });
    }
  };
  if (steps == 1) step(Value());
  else gpuir::forLoop(b, loc, ix.c(0), stepsV, 1, step);
  if (!failure.ok()) return failure.takeError();
  b.setInsertionPointToEnd(&p.module->getBody()->back().getRegion(0).front());
  func::ReturnOp::create(b, loc);

  p.schedule = genericMapSchedule({kn.tpb, 1, 1}, t.warpSize, t.smemPerBlock);
  p.hasPre = false;
  p.launch.addUserArgs(int(k.inputs().size() + k.outputs().size()), dynRows);
  if (dynRows) {
    GpuLaunch::Runtime& r = p.launch.runtime;
    r.m = true;
    r.maxM = region.iter[0];
    r.rowAxis = 0;
    r.dim = "rows";
    r.unitsPerRow = rowVectors;
    r.rowsPerBlock = perBlock;
    r.mDim = 0;
    std::vector<const ir::TensorDecl*> order = k.inputs();
    for (const auto* o : k.outputs()) order.push_back(o);
    // Outputs span the iteration space; inputs have M rows when they are indexed by it.
    for (size_t i = 0; i < order.size(); ++i) {
      bool rows = i >= k.inputs().size();
      for (const auto& op : region.operands)
        if (op.tensor == order[i]->name && !op.dims.empty() && op.dims[0] == 0) rows = true;
      if (rows) r.mTensors.push_back(int(i));
    }
  }
  return p;
}

}  // namespace tessera::codegen
