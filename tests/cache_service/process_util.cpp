// Owns spawning and reaping the `tessera` binary for the process-level tests.
#include "tests/cache_service/process_util.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace tessera::cache::test {

namespace {

// TESSERA_TEST_BIN runs the same tests against another build (e.g. main's, to see the before of a
// fix); by default the binary of this build.
std::string tesseraBin() {
  const char* other = std::getenv("TESSERA_TEST_BIN");
  return other && *other ? other : TESSERA_BIN;
}

std::vector<std::string> childEnv(const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "TESSERA_", 8) != 0) env.emplace_back(*e);
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

std::vector<char*> cstrs(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

RunResult runTessera(const std::vector<std::string>& args, const std::vector<std::string>& env,
                     const std::string& stdin_text) {
  int in[2], out[2], err[2];
  if (pipe(in) || pipe(out) || pipe(err)) throw std::runtime_error("pipe failed");
  std::vector<std::string> argv = {tesseraBin()};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> envv = childEnv(env);
  auto argp = cstrs(argv), envp = cstrs(envv);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) close(fd);
    execve(argp[0], argp.data(), envp.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  close(err[1]);
  // stdin is small in these tests: write it all, then read both outputs without deadlocking.
  if (!stdin_text.empty()) (void)!write(in[1], stdin_text.data(), stdin_text.size());
  close(in[1]);
  RunResult r;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open_fds = 2;
  char buf[4096];
  while (open_fds > 0) {
    if (poll(fds, 2, 30000) <= 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      } else {
        (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(n));
      }
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

pid_t startTessera(const std::vector<std::string>& args, const std::string& log_path) {
  std::vector<std::string> argv = {tesseraBin()};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> envv = childEnv({});
  auto argp = cstrs(argv), envp = cstrs(envv);
  const pid_t pid = fork();
  if (pid == 0) {
    int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);
    execve(argp[0], argp.data(), envp.data());
    _exit(127);
  }
  if (pid < 0) throw std::runtime_error("fork failed");
  return pid;
}

ServeProcess::ServeProcess(const std::string& db, const std::string& work_dir, const std::vector<std::string>& extra) {
  const std::string port_file = work_dir + "/serve.port";
  log_path_ = work_dir + "/serve.log";
  unlink(port_file.c_str());
  std::vector<std::string> argv = {tesseraBin(), "serve", "--db", db, "--port", "0", "--port-file", port_file};
  argv.insert(argv.end(), extra.begin(), extra.end());
  std::vector<std::string> envv = childEnv({});
  auto argp = cstrs(argv), envp = cstrs(envv);
  pid_ = fork();
  if (pid_ == 0) {
    int fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);
    execve(argp[0], argp.data(), envp.data());
    _exit(127);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream f(port_file);
    if (f >> port_ && port_ > 0) return;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("tessera serve exited early: " + log());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(SIGKILL);
  throw std::runtime_error("tessera serve did not start: " + log());
}

ServeProcess::~ServeProcess() {
  if (pid_ > 0) kill(SIGKILL);
}

void ServeProcess::kill(int sig) {
  if (pid_ <= 0) return;
  ::kill(pid_, sig);
  waitpid(pid_, &status_, 0);
  pid_ = -1;
}

std::string ServeProcess::log() const {
  std::ifstream f(log_path_);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace tessera::cache::test
