// Owns the host elementwise strategy: one linalg.generic (numpy broadcasting as indexing maps,
// temporaries inlined, every output in one pass) tiled along the innermost dimension and
// vectorized with masks for the tail. Knobs: VW (vector lanes), UNROLL (vectors per step),
// NT (non-temporal stores of the outputs), CHUNK (column blocks: row-broadcast operands stay in L1),
// ROWS (rows per tile, sharing each load of a row-broadcast operand), MATH (precise | fast
// approximations of the transcendental functions, expr_emitter.h). With a runtime leading dimension
// (RuntimeDims::m) every tensor indexed by it is viewed at the runtime extent, so one kernel serves
// every row count up to the shape's.
#include "codegen/expr_emitter.h"
#include "hostgen/host_strategies.h"
#include "hostgen/linalg_elementwise.h"
#include "codegen/mlir_env.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace tessera::codegen {

using namespace mlir;

Expected<HostPayload> buildHostElementwise(MLIRContext* ctx, const ir::Kernel& k, const ir::Config& c, const TargetDesc&,
                                           const RuntimeDims& dims) {
  TESSERA_ASSIGN(ir::ElementwiseRegion region, ir::analyzeElementwise(k));
  if (dims.batch || dims.kv) return makeError(ErrorCode::Unsupported, "runtime sizes: an elementwise kernel takes only its leading dimension");
  const bool dynRows = dims.m;
  if (dynRows) {
    // The leading iteration dimension must be each tensor's outermost one (or absent from it):
    // then a row-major buffer of fewer rows is the same buffer cut short, and strides stay static.
    for (const auto& op : region.operands)
      for (size_t d = 1; d < op.dims.size(); ++d)
        if (op.dims[d] == 0)
          return makeError(ErrorCode::Unsupported, "runtime leading dimension: " + op.tensor +
                                                       " is indexed by it below its outermost dimension");
  }
  TESSERA_ASSIGN(HostElementwiseConfig cfg, readHostElementwiseConfig(c));
  const int64_t vw = cfg.VW, unroll = cfg.UNROLL, nt = cfg.NT, chunk = cfg.CHUNK;
  if (chunk < 0) return makeError(ErrorCode::InvalidConfig, "CHUNK must be >= 0");
  // ROWS, THREADS and MATH came after the other knobs (HostElementwiseConfig's defaults).
  const int64_t rows = cfg.ROWS;
  if (rows < 1 || rows > 16) return makeError(ErrorCode::InvalidConfig, "ROWS must be between 1 and 16");
  if (rows * vw * unroll > 1024) return makeError(ErrorCode::InvalidConfig, "ROWS*VW*UNROLL must be <= 1024");
  if (nt != 0 && nt != 1) return makeError(ErrorCode::InvalidConfig, "NT must be 0 or 1");
  const int64_t threads = cfg.THREADS;
  if (threads < 1 || threads > 256) return makeError(ErrorCode::InvalidConfig, "THREADS must be between 1 and 256");
  const std::string& math = cfg.MATH;
  if (math != "precise" && math != "fast") return makeError(ErrorCode::InvalidConfig, "MATH must be precise or fast");
  if (vw <= 0 || unroll <= 0 || vw * unroll > 1024)
    return makeError(ErrorCode::InvalidConfig, "VW and UNROLL must be positive with VW*UNROLL <= 1024");
  HostPayload out;
  out.nontemporalStores = nt == 1;
  out.threads = int(threads);
  out.parallelOuterLoops = threads > 1;
  out.reciprocalEstimates = math == "fast";
  OpBuilder b(ctx);
  Location loc = b.getUnknownLoc();
  out.module = ModuleOp::create(loc);
  std::map<std::string, Value> args;
  createKernelFunc(b, *out.module, k, &args, dynRows);
  Value rowsV;
  if (dynRows) {
    // sizes[0]: the leading dimension's extent at run time (the shape's is its upper bound).
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    Value v = memref::LoadOp::create(b, loc, args[kSizesArg], ValueRange{zero});
    rowsV = arith::IndexCastOp::create(b, loc, b.getIndexType(), v);
  }
  // `leading`: the tensor's outermost dimension is the iteration space's leading one, whose
  // extent is rowsV in a shape-generic kernel (a static-stride view of the first rows).
  std::map<std::string, Value> views;
  auto tensorArg = [&](const std::string& name, bool writable, bool leading) -> Value {
    const ir::TensorDecl* t = k.find(name);
    Value mem = args[name];
    ir::Shape shape = t->shape;
    if (dynRows && leading) {
      Value& view = views[name];
      if (!view) {
        auto mt = cast<MemRefType>(mem.getType());
        SmallVector<OpFoldResult> offs(size_t(mt.getRank()), b.getIndexAttr(0)), sizes, strides(size_t(mt.getRank()), b.getIndexAttr(1));
        sizes.push_back(rowsV);
        for (int64_t d = 1; d < mt.getRank(); ++d) sizes.push_back(b.getIndexAttr(mt.getDimSize(d)));
        view = memref::SubViewOp::create(b, loc, mem, offs, sizes, strides);
      }
      mem = view;
      shape[0] = ShapedType::kDynamic;
    }
    auto tt = RankedTensorType::get(shape, mlirType(b, t->dtype));
    return bufferization::ToTensorOp::create(b, loc, tt, mem, true, writable);
  };
  SmallVector<Value> inits;
  for (const auto& o : region.outputs) inits.push_back(tensorArg(o, true, true));
  auto res = buildElementwiseGeneric(
      b, loc, region,
      [&](const ir::ElementwiseOperand& op) { return tensorArg(op.tensor, false, !op.dims.empty() && op.dims[0] == 0); },
      inits, math == "fast");
  if (!res.ok()) return res.takeError();
  for (size_t i = 0; i < region.outputs.size(); ++i)
    bufferization::MaterializeInDestinationOp::create(b, loc, TypeRange{}, (*res)[i],
                                                      dynRows ? views[region.outputs[i]] : args[region.outputs[i]], true, true);
  func::ReturnOp::create(b, loc);

  // A runtime row count may leave a partial row tile: the fragment peels it as it does a static one.
  int64_t rowExtent = region.iter.size() >= 2 ? region.iter[region.iter.size() - 2] : 1;
  if (dynRows && region.iter.size() == 2 && rowExtent % rows == 0) rowExtent = rows + 1;
  out.schedule = "module attributes {transform.with_named_sequence} {\n"
                 "  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.consumed}) {\n" +
                 elementwiseScheduleFragment(int(region.iter.size()), vw, unroll, "", chunk, rows,
                                             region.iter.size() >= 2 ? rowExtent : 1) +
                 "    %f0 = transform.structured.match ops{[\"func.func\"]} in %root : (!transform.any_op) -> !transform.any_op\n"
                 "    transform.apply_patterns to %f0 {\n"
                 "      transform.apply_patterns.vector.lower_masked_transfers\n"
                 "      transform.apply_patterns.vector.transfer_permutation_patterns\n"
                 "      transform.apply_patterns.canonicalization\n"
                 "    } : !transform.any_op\n"
                 "    %b = transform.bufferization.one_shot_bufferize %root\n"
                 "        {bufferize_function_boundaries = true, function_boundary_type_conversion = 1 : i32, memcpy_op = \"linalg.copy\"}\n"
                 "        : (!transform.any_op) -> !transform.any_op\n"
                 "    %f = transform.structured.match ops{[\"func.func\"]} in %b : (!transform.any_op) -> !transform.any_op\n"
                 "    transform.apply_cse to %f : !transform.any_op\n"
                 "    transform.apply_patterns to %f {\n"
                 "      transform.apply_patterns.vector.transfer_permutation_patterns\n"
                 "      transform.apply_patterns.vector.lower_transfer max_transfer_rank = 1\n"
                 "      transform.apply_patterns.canonicalization\n"
                 "    } : !transform.any_op\n"
                 "    transform.yield\n  }\n}\n";
  return out;
}

}  // namespace tessera::codegen

namespace tessera::codegen {

Expected<double> elementwiseOpsPerElement(const ir::Kernel& k, const ir::Config& c) {
  if (k.family != ir::Family::Elementwise) return makeError(ErrorCode::InvalidArgument, "not an elementwise kernel");
  auto ctx = makeContext();  // outlives the payload below
  TESSERA_ASSIGN(HostPayload p, buildHostElementwise(ctx.get(), k, c, hostTarget(), {}));
  // The math approximations as the host pipeline expands them (host_lowering.cpp).
  TESSERA_TRY(approximateMath(*p.module));
  double ops = 0;
  p.module->walk([&](linalg::GenericOp g) {
    g.getBody()->walk([&](Operation* op) {
      // Floating-point arithmetic only: what the FMA peak counts. Compares, selects, bit casts
      // and integer ops issue elsewhere on most cores (or fuse: a compare + select clamp is one
      // vmaxps), so the roof is an upper bound at the FMA rate.
      if (!isa<arith::AddFOp, arith::SubFOp, arith::MulFOp, arith::DivFOp, arith::NegFOp, math::FmaOp, arith::MaximumFOp,
               arith::MinimumFOp, arith::MaxNumFOp, arith::MinNumFOp, arith::ExtFOp, arith::TruncFOp, math::SqrtOp>(op))
        return;
      if (isa<math::SqrtOp>(op)) {
        ops += 5;  // like a division
        return;
      }
      if (auto d = dyn_cast<arith::DivFOp>(op)) {
        // vdivps blocks the divider for several cycles per vector (5 on Zen 4 and Sapphire
        // Rapids at 256 bits, more at 512 or on Zen 1); the reciprocal estimate is rcp + two
        // FMAs + a multiply.
        ops += bitEnumContainsAll(d.getFastmath(), arith::FastMathFlags::arcp) ? 4 : 5;
        return;
      }
      ops += 1;
    });
  });
  return ops;
}

}  // namespace tessera::codegen
