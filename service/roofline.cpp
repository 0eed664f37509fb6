// Owns the service's peak bounds, read from the compiler's GPU tables (targets/), and the minimum
// work of each kernel family (roofline.h).
#include "service/roofline.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "targets/gpu_sku_table.h"
#include "targets/gpu_skus.h"
#include "targets/gpu_targets.h"

namespace tessera::cache {

namespace {

// The chips of the compiler's table (targets/gpu_targets.cpp): their default product's peaks. DRAM
// bandwidth here; a kernel whose data sits in L2 may beat it, so the bound uses kCacheFactor times
// as much.
const std::vector<GpuPeakRow>& gpuRows() {
  static const std::vector<GpuPeakRow> rows = [] {
    std::vector<GpuPeakRow> r;
    for (const TargetDesc& t : gpuTargets())
      r.push_back({t.name.c_str(), t.units, t.peakGflopsF32, t.peakGflopsF16, t.peakGflopsBF16, t.memBandwidthGBs});
    return r;
  }();
  return rows;
}

// Every built-in product of a chip (targets/gpu_skus.h: an L4 and an RTX 4090 are both sm_89): the
// fastest product's rates per SM/CU, rounded up to whole GFLOP/s, and its DRAM bandwidth, so that a
// record of any of them, keyed by its own SM/CU count, is checked against a bound it cannot beat.
struct ChipBound {
  std::string name;
  double f32 = 0, f16 = 0, bf16 = 0;  // GFLOP/s per SM/CU
  double gbs = 0;
};
const std::vector<ChipBound>& chipBounds() {
  static const std::vector<ChipBound> bounds = [] {
    std::vector<ChipBound> out;
    const std::vector<GpuSku> skus = tessera::detail::builtinGpuSkus();
    for (const TargetDesc& t : gpuTargets()) {
      ChipBound b{t.name};
      bool any = false;
      for (const GpuSku& s : skus) {
        if (!chipRunsProduct(t.name, s) || s.units <= 0) continue;
        any = true;
        b.f32 = std::max(b.f32, std::ceil(s.fp32Gflops / s.units));
        b.f16 = std::max(b.f16, std::ceil(s.fp16Gflops / s.units));
        b.bf16 = std::max(b.bf16, std::ceil(s.bf16Gflops / s.units));
        b.gbs = std::max(b.gbs, s.bandwidthGBs);
      }
      if (any) out.push_back(b);
    }
    return out;
  }();
  return bounds;
}
// Products added by users' facts files may be clocked above the table's: their compute gets this
// much room over the fastest listed product.
constexpr double kUserProductHeadroom = 1.25;
constexpr double kCacheFactor = 8;
// GPU names the table does not list (targets/gpu_targets.h: vendorOfChip): bounds no such chip reaches (several times the
// largest products listed).
constexpr TargetPeaks kUnknownGpu{400000, 10000000, 10000000, 20000 * kCacheFactor};

// Host, per core and ISA level: vector lanes x 2 FMA pipes x 2 FLOPs x 6 GHz (no x86 core clocks
// higher); f16/bf16 twice that on x86-64-v4 (vdpbf16ps and avx512fp16 do two products per f32
// lane), and the f32 rate below it: AVX2 has no 16-bit FMA, a bf16 or f16 GEMM converts to f32 and
// computes there (issue 47: a 1024^3 bf16 GEMM claimed at 1.5 ms, 18x the truth, passed a bound of
// twice the f32 rate). AMX (Sapphire Rapids: 1024 bf16 FMAs per cycle) is no ISA level: only a
// config of the amx schedule may claim it (issue 25: a 1024^3 bf16 GEMM claimed at 90 us on a Zen 4
// key passed an AMX bound).
struct HostRow {
  const char* arch;
  double f32, f16, amx;
};
constexpr HostRow kHostRows[] = {{"x86-64-v4", 384, 768, 12288},
                                 {"x86-64-v3", 192, 192, 0},
                                 {"x86-64-v2", 96, 96, 0},
                                 {"x86-64", 96, 96, 0}};

bool amxConfig(std::string_view config) {
  // The knob table (targets/knob_table.cpp) lets `schedule` take "amx" on host GEMMs only.
  return config.find("\"schedule\":\"amx\"") != std::string_view::npos;
}
// Bytes a host core moves per second, by where its share of the data fits: the L1's rate (two
// 64-byte loads and one store per cycle at 6 GHz) up to 48 KiB a core (the largest L1 data cache
// of x86 cores: Golden Cove), the L2's (64 bytes a cycle) up to 2 MiB a core (the largest L2), then
// 32 bytes a cycle (an L3 slice's port; no DRAM feeds every core that fast). Issue 47: a 4096^2 f32
// elementwise kernel (64 MiB) claimed at 5 us passed a bound that held it to the L1's rate at one
// byte per element.
constexpr double kHostBytesPerCore = 192.0 * 6;
double hostBytesPerCore(double bytes_per_core) {
  if (bytes_per_core <= 48.0 * 1024) return kHostBytesPerCore;
  if (bytes_per_core <= 2.0 * 1024 * 1024) return 64.0 * 6;
  return 32.0 * 6;
}

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
  for (const ChipBound& b : chipBounds())
    if (chip == b.name) return ChipPeakBound{b.f32, b.f16, b.bf16, b.gbs};
  return std::nullopt;
}

const GpuPeakRow* gpuPeakRows(size_t* count) {
  *count = gpuRows().size();
  return gpuRows().data();
}

std::optional<TargetPeaks> peaksOf(const HardKey& k, std::string_view config) {
  const double units = static_cast<double>(std::max<int64_t>(k.units, 1));
  if (k.target == "host") {
    for (const HostRow& h : kHostRows)
      if (k.arch == h.arch) {
        const double f16 = k.family == "gemm" && amxConfig(config) ? std::max(h.f16, h.amx) : h.f16;
        return TargetPeaks{h.f32 * units, f16 * units, f16 * units, kHostBytesPerCore * units};
      }
    return std::nullopt;
  }
  for (const GpuPeakRow& g : gpuRows()) {
    if (k.target != g.name) continue;
    const double scale = std::max(1.0, units / g.units);
    TargetPeaks p{g.gflops_f32 * scale, g.gflops_f16 * scale, g.gflops_bf16 * scale, g.gbs_dram * kCacheFactor * scale};
    for (const ChipBound& b : chipBounds()) {
      if (k.target != b.name) continue;
      const double u = units * kUserProductHeadroom;
      p.gflops_f32 = std::max(p.gflops_f32, b.f32 * u);
      p.gflops_f16 = std::max(p.gflops_f16, b.f16 * u);
      p.gflops_bf16 = std::max(p.gflops_bf16, b.bf16 * u);
      p.gbs = std::max(p.gbs, b.gbs * kCacheFactor);
    }
    return p;
  }
  if (vendorOfChip(k.target)) return kUnknownGpu;
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
    // The iteration space: every output element is written once, at the key's element size (an
    // f32 output is four bytes an element, whatever its inputs).
    double numel = 1;
    for (double x : d) numel *= x;
    w.bytes = numel * e;
    return w;
  }
  return std::nullopt;
}

std::optional<double> rooflineBoundUs(const HardKey& k, std::string_view config) {
  auto peaks = peaksOf(k, config);
  auto work = minimumWork(k);
  if (!peaks || !work) return std::nullopt;
  // 1 GFLOP/s = 1e3 FLOP per microsecond; 1 GB/s = 1e3 bytes per microsecond.
  const double compute = work->flops / (peakFor(*peaks, k.dtype) * 1e3);
  double gbs = peaks->gbs;
  if (k.target == "host") {
    // The rate of the cache level each core's share of the data fits in (hostBytesPerCore).
    const double units = static_cast<double>(std::max<int64_t>(k.units, 1));
    gbs = hostBytesPerCore(work->bytes / units) * units;
  }
  const double memory = work->bytes / (gbs * 1e3);
  return std::max(compute, memory);
}

}  // namespace tessera::cache
