// Tests the `tessera serve` and `tessera cache` commands end to end through the real binary:
// token administration, serving, get/put/export/import/stats/backup, exit codes, and a clean stop
// on SIGTERM.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "tests/cache_service/process_util.h"
#include "tests/cache_service/test_util.h"

namespace tessera::cache {
namespace {

using nlohmann::json;
using test::runTessera;

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

TEST(Cli, TokenAdministration) {
  test::TempDir dir;
  const std::string db = dir.file("t.db");
  auto add = runTessera({"serve", "token", "add", "alice", "--scope", "write", "--db", db});
  ASSERT_EQ(add.exit_code, 0) << add.err;
  const std::string secret = trimmed(add.out);
  EXPECT_EQ(secret.rfind("tsk_", 0), 0u);
  EXPECT_EQ(secret.size(), 68u);
  auto dup = runTessera({"serve", "token", "add", "alice", "--db", db});
  EXPECT_EQ(dup.exit_code, 1);
  EXPECT_NE(dup.err.find("exists"), std::string::npos);
  EXPECT_NE(runTessera({"serve", "token", "add", "bob", "--scope", "root", "--db", db}).exit_code, 0);
  auto list = runTessera({"serve", "token", "list", "--db", db});
  ASSERT_EQ(list.exit_code, 0);
  EXPECT_NE(list.out.find("alice"), std::string::npos);
  EXPECT_NE(list.out.find("write"), std::string::npos);
  EXPECT_EQ(list.out.find(secret.substr(4)), std::string::npos);  // secrets are never shown again
  EXPECT_TRUE(test::queryRows(db, "SELECT 1 FROM tokens WHERE hash LIKE '%" + secret.substr(4, 16) + "%'").empty());
  EXPECT_EQ(runTessera({"serve", "token", "revoke", "alice", "--db", db}).exit_code, 0);
  auto again = runTessera({"serve", "token", "revoke", "alice", "--db", db});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("no active token"), std::string::npos);
}

TEST(Cli, ServeAndCacheCommands) {
  test::TempDir dir;
  const std::string db = dir.file("served.db");
  const std::string writer = trimmed(runTessera({"serve", "token", "add", "w", "--scope", "write", "--db", db}).out);
  const std::string reader = trimmed(runTessera({"serve", "token", "add", "r", "--db", db}).out);
  const std::string admin = trimmed(runTessera({"serve", "token", "add", "a", "--scope", "admin", "--db", db}).out);
  test::ServeProcess srv(db, dir.path(), {"--backup-dir", dir.path(), "--sync", "normal"});
  EXPECT_NE(srv.log().find("listening on http://127.0.0.1:" + std::to_string(srv.port())), std::string::npos);
  const std::string url = "TESSERA_CACHE_URL=http://127.0.0.1:" + std::to_string(srv.port());

  Record a = test::makeRecord({.key = 1, .median_us = 30});
  Record b = test::makeRecord({.key = 1, .median_us = 20});
  // A third record of the key, slower than its winner: new to the service all the same.
  Record slow = test::makeRecord({.key = 1, .median_us = 40});
  const std::string file = dir.file("recs.jsonl");
  std::ofstream(file) << encodeRecord(a) << "\n" << encodeRecord(b) << "\n" << encodeRecord(slow) << "\n";
  auto put = runTessera({"cache", "put", file}, {url, "TESSERA_TOKEN=" + writer});
  ASSERT_EQ(put.exit_code, 0) << put.err;
  EXPECT_NE(put.out.find("3 records: 3 new, 0 already present; winners: 1 of new keys, 1 improved"), std::string::npos)
      << put.out;
  auto putAgain = runTessera({"cache", "put", file, "--json"}, {url, "TESSERA_TOKEN=" + writer});
  ASSERT_EQ(putAgain.exit_code, 0) << putAgain.err;
  EXPECT_EQ(json::parse(putAgain.out)["new"], 0) << putAgain.out;
  EXPECT_EQ(json::parse(putAgain.out)["duplicates"], 3) << putAgain.out;
  auto denied = runTessera({"cache", "put", file}, {url, "TESSERA_TOKEN=" + reader});
  EXPECT_EQ(denied.exit_code, 6);  // refused credentials (README "Exit codes")
  EXPECT_NE(denied.err.find("403"), std::string::npos) << denied.err;
  const std::string bad_file = dir.file("bad.jsonl");
  std::ofstream(bad_file) << encodeRecord(a) << "\n{\"key\":1}\n";
  auto bad = runTessera({"cache", "put", bad_file}, {url, "TESSERA_TOKEN=" + writer});
  EXPECT_EQ(bad.exit_code, 2);  // bad input
  EXPECT_NE(bad.err.find("line 2"), std::string::npos) << bad.err;

  auto get = runTessera({"cache", "get", "--key-id", a.key_id}, {url, "TESSERA_TOKEN=" + reader});
  ASSERT_EQ(get.exit_code, 0) << get.err;
  EXPECT_EQ(json::parse(get.out)["record"]["result"]["median_us"], 20);
  const HardKey& k = a.key;
  std::vector<std::string> key_args = {"cache", "get", "--family", k.family, "--workload", k.workload, "--shape",
                                       "64x64x999", "--dtype", k.dtype, "--target", k.target, "--arch", k.arch,
                                       "--units", std::to_string(k.units)};
  auto near = runTessera(key_args, {url, "TESSERA_TOKEN=" + reader});
  ASSERT_EQ(near.exit_code, 0) << near.err;
  EXPECT_EQ(json::parse(near.out)["match"], "nearest");
  key_args.push_back("--no-nearest");
  auto miss = runTessera(key_args, {url, "TESSERA_TOKEN=" + reader});
  EXPECT_EQ(miss.exit_code, 5);  // none found: its own code, not a compile error's 3
  EXPECT_NE(miss.err.find("miss"), std::string::npos);
  auto down = runTessera({"cache", "get", "--key-id", a.key_id, "--cache", "http://127.0.0.1:1", "--timeout", "0.5"});
  // Nobody answered: not a miss (exit 5) but an unreachable service (exit 7), in one line.
  EXPECT_EQ(down.exit_code, 7) << down.err;
  // In words, not cpp-httplib's enum name, the URL once, and no "continuing without it" on the
  // error that ends the command (before: "tessera cache URL: URL: GET /v1/best/...: Connection;
  // continuing without it").
  EXPECT_NE(down.err.find("tessera cache http://127.0.0.1:1: GET /v1/best/"), std::string::npos) << down.err;
  EXPECT_NE(down.err.find(": could not connect"), std::string::npos) << down.err;
  EXPECT_EQ(down.err.find("continuing"), std::string::npos) << down.err;
  EXPECT_NE(down.err.find("tessera: error:"), std::string::npos) << down.err;
  EXPECT_EQ(std::count(down.err.begin(), down.err.end(), '\n'), 1) << down.err;
  EXPECT_EQ(runTessera({"cache", "get", "--key-id", a.key_id}).exit_code, 2);  // no URL configured

  auto stats = runTessera({"cache", "stats"}, {url, "TESSERA_TOKEN=" + reader});
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  EXPECT_EQ(json::parse(stats.out)["records"], 3);
  auto statsJson = runTessera({"cache", "stats", "--json"}, {url, "TESSERA_TOKEN=" + reader});  // refused before issue 48
  ASSERT_EQ(statsJson.exit_code, 0) << statsJson.err;
  EXPECT_EQ(json::parse(statsJson.out)["records"], 3);

  const std::string exported = dir.file("export.jsonl");
  auto ex = runTessera({"cache", "export", "-o", exported}, {url, "TESSERA_TOKEN=" + reader});
  ASSERT_EQ(ex.exit_code, 0) << ex.err;
  EXPECT_NE(ex.err.find("exported 3 records"), std::string::npos) << ex.err;

  // Import into a second, empty service: same winner.
  const std::string db2 = dir.file("second.db");
  const std::string writer2 = trimmed(runTessera({"serve", "token", "add", "w", "--scope", "write", "--db", db2}).out);
  test::TempDir dir2;
  test::ServeProcess srv2(db2, dir2.path(), {"--allow-anonymous-reads"});
  const std::string url2 = "TESSERA_CACHE_URL=http://127.0.0.1:" + std::to_string(srv2.port());
  auto imp = runTessera({"cache", "import", exported}, {url2, "TESSERA_TOKEN=" + writer2});
  ASSERT_EQ(imp.exit_code, 0) << imp.err;
  // An empty service: every record is new, the slow one too (it was reported "kept" before
  // issue 48, as if the service had it already); a second import finds them all present.
  EXPECT_NE(imp.out.find("imported 3 records: 3 new, 0 already present; winners: 1 of new keys, 1 improved (1 new "
                         "records did not beat their key's winner)"),
            std::string::npos)
      << imp.out;
  auto again = runTessera({"cache", "import", exported}, {url2, "TESSERA_TOKEN=" + writer2});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("imported 3 records: 0 new, 3 already present"), std::string::npos) << again.out;
  auto get2 = runTessera({"cache", "get", "--key-id", a.key_id}, {url2});
  ASSERT_EQ(get2.exit_code, 0);
  EXPECT_EQ(json::parse(get2.out)["record"]["result"]["median_us"], 20);

  auto backup = runTessera({"cache", "backup", "--label", "cli"}, {url, "TESSERA_TOKEN=" + admin});
  ASSERT_EQ(backup.exit_code, 0) << backup.err;
  const std::string backup_path = json::parse(backup.out)["path"];
  EXPECT_EQ(test::integrityCheck(backup_path), "ok");
  auto offline = runTessera({"serve", "backup", "--db", db, dir.file("offline.db")});
  ASSERT_EQ(offline.exit_code, 0) << offline.err;
  EXPECT_EQ(test::queryRows(dir.file("offline.db"), "SELECT count(*) FROM records")[0][0], "3");

  srv.kill(SIGTERM);
  EXPECT_TRUE(WIFEXITED(srv.exitStatus()) && WEXITSTATUS(srv.exitStatus()) == 0) << srv.log();
  EXPECT_NE(srv.log().find("stopping"), std::string::npos);
}

TEST(Cli, ServeRefusesForeignDatabasesAndTakenPorts) {
  test::TempDir dir;
  const std::string junk = dir.file("junk.db");
  std::ofstream(junk) << "not a database at all, but long enough to have a header of sorts";
  auto r = runTessera({"serve", "--db", junk, "--port", "0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("tessera: error:"), std::string::npos) << r.err;
  test::ServeProcess srv(dir.file("ok.db"), dir.path());
  auto taken = runTessera({"serve", "--db", dir.file("other.db"), "--port", std::to_string(srv.port())});
  EXPECT_EQ(taken.exit_code, 1);
  EXPECT_NE(taken.err.find("cannot listen"), std::string::npos) << taken.err;
  EXPECT_NE(runTessera({"serve", "--db", dir.file("x.db"), "--sync", "sometimes"}).exit_code, 0);
}

}  // namespace
}  // namespace tessera::cache

namespace tessera::cache {
namespace {

// The admin commands of the trust model (issue 15) through the real binaries: list by writer,
// quarantine (dry run first), release, delete, and a revocation that retracts a token's records
// while the server runs.
TEST(Cli, AdminListsQuarantinesDeletesAndRevocationRetracts) {
  test::TempDir dir;
  const std::string db = dir.file("admin.db");
  auto add = [&](const std::string& name, const std::string& scope) {
    return trimmed(runTessera({"serve", "token", "add", name, "--scope", scope, "--db", db}).out);
  };
  const std::string alice = add("alice", "write"), mallory = add("mallory", "write"), ops = add("ops", "admin");
  test::ServeProcess srv(db, dir.path(), {"--sync", "normal"});
  const std::string url = "TESSERA_CACHE_URL=http://127.0.0.1:" + std::to_string(srv.port());
  auto as = [&](const std::string& token, const std::vector<std::string>& args) {
    return runTessera(args, {url, "TESSERA_TOKEN=" + token});
  };
  Record honest = test::makeRecord({.key = 5, .median_us = 50});
  Record junk = test::makeRecord({.key = 5, .median_us = 5, .config = R"({"MC":16})"});
  std::ofstream(dir.file("h.json")) << encodeRecord(honest);
  std::ofstream(dir.file("j.json")) << encodeRecord(junk);
  ASSERT_EQ(as(alice, {"cache", "put", dir.file("h.json")}).exit_code, 0);
  ASSERT_EQ(as(mallory, {"cache", "put", dir.file("j.json")}).exit_code, 0);
  auto winner = [&] {
    return json::parse(as(ops, {"cache", "get", "--key-id", honest.key_id}).out)["record"];
  };
  EXPECT_EQ(winner()["writer"], "mallory");

  auto listed = as(ops, {"cache", "list", "--writer", "mallory"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_EQ(std::count(listed.out.begin(), listed.out.end(), '\n'), 1);
  EXPECT_NE(listed.out.find("\"writer\":\"mallory\""), std::string::npos) << listed.out;
  EXPECT_NE(as(ops, {"cache", "quarantine", "--writer", "mallory", "--dry-run"}).out.find("would quarantine 1 records"),
            std::string::npos);
  EXPECT_EQ(winner()["writer"], "mallory");
  EXPECT_NE(as(ops, {"cache", "quarantine", "--writer", "mallory"}).out.find("quarantined 1 records"), std::string::npos);
  EXPECT_EQ(winner()["writer"], "alice");
  EXPECT_NE(as(ops, {"cache", "quarantine", "--writer", "mallory", "--release"}).out.find("released 1"),
            std::string::npos);
  EXPECT_EQ(winner()["writer"], "mallory");
  EXPECT_NE(as(ops, {"cache", "delete", "--key-id", honest.key_id, "--writer", "mallory"}).out.find("deleted 1"),
            std::string::npos);
  EXPECT_EQ(winner()["writer"], "alice");
  // Refusals: no selector, not an admin.
  EXPECT_EQ(as(ops, {"cache", "delete"}).exit_code, 2);
  auto denied = as(alice, {"cache", "delete", "--writer", "alice"});
  EXPECT_EQ(denied.exit_code, 6);
  EXPECT_NE(denied.err.find("403"), std::string::npos) << denied.err;

  // Revoking alice with --retract quarantine: her token stops working and her winner is gone
  // within the server's refresh interval.
  auto revoked = runTessera({"serve", "token", "revoke", "alice", "--retract", "quarantine", "--db", db});
  ASSERT_EQ(revoked.exit_code, 0) << revoked.err;
  EXPECT_NE(revoked.out.find("quarantined 1 records written by alice"), std::string::npos) << revoked.out;
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(as(ops, {"cache", "get", "--key-id", honest.key_id}).exit_code, 5);
  EXPECT_EQ(as(alice, {"cache", "stats"}).exit_code, 6);  // a revoked token: 401
}

}  // namespace
}  // namespace tessera::cache

namespace tessera::cache {
namespace {

// `cache get` by the short hash `tessera run` prints (12 characters), ambiguous prefixes refused;
// a refused token is an error (6) on every client command, never a miss or a warning; a service
// that is down is 7 for `cache`, and a warning for a tune, which goes on without it.
TEST(Cli, ShortHashesAndRefusedTokens) {
  test::TempDir dir;
  const std::string db = dir.file("short.db");
  const std::string writer = trimmed(runTessera({"serve", "token", "add", "w", "--scope", "write", "--db", db}).out);
  const std::string reader = trimmed(runTessera({"serve", "token", "add", "r", "--db", db}).out);
  test::ServeProcess srv(db, dir.path(), {"--sync", "normal"});
  const std::string base = "http://127.0.0.1:" + std::to_string(srv.port());
  const std::vector<std::string> asReader = {"TESSERA_CACHE_URL=" + base, "TESSERA_TOKEN=" + reader};
  Record a = test::makeRecord({.key = 1, .median_us = 30});
  Record b = test::makeRecord({.key = 2, .median_us = 40});
  std::ofstream(dir.file("r.jsonl")) << encodeRecord(a) << "\n" << encodeRecord(b) << "\n";
  ASSERT_EQ(runTessera({"cache", "put", dir.file("r.jsonl")}, {"TESSERA_CACHE_URL=" + base, "TESSERA_TOKEN=" + writer})
                .exit_code,
            0);

  auto byId = runTessera({"cache", "get", "--key-id", a.key_id.substr(0, 12)}, asReader);
  ASSERT_EQ(byId.exit_code, 0) << byId.err;
  EXPECT_EQ(json::parse(byId.out)["record"]["key_id"], a.key_id);
  auto byWorkload = runTessera({"cache", "get", "--workload", b.key.workload}, asReader);
  ASSERT_EQ(byWorkload.exit_code, 0) << byWorkload.err;
  EXPECT_EQ(json::parse(byWorkload.out)["record"]["key_id"], b.key_id);
  // Both workloads start with 00c0ffee: refused, naming the candidates, unless a field decides.
  auto ambiguous = runTessera({"cache", "get", "--workload", "00c0ffee"}, asReader);
  EXPECT_EQ(ambiguous.exit_code, 2) << ambiguous.err;
  EXPECT_NE(ambiguous.err.find("ambiguous: 2 stored keys match"), std::string::npos) << ambiguous.err;
  EXPECT_EQ(std::count(ambiguous.err.begin(), ambiguous.err.end(), '\n'), 1) << ambiguous.err;
  auto decided = runTessera({"cache", "get", "--workload", "00c0ffee", "--shape", formatShape(a.key.shape)}, asReader);
  EXPECT_EQ(decided.exit_code, 0) << decided.err;
  auto unknown = runTessera({"cache", "get", "--key-id", "0123abcd0123"}, asReader);
  EXPECT_EQ(unknown.exit_code, 5) << unknown.err;
  EXPECT_EQ(runTessera({"cache", "get", "--key-id", "xyz!"}, asReader).exit_code, 2);

  // Refusals: an unknown token, a revoked one, a scope too low.
  auto badToken = runTessera({"cache", "get", "--key-id", a.key_id, "--token", "tsk_not-a-token"},
                             {"TESSERA_CACHE_URL=" + base});
  EXPECT_EQ(badToken.exit_code, 6) << badToken.err;
  EXPECT_NE(badToken.err.find("401"), std::string::npos) << badToken.err;
  EXPECT_EQ(std::count(badToken.err.begin(), badToken.err.end(), '\n'), 1) << badToken.err;
  EXPECT_EQ(runTessera({"cache", "stats", "--token", "tsk_not-a-token"}, {"TESSERA_CACHE_URL=" + base}).exit_code, 6);
  EXPECT_EQ(runTessera({"cache", "put", dir.file("r.jsonl")}, asReader).exit_code, 6);
  auto down = runTessera({"cache", "stats", "--cache", "http://127.0.0.1:1", "--timeout", "0.5"});
  EXPECT_EQ(down.exit_code, 7) << down.err;
  EXPECT_NE(down.err.find("GET /status: could not connect"), std::string::npos) << down.err;

  // A tune that would share nothing: refused before it measures (6), in one line with what to do.
  // The control: the same tune with the writer's token, and one against a service that is down
  // (a warning: a cache that is down is a miss).
  auto help = runTessera({"tune", "--help"});
  if (help.exit_code != 0) GTEST_SKIP() << "this build has no compiler commands";
  const std::vector<std::string> tune = {"tune",  "--trials", "1", "--top-k", "0", "--min-time", "0.001", "--db",
                                         dir.file("local.db"), "gemm", "--m", "8", "--n", "8", "--k", "8"};
  auto with = [&](std::vector<std::string> front) {
    front.insert(front.end(), tune.begin() + 1, tune.end());
    front.insert(front.begin(), "tune");
    return front;
  };
  auto unknownToken = runTessera(with({"--cache", base, "--token", "tsk_not-a-token"}));
  EXPECT_EQ(unknownToken.exit_code, 6) << unknownToken.err;
  EXPECT_NE(unknownToken.err.find("401"), std::string::npos) << unknownToken.err;
  auto noToken = runTessera(with({"--cache", base}));
  EXPECT_EQ(noToken.exit_code, 6) << noToken.err;
  EXPECT_NE(noToken.err.find("needs a read token, but no token was given"), std::string::npos) << noToken.err;
  EXPECT_EQ(std::count(noToken.err.begin(), noToken.err.end(), '\n'), 1) << noToken.err;
  // A person's read token tunes with the shared winners; that its results stay local is said.
  auto readOnly = runTessera(with({"--cache", base}), {"TESSERA_TOKEN=" + reader});
  EXPECT_EQ(readOnly.exit_code, 0) << readOnly.err;
  EXPECT_NE(readOnly.err.find("needs a write token, but token 'r' has scope read"), std::string::npos) << readOnly.err;
  EXPECT_NE(readOnly.err.find("stays in the local store"), std::string::npos) << readOnly.err;
  auto best = runTessera({"best", "--cache", base, "--token", "tsk_not-a-token", "--db", dir.file("local.db"), "gemm",
                          "--m", "8", "--n", "8", "--k", "8"});
  EXPECT_EQ(best.exit_code, 6) << best.err;
  auto written = runTessera(with({"--cache", base, "--token", writer}));
  EXPECT_EQ(written.exit_code, 0) << written.err;
  auto downTune = runTessera(with({"--cache", "http://127.0.0.1:1", "--token", writer, "--force"}));
  EXPECT_EQ(downTune.exit_code, 0) << downTune.err;
  EXPECT_NE(downTune.err.find("warning"), std::string::npos) << downTune.err;
  // The URL once ("tessera cache URL: URL: GET /v1/whoami: ..." before).
  EXPECT_EQ(downTune.err.find("http://127.0.0.1:1: http://127.0.0.1:1"), std::string::npos) << downTune.err;
  EXPECT_NE(downTune.err.find("tessera cache http://127.0.0.1:1: GET /v1/whoami: could not connect"), std::string::npos)
      << downTune.err;
}

}  // namespace
}  // namespace tessera::cache
