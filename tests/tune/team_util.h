// Owns what the team-scale process tests share (tests/tune/workers_cli_test.cpp,
// replicas_cli_test.cpp): background `tessera` children (workers, tunes) with their logs, and a
// `tessera serve` on a fresh store (a SQLite file, or a database on the tests' PostgreSQL server)
// with a write token (the tuner) and a worker token.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client/http.h"
#include "tests/cache_service/process_util.h"
#include "tests/cache_service/test_util.h"

namespace tessera::test {

using nlohmann::json;
using tessera::cache::test::runTessera;
using tessera::cache::test::ServeProcess;
using tessera::cache::test::TempDir;
using Clock = std::chrono::steady_clock;

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::string addToken(const std::string& db, const std::string& name, const std::string& scope) {
  auto r = runTessera({"serve", "token", "add", name, "--scope", scope, "--db", db});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::string s = r.out;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// A child `tessera` process (a worker, or a tune running in the background) with its output in a
// log file; killed with SIGKILL when the test ends early.
class Child {
 public:
  Child(const std::vector<std::string>& args, const std::vector<std::string>& env, std::string log)
      : log_(std::move(log)) {
    // TESSERA_TEST_BIN: another build's binary (process_util.h), for the before of a fix.
    const char* other = std::getenv("TESSERA_TEST_BIN");
    std::vector<std::string> argv = {other && *other ? other : TESSERA_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<std::string> envv;
    for (char** e = environ; *e; ++e)
      if (std::strncmp(*e, "TESSERA_", 8) != 0) envv.emplace_back(*e);
    envv.insert(envv.end(), env.begin(), env.end());
    std::vector<char*> a, e;
    for (auto& s : argv) a.push_back(s.data());
    a.push_back(nullptr);
    for (auto& s : envv) e.push_back(s.data());
    e.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      int fd = open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
      execve(a[0], a.data(), e.data());
      _exit(127);
    }
  }
  ~Child() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  std::string log() const { return slurp(log_); }
  void kill(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    waitpid(pid_, &status_, 0);
    pid_ = -1;
  }
  // The exit code, or -1 when it is still running after `seconds`.
  int wait(double seconds) {
    const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    while (pid_ > 0 && Clock::now() < until) {
      if (waitpid(pid_, &status_, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (pid_ > 0) return -1;
    return WIFEXITED(status_) ? WEXITSTATUS(status_) : 128 + WTERMSIG(status_);
  }
  // The worker id it logged when it registered ("" before that).
  std::string workerId() const {
    const std::string s = log(), tag = "registered as worker ";
    auto at = s.find(tag);
    return at == std::string::npos ? "" : s.substr(at + tag.size(), 32);
  }

 private:
  std::string log_;
  pid_t pid_ = -1;
  int status_ = 0;
};

// A service on a fresh store with a write token (the tuner) and a worker token; optionally a second
// replica, another `tessera serve` on the same store. `db` is the store's location.
struct Service {
  explicit Service(std::vector<std::string> extra = {"--lease-seconds", "3", "--worker-ttl", "3"},
                   tessera::cache::test::Engine engine = tessera::cache::test::Engine::Sqlite)
      : extra_(extra) {
    if (engine == tessera::cache::test::Engine::Postgres) {
      pg = std::make_unique<tessera::cache::test::PgDatabase>();
      db = pg->url();
    } else {
      db = dir.file("service.db");
    }
    tuner = addToken(db, "tuner", "write");
    worker = addToken(db, "box", "worker");
    serve = std::make_unique<ServeProcess>(db, dir.path(), extra);
    url = "http://127.0.0.1:" + std::to_string(serve->port());
  }
  void addReplica() {
    const std::string d = dir.file("replica2");
    mkdir(d.c_str(), 0755);
    replica = std::make_unique<ServeProcess>(db, d, extra_);
    url2 = "http://127.0.0.1:" + std::to_string(replica->port());
  }
  // Both replicas' URLs, the first one first (what clients fail over along).
  std::string urls() const { return url2.empty() ? url : url + "," + url2; }
  std::unique_ptr<Child> startWorker(int n, const std::vector<std::string>& more = {}) {
    std::vector<std::string> args = {"worker", "--poll", "0.05"};
    args.insert(args.end(), more.begin(), more.end());
    return std::make_unique<Child>(args,
                                   std::vector<std::string>{"TESSERA_CACHE_URL=" + urls(), "TESSERA_TOKEN=" + worker},
                                   dir.file("worker" + std::to_string(n) + ".log"));
  }
  // A GET with the tuner's token, from the replica at `base` (default: the first).
  json get(const std::string& path, const std::string& base = "") {
    auto conn = tessera::cache::openHttpConnection(base.empty() ? url : base, 2.0);
    EXPECT_TRUE(conn.ok());
    auto r = (*conn)->send("GET", path, {{"Authorization", "Bearer " + tuner}}, "", "", 5.0);
    EXPECT_TRUE(r.ok());
    return r.ok() ? json::parse(r->body, nullptr, false) : json();
  }
  // Waits until `n` workers are live.
  void awaitWorkers(size_t n) {
    const auto until = Clock::now() + std::chrono::seconds(30);
    while (Clock::now() < until) {
      json w = get("/v1/workers");
      if (w.is_object() && w.at("workers").size() >= n) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL() << "fewer than " << n << " workers registered";
  }
  std::vector<std::string> tuneEnv() const { return {"TESSERA_CACHE_URL=" + urls(), "TESSERA_TOKEN=" + tuner}; }

  TempDir dir;
  std::unique_ptr<tessera::cache::test::PgDatabase> pg;
  std::string db, tuner, worker, url, url2;
  std::unique_ptr<ServeProcess> serve, replica;

 private:
  std::vector<std::string> extra_;
};

}  // namespace tessera::test
