// Owns host timing and the checked run of one kernel.
#include "targets/host_runner.h"

#include <chrono>
#include <cstring>

#include "ir/families.h"
#include "targets/kernel_io.h"

namespace tessera {

namespace {

double nowUs() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

void flushHostCaches() {
  static std::vector<char> junk;
  size_t want = size_t(std::max<int64_t>(hostTarget().l3Bytes, 8 << 20)) * 2;
  if (junk.size() < want) junk.assign(want, 1);
  for (size_t i = 0; i < junk.size(); i += 64) junk[i] = char(junk[i] + 1);
}

double wallMicros(const std::function<void()>& fn) {
  double t0 = nowUs();
  fn();
  return nowUs() - t0;
}

std::vector<double> sampleRuns(const std::function<double()>& timedCall, const MeasureOptions& o,
                               const std::function<void()>& beforeEach) {
  for (int i = 0; i < o.warmup; ++i) (void)timedCall();
  std::vector<double> samples;
  double total = 0;
  while ((total < o.minTimeSec * 1e6 || int(samples.size()) < o.minRuns) && int(samples.size()) < o.maxRuns) {
    if (beforeEach) beforeEach();
    double dt = timedCall();
    samples.push_back(dt);
    total += dt;
  }
  return samples;
}

SampleSummary timeCalls(const std::function<void()>& fn, const MeasureOptions& o) {
  std::function<void()> flush;
  if (o.flushCache) flush = flushHostCaches;
  return summarize(sampleRuns([&] { return wallMicros(fn); }, o, flush));
}

Expected<HostRunResult> runOnHost(const ir::Kernel& k, const KernelCall& call, const TargetDesc& t,
                                  const HostRunOptions& o) {
  KernelIO io(k, o.seed, KernelIO::Outputs::Private, o.ref);
  io.poisonOutputs();
  HostRunResult r;
  call(io.buffers());
  if (o.check) {
    TESSERA_ASSIGN(r.check, io.check());
    r.refRowStride = (*io.reference())->rowStride;
    if (!r.check.ok)
      return makeError(ErrorCode::WrongResult, "output differs from the reference: " + r.check.firstBad +
                                                   " (max rel err " + std::to_string(r.check.maxRelErr) + ", tolerance " +
                                                   std::to_string(r.check.tolerance) + ")");
  }
  r.samples = timeCalls([&] { call(io.buffers()); }, o.measure);
  double sec = r.samples.median_us * 1e-6;
  if (sec > 0) {
    r.gflops = ir::kernelFlops(k) / sec * 1e-9;
    r.gbps = ir::kernelBytes(k) / sec * 1e-9;
  }
  const double peak =
      ir::isComputeBound(k) ? t.computePeakGflops(ir::kernelInputType(k), o.threads) : t.bandwidthGBs(o.threads);
  r.peakFraction = peak > 0 ? (ir::isComputeBound(k) ? r.gflops : r.gbps) / peak : 0;
  // A share no cache explains says the copy roof read low (a probe judged quiet read 0.3 GB/s in
  // CI, and 256 floats at 51 GB/s became 171x "of peak", which the cache service then refused):
  // no share rather than an impossible one.
  if (!ir::isComputeBound(k) && r.peakFraction > kHostCacheShareLimit) r.peakFraction = 0;
  return r;
}

}  // namespace tessera
