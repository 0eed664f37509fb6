// Owns the dedispersion kernel in the analytic model's terms (bench/kerneltuner_models.h): each
// thread sums, for tile_size_x x tile_size_y (sample, DM) outputs, one input byte per channel at a
// DM-dependent shift, from the kernel's own index arithmetic.
//
// The kernel (dedisp_milo/dedispersion.cu of AutoTuningAssociation/benchmark_hub): x is the sample,
// y the dispersion measure (DM); tile_stride_x/y 1 put a thread's outputs a block apart, 0 next to
// each other. Per output and channel: load shifts[channel] (the same float for every lane), the
// shift (dm_first + dm * dm_step) * shift converted to an integer, the address, one u8 load, its
// conversion to float and the add: about eight instructions, two of them conversions, which run
// at a quarter of the FMA rate on NVIDIA (CUDA C++ Programming Guide, arithmetic instruction
// throughput: type conversions 16 per clock per SM on 8.x) and at the full rate on AMD (VOP1
// v_cvt_* are full-rate ALU ops in the CDNA/RDNA ISA guides). The loop is not unrolled, so each
// iteration waits for its load (an L1 hit: the DMs of a block read nearly the same bytes, since
// neighbouring DMs shift by at most a third of a sample).
#include <algorithm>
#include <cmath>

#include "bench/kerneltuner_models.h"
#include "costmodel/gpu_access.h"

namespace tessera::bench {

namespace {

constexpr int64_t kDms = 2048, kSamples = 25000, kChannels = 1536, kMaxShift = 650;
constexpr int64_t kSamplesPerChannel = kSamples + kMaxShift;
constexpr double kDmStep = 0.02;
// A typical channel's shift per DM unit (the shifts run from ~15.9 samples on the lowest channel to
// 0 on the highest; the middle channel's is about a third of the largest).
constexpr double kShiftPerDm = 5.0;

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / std::max<int64_t>(b, 1); }

}  // namespace

Expected<costmodel::GpuWorkload> dedispersionWorkload(const ir::Config& c, const TargetDesc& t) {
  auto knob = [&](const char* k) -> Expected<int64_t> {
    auto v = c.getInt(k);
    if (!v.ok()) return makeError(ErrorCode::InvalidConfig, std::string("missing integer knob ") + k);
    return *v;
  };
  TESSERA_ASSIGN(int64_t bsx, knob("block_size_x"));
  TESSERA_ASSIGN(int64_t bsy, knob("block_size_y"));
  TESSERA_ASSIGN(int64_t tx, knob("tile_size_x"));
  TESSERA_ASSIGN(int64_t ty, knob("tile_size_y"));
  TESSERA_ASSIGN(int64_t sx, knob("tile_stride_x"));
  TESSERA_ASSIGN(int64_t sy, knob("tile_stride_y"));
  if (bsx <= 0 || bsy <= 0 || tx <= 0 || ty <= 0) return makeError(ErrorCode::InvalidConfig, "dedispersion: sizes must be positive");
  const int64_t T = bsx * bsy;
  if (T > 1024) return makeError(ErrorCode::InvalidConfig, "dedispersion: more than 1024 threads");
  const bool amd = t.vendor == Vendor::Amd;
  const int warp = std::max(t.warpSize, 1);
  const int64_t warps = ceilDiv(T, warp);
  // Lane l of the first warp: its sample and DM offsets within the block (x fastest).
  const int64_t threadX = sx ? 1 : tx, threadY = sy ? 1 : ty;
  auto lanes = [&](double shiftPerDm) {
    std::vector<int64_t> a(static_cast<size_t>(warp));
    for (int l = 0; l < warp; ++l) {
      const int64_t lx = l % bsx, ly = l / bsx;
      const double dm = double(ly * threadY);
      a[size_t(l)] = lx * threadX + int64_t(dm * kDmStep * shiftPerDm);
    }
    return a;
  };
  const int line = t.l1LineBytes > 0 ? t.l1LineBytes : 128, rate = t.l1BytesPerClock > 0 ? t.l1BytesPerClock : 128;
  const double byteClocks = costmodel::l1Wavefronts(lanes(kShiftPerDm), 1, line, rate);

  costmodel::GpuWorkload w;
  w.blocks = ceilDiv(kSamples, bsx * tx) * ceilDiv(kDms, bsy * ty);
  w.threadsPerBlock = T;
  const double outputs = double(T * tx * ty);
  // Work in FMA-pipe slots: eight instructions per output and channel, conversions at a quarter
  // rate on NVIDIA; a thread with several outputs pays the bounds checks and loop once per output.
  const double slots = amd ? 8.0 : 6.0 + 2.0 * 4.0;
  w.flopsPerBlock = 2.0 * outputs * double(kChannels) * slots;
  w.pipePeakGflops = t.peakGflopsF32;
  w.issueEfficiency = 1.0;
  w.independentOps = 1;  // one dependent add chain per output, its load waited for each iteration
  w.regsPerThread = int(std::min(255.0, 20.0 + 3.0 * double(tx * ty)));
  // L1: the byte load per lane (its wavefronts) and the shifts[] load (one broadcast wavefront).
  w.l1BytesPerBlock = double(warps) * double(rate) * (byteClocks + 1.0) * double(tx * ty) * double(kChannels);
  // L2: per channel a block reads its sample span, widened by its DMs' shifts.
  const double span = double(bsx * tx) + double(bsy * ty) * kDmStep * kShiftPerDm + 1;
  w.l2Bytes = double(w.blocks) * double(kChannels) * std::ceil(span / line) * line + double(kDms * kSamples) * 4;
  // DRAM: the input (39 MB) once if the L2 holds it, else once per band of DMs the grid walks.
  const double input = double(kChannels * kSamplesPerChannel);
  const double bands = double(ceilDiv(kDms, bsy * ty));
  w.dramBytes = (input <= double(t.l2Bytes_gpu) ? input : input * bands) + double(kDms * kSamples) * 4;
  w.bytesInFlightPerThread = 1;
  w.serialSteps = tx * ty * kChannels;
  w.serialStepCycles = costmodel::latencyCycles(costmodel::MemLevel::L1, t.vendor);
  w.stages = 1;
  w.what = "dedispersion " + std::to_string(bsx) + "x" + std::to_string(bsy) + " threads, " + std::to_string(tx) + "x" +
           std::to_string(ty) + " outputs";
  return w;
}

std::string describeDedispersion(const ir::Config& c) {
  auto g = [&](const char* k) { auto v = c.getInt(k); return v.ok() ? *v : 0; };
  char b[200];
  std::snprintf(b, sizeof b, "%lldx%lld threads, %lldx%lld outputs each (%s samples, %s DMs)", (long long)g("block_size_x"),
                (long long)g("block_size_y"), (long long)g("tile_size_x"), (long long)g("tile_size_y"),
                g("tile_stride_x") ? "strided" : "adjacent", g("tile_stride_y") ? "strided" : "adjacent");
  return b;
}

}  // namespace tessera::bench
