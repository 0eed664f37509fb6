// Owns --gpu / --gpu-facts: the flags, the facts files of $TESSERA_GPU_FACTS, and how a report
// names a GPU target.
#include "cli/gpu_flags.h"

#include <cstdlib>

#include "cli/commands.h"
#include "cli/kernel_flags.h"
#include "support/strings.h"
#include "targets/gpu_skus.h"
#include "targets/gpu_targets.h"

namespace tessera::cli {

void addGpuFlags(CLI::App* cmd, GpuFlags* f, bool many) {
  auto* g = cmd->add_option("--gpu", f->gpus,
                            many ? "a GPU by name (repeatable), e.g. \"RTX 4090\", L4, MI300X: tessera gpus lists them"
                                 : "a GPU by name, e.g. \"RTX 4090\", L4, MI300X (its chip is the target): tessera gpus lists them");
  if (!many) g->expected(1);
  // One file per flag (repeat it for more): `gpus --gpu-facts FILE NAME` took NAME for a second file.
  cmd->add_option("--gpu-facts", f->facts, "a JSON file of GPUs to add, repeatable (default: the files in $TESSERA_GPU_FACTS)")
      ->allow_extra_args(false);
}

void loadGpuFacts(const GpuFlags& f) {
  std::vector<std::string> files = f.facts;
  if (files.empty())
    if (const char* env = std::getenv("TESSERA_GPU_FACTS"))
      for (const auto& p : split(env, ':'))
        if (!trim(p).empty()) files.emplace_back(trim(p));
  if (Status st = session::loadGpuFacts(files); !st.ok()) fail(st.error().message, 2);
}

std::string targetLabel(const TargetDesc& t) {
  if (!t.isGpu()) return t.name;
  return t.model + " (" + t.name + ", " + std::to_string(t.units) + " " + t.words().units + ")";
}

std::string targetFlag(const TargetDesc& t) {
  if (!t.isGpu()) return "--target " + t.name;
  auto d = defaultGpuOf(t.arch == "sm_90a" ? "sm_90" : t.arch);
  if (d && d->name == t.model && d->units == t.units) return "--target " + t.name;
  // A Hopper GPU by name is sm_90a (targetOfGpu); the portable sm_90 needs saying.
  return "--gpu \"" + t.model + "\"" + (t.name == "sm_90" ? " --target sm_90" : "");
}

}  // namespace tessera::cli
