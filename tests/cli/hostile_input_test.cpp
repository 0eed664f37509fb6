// Tests the `tessera` executable against hostile input (issue 15, finding 5 and part of 6): deep
// nesting and long chains, oversized and endless kernel files, non-finite scalars. Each gets a
// one-line error and exit code 2 within seconds, never a crash or a hang.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
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
  std::string cmd = "timeout 20 " + std::string(TESSERA_BIN) + " " + args + " 2>&1";
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
  expectCleanError(zero, "larger than 1 MiB");
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
