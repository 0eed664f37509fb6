// Owns result formatting for the CLI.
#include "cli/report.h"

#include <cstdio>

#include "cli/commands.h"
#include "ir/families.h"
#include "ir/verifier.h"

namespace tessera::cli {

std::string targetSummary(const TargetDesc& t) {
  char buf[256];
  char clock[32] = "";
  if (t.clockGHz > 0) std::snprintf(clock, sizeof clock, " at %.2f GHz", t.clockGHz);
  std::snprintf(buf, sizeof buf, "%s (%s, %s, %d cores; FMA peak %.1f GFLOP/s/core%s, copy %.1f GB/s)", t.name.c_str(),
                t.arch.c_str(), t.model.c_str(), t.units, t.peakGflopsF32, clock, t.memBandwidthGBs);
  return buf;
}

nlohmann::json targetJson(const TargetDesc& t) {
  return {{"name", t.name},       {"arch", t.arch},        {"model", t.model},
          {"units", t.units},     {"isa", t.isa},          {"peak_gflops_f32", t.peakGflopsF32},
          {"mem_bandwidth_gbs", t.memBandwidthGBs}, {"l1d_bytes", t.l1dBytes}, {"l2_bytes", t.l2Bytes},
          {"l3_bytes", t.l3Bytes}, {"clock_ghz", t.clockGHz}, {"mem_bandwidth_all_cores_gbs", t.memBandwidthAllCoresGBs}};
}

namespace {

struct TimeUnit {
  double us;  // microseconds per unit
  const char* name;
  int decimals;
};

TimeUnit timeUnitFor(double us) {
  if (us < 1) return {1, "us", 3};
  if (us < 1e3) return {1, "us", 2};
  if (us < 1e6) return {1e3, "ms", 3};
  return {1e6, "s", 3};
}

}  // namespace

std::string fmtThroughput(const ir::Kernel& k, double v) {
  char b[64];
  // GPU figures read in TFLOP/s and TB/s; a CPU core's in GFLOP/s and GB/s.
  const bool compute = ir::isComputeBound(k);
  if (v >= (compute ? 1e4 : 1e3)) std::snprintf(b, sizeof b, compute ? "%.1f TFLOP/s" : "%.2f TB/s", v / 1e3);
  else std::snprintf(b, sizeof b, compute ? "%.1f GFLOP/s" : "%.1f GB/s", v);
  return b;
}

std::string fmtTimeNumber(double us, double unitOf) {
  TimeUnit u = timeUnitFor(unitOf);
  char b[48];
  std::snprintf(b, sizeof b, "%.*f", u.decimals, us / u.us);
  return b;
}

std::string fmtTime(double us, double unitOf) {
  if (unitOf < 0) unitOf = us;
  return fmtTimeNumber(us, unitOf) + " " + timeUnitFor(unitOf).name;
}

// "the FMA peak of 2 threads", "the copy bandwidth of 1 thread": what a host run is held against.
std::string peakName(const TargetDesc& t, bool compute, int threads, ir::ScalarType input) {
  if (t.isGpu()) return compute ? "the compute peak" : "memory bandwidth";
  std::string what = !compute ? "the copy bandwidth"
                     : input == ir::ScalarType::F32 || t.computePeakGflops(input) == t.peakGflopsF32
                         ? "the FMA peak"
                         : "the " + std::string(ir::typeName(input)) + " peak";
  return what + " of " + std::to_string(threads) + " thread" + (threads == 1 ? "" : "s");
}

std::string formatRun(const RunReport& r) {
  const auto& s = r.result.samples;
  const auto& c = r.result.check;
  bool compute = ir::isComputeBound(*r.kernel);
  char buf[2048];
  std::string checked = r.result.refRowStride > 1 ? "sampled rows (1 in " + std::to_string(r.result.refRowStride) + ")"
                                                  : "all elements";
  std::snprintf(buf, sizeof buf,
                "kernel      %s  (workload %.12s)\n"
                "target      %s\n"
                "config      %s\n"
                "compile     %.2f s\n"
                "time        %s median  (p20 %s, p80 %s, n=%lld)\n"
                "throughput  %s  (%s)\n"
                "check       %s  max abs err %.2e, max rel err %.2e (tolerance %.0e; %s)\n",
                r.kernel->name.c_str(), ir::workloadHash(*r.kernel).c_str(), targetSummary(*r.target).c_str(),
                r.config.str().c_str(), r.compileSeconds, fmtTime(s.median_us).c_str(),
                fmtTimeNumber(s.p20_us, s.median_us).c_str(), fmtTimeNumber(s.p80_us, s.median_us).c_str(),
                (long long)s.n,
                fmtThroughput(*r.kernel, compute ? r.result.gflops : r.result.gbps).c_str(),
                peakShareText(r.result.peakFraction,
                              peakName(*r.target, compute, r.config.hostThreads(), ir::kernelInputType(*r.kernel)),
                              compute ? kProbeReadLow : whyAboveBandwidth(*r.target, ir::kernelBytes(*r.kernel)))
                    .c_str(),
                c.ok ? "ok" : "FAILED",
                c.maxAbsErr, c.maxRelErr, c.tolerance, checked.c_str());
  return buf;
}

nlohmann::json runJson(const RunReport& r) {
  const auto& s = r.result.samples;
  const auto& c = r.result.check;
  nlohmann::json cfg = nlohmann::json::parse(r.config.toJson());
  return {{"kernel", r.kernel->name},
          {"family", ir::familyName(r.kernel->family)},
          {"workload", ir::workloadHash(*r.kernel)},
          {"target", targetJson(*r.target)},
          {"config", cfg},
          {"compile_seconds", r.compileSeconds},
          {"samples", {{"n", s.n}, {"median_us", s.median_us}, {"p20_us", s.p20_us}, {"p80_us", s.p80_us}}},
          {"gflops", r.result.gflops},
          {"gbps", r.result.gbps},
          {"peak_fraction", r.result.peakFraction},
          {"check",
           {{"ok", c.ok},
            {"max_abs_err", c.maxAbsErr},
            {"max_rel_err", c.maxRelErr},
            {"tolerance", c.tolerance},
            {"row_stride", r.result.refRowStride}}}};
}

Expected<ir::Config> parseConfigArg(const std::string& s) {
  if (s.empty()) return ir::Config{};
  size_t i = s.find_first_not_of(" \t");
  if (i != std::string::npos && s[i] == '{') return ir::Config::fromJson(s);
  return ir::Config::parseAssignments(s);
}

}  // namespace tessera::cli
