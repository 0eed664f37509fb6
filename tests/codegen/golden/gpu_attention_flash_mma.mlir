// Golden IR of GPU attention, strategy flash-mma (codegen/nvidia/gpu_attention_mma.cpp): FlashAttention-2
// on mma.sync m16n8k16, a warp per 16 query rows, K/V through a cp.async ring in padded shared
// rows (dynamic shared memory), online softmax with quad shuffles. Built at the lane level: the
// mapped kernel is what the strategy emits.
// COMPILE: --target sm_80 --emit mlir --config strategy=flash-mma,BQ=64,BK=64,DSPLIT=1,STAGES=2 attention --batch 1 --heads 2 --seq 128 --head-dim 64 --dtype f16

// CHECK-LABEL: func.func @kernel(
// CHECK-SAME: memref<1x2x128x64xf16>
// seq/BQ x heads blocks of BQ/16 = 4 warps; Q (BQ x D) and STAGES x 2 K/V tiles of BK x (D + 8)
// halves: (64 x 72 + 2 x 2 x 64 x 72) x 2 bytes = 46080.
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c2, {{.*}} = %c2, {{.*}} = %c1) threads({{.*}}) in ({{.*}} = %c128, {{.*}} = %c1, {{.*}} = %c1) dynamic_shared_memory_size %c46080_i32
// CHECK: gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
// CHECK-NEXT: memref.view {{.*}} to memref<64x72xf16, #gpu.address_space<workgroup>>
// CHECK-NEXT: memref.view {{.*}} to memref<2x64x72xf16, #gpu.address_space<workgroup>>
// CHECK-NEXT: memref.view {{.*}} to memref<2x64x72xf16, #gpu.address_space<workgroup>>
// Q stays in registers: ldmatrix x4 over D/16 = 4 steps.
// CHECK-COUNT-4: nvgpu.ldmatrix %view[{{.*}}] {numTiles = 4 : i32, transpose = false} : memref<64x72xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
// The key-block loop (128/BK = 2) carries, per thread, the output fragments (D/8 x 4 = 32 f32)
// plus the running max and sum of its two rows.
// CHECK: scf.for %{{.*}} = %c0 to %c2 step %c1 iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32) {
// The next stage's K and V rows by cp.async of 8 halves, then wait for this one.
// CHECK: nvgpu.device_async_copy %arg1[{{.*}}], %view_3[{{.*}}], 8 {bypassL1} : memref<1x2x128x64xf16> to memref<2x64x72xf16, #gpu.address_space<workgroup>>
// CHECK: nvgpu.device_async_copy %arg2[{{.*}}], %view_4[{{.*}}], 8 {bypassL1} : memref<1x2x128x64xf16> to memref<2x64x72xf16, #gpu.address_space<workgroup>>
// CHECK: nvgpu.device_async_wait %{{.*}} {numGroups = 1 : i32}
// CHECK-NEXT: gpu.barrier
// S = Q K^T: (BK/8) x (D/16) = 32 MMAs, K fragments by ldmatrix x2.
// CHECK-COUNT-32: nvvm.mma.sync A[{{.*}}] B[{{.*}}] C[{{.*}}] {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, shape = #nvvm.shape<m = 16, n = 8, k = 16>}
// CHECK-NOT: nvvm.mma.sync
// The row max and sum across the quad that holds a row.
// CHECK: gpu.shuffle  xor %{{.*}}, %c1_i32, %c32_i32 : f32
// CHECK: gpu.shuffle  xor %{{.*}}, %c2_i32, %c32_i32 : f32
// CHECK: nvvm.inline_ptx "ex2.approx.ftz.f32 $0, $1;"
// O += P V: (D/8) x (BK/16) = 32 MMAs, V fragments by transposing ldmatrix x2; S's accumulators
// are P's operand fragments (no trip through shared memory).
// CHECK: nvgpu.ldmatrix %{{.*}} {numTiles = 2 : i32, transpose = true}
// CHECK-COUNT-32: nvvm.mma.sync A[{{.*}}] B[{{.*}}] C[{{.*}}] {{.*}}shape = #nvvm.shape<m = 16, n = 8, k = 16>}
// CHECK-NOT: nvvm.mma.sync
// CHECK: gpu.barrier
// CHECK-NEXT: scf.yield
// O / sum, stored as f16 pairs.
// CHECK: arith.divf
// CHECK: vector.store %{{.*}}, %arg3[{{.*}}] : memref<1x2x128x64xf16>, vector<2xf16>
// CHECK-NOT: nvvm.mma.sync
