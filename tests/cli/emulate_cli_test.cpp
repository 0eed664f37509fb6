// Tests `tessera emulate FILE` through the executable: the NVVM module `compile --emit nvvm` prints
// runs clean (exit 0); the same module hand-edited to drop its barriers is reported racy with the
// thread, the instruction and the shared byte (exit 1); bad input is one line and exit 2.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "tests/cli/cli_run.h"

namespace {

using tessera::clitest::Result;
using tessera::clitest::run;

std::string write(const std::string& name, const std::string& text) {
  const std::string path = testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

int lines(const std::string& s) { return int(std::count(s.begin(), s.end(), '\n')); }

}  // namespace

TEST(EmulateCli, APrintedModuleRunsCleanAndAHandEditedRaceIsNamed) {
  Result printed = run("compile gemm --m 64 --n 64 --k 64 --dtype f16 --target sm_80 --config strategy=mma,STAGES=2 --emit nvvm");
  ASSERT_EQ(printed.code, 0) << printed.out;
  ASSERT_NE(printed.out.find("nvvm.barrier0"), std::string::npos);
  // A, B (f16), the f32 workspace and C: 16 KiB each is enough for every one.
  const std::string buffers = " --buffer 16384 16384 16384 16384";
  Result clean = run("emulate " + write("gemm.nvvm", printed.out) + buffers);
  EXPECT_EQ(clean.code, 0) << clean.out;
  EXPECT_NE(clean.out.find("emulation  ok"), std::string::npos) << clean.out;
  EXPECT_NE(clean.out.find("kernel     kernel_kernel on sm_80"), std::string::npos) << clean.out;
  EXPECT_NE(clean.out.find("schedules  3 fiber orders"), std::string::npos) << clean.out;  // the extra orders by default

  const std::string edited = std::regex_replace(printed.out, std::regex("\\n[^\\n]*nvvm\\.barrier0[^\\n]*"), "");
  Result racy = run("emulate " + write("gemm_nobar.nvvm", edited) + buffers);
  EXPECT_EQ(racy.code, 1) << racy.out;
  EXPECT_NE(racy.out.find("error: race:"), std::string::npos) << racy.out;
  EXPECT_NE(racy.out.find("shared byte"), std::string::npos) << racy.out;
  EXPECT_NE(racy.out.find("thread ("), std::string::npos) << racy.out;
  EXPECT_NE(racy.out.find("NVVM line "), std::string::npos) << racy.out;  // the instruction, by its line in the file
  std::smatch m;
  ASSERT_TRUE(std::regex_search(racy.out, m, std::regex("at (nvvm\\.[a-z.]+)[^(]*\\(NVVM line ([0-9]+)\\)"))) << racy.out;
  std::istringstream file(edited);
  std::string line;
  for (int i = 0; i < std::stoi(m[2]) && std::getline(file, line);) ++i;
  EXPECT_NE(line.find(m[1].str()), std::string::npos) << m[0] << " names the file's line: " << line;

  // Bad input: one line, exit 2.
  const std::string good = write("gemm.nvvm", printed.out);
  for (const auto& [args, needle] : std::vector<std::pair<std::string, std::string>>{
           {"emulate /nonexistent/x.nvvm --buffer 4", "cannot read"},
           {"emulate " + good + " --buffer 16384", "takes 4 buffer(s)"},
           {"emulate " + good + buffers + " --grid 0", "--grid"},
           {"emulate " + good + buffers + " --target sm_999", "--target"},
           {"emulate " + good + buffers + " --schedules 0", "--schedules"},
           {"emulate " + write("junk.nvvm", "hello\n") + " --buffer 4", "no gpu.module"},
           {"emulate " + write("broken.nvvm", "gpu.module @m {\n  llvm.func @k(%a: !llvm.ptr) attributes {gpu.kernel} {\n    llvm.bogus\n  }\n}\n") +
                " --buffer 4 --target sm_80 --grid 1 --block 32",
            "does not parse"},
       }) {
    Result r = run(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(needle), std::string::npos) << args << "\n" << r.out;
    EXPECT_EQ(lines(r.out), 1) << args << "\n" << r.out;
  }
}
