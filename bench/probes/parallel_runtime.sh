#!/usr/bin/env bash
# Probe: the cost of one parallel region (2 chunks of 512 floats, 20000 calls) and of a 16 MB
# update (50 calls) with scf.parallel lowered three ways: serial, OpenMP (libomp, what Tessera's
# host kernels use) and MLIR's async runtime (async-parallel-for). Prints microseconds per call,
# small then large, per variant. Needs mlir-22-tools and libomp-22-dev.
# Usage: bash bench/probes/parallel_runtime.sh [repeats]
set -euo pipefail
cd "$(dirname "$0")"
B=/usr/lib/llvm-22/bin L=/usr/lib/llvm-22/lib T=$(mktemp -d)
TAIL="convert-scf-to-cf,convert-arith-to-llvm,convert-index-to-llvm,finalize-memref-to-llvm,convert-func-to-llvm,convert-cf-to-llvm"
$B/mlir-opt parallel_runtime.mlir --pass-pipeline="builtin.module($TAIL,reconcile-unrealized-casts)" -o "$T/serial.mlir"
# scf-to-openmp leaves an alloca_scope around the loop body that the verifier rejects once the
# body's loops are branches; the lowering itself handles it.
$B/mlir-opt parallel_runtime.mlir --verify-each=false \
  --pass-pipeline="builtin.module(convert-scf-to-openmp{num-threads=2},$TAIL,convert-openmp-to-llvm,reconcile-unrealized-casts)" -o "$T/omp.mlir"
$B/mlir-opt parallel_runtime.mlir --pass-pipeline="builtin.module(async-parallel-for{num-workers=2 async-dispatch=false},async-to-async-runtime,async-runtime-ref-counting,async-runtime-ref-counting-opt,convert-async-to-llvm,$TAIL,reconcile-unrealized-casts)" -o "$T/async.mlir"
LIBS=$L/libmlir_c_runner_utils.so,$L/libmlir_runner_utils.so,$L/libomp.so,$L/libmlir_async_runtime.so
for r in $(seq "${1:-3}"); do
  for v in serial omp async; do
    echo "$v $($B/mlir-runner "$T/$v.mlir" -e main -entry-point-result=void -O3 -shared-libs=$LIBS | tr '\n' ' ')"
  done
done
rm -rf "$T"
