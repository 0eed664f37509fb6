// Golden IR of the host fused-elementwise strategy (codegen/host/host_elementwise.cpp) after its
// transform schedule: gelu(x * s + b) with row-broadcast s and b, tiles of ROWS x VW lanes,
// UNROLL tiles per step, for the Zen 4 preset (16 f32 lanes), whatever the host.
// COMPILE: --host-preset zen4 --threads 1 --emit scheduled --config VW=16,UNROLL=2,CHUNK=0,NT=0,ROWS=4,MATH=precise elementwise --expr y=gelu(x*s+b) --shape 256x1024 --shape b=1024 --shape s=1024

// CHECK-LABEL: func.func @kernel(
// CHECK-SAME: memref<1024xf32>
// CHECK-SAME: memref<256x1024xf32>
// Rows in steps of ROWS = 4; columns in steps of VW x UNROLL = 32, whole rows (CHUNK = 0).
// CHECK: scf.for %{{.*}} = %c0 to %c256 step %c4 {
// CHECK-NEXT: scf.for %{{.*}} = %c0 to %c1024 step %c32 {
// UNROLL = 2 tiles of 4 x 16 per step, each fused: x read once, s and b once per tile (16 lanes
// broadcast over the 4 rows), x * s + b, gelu by the tanh form's logistic (a polynomial 2^f of
// degree 5 with MATH = precise, then a division), y written once; nothing goes through memory
// in between.
// CHECK: vector.transfer_read %{{.*}} : memref<4x16xf32, strided<[1024, 1], offset: ?>>, vector<4x16xf32>
// CHECK-NEXT: vector.load %{{.*}} : memref<16xf32, strided<[1], offset: ?>>, vector<16xf32>
// CHECK-NEXT: vector.broadcast %{{.*}} : vector<16xf32> to vector<4x16xf32>
// CHECK-NEXT: vector.load %{{.*}} : memref<16xf32, strided<[1], offset: ?>>, vector<16xf32>
// CHECK-NEXT: vector.broadcast %{{.*}} : vector<16xf32> to vector<4x16xf32>
// CHECK-NEXT: arith.mulf %{{.*}}, %{{.*}} fastmath<contract> : vector<4x16xf32>
// CHECK-NEXT: arith.addf %{{.*}}, %{{.*}} fastmath<contract> : vector<4x16xf32>
// CHECK-COUNT-5: math.fma %{{.*}}, %{{.*}}, %{{.*}} : vector<4x16xf32>
// CHECK-NOT: vector.transfer_write
// CHECK: arith.divf %{{.*}}, %{{.*}} fastmath<contract> : vector<4x16xf32>
// CHECK-NEXT: vector.transfer_write %{{.*}} {in_bounds = [true, true]} : vector<4x16xf32>, memref<4x16xf32, strided<[1024, 1], offset: ?>>
// The second tile.
// CHECK: vector.transfer_read %{{.*}} : memref<4x16xf32, strided<[1024, 1], offset: ?>>, vector<4x16xf32>
// CHECK-NEXT: vector.load %{{.*}} : memref<16xf32, strided<[1], offset: ?>>, vector<16xf32>
// CHECK-NEXT: vector.broadcast %{{.*}} : vector<16xf32> to vector<4x16xf32>
// CHECK-NEXT: vector.load %{{.*}} : memref<16xf32, strided<[1], offset: ?>>, vector<16xf32>
// CHECK-NEXT: vector.broadcast %{{.*}} : vector<16xf32> to vector<4x16xf32>
// CHECK-NEXT: arith.mulf %{{.*}}, %{{.*}} fastmath<contract> : vector<4x16xf32>
// CHECK-NEXT: arith.addf %{{.*}}, %{{.*}} fastmath<contract> : vector<4x16xf32>
// CHECK-COUNT-5: math.fma %{{.*}}, %{{.*}}, %{{.*}} : vector<4x16xf32>
// CHECK-NOT: vector.transfer_write
// CHECK: arith.divf %{{.*}}, %{{.*}} fastmath<contract> : vector<4x16xf32>
// CHECK-NEXT: vector.transfer_write %{{.*}} {in_bounds = [true, true]} : vector<4x16xf32>, memref<4x16xf32, strided<[1024, 1], offset: ?>>
// CHECK-NOT: vector.transfer_write
// CHECK: return
