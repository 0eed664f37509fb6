// Tests durability of the real `tessera serve` process on either store engine: it is killed with
// SIGKILL repeatedly while clients write. After every restart the store opens (a SQLite file also
// passes PRAGMA integrity_check), holds every write the server acknowledged, and each key's winner
// is still its best record.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "store/tokens.h"
#include "tests/cache_service/process_util.h"
#include "tests/cache_service/test_util.h"

namespace tessera::cache {
namespace {

using nlohmann::json;

void expectConsistent(const std::string& db, const std::map<std::string, int64_t>& acked, test::Engine engine) {
  if (engine == test::Engine::Sqlite) EXPECT_EQ(test::integrityCheck(db), "ok");
  std::map<std::string, int64_t> stored;
  for (const auto& row : test::queryRows(db, "SELECT fingerprint, id FROM records")) stored[row[0]] = std::stoll(row[1]);
  size_t missing = 0;
  for (const auto& [fp, id] : acked) {
    auto it = stored.find(fp);
    if (it == stored.end() || it->second != id) ++missing;
  }
  EXPECT_EQ(missing, 0u) << "of " << acked.size() << " acknowledged records";
  // Winners agree with the records that are there.
  auto bad = test::queryRows(db,
                             "SELECT k.key_id FROM keys k LEFT JOIN records w ON w.id = k.winner_id "
                             "WHERE k.winner_id IS NOT NULL AND (w.id IS NULL OR w.status != 'ok' OR "
                             "w.median_us != (SELECT min(median_us) FROM records r WHERE r.key_id = k.key_id "
                             "AND r.status = 'ok'))");
  EXPECT_TRUE(bad.empty()) << bad.size() << " keys with a wrong winner";
  auto orphan = test::queryRows(db,
                                "SELECT count(*) FROM keys k WHERE k.winner_id IS NULL AND EXISTS "
                                "(SELECT 1 FROM records r WHERE r.key_id = k.key_id AND r.status = 'ok')");
  EXPECT_EQ(orphan[0][0], "0");
}

class Durability : public ::testing::TestWithParam<test::Engine> {};

TEST_P(Durability, AcknowledgedWritesSurviveRepeatedSigkill) {
  const test::Engine engine = GetParam();
  test::TempDir dir;
  std::unique_ptr<test::PgDatabase> pg;
  if (engine == test::Engine::Postgres) pg = std::make_unique<test::PgDatabase>();
  const std::string db = pg ? pg->url() : dir.file("durable.db");
  std::string token;
  {
    auto tokens = TokenStore::open(db);
    ASSERT_TRUE(tokens.ok());
    token = *(*tokens)->add("writer", Scope::Write);
  }
  std::mutex mu;
  std::map<std::string, int64_t> acked;
  std::atomic<int> counter{0};
  std::mt19937 rng(7);
  constexpr int kCycles = 6, kWriters = 4;
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    test::ServeProcess srv(db, dir.path(), {"--sync", "full", "--threads", "16"});
    if (cycle > 0) expectConsistent(db, acked, engine);  // the restart opened what the kill left behind

    std::atomic<bool> stop{false};
    std::vector<std::thread> writers;
    for (int w = 0; w < kWriters; ++w) {
      writers.emplace_back([&, w] {
        auto conn = openHttpConnection("http://127.0.0.1:" + std::to_string(srv.port()), 1.0);
        if (!conn.ok()) return;
        const HeaderList auth = {{"Authorization", "Bearer " + token}};
        while (!stop) {
          std::vector<Record> batch;
          for (int i = 0, n = 1 + counter % 5; i < n; ++i) {
            const int c = counter++;
            test::RecordSpec spec{.key = c % 40, .median_us = 1.0 + (c * 7919) % 100003};
            if (c % 8 == 0) spec.status = RecordStatus::Timeout;
            spec.config = "{\"KC\":" + std::to_string(c % 65536) + ",\"MC\":" + std::to_string(w) + ",\"NC\":" +
                          std::to_string(c / 65536) + "}";
            batch.push_back(test::makeRecord(spec));
          }
          auto reply = (*conn)->send("POST", "/v1/records", auth, test::recordsBody(batch), "application/json", 2.0);
          if (!reply.ok() || reply->status != 200) {
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
            continue;  // not acknowledged: no promise was made
          }
          auto j = json::parse(reply->body);
          std::lock_guard<std::mutex> g(mu);
          for (size_t k = 0; k < batch.size(); ++k) acked[fingerprint(batch[k])] = j["results"][k]["id"].get<int64_t>();
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(150, 450)(rng)));
    srv.kill(SIGKILL);  // mid-write: requests are in flight
    stop = true;
    for (auto& t : writers) t.join();
    ASSERT_TRUE(WIFSIGNALED(srv.exitStatus()) && WTERMSIG(srv.exitStatus()) == SIGKILL);
  }
  EXPECT_GT(acked.size(), 100u);
  expectConsistent(db, acked, engine);

  // A final restart serves the same winners the file holds.
  test::ServeProcess srv(db, dir.path(), {"--allow-anonymous-reads"});
  auto winners = test::queryRows(db, "SELECT k.key_id, r.median_us FROM keys k JOIN records r ON r.id = k.winner_id");
  ASSERT_FALSE(winners.empty());
  auto conn = openHttpConnection("http://127.0.0.1:" + std::to_string(srv.port()), 1.0);
  for (const auto& row : winners) {
    auto r = (*conn)->send("GET", "/v1/best/" + row[0], {}, "", "", 2.0);
    ASSERT_TRUE(r.ok() && r->status == 200);
    EXPECT_EQ(json::parse(r->body)["record"]["result"]["median_us"].get<double>(), std::stod(row[1]));
  }
  srv.kill(SIGTERM);
  EXPECT_TRUE(WIFEXITED(srv.exitStatus()) && WEXITSTATUS(srv.exitStatus()) == 0) << srv.log();
}

INSTANTIATE_TEST_SUITE_P(Engines, Durability, ::testing::ValuesIn(test::builtEngines()),
                         [](const auto& info) { return std::string(test::engineName(info.param)); });

}  // namespace
}  // namespace tessera::cache
