// Owns the service's peak table and the minimum work of each kernel family (roofline.h).
#include "cache_service/roofline.h"

#include <algorithm>
#include <cstring>
#include <string_view>

namespace tessera::cache {

namespace {

// The products of targets/gpu_targets.cpp (tests/cache_service/plausibility_test.cpp checks that
// the two agree). DRAM bandwidth here; a kernel whose data sits in L2 may beat it, so the bound
// uses kCacheFactor times as much.
constexpr GpuPeakRow kGpuRows[] = {
    {"sm_80", 108, 19500, 312000, 312000, 1555},    {"sm_86", 82, 35580, 71000, 71000, 936},
    {"sm_89", 128, 82580, 165200, 165200, 1008},    {"sm_90", 132, 66900, 989400, 989400, 3352},
    {"sm_90a", 132, 66900, 989400, 989400, 3352},   {"gfx90a", 110, 23950, 191500, 191500, 1638},
    {"gfx942", 304, 163400, 1307400, 1307400, 5300}, {"gfx1100", 96, 61400, 122800, 122800, 960},
    {"sm_75", 40, 8100, 65000, 0, 320},              {"gfx1030", 80, 23040, 46080, 0, 512},
    {"gfx1031", 40, 13210, 26420, 0, 384},           {"gfx1032", 28, 10400, 20800, 0, 224},
    {"gfx1101", 60, 37320, 74640, 74640, 624},       {"gfx1102", 32, 21750, 43500, 43500, 288},
};
// Every product of a chip (targets/gpu_skus.h: an L4 and an RTX 4090 are both sm_89): the fastest
// product's rates per SM/CU and its DRAM bandwidth, so that a record of any of them, keyed by its
// own SM/CU count, is checked against a bound it cannot beat (tests/cache_service/trust_test.cpp
// keeps these equal to the product table's maxima).
struct ChipBound {
  const char* name;
  double f32, f16, bf16;  // GFLOP/s per SM/CU
  double gbs;
};
constexpr ChipBound kChipBounds[] = {
    {"sm_75", 233, 1859, 0, 672},        {"sm_80", 184, 2947, 2947, 2039},    {"sm_86", 477, 1843, 1843, 1008},
    {"sm_89", 669, 2565, 2565, 1008},    {"sm_90", 508, 7497, 7497, 4800},    {"sm_90a", 508, 7497, 7497, 4800},
    {"gfx90a", 218, 1741, 1741, 1638},   {"gfx942", 538, 4301, 4301, 6000},   {"gfx1030", 298, 595, 0, 512},
    {"gfx1031", 331, 661, 0, 384},       {"gfx1032", 372, 743, 0, 256},       {"gfx1100", 646, 1293, 1293, 960},
    {"gfx1101", 622, 1244, 1244, 624},   {"gfx1102", 680, 1360, 1360, 288},
};
// Products added by users' facts files may be clocked above the table's: their compute gets this
// much room over the fastest listed product.
constexpr double kUserProductHeadroom = 1.25;
constexpr double kCacheFactor = 8;
// sm_* / gfx* names the table does not list: bounds no such chip reaches (several times the
// largest products listed).
constexpr TargetPeaks kUnknownGpu{400000, 10000000, 10000000, 20000 * kCacheFactor};

// Host, per core and ISA level: vector lanes x 2 FMA pipes x 2 FLOPs x 6 GHz (no x86 core clocks
// higher); f16/bf16 allow AMX on x86-64-v4 (Sapphire Rapids: 1024 bf16 FMAs per cycle). Bytes:
// two 64-byte loads and one store per cycle at 6 GHz, the L1's rate.
struct HostRow {
  const char* arch;
  double f32, f16;
};
constexpr HostRow kHostRows[] = {
    {"x86-64-v4", 384, 12288}, {"x86-64-v3", 192, 384}, {"x86-64-v2", 96, 96}, {"x86-64", 96, 96}};
constexpr double kHostBytesPerCore = 192.0 * 6;

double elementBytes(std::string_view dtype) {
  // Mixed forms ("f16:f32") count their narrowest part; unknown names one byte (fp8, int8).
  double best = 8;
  while (!dtype.empty()) {
    size_t colon = dtype.find(':');
    std::string_view part = dtype.substr(0, colon);
    best = std::min(best, part == "f32" ? 4.0 : part == "f16" || part == "bf16" ? 2.0 : part == "f64" ? 8.0 : 1.0);
    dtype = colon == std::string_view::npos ? std::string_view() : dtype.substr(colon + 1);
  }
  return best;
}

double peakFor(const TargetPeaks& p, std::string_view dtype) {
  if (dtype == "f32") return p.gflops_f32;
  if (dtype == "f16") return p.gflops_f16;
  if (dtype == "bf16") return p.gflops_bf16;
  return std::max({p.gflops_f32, p.gflops_f16, p.gflops_bf16});  // mixed or unknown: the fastest unit
}

}  // namespace

std::optional<ChipPeakBound> chipPeakBound(std::string_view chip) {
  for (const ChipBound& b : kChipBounds)
    if (chip == b.name) return ChipPeakBound{b.f32, b.f16, b.bf16, b.gbs};
  return std::nullopt;
}

const GpuPeakRow* gpuPeakRows(size_t* count) {
  *count = std::size(kGpuRows);
  return kGpuRows;
}

std::optional<TargetPeaks> peaksOf(const HardKey& k) {
  const double units = static_cast<double>(std::max<int64_t>(k.units, 1));
  if (k.target == "host") {
    for (const HostRow& h : kHostRows)
      if (k.arch == h.arch) return TargetPeaks{h.f32 * units, h.f16 * units, h.f16 * units, kHostBytesPerCore * units};
    return std::nullopt;
  }
  for (const GpuPeakRow& g : kGpuRows) {
    if (k.target != g.name) continue;
    const double scale = std::max(1.0, units / g.units);
    TargetPeaks p{g.gflops_f32 * scale, g.gflops_f16 * scale, g.gflops_bf16 * scale, g.gbs_dram * kCacheFactor * scale};
    for (const ChipBound& b : kChipBounds) {
      if (k.target != b.name) continue;
      const double u = units * kUserProductHeadroom;
      p.gflops_f32 = std::max(p.gflops_f32, b.f32 * u);
      p.gflops_f16 = std::max(p.gflops_f16, b.f16 * u);
      p.gflops_bf16 = std::max(p.gflops_bf16, b.bf16 * u);
      p.gbs = std::max(p.gbs, b.gbs * kCacheFactor);
    }
    return p;
  }
  if (k.target.rfind("sm_", 0) == 0 || k.target.rfind("gfx", 0) == 0) return kUnknownGpu;
  return std::nullopt;
}

std::optional<MinimumWork> minimumWork(const HardKey& k) {
  const double e = elementBytes(k.dtype);
  std::vector<double> d(k.shape.begin(), k.shape.end());
  MinimumWork w;
  if (k.family == "gemm") {
    // [batch,] M, N, K: C = A @ B reads A and B and writes C at least once.
    if (d.size() != 3 && d.size() != 4) return std::nullopt;
    const double b = d.size() == 4 ? d[0] : 1, m = d[d.size() - 3], n = d[d.size() - 2], kk = d.back();
    w.flops = 2 * b * m * n * kk;
    w.bytes = e * b * (m * kk + kk * n + m * n);
    return w;
  }
  if (k.family == "attention") {
    // batch, heads, heads_kv, seq_q, seq_kv, head_dim; Q·Kᵀ and P·V over the unmasked pairs.
    if (d.size() != 6) return std::nullopt;
    const double b = d[0], h = d[1], hkv = d[2], sq = d[3], skv = d[4], hd = d[5];
    double pairs = sq * skv;
    if (k.layout == "causal") {
      // Bottom-right aligned: row i sees keys j <= i + (skv - sq).
      pairs = sq <= skv ? sq * (skv - sq + 1) + sq * (sq - 1) / 2 : 0;
    }
    w.flops = 4 * b * h * hd * pairs;
    w.bytes = e * (2 * b * h * sq * hd + 2 * b * hkv * skv * hd);
    return w;
  }
  if (k.family == "elementwise") {
    // The iteration space: every output element is written once (one byte at least).
    double numel = 1;
    for (double x : d) numel *= x;
    w.bytes = numel;
    return w;
  }
  return std::nullopt;
}

std::optional<double> rooflineBoundUs(const HardKey& k) {
  auto peaks = peaksOf(k);
  auto work = minimumWork(k);
  if (!peaks || !work) return std::nullopt;
  // 1 GFLOP/s = 1e3 FLOP per microsecond; 1 GB/s = 1e3 bytes per microsecond.
  const double compute = work->flops / (peakFor(*peaks, k.dtype) * 1e3);
  const double memory = work->bytes / (peaks->gbs * 1e3);
  return std::max(compute, memory);
}

}  // namespace tessera::cache
