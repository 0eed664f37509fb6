// Tests GPUs by name through the `tessera` executable: `tessera gpus` lists the table with sources,
// `--gpu NAME` estimates for one product (an RTX 4090 and an L4, both sm_89, get different winners
// and times, and `compare` says why), a facts file adds a GPU, and a facts file or a name that is
// wrong is one clear line with exit 2.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli/cli_run.h"

namespace {

using tessera::clitest::Result;
using tessera::clitest::run;

void expectOneLineError(const std::string& args, const std::string& needle) {
  Result r = run(args);
  EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
  EXPECT_NE(r.out.find(needle), std::string::npos) << args << "\n" << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
}

std::string tempDir(const std::string& name) {
  auto d = std::filesystem::path(testing::TempDir()) / name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d.string();
}

}  // namespace

TEST(GpusCli, ListsTheTableWithASourceForEveryFigure) {
  Result r = run("gpus --json");
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.is_array());
  EXPECT_GE(j.size(), 40u);
  for (const auto& g : j) {
    SCOPED_TRACE(g.dump());
    for (const char* field : {"units", "clock", "fp32", "fp16", "bandwidth", "l2", "smem", "registers", "warp"})
      EXPECT_FALSE(g["sources"].value(field, std::string()).empty()) << field;
  }
  Result text = run("gpus");
  ASSERT_EQ(text.code, 0);
  EXPECT_NE(text.out.find("NVIDIA GeForce RTX 4090"), std::string::npos);
  EXPECT_NE(text.out.find("AMD Instinct MI300X"), std::string::npos);
  Result one = run("gpus L4");
  ASSERT_EQ(one.code, 0) << one.out;
  EXPECT_NE(one.out.find("NVIDIA L4  (sm_89"), std::string::npos) << one.out;
  EXPECT_NE(one.out.find("[L4-DS]"), std::string::npos) << one.out;
  Result refs = run("gpus --references");
  EXPECT_NE(refs.out.find("[L4-DS]"), std::string::npos) << refs.out;
}

// Both sm_89, 128 SMs and 1 TB/s against 58 SMs and 300 GB/s: the estimate picks other tiles and
// predicts other times, and compare names the facts behind it.
TEST(GpusCli, TwoProductsOfOneChipGetTheirOwnEstimates) {
  const std::string dir = tempDir("gpus_cli_estimates");
  const std::string db = " --db " + dir + "/t.db";
  const std::string gemm = " gemm --m 4096 --n 4096 --k 4096 --dtype f16";
  Result a = run("tune --gpu \"RTX 4090\" --estimate --trials 6 --json" + db + gemm);
  Result b = run("tune --gpu L4 --estimate --trials 6 --json" + db + gemm);
  ASSERT_EQ(a.code, 0) << a.out;
  ASSERT_EQ(b.code, 0) << b.out;
  auto ja = nlohmann::json::parse(a.out.substr(a.out.find('{'))), jb = nlohmann::json::parse(b.out.substr(b.out.find('{')));
  const std::string ka = ja.dump(), kb = jb.dump();
  EXPECT_NE(ja["key_id"], jb["key_id"]) << "one key for two products";
  const double ta = ja["best"]["median_us"], tb = jb["best"]["median_us"];
  EXPECT_LT(ta * 1.5, tb) << "the RTX 4090 not predicted clearly faster than the L4";

  Result c = run("compare --gpu \"RTX 4090\" --gpu L4" + db + gemm);
  ASSERT_EQ(c.code, 0) << c.out;
  EXPECT_NE(c.out.find("NVIDIA GeForce RTX 4090 (sm_89, 128 SMs)"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("NVIDIA L4 (sm_89, 58 SMs)"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("why they differ"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("128 SMs vs 58 SMs"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("FLOPs per DRAM byte"), std::string::npos) << c.out;
  // Negative control: one product twice has nothing to explain.
  Result same = run("compare --gpu L4 --gpu L4" + db + gemm);
  EXPECT_EQ(same.out.find("why they differ"), std::string::npos) << same.out;
}

TEST(GpusCli, AFactsFileAddsAGpuAndItsMistakesAreOneLine) {
  const std::string dir = tempDir("gpus_cli_facts");
  const std::string good = dir + "/a2000.json";
  std::ofstream(good) << R"({"name": "NVIDIA RTX A2000 12GB", "aliases": ["A2000"], "arch": "sm_86", "units": 26,
    "clock_ghz": 1.2, "fp32_gflops": 7990, "fp16_gflops": 31950, "bf16_gflops": 31950, "bandwidth_gbs": 288,
    "l2_mb": 3, "source": "NVIDIA RTX A2000 datasheet"})";
  Result r = run("gpus A2000 --gpu-facts " + good);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("NVIDIA RTX A2000 12GB  (sm_86"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("from " + good), std::string::npos) << r.out;
  // The name after the file is the name (it was read as a second facts file before issue 48).
  Result after = run("gpus --gpu-facts " + good + " A2000");
  ASSERT_EQ(after.code, 0) << after.out;
  EXPECT_EQ(after.out, r.out);
  // The same file through the environment, picked by --gpu.
  Result viaEnv = run("gpus --arch sm_86", "TESSERA_GPU_FACTS=" + good);
  EXPECT_NE(viaEnv.out.find("A2000 12GB +"), std::string::npos) << viaEnv.out;
  // Without it, the GPU is unknown (the control).
  expectOneLineError("gpus A2000", "unknown GPU 'A2000'");

  const std::string missing = dir + "/missing.json", absurd = dir + "/absurd.json";
  std::ofstream(missing) << R"({"name": "x", "arch": "sm_86", "units": 26})";
  std::ofstream(absurd) << R"({"name": "NVIDIA RTX A2000 12GB", "arch": "sm_86", "units": 26, "clock_ghz": 1200,
    "fp32_gflops": 7990, "fp16_gflops": 31950, "bandwidth_gbs": 288, "l2_mb": 3, "source": "x"})";
  expectOneLineError("gpus --gpu-facts " + missing, "clock_ghz: missing");
  expectOneLineError("gpus --gpu-facts " + absurd, "clock_ghz: 1200 is not a plausible");
  expectOneLineError("tune --gpu-facts " + absurd + " --gpu A2000 --estimate gemm --m 64 --n 64 --k 64", "clock_ghz");
  expectOneLineError("gpus --gpu-facts " + dir + "/nothing.json", "nothing.json");
  expectOneLineError("tune --gpu \"Nonexistent 9000\" --estimate gemm --m 64 --n 64 --k 64", "unknown GPU 'Nonexistent 9000'");
  expectOneLineError("compile --gpu L4 --target sm_80 gemm --m 64 --n 64 --k 64", "sm_89, not sm_80");
}
