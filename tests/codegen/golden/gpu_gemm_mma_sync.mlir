// Golden IR of the GPU GEMM on tensor cores through mma.sync (codegen/gpu_gemm.cpp, sm_80, f16
// inputs, f32 accumulation): the mapped kernel, after the schedule's @map step, as ptxas gets it
// lowered further.
// COMPILE: --target sm_80 --emit mlir --config strategy=mma,BM=64,BN=64,BK=32,TM=32,TN=32,VEC=8,STAGES=2 gemm --m 256 --n 256 --k 256 --dtype f16

// CHECK-LABEL: func.func @kernel(
// The grid: 256/BM x 256/BN blocks; (BM/TM) x (BN/TN) = 4 warps as 64 x 2 threads.
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c4, {{.*}} = %c4, {{.*}} = %c1) threads({{.*}}) in ({{.*}} = %c64, {{.*}} = %c2, {{.*}} = %c1)
// STAGES = 2 shared-memory copies of the A tile (BM x BK) and of the B tile (BK x BN).
// CHECK: memref.get_global @{{.*}} : memref<2x64x32xf16, 3>
// CHECK-NEXT: memref.get_global @{{.*}} : memref<2x32x64xf16, 3>
// The prologue fills the stages with cp.async of VEC = 8 halves (16 bytes), bypassing L1.
// CHECK: nvgpu.device_async_copy %arg0[{{.*}}], %{{.*}}[{{.*}}], 8 {bypassL1} : memref<256x256xf16> to memref<2x64x32xf16, 3>
// CHECK: nvgpu.device_async_copy %arg1[{{.*}}], %{{.*}}[{{.*}}], 8 {bypassL1} : memref<256x256xf16> to memref<2x32x64xf16, 3>
// The K loop, two stages ahead (256 - 2 x 32 = 192), carries (TM/16) x (TN/8) = 8 accumulator
// fragments of m16n8 and the stages' copy tokens.
// CHECK: scf.for %{{.*}} = %c0 to %c192 step %c32 iter_args({{.*}}) -> (vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, !nvgpu.device.async.token
// CHECK: nvgpu.device_async_wait %{{.*}} {numGroups = 1 : i32}
// CHECK: gpu.barrier
// A fragments by ldmatrix x4, B fragments by transposing ldmatrix x2.
// CHECK: nvgpu.ldmatrix %{{.*}}[{{.*}}] {numTiles = 4 : i32, transpose = false} : memref<2x64x32xf16, 3> -> vector<4x2xf16>
// CHECK: nvgpu.ldmatrix %{{.*}}[{{.*}}] {numTiles = 2 : i32, transpose = true} : memref<2x32x64xf16, 3> -> vector<2x2xf16>
// (TM/16) x (TN/8) x (BK/16) = 16 m16n8k16 MMAs per K step, then the next stage's copies.
// CHECK-COUNT-16: nvgpu.mma.sync({{.*}}) {mmaShape = [16, 8, 16]} : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
// CHECK-NOT: nvgpu.mma.sync
// CHECK: nvgpu.device_async_copy
// CHECK: scf.yield
// The two stages still in flight drain after the loop: 16 MMAs each.
// CHECK: nvgpu.device_async_wait %{{.*}} {numGroups = 1 : i32}
// CHECK-COUNT-16: nvgpu.mma.sync({{.*}}) {mmaShape = [16, 8, 16]}
// CHECK: nvgpu.device_async_wait %{{.*}} {numGroups = 0 : i32}
// CHECK-COUNT-16: nvgpu.mma.sync({{.*}}) {mmaShape = [16, 8, 16]}
// CHECK-NOT: nvgpu.mma.sync
// The f32 accumulators go to C as pairs.
// CHECK: vector.store %{{.*}}, %arg2[{{.*}}] : memref<256x256xf32>, vector<2xf32>
