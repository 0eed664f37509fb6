// Tests `tessera report` as a user runs it: a file with every record of the chosen kernels and
// nothing to fetch, keys chosen by id or prefix, and one clear line with exit 2 for a missing or
// empty store, a key that names nothing or too little, and a file it cannot write.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "store/store.h"

namespace {

using namespace tessera::cache;

struct Result {
  int code = -1;
  std::string out;
};

Result run(const std::string& args) {
  Result r;
  FILE* p = popen(("timeout 60 " + std::string(TESSERA_BIN) + " " + args + " 2>&1").c_str(), "r");
  std::array<char, 4096> buf{};
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

std::string dir() {
  std::string d = ::testing::TempDir() + "report-XXXXXX";
  EXPECT_NE(mkdtemp(d.data()), nullptr);
  return d;
}

Record record(int64_t n, double median_us, const std::string& host) {
  Record r;
  r.key = {"gemm", "00c0ffee00", {n, n, n}, "f32", "row", "host", "x86-64-v4", 2};
  r.provenance = {"0.1.0", "22", "", "Test CPU", host, "tester", "2025-01-01T00:00:00Z"};
  r.config = "{\"MC\":" + std::to_string(int(median_us)) + "}";
  r.n = 10;
  r.median_us = r.p20_us = r.p80_us = median_us;
  r.gflops = 2.0 * n * n * n / median_us / 1e3;
  r.trials = 1;
  EXPECT_TRUE(finalizeRecord(r).ok());
  return r;
}

void expectCleanError(const Result& r, const std::string& needle) {
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(needle), std::string::npos) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
}

TEST(Report, WritesTheChosenKernelsIntoOneFile) {
  const std::string d = dir(), db = d + "/t.db", out = d + "/r.html";
  {
    auto s = openSqliteStore(db);
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*s)->put(std::vector<Record>{record(64, 10, "a"), record(64, 12, "b"), record(128, 50, "</script><b>x")}).ok());
  }
  Result r = run("report --db " + db + " -o " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("2 kernels, 3 records"), std::string::npos) << r.out;
  std::ifstream f(out);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string html = ss.str();
  EXPECT_FALSE(std::regex_search(html, std::regex(R"(<(script|link|img|iframe)[^>]*\s(src|href)=)")));
  EXPECT_EQ(html.find("</script><b>x"), std::string::npos);  // inside the data block, escaped
  EXPECT_NE(html.find("\\u003c/script\\u003e\\u003cb\\u003ex"), std::string::npos);
  // One kernel by a prefix of its key_id.
  const std::string key = keyIdOf(record(128, 50, "").key);
  Result one = run("report --db " + db + " --key " + key.substr(0, 8) + " -o " + out);
  ASSERT_EQ(one.code, 0) << one.out;
  EXPECT_NE(one.out.find("1 kernel, 1 record,"), std::string::npos) << one.out;
}

TEST(Report, RefusesWhatItCannotReport) {
  const std::string d = dir();
  expectCleanError(run("report --db " + d + "/missing.db -o " + d + "/r.html"), "no store at");
  {
    auto s = openSqliteStore(d + "/empty.db");
    ASSERT_TRUE(s.ok());
  }
  expectCleanError(run("report --db " + d + "/empty.db -o " + d + "/r.html"), "holds no kernels");
  {
    auto s = openSqliteStore(d + "/one.db");
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*s)->putOne(record(64, 10, "a")).ok());
  }
  expectCleanError(run("report --db " + d + "/one.db --key abc -o " + d + "/r.html"), "at least 6");
  expectCleanError(run("report --db " + d + "/one.db --key 'a<b>cdef' -o " + d + "/r.html"), "expected a key_id");
  expectCleanError(run("report --db " + d + "/one.db --key " + std::string(64, 'f') + " -o " + d + "/r.html"),
                   "no kernel in the store");
  expectCleanError(run("report --db " + d + "/one.db -o " + d + "/no/such/dir/r.html"), "cannot write");
  EXPECT_NE(run("report --db " + d + "/one.db").code, 0);  // -o is required
}

}  // namespace
