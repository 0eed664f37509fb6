// Owns the host GEMM space: schedule family (plain | packed | blis | bf16dot | amx), cache tiles
// MC/NC/KC, register tile MR x NR, k unroll KU, micro-loop order and THREADS, with the constraints
// measured in mlir-recipes/cpu-gemm-packed/REPORT.md §4, and defaults derived from the host's
// registers, FMA pipes and caches the way BLIS derives its blocking (Low et al., "Analytical
// modeling is enough for high-performance BLIS", TOMS 2016) — see hostGemmBlocking below.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "hostgen/host_gemm_kvec.h"
#include "hostgen/host_gemm_nvec.h"
#include "ir/families.h"
#include "ir/gemm_epilogue.h"
#include "search/space.h"
#include "search/space_util.h"

namespace tessera::search {
namespace {

using space_detail::roundUp;
int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t lanesOf(const TargetDesc& t) { return std::max(4, t.simdBits / 32); }

using space_detail::geti;

const std::vector<int64_t> kMR = {1, 2, 4, 6, 8, 12, 14};
const std::vector<int64_t> kMC = {16, 32, 48, 64, 96, 128, 192, 256, 512, 1024, 2048, 4096};
const std::vector<int64_t> kNC = {32, 64, 128, 256, 512, 1024, 2048, 4096};
const std::vector<int64_t> kKC = {16, 32, 64, 128, 256, 384, 512, 768, 1024};

// The GEMM's multiply-adds counted as two flops, every batch.
double gemmFlops(const ir::GemmInfo& g) {
  return 2.0 * double(g.m) * double(g.n) * double(g.k) * double(std::max<int64_t>(1, g.batch));
}

// Past kNvecMaxM rows nvec is offered where B has at most kNvecNarrowN columns and the packed
// kernels' panels of two vectors would pad 1/16 of them or more (see nvecByDefault).
bool nvecNarrowPays(const ir::GemmInfo& g, const TargetDesc& t) {
  const int64_t pair = 2 * lanesOf(t), padded = roundUp(g.n, pair);
  return g.n <= codegen::kNvecNarrowN && 16 * (padded - g.n) >= padded;
}

// And on several threads past kNvecMaxM rows wherever N is at most kNvecNarrowN columns (at least
// two vectors, f32), padding or not, once the work gives each thread kNvecFlopsPerThread: nvec's
// threads split the rows, each over all of B unpacked, where blis's split the column blocks, one
// or two of them at these widths (see nvecByDefault). Two Zen 5 cores, `tessera run --threads 2`,
// the default before (plain on one thread below 184^3, blis on two from it) against nvec on two,
// three runs each: 96^3 6.8-7.1 against 5.0 us, 112^3 10.6-11.1 / 6.6-6.7, 128^3 16.0-16.4 /
// 9.8-9.9 (blis on two 10.8-11.3), 160^3 31-32 / 19.0-19.2 (blis on two, its best blocking
// 22-25), 192^3 50 / 30.6 (blis 36 at its best blocking), 176^3 nvec already (26-28; blis 29-34).
// AVX-512 only: nothing was measured with AVX2's 16 registers, where the row split's tiles are
// a third the size.
bool nvecRowSplitPays(const ir::GemmInfo& g, const TargetDesc& t) {
  return t.units > 1 && t.simdBits >= 512 && g.m > codegen::kNvecMaxM && g.n <= codegen::kNvecNarrowN &&
         g.n >= 2 * lanesOf(t) && g.inType == ir::ScalarType::F32 && defaultThreads(t, gemmFlops(g), kNvecFlopsPerThread) > 1;
}

// And with AVX-512 past kNvecMaxM rows wherever B is two to six vectors wide (f32), on one thread
// too: nvec's tiles read B unpacked and A in place, where plain's 8 x 32 tiles or blis's packing
// cost more at these widths. One Zen 5 core, the default against nvec (`tessera run`, three to
// six interleaved runs each): 96^3 6.84-6.94 / 6.66-6.77 us (plain), 96x96x64 4.72-4.86 /
// 4.38-4.44 (plain), 80x96x80 4.83-4.99 / 4.66-4.85 (plain), 128x96x96 9.26-9.39 / 8.92-9.12
// (plain), 100x64x1000 55.9-56.7 / 51.0-52.8 (plain), 512x96x512 217-223 / 203-209 (blis),
// 1024x64x256 150-153 / 145-146 (blis), 4096x64x64 152 / 128-129 (blis), 200x96x300 49.1-50.3 /
// 48.8-49.0 (blis); 2048x96x128 a tie (blis), 72x96x72 4.0 against 4.1 (plain). Wider B: plain
// kept 160^3 (32.3 against 34.6) and 256x128x256 (65.7 against 67.4).
bool nvecNarrowAvx512(const ir::GemmInfo& g, const TargetDesc& t) {
  return t.simdBits >= 512 && g.m > codegen::kNvecMaxM && g.inType == ir::ScalarType::F32 && g.n >= 2 * lanesOf(t) &&
         g.n <= 6 * lanesOf(t);
}

// The schedules this host can run for this GEMM: bf16dot where vdpbf16ps exists (avx512_bf16),
// amx where AMX multiplies bf16 (amx_bf16), both for bf16 inputs only; the explicit ones only when
// they can fuse the epilogue.
std::vector<ir::KnobValue> schedules(const ir::GemmInfo& g, const TargetDesc& t) {
  std::vector<ir::KnobValue> d = {std::string("plain"), std::string("packed")};
  if (!ir::gemmEpilogueReadsRowwise(g)) return d;
  // f16/bf16 operands: the transform schedules convert element by element (25-40x slower than
  // blis at 1024^3): not worth a trial.
  if (g.inType != ir::ScalarType::F32) d.clear();
  d.push_back(std::string("blis"));
  if (g.inType == ir::ScalarType::BF16 && t.hasIsa("avx512_bf16") && t.simdBits >= 512) d.push_back(std::string("bf16dot"));
  // AMX tiles are 16 rows: below that no register tile of the space fits them.
  if (g.inType == ir::ScalarType::BF16 && t.hasIsa("amx_bf16") && g.m >= 16) d.push_back(std::string("amx"));
  // Few columns: dot products along K (A read in place, so stored M x K).
  if (g.n <= codegen::kKvecMaxN && !g.transA) d.push_back(std::string("kvec"));
  // Few rows: vectors along N, the rows of a strip in registers (B read in place, so stored K x N).
  if ((g.m <= codegen::kNvecMaxM || nvecNarrowPays(g, t) || nvecRowSplitPays(g, t) || nvecNarrowAvx512(g, t)) && !g.transB)
    d.push_back(std::string("nvec"));
  return d;
}

// kvec's register tile: MR rows x NJ columns of C, one accumulator vector each, the smaller
// operand held (MR·NJ + min(MR, NJ) + 1 registers). A tile of r x c runs at
// min(1, r·c / (latency · FMA pipes)) (enough independent sums) x min(1, 2·r·c / (pipes·(r + c)))
// (r + c loads per r·c FMAs, two loads a cycle) of the FMA peak; the tiles of M x N (whole ones
// and the partial last row and column) are weighted by their elements. The best wins; within
// 0.2 % of it, the one with more accumulators.
// kvec by default where N-vector kernels leave lanes idle (N not a multiple of the vector) or have
// one vector of B per row (their tiles then hold too few accumulators: 4096x8x4096 on AVX2, plain
// 4 x 8 ran 2.4x slower than kvec 6 x 2 in one run), and K is deep enough (4 vectors) that one
// reduction per element of C is small next to its FMAs.
bool kvecByDefault(const ir::GemmInfo& g, int64_t lanes) { return (g.n % lanes != 0 || g.n <= lanes) && g.k >= 4 * lanes; }

// nvec by default for columns of at least two vectors and few rows (M <= 16: B streams once
// and nothing is packed; 16x1024x1024 on AVX2 0.83-1.17x OpenBLAS against plain's 0.93x, 13 rows
// 1.4-1.6x), or up to kNvecMaxM rows where A, B and C fit the L1 with room to spare (24^3
// 2.2-2.4x OpenBLAS against plain's 1.8x, 40^3 1.7-1.8x; 56^3, 37 KB, ran 0.7-0.9x and stays
// with plain; 64^3 fills a 48 KB L1 exactly: one Zen 5 core, plain 2.0-2.1 us against nvec
// 1.85-1.96, OpenBLAS 1.88-1.9, so a full L1 counts as fitting). One or
// two rows of a B past the L2 are memory-bound: plain's depth blocks of 16 walk B along its rows
// (NC columns contiguous) where nvec's strips walk it down K rows of a few lines each
// (2x1024x1024 and 2x4096x1024 on AVX2: plain 1.15x faster in one run each), so with AVX2 they
// keep plain. With AVX-512 nvec's strips won there instead (one thread, nvec against plain, two
// interleaved runs each: Zen 5 1x4096x4096 1.47-1.55 against 1.88-1.92 ms, 2x4096x4096 1.90-1.94
// against 3.06-3.21, 1x2048x2048 158-163 against 206-239 us, 1x1024x1024 38 against 59-61,
// 2x1024x1024 51-52 against 53-55, 2x4096x1024 a tie, 231 against 200-239; Sapphire Rapids
// 1x4096x4096 2.52 against 3.01 ms in its small-shape run).
//
// And past kNvecMaxM rows, f32, on any number of threads (end of this comment), where N is at
// most kNvecNarrowN columns and the packed kernels' two-vector NR pads at least
// 1/16 of them: their edge panel computes the padding
// (72 columns are two panels of 32 and one of 8 in a panel of 32) where nvec's last vector is
// masked, and nvec's one or two strips read A once or twice, unpacked. One Sapphire Rapids core,
// x OpenBLAS, blis or plain -> nvec (bench/small_shapes_bench, interleaved runs): 72^3
// 0.70-0.76x -> 1.10-1.13x, 80^3 0.91x -> 1.12x, 96x72x96 0.77x -> 1.05x, 100^3 0.81x -> 0.88x,
// 176^3 1.02x -> 1.14x, 512x72x512 0.86x -> 1.19x, 1000x100x1000 0.82-0.88x -> 0.99-1.06x. Where
// NR pads little nvec lost (127^3 1.44x -> 1.25x; 96^3 0.99x -> 0.82-0.91x, 128^3 1.27x ->
// 1.05x), and past 192 columns too (200^3 1.07x -> 0.97x). With AVX2 only (x86-64-v3) 72^3 0.44x
// -> 0.75x, 120^3 0.55x -> 0.84x, 1000x100x1000 0.66x either way. On several threads nvec splits
// the rows between them, not its one or two strips, where blis splits column blocks (here one):
// two threads, x OpenBLAS on two, blis -> nvec 1000x100x1000 0.70x -> 1.23x, 512x72x512 0.70x
// -> 1.58x, 2048x80x2048 0.62x -> 0.95x; with M < N, blis against nvec's row split (same run):
// 100x176x2000 392 / 270 us, 128x150x1024 216 / 123, 80x120x800 132 / 50.
// One or two rows against a B past the L2: a matrix-vector product bound by reading B.
bool gemvPastL2(const ir::GemmInfo& g, const TargetDesc& t) {
  return g.m <= 2 && double(ir::byteSize(g.inType)) * double(g.k * g.n) > double(t.l2Bytes);
}

// B one 512-bit vector wide (N = 16 f32): nvec's tile of MR rows x one vector, MR elements of A
// broadcast against one load of B, runs at the FMA pipes' rate where kvec spends a reduction on
// every element of C. One Zen 5 core, kvec default against nvec 8 x 1 (`tessera run`, one run
// each): 8x16x2048 8.8 against 2.4 us, 16x16x1024 5.4 / 2.6, 32x16x512 3.9 / 2.3, 64x16x1024
// 12.9 / 9.5, 100x16x300 5.0 / 4.1, 256x16x256 10.6 / 8.5, 512x16x512 39.7 / 35.3, 128x16x2048
// 52 / 37.5, 2048x16x128 43 / 33.5, 1024x16x1024 169 / 160, 4096x16x4096 6.4 / 3.5 ms. With
// AVX2 (N = 8) kvec stays: the sweep kept it at 256-2048 rows.
// And with few rows (M <= 16) every B of more than 8 columns (kvec's widest tile) up to two
// vectors, where kvec, blis or plain were the default (one Zen 5 core, default -> nvec 8 rows:
// 13x13x64 0.34 -> 0.16 us (kvec), 16x13x1024 4.45 -> 2.44, 16x12x128 0.63 -> 0.30, 4x12x4096
// 11.4 -> 3.6, 8x20x1024 2.96 -> 1.84 (blis), 13x24x256 1.07 -> 0.77, 16x31x512 2.77 -> 1.95; at
// 8 columns kvec stays ahead: 8x8x2048 2.13 against 2.33, 16x8x512 0.78 / 1.16; from 64 rows
// kvec ties or wins: 64x13x256 2.40 / 2.27, 200x12x300 7.5 / 8.2). With AVX2 the sweep found
// kvec best at 16x12x1024 and 8x10x512 but nvec at 13x13x256 (1.62x) and plain at 4x12x4096: no
// one rule there.
//
// And 8-16 rows of a B at most half a vector wide and more than a quarter (5-8 columns with
// AVX-512), A stored M x K: nvec's last vector is grouped (two steps of K per vector,
// host_gemm_nvec.cpp), so each FMA does two steps' work where kvec reduces every element of C.
// One Zen 5 core, kvec default against nvec 8 rows (`tessera run`, one run each): 8x8x2048 2.18
// against 1.27 us, 16x8x512 0.82 / 0.67, 16x8x128 0.26 / 0.18, 8x8x64 0.12 / 0.07, 13x7x300 0.39 /
// 0.30. Fewer rows hold too few sums to cover the FMA latency (2x5x777 0.25 / 0.39) and narrower
// B groups four or more steps, whose rows of B cost more than kvec's reductions at 16 rows
// (16x4x1024 0.71 / 1.06, 16x2x2048 1.13 / 1.22): kvec stays there.
bool nvecOverKvec(const ir::GemmInfo& g, int64_t lanes) {
  if (lanes < 16 || g.inType != ir::ScalarType::F32) return false;
  if (g.n == lanes || (g.m <= 16 && g.n > 8 && g.n < 2 * lanes)) return true;
  return g.m >= 8 && g.m <= 16 && !g.transA && 4 * g.n > lanes && 2 * g.n <= lanes;
}

// nvec on one AVX-512 core for 17-48 rows of f32 against a B past the L2 of at least 64 vectors'
// width: B streams through once in strips while plain's 8 x 32 tiles (KC 512, NC 1024) or blis's
// packing read it in blocks. One Zen 5 core, `tessera run --threads 1`, three interleaved runs
// each, before -> after (us; ms where noted): 17x1024x1024 259-274 -> 219-250, 20x2048x512
// 437-462 -> 240-266, 32x1024x1024 543-581 -> 364-428, 40x1024x1024 729-755 -> 473-673,
// 48x1024x1024 926-983 -> 585-810, 32x4096x4096 13.5-16.2 -> 12.1-13.4 ms, 32x1024x4096 3.0-3.9
// -> 2.8-3.4 ms, 32x4096x1024 a tie. Outside it: 64 rows lost (64x1024x1024 723-777 against
// 712-1122, 64x4096x4096 13.8-14.9 against 14.3-17.5 ms), 56 a tie, a B of 512 or 768 columns
// mixed (48x512x1024 316-345 against 390-398; 40x768x768 260-275 against 221-226); on two
// threads not measured apart from the noise of this host's second vCPU, so one thread only.
constexpr int64_t kNvecFewRowsMaxM = 48;
bool nvecFewRowsPastL2(const ir::GemmInfo& g, const TargetDesc& t) {
  return t.simdBits >= 512 && t.units == 1 && g.inType == ir::ScalarType::F32 && g.m > 16 && g.m <= kNvecFewRowsMaxM &&
         g.n >= 64 * lanesOf(t) && 4.0 * double(g.k * g.n) > double(t.l2Bytes);
}

bool nvecByDefault(const ir::GemmInfo& g, int64_t lanes, const TargetDesc& t) {
  if (nvecOverKvec(g, lanes)) return true;
  const double bytes = double(ir::byteSize(g.inType)) * double(g.m * g.k + g.k * g.n) + 4.0 * double(g.m * g.n);
  if (t.simdBits < 512 && gemvPastL2(g, t)) return false;
  if (g.n < 2 * lanes) return false;
  if (g.m <= 16 || (g.m <= codegen::kNvecMaxM && bytes <= double(t.l1dBytes))) return true;
  if (nvecFewRowsPastL2(g, t)) return true;
  return g.m > codegen::kNvecMaxM && g.inType == ir::ScalarType::F32 &&
         (nvecNarrowPays(g, t) || nvecRowSplitPays(g, t) || nvecNarrowAvx512(g, t));
}

// Whether MR rows of a row-major A, read together by a register tile, evict each other from the
// L1: rows a multiple of 4 KB apart (the L1's set span on the x86 cores seen) fall into one set,
// and more of them than two thirds of its ways (8 of 12) do. One Zen 5 core, nvec x 1 vector, MR
// 14 against 8: 1024x16x1024 181 against 160 us, 64x16x1024 11.6 / 9.5, 128x16x2048 46.4 / 37.5
// (at K = 300 14 rows ran 3.8 us, 8 4.1); kvec, MR 14 against 8 (`tessera run`, one run each):
// 1024x2x1024 50 against 38-43 us, 256x1x2048 23 / 20, 4096x8x4096 3.59 / 3.17 ms (the
// sweep's best).
bool aRowsEvictEachOther(const TargetDesc& t, const ir::GemmInfo& g, int64_t mr) {
  const int64_t span = 4096, ways = std::max<int64_t>(4, t.l1dBytes / span);
  const int64_t rowBytes = g.transA ? 0 : ir::byteSize(g.inType) * g.k;
  const int64_t gcd = rowBytes ? std::gcd(rowBytes % span ? rowBytes % span : span, span) : 0;
  const int64_t rowsPerSet = gcd >= 64 ? ceilDiv(std::min(mr, g.m), span / gcd) : 1;
  // One tile of every row streams B once and copies nothing: up to all the ways pay for that
  // (one Zen 5 core, nvec, one tile against two of 8 rows: 10x8x4096 3.1 against 4.3-4.6 us,
  // 12x16x1024 1.8 / 2.5, 12x8x1024 1.06 / 1.14-1.21; 13 rows a tie, 14 rows lost: 14x8x2048 3.3
  // / 2.3).
  const int64_t limit = mr >= g.m ? ways : ways * 2 / 3;
  return mr > 1 && rowsPerSet > limit;
}

struct KvecTile {
  int64_t mr = 1, nj = 1;
};
KvecTile kvecTile(const TargetDesc& t, const ir::GemmInfo& g, const std::vector<ir::KnobValue>& mrDom,
                  const std::vector<ir::KnobValue>& njDom) {
  const double need = double(t.fmaLatency) * double(t.fmaPerCycle), pipes = std::max(1, t.fmaPerCycle);
  auto eff = [&](int64_t r, int64_t c) {
    double acc = double(r * c);
    return std::min(1.0, acc / need) * std::min(1.0, 2.0 * acc / (pipes * double(r + c)));
  };
  auto split = [](int64_t total, int64_t size) {  // (tile size, how many)
    return std::vector<std::pair<int64_t, int64_t>>{{size, total / size}, {total % size, 1}};
  };
  KvecTile best;
  double bestScore = -1;
  for (const auto& mv : mrDom)
    for (const auto& nv : njDom) {
      int64_t mr = std::get<int64_t>(mv), nj = std::get<int64_t>(nv);
      if (mr * nj + std::min(mr, nj) + 1 > t.vectorRegisters) continue;
      if (aRowsEvictEachOther(t, g, mr)) continue;
      double score = 0;
      for (auto [r, nr] : split(g.m, std::min(mr, g.m)))
        for (auto [c, nc] : split(g.n, std::min(nj, g.n)))
          if (r && c) score += eff(r, c) * double(r * c * nr * nc);
      score /= double(g.m * g.n);
      bool better = score > bestScore * 1.002 || (score > bestScore * 0.998 && mr * nj > best.mr * best.nj);
      if (better) bestScore = std::max(bestScore, score), best = {mr, nj};
    }
  return best;
}

// nvec's register tile: MR rows x NV vectors of C, the NV vectors of B held while MR elements
// of A are broadcast (MR·NV + NV + 1 registers). Scored as kvecTile: a tile of r x v runs at
// min(1, r·v / (latency · FMA pipes)) x min(1, 2·r·v / (pipes·(r + v))) of the FMA peak, the row
// tiles (whole ones and the partial last) and the column strips (whole ones and the partial last,
// its vectors counted whole: a masked lane costs as much as a useful one) weighted by their
// elements; within 2 %, while A fits half the L2, the one with fewer row tiles (each re-reads
// the strip of B, from the copy in the L1, and carries its sums between K blocks in a C tile:
// one Sapphire Rapids core, 7x512x64 one tile of 7 x 3 vectors 2.0-2.3 us against 3.6-3.9 for
// four of 2 x 8, 13x1024x1024 14 x 2 237-257 us against 316-318, 100^3 12 x 2 1.00x OpenBLAS
// against 6 x 4's 0.86-0.88x; with A past it, 1000x100x1000 14 x 2 ran 0.86x against 2 x 8's
// 0.99-1.06x: each strip re-reads A from the L3), then more vectors (each B vector serves MR
// FMAs, each broadcast of A NV), then more rows. 56^3 on AVX2, one run: 14 x 1 6.2-7.9 us
// against plain's 4.3-5.6.
struct NvecTile {
  int64_t mr = 1, nv = 1;
};
NvecTile nvecTile(const TargetDesc& t, const ir::GemmInfo& g, int64_t lanes, const std::vector<ir::KnobValue>& mrDom,
                  const std::vector<ir::KnobValue>& nvDom) {
  const double need = double(t.fmaLatency) * double(t.fmaPerCycle), pipes = std::max(1, t.fmaPerCycle);
  auto eff = [&](int64_t r, int64_t v) {
    double acc = double(r * v);
    return std::min(1.0, acc / need) * std::min(1.0, 2.0 * acc / (pipes * double(r + v)));
  };
  const int64_t vecs = ceilDiv(g.n, lanes);
  // Each strip reads all of A: with A within half the L2 that is cheap, and fewer row tiles (each
  // reading the strip of B) win; past it, fewer strips (more vectors) do.
  const bool aReread = double(ir::byteSize(g.inType)) * double(g.m * g.k) <= double(t.l2Bytes) / 2;
  // A tile of one vector broadcasts MR rows of A per load of B, so a row of A evicted from the L1
  // costs it most (aRowsEvictEachOther).
  NvecTile best;
  double bestScore = -1;
  int64_t bestMr = 0, bestNv = 0;
  for (const auto& mv : mrDom)
    for (const auto& vv : nvDom) {
      int64_t mr = std::min(std::get<int64_t>(mv), g.m), nv = std::min(std::get<int64_t>(vv), vecs);
      if (mr * nv + nv + 1 > t.vectorRegisters) continue;
      if (nv == 1 && aRowsEvictEachOther(t, g, mr)) continue;
      double score = 0;
      for (auto [r, nr] : std::vector<std::pair<int64_t, int64_t>>{{mr, g.m / mr}, {g.m % mr, 1}})
        for (auto [v, ns] : std::vector<std::pair<int64_t, int64_t>>{{nv, vecs / nv}, {vecs % nv, 1}})
          if (r && v) score += eff(r, v) * double(r * v * nr * ns);
      score = score / double(g.m * vecs) * double(g.n) / double(vecs * lanes);
      const int64_t tiles = aReread ? ceilDiv(g.m, mr) : 0, bestTiles = aReread && bestMr ? ceilDiv(g.m, bestMr) : 0;
      bool better = score > bestScore * 1.02 ||
                    (score > bestScore * 0.98 &&
                     (tiles < bestTiles || (tiles == bestTiles && (nv > bestNv || (nv == bestNv && mr > bestMr)))));
      if (better) {
        bestScore = std::max(bestScore, score), bestMr = mr, bestNv = nv;
        best = {std::get<int64_t>(mv), std::get<int64_t>(vv)};
      }
    }
  return best;
}

// The largest value of `dom` at most `want` that is a multiple of `step` or covers `whole`
// (a block of the whole dimension needs no divisibility); the smallest such value above `want`
// when none is below it.
int64_t pickLegalMultiple(const std::vector<ir::KnobValue>& dom, int64_t want, int64_t step, int64_t whole) {
  int64_t below = 0, above = 0;
  for (const auto& v : dom) {
    int64_t x = std::get<int64_t>(v);
    if (x % step && x < whole) continue;
    if (x <= want) below = std::max(below, x);
    else if (!above) above = x;
  }
  return below ? below : above ? above : pickAtMost(dom, want);
}

// The largest value of `dom` at most `want` that is a multiple of `step` and divides `whole` or
// covers it; `want` itself when none does.
int64_t pickDividing(const std::vector<ir::KnobValue>& dom, int64_t want, int64_t step, int64_t whole) {
  int64_t best = 0;
  for (const auto& v : dom) {
    const int64_t x = std::get<int64_t>(v);
    if (x <= want && x % step == 0 && (whole % x == 0 || x >= whole)) best = std::max(best, x);
  }
  return best ? best : want;
}

bool has(const std::vector<ir::KnobValue>& dom, const std::string& v) {
  return std::find(dom.begin(), dom.end(), ir::KnobValue(v)) != dom.end();
}

// Thread counts offered: powers of two below the target's units, and the units themselves.
std::vector<ir::KnobValue> threadDomain(const TargetDesc& t) {
  std::vector<ir::KnobValue> d;
  for (int64_t n = 1; n < t.units; n *= 2) d.push_back(n);
  d.push_back(int64_t(std::max(1, t.units)));
  return d;
}

// The transform schedules' register tile and row block for an M x N GEMM: 8 x 2 vectors on
// AVX-512, 6 x 2 on AVX2 (as measured for them), MR and NR moved to values that divide M and N,
// MC to a multiple of MR up to 64 that divides M (or one block covering M). `fits` says whether
// every tile is whole: plain has no packing to pad edge tiles, and a partial one costs it 12-17x
// (Zen 4, one thread, same run: 40^3 24.9 us against blis's 1.58 us, 100^3 321 us against 21 us,
// 500x37x129 1031 us against 58 us; bench/small_shapes_bench). A vector wider than N (N <= lanes)
// is one masked column block and no edge: 512x1x512 plain 42 us, blis 93 us.
struct PlainTile {
  int64_t mr = 1, nr = 1, mc = 1;
  bool fits = false;
};
PlainTile plainTile(const ir::GemmInfo& g, const std::vector<ir::KnobValue>& mrDom, const std::vector<ir::KnobValue>& nrDom,
                    const std::vector<ir::KnobValue>& mcDom, int64_t lanes, int64_t vregs) {
  PlainTile p;
  int64_t mrDef = lanes >= 16 ? 8 : 6;
  p.nr = std::min<int64_t>(2 * lanes, std::get<int64_t>(nrDom.back()));
  bool nFits = g.n % p.nr == 0 || g.n <= lanes;
  if (!nFits && g.n % lanes == 0 && std::find(nrDom.begin(), nrDom.end(), ir::KnobValue(lanes)) != nrDom.end())
    p.nr = lanes, nFits = true;
  while (mrDef * ((p.nr + lanes - 1) / lanes) + (p.nr + lanes - 1) / lanes + 1 > vregs && mrDef > 1) --mrDef;
  p.mr = pickAtMost(mrDom, mrDef);
  // The largest MR up to the default (and at least half of it) that divides M; rows fewer than
  // the default are one partial tile and no edge.
  bool mFits = g.m % p.mr == 0 || g.m <= p.mr;
  for (const auto& v : mrDom) {
    int64_t x = std::get<int64_t>(v);
    if (!mFits && x <= mrDef && x * 2 >= mrDef && g.m % x == 0) p.mr = x;
  }
  mFits = mFits || g.m % p.mr == 0;
  int64_t mcDiv = 0, mcCover = 0, mcBelow = 0, mcAbove = 0;
  for (const auto& v : mcDom) {
    int64_t x = std::get<int64_t>(v);
    if (x % p.mr && x < g.m) continue;
    if (x <= 64) mcBelow = std::max(mcBelow, x);
    else if (!mcAbove) mcAbove = x;
    if (x <= 64 && g.m % x == 0) mcDiv = std::max(mcDiv, x);
    if (x >= g.m && (!mcCover || x < mcCover)) mcCover = x;
  }
  // One block of all rows while M is small (the edge-free choice: at most 2x the 64 measured for
  // plain); else the largest divisor of M; else 64 and a partial last block.
  if (mcCover && mcCover <= 128) p.mc = mcCover;
  else if (mcDiv) p.mc = mcDiv;
  else p.mc = mcBelow ? mcBelow : mcAbove ? mcAbove : pickAtMost(mcDom, 64);
  p.fits = nFits && mFits && (p.mc >= g.m || g.m % p.mc == 0);
  return p;
}

}  // namespace

std::vector<ir::KnobValue> hostThreadDomain(const TargetDesc& t) { return threadDomain(t); }

int64_t defaultThreads(const TargetDesc& t, double work, double workPerThread) {
  // A parallel region costs a few microseconds to open and join: each thread should get enough
  // work (~100 us or more) that this is noise, so small kernels stay on one thread.
  int64_t byWork = std::max<int64_t>(1, int64_t(work / workPerThread));
  int64_t want = std::min<int64_t>(std::max(1, t.units), byWork);
  int64_t best = 1;
  for (const auto& v : threadDomain(t))
    if (std::get<int64_t>(v) <= want) best = std::get<int64_t>(v);
  return best;
}

GemmBlocking hostGemmBlocking(const TargetDesc& t, int64_t m, int64_t n, int64_t pairBytes) {
  GemmBlocking b;
  const int64_t lanes = lanesOf(t), regs = t.vectorRegisters;
  // Register tile: NR = NV vectors of B, MR broadcasts of A, MR·NV accumulators. Constraints:
  // every value in a register (MR·NV + NV + 1 <= registers), and at least latency x FMAs-per-cycle
  // independent accumulators (the FMA pipes never wait for a result). Model of one k step:
  // MR·NV FMAs against MR + NV loads, two loads per cycle, so the tile runs at
  // min(1, 2·MR·NV / (fmaPerCycle·(MR + NV))) of the FMA peak; times the useful fraction of the
  // padded M x N (a tile that does not divide M computes zero rows). The best tile wins; within
  // 0.2 % of it, the one with the most rows: the B micro-panel streams from the L2 and each of its
  // vectors serves MR FMAs (4 x 64 needs 16 B of L2 per cycle on Zen 4 and measured 78 GFLOP/s at
  // 256^3 against 113 for 8 x 32), then the one with more accumulators.
  const int64_t need = int64_t(t.fmaLatency) * t.fmaPerCycle;
  double bestScore = -1;
  for (int64_t nv : {1, 2, 4}) {
    const int64_t nr = nv * lanes;
    for (int64_t mr : kMR) {
      // (A tile smaller than the latency bound is only taken when M itself is that small, and one
      // of fewer than 4 rows only when M has fewer: each B vector streamed from the L2 serves MR
      // FMAs, and a prime M made MR=1 "pad" least: 127^3 at MR=1 ran 1.96x slower than MR=4.)
      if (mr * nv + nv + 1 > regs || (mr * nv < need && mr < std::min<int64_t>(m, kMR.back())) ||
          mr < std::min<int64_t>(m, 4))
        continue;
      double rate = std::min(1.0, 2.0 * double(mr * nv) / (double(t.fmaPerCycle) * double(mr + nv)));
      double useful = double(m) / double(roundUp(m, mr)) * double(n) / double(roundUp(n, nr));
      double score = rate * useful;
      const int64_t bnv = b.NR / lanes;
      bool better = score > bestScore * 1.002 ||
                    (score > bestScore * 0.998 && (mr > b.MR || (mr == b.MR && mr * nv > b.MR * bnv)));
      if (better) bestScore = std::max(bestScore, score), b.MR = mr, b.NR = nr;
    }
  }
  // KC from L1: the A micro-panel (MR x KC) stays in L1 while B micro-panels (KC x NR) stream
  // through it. Per unit of depth they take MR and NR elements, so of the W - 1 ways not kept for
  // C the resident panel gets C_A = floor((W - 1) / (1 + NR/MR)) (at least 1), and
  // KC = C_A · sets · line / (MR · S). S is the packed element size: 4 bytes per f32, or per
  // bf16 pair (pairBytes: the dot kernels consume two k per element).
  const int64_t line = std::max(16, t.cacheLineBytes);
  const int64_t sets1 = std::max<int64_t>(1, t.l1dBytes / (std::max(1, t.l1dWays) * line));
  int64_t ca = std::max<int64_t>(1, (t.l1dWays - 1) * b.MR / (b.MR + b.NR));
  const int64_t kPerElem = pairBytes > 0 ? 2 : 1;
  b.KC = std::max<int64_t>(16, ca * sets1 * line / (b.MR * 4) * kPerElem);
  // NC from L2: the B block (KC x NC, packed) is reused by every A micro-panel of the block; it
  // gets the L2's ways but two (the A micro-panel and C lines pass through L2 too).
  const int64_t kcElems = b.KC / kPerElem;
  b.NC = std::max<int64_t>(b.NR, int64_t(double(t.l2Bytes) * double(std::max(1, t.l2Ways - 2)) / std::max(1, t.l2Ways) /
                                         double(kcElems * 4)) / b.NR * b.NR);
  // MC from L3: the A block (MC x KC) is packed once per K block and shared by all threads.
  b.MC = std::max<int64_t>(b.MR, int64_t(double(t.l3Bytes) * double(std::max(1, t.l3Ways - 2)) / std::max(1, t.l3Ways) /
                                         double(kcElems * 4)) / b.MR * b.MR);
  return b;
}

Expected<ir::Space> gemmHostSpace(const ir::Kernel& k, const TargetDesc& t) {
  TESSERA_ASSIGN(ir::GemmInfo g, ir::analyzeGemm(k));
  const int64_t lanes = lanesOf(t), vregs = t.vectorRegisters;
  ir::Space s;
  s.family = "gemm";
  // NR: one to four vector registers wide; powers of two only (NR=48 legalizes into 3.6 GFLOP/s).
  std::vector<ir::KnobValue> nrDom = clampDomain({lanes, 2 * lanes, 4 * lanes}, g.n);
  std::vector<ir::KnobValue> schedDom = schedules(g, t);
  std::vector<int64_t> mrs = kMR;
  if (has(schedDom, "amx")) mrs.insert(mrs.end(), {16, 32});  // AMX tiles are 16 rows
  std::vector<ir::KnobValue> mrDom = clampDomain(mrs, g.m);
  std::vector<ir::KnobValue> mcDom = clampDomain(kMC, g.m);
  std::vector<ir::KnobValue> ncDom = clampDomain(kNC, g.n);
  std::vector<ir::KnobValue> kcDom = clampDomain(kKC, g.k);
  std::vector<ir::KnobValue> threadDom = threadDomain(t);
  const bool half = g.inType != ir::ScalarType::F32;
  const double flops = gemmFlops(g);
  // One or two rows (a matrix-vector product, bound by reading B once) keep the attention threshold:
  // at 6 Mi flops a thread 1x4096x4096 went to blis on two threads, 1.9x slower than plain on one
  // (packing B costs as much as the product).
  int64_t threads =
      has(schedDom, "blis") ? defaultThreads(t, flops, g.m > 2 ? kGemmFlopsPerThread : kFlopsPerThread) : 1;
  // blis itself on several AVX-512 threads from less work (kBlisAvx512FlopsPerThread); the other
  // schedules keep `threads`.
  const int64_t blisThreads = has(schedDom, "blis") && !half && g.m > 2 && t.simdBits >= 512
                                  ? std::max(threads, defaultThreads(t, flops, kBlisAvx512FlopsPerThread))
                                  : threads;

  // Schedule: the explicit kernels for half precision (the transform schedules convert f16/bf16
  // element by element: 25x slower) and for several threads; AMX, then vdpbf16ps, for bf16 where
  // the host has them. One thread of f32: plain while the operands fit the L2 or A is skinny
  // (measured: plain wins there, 32x2048x512 plain 2.7x packed) and its tiles divide the problem
  // (plainTile), and for a B of one vector's width (N <= lanes: packing it is pure overhead); the
  // BLIS loops elsewhere, whose packing pads the edge tiles.
  double bytes = 4.0 * double(g.m * g.k + g.k * g.n + g.m * g.n);
  bool skinny = g.m < 64;
  const PlainTile pt = plainTile(g, mrDom, nrDom, mcDom, lanes, vregs);
  const bool narrow = g.n <= lanes;
  // kvec: its columns per tile (NJ, its own knob; up to 8, which 32 registers hold 3 rows of).
  std::vector<ir::KnobValue> njDom;
  if (has(schedDom, "kvec"))
    for (int64_t j = 1; j <= std::min<int64_t>(g.n, 8); ++j) njDom.push_back(j);
  std::vector<ir::KnobValue> nvDom;
  if (has(schedDom, "nvec"))
    for (int64_t v : {1, 2, 3, 4, 6, 8})
      if (v == 1 || (v - 1) * lanes < g.n) nvDom.push_back(v);
  std::string sched;
  if (has(schedDom, "amx")) sched = "amx";
  else if (has(schedDom, "kvec") && kvecByDefault(g, lanes) && !(has(schedDom, "nvec") && nvecOverKvec(g, lanes))) {
    sched = "kvec";
    // A few columns: bound by reading A, which both cores read faster together; with AVX-512 its
    // rows go to every core from kKvecBytesPerThread of A a thread, however few the flops.
    if (t.simdBits >= 512)
      threads = std::max(threads, defaultThreads(t, double(ir::byteSize(g.inType)) * double(g.m * g.k) *
                                                        double(std::max<int64_t>(1, g.batch)), kKvecBytesPerThread));
  }
  else if (has(schedDom, "nvec") && nvecByDefault(g, lanes, t)) {
    sched = "nvec";
    // Past kNvecMaxM rows its threads split the rows: a second one pays from fewer flops.
    if (g.m > codegen::kNvecMaxM) threads = defaultThreads(t, flops, kNvecFlopsPerThread);
    // One or two rows of a B past the L2 (AVX-512: nvecByDefault) are bound by reading B, which
    // every core reads faster together: its column strips go to all of them (one Zen 5, nvec on
    // two threads against one, two interleaved runs: 1x1024x1024 23.6-23.9 against 38.1-38.2 us,
    // 1x2048x2048 99-110 against 157-161, 2x2048x2048 117-159 against 220-222, 1x4096x1024 104
    // against 159-166, 1x4096x4096 1.07-1.09 against 1.45 ms, 1x8192x4096 1.71-1.78 against
    // 3.27-3.32 ms).
    else if (gemvPastL2(g, t)) threads = defaultThreads(t, flops, 1);
  }
  else if (has(schedDom, "bf16dot")) sched = "bf16dot";
  else if (has(schedDom, "blis") && (half || blisThreads > 1)) sched = "blis";
  // B transposed (nn.Linear's weight, [N, K]): the transform schedules read B's vectors across its
  // rows, a strided load each; blis packs B once. From 9 rows on blis won at every shape measured
  // (one Sapphire Rapids core: 128x768x256 319 against 807 us, 16x256x256 28 against 33, 64^3 4.1
  // against 8.2); at 1-8 rows, a matrix-vector product, plain still did (8x1024x1024 405 against 562).
  else if (has(schedDom, "blis") && g.transB && g.m > 8) sched = "blis";
  // A shallow K (at most 16): each element of C takes a few FMAs, and the transform schedules'
  // tiles cost more around them than blis's loops (one Sapphire Rapids core, one run each:
  // 512x512x1 plain 37.7 us, blis 20.6; 512x512x16 71.6 against 58.2; 64x512x8 5.3 against 3.7;
  // 128x128x1 2.2 against 1.3; with AVX2 only, packed against blis: 512x512x1 35.7 against 17.7,
  // 256x256x16 20.2 against 18.4; from K = 32 on they tie or plain wins).
  else if (has(schedDom, "blis") && g.k <= 16 && !narrow && g.m > 2) sched = "blis";
  // Few columns and no kvec (N whole vectors, or K shallow): packing A costs blis one load and
  // store per element of A against N/lanes FMAs on it; plain reads A in place (1024x16x1024 on
  // AVX2, one thread, one run: blis 1119 us, plain 593 us).
  else if (g.n <= codegen::kKvecMaxN && pt.fits && !skinny) sched = "plain";
  else if (has(schedDom, "blis") && !narrow && (!pt.fits || (!skinny && bytes > double(t.l2Bytes)))) sched = "blis";
  else if (half || (!skinny && !narrow && (bytes > double(t.l2Bytes) || lanes < 16))) sched = "packed";
  else sched = "plain";
  if (sched == "plain" || sched == "packed") threads = 1;
  if (sched == "blis") threads = blisThreads;

  GemmBlocking blk = hostGemmBlocking(t, g.m, g.n, sched == "bf16dot" ? 4 : 0);
  int64_t mr = pickAtMost(mrDom, blk.MR), nr = pickAtMost(nrDom, blk.NR);
  int64_t nc = pickAtMost(ncDom, blk.NC), kc = pickAtMost(kcDom, blk.KC);
  // AMX: 2x2 tiles of 16x16 f32 (32x32 of C); A micro-panels of 32 rows x KC bf16, KC 512
  // (32 KB: within a Sapphire Rapids' 48 KB L1, the unrolled depth steps bounded at 16).
  if (sched == "amx") mr = pickAtMost(mrDom, 32), nr = pickAtMost(nrDom, 32), kc = pickAtMost(kcDom, 512);
  // blis f32 on AVX-512: 8 rows by two vectors, not the blocking's taller tie-break (12 at 2048^3,
  // 14 at 4096^3), KC and NC as the blocking gave them. Two Zen 5 cores, `gemm_bench --threads 2
  // [--config MR=8] 2048 4096`, paired runs, x OpenBLAS: 4096^3 0.945x / 0.948x -> 1.037x /
  // 1.033x; 2048^3 1.000x / 0.997x -> 1.049x / 0.996x (2-4 % faster in five paired runs the stop
  // before); KC 256 and NC 512 (the blocking's for 8 rows) at 4096^3 0.977 / 1.024 / 0.983 against
  // 1.049 / 1.007 / 1.074 with these. One thread, once C's partial sums were added after the depth
  // loop (a tie before): 4096^3 MR 14 0.980x / 0.910x, 12 0.924x / 0.935x, 8 0.990x / 0.968x;
  // 2048^3 12 0.976x / 1.004x, 8 1.042x / 1.014x; 3072^3 12 0.950x / 0.946x, 8 1.007x / 0.969x;
  // 3000^3 a tie (12 1.001x / 1.012x, 8 1.013x / 0.987x).
  if (sched == "blis" && !half && t.simdBits >= 512 && nr == 2 * lanes) mr = pickAtMost(mrDom, 8);
  // bf16dot (vdpbf16ps) takes the same 8 x 2 vectors on any thread count (the blocking's tie-break
  // picked 12 or 14 rows from 2048^3). One Zen 5, `gemm_bench --dtype bf16 [--config MR=8] 2048
  // 4096`, two paired runs, GFLOP/s: one thread 2048^3 476-480 -> 506-511, 4096^3 463-472 -> 485;
  // two threads 2048^3 908-961 -> 979-990, 4096^3 898-901 -> 989-1002.
  if (sched == "bf16dot" && nr == 2 * lanes) mr = pickAtMost(mrDom, 8);
  // Several threads: every K block of blis opens two parallel regions (A's packing, the products)
  // and joins them, so a K block shorter than kBlisKBlockFlops a thread is merged with the next
  // while the thread's B block (KC x its columns) stays within a quarter of the L2. Two Sapphire
  // Rapids cores, `tessera run --threads 2`: 128x256x1024 with B transposed (a Linear's K = 1024)
  // KC 256 280-285 us, 1024 227-236; 128x128x4096 731-779 against 529-616 (KC 1024); 64x512x2048
  // KC 256 545-569, 512 516-526, 1024 620-655 (its B block half the L2: the cap stops it at 512);
  // on one thread KC 256 stays ahead (128x256x1024: 348.1 against 399.8 us at 1024).
  if (sched == "blis" && !half && threads > 1) {
    const int64_t cols = std::min(nc, roundUp(ceilDiv(g.n, threads), nr));
    const double flopsPerDepth = 2.0 * double(g.m) * double(g.n) * double(std::max<int64_t>(1, g.batch)) / double(threads);
    for (const ir::KnobValue& v : kcDom) {
      const int64_t next = std::get<int64_t>(v);
      if (kc >= g.k || flopsPerDepth * double(kc) >= kBlisKBlockFlops) break;
      if (next <= kc) continue;
      if (next * cols * 4 > t.l2Bytes / 4) break;
      kc = next;
    }
  }
  // MC must be a multiple of MR unless one block covers M. The L3-derived MC is far above the
  // domain's largest value (4096) once M passes it, and 4096 is no multiple of MR = 6, 12 or 14:
  // M = 5000 with MR = 6 had an illegal default. Take the largest legal value at most the
  // derived one (MC = 192 there: B is re-packed once per 192 rows, under 1 % of the FMAs).
  int64_t mc = pickLegalMultiple(mcDom, blk.MC, mr, g.m);
  if (mc % mr && mc < g.m) {
    // No value of the domain is a multiple of MR (14 divides none of them): the largest multiple
    // of MR up to the derived MC and the domain's top joins the domain, as BLIS rounds its
    // blocks to the register tile.
    mc = std::min(blk.MC, std::get<int64_t>(mcDom.back())) / mr * mr;
    mcDom.push_back(mc);
    std::sort(mcDom.begin(), mcDom.end());
  }
  KvecTile kt;
  if (!njDom.empty()) kt = kvecTile(t, g, mrDom, njDom);
  if (sched == "kvec") mr = kt.mr;
  NvecTile nt;
  if (!nvDom.empty()) nt = nvecTile(t, g, lanes, mrDom, nvDom);
  if (sched == "nvec") {
    mr = nt.mr;
    // With several row tiles the strip of B copied by the first one (KC x NV vectors) is read by
    // the others: half the L1 holds it beside the rows of A and the f32 tile of C.
    kc = pickAtMost(kcDom, std::max<int64_t>(16, t.l1dBytes / 2 / (nt.nv * lanes * 4)));
    // One row tile over a B past the L2: nvec runs its K blocks outside the strips, each block's
    // strips reading KC pages of B left to right; the fewer pages at once, the better the
    // prefetchers follow (3x4096x1024 on AVX2, interleaved at load 4-5: KC 16 1.9-2.5 ms,
    // 32 2.9-6.9, 128 4.6-8.8, all of K per strip 4.2-8.8).
    if (g.m <= nt.mr && double(ir::byteSize(g.inType)) * double(g.k * g.n) > double(t.l2Bytes)) kc = pickAtMost(kcDom, 16);
  }
  if (sched == "plain" || sched == "packed") {
    // The transform schedules keep the defaults measured for them (plainTile: 8x32 on AVX-512,
    // 6x16 on AVX2, moved to divide M and N: 32x2048x512 on AVX2 plain MR=4 48.0 GFLOP/s, MR=6
    // 21.7), NC 512 (plain) or 2048 (packed, skinny above the L2), KC 512.
    mr = pt.mr;
    nr = pt.nr;
    mc = pt.mc;
    nc = pickAtMost(ncDom, sched == "packed" || (skinny && bytes > double(t.l2Bytes)) ? 2048 : 512);
    // plain tiles N by NC without padding: a last block of other width is a second, dynamic-shaped
    // copy of the loop nest that runs unvectorized (128x768x256 on one Sapphire Rapids core, NC 512:
    // 601 us; NC 256: 281 us, as blis's 287). It takes the largest NC up to that which divides N
    // (packed pads its edge panels: NC 512 there ran 290 us).
    if (sched == "plain") nc = pickDividing(ncDom, nc, nr, g.n);
    // One or two rows are a matrix-vector product: depth blocks of 16 keep its few accumulators
    // and the A values in registers (Zen 4, one thread, 1x512x512: 10.2 us with KC=16, 21.1 us
    // with 512; 2x512x512 11.8 against 16.5; from 4 rows on KC stops mattering).
    kc = pickAtMost(kcDom, g.m <= 2 && sched == "plain" ? 16 : 512);
  }
  s.knobs = {
      {"schedule", schedDom, sched,
       "packed: BLIS-style packed A/B panels (transform schedule); plain: cache tiling only; blis: explicit BLIS "
       "loops (f16/bf16 converted while packing, parallel); bf16dot: bf16 pairs by vdpbf16ps; amx: AMX tiles"},
      {"MC", mcDom, mc, "rows of A per cache block"},
      {"NC", ncDom, nc, "columns of B per cache block"},
      {"KC", kcDom, kc, "depth of a cache block (balanced: equal blocks)"},
      {"MR", mrDom, mr, "register tile rows"},
      {"NR", nrDom, nr, "register tile columns (vector lanes)"},
      {"KU", {int64_t(1), int64_t(2), int64_t(4)}, int64_t(1), "unroll of the k micro-loop"},
      {"ORDER", {std::string("ij"), std::string("ji")}, std::string("ij"), "micro-tile loop order (ij: A panel in L1)"},
  };
  // THREADS only where a schedule can use more than one (a knob of one value would only change
  // the config keys of what was recorded before it existed).
  if (!njDom.empty()) s.knobs.push_back({"NJ", njDom, kt.nj, "kvec: columns of C per register tile (vectors along K)"});
  if (!nvDom.empty()) s.knobs.push_back({"NV", nvDom, nt.nv, "nvec: vectors of C per row of a register tile (few rows)"});
  if (threadDom.size() > 1 && has(schedDom, "blis"))
    s.knobs.push_back({"THREADS", threadDom, threads, "threads (blis family; column blocks in parallel)"});
  const int64_t M = g.m, N = g.n;
  s.constraint = [lanes, vregs, M, N](const ir::Config& c) -> std::optional<std::string> {
    int64_t MC = geti(c, "MC"), NC = geti(c, "NC"), MR = geti(c, "MR"), NR = geti(c, "NR");
    const std::string sched = std::get<std::string>(c.values.at("schedule"));
    auto th = c.values.find("THREADS");
    if (th != c.values.end() && std::get<int64_t>(th->second) > 1 && (sched == "plain" || sched == "packed"))
      return "schedule " + sched + " runs on one thread";
    if (sched == "kvec") {
      // Only MR, NJ, KU and THREADS shape it; the accumulators, the held operand and the streamed one in registers.
      int64_t NJ = geti(c, "NJ"), regs = MR * NJ + std::min(MR, NJ) + 1;
      if (regs > vregs)
        return "kvec tile " + std::to_string(MR) + "x" + std::to_string(NJ) + " needs " + std::to_string(regs) +
               " vector registers, the target has " + std::to_string(vregs);
      return std::nullopt;
    }
    if (sched == "nvec") {
      // Only MR, NV, KU and THREADS shape it; the accumulators, the held B vectors and the broadcast.
      // The tile as the kernel clamps it to the problem (MR past M rows is one tile of M).
      int64_t mr = std::min(MR, M), NV = std::min(geti(c, "NV"), ceilDiv(N, lanes)), regs = mr * NV + NV + 1;
      if (regs > vregs)
        return "nvec tile " + std::to_string(mr) + "x" + std::to_string(NV) + " vectors needs " + std::to_string(regs) +
               " vector registers, the target has " + std::to_string(vregs);
      return std::nullopt;
    }
    if (sched == "amx") {
      if ((MR != 16 && MR != 32) || (NR != 16 && NR != 32)) return std::string("amx takes MR and NR of 16 or 32 (16x16 f32 tiles)");
      return std::nullopt;  // AMX accumulates in tile registers: no vector register budget
    }
    // accumulators + B vectors + the A broadcast must fit the vector register file
    int64_t regs = (MR * ((NR + lanes - 1) / lanes)) + (NR + lanes - 1) / lanes + 1;
    if (regs > vregs)
      return "register tile " + std::to_string(MR) + "x" + std::to_string(NR) + " needs " + std::to_string(regs) +
             " vector registers, the target has " + std::to_string(vregs);
    if (MR > std::min(MC, roundUp(M, MR))) return std::string("MR must not exceed MC");
    if (MC % MR && MC < M) return std::string("MC must be a multiple of MR");
    if (NR > std::min(NC, roundUp(N, NR))) return std::string("NR must not exceed NC");
    if (NC % NR && NC < N) return std::string("NC must be a multiple of NR");
    return std::nullopt;
  };
  return s;
}

}  // namespace tessera::search
