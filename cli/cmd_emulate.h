// Owns the declaration of `tessera emulate FILE` (cmd_emulate.cpp), kept out of commands.h so
// that adding it rebuilds no other subcommand.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "codegen/gpu.h"
#include "ir/ir.h"

namespace tessera::cli {

void addEmulateCommand(CLI::App& app);  // tessera emulate FILE (an NVVM/ROCDL module on the emulator)

// The launch of `l` (kernel `k`'s) as the flags `tessera emulate` takes, on one MLIR comment line
// that `compile --emit nvvm|rocdl` appends to the module: grid, block, shared memory, one buffer
// size per plain parameter and the tensor maps the host encodes (what a file alone cannot say).
std::string emulateLaunchComment(const codegen::GpuLaunch& l, const ir::Kernel& k);

}  // namespace tessera::cli
