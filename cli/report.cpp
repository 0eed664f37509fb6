// Owns result formatting for the CLI.
#include "cli/report.h"

#include <algorithm>
#include <cstdio>

#include "cli/commands.h"
#include "ir/families.h"
#include "ir/verifier.h"
#include "support/si_format.h"

namespace tessera::cli {

std::string targetSummary(const TargetDesc& t) {
  char buf[256];
  char clock[32] = "";
  if (t.clockGHz > 0) std::snprintf(clock, sizeof clock, " at %s", formatSi(t.clockGHz * 1e9, "Hz").c_str());
  std::snprintf(buf, sizeof buf, "%s (%s, %s, %s; FMA peak %s/core%s, copy %s)", t.name.c_str(), t.arch.c_str(),
                t.model.c_str(), countOf(t.units, "core").c_str(), formatSi(t.peakGflopsF32 * 1e9, "FLOP/s", 3).c_str(),
                clock, formatSi(t.memBandwidthGBs * 1e9, "B/s", 3).c_str());
  return buf;
}

double steadyCoreShare(int threads) {
  double least = 1e30;
  for (int i = 0; i < 3; ++i) least = std::min(least, coreShareSlowdown(threads));
  return least;
}

std::string loadSpan(const LoadReading& before, const LoadReading& after) {
  auto one = [](const LoadReading& l) {
    char b[32] = "?";
    if (l.loadavg1 >= 0) std::snprintf(b, sizeof b, "%.2f", l.loadavg1);
    return std::string(b);
  };
  return "load " + one(before) + " before, " + one(after) + " after on " + countOf(after.cores, "core");
}

nlohmann::json targetJson(const TargetDesc& t) {
  return {{"name", t.name},       {"arch", t.arch},        {"model", t.model},
          {"units", t.units},     {"isa", t.isa},          {"peak_gflops_f32", t.peakGflopsF32},
          {"mem_bandwidth_gbs", t.memBandwidthGBs}, {"l1d_bytes", t.l1dBytes}, {"l2_bytes", t.l2Bytes},
          {"l3_bytes", t.l3Bytes}, {"clock_ghz", t.clockGHz}, {"mem_bandwidth_all_cores_gbs", t.memBandwidthAllCoresGBs},
          {"copy_doubt", t.copyDoubt.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.copyDoubt)}};
}

namespace {

// Kernel times read in us and up (si_format.h): a median's scale is chosen by its own value.
SiScale timeScaleFor(double us) { return siScaleFor(us * 1e-6, -2, 0); }

}  // namespace

std::string fmtThroughput(const ir::Kernel& k, double v) {
  // Never below G: a small kernel's "0.512 GFLOP/s" compares with a big one's "72.40 GFLOP/s".
  return formatSi(v * 1e9, ir::isComputeBound(k) ? "FLOP/s" : "B/s", 3);
}

std::string fmtTimeNumber(double us, double unitOf) {
  return siNumber(us * 1e-6, timeScaleFor(unitOf));
}

std::string fmtTime(double us, double unitOf) {
  if (unitOf < 0) unitOf = us;
  return fmtTimeNumber(us, unitOf) + " " + timeScaleFor(unitOf).prefix + "s";
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
                (compute ? peakShareText(r.result.peakFraction,
                                         peakName(*r.target, compute, r.config.hostThreads(), ir::kernelInputType(*r.kernel)))
                         : bandwidthShareText(*r.target, r.result.peakFraction,
                                              peakName(*r.target, compute, r.config.hostThreads(),
                                                       ir::kernelInputType(*r.kernel)),
                                              ir::kernelBytes(*r.kernel)))
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
