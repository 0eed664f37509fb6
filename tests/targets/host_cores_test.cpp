// The cores a host plan is sized for (support/load.h): the cgroup CPU quota under both cgroup
// versions, read from a made-up tree (the machine running the tests decides nothing there), and
// TESSERA_CORES, which replaces what the machine says.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "support/load.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

struct Tree {
  fs::path root;
  Tree() {
    root = fs::path(testing::TempDir()) / ("cg_" + std::to_string(::getpid()) + "_" +
                                           testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root);
    fs::create_directories(root);
  }
  ~Tree() { fs::remove_all(root); }
  void put(const std::string& rel, const std::string& text) const {
    fs::create_directories((root / rel).parent_path());
    std::ofstream(root / rel) << text;
  }
  int limit() const { return cgroupCpuLimit((root / "sys").string(), (root / "self").string()); }
};

TEST(HostCores, CgroupV2QuotaIsTheTightestOfTheGroupAndItsParents) {
  Tree t;
  t.put("self", "0::/pod/box\n");
  EXPECT_EQ(t.limit(), 0) << "no cpu.max anywhere: no quota";
  t.put("sys/pod/box/cpu.max", "max 100000\n");
  EXPECT_EQ(t.limit(), 0) << "'max' is no quota";
  t.put("sys/pod/box/cpu.max", "250000 100000\n");
  EXPECT_EQ(t.limit(), 3) << "2.5 CPUs of time: three cores' worth of threads, rounded up";
  t.put("sys/pod/cpu.max", "100000 100000\n");
  EXPECT_EQ(t.limit(), 1) << "the parent's quota binds the child";
  t.put("sys/cpu.max", "garbage\n");
  EXPECT_EQ(t.limit(), 1) << "an unreadable file is no quota, not an error";
}

TEST(HostCores, CgroupV1QuotaReadsTheCpuController) {
  Tree t;
  t.put("self", "5:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n");
  t.put("sys/cpu/docker/abc/cpu.cfs_quota_us", "-1\n");
  t.put("sys/cpu/docker/abc/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(t.limit(), 0) << "-1 is no quota";
  t.put("sys/cpu/docker/abc/cpu.cfs_quota_us", "150000\n");
  EXPECT_EQ(t.limit(), 2);
  // The control: the same numbers under v2's layout are not read for a v1 process.
  t.put("sys/docker/abc/cpu.max", "50000 100000\n");
  EXPECT_EQ(t.limit(), 2);
}

TEST(HostCores, TesseraCoresReplacesWhatTheMachineSays) {
  const int machine = detectedCores();
  ASSERT_GE(machine, 1);
  ::setenv("TESSERA_CORES", "37", 1);
  EXPECT_EQ(usableCores(), 37);
  EXPECT_EQ(readLoad().cores, 37);
  for (const char* bad : {"0", "-2", "3x", "4097", "many"}) {
    ::setenv("TESSERA_CORES", bad, 1);
    std::string why;
    EXPECT_FALSE(coresOverride(&why).has_value()) << bad;
    EXPECT_NE(why.find("is not a core count"), std::string::npos) << bad << ": " << why;
    EXPECT_EQ(usableCores(), machine) << "a bad value is not a core count: " << bad;
  }
  ::unsetenv("TESSERA_CORES");
  EXPECT_FALSE(coresOverride().has_value());
  EXPECT_EQ(usableCores(), machine);
}

}  // namespace
}  // namespace tessera
