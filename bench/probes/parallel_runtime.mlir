// Probe kernel of bench/probes/parallel_runtime.sh: one scf.parallel of 2 chunks updating a buffer, timed per call.
func.func private @rtclock() -> f64
func.func private @printF64(f64)
func.func private @printNewline()

func.func @work(%y: memref<?xf32>, %chunks: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %y, %c0 : memref<?xf32>
  %per = arith.divui %n, %chunks : index
  %a = arith.constant 1.0001 : f32
  %b = arith.constant 0.5 : f32
  scf.parallel (%t) = (%c0) to (%chunks) step (%c1) {
    %lo = arith.muli %t, %per : index
    %hi = arith.addi %lo, %per : index
    scf.for %i = %lo to %hi step %c1 {
      %v = memref.load %y[%i] : memref<?xf32>
      %w = arith.mulf %v, %a : f32
      %z = arith.addf %w, %b : f32
      memref.store %z, %y[%i] : memref<?xf32>
    }
    scf.reduce
  }
  return
}

func.func @run(%n: index, %iters: index, %chunks: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %y = memref.alloc(%n) : memref<?xf32>
  %zero = arith.constant 0.0 : f32
  scf.for %i = %c0 to %n step %c1 { memref.store %zero, %y[%i] : memref<?xf32> }
  func.call @work(%y, %chunks) : (memref<?xf32>, index) -> ()
  %t0 = func.call @rtclock() : () -> f64
  scf.for %it = %c0 to %iters step %c1 {
    func.call @work(%y, %chunks) : (memref<?xf32>, index) -> ()
  }
  %t1 = func.call @rtclock() : () -> f64
  %d = arith.subf %t1, %t0 : f64
  %itf = arith.index_cast %iters : index to i64
  %itd = arith.sitofp %itf : i64 to f64
  %per = arith.divf %d, %itd : f64
  %us = arith.constant 1.0e6 : f64
  %r = arith.mulf %per, %us : f64
  func.call @printF64(%r) : (f64) -> ()
  func.call @printNewline() : () -> ()
  memref.dealloc %y : memref<?xf32>
  return
}

func.func @main() {
  %small = arith.constant 1024 : index
  %big = arith.constant 4194304 : index
  %i1 = arith.constant 20000 : index
  %i2 = arith.constant 50 : index
  %c2 = arith.constant 2 : index
  func.call @run(%small, %i1, %c2) : (index, index, index) -> ()
  func.call @run(%big, %i2, %c2) : (index, index, index) -> ()
  return
}
