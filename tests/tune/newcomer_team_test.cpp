// Tests what a newcomer meets with a shared cache (issue 48), end to end with a real `tessera serve`
// and worker on loopback: `workers --json` keeps every field the service has of a worker; `tune
// --cache` says in one line what it pushed and where; `compare ... key` takes every id `tune`
// prints (full and short key ids and workload hashes) through the shared cache from a machine whose
// store never saw the kernel.
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "tests/tune/team_util.h"

using namespace tessera::test;

TEST(NewcomerTeam, WorkersJsonKeepsEveryField) {
  Service s;
  auto w = s.startWorker(0);
  s.awaitWorkers(1);
  json fromService = s.get("/v1/workers");
  ASSERT_TRUE(fromService.is_object() && fromService["workers"].size() == 1) << fromService.dump();
  auto listed = runTessera({"workers", "--json"}, s.tuneEnv());
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  json cli = json::parse(listed.out, nullptr, false);
  ASSERT_TRUE(cli.is_array() && cli.size() == 1) << listed.out;
  std::set<std::string> want, got;
  for (const auto& [k, v] : fromService["workers"][0].items()) want.insert(k);
  for (const auto& [k, v] : cli[0].items()) got.insert(k);
  EXPECT_EQ(got, want);  // it printed 13 of the service's 19 fields before issue 48
  EXPECT_EQ(cli[0]["id"], fromService["workers"][0]["id"]);
  EXPECT_EQ(cli[0]["runtime_version"], fromService["workers"][0]["runtime_version"]);
  // The control: the table still lists the worker by its id.
  auto table = runTessera({"workers"}, s.tuneEnv());
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find(fromService["workers"][0]["id"].get<std::string>()), std::string::npos) << table.out;
}

TEST(NewcomerTeam, TunePushReportAndCompareByEveryId) {
  Service s;
  const std::vector<std::string> gemm = {"gemm", "--m", "24", "--n", "24", "--k", "24"};
  auto tuneArgs = [&](const std::string& db, std::vector<std::string> more) {
    std::vector<std::string> a = {"tune", "--threads", "1", "--trials", "2", "--min-time", "0.002", "--top-k", "1",
                                  "--db", db};
    a.insert(a.end(), more.begin(), more.end());
    a.insert(a.end(), gemm.begin(), gemm.end());
    return a;
  };
  // The push, in one line: how many records, to which service.
  auto tuned = runTessera(tuneArgs(s.dir.file("a.db"), {}), s.tuneEnv());
  ASSERT_EQ(tuned.exit_code, 0) << tuned.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(tuned.out, m, std::regex(R"(shared cache (\d+) records? pushed to (\S+))"))) << tuned.out;
  EXPECT_GT(std::stoi(m[1].str()), 0);
  EXPECT_EQ(m[2].str(), s.url);
  auto asJson = runTessera(tuneArgs(s.dir.file("a.db"), {"--force", "--json"}), s.tuneEnv());
  ASSERT_EQ(asJson.exit_code, 0) << asJson.err;
  json j = json::parse(asJson.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << asJson.out;
  EXPECT_GT(j["pushed"].value("records", 0), 0) << asJson.out;
  EXPECT_EQ(j["pushed"].value("to", ""), s.url);
  // The control: without a shared cache nothing is said to be pushed.
  auto alone = runTessera(tuneArgs(s.dir.file("alone.db"), {}));
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  EXPECT_EQ(alone.out.find("shared cache"), std::string::npos) << alone.out;

  // Another machine's empty store: every id the tune printed names the kernel through the cache.
  const std::string keyId = j.value("key_id", ""), workload = j.value("workload", "");
  ASSERT_EQ(keyId.size(), 64u);
  ASSERT_EQ(workload.size(), 64u);
  EXPECT_NE(tuned.out.find("key " + keyId.substr(0, 12)), std::string::npos) << "the short id tune prints: " << tuned.out;
  int n = 0;
  for (const std::string& id : {keyId, keyId.substr(0, 12), workload, workload.substr(0, 12)}) {
    const std::string db = s.dir.file("other" + std::to_string(n++) + ".db");
    auto cmp = runTessera({"compare", "--targets", "host", "--threads", "1", "--db", db, "key", id}, s.tuneEnv());
    EXPECT_EQ(cmp.exit_code, 0) << id << "\n" << cmp.out << cmp.err;
    // The kernel rebuilt from the cache's text (named by its workload) and its shared winner.
    EXPECT_NE(cmp.out.find("gemm_" + workload.substr(0, 8)), std::string::npos) << id << "\n" << cmp.out;
    EXPECT_NE(cmp.out.find("[shared cache]"), std::string::npos) << id << "\n" << cmp.out;
  }
  // The control: an id nothing has is still "not found" (5), naming the shared cache it asked.
  auto none = runTessera({"compare", "--targets", "host", "--db", s.dir.file("none.db"), "key", "0123456789ab"},
                         s.tuneEnv());
  EXPECT_EQ(none.exit_code, 5) << none.out << none.err;
  EXPECT_NE(none.err.find("shared cache"), std::string::npos) << none.err;
}
