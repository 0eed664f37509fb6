// Golden IR of the host GEMM `blis` strategy (codegen/host/host_gemm_blis.cpp): explicit BLIS loops
// with packed A and B panels and an MR x NR register micro-kernel, for a fixed machine (the Zen 4
// preset: 16 f32 lanes) so that the text does not depend on the host that runs the test.
// COMPILE: --host-preset zen4 --threads 1 --emit payload --config schedule=blis,MC=48,NC=128,KC=64,MR=6,NR=32 gemm --m 256 --n 256 --k 256

// CHECK-LABEL: func.func @kernel(
// CHECK-SAME: memref<256x256xf32>
// The packed panels: A as MC/MR slivers of MR x KC, B as slivers of KC x NR.
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<8x6x64xf32>
// CHECK-NEXT: memref.alloc() {alignment = 64 : i64} : memref<4x64x32xf32>
// The MC loop over the full row blocks (256 = 5 x 48 + 16).
// CHECK: scf.for %{{.*}} = %{{.*}} to %c240 step %c48 {
// Packing A: vectors of 16 lanes into the A panel.
// CHECK: vector.store %{{.*}}, %alloc[{{.*}}] : memref<8x6x64xf32>, vector<16xf32>
// Packing B into the B panel, row by row of B (each row's columns to the panels in turn), the row
// four ahead prefetched a cache line at a time (NR = 32: two lines).
// CHECK: memref.prefetch %arg1[{{.*}}], read, locality<3>, data : memref<256x256xf32>
// CHECK-NEXT: arith.constant 16 : index
// CHECK-NEXT: arith.addi
// CHECK-NEXT: memref.prefetch %arg1[{{.*}}], read, locality<3>, data : memref<256x256xf32>
// CHECK: vector.store %{{.*}}, %alloc_0[{{.*}}] : memref<4x64x32xf32>, vector<16xf32>
// The micro-tiles: MR rows by NR columns.
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c6 {
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c32{{(_[0-9]+)?}} {
// C's lines of the micro-tile prefetched for writing (MR rows x NR/16 vectors), so that the earlier
// K blocks' sums arrive while the FMAs run...
// CHECK-COUNT-12: memref.prefetch %arg2[{{.*}}], write, locality<3>, data : memref<256x256xf32>
// The micro-kernel: KC steps carrying MR x NR/16 = 12 accumulators in registers, from zero...
// CHECK: scf.for %{{.*}} = %{{.*}} to %c64{{(_[0-9]+)?}} step %{{.*}} iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
// ...each step loads NR/16 = 2 vectors of the B panel and MR = 6 scalars of the A panel, and
// does 12 FMAs.
// CHECK-COUNT-2: vector.load %alloc_0[{{.*}}] : memref<4x64x32xf32>, vector<16xf32>
// CHECK: memref.load %alloc[{{.*}}] : memref<8x6x64xf32>
// CHECK-COUNT-12: vector.fma {{.*}} : vector<16xf32>
// CHECK-NOT: vector.fma
// CHECK: scf.yield
// The accumulators go to C once per micro-tile, each added to the sums C holds (none in the first
// K block: the select takes zero there).
// CHECK: %[[OLD:.*]] = vector.load %arg2[{{.*}}] : memref<256x256xf32>, vector<16xf32>
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<16xf32>
// CHECK-NEXT: %[[PREV:.*]] = arith.select %{{.*}}, %[[ZERO]], %[[OLD]] : vector<16xf32>
// CHECK-NEXT: %[[SUM:.*]] = arith.addf %{{.*}}#0, %[[PREV]] : vector<16xf32>
// CHECK-NEXT: vector.store %[[SUM]], %arg2[{{.*}}] : memref<256x256xf32>, vector<16xf32>
// CHECK-COUNT-11: vector.store %{{.*}}, %arg2[{{.*}}] : memref<256x256xf32>, vector<16xf32>
