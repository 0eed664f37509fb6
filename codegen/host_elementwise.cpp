// Owns the host elementwise strategy: one linalg.generic (numpy broadcasting as indexing maps,
// temporaries inlined, every output in one pass) tiled along the innermost dimension and
// vectorized with masks for the tail. Knobs: VW (vector lanes), UNROLL (vectors per step),
// NT (non-temporal stores of the outputs), CHUNK (column blocks: row-broadcast operands stay in L1),
// ROWS (rows per tile, sharing each load of a row-broadcast operand), MATH (precise | fast
// approximations of the transcendental functions, expr_emitter.h).
#include "codegen/host_strategies.h"
#include "codegen/linalg_elementwise.h"
#include "codegen/expr_emitter.h"
#include "codegen/mlir_env.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"

namespace tessera::codegen {

using namespace mlir;

Expected<HostPayload> buildHostElementwise(MLIRContext* ctx, const ir::Kernel& k, const ir::Config& c, const TargetDesc&) {
  TESSERA_ASSIGN(ir::ElementwiseRegion region, ir::analyzeElementwise(k));
  TESSERA_ASSIGN(int64_t vw, c.getInt("VW"));
  TESSERA_ASSIGN(int64_t unroll, c.getInt("UNROLL"));
  TESSERA_ASSIGN(int64_t nt, c.getInt("NT"));
  TESSERA_ASSIGN(int64_t chunk, c.getInt("CHUNK"));
  if (chunk < 0) return makeError(ErrorCode::InvalidConfig, "CHUNK must be >= 0");
  // ROWS came after the other knobs: configs stored before it mean one row per tile.
  int64_t rows = 1;
  if (c.values.count("ROWS")) {
    TESSERA_ASSIGN(rows, c.getInt("ROWS"));
  }
  if (rows < 1 || rows > 16) return makeError(ErrorCode::InvalidConfig, "ROWS must be between 1 and 16");
  if (rows * vw * unroll > 1024) return makeError(ErrorCode::InvalidConfig, "ROWS*VW*UNROLL must be <= 1024");
  if (nt != 0 && nt != 1) return makeError(ErrorCode::InvalidConfig, "NT must be 0 or 1");
  int64_t threads = 1;
  if (c.values.count("THREADS")) {
    TESSERA_ASSIGN(threads, c.getInt("THREADS"));
  }
  if (threads < 1 || threads > 256) return makeError(ErrorCode::InvalidConfig, "THREADS must be between 1 and 256");
  // MATH came later too: configs without it are the precise forms.
  std::string math = "precise";
  if (c.values.count("MATH")) {
    TESSERA_ASSIGN(math, c.getStr("MATH"));
  }
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
  createKernelFunc(b, *out.module, k, &args);
  auto tensorArg = [&](const std::string& name, bool writable) -> Value {
    const ir::TensorDecl* t = k.find(name);
    auto tt = RankedTensorType::get(t->shape, mlirType(b, t->dtype));
    return bufferization::ToTensorOp::create(b, loc, tt, args[name], true, writable);
  };
  SmallVector<Value> inits;
  for (const auto& o : region.outputs) inits.push_back(tensorArg(o, true));
  auto res = buildElementwiseGeneric(
      b, loc, region, [&](const ir::ElementwiseOperand& op) { return tensorArg(op.tensor, false); }, inits,
      math == "fast");
  if (!res.ok()) return res.takeError();
  for (size_t i = 0; i < region.outputs.size(); ++i)
    bufferization::MaterializeInDestinationOp::create(b, loc, TypeRange{}, (*res)[i], args[region.outputs[i]], true, true);
  func::ReturnOp::create(b, loc);

  out.schedule = "module attributes {transform.with_named_sequence} {\n"
                 "  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.consumed}) {\n" +
                 elementwiseScheduleFragment(int(region.iter.size()), vw, unroll, "", chunk, rows,
                                             region.iter.size() >= 2 ? region.iter[region.iter.size() - 2] : 1) +
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
  TESSERA_ASSIGN(HostPayload p, buildHostElementwise(ctx.get(), k, c, hostTarget()));
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
