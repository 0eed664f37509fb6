// Owns the host GEMM strategy: the linalg payload (batch loop, transposes via indexing maps,
// f16/bf16 inputs accumulated in f32, elementwise epilogue) and its transform schedule, one of
//   plain  — cache tiles [MC, NC, KC], register tile MR x NR kept in registers across k
//            (recipe schedules/sched_cpu.mlir); best while operands fit in cache;
//   packed — BLIS-style: A and B micro-panels padded and hoisted into packed buffers
//            (mlir-recipes/cpu-gemm-packed, pack_hoist.mlir: ≈1.0x OpBLAS at 1024³–2048³).
// Knobs: schedule, MC, NC, KC, MR, NR, KU (unroll of the k micro-loop), ORDER (ij: ir outer).
#include <algorithm>

#include "codegen/expr_emitter.h"
#include "hostgen/host_gemm_kvec.h"
#include "hostgen/host_gemm_nvec.h"
#include "hostgen/host_strategies.h"
#include "hostgen/linalg_elementwise.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace tessera::codegen {

using namespace mlir;

namespace {

struct GemmKnobs {
  std::string schedule;
  int64_t MC, NC, KC, MR, NR, KU;
  bool ijOrder;
};

Expected<GemmKnobs> readKnobs(const HostGemmConfig& c) {
  GemmKnobs k;
  k.schedule = c.schedule;
  k.MC = c.MC, k.NC = c.NC, k.KC = c.KC, k.MR = c.MR, k.NR = c.NR, k.KU = c.KU;
  const std::string& order = c.ORDER;
  auto bad = [](const std::string& m) { return makeError(ErrorCode::InvalidConfig, m); };
  if (k.schedule != "plain" && k.schedule != "packed")
    return bad("schedule must be plain, packed, blis, bf16dot, amx, kvec or nvec, got " + k.schedule);
  // The transform schedules run on one thread; THREADS > 1 is the blis family's.
  if (c.THREADS != 1) return bad("schedule " + k.schedule + " runs on one thread (THREADS=1); blis runs on several");
  if (order != "ij" && order != "ji") return bad("ORDER must be ij or ji, got " + order);
  k.ijOrder = order == "ij";
  for (auto [n, v] : {std::pair{"MC", k.MC}, {"NC", k.NC}, {"KC", k.KC}, {"MR", k.MR}, {"NR", k.NR}, {"KU", k.KU}})
    if (v <= 0) return bad(std::string(n) + " must be positive, got " + std::to_string(v));
  // Register tile limits keep the unrolled micro-kernel (MR*NR values) compilable in seconds.
  if (k.MR > 64 || k.NR > 256 || k.MR * k.NR > 4096) return bad("register tile MRxNR too large");
  if (k.KU > 16) return bad("KU must be <= 16");
  if (k.MR > k.MC) return bad("MR must not exceed MC");
  if (k.NR > k.NC) return bad("NR must not exceed NC");
  return k;
}

int64_t roundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// K blocks of equal size (1000 with KC=512 -> 500): a partial last block would be computed on
// zero padding (cpu-gemm-packed REPORT: 7-20% lost), and a multiple of KU when possible.
int64_t balancedKC(int64_t K, int64_t KC, int64_t KU) {
  KC = std::min(KC, K);
  int64_t blocks = (K + KC - 1) / KC;
  int64_t kc = (K + blocks - 1) / blocks;
  int64_t up = roundUp(kc, KU);
  return up <= std::max(KC, kc) ? up : kc;
}

RankedTensorType tensorOf(ArrayRef<int64_t> shape, Type t) { return RankedTensorType::get(shape, t); }

std::string arr(std::initializer_list<int64_t> v) {
  std::string s = "[";
  bool first = true;
  for (int64_t x : v) {
    s += (first ? "" : ", ") + std::to_string(x);
    first = false;
  }
  return s + "]";
}

}  // namespace

Expected<HostPayload> buildHostGemm(MLIRContext* ctx, const ir::Kernel& k, const ir::Config& c, const TargetDesc& t) {
  TESSERA_ASSIGN(HostGemmConfig cfg, readHostGemmConfig(c));
  if (cfg.blisFamily()) return buildHostGemmBlis(ctx, k, cfg, t);
  if (cfg.schedule == "kvec") return buildHostGemmKvec(ctx, k, cfg, t);
  if (cfg.schedule == "nvec") return buildHostGemmNvec(ctx, k, cfg, t);
  TESSERA_ASSIGN(ir::GemmInfo g, ir::analyzeGemm(k));
  TESSERA_ASSIGN(GemmKnobs kn, readKnobs(cfg));
  HostPayload out;
  OpBuilder b(ctx);
  Location loc = b.getUnknownLoc();
  out.module = ModuleOp::create(loc);
  std::map<std::string, Value> args;
  createKernelFunc(b, *out.module, k, &args);

  Type f32 = b.getF32Type();
  Type inT = mlirType(b, g.inType);
  bool batched = g.batch > 0;
  auto withBatch = [&](std::initializer_list<int64_t> d) {
    SmallVector<int64_t> s;
    if (batched) s.push_back(g.batch);
    s.append(d.begin(), d.end());
    return s;
  };
  SmallVector<int64_t> aShape = g.transA ? withBatch({g.k, g.m}) : withBatch({g.m, g.k});
  SmallVector<int64_t> bShape = g.transB ? withBatch({g.n, g.k}) : withBatch({g.k, g.n});
  SmallVector<int64_t> cShape = withBatch({g.m, g.n});
  Value a = bufferization::ToTensorOp::create(b, loc, tensorOf(aShape, inT), args[g.a], true, false);
  Value bt = bufferization::ToTensorOp::create(b, loc, tensorOf(bShape, inT), args[g.b], true, false);
  Value init;
  if (!g.hasEpilogue) init = bufferization::ToTensorOp::create(b, loc, tensorOf(cShape, f32), args[g.c], true, true);
  else init = tensor::EmptyOp::create(b, loc, cShape, f32);
  Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
  Value acc = linalg::FillOp::create(b, loc, ValueRange{zero}, ValueRange{init}).getResult(0);

  // linalg.matmul with explicit maps: transposes stay in the operand layout.
  auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
  AffineMap mapA = AffineMap::get(3, 0, g.transA ? ArrayRef<AffineExpr>{d(2), d(0)} : ArrayRef<AffineExpr>{d(0), d(2)}, ctx);
  AffineMap mapB = AffineMap::get(3, 0, g.transB ? ArrayRef<AffineExpr>{d(1), d(2)} : ArrayRef<AffineExpr>{d(2), d(1)}, ctx);
  AffineMap mapC = AffineMap::get(3, 0, {d(0), d(1)}, ctx);
  NamedAttribute maps(b.getStringAttr("indexing_maps"),
                      b.getArrayAttr({AffineMapAttr::get(mapA), AffineMapAttr::get(mapB), AffineMapAttr::get(mapC)}));
  auto matmul = [&](OpBuilder& mb, Value x, Value y, Value z) -> Value {
    return linalg::MatmulOp::create(mb, loc, TypeRange{z.getType()}, ValueRange{x, y}, ValueRange{z}, ArrayRef{maps})
        .getResult(0);
  };
  Value result;
  if (!batched) {
    result = matmul(b, a, bt, acc);
  } else {
    Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
    Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
    Value nb = arith::ConstantIndexOp::create(b, loc, g.batch);
    auto loop = scf::ForOp::create(b, loc, c0, nb, c1, ValueRange{acc},
                                   [&](OpBuilder& lb, Location ll, Value iv, ValueRange iter) {
      auto slice = [&](Value src, ArrayRef<int64_t> shape) -> Value {
        SmallVector<OpFoldResult> offs = {iv, lb.getIndexAttr(0), lb.getIndexAttr(0)};
        SmallVector<OpFoldResult> sizes = {lb.getIndexAttr(1), lb.getIndexAttr(shape[1]), lb.getIndexAttr(shape[2])};
        SmallVector<OpFoldResult> strides(3, lb.getIndexAttr(1));
        auto srcT = cast<RankedTensorType>(src.getType());
        auto resT = tensorOf({shape[1], shape[2]}, srcT.getElementType());
        return tensor::ExtractSliceOp::create(lb, ll, resT, src, offs, sizes, strides);
      };
      Value mm = matmul(lb, slice(a, aShape), slice(bt, bShape), slice(iter[0], cShape));
      SmallVector<OpFoldResult> offs = {iv, lb.getIndexAttr(0), lb.getIndexAttr(0)};
      SmallVector<OpFoldResult> sizes = {lb.getIndexAttr(1), lb.getIndexAttr(g.m), lb.getIndexAttr(g.n)};
      SmallVector<OpFoldResult> strides(3, lb.getIndexAttr(1));
      Value ins = tensor::InsertSliceOp::create(lb, ll, mm, iter[0], offs, sizes, strides);
      scf::YieldOp::create(lb, ll, ins);
    });
    result = loop.getResult(0);
  }
  if (g.hasEpilogue) {
    Value cOut = bufferization::ToTensorOp::create(b, loc, tensorOf(cShape, mlirType(b, g.outType)), args[g.c], true, true);
    auto res = buildElementwiseGeneric(
        b, loc, g.epilogue,
        [&](const ir::ElementwiseOperand& op) -> Value {
          if (op.tensor == g.acc) return result;
          const ir::TensorDecl* t = k.find(op.tensor);
          return bufferization::ToTensorOp::create(b, loc, tensorOf(t->shape, mlirType(b, t->dtype)), args[op.tensor], true,
                                                   false);
        },
        ValueRange{cOut});
    if (!res.ok()) return res.takeError();
    result = (*res)[0];
  }
  bufferization::MaterializeInDestinationOp::create(b, loc, TypeRange{}, result, args[g.c], true, true);
  func::ReturnOp::create(b, loc);

  // ---- schedule
  bool packed = kn.schedule == "packed";
  int64_t kc = balancedKC(g.k, kn.KC, kn.KU);
  int64_t mc, nc, mr, nr;
  if (packed) {
    mr = kn.MR;
    nr = kn.NR;
    mc = std::min(kn.MC, roundUp(g.m, mr));
    nc = std::min(kn.NC, roundUp(g.n, nr));
  } else {
    mc = std::min(kn.MC, g.m);
    nc = std::min(kn.NC, g.n);
    mr = std::min(kn.MR, mc);
    nr = std::min(kn.NR, nc);
  }
  bool allStatic = g.m % mc == 0 && mc % mr == 0 && g.n % nc == 0 && nc % nr == 0 && g.k % kc == 0;
  bool pad = packed || !allStatic;
  bool kLoop = kc > 1;  // a one-iteration k loop folds away under the handle (tracking-listener error)
  auto vs = [](bool trans, int64_t r, int64_t cc) { return trans ? arr({cc, r}) : arr({r, cc}); };
  std::string s = "module attributes {transform.with_named_sequence} {\n"
                  "  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.consumed}) {\n";
  if (g.hasEpilogue) s += elementwiseScheduleFragment(int(cShape.size()), 16, 4, "e");
  s += "    %mm = transform.structured.match ops{[\"linalg.matmul\"]} in %root : (!transform.any_op) -> !transform.any_op\n";
  s += "    %t1, %l1:3 = transform.structured.tile_using_for %mm tile_sizes " + arr({mc, nc, kc}) +
       " interchange = [1, 2, 0] : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op, !transform.any_op)\n";
  if (packed) s += "    transform.apply_licm to %l1#2 : !transform.any_op\n";
  s += "    %t2, %l2:2 = transform.structured.tile_using_for %t1 tile_sizes " + arr({mr, nr}) + " interchange = " +
       (kn.ijOrder ? "[0, 1]" : "[1, 0]") + " : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)\n";
  std::string mmHandle = "%t2";
  if (pad) {
    s += "    %padded, %pads, %cb = transform.structured.pad %t2 {\n"
         "      padding_values = [0.0 : " + std::string(g.inType == ir::ScalarType::F32 ? "f32" : g.inType == ir::ScalarType::F16 ? "f16" : "bf16") +
         ", 0.0 : " + std::string(g.inType == ir::ScalarType::F32 ? "f32" : g.inType == ir::ScalarType::F16 ? "f16" : "bf16") +
         ", 0.0 : f32], padding_dimensions = [0, 1, 2],\n"
         "      nofold_flags = " + std::string(packed ? "[1, 1, 0]" : "[1, 1, 1]") + ", copy_back_op = \"linalg.copy\"\n"
         "    } : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)\n"
         "    %padA = transform.get_producer_of_operand %padded[0] : (!transform.any_op) -> !transform.any_op\n"
         "    %padB = transform.get_producer_of_operand %padded[1] : (!transform.any_op) -> !transform.any_op\n";
    if (packed) {
      // B above jr, ir, ic -> Bp[NC/NR][KC][NR] in the pc loop; A above jr, ir -> Ap[MC/MR][MR][KC].
      s += "    %hB = transform.structured.hoist_pad %padB by 3 loops : (!transform.any_op) -> !transform.any_op\n"
           "    %hA = transform.structured.hoist_pad %padA by 2 loops : (!transform.any_op) -> !transform.any_op\n";
    } else {
      s += "    %padC = transform.get_producer_of_operand %padded[2] : (!transform.any_op) -> !transform.any_op\n";
    }
    mmHandle = "%padded";
  }
  // Peel the partial last row block (and column block): in the full blocks every micro-tile of C
  // is static, so its loads and stores are plain vector moves instead of masked ones (vmaskmovps
  // costs AVX2 hosts ~8 % at 1024³ with MR=6). The B panel packed above the row loop is shared by
  // the peeled and the remainder loop, so nothing is packed twice.
  bool peelM = packed && g.m % mc != 0, peelN = packed && g.n % nc != 0;
  std::string hA = packed ? "%hA" : "%padA", hB = packed ? "%hB" : "%padB", cpad = "%cpad", ccopy = "%ccopy";
  if (peelM || peelN) {
    s += "    transform.annotate %hA \"tessera.pack_a\" : !transform.any_op\n"
         "    transform.annotate %hB \"tessera.pack_b\" : !transform.any_op\n"
         "    %cpad0 = transform.structured.match ops{[\"tensor.pad\"]} in %l2#1 : (!transform.any_op) -> !transform.any_op\n"
         "    transform.annotate %cpad0 \"tessera.pad_c\" : !transform.any_op\n"
         "    %ccopy0 = transform.structured.match ops{[\"linalg.copy\"]} in %l2#1 : (!transform.any_op) -> !transform.any_op\n"
         "    transform.annotate %ccopy0 \"tessera.copy_c\" : !transform.any_op\n";
    // The remainder row block's own partial micro-tile, when MR does not divide it.
    if (peelM && (g.m % mc) % mr != 0)
      s += std::string("    %irf = transform.cast ") + (kn.ijOrder ? "%l2#0" : "%l2#1") +
           " : !transform.any_op to !transform.op<\"scf.for\">\n"
           "    %irm, %irr = transform.loop.peel %irf : (!transform.op<\"scf.for\">) -> (!transform.any_op, !transform.any_op)\n";
    if (peelM)
      s += "    %icf = transform.cast %l1#2 : !transform.any_op to !transform.op<\"scf.for\">\n"
           "    %icm, %icr = transform.loop.peel %icf : (!transform.op<\"scf.for\">) -> (!transform.any_op, !transform.any_op)\n";
    if (peelN)
      s += "    %jcf = transform.cast %l1#0 : !transform.any_op to !transform.op<\"scf.for\">\n"
           "    %jcm, %jcr = transform.loop.peel %jcf : (!transform.op<\"scf.for\">) -> (!transform.any_op, !transform.any_op)\n";
    s += "    %fp = transform.structured.match ops{[\"func.func\"]} in %root : (!transform.any_op) -> !transform.any_op\n"
         "    transform.apply_patterns to %fp {\n"
         "      transform.apply_patterns.scf.for_loop_canonicalization\n"
         "      transform.apply_patterns.canonicalization\n"
         "    } : !transform.any_op\n"
         "    %mmp = transform.structured.match ops{[\"linalg.matmul\"]} in %fp : (!transform.any_op) -> !transform.any_op\n";
    auto rematch = [&](const char* handle, const char* op, const char* tag) {
      s += std::string("    ") + handle + " = transform.structured.match ops{[\"" + op + "\"]} attributes {" + tag +
           "} in %fp : (!transform.any_op) -> !transform.any_op\n";
    };
    rematch("%hAp", "tensor.pad", "tessera.pack_a");
    rematch("%hBp", "tensor.pad", "tessera.pack_b");
    rematch("%cpadp", "tensor.pad", "tessera.pad_c");
    rematch("%ccopyp", "linalg.copy", "tessera.copy_c");
    mmHandle = "%mmp", hA = "%hAp", hB = "%hBp", cpad = "%cpadp", ccopy = "%ccopyp";
  }
  std::string kHandle;
  if (kLoop) {
    s += "    %t3, %lk = transform.structured.tile_using_for " + mmHandle +
         " tile_sizes [0, 0, 1] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)\n";
    s += "    transform.structured.vectorize %t3 : !transform.any_op\n";
    kHandle = "%lk";
  } else {
    s += "    transform.structured.vectorize " + mmHandle + " : !transform.any_op\n";
  }
  if (pad) {
    // Packing copies are tiled along k before vectorizing: one vector<MRxKC> / <KCxNR> transfer
    // per micro-panel made llc take ~4 s per candidate (measured 3.8 s -> 0.09 s at 1024³).
    const int64_t ta = std::min<int64_t>(kc, 64), tb = std::min<int64_t>(kc, 16);
    s += "    %hAt, %hAl = transform.structured.tile_using_for " + hA + " tile_sizes " + vs(g.transA, 0, ta) +
         " : (!transform.any_op) -> (!transform.any_op, !transform.any_op)\n";
    s += "    transform.structured.vectorize %hAt vector_sizes " + vs(g.transA, mr, ta) + " : !transform.any_op\n";
    s += "    %hBt, %hBl = transform.structured.tile_using_for " + hB + " tile_sizes " + vs(g.transB, tb, 0) +
         " : (!transform.any_op) -> (!transform.any_op, !transform.any_op)\n";
    s += "    transform.structured.vectorize %hBt vector_sizes " + vs(g.transB, tb, nr) + " : !transform.any_op\n";
    if (packed) {
      if (cpad == "%cpad")
        s += "    %cpad = transform.structured.match ops{[\"tensor.pad\"]} in %l2#1 : (!transform.any_op) -> !transform.any_op\n";
      s += "    transform.structured.vectorize " + cpad + " vector_sizes " + arr({mr, nr}) + " : !transform.any_op\n";
    } else {
      s += "    transform.structured.vectorize %padC vector_sizes " + arr({mr, nr}) + " : !transform.any_op\n";
    }
    if (ccopy == "%ccopy")
      s += "    %ccopy = transform.structured.match ops{[\"linalg.copy\"]} in %l2#1 : (!transform.any_op) -> !transform.any_op\n";
    s += "    transform.structured.vectorize " + ccopy + " vector_sizes " + arr({mr, nr}) + " : !transform.any_op\n";
  }
  s += "    %f0 = transform.structured.match ops{[\"func.func\"]} in %root : (!transform.any_op) -> !transform.any_op\n"
       "    transform.apply_patterns to %f0 {\n"
       "      transform.apply_patterns.vector.lower_masked_transfers\n"
       "      transform.apply_patterns.vector.reduction_to_contract\n"
       "      transform.apply_patterns.vector.transfer_permutation_patterns\n"
       "      transform.apply_patterns.tensor.fold_tensor_subset_ops_into_vector_transfers\n"
       "      transform.apply_patterns.canonicalization\n"
       "    } : !transform.any_op\n"
       "    transform.apply_cse to %f0 : !transform.any_op\n";
  if (kLoop) {
    s += "    transform.loop.hoist_loop_invariant_subsets %lk : !transform.any_op\n";
    if (kn.KU > 1) s += "    transform.loop.unroll %lk {factor = " + std::to_string(kn.KU) + "} : !transform.any_op\n";
  }
  // Packing writes each padded panel straight into the packed buffer: without this, every panel
  // went through a temporary and a second copy.
  s += "    %fe = transform.structured.match ops{[\"func.func\"]} in %root : (!transform.any_op) -> !transform.any_op\n"
       "    transform.bufferization.eliminate_empty_tensors %fe : !transform.any_op\n";
  s += "    %b = transform.bufferization.one_shot_bufferize %root\n"
       "        {bufferize_function_boundaries = true, function_boundary_type_conversion = 1 : i32, memcpy_op = \"linalg.copy\"}\n"
       "        : (!transform.any_op) -> !transform.any_op\n"
       "    %f = transform.structured.match ops{[\"func.func\"]} in %b : (!transform.any_op) -> !transform.any_op\n"
       "    transform.apply_cse to %f : !transform.any_op\n"
       "    transform.apply_patterns to %f {\n"
       "      transform.apply_patterns.vector.lower_contraction lowering_strategy = \"outerproduct\"\n"
       "      transform.apply_patterns.vector.lower_outerproduct\n"
       "      transform.apply_patterns.vector.transfer_permutation_patterns\n"
       "      transform.apply_patterns.vector.lower_transfer max_transfer_rank = 1\n"
       "      transform.apply_patterns.canonicalization\n"
       "    } : !transform.any_op\n"
       "    transform.yield\n  }\n}\n";
  out.schedule = s;
  return out;
}

}  // namespace tessera::codegen
