// Owns `tessera compile`: print the kernel (IR text form) or the MLIR/LLVM of chosen stages,
// or write an object file.
#include <cstdio>
#include <fstream>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/kernel_flags.h"
#include "cli/report.h"
#include "codegen/codegen.h"
#include "ir/text.h"
#include "search/space.h"
#include "support/strings.h"

namespace tessera::cli {

namespace {

struct CompileFlags {
  KernelFlags kernel;
  std::string config, target = "host", emit = "scheduled", output;
};

void compileCommand(const CompileFlags& f) {
  auto k = buildKernel(f.kernel);
  if (!k.ok()) failWith(k.error());
  std::string text;
  for (const auto& stage : split(f.emit, ',')) {
    if (stage == "ir") {
      text += ir::printKernel(*k);
      continue;
    }
    auto e = codegen::parseEmit(stage);
    if (!e.ok()) failWith(makeError(ErrorCode::InvalidArgument, e.error().message + ", ir"));
    auto t = getTarget(f.target);
    if (!t.ok()) failWith(t.error());
    auto space = search::makeSpace(*k, *t);
    if (!space.ok()) failWith(space.error());
    auto over = parseConfigArg(f.config);
    if (!over.ok()) failWith(over.error());
    auto cfg = space->complete(*over);
    if (!cfg.ok()) failWith(cfg.error());
    if (auto why = space->check(*cfg)) failWith(makeError(ErrorCode::InvalidConfig, "invalid config: " + *why));
    auto out = codegen::emitHost(*k, *cfg, *t, *e);
    if (!out.ok()) failWith(out.error());
    if (*e == codegen::Emit::Object && f.output.empty() && isatty(STDOUT_FILENO))
      fail("--emit obj writes binary: give -o FILE", 2);
    text += *out;
  }
  if (f.output.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return;
  }
  std::ofstream o(f.output, std::ios::binary);
  if (!o || !o.write(text.data(), std::streamsize(text.size()))) fail("cannot write " + f.output, 1);
}

}  // namespace

void addCompileCommand(CLI::App& app) {
  auto f = std::make_shared<CompileFlags>();
  auto* c = app.add_subcommand("compile", "print the kernel's IR, MLIR or LLVM at chosen stages, or write an object");
  c->add_option("--emit", f->emit,
                "comma-separated stages: ir, payload, schedule, scheduled, llvm-dialect, llvm-ir, asm, obj")
      ->capture_default_str();
  c->add_option("-o,--output", f->output, "write to a file instead of stdout");
  c->add_option("--config", f->config, "knob overrides: 'MC=64,NR=32' or a JSON object");
  c->add_option("--target", f->target, "target")->capture_default_str();
  addKernelSubcommands(c, &f->kernel, [f] { compileCommand(*f); });
}

}  // namespace tessera::cli
