// Owns reading the host CPU's description from the machine: ISA flags and model from
// /proc/cpuinfo, cache sizes from sysfs, and the single-core FMA peak and streaming bandwidth
// from short measurements (a peak from a table would be wrong on half the machines: Zen 4 runs
// AVX-512 at half width, Intel servers at full), with the clock the core ran at.
#include <immintrin.h>
#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "support/load.h"
#include "support/si_format.h"
#include "targets/target_desc.h"

namespace tessera {
namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// The FMA peak probe: 12 independent accumulator chains (more than latency x issue rate on every
// x86 core: 5 x 1 on Zen 1, 4 x 2 on Intel) of vector FMAs, timed after a warm-up that lets the
// core reach its running clock, best of several runs (a VM's vCPU is shared: one slow run is
// noise, never the peak). Returns GFLOP/s.
double fmaPeak(void (*step)(long), int lanes) {
  const long iters = 200000;
  double warm = now();
  while (now() - warm < 0.015) step(iters / 4);  // the clock ramps up; timings before it read low
  double best = 1e30;
  for (int rep = 0; rep < 9; ++rep) {
    double t0 = now();
    step(iters);
    best = std::min(best, now() - t0);
  }
  return iters * 12.0 * lanes * 2 / best / 1e9;
}

float g_chains[12 * 16];  // the chains' values between steps: every one stays live

__attribute__((target("avx512f"))) void stepAvx512(long iters) {
  __m512 b = _mm512_set1_ps(1.0000001f), c = _mm512_set1_ps(1e-7f);
  __m512 r[12];
  for (int i = 0; i < 12; ++i) r[i] = _mm512_loadu_ps(g_chains + 16 * i);
  for (long k = 0; k < iters; ++k) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) r[i] = _mm512_fmadd_ps(r[i], b, c);
  }
  for (int i = 0; i < 12; ++i) _mm512_storeu_ps(g_chains + 16 * i, r[i]);
}

__attribute__((target("avx2,fma"))) void stepAvx2(long iters) {
  __m256 b = _mm256_set1_ps(1.0000001f), c = _mm256_set1_ps(1e-7f);
  __m256 r[12];
  for (int i = 0; i < 12; ++i) r[i] = _mm256_loadu_ps(g_chains + 8 * i);
  for (long k = 0; k < iters; ++k) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) r[i] = _mm256_fmadd_ps(r[i], b, c);
  }
  for (int i = 0; i < 12; ++i) _mm256_storeu_ps(g_chains + 8 * i, r[i]);
}

double peakAvx512() { return fmaPeak(stepAvx512, 16); }
double peakAvx2() { return fmaPeak(stepAvx2, 8); }

// The clock the core runs at, from a chain of dependent register-register integer adds (one
// cycle each on every x86 core since the Pentium 4): GHz, best of several runs, measured right
// after the FMA probe. Not `add $1`: Golden Cove (Sapphire Rapids, Alder Lake) folds chains of
// add-immediate at rename, and such a chain read 19.5-21.1 GHz on a 3.6 GHz Sapphire Rapids.
double chainClockGHz() {
  const long iters = 200000;
  double best = 1e30;
  uint64_t x = 0, one = 1;
  for (int rep = 0; rep < 5; ++rep) {
    double t0 = now();
    for (long k = 0; k < iters; ++k)
      asm volatile(
          "add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\t"
          "add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\t"
          "add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\t"
          "add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0"
          : "+r"(x)
          : "r"(one));
    best = std::min(best, now() - t0);
  }
  return iters * 16.0 / best / 1e9;
}

// Read + write bandwidth of a copy (the anchor elementwise kernels aim at), on `threads` threads
// each copying its own slice, timed both ways a kernel may store: streaming stores (movntps: no
// read for ownership) and write-allocate ones (movaps: each line read before it is written, a third
// of the traffic uncounted); the best is the roof. The memcpy this replaced picked its stores by
// size (write-allocate below glibc's non-temporal threshold), and kernels with streaming stores
// (NT=1) then printed 136-176 % of it.
enum class CopyStores { Streaming, WriteAllocate };

void copySlice(float* y, const float* x, size_t lo, size_t hi, CopyStores how) {
  lo = (lo + 15) & ~size_t(15);  // 64-byte lines (the buffers are 64-byte aligned)
  for (size_t i = lo; i + 16 <= hi; i += 16) {
    __m128 a = _mm_load_ps(x + i), b = _mm_load_ps(x + i + 4), c = _mm_load_ps(x + i + 8), d = _mm_load_ps(x + i + 12);
    if (how == CopyStores::Streaming) {
      _mm_stream_ps(y + i, a);
      _mm_stream_ps(y + i + 4, b);
      _mm_stream_ps(y + i + 8, c);
      _mm_stream_ps(y + i + 12, d);
    } else {
      _mm_store_ps(y + i, a);
      _mm_store_ps(y + i + 4, b);
      _mm_store_ps(y + i + 8, c);
      _mm_store_ps(y + i + 12, d);
      asm volatile("" ::: "memory");  // a plain loop of stores, not a call to memcpy
    }
  }
  if (how == CopyStores::Streaming) _mm_sfence();
}

double threadCpuNow() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// A copy whose every thread's wall time stayed within this of its CPU time ran on cores of its own.
constexpr double kOwnCore = 1.1;

// The copy's best time in seconds: over the runs in which every thread kept its core when there
// were any (`steady` then says whether the two best of them agree, within the control's quiet
// margin), else over all runs (`ownCores` false: every run lost a core to something else).
struct CopyTiming {
  double seconds = 1e30;
  bool ownCores = false, steady = false;
};

CopyTiming copyBandwidthTiming(float* y, const float* x, size_t n, int threads) {
  double bestAny = 1e30, best = 1e30, second = 1e30;
  for (CopyStores how : {CopyStores::Streaming, CopyStores::WriteAllocate}) {
    std::vector<double> share(size_t(threads), 1.0);  // each thread's wall over CPU time in this run
    auto slice = [&](int i) {
      const double w0 = now(), c0 = threadCpuNow();
      copySlice(y, x, n * size_t(i) / size_t(threads), n * size_t(i + 1) / size_t(threads), how);
      const double cpu = threadCpuNow() - c0;
      share[size_t(i)] = cpu > 0 ? (now() - w0) / cpu : 1e30;
    };
    for (int rep = 0; rep < 4; ++rep) {
      double t0 = now();
      std::vector<std::thread> ts;
      for (int i = 1; i < threads; ++i) ts.emplace_back(slice, i);
      slice(0);
      for (auto& th : ts) th.join();
      const double t = now() - t0;
      bestAny = std::min(bestAny, t);
      if (*std::max_element(share.begin(), share.end()) > kOwnCore) continue;
      second = std::min(second, std::max(best, t));
      best = std::min(best, t);
    }
  }
  CopyTiming r;
  r.ownCores = best < 1e30;
  r.seconds = r.ownCores ? best : bestAny;
  r.steady = second < 1e30 && second <= kQuietSlowdown * best;
  r.seconds /= 2.0 * double(n) * sizeof(float) / 1e9;  // seconds per GB moved
  return r;
}

// The load control read three times, the least slowdown kept: a task that holds a core for the
// whole probe slows every reading (and its runnable count stays up), while single 5 ms readings in a
// fresh `tessera` process on an idle 2-core VM read 1.3-2.2x in its first ~100 ms (a standalone
// loop of them reads 1.00 at the same time): one reading made 8 of 10 idle `run`s doubt their roof.
double steadyShareSlowdown(int cores) {
  double least = 1e30;
  for (int i = 0; i < 3; ++i) least = std::min(least, coreShareSlowdown(cores, 0.005));
  return least;
}

// Sets the copy roofs (one core, all cores), bracketed by the load control the tuner times its
// finalists with (support/load.h): read before and after, tried again after a pause while the
// control or the copies' own CPU times say the cores were shared, the best own-core reading of all
// tries kept. Still busy after the last try, the roof is not trusted and says why in copyDoubt:
// a copy sharing its core reads several times low (1.6-11.6 GB/s under a parallel build), and a
// small kernel that runs between the other tasks' slices then printed 5746 % of it.
void probeCopyRoofs(TargetDesc& t) {
  // Two tries: each process runs this, and three (with a buffer each) made a process 1.3 s slower
  // than the single try before at load 4.8 on 2 cores.
  constexpr int kTries = 2;
  const size_t n = size_t(1) << 23;  // 32 MiB per buffer: past the L2, the realistic regime
  auto alloc = [n] { return static_cast<float*>(std::aligned_alloc(64, n * sizeof(float))); };
  std::unique_ptr<float, decltype(&std::free)> xs(alloc(), &std::free), ys(alloc(), &std::free);
  float *x = xs.get(), *y = ys.get();
  std::fill(x, x + n, 1.0f);
  std::fill(y, y + n, 0.0f);
  struct Best {
    double own = 1e30, any = 1e30;  // seconds per GB: over own-core readings, over all
    void keep(const CopyTiming& c) {
      any = std::min(any, c.seconds);
      if (c.ownCores) own = std::min(own, c.seconds);
    }
    // A reading taken on cores of its own counts whatever the control said (its copies were timed
    // whole); one that lost its cores only while there is no such reading.
    double gbs() const { return 1 / (own < 1e30 ? own : any); }
  } one, all;
  double control = 1;
  bool quiet = false;
  LoadReading load;
  for (int attempt = 0; attempt < kTries && !quiet; ++attempt) {
    if (attempt) std::this_thread::sleep_for(std::chrono::milliseconds(25));
    const double before = steadyShareSlowdown(t.cores);
    const CopyTiming a = copyBandwidthTiming(y, x, n, 1);
    const CopyTiming c = t.cores > 1 ? copyBandwidthTiming(y, x, n, t.cores) : a;
    control = std::max(before, steadyShareSlowdown(t.cores));
    load = readLoad();
    one.keep(a);
    all.keep(c);
    quiet = control <= kQuietSlowdown && a.steady && c.steady;
  }
  volatile float sink = y[n / 2];
  (void)sink;
  t.memBandwidthGBs = one.gbs();
  t.memBandwidthAllCoresGBs = t.cores > 1 ? all.gbs() : t.memBandwidthGBs;
  // No host of the last fifteen years copies below this on one core: a reading under it was a
  // stall (CI once trusted 0.3 GB/s from a probe it judged quiet), not a roof.
  constexpr double kLeastCopyGBs = 1.0;
  if (quiet && t.memBandwidthGBs >= kLeastCopyGBs) return;
  char b[256];
  if (quiet)
    std::snprintf(b, sizeof b, "the copy probe read %.2f GB/s on one core, below any host's memory (a stall)",
                  t.memBandwidthGBs);
  else
    std::snprintf(b, sizeof b, "the copy probe ran on busy cores (%s slower than free, load %.2f on %s, %d tries)",
                  formatRatio(control).c_str(), load.loadavg1, countOf(load.cores, "core").c_str(), kTries);
  t.copyDoubt = b;
}

int64_t readCacheSize(int index) {
  std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
  std::string s;
  if (!(f >> s) || s.empty()) return 0;
  int64_t mult = 1;
  char u = s.back();
  if (u == 'K') mult = 1024;
  else if (u == 'M') mult = 1024 * 1024;
  if (mult != 1) s.pop_back();
  try {
    return std::stoll(s) * mult;
  } catch (...) {
    return 0;
  }
}

int readCacheInt(int index, const char* what) {
  std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/" + what);
  int v = 0;
  return f >> v ? v : 0;
}

int cacheLevel(int index, std::string* type) {
  std::ifstream lf("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/level");
  std::ifstream tf("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/type");
  int level = 0;
  if (!(lf >> level)) return 0;
  tf >> *type;
  return level;
}

}  // namespace

// FMA latency and issue rate at the kernels' vector width, by microarchitecture (a table, not a
// measurement: the defaults derived from them must not move between runs). Zen 1 (AMD family 23
// below model 0x30) has two 128-bit FMA pipes: one 256-bit FMA a cycle, latency 5. Zen 2 (family
// 23 from model 0x30) widened them to 256 bits (latency 5); Zen 3 and 4 (family 25) have two
// 256-bit pipes at latency 4, so a 512-bit FMA issues once per cycle on Zen 4; Zen 5 (family 26)
// and Intel's AVX-512 server cores issue two per cycle at every width.
void setFmaPipes(TargetDesc& t, const std::string& vendor, int family, int model) {
  t.fmaLatency = 4;
  t.fmaPerCycle = 2;
  if (vendor != "AuthenticAMD") return;
  if (family == 23) {
    t.fmaLatency = 5;
    if (model < 0x30 && t.simdBits >= 256) t.fmaPerCycle = 1;
  }
  if (family < 26 && t.simdBits >= 512) t.fmaPerCycle = 1;
}

int flopsPerCycleF32(const TargetDesc& t) { return t.simdBits / 32 * 2 * t.fmaPerCycle; }

double settleClockGHz(double chainGHz, double peakGflopsF32, int flopsPerCycle) {
  const double implied = flopsPerCycle > 0 ? peakGflopsF32 / flopsPerCycle : 0;
  if (implied <= 0) return chainGHz > kMaxCoreGHz ? 0 : chainGHz;
  return chainGHz < implied || chainGHz > kMaxCoreGHz ? implied : chainGHz;
}

namespace {

// The machine's 16-bit peaks from its f32 FMA peak: vdpbf16ps (avx512_bf16) and the f16 FMAs of
// avx512_fp16 do two products per f32 lane; AMX's tdpbf16ps 1024 flops a cycle per core (16x16x32
// multiply-adds every 16 cycles, Intel's optimization manual). Without them a bf16/f16 kernel
// computes in f32 and its peak is the f32 one.
void setHalfPeaks(TargetDesc& t) {
  t.peakGflopsBF16 = t.peakGflopsF32 * (t.hasIsa("avx512_bf16") ? 2 : 1);
  if (t.hasIsa("amx_bf16") && t.clockGHz > 0) t.peakGflopsBF16 = std::max(t.peakGflopsBF16, t.clockGHz * 1024);
  t.peakGflopsF16 = t.peakGflopsF32 * (t.hasIsa("avx512_fp16") ? 2 : 1);
}

// Vector width, register count and arch name of x86-64 ISA level `level` (2, 3 or 4).
void setIsaLevel(TargetDesc& t, int level) {
  t.simdBits = level >= 4 ? 512 : level == 3 ? 256 : 128;
  t.vectorRegisters = level >= 4 ? 32 : 16;
  t.arch = "x86-64-v" + std::to_string(level);
}

TargetDesc probeHost() {
  TargetDesc t;
  t.name = "host";
  t.vendor = Vendor::Host;
  std::ifstream cpu("/proc/cpuinfo");
  std::string line, flags, vendor;
  int family = 0, model = -1;
  while (std::getline(cpu, line)) {
    if (t.model.empty() && line.rfind("model name", 0) == 0) t.model = line.substr(line.find(':') + 2);
    if (flags.empty() && line.rfind("flags", 0) == 0) flags = line.substr(line.find(':') + 2);
    if (vendor.empty() && line.rfind("vendor_id", 0) == 0) vendor = line.substr(line.find(':') + 2);
    if (!family && line.rfind("cpu family", 0) == 0) family = std::atoi(line.substr(line.find(':') + 2).c_str());
    if (model < 0 && line.rfind("model\t", 0) == 0) model = std::atoi(line.substr(line.find(':') + 2).c_str());
  }
  std::istringstream fs(flags);
  std::vector<std::string> all;
  for (std::string f; fs >> f;) all.push_back(f);
  for (const char* want : {"sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_bf16",
                           "avx512_fp16", "avx512_vnni", "amx_tile", "amx_bf16", "amx_int8"}) {
    if (std::find(all.begin(), all.end(), want) != all.end()) t.isa.push_back(want);
  }
  t.units = t.cores = usableCores();  // what this process may run on (taskset, a container's cpuset)
  bool avx512 = t.hasIsa("avx512f"), avx2 = t.hasIsa("avx2") && t.hasIsa("fma");
  setIsaLevel(t, avx512 ? 4 : avx2 ? 3 : 2);
  for (int i = 0; i < 8; ++i) {
    std::string type;
    int level = cacheLevel(i, &type);
    if (!level) continue;
    int64_t sz = readCacheSize(i);
    int ways = readCacheInt(i, "ways_of_associativity"), line = readCacheInt(i, "coherency_line_size");
    if (level == 1 && type == "Data") {
      t.l1dBytes = sz;
      if (ways > 0) t.l1dWays = ways;
      if (line > 0) t.cacheLineBytes = line;
    }
    if (level == 2) {
      t.l2Bytes = sz;
      if (ways > 0) t.l2Ways = ways;
    }
    if (level == 3) {
      t.l3Bytes = sz;
      if (ways > 0) t.l3Ways = ways;
    }
  }
  setFmaPipes(t, vendor, family, model);
  if (!t.l1dBytes) t.l1dBytes = 32 << 10;
  if (!t.l2Bytes) t.l2Bytes = 1 << 20;
  t.peakGflopsF32 = avx512 ? peakAvx512() : avx2 ? peakAvx2() : 0;
  t.clockGHz = settleClockGHz(chainClockGHz(), t.peakGflopsF32, flopsPerCycleF32(t));
  if (!avx512 && !avx2) t.peakGflopsF32 = 8.0;  // rough SSE figure; no kernel targets it seriously
  setHalfPeaks(t);
  probeCopyRoofs(t);
  return t;
}

}  // namespace

const TargetDesc& hostTarget() {
  static std::once_flag once;
  static TargetDesc host;
  std::call_once(once, [] { host = probeHost(); });
  return host;
}

Expected<TargetDesc> hostTargetWithThreads(int threads) {
  if (threads < 1 || threads > 1024) return makeError(ErrorCode::InvalidArgument, "--threads must be between 1 and 1024");
  TargetDesc t = hostTarget();
  t.units = threads;
  return t;
}

TargetDesc hostAtLevel(TargetDesc t) {
  const int level = t.arch == "x86-64-v4" ? 4 : t.arch == "x86-64-v3" ? 3 : 2;
  // What every CPU of the level has: AVX2, FMA and F16C from v3 on; AVX-512 F/BW/VL (and CD,
  // DQ, not tracked) at v4. bf16 and fp16 arithmetic, VNNI and AMX are features of some CPUs of
  // a level, not of the level.
  std::erase_if(t.isa, [&](const std::string& f) {
    if (f.rfind("amx", 0) == 0 || f == "avx512_bf16" || f == "avx512_fp16" || f == "avx512_vnni") return true;
    if (f.rfind("avx512", 0) == 0) return level < 4;
    return level < 3 && (f == "avx" || f == "avx2" || f == "fma" || f == "f16c");
  });
  auto add = [&](const char* f) {
    if (!t.hasIsa(f)) t.isa.push_back(f);
  };
  if (level >= 3)
    for (const char* f : {"avx", "avx2", "fma", "f16c"}) add(f);
  if (level >= 4)
    for (const char* f : {"avx512f", "avx512bw", "avx512vl"}) add(f);
  setHalfPeaks(t);
  return t;
}

Expected<TargetDesc> hostTargetAs(const std::string& arch) {
  TargetDesc t = hostTarget();
  if (arch == t.arch) return t;
  int level = arch == "x86-64-v4" ? 4 : arch == "x86-64-v3" ? 3 : arch == "x86-64-v2" ? 2 : 0;
  if (!level)
    return makeError(ErrorCode::InvalidArgument, "unknown host ISA level '" + arch + "' (x86-64-v2, x86-64-v3, x86-64-v4)");
  setIsaLevel(t, level);
  // Narrower vectors issue twice as often where the wide ones took both FMA pipes (Zen 4: two
  // 256-bit FMAs a cycle where one 512-bit; Zen 1: two 128-bit where one 256-bit).
  if (level < 4 && t.fmaPerCycle == 1) t.fmaPerCycle = 2;
  return hostAtLevel(t);
}

}  // namespace tessera
