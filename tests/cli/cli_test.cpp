// Tests the `tessera` executable end to end: good runs print checked results (also as JSON),
// bad input gets a one-line error and a non-zero exit, never a crash.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli/cli_run.h"
#include "ir/builders.h"
#include "search/space.h"

namespace {

// The defaults `tessera space` prints for a GEMM on this host, derived the way the CLI derives
// them (the values depend on the host's ISA and caches, which change between machines).
std::string hostGemmDefaults(int64_t m, int64_t n, int64_t k, int threads = 0) {
  auto g = tessera::ir::buildGemm({.m = m, .n = n, .k = k});
  auto t = threads ? *tessera::hostTargetWithThreads(threads) : tessera::hostTarget();
  auto s = tessera::search::makeSpace(*g, t);
  return s.ok() ? s->defaults().str() : s.error().message;
}

using tessera::clitest::Result;
using tessera::clitest::run;

void expectError(const std::string& args, int code, const std::string& needle) {
  Result r = run(args);
  EXPECT_EQ(r.code, code) << args << "\n" << r.out;
  EXPECT_NE(r.out.find(needle), std::string::npos) << args << "\n" << r.out;
  EXPECT_EQ(r.out.find("Aborted"), std::string::npos);
  // One line of error, not a dump.
  EXPECT_LE(std::count(r.out.begin(), r.out.end(), '\n'), 2) << r.out;
}

}  // namespace

TEST(Cli, RunChecksAndReports) {
  Result r = run("run gemm --m 33 --n 17 --k 9 --min-time 0.01");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("check       ok"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GFLOP/s"), std::string::npos);
  // A sub-microsecond kernel reads in microseconds with its digits, not as "0.000 ms".
  EXPECT_NE(r.out.find(" us median  (p20 "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("0.000"), std::string::npos) << r.out;
  // 2 GFLOP: over a millisecond on any host seen (512^3 took 0.97 ms on a 2-core AVX-512 Xeon).
  Result big = run("run gemm --m 1024 --n 1024 --k 1024 --min-time 0.01");
  EXPECT_NE(big.out.find(" ms median  (p20 "), std::string::npos) << big.out;
  Result j = run("run elementwise --expr 'y = gelu(x * s + b)' --shape 8x40 --shape s=40 --shape b=40 --json --min-time 0.01");
  ASSERT_EQ(j.code, 0) << j.out;
  auto doc = nlohmann::json::parse(j.out);
  EXPECT_TRUE(doc["check"]["ok"].get<bool>());
  EXPECT_GT(doc["gbps"].get<double>(), 0);
  EXPECT_EQ(doc["family"], "elementwise");
}

TEST(Cli, KernelFileRoundTrip) {
  Result ir = run("compile gemm --m 12 --n 10 --k 8 --epilogue 'relu(acc)' --emit ir");
  ASSERT_EQ(ir.code, 0) << ir.out;
  std::string path = testing::TempDir() + "/k.tsr";
  std::ofstream(path) << ir.out;
  Result r = run("run file " + path + " --min-time 0.01");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("check       ok"), std::string::npos) << r.out;
}

TEST(Cli, CompileEmitsStages) {
  // A transform schedule (plain): 64^3's default is nvec, which has none, where the L1 holds it.
  Result r = run("compile gemm --m 64 --n 64 --k 64 --config schedule=plain --emit schedule,asm");
  ASSERT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("transform.named_sequence"), std::string::npos);
  EXPECT_NE(r.out.find("vfmadd"), std::string::npos);
  std::string obj = testing::TempDir() + "/k.o";
  EXPECT_EQ(run("compile gemm --m 64 --n 64 --k 64 --emit obj -o " + obj).code, 0);
  std::ifstream in(obj, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  EXPECT_EQ(std::string(magic, 4), "\x7f" "ELF");
}

TEST(Cli, BadInputGetsOneLineAndNonZeroExit) {
  expectError("run gemm --m 0 --n 4 --k 4", 2, "m must be positive");
  expectError("run gemm --m 4 --n 4 --k 4 --dtype f64", 2, "unknown dtype 'f64'");
  expectError("run gemm --m 4 --n 4 --k 4 --target sm_99", 2, "unknown target 'sm_99'");
  expectError("run gemm --m 4 --n 4 --k 4 --config MR=3", 2, "outside its domain");
  expectError("run gemm --m 4 --n 4 --k 4 --config 'FOO=1'", 2, "unknown knob 'FOO'");
  expectError("run gemm --m 4 --n 4 --k 4 --config '{\"MR\": [1]}'", 2, "must be an integer or a string");
  expectError("run elementwise --expr 'y = frob(x)' --shape 4", 2, "unknown function 'frob'");
  expectError("run elementwise --expr 'y = x + w' --shape 4x3 --shape w=5", 2, "not broadcastable");
  expectError("run attention --heads 6 --heads-kv 4 --seq 8 --head-dim 16", 2, "not divisible by heads_kv");
  expectError("run file /nonexistent.tsr", 2, "cannot read kernel file");
  std::string path = testing::TempDir() + "/bad.tsr";
  std::ofstream(path) << "kernel k : gemm {\n  in A: f32[4, 4]\n  C[i] = \n";
  expectError("run file " + path, 2, "bad.tsr:");
  expectError("compile gemm --m 4 --n 4 --k 4 --emit ptx", 2, "unknown --emit 'ptx'");
  expectError("run --min-time -1 gemm --m 4 --n 4 --k 4", 2, "--min-time must be at least 0");
  expectError("run --min-time nan gemm --m 4 --n 4 --k 4", 2, "--min-time must be at least 0");
  expectError("run --min-runs 0 gemm --m 4 --n 4 --k 4", 2, "--min-runs must be at least 1");
  Result none = run("frobnicate");
  EXPECT_NE(none.code, 0);
}

// `tessera space` shows what tune searches: knobs with defaults and domains, the product and the
// legal count (enumerated here; --space narrows it like tune's).
TEST(Cli, SpaceShowsKnobsAndLegalCount) {
  // The space follows the live host: AVX-512 (x86-64-v4) has 32 vector registers of 16 lanes,
  // AVX2 (v3) 16 of 8; the defaults are whatever the space derives on this host. One thread
  // (--threads 1): no THREADS knob, whatever the core count.
  Result r = run("space --threads 1 gemm --m 128 --n 128 --k 128");
  ASSERT_EQ(r.code, 0) << r.out;
  const bool avx512 = r.out.find("(x86-64-v4)") != std::string::npos;
  EXPECT_EQ(avx512, tessera::hostTarget().arch == "x86-64-v4");
  std::string mr = hostGemmDefaults(128, 128, 128, 1);
  mr = mr.substr(mr.find("MR=") + 3);
  mr = mr.substr(0, mr.find(','));
  EXPECT_NE(r.out.find("MR         " + mr + std::string(10 - mr.size(), ' ') + "1|2|4|6|8|12|14"), std::string::npos)
      << r.out;
  // 10944 legal on AVX-512 for the transform schedules: the full host table
  // bench/data/host_gemm_128x128x128 (recorded before blis existed) has that many.
  Result old = run("space --threads 1 gemm --m 128 --n 128 --k 128 --space 'schedule=plain|packed'");
  EXPECT_NE(old.out.find(avx512 ? "8 knobs, 18144 configs in the product, 10944 legal (enumerated)"
                                : "8 knobs, 18144 configs in the product, "),
            std::string::npos)
      << old.out;
  Result full = run("space --threads 1 gemm --m 128 --n 128 --k 128 --json");
  Result narrowed = run("space --threads 1 gemm --m 128 --n 128 --k 128 --space 'schedule=packed,KU=1,ORDER=ij' --json");
  ASSERT_EQ(full.code, 0) << full.out;
  ASSERT_EQ(narrowed.code, 0) << narrowed.out;
  auto jf = nlohmann::json::parse(full.out), jn = nlohmann::json::parse(narrowed.out);
  // On one thread schedule (plain|packed|blis), KU and ORDER take part in no constraint: fixing
  // them keeps 1/18 of the legal space.
  EXPECT_GT(jf["legal"].get<double>(), 1000);
  EXPECT_EQ(jn["legal"].get<double>() * 18, jf["legal"].get<double>()) << narrowed.out;
  EXPECT_TRUE(jn["legal_exact"].get<bool>()) << narrowed.out;
  // On one thread skinny GEMMs default to plain with the whole row of B as one block (measured
  // 2.7x faster than packing on the 32x2048x512 table), or with AVX-512 to nvec (17-48 rows of
  // a B past the L2: its strips stream B once); large ones to the BLIS loops.
  Result skinny = run("space --threads 1 gemm --m 32 --n 2048 --k 512 --json");
  std::string want = hostGemmDefaults(32, 2048, 512, 1);
  // nvec's rule, derived as the space derives it: AVX-512 and B (2048 x 512 f32, 4 MiB) past the L2.
  if (avx512 && tessera::hostTarget().l2Bytes < (int64_t(4) << 20)) {
    EXPECT_NE(want.find("schedule=nvec"), std::string::npos) << want;
  } else {
    EXPECT_NE(want.find("NC=2048"), std::string::npos) << want;
    EXPECT_NE(want.find("schedule=plain"), std::string::npos) << want;
  }
  EXPECT_NE(skinny.out.find(want), std::string::npos) << want << "\n" << skinny.out;
  Result large = run("space --threads 1 gemm --m 1024 --n 1024 --k 1024 --json");
  EXPECT_NE(large.out.find("schedule=blis\""), std::string::npos) << large.out;
  // All cores by default: THREADS is a knob (and the cache key's units) on a multi-core host.
  Result all = run("space gemm --m 1024 --n 1024 --k 1024 --json");
  EXPECT_NE(all.out.find(hostGemmDefaults(1024, 1024, 1024)), std::string::npos) << all.out;
  EXPECT_EQ(all.out.find("\"THREADS\"") != std::string::npos, tessera::hostTarget().units > 1) << all.out;
  expectError("space --threads 0 gemm --m 8 --n 8 --k 8", 2, "--threads must be between 1 and 1024");
  expectError("space --threads 2 gemm --m 8 --n 8 --k 8 --target sm_90", 2, "--threads applies to the host target only");
  expectError("space gemm --m 8 --n 8 --k 8 --space 'MR=5'", 2, "not in the knob's domain");
  expectError("space gemm --m 8 --n 8 --k 8 --target sm_99", 2, "unknown target 'sm_99'");
}

// "of peak" is held against the threads a kernel ran on, and a figure above 100 % always says why
// (a kernel cannot beat the hardware: the probe read low, or the data fit in the caches).
TEST(Cli, PeakSharesNameTheirThreadsAndNeverPassAPeakSilently) {
  tessera::TargetDesc t;
  t.cores = 4;
  t.peakGflopsF32 = 100;
  t.memBandwidthGBs = 10;
  t.memBandwidthAllCoresGBs = 25;
  EXPECT_EQ(t.computePeakGflops(tessera::ir::ScalarType::F32, 1), 100);
  EXPECT_EQ(t.computePeakGflops(tessera::ir::ScalarType::F32, 2), 200);
  EXPECT_EQ(t.computePeakGflops(tessera::ir::ScalarType::F32, 16), 400);  // oversubscribed: the cores
  EXPECT_EQ(t.bandwidthGBs(1), 10);
  EXPECT_EQ(t.bandwidthGBs(4), 25);
  EXPECT_EQ(t.bandwidthGBs(2), 15);
  EXPECT_EQ(tessera::peakShareText(0.5, "the FMA peak"), "50.0% of the FMA peak");
  EXPECT_EQ(tessera::peakShareText(1.5, "the FMA peak"), "150% of the FMA peak; above it: the probe read it low");
  EXPECT_EQ(tessera::peakShareText(0, "peak"), "share of peak not known");
  // A copy probe that ran on busy cores is no roof (targets/host_probe.cpp): no share of it, and why.
  EXPECT_EQ(tessera::bandwidthShareText(t, 0.5, "the copy bandwidth", 1e12), "50.0% of the copy bandwidth");
  tessera::TargetDesc busy = t;
  busy.copyDoubt = "the copy probe ran on busy cores";
  EXPECT_EQ(busy.bandwidthGBs(2), 0);
  EXPECT_EQ(tessera::bandwidthShareText(busy, 9.0, "the copy bandwidth", 1e3),
            "no share of the copy bandwidth: the copy probe ran on busy cores");
  // The demo: a threads column, and every share above 100 % marked and explained.
  Result r = run("demo --small");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(" threads "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("one thread"), std::string::npos) << r.out;
  bool marked = r.out.find("%*") != std::string::npos;
  EXPECT_EQ(marked, r.out.find("above its peak") != std::string::npos) << r.out;
  for (size_t p = r.out.find('%'); p != std::string::npos; p = r.out.find('%', p + 1)) {
    size_t b = r.out.rfind(' ', p);
    double v = std::atof(r.out.substr(b + 1, p - b - 1).c_str());
    if (v > 100) EXPECT_EQ(r.out[p + 1], '*') << r.out;
  }
  // A cache-resident elementwise run passes the (DRAM) copy bandwidth: said so when it does.
  Result e = run("run --threads 1 elementwise --expr 'y = x * 2' --shape 64x64 --min-time 0.05");
  ASSERT_EQ(e.code, 0) << e.out;
  size_t line = e.out.find("throughput");
  ASSERT_NE(line, std::string::npos);
  std::string th = e.out.substr(line, e.out.find('\n', line) - line);
  double share = std::atof(th.substr(th.find('(') + 1).c_str());
  EXPECT_NE(th.find("of the copy bandwidth of 1 thread"), std::string::npos) << th;
  if (share > 100) EXPECT_NE(th.find("above it: its data fit in the caches"), std::string::npos) << th;
}

// `--emit config` says which config a command's flags resolve to (the docs test asks it whether a
// shrunk command keeps its meaning). The README's `--config 'schedule=plain,MR=4,NR=16'` at 512^3
// ran on one thread only where the size's default was one thread (exit 2 on two cores or more):
// naming a one-thread schedule now means one thread, and naming THREADS as well stays the user's
// word (the negative control: refused where the host has two threads to give).
TEST(Cli, APlainConfigRunsAsWrittenOnAnyCoreCount) {
  const std::string gemm = "gemm --m 512 --n 512 --k 512";
  Result dflt = run("compile " + gemm + " --emit config");
  ASSERT_EQ(dflt.code, 0) << dflt.out;
  auto d = nlohmann::json::parse(dflt.out, nullptr, false);
  ASSERT_TRUE(d.is_object() && d["config"].is_object()) << dflt.out;
  Result plain = run("compile " + gemm + " --config 'schedule=plain,MR=4,NR=16' --emit config");
  ASSERT_EQ(plain.code, 0) << plain.out;
  auto p = nlohmann::json::parse(plain.out, nullptr, false);
  EXPECT_EQ(p["config"]["schedule"], "plain") << plain.out;
  EXPECT_EQ(p["config"].value("THREADS", 1), 1) << plain.out;
  Result ran = run("run " + gemm + " --config 'schedule=plain,MR=4,NR=16' --min-time 0.01 --min-runs 1");
  EXPECT_EQ(ran.code, 0) << ran.out;
  if (d["config"].value("THREADS", 1) > 1)
    expectError("run " + gemm + " --config 'schedule=plain,THREADS=2,MR=4,NR=16'", 2, "runs on one thread");
}

// A process held to one core (taskset, a container's cpuset) is a one-core machine to Tessera:
// the target says 1 unit and the README's runs work there. Before, the machine's online count
// (hardware_concurrency) was taken: "2 cores" under `taskset -c 0` on a 2-core host.
TEST(Cli, OneAllowedCoreIsOneCore) {
  if (std::system("command -v taskset >/dev/null 2>&1") != 0) GTEST_SKIP() << "no taskset";
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  int first = 0;
  while (first < CPU_SETSIZE && !CPU_ISSET(first, &set)) ++first;
  const std::string one = "taskset -c " + std::to_string(first);
  auto unitsOf = [](const Result& r) {
    auto j = nlohmann::json::parse(r.out.substr(std::min(r.out.find('{'), r.out.size())), nullptr, false);
    return j.is_object() && j["target"].is_object() ? j["target"].value("units", -1) : -1;
  };
  Result pinned = run("run --json gemm --m 64 --n 64 --k 64 --min-time 0.01 --min-runs 1", one);
  if (pinned.code != 0 && pinned.out.find("failed to set") != std::string::npos) GTEST_SKIP() << pinned.out;
  ASSERT_EQ(pinned.code, 0) << pinned.out;
  EXPECT_EQ(unitsOf(pinned), 1) << pinned.out;
  // The control: unpinned, the units are this process's allowed cores (2 or more on CI's hosts).
  Result free = run("run --json gemm --m 64 --n 64 --k 64 --min-time 0.01 --min-runs 1");
  ASSERT_EQ(free.code, 0) << free.out;
  EXPECT_EQ(unitsOf(free), CPU_COUNT(&set)) << free.out;
  // The README's two runs, at their written size, on the one core.
  Result dflt = run("run gemm --m 512 --n 512 --k 512 --min-time 0.01 --min-runs 1", one);
  EXPECT_EQ(dflt.code, 0) << dflt.out;
  EXPECT_NE(dflt.out.find("1 core"), std::string::npos) << dflt.out;
  Result plain = run("run gemm --m 512 --n 512 --k 512 --config 'schedule=plain,MR=4,NR=16' --min-time 0.01 --min-runs 1", one);
  EXPECT_EQ(plain.code, 0) << plain.out;
}

// Issue 48: the README's examples on many cores. TESSERA_CORES=16 sizes the plan for 16 cores on
// whatever machine runs the test (the threads then share its cores: correctness, not speed), so the
// code paths a many-core machine takes (THREADS above 2, the work split 16 ways) run here: the
// target says 16 units and the README's two `run gemm` commands and its tune work at their written
// sizes. A value that is not a core count is refused in one line with exit 2.
TEST(Cli, ManyCoresRunTheReadmesCommands) {
  const std::string many = "TESSERA_CORES=16";
  auto unitsOf = [](const Result& r) {
    auto j = nlohmann::json::parse(r.out.substr(std::min(r.out.find('{'), r.out.size())), nullptr, false);
    return j.is_object() && j["target"].is_object() ? j["target"].value("units", -1) : -1;
  };
  Result plan = run("run --json gemm --m 512 --n 512 --k 512 --min-time 0.01 --min-runs 1", many);
  ASSERT_EQ(plan.code, 0) << plan.out;
  EXPECT_EQ(unitsOf(plan), 16) << plan.out;
  auto j = nlohmann::json::parse(plan.out.substr(std::min(plan.out.find('{'), plan.out.size())), nullptr, false);
  ASSERT_TRUE(j.is_object()) << plan.out;
  EXPECT_GT(j["config"].is_object() ? j["config"].value("THREADS", 1) : 1, 2) << "the default stayed at <= 2 threads: "
                                                                              << plan.out;
  EXPECT_TRUE(j["check"].is_object() && j["check"].value("ok", false)) << plan.out;
  Result plain = run("run gemm --m 512 --n 512 --k 512 --config 'schedule=plain,MR=4,NR=16' --min-time 0.01 --min-runs 1",
                     many);
  EXPECT_EQ(plain.code, 0) << plain.out;
  Result tune = run("tune gemm --m 96 --n 80 --k 72 --trials 6 --min-time 0.005 --db " + testing::TempDir() +
                        "/many.db",
                    many);
  EXPECT_EQ(tune.code, 0) << tune.out;
  for (const char* bad : {"0", "lots"}) {
    Result r = run("run gemm --m 8 --n 8 --k 8", std::string("TESSERA_CORES=") + bad);
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find("is not a core count"), std::string::npos) << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << "one line: " << r.out;
  }
}

// `tessera ... | head`: a reader that stops reading is no error (it used to end with "cannot write
// the output: Broken pipe", exit 1); a write that fails otherwise still is (the negative control).
TEST(Cli, AReaderThatClosesThePipeIsNoError) {
  const std::string big = std::string(TESSERA_BIN) +
                          " compile gemm --m 256 --n 256 --k 256 --emit ir,payload,schedule,scheduled,llvm-dialect,llvm-ir,asm";
  // SIGPIPE ignored, as the commands that talk HTTP ignore it (`cache list`): the write fails with EPIPE.
  std::string script =
      "bash -c 'trap \"\" PIPE; set -o pipefail; " + big + " 2>" + testing::TempDir() + "/pipe.err | head -c 10 >/dev/null'";
  EXPECT_EQ(std::system(script.c_str()), 0);
  std::ifstream err(testing::TempDir() + "/pipe.err");
  std::string text((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.find("Broken pipe"), std::string::npos) << text;
  const std::string fullErr = testing::TempDir() + "/full.err";
  int st = std::system((std::string(TESSERA_BIN) + " compile gemm --m 256 --n 256 --k 256 --emit llvm-ir 2>" + fullErr +
                        " >/dev/full").c_str());
  EXPECT_EQ(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 1);
  std::ifstream ferr(fullErr);
  std::string ftext((std::istreambuf_iterator<char>(ferr)), std::istreambuf_iterator<char>());
  EXPECT_NE(ftext.find("cannot write the output"), std::string::npos) << ftext;
}
