// Owns host timing and the checked run of one kernel.
#include "targets/host_runner.h"

#include <chrono>
#include <cstring>

#include "ir/families.h"

namespace tessera {

namespace {

double nowUs() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void flush(const TargetDesc& t) {
  static std::vector<char> junk;
  size_t want = size_t(std::max<int64_t>(t.l3Bytes, 8 << 20)) * 2;
  if (junk.size() < want) junk.assign(want, 1);
  for (size_t i = 0; i < junk.size(); i += 64) junk[i] = char(junk[i] + 1);
}

}  // namespace

SampleSummary measure(const std::function<void()>& fn, const MeasureOptions& o) {
  for (int i = 0; i < o.warmup; ++i) fn();
  std::vector<double> samples;
  double total = 0;
  while ((total < o.minTimeSec * 1e6 || int(samples.size()) < o.minRuns) && int(samples.size()) < o.maxRuns) {
    if (o.flushCache) flush(hostTarget());
    double t0 = nowUs();
    fn();
    double dt = nowUs() - t0;
    samples.push_back(dt);
    total += dt;
  }
  return summarize(samples);
}

Expected<HostRunResult> runOnHost(const ir::Kernel& k, const KernelCall& call, const TargetDesc& t,
                                  const HostRunOptions& o) {
  auto ins = ir::makeInputs(k, o.seed);
  auto outs = ir::makeOutputs(k);
  // Poison outputs so that a kernel that skips elements cannot pass on zero-initialized memory.
  for (auto& b : outs) std::memset(b.data(), 0x7f, b.bytes());
  std::vector<void*> bufs;
  std::vector<const ir::Buffer*> inPtrs, outPtrs;
  for (auto& b : ins) { bufs.push_back(b.data()); inPtrs.push_back(&b); }
  for (auto& b : outs) { bufs.push_back(b.data()); outPtrs.push_back(&b); }
  HostRunResult r;
  call(bufs.data());
  if (o.check) {
    TESSERA_ASSIGN(ir::Reference ref, ir::evaluateReference(k, inPtrs, o.ref));
    r.check = ir::compareOutputs(k, ref, outPtrs);
    r.refRowStride = ref.rowStride;
    if (!r.check.ok)
      return makeError(ErrorCode::WrongResult, "output differs from the reference: " + r.check.firstBad +
                                                   " (max rel err " + std::to_string(r.check.maxRelErr) + ", tolerance " +
                                                   std::to_string(r.check.tolerance) + ")");
  }
  r.samples = measure([&] { call(bufs.data()); }, o.measure);
  double sec = r.samples.median_us * 1e-6;
  if (sec > 0) {
    r.gflops = ir::kernelFlops(k) / sec * 1e-9;
    r.gbps = ir::kernelBytes(k) / sec * 1e-9;
  }
  if (ir::isComputeBound(k)) r.peakFraction = t.peakGflopsF32 > 0 ? r.gflops / t.peakGflopsF32 : 0;
  else r.peakFraction = t.memBandwidthGBs > 0 ? r.gbps / t.memBandwidthGBs : 0;
  return r;
}

}  // namespace tessera
