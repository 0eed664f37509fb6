// Owns the `tessera` executable's entry point: builds the CLI11 app from the subcommand files and
// turns every failure into a one-line error and a non-zero exit code (cli/exit_codes.h: 2 for bad
// input, flags included).
#include <cerrno>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "client/endpoints.h"
#include "cli/cmd_emulate.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "support/load.h"

namespace tessera::cli {

namespace {
bool gJsonErrors = false;
}  // namespace

bool jsonErrors() { return gJsonErrors; }
void setJsonErrors(bool on) { gJsonErrors = on; }

void printJsonError(const std::string& msg, int code) {
  if (!gJsonErrors) return;
  const nlohmann::json j = {{"error", msg}, {"exit_code", code}};
  std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
}

CLI::Option* addJsonFlag(CLI::App* app, bool& json, const std::string& what) { return app->add_flag("--json", json, what); }

void fail(const std::string& msg, int code) {
  std::fprintf(stderr, "tessera: error: %s\n", msg.c_str());
  printJsonError(msg, code);
  throw CLI::RuntimeError(code);
}

}  // namespace tessera::cli

namespace {

// CLI11's messages may span lines ("...\nRun with --help for more information."): one line here.
std::string oneLine(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  // --json asks for every answer on stdout as JSON, errors included; words after `--` belong to
  // the commands tune-all runs.
  for (int i = 1; i < argc && std::strcmp(argv[i], "--") != 0; ++i)
    if (std::strcmp(argv[i], "--json") == 0) tessera::cli::setJsonErrors(true);
  // A password on the command line is in every process list and shell history: refused before
  // anything runs, whichever flag carries it (a --store URL, a --cache URL).
  for (int i = 1; i < argc; ++i)
    if (tessera::cache::urlHasPassword(argv[i])) {
      std::fprintf(stderr,
                   "tessera: error: argument %d holds a password (%s), which process lists show: give a PostgreSQL "
                   "password in PGPASSWORD or a PGPASSFILE (or the whole URL in TESSERA_STORE); the cache service "
                   "takes a token in TESSERA_TOKEN\n",
                   i, tessera::cache::redactUrl(argv[i]).c_str());
      tessera::cli::printJsonError("argument " + std::to_string(i) + " holds a password, which process lists show",
                                   tessera::cli::kExitBadInput);
      return 2;
    }
  // TESSERA_CORES sizes every host plan (threads, the cache key's units): a value that is not a core
  // count is refused here, once, rather than ignored by each reader.
  if (std::string why; !tessera::coresOverride(&why) && !why.empty()) {
    std::fprintf(stderr, "tessera: error: %s\n", why.c_str());
    tessera::cli::printJsonError(why, tessera::cli::kExitBadInput);
    return 2;
  }
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
  tessera::cli::addEmulateCommand(app);
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // Every flag error in one place: one line, exit 2 (bad input), whatever CLI11's own code.
    std::fprintf(stderr, "tessera: error: %s (see --help)\n", oneLine(e.what()).c_str());
    tessera::cli::printJsonError(oneLine(e.what()), tessera::cli::kExitBadInput);
    return tessera::cli::kExitBadInput;
  } catch (const std::bad_alloc&) {
    const char* msg = "out of memory (a problem this size needs more than this machine has)";
    std::fprintf(stderr, "tessera: error: %s\n", msg);
    tessera::cli::printJsonError(msg, tessera::cli::kExitFailure);
    return tessera::cli::kExitFailure;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera: error: %s\n", e.what());
    tessera::cli::printJsonError(e.what(), 1);
    return 1;
  }
  // What went to stdout must have arrived (a full disk, /dev/full): else the answer is incomplete.
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    // The reader closed the pipe (`tessera cache list | head`): it has what it wanted; no error.
    if (errno == EPIPE) return 0;
    std::fprintf(stderr, "tessera: error: cannot write the output: %s\n", std::strerror(errno));
    return 1;
  }
  return 0;
}
