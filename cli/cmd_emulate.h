// Owns the declaration of `tessera emulate FILE` (cmd_emulate.cpp), kept out of commands.h so
// that adding it rebuilds no other subcommand.
#pragma once

#include <CLI/CLI.hpp>

namespace tessera::cli {

void addEmulateCommand(CLI::App& app);  // tessera emulate FILE (an NVVM/ROCDL module on the emulator)

}  // namespace tessera::cli
