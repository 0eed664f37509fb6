// Tests the fail-open client: a down or slow service is a quick miss with a warning (never an
// error), answers map to hit/nearest/miss, and the local outbox reaches the service on the next
// run once it is back.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "client/client.h"
#include "tests/cache_service/test_util.h"

namespace tessera::cache {
namespace {

using Clock = std::chrono::steady_clock;
using test::makeRecord;

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A listening socket: with accept_never it takes connections into the backlog and never answers.
struct Listener {
  int fd = -1, port = 0;
  Listener() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd, 16);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~Listener() { ::close(fd); }
};

int deadPort() {
  Listener l;
  return l.port;  // closed when l goes away: nothing listens there
}

TEST(Client, DownServiceIsAQuickMissWithWarning) {
  CacheClient c({.base_url = "http://127.0.0.1:" + std::to_string(deadPort()), .token = "t"});
  auto t0 = Clock::now();
  LookupResult r = c.best(makeRecord({}).key);
  EXPECT_LT(secondsSince(t0), 1.5);
  EXPECT_EQ(r.kind, LookupResult::Kind::Miss);
  EXPECT_NE(r.warning.find("continuing without it"), std::string::npos) << r.warning;
  // Within the backoff the next call does not even try.
  t0 = Clock::now();
  LookupResult again = c.bestById(makeRecord({}).key_id);
  EXPECT_LT(secondsSince(t0), 0.05);
  EXPECT_NE(again.warning.find("skipped"), std::string::npos) << again.warning;
  PushResult p = c.put(std::vector<Record>{makeRecord({})});
  EXPECT_FALSE(p.ok);
  EXPECT_FALSE(p.warning.empty());
  EXPECT_FALSE(c.status().ok());
}

TEST(Client, SlowServiceIsAMissWithinTheTimeout) {
  Listener silent;  // accepts (in the backlog) and never answers
  CacheClient c({.base_url = "http://127.0.0.1:" + std::to_string(silent.port), .timeout_s = 0.3, .write_timeout_s = 0.3});
  auto t0 = Clock::now();
  LookupResult r = c.best(makeRecord({}).key);
  const double took = secondsSince(t0);
  EXPECT_EQ(r.kind, LookupResult::Kind::Miss);
  EXPECT_FALSE(r.warning.empty());
  EXPECT_GE(took, 0.25);
  EXPECT_LT(took, 1.5);
}

TEST(Client, GarbageAnswersAreMissesNotCrashes) {
  Listener l;
  const std::string valid = encodeRecord(makeRecord({}));
  const std::vector<std::string> bodies = {
      R"({"match":5})", "not json", R"({"match":"exact","record":{"key":1}})",
      R"({"match":"exact","stale":"yes","record":)" + valid + "}",
      R"({"match":"nearest","candidates":[{"distance":"far","record":{}}]})", R"([1,2,3])"};
  std::thread fake([&] {
    for (const auto& body : bodies) {
      int c = ::accept(l.fd, nullptr, nullptr);
      if (c < 0) return;
      char buf[4096];
      (void)!::recv(c, buf, sizeof buf, 0);
      std::string resp = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
                         std::to_string(body.size()) + "\r\n\r\n" + body;
      (void)!::send(c, resp.data(), resp.size(), MSG_NOSIGNAL);
      ::close(c);
    }
  });
  CacheClient c({.base_url = "http://127.0.0.1:" + std::to_string(l.port), .backoff_s = 0});
  for (size_t i = 0; i < bodies.size(); ++i) {
    LookupResult r = c.bestById(makeRecord({}).key_id);
    EXPECT_EQ(r.kind, LookupResult::Kind::Miss) << bodies[i];
    EXPECT_FALSE(r.warning.empty()) << bodies[i];
  }
  fake.join();
}

TEST(Client, NoUrlMeansSilentMisses) {
  CacheClient c({});
  EXPECT_FALSE(c.enabled());
  LookupResult r = c.best(makeRecord({}).key);
  EXPECT_EQ(r.kind, LookupResult::Kind::Miss);
  EXPECT_TRUE(r.warning.empty());
  EXPECT_FALSE(CacheClient({.base_url = "ftp://x"}).best(makeRecord({}).key).warning.empty());
}

TEST(Client, HitNearestAndMissAgainstTheRealServer) {
  test::ServerFixture f;
  Record r = makeRecord({.key = 0, .median_us = 25, .llvm_version = "22.1.0"});
  CacheClient writer({.base_url = f.url(), .token = f.write_token});
  PushResult put = writer.put(std::vector<Record>{r, makeRecord({.key = 0, .median_us = 20})});
  ASSERT_TRUE(put.ok) << put.warning;
  ASSERT_EQ(put.results.size(), 2u);
  EXPECT_EQ(put.results[0].outcome, PutOutcome::Inserted);
  EXPECT_EQ(put.results[1].outcome, PutOutcome::Improved);

  CacheClient c({.base_url = f.url() + "/", .token = f.read_token});
  Provenance mine;
  mine.llvm_version = "23.0.0";
  LookupResult hit = c.best(r.key, mine);
  ASSERT_EQ(hit.kind, LookupResult::Kind::Hit) << hit.warning;
  ASSERT_TRUE(hit.record);
  EXPECT_EQ(hit.record->median_us, 20);
  EXPECT_EQ(hit.record->id, put.results[1].id);
  EXPECT_TRUE(hit.stale);
  EXPECT_EQ(hit.stale_reasons, std::vector<std::string>{"llvm_version"});
  EXPECT_EQ(c.bestById(r.key_id).kind, LookupResult::Kind::Hit);

  HardKey other = r.key;
  other.shape = {4, 4, 19};
  other.workload = "feedface";
  LookupResult near = c.best(other);
  ASSERT_EQ(near.kind, LookupResult::Kind::Nearest) << near.warning;
  ASSERT_EQ(near.nearest.size(), 1u);
  EXPECT_NEAR(near.nearest[0].distance, std::log(19.0 / 16.0), 1e-12);
  EXPECT_EQ(near.nearest[0].record.config, r.config);

  LookupResult exact_only = c.best(other, {}, /*allow_nearest=*/false);
  EXPECT_EQ(exact_only.kind, LookupResult::Kind::Miss);
  EXPECT_TRUE(exact_only.warning.empty());  // a plain miss is not a problem
  EXPECT_FALSE(c.bestById("nope").warning.empty());

  CacheClient wrong({.base_url = f.url(), .token = "bad"});
  LookupResult denied = wrong.best(r.key);
  EXPECT_EQ(denied.kind, LookupResult::Kind::Miss);
  EXPECT_NE(denied.warning.find("401"), std::string::npos) << denied.warning;
  PushResult refused = CacheClient({.base_url = f.url(), .token = f.read_token}).put(std::vector<Record>{r});
  EXPECT_FALSE(refused.ok);
  EXPECT_EQ(refused.http_status, 403);

  auto st = c.status();
  ASSERT_TRUE(st.ok());
  EXPECT_NE(st->find("\"records\":2"), std::string::npos);
  auto page = c.exportPage(0, 1);
  ASSERT_TRUE(page.ok());
  EXPECT_TRUE(page->more);
  EXPECT_EQ(std::count(page->jsonl.begin(), page->jsonl.end(), '\n'), 1);
  EXPECT_FALSE(c.importLines(page->jsonl, false).ok());  // read token cannot import
  auto imported = writer.importLines(page->jsonl, false);
  ASSERT_TRUE(imported.ok());
  EXPECT_NE(imported->find("\"duplicates\":1"), std::string::npos);
}

TEST(Client, OutboxIsPushedOnTheNextRun) {
  test::TempDir local_dir;
  const std::string local_path = local_dir.file("tessera.db");
  std::vector<Record> tuned;
  for (int i = 0; i < 30; ++i) tuned.push_back(makeRecord({.key = i % 6, .median_us = 10.0 + i}));
  {
    auto local = openSqliteStore(local_path);
    ASSERT_TRUE(local.ok());
    ASSERT_TRUE((*local)->put(tuned, {.outbox = true}).ok());
    // First run: the service is down. Tuning is unaffected; the records wait.
    CacheClient down({.base_url = "http://127.0.0.1:" + std::to_string(deadPort()), .token = "x"});
    OutboxReport rep = pushOutbox(**local, down);
    EXPECT_EQ(rep.pushed, 0u);
    EXPECT_EQ(rep.remaining, 30u);
    EXPECT_FALSE(rep.warning.empty());
  }
  // One record the service will refuse (corrupted locally), to show it cannot block the rest.
  {
    sqlite3* db = nullptr;
    sqlite3_open(local_path.c_str(), &db);
    sqlite3_exec(db, "UPDATE records SET created_at = 'bogus' WHERE id = 7", nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
  test::ServerFixture f;
  auto local = openSqliteStore(local_path);
  ASSERT_TRUE(local.ok());
  CacheClient up({.base_url = f.url(), .token = f.write_token});
  OutboxReport rep = pushOutbox(**local, up);
  EXPECT_EQ(rep.pushed, 29u);
  EXPECT_EQ(rep.rejected, 1u);
  EXPECT_EQ(rep.remaining, 0u);
  EXPECT_NE(rep.warning.find("created_at"), std::string::npos) << rep.warning;
  for (int k = 0; k < 6; ++k) {
    LookupResult hit = up.bestById(tuned[k].key_id);
    ASSERT_EQ(hit.kind, LookupResult::Kind::Hit);
    EXPECT_EQ(hit.record->median_us, 10.0 + k);
  }
  EXPECT_EQ(test::queryRows(f.db, "SELECT count(*) FROM records")[0][0], "29");
  OutboxReport again = pushOutbox(**local, up);
  EXPECT_EQ(again.pushed, 0u);
  EXPECT_TRUE(again.warning.empty());
}

}  // namespace
}  // namespace tessera::cache
