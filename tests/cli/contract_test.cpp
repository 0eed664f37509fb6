// Tests the `tessera` executable's contract with a newcomer, end to end with the real binary: one
// exit-code table for every command (README "Exit codes"), flag errors in one line, one thread-count
// story (a --threads 1 record and what best, compare and bundle say about it), no silent fallback in
// bundle, --json always JSON, binary never to a terminal, shell-quoted dry runs, and an install step
// that puts `tessera` in PREFIX/bin.
#include <gtest/gtest.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct Result {
  int code = -1;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Runs TESSERA_BIN with `args` (shell words, already quoted) in `dir`, stdout and stderr apart.
Result run(const std::string& args, const std::string& dir = "") {
  static int n = 0;
  const std::string base = testing::TempDir() + "/contract_" + std::to_string(getpid()) + "_" + std::to_string(n++);
  std::string cmd = (dir.empty() ? "" : "cd '" + dir + "' && ") + "env -u TESSERA_CACHE_URL -u TESSERA_TOKEN " +
                    std::string(TESSERA_BIN) + " " + args + " >" + base + ".out 2>" + base + ".err";
  int st = std::system(cmd.c_str());
  Result r;
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.out = slurp(base + ".out");
  r.err = slurp(base + ".err");
  fs::remove(base + ".out");
  fs::remove(base + ".err");
  return r;
}

size_t lines(const std::string& s) { return size_t(std::count(s.begin(), s.end(), '\n')); }

struct TempDir {
  std::string path;
  TempDir() {
    static int n = 0;
    path = testing::TempDir() + "/contract_dir_" + std::to_string(getpid()) + "_" + std::to_string(n++);
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string& name) const { return path + "/" + name; }
};

const unsigned kCores = std::max(1u, std::thread::hardware_concurrency());

}  // namespace

// Every command: a flag it does not know is bad input (2) in one line, whatever CLI11's own code
// (it used 104-114 and two lines). The control: the same commands with good flags do not exit 2.
TEST(Contract, FlagErrorsExitTwoInOneLineOnEveryCommand) {
  const std::vector<std::string> commands = {
      "run gemm --m 8 --n 8 --k 8",  "compile gemm --m 8 --n 8 --k 8", "tune gemm --m 8 --n 8 --k 8",
      "best gemm --m 8 --n 8 --k 8", "space gemm --m 8 --n 8 --k 8",   "compare gemm --m 8 --n 8 --k 8",
      "bundle",                      "worker",                          "workers",
      "tune-all list.txt",           "cache get",                       "cache stats",
      "serve",                       "serve token list",                "report",
      "import kerneltuner x.json",   "demo",                            ""};
  for (const auto& c : commands) {
    Result r = run(c + (c.empty() ? "" : " ") + "--no-such-flag 7");
    EXPECT_EQ(r.code, 2) << c << "\n" << r.err;
    EXPECT_EQ(lines(r.err), 1u) << c << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("tessera: error: ", 0), 0u) << c << "\n" << r.err;
  }
  // A value of the wrong type and a missing subcommand are flag errors too.
  EXPECT_EQ(run("run gemm --m eight --n 8 --k 8").code, 2);
  EXPECT_EQ(run("cache").code, 2);
  // Controls: good flags are not refused, and --help still exits 0.
  Result ok = run("space gemm --m 8 --n 8 --k 8");
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_EQ(run("tune --help").code, 0);
}

// Every command that talks to the shared cache takes --cache, --token and --ca-cert, and its help
// names the variables they default to (tune, best, worker and bundle had none of them).
TEST(Contract, EveryClientCommandTakesTheCacheFlags) {
  for (const char* c : {"tune", "best", "compare", "bundle", "worker", "workers", "cache"}) {
    Result h = run(std::string(c) + " --help");
    ASSERT_EQ(h.code, 0) << c << h.err;
    for (const char* needle : {"--cache", "--token", "--ca-cert", "TESSERA_CACHE_URL", "TESSERA_TOKEN", "TESSERA_CA_CERT"})
      EXPECT_NE(h.out.find(needle), std::string::npos) << c << " --help lacks " << needle;
  }
  // The control: a command that never talks to the cache does not offer it.
  EXPECT_EQ(run("run --help").out.find("--token"), std::string::npos);
}

// The exit-code table itself, one outcome each: bad input 2, none found 5 (never the compile
// error's 3), ok 0.
TEST(Contract, ExitCodesNameTheOutcome) {
  TempDir d;
  const std::string db = d.file("t.db");
  EXPECT_EQ(run("run gemm --m 0 --n 8 --k 8").code, 2);
  EXPECT_EQ(run("run gemm --m 8 --n 8 --k 8 --target no_such_gpu").code, 2);
  EXPECT_EQ(run("run gemm --m 8 --n 8 --k 8 --config 'MR=banana'").code, 2);
  EXPECT_EQ(run("run file " + d.file("absent.tsr")).code, 2);
  // A kernel file has its own dtype and name: the flags that did nothing there are refused.
  Result ir = run("compile gemm --m 8 --n 8 --k 8 --emit ir -o " + d.file("k.tsr"));
  ASSERT_EQ(ir.code, 0) << ir.err;
  EXPECT_EQ(run("run file " + d.file("k.tsr") + " --min-time 0.001").code, 0);
  EXPECT_EQ(run("run file " + d.file("k.tsr") + " --dtype bf16").code, 2);
  EXPECT_EQ(run("run file " + d.file("k.tsr") + " --name other").code, 2);
  Result none = run("best --db " + db + " gemm --m 8 --n 8 --k 8");
  EXPECT_EQ(none.code, 5) << none.out << none.err;
  Result noneJson = run("best --json --db " + db + " gemm --m 8 --n 8 --k 8");
  EXPECT_EQ(noneJson.code, 5);
  EXPECT_TRUE(nlohmann::json::accept(noneJson.out)) << noneJson.out;
  Result ok = run("run gemm --m 8 --n 8 --k 8 --min-time 0.001");
  EXPECT_EQ(ok.code, 0) << ok.err;
}

// The README's --threads 1 tune, then every command that reads host keys: best, compare and bundle
// find that record when asked for one thread and, asked for all cores, say that the thread count
// is the difference instead of a bare "nearest: distance 0.00". Kernel lists take --threads per line.
TEST(Contract, OneThreadCountStory) {
  TempDir d;
  const std::string db = d.file("t.db");
  const std::string gemm = " gemm --m 24 --n 24 --k 24";
  Result tuned = run("tune --threads 1 --trials 2 --top-k 0 --min-time 0.002 --db " + db + gemm);
  ASSERT_EQ(tuned.code, 0) << tuned.out << tuned.err;

  Result one = run("best --threads 1 --db " + db + gemm);
  EXPECT_EQ(one.code, 0) << one.out << one.err;
  // Already tuned: --json is still JSON, saying so.
  Result again = run("tune --json --threads 1 --trials 2 --db " + db + gemm);
  ASSERT_EQ(again.code, 0) << again.err;
  auto j = nlohmann::json::parse(again.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << again.out;
  EXPECT_EQ(j["outcome"], "already-tuned");

  Result cmpOne = run("compare --targets host --threads 1 --db " + db + gemm);
  EXPECT_EQ(cmpOne.code, 0) << cmpOne.err;
  EXPECT_EQ(cmpOne.out.find("no record"), std::string::npos) << cmpOne.out;
  if (kCores > 1) {
    const std::string asked = "threads 1 (asked " + std::to_string(kCores) + ")";
    Result all = run("best --db " + db + gemm);
    EXPECT_EQ(all.code, 5) << all.out;
    EXPECT_NE(all.out.find(asked), std::string::npos) << all.out;
    EXPECT_NE(all.out.find("--threads 1 asks for it"), std::string::npos) << all.out;
    Result cmp = run("compare --targets host --db " + db + gemm);
    EXPECT_EQ(cmp.code, 0) << cmp.err;
    EXPECT_NE(cmp.out.find("no record"), std::string::npos) << cmp.out;
    EXPECT_NE((cmp.out + cmp.err).find("threads 1"), std::string::npos) << cmp.out;
  }
  // --threads applies to host keys only.
  EXPECT_EQ(run("compare --targets sm_90 --threads 1 --db " + db + gemm).code, 2);

  // A kernel list: the tuned line with its --threads, an untuned one. The untuned line is another
  // kernel family: an untuned GEMM shape could be served by the tuned 24^3 winner as "nearest" when
  // that config happens to be legal there (which config wins the 2-trial tune is timing's choice).
  std::ofstream(d.file("kernels.txt")) << "gemm --m 24 --n 24 --k 24 --threads 1   # tuned above\n"
                                          "elementwise --expr 'y = x + 1' --shape 40x40 --threads 1\n";
  const std::string bundle = "bundle --kernels " + d.file("kernels.txt") + " --db " + db + " --targets host";
  Result refused = run(bundle + " --out " + d.file("b1"));
  EXPECT_EQ(refused.code, 5) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("1 of 2 entries have no tuned config"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("kernels.txt:2"), std::string::npos) << refused.err;
  EXPECT_EQ(lines(refused.err), 1u) << refused.err;
  EXPECT_FALSE(fs::exists(d.file("b1"))) << "a refused bundle wrote its folder";
  Result shipped = run(bundle + " --missing default --out " + d.file("b2"));
  ASSERT_EQ(shipped.code, 0) << shipped.out << shipped.err;
  // The table says what each entry is: the tuned one (for one thread) and the default.
  EXPECT_NE(shipped.out.find("/1t "), std::string::npos) << shipped.out;
  EXPECT_NE(shipped.out.find(" tuned "), std::string::npos) << shipped.out;
  EXPECT_NE(shipped.out.find("DEFAULT"), std::string::npos) << shipped.out;
  Result asJson = run(bundle + " --missing default --json --replace --out " + d.file("b2"));
  ASSERT_EQ(asJson.code, 0) << asJson.err;
  auto bj = nlohmann::json::parse(asJson.out, nullptr, false);
  ASSERT_FALSE(bj.is_discarded()) << asJson.out;
  std::vector<std::string> kinds;
  for (const auto& r : bj["rows"]) kinds.push_back(r["kind"]);
  std::sort(kinds.begin(), kinds.end());
  EXPECT_EQ(kinds, (std::vector<std::string>{"default", "tuned"}));

  // A bad --threads in a list line names the line.
  std::ofstream(d.file("bad.txt")) << "gemm --m 24 --n 24 --k 24\ngemm --m 8 --n 8 --k 8 --threads 0\n";
  Result bad = run("bundle --kernels " + d.file("bad.txt") + " --db " + db + " --out " + d.file("b3"));
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_NE(bad.err.find("bad.txt:2"), std::string::npos) << bad.err;
  // tune-all passes a line's --threads on, and shows each command as a shell reads it back.
  std::ofstream(d.file("list.txt")) << "elementwise --expr 'y = x + 1' --shape 64 --threads 1\n";
  Result dry = run("tune-all " + d.file("list.txt") + " --dry-run -- --trials 2");
  EXPECT_EQ(dry.code, 0) << dry.err;
  EXPECT_NE(dry.out.find("--threads 1"), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find("--expr 'y = x + 1'"), std::string::npos) << dry.out;
}

// Binary output never goes to a terminal: `compile --emit obj` on a pseudo-terminal is refused
// (2, one line); the control writes the same object to a file.
TEST(Contract, BinaryNeverToATerminal) {
  int master = -1;
  pid_t pid = forkpty(&master, nullptr, nullptr, nullptr);
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    execl(TESSERA_BIN, TESSERA_BIN, "compile", "gemm", "--m", "8", "--n", "8", "--k", "8", "--emit", "obj",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  std::string seen;
  std::array<char, 4096> buf{};
  for (;;) {
    ssize_t n = read(master, buf.data(), buf.size());
    if (n <= 0) break;  // EIO once the child has gone
    seen.append(buf.data(), size_t(n));
  }
  int st = 0;
  waitpid(pid, &st, 0);
  close(master);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 2) << seen;
  EXPECT_NE(seen.find("writes binary: give -o FILE"), std::string::npos) << seen;
  TempDir d;
  Result toFile = run("compile gemm --m 8 --n 8 --k 8 --emit obj -o " + d.file("k.o"));
  EXPECT_EQ(toFile.code, 0) << toFile.err;
  EXPECT_EQ(slurp(d.file("k.o")).rfind("\x7f" "ELF", 0), 0u);
}

// `cmake --install` puts `tessera` in PREFIX/bin (the README's install step), and it runs from there.
TEST(Contract, InstallPutsTesseraOnPath) {
  TempDir d;
  const std::string cmd = "cmake --install '" + std::string(TESSERA_BUILD_DIR) + "' --prefix '" + d.path +
                          "' --component cli >" + d.file("log") + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << slurp(d.file("log"));
  const std::string bin = d.file("bin/tessera");
  ASSERT_TRUE(fs::exists(bin)) << slurp(d.file("log"));
  const std::string probe = "PATH='" + d.path + "/bin':/usr/bin:/bin tessera --version >" + d.file("v") + " 2>&1";
  EXPECT_EQ(std::system(probe.c_str()), 0) << slurp(d.file("v"));
  EXPECT_EQ(slurp(d.file("v")).rfind("tessera ", 0), 0u) << slurp(d.file("v"));
}

namespace {

// The subcommands a help text lists (CLI11's "Subcommands:" block: two spaces, the name, its text).
std::vector<std::string> subcommandsOf(const std::string& help) {
  std::vector<std::string> out;
  size_t at = help.find("Subcommands:\n");
  if (at == std::string::npos) at = help.find("SUBCOMMANDS:\n");
  if (at == std::string::npos) return out;
  std::istringstream lines(help.substr(help.find('\n', at) + 1));
  std::string line;
  while (std::getline(lines, line) && line.rfind("  ", 0) == 0) {
    std::istringstream words(line);
    std::string name;
    words >> name;
    if (!name.empty()) out.push_back(name);
  }
  return out;
}

// Every leaf command under `path` that takes no --json (nor does a command above it: a kernel
// family's subcommand takes its parent's flags).
void commandsWithoutJson(const std::string& path, bool above, std::vector<std::string>& missing, int& leaves) {
  Result h = run(path + " --help");
  const bool has = above || h.out.find("--json") != std::string::npos;
  const auto subs = subcommandsOf(h.out);
  if (subs.empty()) {
    ++leaves;
    if (!has) missing.push_back(path);
  }
  for (const auto& s : subs) commandsWithoutJson(path.empty() ? s : path + " " + s, has, missing, leaves);
}

}  // namespace

// Issue 48: every command that prints results takes --json, and under --json an error is one JSON
// object on stdout ({"error": ..., "exit_code": N}) with the exit code it has without --json.
// Only `compile` (it prints code, not results) goes without. The controls: the walk finds compile's
// leaves (it would find any other command lacking --json), an error without --json leaves stdout
// empty, and a good --json answer has no "error" field.
TEST(Contract, JsonOnEveryCommandAndErrorsAsJson) {
  std::vector<std::string> missing;
  int leaves = 0;
  commandsWithoutJson("", false, missing, leaves);
  EXPECT_GT(leaves, 30);
  std::vector<std::string> notCompile;
  for (const auto& m : missing)
    if (m.rfind("compile", 0) != 0) notCompile.push_back(m);
  EXPECT_TRUE(notCompile.empty()) << "without --json: " << ::testing::PrintToString(notCompile);
  EXPECT_FALSE(missing.empty()) << "the walk no longer reaches compile's leaves";

  TempDir d;
  const std::string db = d.file("t.db");
  const std::vector<std::string> failing = {
      "run gemm --m 0 --n 8 --k 8",                        // bad shape: 2
      "run gemm --m 8 --n 8 --k 8 --config 'MR=banana'",  // bad config: 2
      "best --db " + db + " gemm --m 8 --n 8 --k 8",      // none stored: 5
      "cache stats",                                       // no URL: 2
      "cache get --key-id abcd --cache http://127.0.0.1:1 --timeout 0.3",  // nobody answers: 7
      "workers --cache http://127.0.0.1:1 --patience 0",  // nobody answers (at once: no retries for 10 s)
      "tune gemm --m 8 --n 8 --k 8 --no-such-flag 3",     // a flag error: 2
      "serve token list --db " + d.file("no/such/dir/t.db"),
      "import kerneltuner " + d.file("absent.json") + " --db " + db,
      "report --db " + db + " -o " + d.file("r.html"),
      "tune-all " + d.file("absent.txt"),
  };
  for (const auto& c : failing) {
    Result plain = run(c);
    ASSERT_NE(plain.code, 0) << c;
    // Nobody answers: unavailable (7), not a flag error (2) that would answer as quickly.
    if (c.find("http://127.0.0.1:1 ") != std::string::npos) EXPECT_EQ(plain.code, 7) << c << "\n" << plain.err;
    // `best` answers "none stored" on stdout (its result, exit 5); the others' errors are stderr only.
    if (c.rfind("best", 0) != 0) {
      EXPECT_EQ(plain.out, "") << c << ": an error without --json prints nothing on stdout";
    }
    Result j = run(c + " --json");
    EXPECT_EQ(j.code, plain.code) << c << "\n" << j.err;
    auto doc = nlohmann::json::parse(j.out, nullptr, false);
    ASSERT_TRUE(doc.is_object()) << c << ": stdout is not one JSON object: '" << j.out << "'";
    EXPECT_TRUE(doc.contains("error") && doc["error"].is_string()) << c << ": " << j.out;
    EXPECT_EQ(doc.value("exit_code", -1), plain.code) << c << ": " << j.out;
    EXPECT_EQ(lines(j.err), 1u) << c << ": the stderr line stays: " << j.err;
  }
  Result good = run("space gemm --m 8 --n 8 --k 8 --json");
  ASSERT_EQ(good.code, 0) << good.err;
  auto ok = nlohmann::json::parse(good.out, nullptr, false);
  ASSERT_TRUE(ok.is_object()) << good.out;
  EXPECT_FALSE(ok.contains("error")) << good.out;
  // A token list under --json is JSON too (it printed a table).
  Result tokens = run("serve token add ci --db " + db + " --json");
  ASSERT_EQ(tokens.code, 0) << tokens.err;
  EXPECT_EQ(nlohmann::json::parse(tokens.out, nullptr, false).value("name", ""), "ci") << tokens.out;
  Result list = run("serve token list --db " + db + " --json");
  ASSERT_EQ(list.code, 0) << list.err;
  auto arr = nlohmann::json::parse(list.out, nullptr, false);
  ASSERT_TRUE(arr.is_array() && arr.size() == 1) << list.out;
  EXPECT_EQ(arr[0].value("scope", ""), "read");
}
