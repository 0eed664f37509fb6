// Tests concurrent submission over real HTTP: 16 client threads x 1000 records on overlapping
// keys. Afterwards every acknowledged record is stored under its acknowledged id, each key's
// winner (from the server and from the file) is its best record, and the file passes
// PRAGMA integrity_check.
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "tests/cache_service/test_util.h"

namespace tessera::cache {
namespace {

using nlohmann::json;

constexpr int kThreads = 16, kPerThread = 1000, kBatch = 50, kKeys = 250;

struct Ack {
  std::string fingerprint;
  int64_t id;
  std::string outcome;
};

TEST(Concurrency, SixteenWritersLoseNothingAndWinnersAreBest) {
  ServerOptions o = test::testOptions();
  o.synchronous_full = true;  // the production setting
  o.http.threads = kThreads + 4;
  test::ServerFixture f(o);

  // Medians are a permutation of 0..15999 (7919 is prime to 16000): all distinct, so "best" is
  // unambiguous, and spread so every thread wins some keys.
  auto recordFor = [](int t, int i) {
    const int g = t * kPerThread + i;
    test::RecordSpec spec{.key = g % kKeys, .median_us = 10.0 + (g * 7919) % (kThreads * kPerThread)};
    if (g % 7 == 3) spec.status = RecordStatus::CompileError;
    spec.config = "{\"MC\":" + std::to_string(t) + ",\"NC\":" + std::to_string(i) + "}";
    return test::makeRecord(spec);
  };

  std::mutex mu;
  std::vector<Ack> acks;
  std::vector<std::string> failures;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto conn = openHttpConnection(f.url(), 2.0);
      if (!conn.ok()) return;
      const HeaderList auth = {{"Authorization", "Bearer " + f.write_token}};
      for (int start = 0; start < kPerThread; start += kBatch) {
        std::vector<Record> batch;
        for (int i = start; i < start + kBatch; ++i) batch.push_back(recordFor(t, i));
        auto reply = (*conn)->send("POST", "/v1/records", auth, test::recordsBody(batch), "application/json", 30.0);
        std::lock_guard<std::mutex> g(mu);
        if (!reply.ok() || reply->status != 200) {
          failures.push_back(reply.ok() ? reply->body : reply.error().message);
          continue;
        }
        auto j = json::parse(reply->body);
        for (size_t k = 0; k < batch.size(); ++k)
          acks.push_back({fingerprint(batch[k]), j["results"][k]["id"].get<int64_t>(),
                          j["results"][k]["outcome"].get<std::string>()});
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(failures.empty()) << failures.size() << " failed batches, first: " << failures.front();
  ASSERT_EQ(acks.size(), static_cast<size_t>(kThreads * kPerThread));

  // Every acknowledged record is in the file, under the id it was acknowledged with.
  std::map<std::string, int64_t> stored;
  for (const auto& row : test::queryRows(f.db, "SELECT fingerprint, id FROM records"))
    stored[row[0]] = std::stoll(row[1]);
  EXPECT_EQ(stored.size(), acks.size());
  size_t inserted = 0;
  for (const Ack& a : acks) {
    auto it = stored.find(a.fingerprint);
    ASSERT_NE(it, stored.end());
    EXPECT_EQ(it->second, a.id);
    inserted += a.outcome == "inserted";
  }
  EXPECT_EQ(inserted, static_cast<size_t>(kKeys));  // exactly one first winner per key

  // Each key's winner is its best ok record, both as served and as stored.
  std::map<std::string, double> expected;
  for (int t = 0; t < kThreads; ++t)
    for (int i = 0; i < kPerThread; ++i) {
      Record r = recordFor(t, i);
      if (r.status != RecordStatus::Ok) continue;
      auto [it, fresh] = expected.emplace(r.key_id, r.median_us);
      if (!fresh) it->second = std::min(it->second, r.median_us);
    }
  ASSERT_EQ(expected.size(), static_cast<size_t>(kKeys));
  for (const auto& [key_id, best] : expected) {
    test::Reply r = f.get("/v1/best/" + key_id, f.read_token);
    ASSERT_EQ(r.status, 200);
    EXPECT_EQ(json::parse(r.body)["record"]["result"]["median_us"].get<double>(), best) << key_id;
  }
  for (const auto& row : test::queryRows(f.db, "SELECT k.key_id, r.median_us FROM keys k JOIN records r ON r.id = k.winner_id"))
    EXPECT_EQ(std::stod(row[1]), expected.at(row[0]));
  EXPECT_EQ(test::queryRows(f.db, "SELECT count(*) FROM keys WHERE winner_id IS NOT NULL")[0][0], std::to_string(kKeys));
  EXPECT_EQ(test::integrityCheck(f.db), "ok");
}

}  // namespace
}  // namespace tessera::cache
