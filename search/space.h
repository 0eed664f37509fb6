// Owns the schedule spaces: per-family rules deriving knobs, their legal domains and the
// default config from (kernel, target). The search samples from these; `tessera run` without
// --config uses the default.
#pragma once

#include "ir/ir.h"
#include "ir/schedule.h"
#include "support/status.h"
#include "targets/target_desc.h"

namespace tessera::search {

Expected<ir::Space> makeSpace(const ir::Kernel& k, const TargetDesc& t);

// Family rules (one file each).
Expected<ir::Space> gemmHostSpace(const ir::Kernel& k, const TargetDesc& t);
Expected<ir::Space> elementwiseHostSpace(const ir::Kernel& k, const TargetDesc& t);
Expected<ir::Space> attentionHostSpace(const ir::Kernel& k, const TargetDesc& t);

// The BLIS blocking of a host (Low et al., TOMS 2016) for an M x N GEMM: the register tile
// MR x NR from the vector registers and the FMA pipes (latency x issue rate accumulators), KC from
// the L1, NC from the L2, MC from the L3 (names as in Tessera's row-major loops: this is BLIS on
// Cᵀ, so BLIS's mc is our NC and its nc our MC). pairBytes > 0: the dot kernels, whose packed
// elements are bf16 pairs of that size.
struct GemmBlocking {
  int64_t MR = 8, NR = 32, KC = 256, NC = 1024, MC = 4096;
};
GemmBlocking hostGemmBlocking(const TargetDesc& t, int64_t m, int64_t n, int64_t pairBytes = 0);

// Default thread count of a kernel of `work` units on target `t`: all of t.units once each thread
// gets `workPerThread` (the constants below, chosen by measuring the kernels on one thread against
// two: opening and joining an OpenMP region measured 20-160 us on a shared 2-core VM), fewer below. Fixed work
// units, not measured peaks: defaults must not move between runs.
// A matrix-vector product (a GEMM of one or two rows): 32 Mi flops a thread (at 6 Mi, 1x4096x4096
// went to blis on two threads, 1.9x slower than plain on one).
inline constexpr double kFlopsPerThread = double(1 << 25);
// Attention: 1 Mi flops a thread, since its threads share one parallel loop over every query block
// of the call (before, one loop per kv head: 32 Mi). Two Sapphire Rapids cores against one,
// `tessera run --threads 2 --config THREADS=1|2 attention`: 1x1x128x64 causal (2.1 Mi flops) 27.3
// -> 21.4 us, 1x4x128x64 causal 108.9 -> 68.1, 1x4x64x64 43.2 -> 31.2; 1x1x64x64 (1 Mi) 11.0 -> 9.9,
// 1x1x32x64 (0.26 Mi) 2.6 -> 2.7.
inline constexpr double kAttentionFlopsPerThread = double(1 << 20);
// GEMM: 6 Mi flops a thread (~30 us on one Sapphire Rapids core, ~60 us on an AVX2 one). Measured on
// 2 Sapphire Rapids cores against one: blis on two threads ran 1.25-1.6x plain on one at 192^3 -
// 320^3, and tied at 160^3 (docs/journal.md, "Two threads on small cubes").
inline constexpr double kGemmFlopsPerThread = double(6 << 20);
// blis f32 on an AVX-512 host: 768 Ki flops a thread, so two threads from ~1.6 Mflops (OpenBLAS
// takes both cores from ~0.5). Two Zen 5 cores, `tessera run --threads 2`, the one-thread default
// against blis on two, each twice, interleaved: 100x300x50 12.1 -> 9.9-10.1 us, 128x200x40 8.6 ->
// 6.7-6.9, 64x256x64 8.3 -> 6.7, 120x250x30 7.5-7.6 -> 6.0, 128x256x64 16.3-16.7 -> 10.6-10.7,
// 96x384x96 27.5 -> 16.8, 200x200x100 33 -> 23.6; at ~1 Mflops a tie (128x256x16 4.1 against
// 4.2-4.3, 256x256x8 5.9-6.0 against 5.8-6.6; 70x300x30 5.5 -> 5.0 stays on one).
inline constexpr double kBlisAvx512FlopsPerThread = double(3 << 18);
// blis on several threads: the least work a thread gets from one K block (32 Mi flops, ~160 us on
// a Sapphire Rapids core) before the default merges K blocks (space_gemm.cpp).
inline constexpr double kBlisKBlockFlops = double(1 << 25);
// nvec past 64 rows (few columns; its threads split the rows, no packing to share): 320 Ki flops a
// thread, so two threads from ~69^3. Two Sapphire Rapids cores against one, `tessera run
// --threads 2`: 120^3 16.8 -> 11.0 us, 150^3 38.8 -> 23.3, 176^3 55.3 -> 35.1, 100^3 10.1 -> 7.8.
// Two Zen 5 cores, nvec on one thread against two, two runs each: 72^3 2.95 -> 2.35 us, 80^3 4.1
// -> 3.1, 96^3 6.9-7.0 -> 5.0, 100^3 8.0 -> 5.8, 112^3 10.9-11.0 -> 6.6; 64^3 (stays on one) 2.03
// against 2.1-2.7. (1.5 Mi until 2026-12-01 kept 72-112^3 on one thread.)
inline constexpr double kNvecFlopsPerThread = double(5 << 16);
// kvec (a few columns, bound by reading A) with AVX-512: a thread per 256 KiB of A, so two threads
// from 512 KiB. Two Zen 5 cores, `tessera run --threads 2`, THREADS 1 against 2, three runs each,
// interleaved: 1000x1x1000 36.5-37.0 -> 21.5-22.1 us, 512x1x512 8.6-9.2 -> 5.3, 256x1x1024
// 8.5-9.9 -> 5.3-5.5, 2048x1x512 43.5 -> 22.0, 300x2x3000 39-40 -> 21-22, 1000x4x1000 72-73 ->
// 38-39, 384x2x384 4.7-4.9 -> 3.4; below it two threads win less or lose: 256x1x256 2.1 against
// 1.9, 200x4x400 3.8 against 3.1, 128x8x256 2.4 against 4.8-5.6, 100x1x100 0.22 against 0.91.
inline constexpr double kKvecBytesPerThread = double(1 << 18);
inline constexpr double kBytesPerThread = double(1 << 21);  // elementwise: bytes read + written
int64_t defaultThreads(const TargetDesc& t, double work, double workPerThread);
// THREADS values a host space offers: powers of two below t.units, and t.units.
std::vector<ir::KnobValue> hostThreadDomain(const TargetDesc& t);

// Narrows knob domains: "MC=32|64|128,schedule=packed" keeps only those values (each must be
// in the knob's domain); the defaults move to the first kept value when theirs was dropped.
Expected<ir::Space> restrictSpace(const ir::Space& s, const std::string& spec);

// Values of `all` below `limit`, plus the smallest one at or above it: larger tiles would all
// behave like that one (they are clamped to the problem), so they are not separate choices.
std::vector<ir::KnobValue> clampDomain(const std::vector<int64_t>& all, int64_t limit);

// The largest integer value of `dom` that is <= want (the smallest one when none is).
int64_t pickAtMost(const std::vector<ir::KnobValue>& dom, int64_t want);

}  // namespace tessera::search
