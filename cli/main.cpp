// Owns the `tessera` executable's entry point: builds the CLI11 app from the subcommand files and
// turns every failure into a one-line error and a non-zero exit code.
#include <cstdio>
#include <exception>

#include "cli/commands.h"

namespace tessera::cli {

void fail(const std::string& msg, int code) {
  std::fprintf(stderr, "tessera: error: %s\n", msg.c_str());
  throw CLI::RuntimeError(code);
}

}  // namespace tessera::cli

int main(int argc, char** argv) {
  CLI::App app{"tessera: auto-tuning kernel compiler and shared tuning cache"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("tessera ") + TESSERA_VERSION);
  tessera::cli::addServeCommand(app);
  tessera::cli::addCacheCommand(app);
  tessera::cli::addReportCommand(app);
#ifdef TESSERA_WITH_MLIR
  tessera::cli::addCompileCommand(app);
  tessera::cli::addRunCommand(app);
  tessera::cli::addDemoCommand(app);
  tessera::cli::addTuneCommands(app);
  tessera::cli::addSpaceCommand(app);
  tessera::cli::addImportCommand(app);
  tessera::cli::addCompareCommand(app);
  tessera::cli::addWorkerCommands(app);
  tessera::cli::addTuneAllCommand(app);
  tessera::cli::addBundleCommand(app);
  tessera::cli::addGpusCommand(app);
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
