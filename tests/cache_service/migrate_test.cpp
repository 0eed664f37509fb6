// Tests `tessera serve migrate` (cache_service/store_migrate.h) with the real binary: a store of
// 100k records (quarantined ones, several writers, revoked tokens, kernels, workers, jobs) copied
// SQLite -> PostgreSQL -> SQLite with every row equal and every provenance field kept; the copied
// tokens authenticate against a real `tessera serve` on the destination; a copy killed with SIGKILL
// part-way continues without losing or duplicating a row; a tampered destination fails the
// verification (the negative control of the checksums); every table of both schemas is copied;
// bad input is one line. Without the PostgreSQL engine in the build the middle store is SQLite.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "store/engine.h"
#include "store/jobs.h"
#include "store/migrate_side.h"
#include "store/tokens.h"
#include "support/hash.h"
#include "tests/cache_service/process_util.h"
#include "tests/cache_service/test_util.h"

namespace tessera::cache {
namespace {

using test::runTessera;
using test::RunResult;

constexpr int kRecords = 100000;
constexpr int kKeys = 20000;
// Text that must survive both engines byte for byte (quotes, a '?' the placeholder rewrite must
// not touch, non-ASCII).
const std::string kOddText = "h?'\"\xc3\xbc;--$1";

void sqlExec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  const std::string msg = err ? err : "";
  sqlite3_free(err);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << msg;
}

void pgExec(const std::string& url, const std::string& sql) {
  // queryRows runs any statement; what it returns does not matter here.
  (void)test::queryRows(url, sql);
}

std::string hex32(int i, char fill) {
  std::string s = std::to_string(i);
  return std::string(32 - s.size(), fill) + s;
}

// The shared source: a SQLite store built once per test binary, read only by every test.
struct Source {
  test::TempDir dir;
  std::string path = dir.file("source.db");
  std::string alice, bob, carol;  // token secrets: bob's is revoked
  std::vector<std::string> winner_keys;
};

Record apiRecord(int i) {
  test::RecordSpec spec;
  spec.key = i % 40;
  spec.median_us = 50 + i * 0.37;
  spec.host = kOddText;
  spec.config = "{\"MC\":" + std::to_string(16 + i) + "}";
  return test::makeRecord(spec);
}

void build(Source& s) {
  EngineOptions eo;
  eo.synchronous_full = false;
  auto opened = openStore(s.path, eo);
  ASSERT_TRUE(opened.ok()) << opened.error().message;
  std::unique_ptr<RecordStore> store = std::move(*opened);
  auto tokens = TokenStore::open(s.path);
  ASSERT_TRUE(tokens.ok());
  s.alice = *(*tokens)->add("alice", Scope::Write);
  s.bob = *(*tokens)->add("bob", Scope::Write);
  s.carol = *(*tokens)->add("carol", Scope::Admin);
  ASSERT_TRUE((*tokens)->add("box1", Scope::Worker).ok());

  // Records through the store core: claims of two writers and vouched-for local ones, then bob's
  // quarantined and his token revoked (what `serve token revoke --retract quarantine` does).
  for (int w = 0; w < 3; ++w) {
    std::vector<Record> batch;
    for (int i = w * 100; i < w * 100 + 100; ++i) batch.push_back(apiRecord(i));
    PutOptions po;
    po.writer = w == 0 ? "alice" : w == 1 ? "bob" : "";
    po.trusted = w == 2;
    ASSERT_TRUE(store->put(batch, po).ok());
  }
  ASSERT_TRUE(store->administer({.writer = "bob"}, AdminAction::Quarantine, kDefaultAgreeFactor).ok());
  ASSERT_TRUE((*tokens)->revoke("bob").ok());
  for (int i = 0; i < 20; ++i) {
    const std::string text = "kernel #" + std::to_string(i) + " { " + kOddText.substr(0, 3) + " }";
    ASSERT_TRUE(store->putKernelText(sha256Hex(text), text).ok());
  }

  // A worker and a job's history through the queue: registered, leased, one item reported.
  JobQueue* q = store->jobs();
  QueuePolicy p;
  WorkerInfo w;
  w.id = hex32(1, 'a');
  w.token = "box1";
  w.target = "host";
  w.arch = test::keyFor(0).arch;
  w.units = test::keyFor(0).units;
  w.model = "cpu";
  w.runtime_version = "Linux 6.1, glibc 2.36";
  w.slots = 4;
  ASSERT_TRUE(q->registerWorker(w, p).ok());
  JobSpec job;
  job.id = hex32(2, 'b');
  job.submitter = "alice";
  job.key = test::keyFor(0);
  job.key_id = keyIdOf(job.key);
  job.model = "cpu";
  job.kernel = "kernel text";
  job.settings = "{}";
  job.items = {"{\"MC\":16}", "{\"MC\":32}", "{\"MC\":64}"};
  ASSERT_TRUE(q->submit(job, p).ok());
  auto lease = q->lease(w.id, "box1", 2, p);
  ASSERT_TRUE(lease.ok()) << lease.error().message;
  ASSERT_EQ(lease->items.size(), 2u);
  store.reset();

  // The bulk, in SQL: keys, records (every 11th quarantined, four writers, received_at of their
  // own, doubles with every bit used), kernel texts and finished jobs with their items.
  std::ostringstream sql;
  sql << "BEGIN;"
      << "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < " << kKeys << ") "
      << "INSERT INTO keys(key_id, family, workload, shape, rank, dtype, layout, target, arch, units) "
         "SELECT printf('%064x', i), 'gemm', printf('w%04d', i % 500), printf('%dx64x64', i), 3, 'f32', 'row', "
         "'host', 'x86-64-v4', 2 FROM n;"
      << "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < "
      << kRecords - 300 << ") "
      << "INSERT INTO records(key_id, fingerprint, status, config, n, median_us, p20_us, p80_us, gflops, gbps, "
         "peak_fraction, max_abs_err, max_rel_err, trials, tuning_seconds, tessera_version, llvm_version, "
         "cuda_version, cpu_model, host, user, created_at, pushed, remeasured, estimator, bound, writer, received_at, "
         "quarantined, trust, driver_version, runtime_version) "
         "SELECT printf('%064x', 1 + i % " << kKeys << "), printf('fp%09d', i), "
         "CASE WHEN i % 13 = 0 THEN 'timeout' ELSE 'ok' END, printf('{\"MC\":%d,\"NC\":%d}', 16 * (1 + i % 8), i), "
         "7, 10.0 + i / 7.0, 9.0 + i / 7.0, 11.0 + i / 7.0, 1e3 / (10.0 + i / 7.0), i / 3.0, 0.1 + (i % 9) / 11.0, "
         "0.0, 1e-7 * (i % 5), 5 + i % 4, i / 13.0, '0.1.0', '22.1.0', '', 'AMD EPYC', "
         "CASE WHEN i % 97 = 0 THEN '" << kOddText.substr(0, 1) << "?''\"' ELSE printf('host%d', i % 17) END, "
         "'tester', printf('2026-01-%02dT%02d:%02d:%02dZ', 1 + i % 28, i % 24, i % 60, (i / 60) % 60), "
         "i % 2, i % 3 = 0, '', '', "
         "CASE i % 4 WHEN 0 THEN 'alice' WHEN 1 THEN 'bob' WHEN 2 THEN 'carol' ELSE '' END, "
         "printf('2026-02-%02dT%02d:%02d:%02dZ', 1 + i % 28, (i / 7) % 24, (i / 3) % 60, i % 60), "
         "i % 11 = 0, (i % 4) - 1, CASE WHEN i % 5 = 0 THEN 'CUDA 12.4' ELSE '' END, 'Linux 6.1' FROM n;"
      << "UPDATE keys SET winner_id = (SELECT min(id) FROM records r WHERE r.key_id = keys.key_id AND "
         "r.status = 'ok' AND r.quarantined = 0) WHERE key_id LIKE '0000000000%';"
      << "UPDATE keys SET winner_median_us = (SELECT median_us FROM records WHERE id = keys.winner_id), "
         "winner_changes = 1, winner_rank = 2 WHERE winner_id IS NOT NULL AND key_id LIKE '0000000000%';"
      << "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500) "
      << "INSERT INTO kernel_texts(workload, ir) SELECT printf('%064d', i), printf('kernel %d', i) FROM n;"
      << "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200) "
      << "INSERT INTO jobs(id, submitter, kind, key_id, key_json, target, arch, units, model, kernel, settings, "
         "rounds, first_trial, elapsed_s, state, items, done_items, created_at, finished_at, changes) "
         "SELECT CASE WHEN i = 7 THEN '" << "job?'' 7" << "' ELSE printf('%032d', i) END, 'alice', 'measure', "
         "printf('%064x', 1), '{}', 'host', 'x86_64', 8, 'cpu', 'kernel', '{}', 0, i, i / 3.0, 'done', 10, 10, "
         "1.7e9 + i / 7.0, 1.7e9 + i, 10 FROM n;"
      << "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 1999) "
      << "INSERT INTO job_items(job_id, item, payload, state, worker_id, lease_expires, attempts, result, record_id, "
         "leased_at, changed) SELECT (SELECT id FROM jobs WHERE seq = 2 + i / 10), i % 10, '{\"MC\":16}', 'done', '"
      << w.id << "', 1.7e9 + i / 3.0, 1, '{\"ok\":true}', 1 + i, 1.7e9 + i / 9.0, i % 10 FROM n;"
      << "COMMIT;";
  sqlExec(s.path, sql.str());
  for (const auto& row : test::queryRows(s.path, "SELECT key_id FROM keys WHERE winner_id IS NOT NULL AND key_id "
                                                 "LIKE '0000000000%' ORDER BY key_id LIMIT 3"))
    s.winner_keys.push_back(row[0]);
}

Source& source() {
  // Destroyed at exit, with its folder.
  static std::unique_ptr<Source> s = [] {
    auto built = std::make_unique<Source>();
    const auto t0 = std::chrono::steady_clock::now();
    build(*built);
    std::fprintf(stderr, "[migrate] source of %d records built in %.1f s\n", kRecords,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return built;
  }();
  return *s;
}

bool withPostgres() { return test::postgresBuiltIn(); }

// A fresh, empty destination: a database on the tests' PostgreSQL server, or a new SQLite file.
struct Destination {
  explicit Destination(bool postgres, const std::string& name) {
    if (postgres) {
      pg = std::make_unique<test::PgDatabase>();
      location = pg->url();
    } else {
      location = dir.file(name);
    }
  }
  test::TempDir dir;
  std::unique_ptr<test::PgDatabase> pg;
  std::string location;
};

RunResult migrateCmd(const std::string& from, const std::string& to, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"serve", "migrate", "--from", from, "--to", to};
  args.insert(args.end(), extra.begin(), extra.end());
  return runTessera(args);
}

int64_t count(const std::string& loc, const std::string& table) {
  return std::stoll(test::queryRows(loc, "SELECT count(*) FROM " + table).at(0).at(0));
}

// One error line on stderr, "tessera: error: ...", the last; before it only progress lines.
void expectOneLineError(const RunResult& r, const std::string& says) {
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_LT(r.exit_code, 128) << "a crash: " << r.err;
  std::istringstream lines(r.err);
  std::vector<std::string> other;
  std::string line, last;
  while (std::getline(lines, line))
    if (line.rfind("tessera serve migrate: ", 0) != 0) other.push_back(line);
  ASSERT_EQ(other.size(), 1u) << r.err;
  EXPECT_EQ(other[0].rfind("tessera: error: ", 0), 0u) << r.err;
  EXPECT_TRUE(r.err.ends_with(other[0] + "\n")) << r.err;
  EXPECT_NE(other[0].find(says), std::string::npos) << r.err;
}

// Whether two SQLite stores hold the same rows of a table, compared by SQLite itself (values, not
// their printing: a double one bit off differs), over every column PostgreSQL also has (SQLite's
// three dead columns take their defaults when PostgreSQL is on the way).
bool sameRows(const std::string& a, const std::string& b, const migrate::Table& t) {
  std::string cols;
  for (const migrate::Column& c : t.columns)
    if (!c.postgres.empty()) cols += (cols.empty() ? "" : ", ") + c.sqlite;
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(a.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) return false;
  auto scalar = [&](const std::string& sql) {
    sqlite3_stmt* st = nullptr;
    int64_t v = -1;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
      v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
  };
  sqlite3_exec(db, ("ATTACH DATABASE '" + b + "' AS other").c_str(), nullptr, nullptr, nullptr);
  const std::string mine = "SELECT " + cols + " FROM main." + t.name, theirs = "SELECT " + cols + " FROM other." + t.name;
  // Rows are unique (each has its key): as many on both sides and none of one missing from the
  // other is the same set.
  const bool same = scalar("SELECT count(*) FROM main." + t.name) == scalar("SELECT count(*) FROM other." + t.name) &&
                    scalar("SELECT count(*) FROM (" + mine + " EXCEPT " + theirs + ")") == 0;
  sqlite3_close(db);
  return same;
}

// --- the list of tables ---------------------------------------------------------------------------

// Every table and column a fresh database of either engine has is copied, or named as not copied
// with a reason: a table added to a schema without teaching migrate fails here.
TEST(Migrate, EveryTableOfBothSchemasIsCopied) {
  test::TempDir dir;
  std::vector<std::pair<std::string, bool>> fresh = {{dir.file("fresh.db"), false}};
  std::unique_ptr<test::PgDatabase> pg;
  if (withPostgres()) {
    pg = std::make_unique<test::PgDatabase>();
    fresh.emplace_back(pg->url(), true);
  }
  for (const auto& [loc, postgres] : fresh) {
    ASSERT_TRUE(openStore(loc).ok());
    const std::string q = postgres ? "SELECT table_name, column_name FROM information_schema.columns WHERE "
                                     "table_schema = current_schema()"
                                   : "SELECT m.name, p.name FROM sqlite_master m, pragma_table_info(m.name) p "
                                     "WHERE m.type = 'table'";
    std::map<std::string, std::set<std::string>> layout;
    for (const auto& row : test::queryRows(loc, q)) layout[row[0]].insert(row[1]);
    std::set<std::string> copied;
    for (const migrate::Table& t : migrate::copiedTables()) {
      copied.insert(t.name);
      ASSERT_TRUE(layout.count(t.name)) << loc << " lacks " << t.name;
      std::set<std::string> spec;
      for (const migrate::Column& c : t.columns)
        if (!c.in(postgres ? SqlDialect::Engine::Postgres : SqlDialect::Engine::Sqlite).empty())
          spec.insert(c.in(postgres ? SqlDialect::Engine::Postgres : SqlDialect::Engine::Sqlite));
      EXPECT_EQ(layout[t.name], spec) << t.name << " on " << (postgres ? "PostgreSQL" : "SQLite");
    }
    for (const auto& [table, cols] : layout)
      EXPECT_TRUE(copied.count(table) || migrate::uncopiedTables().count(table))
          << "table " << table << " is neither copied by migrate nor named as left out";
  }
  // SQLite's own statistics tables are the engine's: a store someone ran ANALYZE on migrates.
  const std::string analyzed = dir.file("analyzed.db");
  {
    auto tokens = TokenStore::open(analyzed);
    ASSERT_TRUE(tokens.ok());
    ASSERT_TRUE((*tokens)->add("someone", Scope::Read).ok());
  }
  sqlExec(analyzed, "ANALYZE");
  ASSERT_FALSE(test::queryRows(analyzed, "SELECT name FROM sqlite_master WHERE name = 'sqlite_stat1'").empty());
  RunResult analyzed_run = migrateCmd(analyzed, dir.file("analyzed-out.db"));
  EXPECT_EQ(analyzed_run.exit_code, 0) << analyzed_run.err;
  // The same check at run time: a source holding a table migrate does not know is refused.
  const std::string newer = dir.file("newer.db");
  ASSERT_TRUE(openStore(newer).ok());
  sqlExec(newer, "CREATE TABLE worker_badges(id TEXT PRIMARY KEY)");
  expectOneLineError(migrateCmd(newer, dir.file("out.db")), "worker_badges");
}

// --- both ways, through SIGKILLs ------------------------------------------------------------------

// Starts the migration, kills it with SIGKILL once `table` has at least `rows` rows copied, and
// checks that what the destination holds is exactly what its progress says.
void killPartWay(const std::string& from, const std::string& to, const std::string& table, int64_t rows,
                 const std::string& log) {
  const pid_t pid = test::startTessera({"serve", "migrate", "--from", from, "--to", to, "--batch-rows", "200"}, log);
  int64_t copied = 0;
  bool exited = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (copied < rows && std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      exited = true;
      break;
    }
    try {
      auto r = test::queryRows(to, "SELECT value FROM tessera_migration WHERE item = 'cursor:" + table + "'");
      if (!r.empty()) copied = std::stoll(r[0][0]);
    } catch (const std::exception&) {
      // Not created yet.
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!exited) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  ASSERT_FALSE(exited) << "the migration ended before it could be killed";
  ASSERT_GE(copied, rows);
  // One statement, one snapshot: the rows the destination holds are the rows its progress counts.
  auto both = test::queryRows(to, "SELECT (SELECT value FROM tessera_migration WHERE item = 'cursor:" + table +
                                      "'), (SELECT count(*) FROM " + table + ")");
  const int64_t committed = std::stoll(both.at(0).at(0));
  EXPECT_EQ(std::stoll(both.at(0).at(1)), committed) << "the rows and their progress commit together";
  EXPECT_LT(committed, count(from, table)) << "killed part-way";
}

// SQLite -> the middle store -> SQLite, each copy killed with SIGKILL part-way and continued by the
// same command: every row arrives once, byte for byte, with its provenance; the copied tokens
// authenticate against real servers on both destinations.
TEST(Migrate, HundredThousandRecordsBothWaysThroughSigkillsKeepEveryRow) {
  Source& src = source();
  const std::string before = test::dbSnapshot(src.path);
  Destination mid(withPostgres(), "mid.db");
  test::TempDir out;
  const std::string back = out.file("back.db");

  // Into the middle store, killed inside the records (integer keys).
  auto t0 = std::chrono::steady_clock::now();
  killPartWay(src.path, mid.location, "records", 20000, out.file("kill1.log"));
  // Another store can neither continue it nor write into it.
  const std::string other = out.file("other.db");
  ASSERT_TRUE(openStore(other).ok());
  expectOneLineError(migrateCmd(other, mid.location), "holds a migration from another store");
  RunResult there = migrateCmd(src.path, mid.location);
  const double there_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(there.exit_code, 0) << there.err << there.out;
  EXPECT_NE(there.out.find("(continued)"), std::string::npos) << there.out;
  EXPECT_NE(there.err.find("rows were copied before; continuing"), std::string::npos) << there.err;

  // Out of it, killed inside the keys (text keys: read in byte order on both engines).
  t0 = std::chrono::steady_clock::now();
  killPartWay(mid.location, back, "keys", 2000, out.file("kill2.log"));
  RunResult back_again = migrateCmd(mid.location, back);
  const double back_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(back_again.exit_code, 0) << back_again.err << back_again.out;
  EXPECT_NE(back_again.out.find("(continued)"), std::string::npos) << back_again.out;
  std::fprintf(stderr, "[migrate] %d records: SQLite -> %s %.1f s, back %.1f s (each killed once and continued)\n%s%s",
               kRecords, withPostgres() ? "PostgreSQL" : "SQLite", there_s, back_s, there.err.c_str(),
               back_again.err.c_str());
  for (const RunResult* r : {&there, &back_again}) {
    EXPECT_NE(r->out.find("verified: every table"), std::string::npos) << r->out;
    EXPECT_EQ(r->out.find("DIFFERS"), std::string::npos) << r->out;
  }
  EXPECT_EQ(test::dbSnapshot(src.path), before) << "migrate wrote its source";
  // Counts of every table, independently of migrate's own report.
  for (const migrate::Table& t : migrate::copiedTables()) {
    const int64_t n = count(src.path, t.name);
    EXPECT_EQ(count(mid.location, t.name), n) << t.name;
    EXPECT_EQ(count(back, t.name), n) << t.name;
  }
  EXPECT_EQ(count(src.path, "records"), kRecords);
  // The round trip is the source, row for row and byte for byte.
  for (const migrate::Table& t : migrate::copiedTables())
    EXPECT_TRUE(sameRows(src.path, back, t)) << t.name << " changed on the round trip";

  // Provenance row by row on a sample, across engines (PostgreSQL spells `user` user_name).
  const bool pg = withPostgres();
  auto prov = [](bool postgres) {
    return std::string("SELECT id, key_id, writer, received_at, quarantined, trust, created_at, ") +
           (postgres ? "user_name" : "user") +
           ", host, status, config, pushed, driver_version FROM records WHERE id % 997 = 1 OR id <= 300 ORDER BY id";
  };
  const auto want = test::queryRows(src.path, prov(false));
  EXPECT_EQ(test::queryRows(mid.location, prov(pg)), want);
  ASSERT_GT(want.size(), 300u);
  std::set<std::string> writers, quarantined;
  for (const auto& r : want) {
    writers.insert(r[2]);
    quarantined.insert(r[4]);
  }
  EXPECT_EQ(writers, (std::set<std::string>{"", "alice", "bob", "carol"}));
  EXPECT_EQ(quarantined, (std::set<std::string>{"0", "1"}));
  EXPECT_EQ(test::queryRows(mid.location, "SELECT name, hash, scope, created_at, coalesce(revoked_at, '-') FROM tokens "
                                          "ORDER BY name"),
            test::queryRows(src.path, "SELECT name, hash, scope, created_at, coalesce(revoked_at, '-') FROM tokens "
                                      "ORDER BY name"));
  // Ids keep counting where the source stopped.
  EXPECT_NE(there.out.find("records.id high-water"), std::string::npos);

  // The copied tokens authenticate against a real server on each destination; the revoked one
  // and an unknown one do not; the winners served are the source's, byte for byte.
  test::ServeProcess on_source(src.path, src.dir.path());
  for (const std::string& dest : {mid.location, back}) {
    test::TempDir work;
    test::ServeProcess served(dest, work.path());
    auto get = [](int port, const std::string& target, const std::string& token) {
      return test::rawRequest(port, test::httpRequest("GET", target, "", {"Authorization: Bearer " + token}));
    };
    for (const std::string& key : src.winner_keys) {
      const test::Reply a = get(served.port(), "/v1/best/" + key, src.alice);
      EXPECT_EQ(a.status, 200) << dest << ": " << a.body;
      EXPECT_EQ(a.body, get(on_source.port(), "/v1/best/" + key, src.alice).body);
    }
    EXPECT_EQ(get(served.port(), "/v1/best/" + src.winner_keys.at(0), src.bob).status, 401) << "a revoked token";
    EXPECT_EQ(get(served.port(), "/v1/best/" + src.winner_keys.at(0), "tsk_" + std::string(64, '0')).status, 401);
    const test::Reply admin = get(served.port(), "/v1/admin/records?writer=bob&limit=5", src.carol);
    EXPECT_EQ(admin.status, 200) << admin.body;
  }
  on_source.kill(SIGTERM);
  EXPECT_EQ(test::dbSnapshot(src.path), before);

}


// --- the negative control of the verification -----------------------------------------------------

TEST(Migrate, ATamperedDestinationFailsTheVerificationNamingTheTable) {
  test::TempDir dir;
  const std::string small = dir.file("small.db");
  {
    auto store = openStore(small);
    ASSERT_TRUE(store.ok());
    std::vector<Record> recs;
    for (int i = 0; i < 50; ++i) recs.push_back(apiRecord(i));
    ASSERT_TRUE((*store)->put(recs, {.writer = "alice", .trusted = false}).ok());
    auto tokens = TokenStore::open(small);
    ASSERT_TRUE(tokens.ok());
    ASSERT_TRUE((*tokens)->add("alice", Scope::Write).ok());
  }
  Destination dest(withPostgres(), "dest.db");
  ASSERT_EQ(migrateCmd(small, dest.location).exit_code, 0);
  auto exec = [&](const std::string& sql) {
    if (withPostgres()) pgExec(dest.location, sql);
    else sqlExec(dest.location, sql);
  };
  // Run again once finished: verified again, nothing written.
  RunResult again = migrateCmd(small, dest.location);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("finished before: verified again"), std::string::npos) << again.out;

  exec("UPDATE records SET writer = 'mallory' WHERE id = 17");
  RunResult r = migrateCmd(small, dest.location);
  expectOneLineError(r, "table records differs");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("DIFFERS"), std::string::npos) << r.out;
  exec("UPDATE records SET writer = 'alice' WHERE id = 17");
  EXPECT_EQ(migrateCmd(small, dest.location).exit_code, 0) << "the same row put back verifies";

  exec("UPDATE tokens SET hash = '" + std::string(64, 'f') + "'");
  expectOneLineError(migrateCmd(small, dest.location), "table tokens differs");
  exec("UPDATE tokens SET hash = '" + test::queryRows(small, "SELECT hash FROM tokens")[0][0] + "'");
  exec("INSERT INTO kernel_texts(workload, ir) VALUES('" + std::string(64, '0') + "', 'x')");
  expectOneLineError(migrateCmd(small, dest.location), "table kernel_texts differs");
}

// --- resuming after any key -------------------------------------------------------------------------

// A copy continues after the key its progress holds, whatever the key's text: quotes, a '?' (the
// PostgreSQL side writes the key into its cursor as a literal), a byte order that differs from a
// locale's. Read through each engine's side as a continuing migration reads it.
TEST(Migrate, AScanContinuesAfterAnyKey) {
  test::TempDir dir;
  const std::string small = dir.file("keys.db");
  ASSERT_TRUE(openStore(small).ok());
  std::vector<std::string> ids = {"a", "A", "job?' 7?", "job?' 7", "job\"x", "z\xc3\xbc", "Z"};
  std::sort(ids.begin(), ids.end());  // byte order (std::string compares as memcmp does)
  std::string sql = "BEGIN;";
  for (const std::string& id : ids)
    for (int item = 0; item < 3; ++item) {
      std::string quoted;
      for (char c : id) quoted += c == '\'' ? std::string("''") : std::string(1, c);
      sql += "INSERT INTO job_items(job_id, item, payload, state) VALUES('" + quoted + "', " + std::to_string(item) +
             ", '{}', 'queued');";
    }
  sqlExec(small, sql + "COMMIT;");
  Destination dest(withPostgres(), "dest.db");
  ASSERT_EQ(migrateCmd(small, dest.location).exit_code, 0);
  const migrate::Table* items = nullptr;
  for (const migrate::Table& t : migrate::copiedTables())
    if (t.name == "job_items") items = &t;
  ASSERT_NE(items, nullptr);
  for (const std::string& loc : {small, dest.location}) {
    Expected<std::unique_ptr<migrate::Side>> side = makeError(ErrorCode::Internal, "no side");
#ifdef TESSERA_WITH_POSTGRES
    if (isPostgresLocation(loc)) side = migrate::openPgSide(loc, migrate::Role::Source);
#endif
    if (!isPostgresLocation(loc)) side = migrate::openSqliteSide(loc, migrate::Role::Source);
    ASSERT_TRUE(side.ok()) << side.error().message;
    for (size_t k = 0; k < ids.size(); ++k) {
      Status st = (*side)->read([&](SqlTx& tx) -> Status {
        TESSERA_ASSIGN(auto scan, (*side)->scan(tx, *items, {"job_id", "item"}, {ids[k], int64_t{1}}));
        TESSERA_ASSIGN(auto rows, scan->next(100));
        // Byte order: after (id, 1) come (id, 2) and then every item of the later ids.
        EXPECT_EQ(rows.size(), 1 + 3 * (ids.size() - k - 1)) << loc << " after " << ids[k];
        if (!rows.empty()) {
          EXPECT_EQ(rows[0].text(0), ids[k]) << loc;
          EXPECT_EQ(rows[0].i64(1), 2) << loc;
        }
        return {};
      });
      ASSERT_TRUE(st.ok()) << loc << ": " << st.error().message;
    }
  }
}

// --- bad input ------------------------------------------------------------------------------------

TEST(Migrate, BadInputIsOneClearLine) {
  test::TempDir dir;
  // A small store is enough here (the 100k-record source costs seconds to build per test process).
  struct {
    test::TempDir dir;
    std::string path;
  } src;
  src.path = src.dir.file("source.db");
  {
    auto tokens = TokenStore::open(src.path);
    ASSERT_TRUE(tokens.ok());
    ASSERT_TRUE((*tokens)->add("alice", Scope::Write).ok());
  }
  expectOneLineError(migrateCmd("mysql://db/x", dir.file("a.db")), "unknown store scheme 'mysql://'");
  expectOneLineError(migrateCmd(src.path, "http://127.0.0.1:1/x"), "unknown store scheme 'http://'");
  expectOneLineError(migrateCmd(dir.file("missing.db"), dir.file("a.db")), "the file is missing");
  expectOneLineError(migrateCmd(src.path, src.dir.path() + "/./source.db"), "name the same store");
  expectOneLineError(migrateCmd(src.path, dir.file("a.db"), {"--batch-rows", "0"}), "batch size");

  const std::string newer = dir.file("newer.db");
  ASSERT_TRUE(openStore(newer).ok());
  sqlExec(newer, "PRAGMA user_version = 99");
  expectOneLineError(migrateCmd(newer, dir.file("b.db")), "newer than this tessera's");
  sqlExec(newer, "PRAGMA user_version = 7");
  expectOneLineError(migrateCmd(newer, dir.file("b.db")), "upgrade it first");
  const std::string not_tessera = dir.file("plain.db");
  sqlExec(not_tessera, "CREATE TABLE t(x)");
  expectOneLineError(migrateCmd(not_tessera, dir.file("c.db")), "not a Tessera store");

  // A destination that holds other data is refused, and left as it was.
  const std::string taken = dir.file("taken.db");
  {
    auto tokens = TokenStore::open(taken);
    ASSERT_TRUE(tokens.ok());
    ASSERT_TRUE((*tokens)->add("someone", Scope::Read).ok());
  }
  const std::string taken_before = test::dbSnapshot(taken);
  expectOneLineError(migrateCmd(src.path, taken), "already holds data (1 tokens)");
  EXPECT_EQ(test::dbSnapshot(taken), taken_before);

  if (withPostgres()) {
    // A port nothing listens on (bound, then closed), a schema newer than this tessera's, the
    // same database twice.
    expectOneLineError(migrateCmd(src.path, "postgresql://tessera@127.0.0.1:1/nowhere"), "cannot connect to PostgreSQL");
    test::PgDatabase pg;
    ASSERT_TRUE(openStore(pg.url()).ok());
    expectOneLineError(migrateCmd(pg.url(), pg.url()), "name the same store");
    pgExec(pg.url(), "UPDATE tessera_meta SET value = '99' WHERE name = 'schema_version'");
    expectOneLineError(migrateCmd(pg.url(), dir.file("d.db")), "newer than this tessera's");
    expectOneLineError(migrateCmd(src.path, pg.url()), "newer than this tessera");
  }
}

TEST(Migrate, StreamedSha256IsTheOneShotDigest) {
  std::string data;
  for (int i = 0; i < 1000; ++i) data += std::to_string(i * 7919) + ",";
  for (size_t piece : {1u, 3u, 63u, 64u, 65u, 1000u}) {
    Sha256 h;
    for (size_t at = 0; at < data.size(); at += piece) h.update(std::string_view(data).substr(at, piece));
    EXPECT_EQ(h.hexDigest(), sha256Hex(data)) << piece;
  }
  Sha256 empty;
  EXPECT_EQ(empty.hexDigest(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

}  // namespace
}  // namespace tessera::cache
