// Owns how the CLI tests of one binary run `tessera`: a command line, its exit code and its
// stdout and stderr together.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace tessera::clitest {

struct Result {
  int code = -1;
  std::string out;  // stdout + stderr
};

// `env`: assignments put before the command ("TESSERA_GPU_FACTS=/x.json").
inline Result run(const std::string& args, const std::string& env = "") {
  Result r;
  std::string cmd = env + (env.empty() ? "" : " ") + std::string(TESSERA_BIN) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf{};
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) r.out.append(buf.data(), n);
  int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

}  // namespace tessera::clitest
