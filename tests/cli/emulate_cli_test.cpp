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

  // A buffer given too small: the kernel's reads past its end land in the red zone after it and
  // are named by it (never by a neighbour the heap happened to put there).
  Result overrun = run("emulate " + write("gemm.nvvm", printed.out) + " --buffer 4096 16384 16384 16384");
  EXPECT_EQ(overrun.code, 1) << overrun.out;
  EXPECT_NE(overrun.out.find("out-of-bounds global load"), std::string::npos) << overrun.out;
  EXPECT_NE(overrun.out.find("past its end"), std::string::npos) << overrun.out;
  EXPECT_NE(overrun.out.find("of buffer 0 (4096 B)"), std::string::npos) << overrun.out;

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

// A wgmma GEMM (TMA from tensor maps the host encodes, wgmma from 128B-swizzled descriptors)
// printed with `compile --emit nvvm` runs from the file alone, its launch and maps read from the
// comment compile appends: the verdict and counters of the in-process `--emit emulation-report`.
// Controls: a wrong map (half the box's rows: the stage's barrier waits for bytes that never land)
// is caught, exit 1; the module hand-edited so its swizzled tiles miss the pattern boundary is
// refused; a missing map, mismatched dims, a malformed map, a map for a parameter the kernel
// indexes as a buffer are one line and exit 2.
TEST(EmulateCli, ATmaKernelRunsFromItsFileWithTheTensorMapsItsLauncherEncodes) {
  Result both = run("compile gemm --m 64 --n 128 --k 128 --dtype f16 --target sm_90a --config strategy=wgmma,STAGES=2 "
                    "--emit nvvm,emulation-report");
  ASSERT_EQ(both.code, 0) << both.out;
  const size_t comment = both.out.find("// tessera emulate:"), report = both.out.find("\nkernel     ", comment);
  ASSERT_NE(comment, std::string::npos) << both.out;
  ASSERT_NE(report, std::string::npos) << both.out;
  const std::string module = both.out.substr(0, report + 1), inproc = both.out.substr(report + 1);
  ASSERT_NE(inproc.find("check      matches the reference"), std::string::npos) << inproc;
  ASSERT_NE(inproc.find("emulation  ok"), std::string::npos) << inproc;
  std::smatch m0, m1;
  ASSERT_TRUE(std::regex_search(module, m0, std::regex("--tensor-map (0:f16:[0-9x:]+)"))) << module.substr(comment);
  ASSERT_TRUE(std::regex_search(module, m1, std::regex("--tensor-map (1:f16:[0-9x:]+)"))) << module.substr(comment);

  const std::string file = write("wgmma.nvvm", module);
  Result fromFile = run("emulate " + file);
  ASSERT_EQ(fromFile.code, 0) << fromFile.out;
  EXPECT_NE(fromFile.out.find("emulation  ok"), std::string::npos) << fromFile.out;
  EXPECT_NE(fromFile.out.find("tensor map parameter 0: f16"), std::string::npos) << fromFile.out;
  // The same counters: every shared and global request, every lane instruction.
  auto line = [](const std::string& s, const std::string& head) {
    const size_t at = s.find("\n" + head);
    return at == std::string::npos ? std::string("(none)") : s.substr(at + 1, s.find('\n', at + 1) - at - 1);
  };
  auto lanes = [](const std::string& s) {
    std::smatch m;
    return std::regex_search(s, m, std::regex("([0-9]+) lane instructions")) ? m[1].str() : std::string("(none)");
  };
  EXPECT_EQ(line(fromFile.out, "shared     "), line(inproc, "shared     "));
  EXPECT_EQ(line(fromFile.out, "global     "), line(inproc, "global     "));
  EXPECT_EQ(lanes(fromFile.out), lanes(inproc));
  EXPECT_NE(lanes(inproc), "(none)") << inproc;

  // A wrong map: box rows halved.
  const std::string halved = std::regex_replace(m0[1].str(), std::regex(":([0-9]+)x([0-9]+)x1:128$"), ":$1x32x1:128");
  ASSERT_NE(halved, m0[1].str());
  Result wrong = run("emulate " + file + " --tensor-map " + halved + " --tensor-map " + m1[1].str());
  EXPECT_EQ(wrong.code, 1) << wrong.out;
  EXPECT_NE(wrong.out.find("error: "), std::string::npos) << wrong.out;
  // The shared window 128-byte aligned: every stage 128 bytes past the swizzle pattern's boundary.
  const std::string misaligned = std::regex_replace(module, std::regex("alignment = 1024"), "alignment = 128");
  ASSERT_NE(misaligned, module);
  Result off = run("emulate " + write("wgmma_misaligned.nvvm", misaligned));
  EXPECT_EQ(off.code, 1) << off.out;
  EXPECT_NE(off.out.find("base_offset must be 1"), std::string::npos) << off.out;

  const std::string bare = write("wgmma_bare.nvvm", module.substr(0, comment));
  const std::string map1 = " --tensor-map " + m1[1].str();
  for (const auto& [args, needle] : std::vector<std::pair<std::string, std::string>>{
           {"emulate " + bare + " --buffer 16384", "parameter 0 is a TMA tensor map"},
           {"emulate " + bare + " --buffer 16384 --tensor-map " + m0[1].str(), "parameter 1 is a TMA tensor map"},
           {"emulate " + file + " --tensor-map 0:f16:128x64x1:128x16384:64x64x1:128" + map1, "mismatched dims: stride 0"},
           {"emulate " + file + " --tensor-map 0:f16:128x64:256x16384:64x64x1:128" + map1, "mismatched dims: 2 dims"},
           {"emulate " + file + " --tensor-map 0:f16:128x64x1:256x16384:64x64x1:128 --tensor-map " + m1[1].str() + ":@2",
            "mismatched dims: the map spans 32768 B of parameter 2's buffer of 16384 B"},
           {"emulate " + file + " --tensor-map 0:f16:128x64x1" + map1, "--tensor-map takes PARAM:DTYPE"},
           {"emulate " + file + " --tensor-map 0:f16:128x64x1:256x16384:64x64x1:64" + map1, "exceeds the swizzle span"},
           {"emulate " + file + " --tensor-map " + m0[1].str() + map1 + " --tensor-map 2:f16:128x64x1:256x16384:64x64x1:128",
            "parameter 2 is no tensor map"},
           {"emulate " + file + " --tensor-map 3:f16:128x64x1:256x16384:64x64x1:128" + map1, "has 3 parameter(s)"},
       }) {
    Result r = run(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(needle), std::string::npos) << args << "\n" << r.out;
    EXPECT_EQ(lines(r.out), 1) << args << "\n" << r.out;
  }
}
