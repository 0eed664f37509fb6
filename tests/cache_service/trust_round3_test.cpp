// Tests the third round of the shared cache's trust rules (issue 47) against the real `tessera
// serve` binary, on both store engines where the store decides: the two-step "re-measured"
// self-confirmation that outranked other tokens' faster claims (finding 1), the tiers every answer
// carries and `trust=reproduced` (what to build 1), a reader's dispute that demotes a claim for
// every reader until another token reproduces it (2), and `tessera best` falling back to the next
// candidate when it refutes the winner instead of exiting 5 (2). Each attack with its legitimate
// neighbour; and the physical bounds per dtype (what to build 4). TESSERA_TEST_BIN=<main's
// tessera> shows the before: these tests fail there.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "store/engine.h"
#include "client/http.h"
#include "service/plausibility.h"
#include "store/record_json.h"
#include "tests/cache_service/process_util.h"
#include "tests/cache_service/test_util.h"

namespace tessera::cache {
namespace {

using nlohmann::json;
using test::Engine;

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// A `tessera serve` on a fresh store of either engine, with tokens made by `tessera serve token add`
// before it starts (so none has to wait for the server's token refresh).
struct Served {
  Served(Engine e, const std::vector<std::pair<std::string, std::string>>& tokens, std::vector<std::string> extra = {}) {
    if (e == Engine::Postgres) {
      pg = std::make_unique<test::PgDatabase>();
      db = pg->url();
    } else {
      db = dir.file("cache.db");
    }
    for (const auto& [name, scope] : tokens) {
      auto r = test::runTessera({"serve", "token", "add", name, "--scope", scope, "--db", db});
      EXPECT_EQ(r.exit_code, 0) << r.err;
      secret[name] = trimmed(r.out);
    }
    extra.insert(extra.begin(), {"--sync", "normal"});
    srv = std::make_unique<test::ServeProcess>(db, dir.path(), extra);
  }
  struct Answer {
    int status = 0;
    json body;
  };
  Answer call(const std::string& method, const std::string& path, const std::string& who, const std::string& body = "") {
    auto conn = openHttpConnection("http://127.0.0.1:" + std::to_string(srv->port()), 2.0);
    if (!conn.ok()) return {};
    HeaderList h;
    if (!who.empty()) h.emplace_back("Authorization", "Bearer " + secret[who]);
    auto r = (*conn)->send(method, path, h, body, body.empty() ? "" : "application/json", 30.0);
    if (!r.ok()) return {};
    return {r->status, json::parse(r->body, nullptr, false)};
  }
  json post(const Record& r, const std::string& who) {
    auto a = call("POST", "/v1/records", who, encodeRecord(r));
    EXPECT_EQ(a.status, 200) << a.body;
    return a.body["results"][0];
  }
  json best(const std::string& key, const std::string& who, const std::string& query = "") {
    auto a = call("GET", "/v1/best/" + key + query, who);
    return a.status == 200 ? a.body["record"] : json{{"status", a.status}};
  }
  Answer dispute(int64_t id, const std::string& who, const std::string& why = "re-timed 40x slower here") {
    return call("POST", "/v1/records/" + std::to_string(id) + "/dispute", who, json{{"why", why}}.dump());
  }

  test::TempDir dir;
  std::unique_ptr<test::PgDatabase> pg;
  std::string db;
  std::map<std::string, std::string> secret;
  std::unique_ptr<test::ServeProcess> srv;
};

// Runs statements on a store of either engine, as an older release or another process would.
void execSql(const std::string& db, const std::string& sql) {
  if (isPostgresLocation(db)) {
    test::queryRows(db, sql);
    return;
  }
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READWRITE, nullptr), SQLITE_OK);
  sqlite3_busy_timeout(h, 5000);
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(h, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(h);
}

class Round3 : public ::testing::TestWithParam<Engine> {};

Record at(int key, const char* config, double median_us, bool remeasured = false, const std::string& host = "h") {
  return test::makeRecord({.key = key, .median_us = median_us, .host = host, .config = config, .remeasured = remeasured});
}

// Finding 1 and what to build 1. Before: mallory posted a slow config and the same config again
// as "re-measured" (its own earlier measurement, so the flag stood): rank 1 over every other
// token's plain claim, so its 9000 us claim beat alice's honest 4000 us one for every reader. Now
// among claims the flag counts for nothing; it ranks only among reproduced records. Every answer
// says its tier; `trust=reproduced` never serves a claim.
TEST_P(Round3, ARemeasuredClaimIsStillOneClaimAndTiersLabelEveryAnswer) {
  Served s(GetParam(), {{"alice", "write"}, {"bob", "write"}, {"mallory", "write"}, {"reader", "read"}});
  const std::string key = keyIdOf(test::keyFor(47));
  const char* X = R"({"MC":8})";
  const char* Y = R"({"MC":64})";
  s.post(at(47, X, 9000, false, "m1"), "mallory");
  auto rm = s.post(at(47, X, 9050, true, "m2"), "mallory");
  EXPECT_EQ(rm["remeasured"], true) << rm;  // its own earlier measurement: the flag stands
  EXPECT_EQ(rm["trust"], "claim") << rm;
  s.post(at(47, Y, 4000, false, "a"), "alice");
  json b = s.best(key, "reader");
  EXPECT_EQ(b["config"], json::parse(Y)) << "the self-re-measured slower claim must not outrank: " << b;
  EXPECT_EQ(b["tier"], "claim") << b;
  // Reproduced only: no record of this key is reproduced yet.
  EXPECT_EQ(s.best(key, "reader", "?trust=reproduced")["status"], 404);
  EXPECT_EQ(s.call("GET", "/v1/best/" + key + "?trust=most", "reader").status, 400);
  // The legitimate neighbour: alice's own re-measured winner confirmed by bob outranks every claim,
  // re-measured first among the reproduced records.
  s.post(at(47, Y, 4100, true, "a"), "alice");
  auto agree = s.post(at(47, Y, 4050, false, "b"), "bob");
  EXPECT_EQ(agree["trust"], "confirmed") << agree;
  b = s.best(key, "reader");
  EXPECT_EQ(b["tier"], "reproduced") << b;
  EXPECT_EQ(b["result"]["remeasured"], true) << b;
  EXPECT_EQ(b["writer"], "alice") << b;
  b = s.best(key, "reader", "?trust=reproduced");
  EXPECT_EQ(b["tier"], "reproduced") << b;
  // A faster claim of mallory's, re-measured, still does not outrank the reproduced record.
  s.post(at(47, R"({"MC":16})", 1000, false, "m1"), "mallory");
  s.post(at(47, R"({"MC":16})", 1010, true, "m1"), "mallory");
  EXPECT_EQ(s.best(key, "reader")["writer"], "alice");
}

// What to build 2 (the service's half). Before: a read token had no way to record its refutation,
// so a fast lie stayed the winner for every reader. Now a reader's dispute demotes another token's
// claim (and the writer's reposts of that config) below every other claim, until another token
// reproduces it; never a reproduced record, never the reader's own, and a few a minute per token.
// A designated measuring identity's records are reproduced on their own (the neighbour: an
// ordinary token's are claims).
TEST_P(Round3, AReadersDisputeDemotesAClaimUntilAnotherTokenReproducesIt) {
  Served s(GetParam(),
           {{"alice", "write"}, {"bob", "write"}, {"mallory", "write"}, {"reader", "read"}, {"fleet", "worker"},
            {"ci", "write"}},
           {"--disputes-per-minute", "3", "--measuring-token", "ci"});
  const std::string key = keyIdOf(test::keyFor(48));
  const char* X = R"({"MC":8})";
  const char* Y = R"({"MC":64})";
  const int64_t lie = s.post(at(48, X, 1000), "mallory")["id"];
  s.post(at(48, Y, 2000), "alice");
  EXPECT_EQ(s.best(key, "reader")["id"], lie);
  // Anonymous readers and workers cannot dispute; a malformed dispute is refused.
  EXPECT_EQ(s.call("POST", "/v1/records/1/dispute", "", R"({"why":"x"})").status, 401);
  EXPECT_EQ(s.call("POST", "/v1/records/1/dispute", "fleet", R"({"why":"x"})").status, 403);
  EXPECT_EQ(s.call("POST", "/v1/records/1/dispute", "reader", R"({"why":""})").status, 422);
  EXPECT_EQ(s.call("POST", "/v1/records/abc/dispute", "reader", R"({"why":"x"})").status, 404);
  // The reader refutes the winner: it is disputed for every reader, and the next claim is served.
  auto d = s.dispute(lie, "reader");
  ASSERT_EQ(d.status, 200) << d.body;
  EXPECT_EQ(d.body["disputed"], true) << d.body;
  json b = s.best(key, "bob");
  EXPECT_EQ(b["writer"], "alice") << b;
  // Posting the same config again does not shake the dispute off.
  auto again = s.post(at(48, X, 990, false, "other-host"), "mallory");
  EXPECT_EQ(again["trust"], "disputed") << again;
  EXPECT_EQ(s.best(key, "reader")["writer"], "alice");
  // A token cannot dispute its own records (alice's claim stays), nor a reproduced one.
  const int64_t honest = s.best(key, "reader")["id"];
  EXPECT_EQ(s.dispute(honest, "alice").body["disputed"], false);
  // Rate: 3 a minute per token (one used above); the fourth is 429 with Retry-After.
  EXPECT_EQ(s.dispute(honest, "reader").status, 200);
  EXPECT_EQ(s.dispute(honest, "reader").status, 200);
  EXPECT_EQ(s.dispute(honest, "reader").status, 429);
  // The two disputes of alice's claim demoted it too: bob reproduces it, and it is served again as
  // reproduced, which no dispute touches.
  auto rep = s.post(at(48, Y, 2050, false, "b"), "bob");
  EXPECT_EQ(rep["trust"], "confirmed") << rep;
  b = s.best(key, "reader");
  EXPECT_EQ(b["writer"], "alice") << b;
  EXPECT_EQ(b["tier"], "reproduced") << b;
  EXPECT_EQ(s.dispute(b["id"], "bob").body["disputed"], false);
  // Mallory's lie reproduced by nobody stays disputed; bob measures it for what it is: refuted.
  s.post(at(48, X, 40000, false, "b"), "bob");
  auto listed = s.call("GET", "/v1/records?key_id=" + key, "reader").body["records"];
  int refuted = 0;
  for (const json& r : listed) refuted += r["writer"] == "mallory" && r["trust"] == "refuted";
  EXPECT_EQ(refuted, 2) << listed;
  // A measuring identity the admin named is reproduced on its own; alice's new config is a claim.
  auto ci = s.post(at(49, Y, 3000, false, "ci"), "ci");
  EXPECT_EQ(ci["trust"], "vouched") << ci;
  EXPECT_EQ(s.best(keyIdOf(test::keyFor(49)), "reader", "?trust=reproduced")["tier"], "reproduced");
  auto plain = s.post(at(50, Y, 3000), "alice");
  EXPECT_EQ(plain["trust"], "claim") << plain;
  EXPECT_EQ(s.best(keyIdOf(test::keyFor(50)), "reader", "?trust=reproduced")["status"], 404);
}

// What to build 7. Before: `serve` started on the destination of an unfinished `serve migrate`
// and answered every write 503. Now it refuses at once, naming the command that finishes the
// migration; the neighbour, the same store once the migration is done, serves.
TEST_P(Round3, ServeRefusesAHalfMigratedStoreNamingTheCommandThatFinishesIt) {
  test::TempDir dir;
  std::unique_ptr<test::PgDatabase> pg;
  std::string db = dir.file("dest.db");
  if (GetParam() == Engine::Postgres) {
    pg = std::make_unique<test::PgDatabase>();
    db = pg->url();
  }
  ASSERT_EQ(test::runTessera({"serve", "token", "add", "ops", "--scope", "admin", "--db", db}).exit_code, 0);
  auto exec = [&](const std::string& sql) { execSql(db, sql); };
  exec("CREATE TABLE tessera_migration(item TEXT PRIMARY KEY, value TEXT NOT NULL)");
  exec("INSERT INTO tessera_migration(item, value) VALUES('source_shown', '/srv/old/cache.db'), ('state', 'copying')");
  // Started in the background: a serve that does not refuse would listen forever.
  const std::string log = dir.file("serve.log");
  const pid_t pid = test::startTessera({"serve", "--db", db, "--port", "0"}, log);
  int status = -1;
  pid_t done = 0;
  for (int i = 0; i < 200 && (done = ::waitpid(pid, &status, WNOHANG)) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (done == 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    ADD_FAILURE() << "serve started on a half-migrated store";
  }
  std::ifstream in(log);
  const std::string said((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << said;
  EXPECT_NE(said.find("tessera serve migrate --from /srv/old/cache.db --to "), std::string::npos) << said;
  exec("UPDATE tessera_migration SET value = 'done' WHERE item = 'state'");
  test::ServeProcess served(db, dir.path(), {"--sync", "normal"});
  EXPECT_GT(served.port(), 0);
}

// A store written by the previous release, whose key's winner is a re-measured claim that ranked
// above a faster claim of another token (the old rank 1): opening it recomputes that winner under
// today's order; a reproduced winner (the neighbour) stays.
TEST_P(Round3, AnOlderStoresSelfConfirmedWinnerIsRecomputedWhenItOpens) {
  Served s(GetParam(), {{"alice", "write"}, {"bob", "write"}, {"mallory", "write"}, {"reader", "read"}});
  const std::string key = keyIdOf(test::keyFor(51)), other = keyIdOf(test::keyFor(52));
  s.post(at(51, R"({"MC":8})", 9000, false, "m1"), "mallory");
  const int64_t self = s.post(at(51, R"({"MC":8})", 9050, true, "m2"), "mallory")["id"];
  const int64_t honest = s.post(at(51, R"({"MC":64})", 4000, false, "a"), "alice")["id"];
  s.post(at(52, R"({"MC":64})", 4000, false, "a"), "alice");
  const int64_t reproduced = s.post(at(52, R"({"MC":64})", 4100, true, "a"), "alice")["id"];
  s.post(at(52, R"({"MC":64})", 4050, false, "b"), "bob");
  EXPECT_EQ(s.best(other, "reader")["id"], reproduced);
  s.srv.reset();
  // What the previous release stored: mallory's re-measured claim as the winner, at rank 1.
  execSql(s.db, "UPDATE keys SET winner_id = " + std::to_string(self) +
                    ", winner_median_us = 9050, winner_remeasured = 1, winner_rank = 1 WHERE key_id = '" + key + "'");
  // ... without the columns later versions added (their migrations add them again).
  execSql(s.db, "ALTER TABLE workers DROP COLUMN probe_signature");
  execSql(s.db, "ALTER TABLE job_items DROP COLUMN stolen_by");
  execSql(s.db, "ALTER TABLE records DROP COLUMN measured_for");
  execSql(s.db, GetParam() == Engine::Postgres ? "UPDATE tessera_meta SET value = '4' WHERE name = 'schema_version'"
                                               : "PRAGMA user_version = 8");
  s.srv = std::make_unique<test::ServeProcess>(s.db, s.dir.path(), std::vector<std::string>{"--sync", "normal"});
  EXPECT_EQ(s.best(key, "reader")["id"], honest);
  EXPECT_EQ(s.best(other, "reader")["id"], reproduced);
}

INSTANTIATE_TEST_SUITE_P(Engines, Round3, ::testing::ValuesIn(test::builtEngines()),
                         [](const auto& info) { return std::string(test::engineName(info.param)); });

// A record of `k` timed at `us` (median and quantiles), with no throughput figures to check.
Record timed(const HardKey& k, double us) {
  Record r = test::makeRecord({.key = 0, .median_us = 1});
  r.key = k;
  r.config = "{}";
  r.median_us = r.p20_us = r.p80_us = us;
  r.gflops = r.gbps = r.peak_fraction = 0;
  EXPECT_TRUE(finalizeRecord(r).ok());
  return r;
}

// What to build 4: the three lies of the issue, each accepted before, refused now, and the honest
// neighbours of each (the true time, a product at its peak, an L1-resident kernel) accepted.
TEST(Round3Bounds, PhysicalBoundsPerDtypeRefuseTheThreeLiesAndAdmitTheTruth) {
  // Host elementwise 4096^2 f32 on a 2-core AVX2 key: 64 MiB of output at four bytes an element,
  // past every core's L2. Before: one byte an element at the L1's rate, 3.6 us with the margin.
  const HardKey ew{"elementwise", "00c0ffee", {4096, 4096}, "f32", "row", "host", "x86-64-v3", 2};
  Status lie = checkPlausible(timed(ew, 5), "");
  ASSERT_FALSE(lie.ok());
  EXPECT_NE(lie.error().message.find("faster than the roofline bound"), std::string::npos) << lie.error().message;
  EXPECT_TRUE(checkPlausible(timed(ew, 9000), "").ok());  // a copy's rate on two cores
  // The L1-resident neighbour: 64x64 f32 (16 KiB) on one core at 50 ns, the L1's rate allowed.
  const HardKey small{"elementwise", "00c0ffee", {64, 64}, "f32", "row", "host", "x86-64-v3", 1};
  Status l1 = checkPlausible(timed(small, 0.05), "");
  EXPECT_TRUE(l1.ok()) << l1.error().message;
  // Host GEMM 1024^3 bf16 on the same key: AVX2 computes bf16 at the f32 rate (2 cores x 192
  // GFLOP/s: 5.6 ms, 2.8 ms with the margin). Before: twice that rate passed 1.5 ms.
  const HardKey g{"gemm", "00c0ffee", {1024, 1024, 1024}, "bf16", "row", "host", "x86-64-v3", 2};
  EXPECT_FALSE(checkPlausible(timed(g, 1500), "").ok());
  EXPECT_TRUE(checkPlausible(timed(g, 27000), "").ok());
  // x86-64-v4 keeps its 16-bit dot products (vdpbf16ps: twice the f32 rate).
  HardKey g4 = g;
  g4.arch = "x86-64-v4";
  EXPECT_TRUE(checkPlausible(timed(g4, 1500), "").ok());
  // sm_90 GEMM 4096^3 f16 on 132 SMs: 139 us at the H100 SXM's dense tensor peak, 111 us with the
  // 1.25x room; 60 us is refused, the H100's measured 464 us and a run at the peak itself pass.
  const HardKey h{"gemm", "00c0ffee", {4096, 4096, 4096}, "f16", "row", "sm_90", "sm_90", 132};
  EXPECT_FALSE(checkPlausible(timed(h, 60), "").ok());
  EXPECT_TRUE(checkPlausible(timed(h, 464), "").ok());
  EXPECT_TRUE(checkPlausible(timed(h, 2.0 * 4096.0 * 4096 * 4096 / (989400 * 1e3)), "").ok());
  EXPECT_FALSE(checkPlausible(timed(h, 2.0 * 4096.0 * 4096 * 4096 / (989400 * 1e3) / 1.3), "").ok());
}

// What to build 7, the small items. Before: `serve --port 70000` and `report --db /dev/zero` exited
// 1 (a flag or input error is 2 everywhere); `cache import` on a FIFO blocked in its open and on
// /dev/zero read 256 MiB before it refused. Now each is one line and exit 2 at once; the neighbour,
// a regular record file, is still read (and fails only on its content).
TEST(Round3Files, FlagErrorsExitTwoAndDevicesAndFifosAreRefusedAtOnce) {
  test::TempDir dir;
  auto port = test::runTessera({"serve", "--db", dir.file("s.db"), "--port", "70000"});
  EXPECT_EQ(port.exit_code, 2) << port.err;
  EXPECT_NE(port.err.find("--port"), std::string::npos) << port.err;
  auto report = test::runTessera({"report", "--db", "/dev/zero", "-o", dir.file("r.html")});
  EXPECT_EQ(report.exit_code, 2) << report.err;
  const std::string fifo = dir.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::vector<std::string> env = {"TESSERA_CACHE_URL=http://127.0.0.1:9", "TESSERA_TOKEN=x"};
  for (const std::string& path : {fifo, std::string("/dev/zero")}) {
    const auto t0 = std::chrono::steady_clock::now();
    auto imp = test::runTessera({"cache", "import", path}, env);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(imp.exit_code, 2) << path << ": " << imp.err;
    EXPECT_NE(imp.err.find("not a regular file"), std::string::npos) << imp.err;
    EXPECT_LT(s, 5.0) << path;
  }
  std::ofstream(dir.file("r.jsonl")) << "{\"not\": \"a record\"}\n";
  auto regular = test::runTessera({"cache", "import", dir.file("r.jsonl")}, env);
  EXPECT_EQ(regular.exit_code, 2) << regular.err;
  EXPECT_NE(regular.err.find("line 1"), std::string::npos) << regular.err;
}

const std::vector<std::string> kKernel = {"gemm", "--m", "32", "--n", "32", "--k", "32"};

std::vector<std::string> cmd(std::vector<std::string> head, const std::vector<std::string>& tail = {}) {
  head.insert(head.end(), kKernel.begin(), kKernel.end());
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

// What to build 2 (the reader's half), through the real binaries. Before: a fast lie on a legal
// config nobody else measured was the winner; `tessera best` re-timed it, refused it and exited 5
// although an honest record of another config was stored. Now best skips it with one line, records
// the refutation (the lie is disputed for every reader), and serves the next candidate; the next
// reader is served the honest record at once (the neighbour: nothing skipped). `--trust reproduced`
// refuses claims altogether. Skipped in builds without the code generator.
TEST(Round3Readers, BestFallsBackToTheNextCandidateAndRecordsTheRefutation) {
  if (test::runTessera({"tune", "--help"}).exit_code != 0) GTEST_SKIP() << "this build has no code generator";
  test::TempDir dir;
  const std::string sdb = dir.file("shared.db");
  std::map<std::string, std::string> tok;
  for (auto [name, scope] : {std::pair{"honest", "write"}, {"mallory", "write"}, {"reader", "read"}}) {
    auto r = test::runTessera({"serve", "token", "add", name, "--scope", scope, "--db", sdb});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    tok[name] = trimmed(r.out);
  }
  test::ServeProcess srv(sdb, dir.path(), {"--sync", "normal"});
  const std::string url = "TESSERA_CACHE_URL=http://127.0.0.1:" + std::to_string(srv.port());
  auto as = [&](const std::string& who) { return std::vector<std::string>{url, "TESSERA_TOKEN=" + tok[who]}; };

  // The honest machine tunes locally (no cache) and shares its winner A; B is another config it
  // measured, which nobody shared.
  const std::string local = dir.file("local.db");
  auto tune = test::runTessera(cmd({"tune", "--db", local}, {"--trials", "4", "--top-k", "0", "--min-time", "0.01"}));
  ASSERT_EQ(tune.exit_code, 0) << tune.err;
  json mine = json::parse(test::runTessera(cmd({"best", "--json", "--db", local})).out)["record"];
  ASSERT_TRUE(mine.is_object());
  const double real_us = mine["result"]["median_us"];
  auto rows = test::queryRows(local, "SELECT config FROM records WHERE status = 'ok' AND config <> '" +
                                         mine["config"].dump() + "'");
  ASSERT_GE(rows.size(), 1u) << "the tune measured one config only";
  auto share = [&](json rec, const std::string& who) {
    for (const char* k : {"id", "stale", "trust", "tier", "writer", "received_at"}) rec.erase(k);
    std::ofstream(dir.file("r.json")) << rec.dump();
    auto r = test::runTessera({"cache", "put", dir.file("r.json")}, as(who));
    ASSERT_EQ(r.exit_code, 0) << r.err;
  };
  share(mine, "honest");
  json lie = mine;
  lie["config"] = json::parse(rows[0][0]);
  const auto lie_us = test::lieTimeUs(mine["key"].dump(), lie["config"].dump(), real_us, 8);
  if (!lie_us) GTEST_SKIP() << "this host runs the kernel at its roofline (" << real_us << " us): no lie is plausible";
  for (const char* f : {"median_us", "p20_us", "p80_us"}) lie["result"][f] = *lie_us;
  lie["result"].erase("remeasured");
  share(lie, "mallory");

  // Reproduced only: both are claims, so there is nothing to serve.
  auto strict = test::runTessera(cmd({"best", "--trust", "reproduced", "--db", dir.file("none.db")}), as("reader"));
  EXPECT_EQ(strict.exit_code, 5) << strict.out << strict.err;
  // The reader refutes the lie, says so in one line, disputes it and is served the honest record.
  auto first = test::runTessera(cmd({"best", "--db", dir.file("none.db")}), as("reader"));
  EXPECT_EQ(first.exit_code, 0) << first.out << first.err;
  EXPECT_NE(first.err.find("skipped the shared cache's candidate (config " + lie["config"].dump()), std::string::npos)
      << first.err;
  EXPECT_NE(first.out.find("config      " + mine["config"].dump()), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("matches the reference"), std::string::npos) << first.out;
  auto disputed = test::queryRows(sdb, "SELECT trust FROM records WHERE writer = 'mallory'");
  ASSERT_EQ(disputed.size(), 1u);
  EXPECT_EQ(disputed[0][0], "-2") << "the reader's refutation is recorded";
  // The next reader: the honest record is the winner now; nothing is skipped.
  auto second = test::runTessera(cmd({"best", "--db", dir.file("none.db")}), as("reader"));
  EXPECT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(second.err.find("skipped"), std::string::npos) << second.err;
  EXPECT_NE(second.out.find("config      " + mine["config"].dump()), std::string::npos) << second.out;
}

}  // namespace
}  // namespace tessera::cache
