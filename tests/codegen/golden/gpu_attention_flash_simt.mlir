// Golden IR of GPU attention, strategy flash-simt (codegen/gpu_attention.cpp): FlashAttention on
// the FMA pipes, one query row per DSPLIT threads, K and V tiles staged in shared memory, the
// online softmax's max and sum per row in shared memory: the mapped kernel after @map.
// COMPILE: --target sm_80 --emit mlir --config strategy=flash-simt,BQ=32,BK=32,DSPLIT=2,STAGES=1 attention --batch 1 --heads 2 --seq 128 --head-dim 64 --dtype f16

// CHECK-LABEL: func.func @kernel(
// CHECK-SAME: memref<1x2x128x64xf16>
// seq/BQ x heads blocks of BQ x DSPLIT = 64 threads.
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c4, {{.*}} = %c2, {{.*}} = %c1) threads({{.*}}) in ({{.*}} = %c64, {{.*}} = %c1, {{.*}} = %c1) {
// Shared memory: the K and V tiles (BK x D), the output accumulators, the running max and sum
// per thread, and the DSPLIT partial scores of each row (DSPLIT x BQ x BK).
// CHECK: memref.get_global @{{.*}} : memref<32x64xf16, #gpu.address_space<workgroup>>
// CHECK-NEXT: memref.get_global @{{.*}} : memref<32x64xf16, #gpu.address_space<workgroup>>
// CHECK-NEXT: memref.get_global @{{.*}} : memref<8x64x4xf32, #gpu.address_space<workgroup>>
// CHECK-NEXT: memref.get_global @{{.*}} : memref<64xf32, #gpu.address_space<workgroup>>
// CHECK-NEXT: memref.get_global @{{.*}} : memref<64xf32, #gpu.address_space<workgroup>>
// CHECK-NEXT: memref.get_global @{{.*}} : memref<2x32x32xf32, #gpu.address_space<workgroup>>
// The running max starts at -1e30.
// CHECK: memref.store %{{.*}}, %{{.*}}[%thread_id_x] : memref<64xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// The key-block loop (128/BK = 4): K and V rows copied synchronously (STAGES = 1), 4 halves a copy.
// CHECK-NEXT: scf.for %{{.*}} = %c0 to %c4 step %c1 {
// CHECK: vector.load %arg1[{{.*}}] : memref<1x2x128x64xf16>, vector<4xf16>
// CHECK-NEXT: vector.store %{{.*}}, %{{.*}}[{{.*}}] : memref<32x64xf16, #gpu.address_space<workgroup>>, vector<4xf16>
// CHECK-NEXT: vector.load %arg2[{{.*}}] : memref<1x2x128x64xf16>, vector<4xf16>
// CHECK: gpu.barrier
// Each thread's share of the scores: D/DSPLIT/4 = 8 steps of 4 lanes, BK = 32 scores carried.
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c1 iter_args(%{{.*}} = %{{.*}}) -> (vector<32xf32>) {
// CHECK: vector.reduction <add>, %{{.*}} fastmath<contract> : vector<4xf32> into f32
// CHECK: scf.yield %{{.*}} : vector<32xf32>
// The DSPLIT partial scores meet in shared memory; then the row max, exp and sum.
// CHECK: vector.store %{{.*}}, %{{.*}}[{{.*}}] : memref<2x32x32xf32, #gpu.address_space<workgroup>>, vector<32xf32>
// CHECK-NEXT: gpu.barrier
// CHECK: vector.reduction <maxnumf>, %{{.*}} fastmath<contract> : vector<32xf32> into f32
// CHECK: vector.reduction <add>, %{{.*}} fastmath<contract> : vector<32xf32> into f32
// No tensor cores on this path.
// CHECK-NOT: mma.sync
// CHECK: vector.store %{{.*}}, %arg3[{{.*}}] : memref<1x2x128x64xf16>
