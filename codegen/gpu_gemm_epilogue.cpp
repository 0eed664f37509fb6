// Owns the fused epilogue of the lane-level GPU GEMM kernels and the runtime-size plan the GEMM
// strategies share (see gpu_gemm_epilogue.h).
#include "codegen/gpu_gemm_epilogue.h"

#include <algorithm>
#include <map>

#include "codegen/expr_emitter.h"
#include "codegen/gpu_loops.h"
#include "codegen/gpu_strategies.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace tessera::codegen::gemm {

using namespace mlir;

int userIndexOf(const ir::Kernel& k, const std::string& name) {
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

Expected<GpuLaunch::Runtime> planRuntime(const ir::Kernel& k, const ir::GemmInfo& g, const RuntimeDims& rt,
                                         const std::string& strategy, int64_t rowsPerBlock, bool batchInGrid) {
  auto refuse = [&](const std::string& m) { return makeError(ErrorCode::Unsupported, "gemm (" + strategy + "): " + m); };
  GpuLaunch::Runtime r;
  if (!rt.any()) return r;
  if (rt.kv) return refuse("a runtime key length is attention's; a GEMM takes M or its batch count at run time");
  if (rt.m && g.batch > 0)
    return refuse("runtime M with a batch dimension is not supported (the batch stride would be dynamic): take the batch count at run time");
  if (rt.m && g.transA) return refuse("runtime M with a transposed A is not supported (A's row stride would be dynamic)");
  if (rt.batch && g.batch == 0) return refuse("a runtime batch count needs a batched GEMM (--batch)");
  r.m = rt.m;
  r.batch = rt.batch;
  r.maxM = g.m;
  r.maxBatch = std::max<int64_t>(g.batch, 1);
  r.rowsPerBlock = rowsPerBlock;
  r.batchInGrid = batchInGrid;
  const int rowDim = g.batch > 0 ? 1 : 0;
  auto add = [](std::vector<int>& v, int t) {
    if (t >= 0 && std::find(v.begin(), v.end(), t) == v.end()) v.push_back(t);
  };
  // A [M][K] and C [M][N] (or with a leading batch); epilogue tensors by their first index.
  std::vector<int>& lead = rt.m ? r.mTensors : r.batchTensors;
  add(lead, userIndexOf(k, g.a));
  add(lead, userIndexOf(k, g.c));
  if (rt.batch) add(lead, userIndexOf(k, g.b));
  if (g.hasEpilogue)
    for (const auto& op : g.epilogue.operands)
      if (op.tensor != g.acc && !op.dims.empty() && op.dims[0] == (rt.m ? rowDim : 0)) add(lead, userIndexOf(k, op.tensor));
  return r;
}

int appendSizesArg(OpBuilder& b, std::vector<GpuArg>& args, std::vector<Type>& types) {
  GpuArg s;
  s.kind = GpuArg::Kind::Sizes;
  s.dtype = ir::ScalarType::Index;
  args.push_back(s);
  types.push_back(MemRefType::get({kRuntimeSizeCount}, b.getI64Type()));
  return int(args.size()) - 1;
}

Value loadSize(OpBuilder& b, Location loc, Value sizes, int i) {
  Value v = memref::LoadOp::create(b, loc, sizes, ValueRange{arith::ConstantIndexOp::create(b, loc, i).getResult()});
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), v);
}

void planEpilogue(OpBuilder& b, const ir::Kernel& k, const ir::GemmInfo& g, std::vector<GpuArg>& args,
                  std::vector<std::pair<Type, int64_t>>& flat, Epilogue& e) {
  const int64_t batch = std::max<int64_t>(g.batch, 1);
  e.present = g.hasEpilogue;
  e.rowDim = g.batch > 0 ? 1 : 0;
  e.colDim = e.rowDim + 1;
  if (g.hasEpilogue) {
    e.region = g.epilogue;
    std::map<std::string, int> argOf;
    for (const auto& op : g.epilogue.operands) {
      EpiOperand eo;
      eo.op = op;
      if (op.tensor == g.acc) {
        e.operands.push_back(eo);
        continue;
      }
      const ir::TensorDecl* td = k.find(op.tensor);
      std::vector<int64_t> stride(td->shape.size(), 1);
      for (int d = int(td->shape.size()) - 2; d >= 0; --d) stride[size_t(d)] = stride[size_t(d + 1)] * td->shape[size_t(d + 1)];
      for (size_t d = 0; d < op.dims.size(); ++d)
        if (op.dims[d] < 0) stride[d] = 0;
      eo.strides = stride;
      if (!argOf.count(op.tensor)) {
        GpuArg a;
        a.kind = GpuArg::Kind::Tensor;
        a.tensor = userIndexOf(k, op.tensor);
        a.dtype = td->dtype;
        argOf[op.tensor] = int(args.size());
        args.push_back(a);
        flat.push_back({mlirType(b, td->dtype), td->numel()});
      }
      eo.arg = argOf[op.tensor];
      e.operands.push_back(eo);
    }
  }
  GpuArg out;
  out.kind = GpuArg::Kind::Tensor;
  out.tensor = userIndexOf(k, g.c);
  out.dtype = g.outType;
  e.outArg = int(args.size());
  args.push_back(out);
  flat.push_back({mlirType(b, g.outType), batch * g.m * g.n});
}

Status emitTileStores(OpBuilder& b, Location loc, func::FuncOp fn, const ir::GemmInfo& g, const Epilogue& e, Value tid,
                      int64_t threads, int64_t BM, int64_t BN, Value batch, Value m0, Value n0,
                      const std::function<Value(Value, Value, Value)>& accOf, Value runtimeM, Value elBegin,
                      int64_t elCount) {
  gpuir::Idx ix{b, loc};
  Value out = fn.getArgument(unsigned(e.outArg));
  Type outT = cast<MemRefType>(out.getType()).getElementType();
  Status failure;
  const int64_t count = elBegin ? elCount : BM * BN;
  gpuir::forLoop(b, loc, ix.c(0), ix.c(ceilDiv(count, threads)), 1, [&](Value it) {
    Value el = ix.add(ix.mul(it, threads), tid);
    if (elBegin) el = ix.add(elBegin, el);
    Value r = ix.div(el, BN), col = ix.rem(el, BN);
    Value row = ix.add(m0, r), gcol = ix.add(n0, col);
    Value inside = ix.band(runtimeM ? ix.lt(row, runtimeM) : ix.lt(row, g.m), ix.lt(gcol, g.n));
    if (count % threads) inside = ix.band(inside, ix.lt(el, BM * BN));
    gpuir::guarded(b, loc, inside, [&] {
      Value acc = accOf(el, r, col);
      Value val = acc;
      if (e.present) {
        auto coordOf = [&](int dim) { return dim == e.rowDim ? row : dim == e.colDim ? gcol : batch; };
        ExprCallbacks cb;
        // Scalar code (no vector unrolling to mistype it): our own 2^t, which also keeps libdevice's
        // rounding functions out of the kernel.
        cb.bitExp2 = true;
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
            Value idx = ix.c(0);
            for (size_t d = 0; d < o.op.dims.size(); ++d)
              if (o.strides[d] && o.op.dims[d] >= 0) idx = ix.add(idx, ix.mul(coordOf(o.op.dims[d]), o.strides[d]));
            return memref::LoadOp::create(b, loc, fn.getArgument(unsigned(o.arg)), ValueRange{idx});
          }
          return Value();
        };
        cb.indexVar = [&](const std::string& v) { return coordOf(std::stoi(v.substr(1))); };
        auto v = emitExpr(b, loc, e.region.values[0], cb);
        if (!v.ok()) {
          failure = v.takeError();
          return;
        }
        val = *v;
      }
      if (val.getType() != outT) val = arith::TruncFOp::create(b, loc, outT, val);
      Value o = ix.add(ix.mul(batch, g.m * g.n), ix.add(ix.mul(row, g.n), gcol));
      memref::StoreOp::create(b, loc, val, out, ValueRange{o});
    });
  });
  return failure;
}

}  // namespace tessera::codegen::gemm
