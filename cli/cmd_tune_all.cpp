// Owns `tessera tune-all FILE --shard i/N`: tunes the kernels of a kernel list (kernel_list.h),
// those of shard i of N, each as a normal `tessera tune` of its own (a child process: one kernel's
// failure or crash costs that kernel, and every tune talks to the shared service exactly as a
// single one does). Shards split the list by position: entry j belongs to shard j mod N, so an
// array job (Slurm: --shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT) covers every kernel
// once and a rerun of one shard retunes nothing another shard stored (the cache answers first).
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "cli/kernel_flags.h"
#include "cli/kernel_list.h"
#include "cli/report.h"
#include "support/strings.h"

namespace tessera::cli {

namespace {

struct TuneAllFlags {
  std::string file, shard = "0/1";
  bool dryRun = false, json = false;
  std::vector<std::string> tuneArgs;  // flags every tune gets (after --)
};

struct Shard {
  int64_t index = 0, count = 1;
};

Shard parseShard(const std::string& s) {
  auto slash = s.find('/');
  auto i = parseInt(s.substr(0, slash));
  auto n = slash == std::string::npos ? std::optional<int64_t>() : parseInt(s.substr(slash + 1));
  if (!i || !n || *n < 1 || *n > 100000 || *i < 0 || *i >= *n)
    fail("--shard takes i/N with 0 <= i < N (e.g. 3/16), got '" + s + "'", kExitBadInput);
  return {*i, *n};
}

// `word` as a POSIX shell reads it back: bare when it is made of safe characters, else in single
// quotes (a single quote inside becomes '\'').
std::string shellQuote(const std::string& word) {
  if (!word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") ==
                           std::string::npos)
    return word;
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The tessera binary that runs this command: children are the same build.
std::string selfPath() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("tessera") : p.string();
}

// `stdoutPath`: where the child's stdout goes ("" = ours).
int runChild(const std::vector<std::string>& args, const std::string& stdoutPath = "") {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (!stdoutPath.empty()) {
      const int fd = open(stdoutPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (fd < 0) _exit(127);
      dup2(fd, 1);
      close(fd);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

void tuneAllCommand(const TuneAllFlags& f) {
  const Shard shard = parseShard(f.shard);
  for (const auto& a : f.tuneArgs)
    if (a == "gemm" || a == "elementwise" || a == "attention" || a == "file")
      fail("the kernels come from " + f.file + "; pass only tune flags after --", kExitBadInput);
  {
    std::vector<std::string> common = f.tuneArgs;
    auto t = takeThreads(common);
    if (!t.ok()) fail("after --: " + t.error().message, kExitBadInput);
  }
  auto list = readKernelList(f.file);
  if (!list.ok()) failWith(list.error());
  std::vector<const KernelListEntry*> mine;
  for (size_t j = 0; j < list->size(); ++j)
    if (int64_t(j % size_t(shard.count)) == shard.index) mine.push_back(&(*list)[j]);
  // Under --json the progress lines go to stderr and stdout holds one JSON document: each tune
  // runs with --json and its answer is kept under its kernel.
  FILE* human = f.json ? stderr : stdout;
  nlohmann::json doc = {{"file", f.file}, {"shard", std::to_string(shard.index) + "/" + std::to_string(shard.count)},
                        {"kernels", nlohmann::json::array()}};
  std::fprintf(human, "tune-all: %zu of %zu kernels in shard %lld/%lld of %s\n", mine.size(), list->size(),
               (long long)shard.index, (long long)shard.count, f.file.c_str());
  const std::string self = selfPath();
  int failed = 0;
  for (size_t n = 0; n < mine.size(); ++n) {
    const KernelListEntry& e = *mine[n];
    std::vector<std::string> args = {self, "tune"};
    // The line's own --threads wins over one after --.
    std::vector<std::string> common = f.tuneArgs;
    if (e.threads != kAllCores) {
      auto taken = takeThreads(common);
      (void)taken;  // checked before the first tune
      common.push_back("--threads");
      common.push_back(std::to_string(e.threads));
    }
    args.insert(args.end(), common.begin(), common.end());
    if (f.json) args.push_back("--json");
    args.insert(args.end(), e.args.begin(), e.args.end());
    // Shown as a shell would need it: a word with a space or a quote is quoted.
    std::string shown;
    for (size_t i = 1; i < args.size(); ++i) shown += (i > 1 ? " " : "") + shellQuote(args[i]);
    std::fprintf(human, "\n[%zu/%zu] %s: tessera %s\n", n + 1, mine.size(), e.where.c_str(), shown.c_str());
    nlohmann::json entry = {{"where", e.where}, {"command", "tessera " + shown}};
    if (f.dryRun) {
      if (f.json) doc["kernels"].push_back(entry);
      continue;
    }
    const std::string outPath =
        f.json ? (std::filesystem::temp_directory_path() / ("tessera-tune-all-" + std::to_string(getpid()) + ".json")).string()
               : "";
    const int rc = runChild(args, outPath);
    if (f.json) {
      std::ifstream in(outPath);
      std::stringstream ss;
      ss << in.rdbuf();
      std::filesystem::remove(outPath);
      entry["exit_code"] = rc;
      auto answer = nlohmann::json::parse(ss.str(), nullptr, false);
      if (!answer.is_discarded()) entry["result"] = answer;
      doc["kernels"].push_back(entry);
    }
    if (rc == 130) fail("interrupted at " + e.where + " (the kernels before it are tuned and stored)", kExitInterrupted);
    if (rc != 0) {
      ++failed;
      std::fprintf(stderr, "tune-all: %s failed (exit %d)\n", e.where.c_str(), rc);
    }
  }
  if (f.json) {
    doc["dry_run"] = f.dryRun;
    if (!f.dryRun) {
      doc["tuned"] = mine.size() - size_t(failed);
      doc["failed"] = failed;
    }
    std::printf("%s\n", doc.dump(2).c_str());
    if (failed) throw CLI::RuntimeError(1);
    return;
  }
  if (f.dryRun) {
    std::printf("\ntune-all: shard %lld/%lld: %zu to tune (dry run)\n", (long long)shard.index, (long long)shard.count,
                mine.size());
    return;
  }
  std::printf("\ntune-all: shard %lld/%lld: %zu tuned, %d failed\n", (long long)shard.index, (long long)shard.count,
              mine.size() - size_t(failed), failed);
  if (failed) throw CLI::RuntimeError(1);
}

}  // namespace

void addTuneAllCommand(CLI::App& app) {
  auto f = std::make_shared<TuneAllFlags>();
  auto* t = app.add_subcommand("tune-all",
                               "tune every kernel of a list file (one per line in the kernel flags' syntax), or one "
                               "shard of it; flags after -- go to every `tessera tune`");
  t->add_option("file", f->file, "kernel list: one kernel per line in the kernel flags' syntax, or `file PATH`")->required();
  t->add_option("--shard", f->shard, "i/N: tune the kernels at positions j with j mod N == i")->capture_default_str();
  t->add_flag("--dry-run", f->dryRun, "print the tunes of this shard without running them");
  addJsonFlag(t, f->json, "one JSON document: each kernel's command, exit code and its tune's --json answer");
  t->add_option("tune_flags", f->tuneArgs, "flags for each tune (after --), e.g. -- --workers --trials 200");
  t->callback([f] { tuneAllCommand(*f); });
}

}  // namespace tessera::cli
