// Owns the transform schedules of the GPU GEMM, templated from the verified recipes:
//   simt     mlir-recipes/emulation/s/sched2_smem.mlir: A/B K-tiles promoted to workgroup memory,
//            copies spread over the threads as 1-D vector<VEC> transfers, thread tile TM x TN as a
//            vector.contract lowered to outer products; @map hoists the C tile into registers.
//   mma.sync mlir-recipes/gpu-tensorcore-gemm/s/tc1_smem_warp.mlir (1 stage) and tc2_async_pipe.mlir
//            (2-3 stages: promote_tensor, multibuffer, cp.async groups, pipelining in @map_pipe).
//   mfma     the tc1 @pre with wave64 mapping and 16x16x16 unrolling; the C++ step
//            AMD backend's lowerWarpContracts (gpu_backend_amd_mfma.cpp) replaces the contracts after @map.
// Problems are padded to the block tile by the host wrapper, so every tile is full.
#include "codegen/gpu_gemm.h"

namespace tessera::codegen::gemm {
namespace {

std::string n(int64_t v) { return std::to_string(v); }

const char* kHead = "module attributes {transform.with_named_sequence} {\n";

std::string entries(bool pipe) {
  std::string s =
      "  transform.named_sequence @pre_main(%root: !transform.any_op {transform.consumed}) {\n"
      "    %f = transform.include @pre failures(propagate) (%root) : (!transform.any_op) -> !transform.any_op\n"
      "    transform.yield\n  }\n"
      "  transform.named_sequence @map_main(%root: !transform.any_op {transform.readonly}) {\n"
      "    %f = transform.structured.match ops{[\"func.func\"]} in %root : (!transform.any_op) -> !transform.any_op\n"
      "    transform.include @map failures(propagate) (%f) : (!transform.any_op) -> ()\n"
      "    transform.yield\n  }\n";
  if (pipe)
    s += "  transform.named_sequence @map_pipe_main(%root: !transform.any_op {transform.readonly}) {\n"
         "    %f = transform.structured.match ops{[\"func.func\"]} in %root : (!transform.any_op) -> !transform.any_op\n"
         "    transform.include @map_pipe failures(propagate) (%f) : (!transform.any_op) -> ()\n"
         "    transform.yield\n  }\n";
  return s + "}\n";
}

// Block tile -> grid, K tile -> scf.for: shared by every path.
std::string tileBlockAndK(const Tiling& t) {
  return "    %mm = transform.structured.match ops{[\"linalg.matmul\"]} in %root : (!transform.any_op) -> !transform.any_op\n"
         "    %t_blk, %fa_blk = transform.structured.tile_using_forall %mm tile_sizes [" + n(t.BM) + ", " + n(t.BN) + "]\n"
         "        (mapping = [#gpu.block<y>, #gpu.block<x>]) : (!transform.any_op) -> (!transform.any_op, !transform.any_op)\n"
         "    %t_k, %loop_k = transform.structured.tile_using_for %t_blk tile_sizes [0, 0, " + n(t.BK) + "]\n"
         "        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)\n";
}

// memref.copy for the C self-copies bufferization leaves (they fold away), so that the only
// linalg.copy ops are the two that `promote` creates.
const char* kBufferize =
    "    %b = transform.bufferization.one_shot_bufferize %root\n"
    "        {bufferize_function_boundaries = true, function_boundary_type_conversion = 1 : i32}\n"
    "        : (!transform.any_op) -> !transform.any_op\n";
// promote_tensor variant: tileable linalg.copy ops for the staged tiles.
const char* kBufferizeLinalgCopy =
    "    %b = transform.bufferization.one_shot_bufferize %root\n"
    "        {bufferize_function_boundaries = true, function_boundary_type_conversion = 1 : i32, memcpy_op = \"linalg.copy\"}\n"
    "        : (!transform.any_op) -> !transform.any_op\n";

const char* kPromote =
    "    %mm_b = transform.structured.match ops{[\"linalg.matmul\"]} in %b : (!transform.any_op) -> !transform.any_op\n"
    "    %mm_p = transform.structured.promote %mm_b\n"
    "        { operands_to_promote = [0, 1], use_full_tile_buffers = [false, false],\n"
    "          memory_space = #gpu.address_space<workgroup> } : (!transform.any_op) -> !transform.any_op\n"
    "    %copies = transform.structured.match ops{[\"linalg.copy\"]} in %b : (!transform.any_op) -> !transform.any_op\n";

// The A and B copy foralls over linear thread ids, each thread moving rows of VEC elements, then
// 1-D vector transfers (the form create_async_groups and 128-bit loads want).
std::string copies(const Tiling& t) {
  return "    %cpA, %cpB = transform.split_handle %copies : (!transform.any_op) -> (!transform.any_op, !transform.any_op)\n"
         "    %cpA_t, %cpA_fa = transform.structured.tile_using_forall %cpA num_threads [" + n(t.copyA[0]) + ", " + n(t.copyA[1]) + "]\n"
         "        (mapping = [#gpu.thread<linear_dim_1>, #gpu.thread<linear_dim_0>]) : (!transform.any_op) -> (!transform.any_op, !transform.any_op)\n"
         "    %cpB_t, %cpB_fa = transform.structured.tile_using_forall %cpB num_threads [" + n(t.copyB[0]) + ", " + n(t.copyB[1]) + "]\n"
         "        (mapping = [#gpu.thread<linear_dim_1>, #gpu.thread<linear_dim_0>]) : (!transform.any_op) -> (!transform.any_op, !transform.any_op)\n"
         "    transform.structured.vectorize %cpA_t : !transform.any_op\n"
         "    transform.structured.vectorize %cpB_t : !transform.any_op\n"
         "    transform.apply_patterns to %cpA_fa {\n"
         "      transform.apply_patterns.vector.transfer_to_scf max_transfer_rank = 1 full_unroll = true\n"
         "    } : !transform.any_op\n"
         "    transform.apply_patterns to %cpB_fa {\n"
         "      transform.apply_patterns.vector.transfer_to_scf max_transfer_rank = 1 full_unroll = true\n"
         "    } : !transform.any_op\n";
}

const char* kWarpContract =
    "    transform.structured.vectorize %t_w : !transform.any_op\n"
    "    %f = transform.structured.match ops{[\"func.func\"]} in %b : (!transform.any_op) -> !transform.any_op\n"
    "    transform.apply_patterns to %f {\n"
    "      transform.apply_patterns.vector.reduction_to_contract\n"
    "      transform.apply_patterns.vector.transfer_permutation_patterns\n"
    "      transform.apply_patterns.vector.fold_arith_extension\n"
    "      transform.apply_patterns.canonicalization\n"
    "    } : !transform.any_op\n"
    "    transform.apply_cse to %f : !transform.any_op\n"
    "    transform.yield %f : !transform.any_op\n  }\n";

std::string warpTile(const Tiling& t) {
  return "    %t_w, %fa_w = transform.structured.tile_using_forall %mm_p tile_sizes [" + n(t.TM) + ", " + n(t.TN) + "]\n"
         "        (mapping = [#gpu.warp<y>, #gpu.warp<x>]) : (!transform.any_op) -> (!transform.any_op, !transform.any_op)\n";
}

// Workgroup buffers with a dealloc -> alloca -> shared/LDS globals (16-byte aligned).
std::string toGlobals(const Tiling& t, const char* handle) {
  return std::string("    transform.apply_patterns to ") + handle + " { transform.apply_patterns.memref.alloc_to_alloca size_limit(" +
         n(t.smemLimit) + ") } : !transform.any_op\n"
         "    %allocas = transform.structured.match ops{[\"memref.alloca\"]} in " + handle + " : (!transform.any_op) -> !transform.any_op\n"
         "    %allocas_t = transform.cast %allocas : !transform.any_op to !transform.op<\"memref.alloca\">\n"
         "    %get_g, %glob = transform.memref.alloca_to_global %allocas_t : (!transform.op<\"memref.alloca\">) -> (!transform.any_op, !transform.any_op)\n"
         "    %a16 = transform.param.constant 16 : i64 -> !transform.param<i64>\n"
         "    transform.annotate %glob \"alignment\" = %a16 : !transform.any_op, !transform.param<i64>\n";
}

std::string mapThreads(const Tiling& t) {
  return "    %gl = transform.gpu.map_forall_to_blocks %f { generate_gpu_launch } : (!transform.any_op) -> !transform.any_op\n"
         "    %th = transform.gpu.map_nested_forall_to_threads %gl block_dims = [" + n(t.blockX) + ", " + n(t.blockY) +
         ", 1] warp_size = " + n(t.warp) + " : (!transform.any_op) -> !transform.any_op\n"
         "    transform.apply_patterns to %th { transform.apply_patterns.canonicalization } : !transform.any_op\n"
         "    transform.apply_cse to %th : !transform.any_op\n";
}

// C becomes loop-carried registers over K (gpu-tensorcore-gemm REPORT pitfall 1: LICM, fold the
// subviews, CSE so that read/write pairs share indices, then hoist).
const char* kHoist =
    "    %f2 = transform.get_parent_op %th {op_name = \"func.func\"} : (!transform.any_op) -> !transform.any_op\n"
    "    %kl = transform.structured.match ops{[\"scf.for\"]} in %f2 : (!transform.any_op) -> !transform.any_op\n"
    "    transform.foreach %kl : !transform.any_op {\n"
    "    ^bb0(%l: !transform.any_op):\n"
    "      transform.apply_licm to %l : !transform.any_op\n"
    "    }\n"
    "    transform.apply_patterns to %f2 {\n"
    "      transform.apply_patterns.memref.fold_memref_alias_ops\n"
    "      transform.apply_patterns.canonicalization\n"
    "    } : !transform.any_op\n"
    "    transform.apply_cse to %f2 : !transform.any_op\n"
    "    %h = transform.structured.hoist_redundant_vector_transfers %f2 : (!transform.any_op) -> !transform.any_op\n"
    "    transform.apply_patterns to %h { transform.apply_patterns.canonicalization } : !transform.any_op\n"
    "    transform.apply_cse to %h : !transform.any_op\n";

std::string simt(const Tiling& t) {
  std::string s = kHead;
  s += "  transform.named_sequence @pre(%root: !transform.any_op {transform.consumed}) -> !transform.any_op {\n";
  s += tileBlockAndK(t) + kBufferize + kPromote + copies(t);
  s += "    %t_thr, %fa_thr = transform.structured.tile_using_forall %mm_p tile_sizes [" + n(t.TM) + ", " + n(t.TN) + "]\n"
       "        (mapping = [#gpu.thread<y>, #gpu.thread<x>]) : (!transform.any_op) -> (!transform.any_op, !transform.any_op)\n"
       "    transform.structured.vectorize %t_thr : !transform.any_op\n"
       "    %f = transform.structured.match ops{[\"func.func\"]} in %b : (!transform.any_op) -> !transform.any_op\n"
       "    transform.apply_patterns to %f {\n"
       "      transform.apply_patterns.vector.reduction_to_contract\n"
       "      transform.apply_patterns.vector.transfer_permutation_patterns\n"
       "      transform.apply_patterns.canonicalization\n"
       "    } : !transform.any_op\n"
       "    transform.apply_cse to %f : !transform.any_op\n"
       "    transform.apply_patterns to %f {\n"
       "      transform.apply_patterns.vector.lower_contraction lowering_strategy = \"outerproduct\"\n"
       "      transform.apply_patterns.vector.lower_outerproduct\n"
       "      transform.apply_patterns.vector.lower_transfer max_transfer_rank = 1\n"
       "      transform.apply_patterns.vector.transfer_permutation_patterns\n"
       "      transform.apply_patterns.canonicalization\n"
       "    } : !transform.any_op\n"
       "    transform.yield %f : !transform.any_op\n  }\n";
  s += "  transform.named_sequence @map(%f: !transform.any_op {transform.consumed}) {\n";
  s += toGlobals(t, "%f") + mapThreads(t) + kHoist;
  s += "    transform.yield\n  }\n";
  return s + entries(false);
}

// mma.sync with synchronous copies (tc1) and mfma: promote (i8 buffer + view), warp contract.
std::string mmaOneStage(const Tiling& t) {
  std::string s = kHead;
  s += "  transform.named_sequence @pre(%root: !transform.any_op {transform.consumed}) -> !transform.any_op {\n";
  s += tileBlockAndK(t) + kBufferize + kPromote + copies(t) + warpTile(t) + kWarpContract;
  s += "  transform.named_sequence @map(%f: !transform.any_op {transform.consumed}) {\n";
  s += toGlobals(t, "%f") + mapThreads(t);
  s += std::string("    transform.apply_patterns to %th {\n      transform.apply_patterns.gpu.unroll_vectors_subgroup_mma [") +
       (t.path == Path::Mfma ? "16, 16, 16" : "16, 8, 16") +
       "]\n      transform.apply_patterns.canonicalization\n    } : !transform.any_op\n";
  s += kHoist;
  s += "    transform.yield\n  }\n";
  return s + entries(false);
}

// mma.sync with a cp.async pipeline of `stages` buffers (tc2).
std::string mmaPipelined(const Tiling& t) {
  std::string s = kHead;
  s += "  transform.named_sequence @pre(%root: !transform.any_op {transform.consumed}) -> !transform.any_op {\n";
  s += tileBlockAndK(t);
  s += "    %va = transform.get_operand %t_k[0] : (!transform.any_op) -> !transform.any_value\n"
       "    %vb = transform.get_operand %t_k[1] : (!transform.any_op) -> !transform.any_value\n"
       "    %pa = transform.structured.promote_tensor to #gpu.address_space<workgroup> %va : !transform.any_value\n"
       "    %pb = transform.structured.promote_tensor to #gpu.address_space<workgroup> %vb : !transform.any_value\n";
  s += kBufferizeLinalgCopy;
  // bufferization leaves C self-copies that EraseSelfCopy removes only once CSE made both
  // operands one value (gpu-tensorcore-gemm REPORT §3.2)
  s += "    %fb = transform.structured.match ops{[\"func.func\"]} in %b : (!transform.any_op) -> !transform.any_op\n"
       "    transform.apply_cse to %fb : !transform.any_op\n"
       "    transform.apply_patterns to %fb { transform.apply_patterns.canonicalization } : !transform.any_op\n"
       "    transform.apply_cse to %fb : !transform.any_op\n"
       "    transform.apply_patterns to %fb { transform.apply_patterns.canonicalization } : !transform.any_op\n"
       "    %mm_p = transform.structured.match ops{[\"linalg.matmul\"]} in %b : (!transform.any_op) -> !transform.any_op\n"
       "    %copies = transform.structured.match ops{[\"linalg.copy\"]} in %b : (!transform.any_op) -> !transform.any_op\n";
  s += copies(t) + warpTile(t) + kWarpContract;
  s += "  transform.named_sequence @map(%f: !transform.any_op {transform.consumed}) {\n";
  s += mapThreads(t);
  s += "    transform.apply_patterns to %th {\n      transform.apply_patterns.gpu.unroll_vectors_subgroup_mma [16, 8, 16]\n"
       "      transform.apply_patterns.canonicalization\n    } : !transform.any_op\n";
  s += kHoist;
  s += "    %h2 = transform.apply_registered_pass \"buffer-loop-hoisting\" to %h : (!transform.any_op) -> !transform.any_op\n"
       "    %allocs = transform.structured.match ops{[\"memref.alloc\"]} in %h2 : (!transform.any_op) -> !transform.op<\"memref.alloc\">\n"
       "    %mb = transform.memref.multibuffer %allocs {factor = " + n(t.stages) + " : i64, skip_analysis} : (!transform.op<\"memref.alloc\">) -> !transform.any_op\n"
       "    transform.apply_patterns to %h2 { transform.apply_patterns.canonicalization } : !transform.any_op\n"
       "    transform.apply_cse to %h2 : !transform.any_op\n"
       "    transform.apply_patterns to %h2 { transform.apply_patterns.gpu.eliminate_barriers } : !transform.any_op\n"
       "    %h3 = transform.nvgpu.create_async_groups %h2 {bypass_l1} : (!transform.any_op) -> !transform.any_op\n"
       "    transform.apply_patterns to %h3 { transform.apply_patterns.canonicalization } : !transform.any_op\n"
       "    transform.apply_cse to %h3 : !transform.any_op\n"
       "    transform.yield\n  }\n";
  // Stage 2: the driver tagged the K loop (the scf.for holding the async copies).
  s += "  transform.named_sequence @map_pipe(%g: !transform.any_op {transform.readonly}) {\n"
       "    %kloop = transform.structured.match ops{[\"scf.for\"]} attributes{tessera.kloop} in %g : (!transform.any_op) -> !transform.any_op\n"
       "    %piped = transform.nvgpu.pipeline_shared_memory_copies failures(propagate) %kloop { depth = " + n(t.stages) +
       ", peel_epilogue }\n        : (!transform.any_op) -> !transform.any_op\n"
       "    transform.apply_patterns to %g { transform.apply_patterns.canonicalization } : !transform.any_op\n"
       "    transform.apply_cse to %g : !transform.any_op\n"
       "    %allocas = transform.structured.match ops{[\"memref.alloca\"]} in %g : (!transform.any_op) -> !transform.any_op\n"
       "    %allocas_t = transform.cast %allocas : !transform.any_op to !transform.op<\"memref.alloca\">\n"
       "    %get_g, %glob = transform.memref.alloca_to_global %allocas_t : (!transform.op<\"memref.alloca\">) -> (!transform.any_op, !transform.any_op)\n"
       "    %a16 = transform.param.constant 16 : i64 -> !transform.param<i64>\n"
       "    transform.annotate %glob \"alignment\" = %a16 : !transform.any_op, !transform.param<i64>\n"
       "    transform.yield\n  }\n";
  return s + entries(true);
}

}  // namespace

std::string schedule(const Tiling& t) {
  if (t.path == Path::Simt) return simt(t);
  if (t.path == Path::MmaSync && t.stages > 1) return mmaPipelined(t);
  return mmaOneStage(t);
}

}  // namespace tessera::codegen::gemm
