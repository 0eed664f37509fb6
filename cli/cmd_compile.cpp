// Owns `tessera compile`: print the kernel (IR text form) or the MLIR/LLVM of chosen stages,
// or write an object file; for GPU targets (--target sm_90 / gfx942 ...) the pre-mapping and
// mapped MLIR, PTX / GCN assembly or the cubin / hsaco, with the resource report on stderr.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <fstream>
#include <unistd.h>

#include "cli/cmd_emulate.h"
#include "cli/commands.h"
#include "cli/gpu_flags.h"
#include "cli/kernel_flags.h"
#include "cli/report.h"
#include "codegen/codegen.h"
#include "emulator/gpu_emu.h"
#include "codegen/gpu.h"
#include "codegen/gpu_backend.h"
#include "targets/kernel_io.h"
#include "ir/text.h"
#include "measure/estimate.h"
#include "search/space.h"
#include "support/si_format.h"
#include "support/strings.h"

namespace tessera::cli {

namespace {

struct CompileFlags {
  KernelFlags kernel;
  std::string config, target = "host", emit = "scheduled", output, hostPreset;
  int threads = kAllCores;
  GpuFlags gpu;
  int schedules = emu::Options{}.schedules;  // emulation-report: fiber orders
  uint64_t seed = 1;                         // emulation-report: inputs and the PCT orders
};

// The target to compile for: a named machine (--host-preset: its ISA, caches and LLVM CPU, e.g.
// AMX code for a Sapphire Rapids on any host; only the emitted text, nothing runs) or --target.
Expected<TargetDesc> compileTarget(const CompileFlags& f, codegen::CompileOptions* o) {
  if (f.hostPreset.empty()) return session::targetWithGpu(f.target, f.gpu.gpus, f.threads);
  if (!f.gpu.gpus.empty()) return makeError(ErrorCode::InvalidArgument, "--host-preset and --gpu name two targets: pick one");
  TESSERA_ASSIGN(TargetDesc t, hostPreset(f.hostPreset));
  if (f.threads != kAllCores) {
    TESSERA_ASSIGN(TargetDesc h, hostTargetWithThreads(f.threads));  // the range check
    t.units = h.units;
  }
  o->cpu = hostPresetCpu(f.hostPreset);
  return t;
}

Expected<ir::Config> configFor(const ir::Kernel& k, const TargetDesc& t, const std::string& arg) {
  TESSERA_ASSIGN(ir::Space space, search::makeSpace(k, t));
  TESSERA_ASSIGN(ir::Config over, parseConfigArg(arg));
  TESSERA_ASSIGN(ir::Config cfg, space.complete(over));
  if (auto why = space.check(cfg)) return makeError(ErrorCode::InvalidConfig, "invalid config: " + *why);
  return cfg;
}

// `--emit config`: the config a compile with these flags uses (the defaults completed by
// --config), one JSON line: what a shrunk documentation command is checked against.
std::string configLine(const TargetDesc& t, const ir::Config& cfg) {
  nlohmann::json j = {{"target", t.name}, {"units", t.units}, {"config", nlohmann::json::parse(cfg.toJson())}};
  return j.dump() + "\n";
}

// The mapped kernel run once on this CPU (seeded inputs, one fiber per GPU thread), checked
// against the reference: races, bounds, bank conflicts per shared access, sectors per global
// request, per kernel.
std::string emulationReport(const ir::Kernel& k, const TargetDesc& t, const ir::Config& cfg, const codegen::GpuBinary& bin,
                            const CompileFlags& f) {
  codegen::MappedEmuOptions mo;
  mo.run.countInstructions = true;
  mo.run.schedules = f.schedules;
  mo.run.seed = f.seed;
  auto mk = codegen::compileMapped(bin, t, mo);
  if (!mk.ok()) failWith(mk.error());
  auto report = std::make_shared<emu::Report>();
  auto runner = codegen::makeDeviceRunner(codegen::mappedEmulatedDevice(*mk, t.name, report));
  KernelIO io(k, f.seed);
  io.poisonOutputs();
  auto r = runner->run(bin, k, io.buffers(), 1);
  std::string out = "kernel     " + k.name + " on " + t.name + ", config " + cfg.str() + " (" + bin.strategy + ")\n" +
                    "launch     " + bin.launch.str() + "\n";
  auto checked = io.check();
  if (r.ok() && checked.ok())
    out += std::string("check      ") + (checked->ok ? "matches the reference" : "WRONG: " + checked->firstBad) + "\n";
  return out + codegen::formatEmulationReport(*report, (*mk)->sites(), t.warpSize);
}

// GPU targets: one compile to the binary gives every stage after the payload and the resources.
std::string compileGpuStages(const ir::Kernel& k, const TargetDesc& t, const CompileFlags& f) {
  auto cfg = configFor(k, t, f.config);
  if (!cfg.ok()) failWith(cfg.error());
  std::string text;
  std::optional<codegen::GpuBinary> bin;
  for (const auto& stage : split(f.emit, ',')) {
    if (stage == "ir") {
      text += ir::printKernel(k);
      continue;
    }
    if (stage == "config") {
      text += configLine(t, *cfg);
      continue;
    }
    if (stage == "emulation-report") {
      if (!bin) {
        auto b = codegen::compileGpu(k, *cfg, t, {.wantBinary = false});
        if (!b.ok()) failWith(b.error());
        bin = std::move(*b);
      }
      text += emulationReport(k, t, *cfg, *bin, f);
      continue;
    }
    auto e = codegen::parseGpuEmit(stage, t.vendor);
    if (!e.ok()) failWith(makeError(ErrorCode::InvalidArgument, e.error().message + ", ir"));
    if (*e == codegen::GpuEmit::Payload || *e == codegen::GpuEmit::Schedule) {
      auto out = codegen::emitGpu(k, *cfg, t, *e);
      if (!out.ok()) failWith(out.error());
      text += *out;
      continue;
    }
    if (!bin) {
      auto b = codegen::compileGpu(k, *cfg, t);
      if (!b.ok()) failWith(b.error());
      bin = std::move(*b);
    }
    switch (*e) {
      case codegen::GpuEmit::Pre: text += bin->mlirPre; break;
      case codegen::GpuEmit::Mapped: text += bin->mlirMapped; break;
      case codegen::GpuEmit::Device:
        // The launch as `tessera emulate` takes it, after the module so that its lines stay the
        // ones emulation reports name.
        text += bin->mlirDevice + (bin->mlirDevice.empty() || bin->mlirDevice.back() == '\n' ? "" : "\n") +
                emulateLaunchComment(bin->launch, k);
        break;
      case codegen::GpuEmit::Asm: text += bin->assembly; break;
      default:
        if (f.output.empty() && isatty(STDOUT_FILENO)) fail("--emit " + stage + " writes binary: give -o FILE", kExitBadInput);
        text += bin->binary;
    }
  }
  if (bin) {
    std::fprintf(stderr, "config     %s (%s)\n", cfg->str().c_str(), bin->strategy.c_str());
    std::fprintf(stderr, "launch     %s\n", bin->launch.str().c_str());
    std::fprintf(stderr, "resources  %s\n", bin->resources.summary().c_str());
    // The analytic model's prediction with these resources (what `tune --estimate` ranks by).
    if (auto e = measure::estimateKernel(k, *cfg, t, &bin->resources); e.ok()) {
      std::string terms;
      for (const auto& term : e->model.terms) terms += (terms.empty() ? "" : ", ") + term.name + " " + formatMicros(term.us);
      std::fprintf(stderr, "estimate   %s, %s-bound (%s; model %s)\n", formatMicros(e->model.timeUs).c_str(),
                   e->model.bound.c_str(), terms.c_str(), costmodel::kGpuModelName);
    }
  }
  return text;
}

// The output, to -o FILE or stdout: a write that fails (a full disk, /dev/full) is an error, not
// a silent exit 0 (main checks stdout once more at exit).
void writeOutput(const std::string& path, const std::string& text) {
  if (path.empty()) {
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
      if (errno == EPIPE) throw CLI::RuntimeError(0);  // the reader closed the pipe (`| head`): not an error
      fail(std::string("cannot write the output: ") + std::strerror(errno), 1);
    }
    return;
  }
  std::ofstream o(path, std::ios::binary);
  o.write(text.data(), std::streamsize(text.size()));
  o.close();
  if (!o) fail("cannot write " + path + ": " + std::strerror(errno), 1);
}

void compileCommand(const CompileFlags& f) {
  if (f.schedules < 1 || f.schedules > 1000) fail("--schedules must be 1 to 1000", kExitBadInput);
  loadGpuFacts(f.gpu);
  auto k = buildKernel(f.kernel);
  if (!k.ok()) failWith(k.error());
  std::string text;
  auto gt = f.hostPreset.empty() ? session::targetWithGpu(f.target, f.gpu.gpus, kAllCores) : getTarget(f.target);
  if (!gt.ok() && !f.gpu.gpus.empty()) failWith(gt.error());
  if (gt.ok() && gt->isGpu()) {
    CompileFlags g = f;
    if (g.emit == CompileFlags().emit) g.emit = codegen::gpuBackend(gt->vendor)->assemblyName();  // the host default
    text = compileGpuStages(*k, *gt, g);
    return writeOutput(f.output, text);
  }
  for (const auto& stage : split(f.emit, ',')) {
    if (stage == "ir") {
      text += ir::printKernel(*k);
      continue;
    }
    auto e = stage == "config" ? Expected<codegen::Emit>(codegen::Emit::Object) : codegen::parseEmit(stage);
    if (!e.ok()) failWith(makeError(ErrorCode::InvalidArgument, e.error().message + ", ir, config"));
    codegen::CompileOptions co;
    auto t = compileTarget(f, &co);
    if (!t.ok()) failWith(t.error());
    auto space = search::makeSpace(*k, *t);
    if (!space.ok()) failWith(space.error());
    auto over = parseConfigArg(f.config);
    if (!over.ok()) failWith(over.error());
    auto cfg = space->complete(*over);
    if (!cfg.ok()) failWith(cfg.error());
    if (auto why = space->check(*cfg)) failWith(makeError(ErrorCode::InvalidConfig, "invalid config: " + *why));
    if (stage == "config") {
      text += configLine(*t, *cfg);
      continue;
    }
    auto out = codegen::emitHost(*k, *cfg, *t, *e, co);
    if (!out.ok()) failWith(out.error());
    if (*e == codegen::Emit::Object && f.output.empty() && isatty(STDOUT_FILENO))
      fail("--emit obj writes binary: give -o FILE", kExitBadInput);
    text += *out;
  }
  writeOutput(f.output, text);
}

}  // namespace

void addCompileCommand(CLI::App& app) {
  auto f = std::make_shared<CompileFlags>();
  auto* c = app.add_subcommand("compile", "print the kernel's IR, MLIR or LLVM at chosen stages, or write an object");
  c->add_option("--emit", f->emit,
                "comma-separated stages: ir, config (the completed config, one JSON line), payload, schedule, scheduled, "
                "llvm-dialect, llvm-ir, asm, obj; GPU targets: "
                "payload, schedule, pre, mlir, nvvm|rocdl (the module the mapped-kernel emulator runs), ptx|asm, "
                "cubin|hsaco, emulation-report (the mapped kernel run on this CPU: races, bounds, bank conflicts, "
                "coalescing); the resource report goes to stderr")
      ->capture_default_str();
  c->add_option("-o,--output", f->output, "write to a file instead of stdout");
  c->add_option("--schedules", f->schedules,
                "emulation-report: fiber orders to run (the fixed one, then seeded PCT orders over sampled blocks)")
      ->capture_default_str();
  c->add_option("--seed", f->seed, "emulation-report: seed of the inputs and of the PCT fiber orders")->capture_default_str();
  c->add_option("--config", f->config, "knob overrides: 'MC=64,NR=32' or a JSON object");
  c->add_option("--target", f->target, "target: host, sm_80, sm_86, sm_89, sm_90, sm_90a, gfx90a, gfx942, gfx1100")
      ->capture_default_str();
  addGpuFlags(c, &f->gpu);
  addThreadsOption(c, &f->threads);
  c->add_option("--host-preset", f->hostPreset,
                "compile for a named x86 machine instead of this one: zen4, zen4-avx2, sapphire-rapids, zen1, zen5 (text only)");
  addKernelSubcommands(c, &f->kernel, [f] { compileCommand(*f); });
}

}  // namespace tessera::cli
