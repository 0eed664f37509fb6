// Owns the contract between the `tessera` entry point and its subcommand files: each file adds
// its subcommands to the CLI11 app; failures go through `fail` (one-line error, non-zero exit).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace tessera::cli {

// Prints "tessera: error: <msg>" to stderr and unwinds to main with exit code `code`; under
// --json (jsonErrors()) the same message also goes to stdout as {"error": msg, "exit_code": code},
// so a script reading stdout never meets an empty answer.
[[noreturn]] void fail(const std::string& msg, int code = 1);
// Whether the command line asked for --json (set once by main, before parsing).
bool jsonErrors();
void setJsonErrors(bool on);
// Prints one error object on stdout when --json was asked (the stderr line is the caller's).
void printJsonError(const std::string& msg, int code);
// The --json flag every command that prints results takes (one help text everywhere).
CLI::Option* addJsonFlag(CLI::App* app, bool& json, const std::string& what = "machine-readable output (JSON)");

// Cache service (no LLVM/MLIR needed).
void addServeCommand(CLI::App& app);   // tessera serve ..., tessera serve token add|list|revoke
void addCacheCommand(CLI::App& app);   // tessera cache get|put|export|import|stats
void addReportCommand(CLI::App& app);  // tessera report (a kernel's dashboard page as one HTML file)

#ifdef TESSERA_WITH_MLIR
void addCompileCommand(CLI::App& app);  // tessera compile
void addRunCommand(CLI::App& app);      // tessera run
void addDemoCommand(CLI::App& app);     // tessera demo (the README's main job)
void addTuneCommands(CLI::App& app);    // tessera tune / best
void addSpaceCommand(CLI::App& app);    // tessera space (what tune searches)
void addImportCommand(CLI::App& app);   // tessera import kerneltuner FILE
void addCompareCommand(CLI::App& app);  // tessera compare (targets side by side)
void addWorkerCommands(CLI::App& app);  // tessera worker / workers (measurement workers)
void addTuneAllCommand(CLI::App& app);  // tessera tune-all FILE --shard i/N
void addBundleCommand(CLI::App& app);   // tessera bundle (ahead-of-time kernels + C runtime)
void addGpusCommand(CLI::App& app);     // tessera gpus (GPUs by name, their facts and sources)
#endif

}  // namespace tessera::cli
