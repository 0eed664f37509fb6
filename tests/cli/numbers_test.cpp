// Tests the one number format of human output (support/si_format.h, issue 48): SI-scaled values of
// 3-4 significant digits and counts with their noun's number, in the helper and in what
// representative commands print (a run, an estimating GPU tune with its model terms, the space,
// the GPU table): never "2.076e+04 us", "5.657843999999999 ms" or "1 cores".
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "support/si_format.h"

namespace {

std::string runOut(const std::string& args) {
  std::string out;
  FILE* p = popen((std::string(TESSERA_BIN) + " " + args + " 2>&1").c_str(), "r");
  std::array<char, 4096> buf{};
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  int st = pclose(p);
  // 5: `best` of an estimate-only key answers with the labelled estimate and "none measured".
  EXPECT_TRUE(WIFEXITED(st) && (WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == 5)) << args << "\n" << out;
  return out;
}

// The forms the format forbids, each with where it was found ("" when none).
std::vector<std::string> badForms(const std::string& text) {
  static const std::regex exponentWithUnit(
      R"([0-9](\.[0-9]+)?[eE][+-]?[0-9]+ ?(ns|us|ms|s|B|kB|KB|MB|GB|TB|KiB|MiB|GiB|FLOP|GFLOP/s|TFLOP/s|GB/s|TB/s|Hz|GHz)\b)");
  static const std::regex everyDigit(R"([0-9]\.[0-9]{7,})");
  static const std::regex singularPlural(
      R"(\b1 (cores|threads|records|kernels|trials|workers|entries|configs|waves|blocks|launches|items|jobs)\b)");
  // A ratio ("1.36x") of more than four significant digits ("928.45x") or none ("0.00x").
  static const std::regex ratio(R"(\b([0-9]+)\.([0-9]+)x\b)");
  auto badRatio = [](const std::smatch& m) {
    const std::string digits = m[1].str() + m[2].str();
    const size_t first = digits.find_first_not_of('0');
    return first == std::string::npos || digits.size() - first > 4;
  };
  std::vector<std::string> out;
  auto add = [&](const std::smatch& m) {
    const size_t at = size_t(m.position());
    const size_t from = text.rfind('\n', at) == std::string::npos ? 0 : text.rfind('\n', at) + 1;
    out.push_back(m.str() + "  in: " + text.substr(from, text.find('\n', at) - from));
  };
  for (const std::regex* re : {&exponentWithUnit, &everyDigit, &singularPlural})
    for (std::sregex_iterator it(text.begin(), text.end(), *re), end; it != end; ++it) add(*it);
  for (std::sregex_iterator it(text.begin(), text.end(), ratio), end; it != end; ++it)
    if (badRatio(*it)) add(*it);
  return out;
}

}  // namespace

TEST(Numbers, SiScaledWithFourSignificantDigits) {
  using tessera::countOf;
  using tessera::formatMicros;
  using tessera::formatSi;
  EXPECT_EQ(formatMicros(20760), "20.76 ms");
  EXPECT_EQ(formatMicros(5657.843999999999), "5.658 ms");
  EXPECT_EQ(formatMicros(0.412), "0.412 us");  // kernel times never go below us
  EXPECT_EQ(formatMicros(412.34), "412.3 us");
  EXPECT_EQ(formatMicros(2.345e6), "2.345 s");
  EXPECT_EQ(formatMicros(999.99), "1.000 ms");  // rounding carries to the next prefix
  EXPECT_EQ(formatSi(1073741824.0, "B"), "1.074 GB");
  EXPECT_EQ(formatSi(1.555e12, "B/s"), "1.555 TB/s");
  EXPECT_EQ(formatSi(0, "B"), "0 B");
  EXPECT_EQ(formatSi(0.5e9, "FLOP/s", 3), "0.500 GFLOP/s");  // a floor prefix keeps figures comparable
  EXPECT_EQ(formatSi(std::nan(""), "s"), "n/a");
  EXPECT_EQ(countOf(1, "core"), "1 core");
  EXPECT_EQ(countOf(2, "core"), "2 cores");
  EXPECT_EQ(countOf(1, "entry", "entries"), "1 entry");
  EXPECT_EQ(countOf(0, "entry", "entries"), "0 entries");
  // Ratios: three significant digits, never "0.00x" or "928.45x" (the "%.2fx" they were).
  using tessera::formatRatio;
  EXPECT_EQ(formatRatio(1.3612), "1.36x");
  EXPECT_EQ(formatRatio(928.45), "928x");
  EXPECT_EQ(formatRatio(12.345), "12.3x");
  EXPECT_EQ(formatRatio(0.9412), "0.941x");
  EXPECT_EQ(formatRatio(0.004123), "0.00412x");
  EXPECT_EQ(formatRatio(9.996), "10.0x");  // rounding carries to the next magnitude
  EXPECT_EQ(formatRatio(0), "0x");
  EXPECT_EQ(formatRatio(std::nan("")), "n/a");
}

// The scanner itself: it finds each form the issue met and passes their right spellings.
TEST(Numbers, TheScannerCatchesTheBadForms) {
  EXPECT_EQ(badForms("re-measured here: 2.076e+04 us, 1.02x").size(), 1u);
  EXPECT_EQ(badForms("key 1a2b: best 5.657843999999999 ms with {}").size(), 1u);
  EXPECT_EQ(badForms("host (x86-64-v3, AMD EPYC, 1 cores; FMA peak").size(), 1u);
  EXPECT_EQ(badForms("re-timed here at 32.9 ms, 928.45x the claim").size(), 1u);
  EXPECT_EQ(badForms("vs default   0.00x  (default").size(), 1u);
  EXPECT_TRUE(badForms("re-measured here: 20.76 ms; best 5.658 ms; 1 core; 2 cores; max rel err 2.4e-07").empty());
  EXPECT_TRUE(badForms("vs default   1.36x; 928x the claim; 0.00412x; 12.3x; tile 64x64; 0x1f").empty());
}

// What a newcomer reads: a one-thread run (its target line counts cores), an estimating GPU tune
// of the issue's 4096^3 f16 GEMM (the model's terms, bytes in the gigabytes), the space, the GPUs.
TEST(Numbers, RepresentativeOutputsUseTheOneFormat) {
  const std::string db = testing::TempDir() + "/numbers_" + std::to_string(getpid()) + ".db";
  std::filesystem::remove(db);
  const std::vector<std::string> commands = {
      "run gemm --m 33 --n 17 --k 9 --threads 1 --min-time 0.005",
      "run elementwise --expr 'y = x * 2' --shape 300x300 --threads 1 --min-time 0.005",
      "tune gemm --m 4096 --n 4096 --k 4096 --dtype f16 --target sm_80 --estimate --trials 4 --db " + db,
      "best gemm --m 4096 --n 4096 --k 4096 --dtype f16 --target sm_80 --db " + db,
      "space --threads 1 gemm --m 64 --n 64 --k 64",
      // A measured tune's "vs default"; the sm_90a default at 1024^3, one block per SM ("1 blocks").
      "tune --threads 1 --trials 2 --top-k 2 --min-time 0.002 --db " + db + " gemm --m 32 --n 32 --k 32",
      // One trial: "search 1 trials" before.
      "tune --threads 1 --trials 1 --top-k 0 --min-time 0.002 --no-warm-start --force --db " + db +
          " elementwise --expr 'y = x * 2' --shape 64x64",
      "compile --target sm_90a --emit ptx -o /dev/null gemm --m 1024 --n 1024 --k 1024 --dtype f16",
      "gpus",
  };
  for (const auto& c : commands) {
    const std::string out = runOut(c);
    EXPECT_TRUE(badForms(out).empty()) << c << ":\n" << ::testing::PrintToString(badForms(out));
  }
  EXPECT_NE(runOut(commands[0]).find("1 core;"), std::string::npos);
  std::filesystem::remove(db);
}

// Issue 48: mma-lane's resources line read "smem 0 B": ptxas reports the static shared memory
// only, and its ring of stages is dynamic. The line counts both (codegen/gpu_resources.cpp).
TEST(Numbers, AResourcesLineCountsDynamicSharedMemory) {
  const std::string out = runOut(
      "compile --target sm_80 --emit ptx -o /dev/null gemm --m 1024 --n 1024 --k 1024 --dtype f16 "
      "--config 'BK=64,BM=32,BN=16,STAGES=4,TM=32,TN=16,VEC=8,strategy=mma-lane'");
  std::smatch launch, res;
  if (!std::regex_search(out, res, std::regex(R"(resources +sm_80: .*)")))
    GTEST_SKIP() << "no resources line (no ptxas here?):\n" << out;
  ASSERT_TRUE(std::regex_search(out, launch, std::regex(R"(([0-9]+) B dynamic shared memory)"))) << out;
  const double dynamicBytes = std::stod(launch[1]);
  ASSERT_GT(dynamicBytes, 0) << out;
  // The launch's dynamic bytes, in the one format, on the resources line; never "smem 0 B".
  EXPECT_NE(res.str().find("smem " + tessera::formatSi(dynamicBytes, "B") + " dynamic"), std::string::npos) << out;
  EXPECT_EQ(res.str().find("smem 0 B"), std::string::npos) << out;
}
