// Owns `tessera demo`, the README's main job: compile and run a default GEMM, a fused
// elementwise chain and an attention kernel on the host, check each against the reference and
// print one table.
#include <algorithm>
#include <cstdio>

#include "cli/commands.h"
#include "cli/report.h"
#include "codegen/codegen.h"
#include "ir/builders.h"
#include "ir/families.h"
#include "search/space.h"
#include "search/timing_load.h"
#include "support/si_format.h"

namespace tessera::cli {

namespace {

struct DemoFlags {
  bool json = false;
  bool small = false;
};

std::vector<ir::Kernel> demoKernels(bool small) {
  std::vector<ir::Kernel> ks;
  ir::GemmSpec g;
  g.m = g.n = g.k = small ? 256 : 1024;
  ks.push_back(*ir::buildGemm(g));
  ir::ElementwiseSpec e;
  e.expr = "y = gelu(x * s + b)";
  e.shape = small ? ir::Shape{256, 1024} : ir::Shape{4096, 4096};
  e.shapes["s"] = {e.shape[1]};
  e.shapes["b"] = {e.shape[1]};
  ks.push_back(*ir::buildElementwise(e));
  ir::AttentionSpec a;
  a.heads = 8;
  a.seq_q = small ? 256 : 2048;
  a.head_dim = 64;
  ks.push_back(*ir::buildAttention(a));
  return ks;
}

void demoCommand(const DemoFlags& f) {
  const TargetDesc& host = hostTarget();
  nlohmann::json rows = nlohmann::json::array();
  if (!f.json) {
    std::printf("Tessera demo: default configs (threads as each default chooses) on %s\n\n", targetSummary(host).c_str());
    std::printf("%-34s %-10s %7s %11s %16s %8s  %s\n", "kernel", "schedule", "threads", "time (ms)", "throughput", "of peak",
                "check vs reference");
  }
  std::vector<std::string> above;  // kernels above their peak, with why
  int failures = 0;
  // Timing under load, judged by the tune's rules (search/timing_load.h) over the whole table: the
  // control on every core before and after, the rows' largest p80/p20.
  const LoadReading loadBefore = readLoad();
  double control = steadyCoreShare(host.cores), spread = 0;
  for (const ir::Kernel& k : demoKernels(f.small)) {
    std::string err;
    RunReport rep;
    double rowSpread = 0;
    auto space = search::makeSpace(k, host);
    if (!space.ok()) {
      err = space.error().str();
    } else {
      ir::Config cfg = space->defaults();
      auto exe = codegen::compileHost(k, cfg, host);
      if (!exe.ok()) {
        err = exe.error().str();
      } else {
        const auto& e = **exe;
        HostRunOptions ro;
        ro.measure.minTimeSec = 0.3;
        ro.threads = cfg.hostThreads();
        auto res = runOnHost(k, [&e](void* const* b) { e.run(b); }, host, ro);
        if (!res.ok()) err = res.error().str();
        else rep = RunReport{&k, &host, cfg, e.compileSeconds, *res};
        if (res.ok() && res->samples.p20_us > 0) {
          spread = std::max(spread, res->samples.p80_us / res->samples.p20_us);
          rowSpread = res->samples.p80_us / res->samples.p20_us;
        }
      }
    }
    if (!err.empty()) {
      ++failures;
      if (f.json) rows.push_back({{"kernel", k.name}, {"error", err}});
      else std::printf("%-34s FAILED: %s\n", k.name.c_str(), err.c_str());
      continue;
    }
    if (f.json) {
      rows.push_back(runJson(rep));
      rows.back()["timing"] = {{"p80_p20", rowSpread}};
      continue;
    }
    bool compute = ir::isComputeBound(k);
    std::string sched = rep.config.has("schedule") ? *rep.config.getStr("schedule") : "default";
    std::string thr = fmtThroughput(k, compute ? rep.result.gflops : rep.result.gbps);
    // Above 100 % the probe read the peak low: the share is marked and explained below, never
    // shown as if the kernel beat the hardware.
    const double share = rep.result.peakFraction;
    char pct[32];
    std::snprintf(pct, sizeof pct, share > 1.0 ? "%6.0f%%*" : "%7.1f%%", 100 * share);
    if (!compute && !host.copyDoubt.empty()) std::snprintf(pct, sizeof pct, "%8s", "?");  // no roof to hold it to
    else if (share > 1.0) above.push_back(k.name + ": " + (compute ? kProbeReadLow : whyAboveBandwidth(host, ir::kernelBytes(k))));
    std::printf("%-34s %-10s %7d %11.3f %16s %8s  ok, max rel err %.1e\n", k.name.c_str(), sched.c_str(),
                rep.config.hostThreads(), rep.result.samples.median_us / 1e3, thr.c_str(), pct, rep.result.check.maxRelErr);
  }
  control = std::max(control, steadyCoreShare(host.cores));
  const LoadReading loadAfter = readLoad();
  const bool underLoad = control > kQuietSlowdown || spread > search::kNoisySpread;
  if (f.json) {
    // The table's verdict on every row (the rows were timed together), as `run --json` gives it.
    for (auto& row : rows) {
      if (!row.contains("timing")) continue;
      row["timing"]["under_load"] = underLoad;
      row["timing"]["control_slowdown"] = control;
      row["timing"]["load_before"] = loadBefore.loadavg1;
      row["timing"]["load_after"] = loadAfter.loadavg1;
    }
    std::printf("%s\n", rows.dump(2).c_str());
  } else {
    std::printf("\nof peak: GEMM/attention against the FMA peak of the threads they ran on (one core's, %s%s,\n"
                "times the threads), elementwise against the copy bandwidth of as many threads.\n",
                formatSi(host.peakGflopsF32 * 1e9, "FLOP/s", 3).c_str(),
                host.clockGHz > 0 ? (" at " + formatSi(host.clockGHz * 1e9, "Hz")).c_str() : "");
    for (const auto& a : above) std::printf("*  above its peak, which no kernel can beat: %s\n", a.c_str());
    if (!host.copyDoubt.empty()) std::printf("?  no share of the copy bandwidth: %s\n", host.copyDoubt.c_str());
    if (underLoad)
      std::printf("!  timed under load: p80/p20 up to %s, the control found the cores %s slower than free (%s); "
                  "the times and shares above are uncertain: run it again on a quiet machine\n",
                  formatRatio(spread).c_str(), formatRatio(control).c_str(), loadSpan(loadBefore, loadAfter).c_str());
    std::printf("Tune with `tessera tune ...`; inspect code with `tessera compile ... --emit asm`.\n");
  }
  if (failures) fail(std::to_string(failures) + " demo kernel(s) failed", kExitFailure);
}

}  // namespace

void addDemoCommand(CLI::App& app) {
  auto f = std::make_shared<DemoFlags>();
  auto* d = app.add_subcommand("demo", "compile and run a default GEMM, elementwise and attention kernel on this host");
  d->add_flag("--json", f->json, "machine-readable output");
  d->add_flag("--small", f->small, "small sizes (a few seconds)");
  d->callback([f] { demoCommand(*f); });
}

}  // namespace tessera::cli
