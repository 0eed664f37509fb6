// Tests the `tessera` executable against hostile input (issue 15, finding 5 and part of 6; issue 25,
// finding 9): deep nesting and long chains, oversized and endless kernel files and lists, FIFOs
// and devices, kernels too big to allocate, flag errors, outputs that cannot be written. Each gets
// a one-line error and exit code 2 (1 for a failed write) within seconds, never a crash or a hang.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace {

struct Result {
  int code = -1;
  std::string out;  // stdout + stderr
  double seconds = 0;
};

Result run(const std::string& args) {
  Result r;
  auto t0 = std::chrono::steady_clock::now();
  // `timeout` turns a hang into a failure (exit 124) instead of a stuck test.
  // TESSERA_TEST_BIN: another build's binary (e.g. main's), for the before of a fix.
  const char* other = std::getenv("TESSERA_TEST_BIN");
  std::string cmd = "timeout 20 " + std::string(other && *other ? other : TESSERA_BIN) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf{};
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) r.out.append(buf.data(), n);
  int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

void expectCleanError(const Result& r, const std::string& needle) {
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(needle), std::string::npos) << r.out;
  EXPECT_LE(std::count(r.out.begin(), r.out.end(), '\n'), 2) << r.out;
}

std::string tempFile(const std::string& content) {
  char path[] = "/tmp/tessera-hostile-XXXXXX";
  int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  close(fd);
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

}  // namespace

// Before: exit 139 (SIGSEGV in the parser's unaryExpr), no message.
TEST(HostileInput, DeeplyNestedKernelFile) {
  std::string text = "kernel k : elementwise {\n in x: f32[4]\n out y: f32[4]\n y[i] = " + std::string(5000, '(') +
                     "x[i]" + std::string(5000, ')') + "\n}\n";
  std::string path = tempFile(text);
  expectCleanError(run("run file " + path), "nested deeper than 128 levels");
  std::remove(path.c_str());
}

// Before: exit 139 (SIGSEGV in the verifier's ExprChecker::type), no message.
TEST(HostileInput, FlatSumOfTenThousandTerms) {
  std::string sum = "y = x";
  for (int i = 1; i < 10000; ++i) sum += "+x";
  expectCleanError(run("run elementwise --shape 16 --expr '" + sum + "'"), "deeper than 256 operations");
}

// Before: /dev/zero was read without end; a 1 GB file took 11 s and 2.1 GB of memory.
TEST(HostileInput, KernelFilesAreSizeCapped) {
  Result zero = run("run file /dev/zero");
  expectCleanError(zero, "not a regular file");  // issue 25: a device is refused before a byte is read
  EXPECT_LT(zero.seconds, 10);
  std::string path = tempFile(std::string((1u << 20) + 10, ' '));
  expectCleanError(run("compile file " + path), "larger than 1 MiB");
  std::remove(path.c_str());
  expectCleanError(run("run file /tmp"), "kernel file");
}

// Before: --alpha nan passed the correctness check (the reference's NaN compared equal).
TEST(HostileInput, NonFiniteScalarsAreRefused) {
  expectCleanError(run("run gemm --m 8 --n 8 --k 8 --alpha nan"), "--alpha must be a finite number");
  expectCleanError(run("run gemm --m 8 --n 8 --k 8 --beta inf"), "--beta must be a finite number");
  expectCleanError(run("run attention --heads 1 --seq 8 --head-dim 8 --scale -inf"), "--scale must be a finite number");
  expectCleanError(run("tune gemm --m 8 --n 8 --k 8 --alpha nan --db /tmp/tessera-hostile-unused.db"),
                   "--alpha must be a finite number");
}

// Issue 25, finding 9. Before: `tune-all /dev/zero`, `bundle --kernels /dev/zero` and `import
// kerneltuner /dev/zero` read past 4 GB (no line or size limit), a FIFO as a kernel file blocked
// forever. Now only regular files are read, within a size and a line length.
TEST(HostileInput, EndlessAndSpecialFilesAreRefusedAtOnce) {
  for (const std::string& cmd : {"tune-all /dev/zero", "bundle --kernels /dev/zero --targets host --out /tmp/tessera-nb",
                                 "import kerneltuner /dev/zero --db /tmp/tessera-never.db", "run file /dev/zero"}) {
    Result r = run(cmd);
    expectCleanError(r, "is a character device, not a regular file");
    EXPECT_LT(r.seconds, 10) << cmd;
  }
  char fifo[] = "/tmp/tessera-fifo-XXXXXX";
  ASSERT_NE(mkdtemp(fifo), nullptr);
  const std::string path = std::string(fifo) + "/k.tsr";
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  Result r = run("run file " + path);
  expectCleanError(r, "is a FIFO, not a regular file");
  EXPECT_LT(r.seconds, 10);
  std::remove(path.c_str());
  rmdir(fifo);
  // A list that is one endless line (a regular file): refused after 64 KiB, not read to its end.
  std::string one_line = tempFile("gemm --m 8 --n 8 --k 8 --name " + std::string(1 << 20, 'a'));
  expectCleanError(run("tune-all " + one_line), "has a line longer than 64 KiB");
  std::remove(one_line.c_str());
}

// Before: tensors of up to 2^36 elements were allocated (past 4 GB), a 10^10-element elementwise
// kernel ended in "std::bad_alloc" with exit 1, and a 10^6 head dimension ran for 90 s.
TEST(HostileInput, HugeKernelsAreRefusedBeforeAnythingIsAllocated) {
  for (const std::string& cmd : {"run gemm --batch 1000000 --m 64 --n 64 --k 64",
                                 "run elementwise --expr 'y = x * 2' --shape 65536x65536",
                                 "run elementwise --expr 'y = x * 2' --shape 100000x100000",
                                 "tune elementwise --expr 'y = x * 2' --shape 65536x65536 --db /tmp/tessera-never.db"}) {
    Result r = run(cmd);
    expectCleanError(r, "more than --max-elements");
    EXPECT_EQ(r.out.find("bad_alloc"), std::string::npos) << r.out;
    EXPECT_LT(r.seconds, 10) << cmd;
  }
  // The override runs what the caller asks for (a small cap refuses a small kernel: the cap is real).
  expectCleanError(run("run gemm --m 64 --n 64 --k 64 --max-elements 1000"), "more than --max-elements 1000");
  Result r = run("run attention --heads 1 --seq 8 --head-dim 1000000");
  expectCleanError(r, "head_dim 1000000 is more than 4096");
  EXPECT_LT(r.seconds, 10);
  expectCleanError(run("run gemm --m 8 --n 8 --k 8 --batch 0"), "--batch must be at least 1");
}

// Before: flag errors exited 104, 109 or 114 with two lines (the README promises 2 and one line);
// `compile --emit ir -o /dev/full` exited 0.
TEST(HostileInput, FlagErrorsAreOneLineAndExit2AndWriteErrorsFail) {
  for (const std::string& cmd : {"run gemm --m x --n 8 --k 8", "run gemm --n 8 --k 8", "run gemm --m 8 --n 8 --k 8 --bogus",
                                 "--bogus", "tune gemm --m 8 --n 8 --k 8 --trials", "serve --port seventy"}) {
    Result r = run(cmd);
    EXPECT_EQ(r.code, 2) << cmd << ": " << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << cmd << ": " << r.out;
    EXPECT_EQ(r.out.rfind("tessera: error: ", 0), 0u) << r.out;
  }
  EXPECT_EQ(run("--help").code, 0);
  Result full = run("compile --emit ir -o /dev/full gemm --m 8 --n 8 --k 8");
  EXPECT_EQ(full.code, 1) << full.out;
  EXPECT_NE(full.out.find("No space left on device"), std::string::npos) << full.out;
  Result out = run("compile --emit ir gemm --m 8 --n 8 --k 8 >/dev/full");
  EXPECT_EQ(out.code, 1) << out.out;
}
