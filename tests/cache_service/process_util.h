// Owns running the real `tessera` binary from tests: one-shot commands with captured output, and
// a `tessera serve` child that can be killed (SIGKILL for the durability test) and restarted.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace tessera::cache::test {

struct RunResult {
  int exit_code = -1;
  std::string out, err;
};

// Runs TESSERA_BIN with args; `env` adds NAME=VALUE entries (TESSERA_* from the test's own
// environment are removed first so the host cannot leak into a test).
RunResult runTessera(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
                     const std::string& stdin_text = "");

// Starts TESSERA_BIN with args in the background, stdout and stderr appended to log_path; the caller
// kills or waits for the returned pid.
pid_t startTessera(const std::vector<std::string>& args, const std::string& log_path);

class ServeProcess {
 public:
  // Starts `tessera serve --db DB --port 0 --port-file ...` plus extra args; waits until it listens.
  ServeProcess(const std::string& db, const std::string& work_dir, const std::vector<std::string>& extra = {});
  ~ServeProcess();
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  void kill(int sig);  // sends sig and reaps the child
  int exitStatus() const { return status_; }
  std::string log() const;

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  int status_ = -1;
  std::string log_path_;
};

}  // namespace tessera::cache::test
