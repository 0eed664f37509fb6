// Tests failover between two `tessera serve` replicas on one store, on both engines: one SQLite
// file (the same machine: SQLite's locks serialize their writes, and each replica's winners index
// follows the other's commits) and one PostgreSQL database (replicas that could be on any
// machines), with the real binaries on loopback: a replica killed with SIGKILL in the middle of a
// tune through workers costs nothing; the tuner and the workers go on through the other replica,
// every candidate is measured exactly once, and every result the tuner was given is in the store.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <set>
#include <thread>

#include "tests/cache_service/test_util.h"
#include "tests/tune/team_util.h"

namespace {

using nlohmann::json;
using tessera::cache::test::queryRows;
using tessera::test::Child;
using tessera::test::Service;
using Clock = std::chrono::steady_clock;

class Replicas : public ::testing::TestWithParam<tessera::cache::test::Engine> {};

TEST_P(Replicas, KillingOneOfTwoMidTuneLosesNoAcknowledgedWrite) {
  Service s({"--lease-seconds", "3", "--worker-ttl", "3"}, GetParam());
  s.addReplica();
  std::vector<std::unique_ptr<Child>> workers;
  for (int i = 0; i < 2; ++i) workers.push_back(s.startWorker(i));
  ASSERT_NO_FATAL_FAILURE(s.awaitWorkers(2));
  const std::string local = s.dir.file("tuner.db");
  Child tune({"tune", "--workers", "--trials", "12", "--batch", "4", "--min-time", "0.1", "--top-k", "2", "--seed", "4",
              "--db", local, "gemm", "--m", "64", "--n", "32", "--k", "48"},
             s.tuneEnv(), s.dir.file("tune.log"));
  // Kill the first replica once the tune has results from it (its first batch is done).
  const auto until = Clock::now() + std::chrono::seconds(90);
  int done_at_kill = 0;
  while (done_at_kill < 4 && Clock::now() < until && tune.wait(0) < 0) {
    done_at_kill = std::stoi(queryRows(s.db, "SELECT count(*) FROM job_items WHERE state = 'done'")[0][0]);
    if (done_at_kill < 4) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GE(done_at_kill, 4) << tune.log();
  s.serve->kill(SIGKILL);
  const int rc = tune.wait(240);
  ASSERT_EQ(rc, 0) << tune.log();
  EXPECT_NE(tune.log().find("measured on  2 live workers"), std::string::npos) << tune.log();

  // Every item done once, each candidate recorded once by the workers.
  EXPECT_EQ(queryRows(s.db, "SELECT count(*) FROM job_items WHERE state != 'done'")[0][0], "0");
  auto items = queryRows(s.db, "SELECT count(*) FROM job_items i JOIN jobs j ON j.id = i.job_id WHERE j.kind = 'measure'");
  auto recs = queryRows(s.db, "SELECT count(*), count(DISTINCT config) FROM records WHERE writer = 'box'");
  EXPECT_EQ(recs[0][0], items[0][0]);
  EXPECT_EQ(recs[0][1], recs[0][0]) << "a candidate was recorded twice";
  EXPECT_GE(std::stoi(items[0][0]), 12);
  // Most of the tune happened after the first replica died, through the second.
  EXPECT_GT(std::stoi(queryRows(s.db, "SELECT count(*) FROM job_items")[0][0]), done_at_kill + 4);
  // No acknowledged write is lost: every result the tuner got (its local store) is in the shared
  // store, and so is its winner (its own measurement of the workers' winner: the spot check),
  // pushed after the replica died.
  std::set<std::string> shared;
  for (const auto& r : queryRows(s.db, "SELECT config, remeasured FROM records")) shared.insert(r[0] + "/" + r[1]);
  size_t checked = 0;
  for (const auto& r : queryRows(local, "SELECT config, remeasured FROM records")) {
    EXPECT_TRUE(shared.count(r[0] + "/" + r[1])) << r[0] << " remeasured=" << r[1];
    ++checked;
  }
  EXPECT_GE(checked, 13u);
  EXPECT_EQ(queryRows(s.db, "SELECT count(*) FROM records WHERE writer = 'tuner'")[0][0], "1");
  // The surviving replica serves the winner.
  json winner = s.get("/v1/best/" + queryRows(s.db, "SELECT key_id FROM records LIMIT 1")[0][0], s.url2);
  EXPECT_TRUE(winner.is_object() && winner.contains("record")) << winner.dump();
}

INSTANTIATE_TEST_SUITE_P(Engines, Replicas, ::testing::ValuesIn(tessera::cache::test::builtEngines()),
                         [](const auto& info) { return std::string(tessera::cache::test::engineName(info.param)); });

}  // namespace
