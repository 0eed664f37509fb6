// Owns elementwise linalg.generic construction and its schedule fragment.
#include "hostgen/linalg_elementwise.h"

#include "codegen/expr_emitter.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"

namespace tessera::codegen {

using namespace mlir;

Expected<SmallVector<Value>> buildElementwiseGeneric(OpBuilder& b, Location loc, const ir::ElementwiseRegion& region,
                                                     const std::function<Value(const ir::ElementwiseOperand&)>& operand,
                                                     ValueRange outInits, bool fastMath) {
  MLIRContext* ctx = b.getContext();
  unsigned rank = unsigned(region.iter.size());
  SmallVector<Value> ins;
  SmallVector<AffineMap> maps;
  for (const auto& op : region.operands) {
    ins.push_back(operand(op));
    SmallVector<AffineExpr> exprs;
    for (int d : op.dims) exprs.push_back(d >= 0 ? getAffineDimExpr(unsigned(d), ctx) : getAffineConstantExpr(0, ctx));
    maps.push_back(AffineMap::get(rank, 0, exprs, ctx));
  }
  for (size_t i = 0; i < outInits.size(); ++i) maps.push_back(AffineMap::getMultiDimIdentityMap(rank, ctx));
  SmallVector<utils::IteratorType> iters(rank, utils::IteratorType::parallel);
  SmallVector<Type> resTypes;
  for (Value v : outInits) resTypes.push_back(v.getType());
  Expected<int> failure = 0;
  auto generic = linalg::GenericOp::create(
      b, loc, resTypes, ins, outInits, maps, iters, [&](OpBuilder& nb, Location nl, ValueRange args) {
        ExprCallbacks cb;
        cb.fastMath = fastMath;
        cb.load = [&](const ir::Expr& l) -> Value {
          for (size_t i = 0; i < region.operands.size(); ++i) {
            const auto& op = region.operands[i];
            if (op.tensor != l.name || op.dims.size() != l.args.size()) continue;
            bool same = true;
            for (size_t d = 0; d < l.args.size() && same; ++d) {
              const auto& a = l.args[d];
              same = op.dims[d] < 0 ? (a->op == ir::Op::IConst)
                                    : (a->op == ir::Op::Var && a->name == "d" + std::to_string(op.dims[d]));
            }
            if (same) return args[i];
          }
          return Value();
        };
        cb.indexVar = [&](const std::string& v) -> Value {
          return linalg::IndexOp::create(nb, nl, uint64_t(std::stoi(v.substr(1))));
        };
        SmallVector<Value> results;
        for (size_t o = 0; o < region.values.size(); ++o) {
          auto v = emitExpr(nb, nl, region.values[o], cb);
          if (!v.ok()) {
            failure = v.takeError();
            results.push_back(args[region.operands.size() + o]);
            continue;
          }
          results.push_back(*v);
        }
        linalg::YieldOp::create(nb, nl, results);
      });
  if (!failure.ok()) return failure.takeError();
  generic->setAttr(kElementwiseTag, b.getUnitAttr());
  return SmallVector<Value>(generic->getResults().begin(), generic->getResults().end());
}

std::string elementwiseScheduleFragment(int rank, int64_t vw, int64_t unroll, const std::string& s, int64_t chunk,
                                        int64_t rows, int64_t rowExtent) {
  std::string sizes;
  for (int d = 0; d < rank; ++d)
    sizes += (d ? ", " : "") + std::to_string(d + 1 == rank ? vw : (d + 2 == rank && rows > 1 ? rows : 1));
  std::string loops;
  for (int d = 0; d < rank; ++d) loops += std::string(d ? ", " : "") + "!transform.any_op";
  std::string r = "    %ew" + s + " = transform.structured.match ops{[\"linalg.generic\"]} attributes{" + kElementwiseTag +
                  "} in %root : (!transform.any_op) -> !transform.any_op\n";
  std::string target = "%ew" + s;
  if (chunk > 0 && rank >= 2) {
    std::string zeros;
    for (int d = 0; d + 1 < rank; ++d) zeros += "0, ";
    r += "    %ewc" + s + ", %ewcl" + s + " = transform.structured.tile_using_for %ew" + s + " tile_sizes [" + zeros +
         std::to_string(chunk) + "] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)\n";
    target = "%ewc" + s;
  }
  r += "    %ewt" + s + ", %ewl" + s + ":" + std::to_string(rank) + " = transform.structured.tile_using_for " + target +
       " tile_sizes [" + sizes + "] : (!transform.any_op) -> (!transform.any_op, " + loops + ")\n";
  std::string tiles = "%ewt" + s, cols = "%ewl" + s + "#" + std::to_string(rank - 1);
  if (rank >= 2 && rows > 1 && rowExtent % rows != 0) {
    // The last row tile is partial. Peeled off, it alone is masked; otherwise every tile would
    // carry a row mask (and LLVM turns the all-true masked stores into plain ones, dropping the
    // streaming hint). The peel clones the tile and its column loop, so both are tagged first
    // and matched again after it.
    const std::string tileTag = "tessera.ew_tile" + s, colTag = "tessera.ew_cols" + s;
    r += "    transform.annotate %ewt" + s + " \"" + tileTag + "\" : !transform.any_op\n"
         "    transform.annotate " + cols + " \"" + colTag + "\" : !transform.any_op\n"
         "    %ewrf" + s + " = transform.cast %ewl" + s + "#" + std::to_string(rank - 2) +
         " : !transform.any_op to !transform.op<\"scf.for\">\n"
         "    %ewrm" + s + ", %ewrr" + s + " = transform.loop.peel %ewrf" + s +
         " : (!transform.op<\"scf.for\">) -> (!transform.any_op, !transform.any_op)\n"
         "    %ewfn" + s + " = transform.structured.match ops{[\"func.func\"]} in %root : (!transform.any_op) -> !transform.any_op\n"
         "    transform.apply_patterns to %ewfn" + s + " {\n"
         "      transform.apply_patterns.scf.for_loop_canonicalization\n"
         "      transform.apply_patterns.canonicalization\n"
         "    } : !transform.any_op\n"
         "    %ewtp" + s + " = transform.structured.match ops{[\"linalg.generic\"]} attributes{" + tileTag +
         "} in %root : (!transform.any_op) -> !transform.any_op\n"
         "    %ewcp" + s + " = transform.structured.match ops{[\"scf.for\"]} attributes{" + colTag +
         "} in %root : (!transform.any_op) -> !transform.any_op\n";
    tiles = "%ewtp" + s;
    cols = "%ewcp" + s;
  }
  r += "    transform.structured.vectorize " + tiles + " vector_sizes [" + sizes + "] : !transform.any_op\n";
  // Unrolling (not wider vectors) gives the ILP: vector<VW*UNROLL> values spill once they
  // outgrow the register file (measured: 256 lanes ran at a third of 64).
  if (unroll > 1) r += "    transform.loop.unroll " + cols + " {factor = " + std::to_string(unroll) + "} : !transform.any_op\n";
  return r;
}

}  // namespace tessera::codegen
