// Owns the CLI's GPUs by name: `--gpu NAME` (a product: its chip is the target, its figures the
// model's), `--gpu-facts FILE` (GPUs a user adds; else the files in $TESSERA_GPU_FACTS, read here
// at the edge) and the label a report prints for a target.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "support/status.h"
#include "targets/target_desc.h"

namespace tessera::cli {

struct GpuFlags {
  std::vector<std::string> gpus;   // --gpu, in the order given (commands of one target take one)
  std::vector<std::string> facts;  // --gpu-facts
};

// Adds --gpu (once, or repeatable with `many`) and --gpu-facts to `cmd`.
void addGpuFlags(CLI::App* cmd, GpuFlags* f, bool many = false);
// Registers the GPUs of the facts files (the flags', else $TESSERA_GPU_FACTS: paths separated by
// ':'; session::loadGpuFacts). A file that does not parse ends the command with its one-line error
// (exit 2). The target a command's --target, --gpu and --threads name is session::targetWithGpu's.
void loadGpuFacts(const GpuFlags& f);
// "NVIDIA L4 (sm_89, 58 SMs)" for a GPU, the name for the host.
std::string targetLabel(const TargetDesc& t);
// How to name `t` on a command line: `--gpu "NVIDIA L4"` for a product other than its chip's
// default, `--target sm_89` otherwise.
std::string targetFlag(const TargetDesc& t);

}  // namespace tessera::cli
