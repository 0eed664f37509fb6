// Tests what the PostgreSQL engine adds to the store rules (store_test.cpp and jobs_test.cpp run
// those on it): several stores on one database (replicas) give the same answers at once; record
// ids commit in id order under concurrent writers on several replicas, so an export cursor never
// skips a record; concurrent leases never hand one item to two workers; foreign, newer and
// unreachable databases are clear errors that never print the password; and a database that
// goes away mid-service turns into 503s, not a crash, and a restarted server is picked up again.
// Runs on the tests' throw-away server.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <set>
#include <thread>

#include "store/engine.h"
#include "store/jobs.h"
#include "service/server.h"
#include "store/tokens.h"
#include "tests/cache_service/test_util.h"

namespace tessera::cache {
namespace {

using test::makeRecord;
using test::PgDatabase;

std::unique_ptr<RecordStore> openPg(const std::string& url, int connections = 8) {
  EngineOptions o;
  o.max_connections = connections;
  auto s = openStore(url, o);
  EXPECT_TRUE(s.ok()) << s.error().message;
  if (!s.ok()) throw std::runtime_error(s.error().message);
  return std::move(*s);
}

void execSql(const std::string& url, const std::string& sql) {
  pqxx::connection c(url);
  pqxx::nontransaction t(c);
  t.exec(sql);
}

TEST(PgStore, ReplicasOnOneDatabaseAnswerAlikeAtOnce) {
  PgDatabase db;
  auto a = openPg(db.url()), b = openPg(db.url());
  Record slow = makeRecord({.key = 1, .median_us = 50});
  ASSERT_TRUE(a->putOne(slow).ok());
  // What one replica acknowledged, the other serves on the next request (no cache to expire).
  auto seen = b->best(slow.key_id);
  ASSERT_TRUE(seen.ok() && *seen);
  EXPECT_EQ((*seen)->record.median_us, 50);
  auto fast = b->putOne(makeRecord({.key = 1, .median_us = 20, .host = "other"}));
  ASSERT_TRUE(fast.ok());
  EXPECT_EQ(fast->outcome, PutOutcome::Improved);
  EXPECT_EQ((*a->best(slow.key_id))->record.id, fast->id);
  // An admin action on one replica recomputes the winner that the other serves.
  auto n = a->administer({.ids = {fast->id}}, AdminAction::Quarantine);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1);
  EXPECT_EQ((*b->best(slow.key_id))->record.median_us, 50);
  // The same record through both replicas is stored once.
  auto again = b->putOne(slow);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->duplicate);
  EXPECT_EQ(a->stats()->records, 2);
}

// Writers on two replicas (four threads each) while a reader follows the export cursor the way a
// mirror does (ids after the last one it saw). Ids are taken in commit order, so the cursor never
// passes a record that commits later with a smaller id; every winner is the fastest record.
TEST(PgStore, ConcurrentReplicasLoseNothingAndTheExportCursorSkipsNothing) {
  PgDatabase db;
  auto a = openPg(db.url()), b = openPg(db.url());
  constexpr int kThreads = 8, kEach = 40, kKeys = 7;
  std::atomic<int> failures{0}, writing{kThreads};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      RecordStore& s = t % 2 ? *a : *b;
      for (int i = 0; i < kEach; ++i) {
        // Batches of two records of different keys: the transactions overlap on key rows too.
        std::vector<Record> batch = {makeRecord({.key = (t + i) % kKeys, .median_us = 1.0 + t * 1000 + i}),
                                     makeRecord({.key = (t + i + 3) % kKeys, .median_us = 2.0 + t * 1000 + i})};
        if (!s.put(batch).ok()) ++failures;
      }
      --writing;
    });
  auto reader = openPg(db.url(), 2);
  std::set<int64_t> exported;
  int64_t cursor = 0;
  bool ordered = true;
  for (bool last = false; !last;) {
    last = writing.load() == 0;  // one more pass after the writers are done
    for (;;) {
      auto page = reader->exportSince(cursor, 25);
      ASSERT_TRUE(page.ok()) << page.error().message;
      if (page->empty()) break;
      for (const Record& r : *page) {
        ordered = ordered && r.id > cursor;
        exported.insert(r.id);
        cursor = r.id;
      }
    }
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_TRUE(ordered);
  auto stats = reader->stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->records, kThreads * kEach * 2);
  EXPECT_EQ(static_cast<int64_t>(exported.size()), stats->records) << "the export cursor skipped records";
  std::map<std::string, double> fastest;
  auto all = reader->exportSince(0, 100000);
  ASSERT_TRUE(all.ok());
  for (const Record& r : *all) {
    auto [it, fresh] = fastest.emplace(r.key_id, r.median_us);
    if (!fresh) it->second = std::min(it->second, r.median_us);
  }
  EXPECT_EQ(static_cast<int>(fastest.size()), kKeys);
  for (const auto& [key, median] : fastest) EXPECT_EQ((*reader->best(key))->record.median_us, median);
}

// Eight workers on two replicas lease and report one job's 120 items at once: no item is ever in
// two workers' hands, each is recorded exactly once, and the job ends done.
TEST(PgStore, ConcurrentLeasesNeverShareAnItem) {
  PgDatabase db;
  auto a = openPg(db.url()), b = openPg(db.url());
  QueuePolicy p;
  p.lease_s = 600;  // no lease expires during the test: any item seen twice was handed out twice
  JobSpec job;
  job.id = std::string(32, 'e');
  job.submitter = "tuner";
  job.key = test::keyFor(0);
  job.key_id = keyIdOf(job.key);
  job.kernel = "kernel text";
  job.settings = "{}";
  constexpr int kItems = 120;
  for (int i = 0; i < kItems; ++i) job.items.push_back("{\"MC\":" + std::to_string(i + 1) + "}");
  ASSERT_TRUE(a->jobs()->submit(job, p).ok());
  std::mutex mu;
  std::map<int64_t, int> leased_times;
  std::atomic<int> recorded{0}, errors{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < 8; ++w)
    workers.emplace_back([&, w] {
      JobQueue& q = *(w % 2 ? a : b)->jobs();
      WorkerInfo info;
      info.id = std::string(31, 'a') + static_cast<char>('0' + w);
      info.token = "box";
      info.target = job.key.target;
      info.arch = job.key.arch;
      info.units = job.key.units;
      if (!q.registerWorker(info, {}).ok()) ++errors;
      for (int round = 0; round < 200; ++round) {
        auto lease = q.lease(info.id, "box", 3, p);
        if (!lease.ok()) {
          ++errors;
          continue;
        }
        if (lease->items.empty()) break;
        for (const LeasedItem& it : lease->items) {
          {
            std::lock_guard<std::mutex> g(mu);
            ++leased_times[it.item];
          }
          Record r = makeRecord({.key = 0, .median_us = 10.0 + static_cast<double>(it.item), .config = it.payload});
          auto rep = q.report({info.id, "box", it.job_id, it.item, "{\"ok\":true}", r}, {.writer = "box"});
          if (!rep.ok()) ++errors;
          else if (rep->outcome == ReportOutcome::Recorded) ++recorded;
        }
      }
    });
  for (auto& t : workers) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(recorded.load(), kItems);
  EXPECT_EQ(static_cast<int>(leased_times.size()), kItems);
  for (const auto& [item, times] : leased_times) EXPECT_EQ(times, 1) << "item " << item << " was leased twice";
  auto view = a->jobs()->job(job.id, p);
  ASSERT_TRUE(view.ok() && view->has_value());
  EXPECT_EQ((*view)->state, "done");
  EXPECT_EQ(b->stats()->records, kItems);
}

TEST(PgStore, RefusesForeignNewerAndUnreachableDatabases) {
  {
    PgDatabase db;
    execSql(db.url(), "CREATE TABLE payroll(id int)");
    auto s = openStore(db.url());
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.error().message.find("not a Tessera database"), std::string::npos) << s.error().message;
  }
  {
    PgDatabase db;
    openPg(db.url());
    execSql(db.url(), "UPDATE tessera_meta SET value = '99' WHERE name = 'schema_version'");
    auto s = openStore(db.url());
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.error().message.find("newer than this tessera"), std::string::npos) << s.error().message;
    auto t = TokenStore::open(db.url());
    EXPECT_FALSE(t.ok());
  }
  {
    PgDatabase db;
    openPg(db.url());
    execSql(db.url(), "UPDATE tessera_meta SET value = 'other' WHERE name = 'application'");
    EXPECT_FALSE(openStore(db.url()).ok());
  }
  // Nothing listens on port 1: a clear error, and the password is never in it.
  auto s = openStore("postgresql://tessera:sekrit-pw@127.0.0.1:1/none?connect_timeout=2");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("cannot connect to PostgreSQL"), std::string::npos) << s.error().message;
  EXPECT_EQ(s.error().message.find("sekrit-pw"), std::string::npos) << s.error().message;
  EXPECT_EQ(redactLocation("postgresql://u:sekrit-pw@h:5/d?password=x2&a=b"), "postgresql://u:***@h:5/d?password=***&a=b");
}

TEST(PgStore, BackupNamesPostgresOwnTools) {
  PgDatabase db;
  auto s = openPg(db.url());
  Status b = s->backup("/tmp/never-written.db");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("pg_dump"), std::string::npos);
  // Through the service: a 409 that says what to use instead, not a 503.
  ServerOptions o = test::testOptions();
  test::TempDir dir;
  o.backup_dir = dir.path();
  test::ServerFixture f(o, true, test::Engine::Postgres);
  test::Reply r = f.post("/v1/admin/backup", "{}", f.admin_token);
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_NE(r.body.find("pg_dump"), std::string::npos) << r.body;
}

// The database vanishes under a running service: readiness and lookups answer 503 with a reason,
// the process keeps serving /healthz, and a new database behind the same URL is picked up.
TEST(PgStore, ALostDatabaseIsA503NotACrash) {
  test::ServerFixture f(test::testOptions(), true, test::Engine::Postgres);
  Record r = makeRecord({.key = 4, .median_us = 30});
  ASSERT_EQ(f.post("/v1/records", test::recordsBody({r}), f.write_token).status, 200);
  ASSERT_EQ(f.get("/v1/best/" + r.key_id, f.read_token).status, 200);
  ASSERT_EQ(f.get("/readyz").status, 200);
  const std::string name = f.db.substr(f.db.rfind('/') + 1);
  std::string admin = f.db.substr(0, f.db.rfind('/')) + "/postgres";
  execSql(admin, "DROP DATABASE " + name + " WITH (FORCE)");
  test::Reply ready = f.get("/readyz");
  EXPECT_EQ(ready.status, 503) << ready.body;
  test::Reply lookup = f.get("/v1/best/" + r.key_id, f.read_token);
  EXPECT_EQ(lookup.status, 503) << lookup.body;
  const std::string password = test::pgServerPassword();
  ASSERT_GE(password.size(), 8u);
  EXPECT_EQ(lookup.body.find(password), std::string::npos) << "a 503 must not carry the URL's password";
  EXPECT_EQ(ready.body.find(password), std::string::npos);
  EXPECT_EQ(f.get("/healthz").status, 200);
}

// PostgreSQL restarts (an upgrade, a failover to the same address) under a running service: while it
// is down requests get 503s; once it is back the service answers again without a restart, on
// fresh connections, and nothing acknowledged before is lost. A server of its own, not the shared
// one the other tests use.
TEST(PgStore, TheServiceRidesOutAPostgresRestart) {
  const std::string dir = std::string(TESSERA_PG_DIR) + "-restart-" + *randomHex(4);
  const std::string script = std::string("bash ") + TESSERA_SOURCE_DIR + "/scripts/pg_server.sh ";
  auto run = [&](const std::string& cmd) {
    std::string out;
    FILE* p = ::popen((script + cmd + " " + dir + " 2>&1").c_str(), "r");
    char buf[512];
    while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    EXPECT_EQ(::pclose(p), 0) << out;
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  };
  struct Cleanup {
    std::function<void()> f;
    ~Cleanup() { f(); }
  } cleanup{[&] {
    run("destroy");
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }};
  const std::string address = run("start");
  std::string url = address;
  ASSERT_TRUE(isPostgresLocation(url)) << url;
  {
    // A server of its own has its own password (its DIR/pgpass); in-process, the URL may carry it.
    std::ifstream pass(dir + "/pgpass");
    std::string line;
    std::getline(pass, line);
    url.insert(url.find('@'), ":" + line.substr(line.rfind(':') + 1));
  }
  ServerOptions o = test::testOptions();
  o.db_path = url;
  auto tokens = TokenStore::open(url);
  ASSERT_TRUE(tokens.ok()) << tokens.error().message;
  const std::string writer = *(*tokens)->add("writer", Scope::Write);
  auto server = CacheServer::start(o);
  ASSERT_TRUE(server.ok()) << server.error().message;
  const std::string base = "http://127.0.0.1:" + std::to_string((*server)->port());
  auto call = [&](const std::string& method, const std::string& target, const std::string& body) {
    auto conn = openHttpConnection(base, 2.0);
    if (!conn.ok()) return 0;
    auto r = (*conn)->send(method, target, {{"Authorization", "Bearer " + writer}}, body,
                           body.empty() ? "" : "application/json", 10.0);
    return r.ok() ? r->status : 0;
  };
  Record r = makeRecord({.key = 9, .median_us = 12});
  ASSERT_EQ(call("POST", "/v1/records", test::recordsBody({r})), 200);
  ASSERT_EQ(call("GET", "/v1/best/" + r.key_id, ""), 200);

  ASSERT_EQ(run("stop"), "");
  EXPECT_EQ(call("GET", "/v1/best/" + r.key_id, ""), 503);
  EXPECT_EQ(call("GET", "/readyz", ""), 503);
  ASSERT_EQ(run("start"), address);  // the same address
  int status = 0;
  for (int i = 0; i < 50 && status != 200; ++i) {
    status = call("GET", "/v1/best/" + r.key_id, "");
    if (status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(status, 200);
  EXPECT_EQ(call("POST", "/v1/records", test::recordsBody({makeRecord({.key = 9, .median_us = 11, .host = "b"})})), 200);
  EXPECT_EQ(call("GET", "/readyz", ""), 200);
  (*server)->stop();
  (*server)->wait();
}

}  // namespace
}  // namespace tessera::cache
