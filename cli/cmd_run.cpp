// Owns `tessera run`: compile one kernel with one config for the host, run it on seeded inputs,
// check it against the reference evaluator and time it. For a GPU target, --emulate runs the
// mapped kernel (the module ptxas / the AMDGPU backend gets) on the CPU with one fiber per GPU
// thread, behind the same host wrapper, checks it and prints the emulation report (races, bounds,
// bank conflicts, coalescing); --emulate=pre runs the pre-mapping IR instead (faster, sees less).
// With a CUDA/HIP driver present the binary itself runs on the device, timed as a tune times it
// (checked run, warm-up, L2 flush before each timed launch, median).
#include <algorithm>
#include <cstdio>
#include <optional>

#include "cli/commands.h"
#include "cli/kernel_flags.h"
#include "cli/report.h"
#include "codegen/codegen.h"
#include "emulator/gpu_emu.h"
#include "codegen/gpu.h"
#include "codegen/gpu_runner.h"
#include "ir/reference.h"
#include "search/space.h"
#include "search/timing_load.h"
#include "support/load.h"
#include "support/si_format.h"
#include "support/stats.h"
#include "targets/kernel_io.h"

namespace tessera::cli {

namespace {

struct RunFlags {
  KernelFlags kernel;
  std::string config, target = "host";
  uint64_t seed = 1;
  int threads = kAllCores;
  double minTime = 0.2;
  int minRuns = 5;
  bool json = false, flush = false;
  std::string emulate;  // "": run on a device; "mapped" | "pre"
  int schedules = emu::Options{}.schedules;
  int64_t maxElements = kDefaultMaxElements;
};

// GPU target: the emulated form on the CPU (--emulate) or the binary on a device.
void runGpu(const ir::Kernel& k, const TargetDesc& t, const ir::Config& cfg, const RunFlags& f) {
  auto bin = codegen::compileGpu(k, cfg, t);
  if (!bin.ok()) failWith(bin.error());
  KernelIO io(k, f.seed);
  io.poisonOutputs();  // stale values must not pass
  std::string where, emuReport;
  std::shared_ptr<emu::Report> report;
  std::shared_ptr<const codegen::MappedKernel> mapped;
  double us = 0, compileSec = bin->compileSeconds;
  const bool emulated = !f.emulate.empty();
  if (f.emulate == "pre") {
    auto exe = codegen::compileEmulated(k, cfg, t);
    if (!exe.ok()) failWith(exe.error());
    compileSec += (*exe)->compileSeconds;
    (*exe)->run(io.buffers());
    where = "CPU emulation of the pre-mapping IR (no timing: the whole grid runs sequentially on one core)";
  } else if (f.emulate == "mapped") {
    codegen::MappedEmuOptions mo;
    mo.run.countInstructions = true;
    mo.run.schedules = f.schedules;
    mo.run.seed = f.seed;
    auto mk = codegen::compileMapped(*bin, t, mo);
    if (!mk.ok()) failWith(mk.error());
    compileSec += (*mk)->compileSeconds;
    mapped = *mk;
    report = std::make_shared<emu::Report>();
    auto runner = codegen::makeDeviceRunner(codegen::mappedEmulatedDevice(*mk, t.name, report));
    auto r = runner->run(*bin, k, io.buffers(), 1);
    emuReport = codegen::formatEmulationReport(*report, (*mk)->sites(), t.warpSize);
    if (!r.ok()) {
      if (!f.json) std::fprintf(stderr, "%s", emuReport.c_str());
      failWith(r.error());
    }
    where = "CPU emulation of the mapped " + std::string(t.words().kernelDialect) +
            " kernel (one fiber per GPU thread; no timing)";
  } else {
    auto runner = codegen::openRunnerFor(t);
    if (!runner.ok())
      fail("target " + t.name + " cannot run here (" + runner.error().message + "); --emulate runs its mapped kernel on the CPU", kExitBadInput);
    // The tune's protocol (measure/device_measurer.cpp): a checked run, a warm-up, then timed
    // launches, each after an L2 flush that keeps the device busy until it arrives; the median.
    MeasureOptions mo;
    mo.minTimeSec = f.minTime;
    mo.minRuns = std::max(f.minRuns, 1);
    const int64_t flush = 2 * std::max(t.l2Bytes_gpu, (*runner)->l2Bytes());
    auto r = (*runner)->measure(*bin, k, io.buffers(), mo, flush);
    if (!r.ok()) failWith(r.error());
    us = summarize(*r).median_us;
    where = (*runner)->device();
  }
  auto checked = io.check();
  if (!checked.ok()) failWith(checked.error());
  ir::Comparison cmp = *checked;
  // A wrong element of an emulated run: which thread wrote it, with which instruction, where.
  if (!cmp.ok && mapped) {
    std::string who = codegen::whoWrote(*report, mapped->sites(), bin->launch, k, cmp.firstBadOutput, cmp.firstBadElement);
    if (!who.empty()) cmp.firstBad += ", " + who;
  }
  if (f.json) {
    nlohmann::json j = {{"kernel", k.name}, {"target", t.name}, {"config", nlohmann::json::parse(cfg.toJson())},
                        {"strategy", bin->strategy}, {"emulated", emulated ? f.emulate : "no"}, {"correct", cmp.ok},
                        {"max_abs_err", cmp.maxAbsErr}, {"max_rel_err", cmp.maxRelErr}, {"compile_s", compileSec},
                        {"launch", bin->launch.str()}, {"resources", bin->resources.summary()}};
    if (!emulated) j["time_us"] = us;
    if (!emuReport.empty()) j["emulation_report"] = emuReport;
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("kernel      %s\ntarget      %s (%s)\nconfig      %s (%s)\nran on      %s\n", k.name.c_str(), t.name.c_str(),
                t.model.c_str(), cfg.str().c_str(), bin->strategy.c_str(), where.c_str());
    if (!emulated) std::printf("time        %s per launch sequence\n", fmtTime(us).c_str());
    std::printf("launch      %s\nresources   %s\ncheck       %s  max abs err %.2e, max rel err %.2e (tolerance %.0e)%s\n",
                bin->launch.str().c_str(), bin->resources.summary().c_str(), cmp.ok ? "ok" : "WRONG", cmp.maxAbsErr,
                cmp.maxRelErr, cmp.tolerance, cmp.ok ? "" : ("; first bad " + cmp.firstBad).c_str());
    if (!emuReport.empty()) std::printf("%s", emuReport.c_str());
  }
  if (!cmp.ok) std::exit(4);
}

void runCommand(const RunFlags& f) {
  auto k = buildKernel(f.kernel);
  if (!k.ok()) failWith(k.error());
  if (Status big = session::checkKernelSize(*k, f.maxElements); !big.ok()) failWith(big.error());
  auto t = session::targetFor(f.target, f.threads);
  if (!t.ok()) failWith(t.error());
  if (!f.emulate.empty() && !t->isGpu()) fail("--emulate needs a GPU target (--target sm_90, gfx942, ...)", kExitBadInput);
  if (!f.emulate.empty() && f.emulate != "mapped" && f.emulate != "pre")
    fail("--emulate takes mapped (the default) or pre, not '" + f.emulate + "'", kExitBadInput);
  if (!(f.minTime >= 0)) fail("--min-time must be at least 0 seconds", kExitBadInput);  // NaN fails too
  if (f.minRuns < 1) fail("--min-runs must be at least 1", kExitBadInput);
  if (f.schedules < 1 || f.schedules > 1000) fail("--schedules must be 1 to 1000", kExitBadInput);
  auto space = search::makeSpace(*k, *t);
  if (!space.ok()) failWith(space.error());
  auto over = parseConfigArg(f.config);
  if (!over.ok()) failWith(over.error());
  auto cfg = space->complete(*over);
  if (!cfg.ok()) failWith(cfg.error());
  if (auto why = space->check(*cfg)) failWith(makeError(ErrorCode::InvalidConfig, "invalid config: " + *why));
  if (t->isGpu()) return runGpu(*k, *t, *cfg, f);
  auto exe = codegen::compileHost(*k, *cfg, *t);
  if (!exe.ok()) failWith(exe.error());
  HostRunOptions ro;
  ro.seed = f.seed;
  ro.measure.minTimeSec = f.minTime;
  ro.measure.minRuns = f.minRuns;
  ro.measure.flushCache = f.flush;
  ro.threads = cfg->hostThreads();
  const auto& e = **exe;
  // Honest timing under load, judged as a tune judges its finalists (search/timing_load.h): the load
  // control at the run's thread count before and after the timing, and the samples' p80/p20. A busy
  // timing is taken once more and the quieter kept; still busy, the run says so in one line (its
  // time moved 1.4-5.3x between runs on a loaded 2-core host, and nothing warned).
  search::TimingLoad timing;
  timing.before = readLoad();
  auto control = [threads = ro.threads] { return steadyCoreShare(threads); };
  std::optional<HostRunResult> res;
  for (int attempt = 0; attempt < 2 && (!res || timing.isBusy()); ++attempt) {
    const double before = control();
    auto r = runOnHost(*k, [&e](void* const* b) { e.run(b); }, *t, ro);
    if (!r.ok()) failWith(r.error());
    const double slowdown = std::max(before, control());
    const double spread = r->samples.p20_us > 0 ? r->samples.p80_us / r->samples.p20_us : 0;
    ++timing.remeasures;
    if (!res || std::max(slowdown / kQuietSlowdown, spread / search::kNoisySpread) <
                    std::max(timing.control / kQuietSlowdown, timing.spread / search::kNoisySpread)) {
      res = std::move(*r);
      timing.control = slowdown;
      timing.spread = spread;
    }
  }
  timing.after = readLoad();
  timing.busy = timing.isBusy();
  RunReport rep{&*k, &*t, *cfg, e.compileSeconds, *res};
  if (f.json) {
    nlohmann::json j = runJson(rep);
    j["timing"] = {{"under_load", timing.busy},
                   {"p80_p20", timing.spread},
                   {"control_slowdown", timing.control},
                   {"timings", timing.remeasures},
                   {"load_before", timing.before.loadavg1},
                   {"load_after", timing.after.loadavg1}};
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf("%s", formatRun(rep).c_str());
  if (timing.busy)
    std::printf("warning     timing under load: p80/p20 %s, the control found the cores %s slower than free (%s), "
                "timed %s; this time is uncertain: run it again on a quiet machine\n",
                formatRatio(timing.spread).c_str(), formatRatio(timing.control).c_str(),
                loadSpan(timing.before, timing.after).c_str(), timing.remeasures == 1 ? "once" : "twice");
}

}  // namespace

void addRunCommand(CLI::App& app) {
  auto f = std::make_shared<RunFlags>();
  auto* run = app.add_subcommand("run", "compile + run + check one kernel with one config (default: the space's default)");
  run->add_option("--config", f->config, "knob overrides: 'MC=64,NR=32' or a JSON object");
  run->add_option("--target", f->target, "target (host runs here)")->capture_default_str();
  run->add_option("--seed", f->seed, "input seed (and, with --emulate, the seed of the PCT fiber orders)")->capture_default_str();
  run->add_option("--schedules", f->schedules,
                  "--emulate: fiber orders each launch runs (the fixed one, then seeded PCT orders over sampled blocks)")
      ->capture_default_str();
  addThreadsOption(run, &f->threads);
  run->add_option("--min-time", f->minTime, "seconds of timed runs at least")->capture_default_str();
  run->add_option("--min-runs", f->minRuns, "timed runs at least")->capture_default_str();
  run->add_flag("--flush-cache", f->flush, "flush the LLC between runs (cold-cache timing)");
  run->add_flag("--json", f->json, "machine-readable output");
  addMaxElementsOption(run, &f->maxElements);
  run->add_option("--emulate", f->emulate,
                  "GPU target: run the kernel on the CPU and check it (no device needed): mapped (the default: the "
                  "mapped NVVM/ROCDL kernel, one fiber per GPU thread, with races, bounds and bank conflicts "
                  "reported) or pre (the pre-mapping IR, faster, sees less)")
      ->expected(0, 1)
      ->default_str("mapped");
  addKernelSubcommands(run, &f->kernel, [f] { runCommand(*f); });
}

}  // namespace tessera::cli
