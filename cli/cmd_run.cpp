// Owns `tessera run`: compile one kernel with one config for the host, run it on seeded inputs,
// check it against the reference evaluator and time it.
#include <cstdio>

#include "cli/commands.h"
#include "cli/kernel_flags.h"
#include "cli/report.h"
#include "codegen/codegen.h"
#include "search/space.h"

namespace tessera::cli {

namespace {

struct RunFlags {
  KernelFlags kernel;
  std::string config, target = "host";
  uint64_t seed = 1;
  double minTime = 0.2;
  int minRuns = 5;
  bool json = false, flush = false;
};

void runCommand(const RunFlags& f) {
  auto k = buildKernel(f.kernel);
  if (!k.ok()) failWith(k.error());
  auto t = getTarget(f.target);
  if (!t.ok()) failWith(t.error());
  if (t->vendor != Vendor::Host) fail("target " + f.target + " cannot run here (no " + vendorName(t->vendor) + " device)", 2);
  auto space = search::makeSpace(*k, *t);
  if (!space.ok()) failWith(space.error());
  auto over = parseConfigArg(f.config);
  if (!over.ok()) failWith(over.error());
  auto cfg = space->complete(*over);
  if (!cfg.ok()) failWith(cfg.error());
  if (auto why = space->check(*cfg)) failWith(makeError(ErrorCode::InvalidConfig, "invalid config: " + *why));
  auto exe = codegen::compileHost(*k, *cfg, *t);
  if (!exe.ok()) failWith(exe.error());
  HostRunOptions ro;
  ro.seed = f.seed;
  ro.measure.minTimeSec = f.minTime;
  ro.measure.minRuns = f.minRuns;
  ro.measure.flushCache = f.flush;
  const auto& e = **exe;
  auto res = runOnHost(*k, [&e](void* const* b) { e.run(b); }, *t, ro);
  if (!res.ok()) failWith(res.error());
  RunReport rep{&*k, &*t, *cfg, e.compileSeconds, *res};
  if (f.json) std::printf("%s\n", runJson(rep).dump(2).c_str());
  else std::printf("%s", formatRun(rep).c_str());
}

}  // namespace

void addRunCommand(CLI::App& app) {
  auto f = std::make_shared<RunFlags>();
  auto* run = app.add_subcommand("run", "compile + run + check one kernel with one config (default: the space's default)");
  run->add_option("--config", f->config, "knob overrides: 'MC=64,NR=32' or a JSON object");
  run->add_option("--target", f->target, "target (host runs here)")->capture_default_str();
  run->add_option("--seed", f->seed, "input seed")->capture_default_str();
  run->add_option("--min-time", f->minTime, "seconds of timed runs at least")->capture_default_str();
  run->add_option("--min-runs", f->minRuns, "timed runs at least")->capture_default_str();
  run->add_flag("--flush-cache", f->flush, "flush the LLC between runs (cold-cache timing)");
  run->add_flag("--json", f->json, "machine-readable output");
  addKernelSubcommands(run, &f->kernel, [f] { runCommand(*f); });
}

}  // namespace tessera::cli
