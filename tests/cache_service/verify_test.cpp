// Tests that clients verify a shared winner before they trust it (issue 15, the end of finding 1:
// `tessera tune` pointed at a poisoned cache printed "already tuned" with the junk config, exited
// 0 and copied it into the local store). Through the real binaries: a config the kernel's space
// does not allow, and a plausible config with a made-up time, are reported, never stored locally,
// and the tune goes on; an honest winner still ends the tune at once; `tessera best` shows a
// shared winner only once it passed. Skipped in builds without the code generator.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <thread>
#include <nlohmann/json.hpp>

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

const std::vector<std::string> kKernel = {"gemm", "--m", "32", "--n", "32", "--k", "32"};

std::vector<std::string> cmd(std::vector<std::string> head, const std::vector<std::string>& tail = {}) {
  head.insert(head.end(), kKernel.begin(), kKernel.end());
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

// A record for this machine's key of the kernel (from `tessera best --json`).
std::string recordFor(const json& key, const std::string& config, double median_us, bool remeasured = false,
                      json provenance = {{"tessera_version", "0.1.0"}, {"llvm_version", "22"},
                                         {"created_at", "2025-01-01T00:00:00Z"}}) {
  json r = {{"key", key},
            {"provenance", provenance},
            {"config", json::parse(config)},
            {"status", "ok"},
            {"result", {{"n", 10}, {"median_us", median_us}, {"p20_us", median_us}, {"p80_us", median_us}}}};
  if (remeasured) r["result"]["remeasured"] = true;
  return r.dump();
}

TEST(Verify, SharedWinnersAreCheckedBeforeTheyAreTrusted) {
  if (runTessera({"tune", "--help"}).exit_code != 0) GTEST_SKIP() << "this build has no code generator";
  test::TempDir dir;
  const std::string sdb = dir.file("shared.db");
  const std::string writer = trimmed(runTessera({"serve", "token", "add", "w", "--scope", "write", "--db", sdb}).out);
  const std::string reader = trimmed(runTessera({"serve", "token", "add", "r", "--db", sdb}).out);
  test::ServeProcess srv(sdb, dir.path(), {"--sync", "normal"});
  const std::string url = "TESSERA_CACHE_URL=http://127.0.0.1:" + std::to_string(srv.port());

  auto probe = runTessera(cmd({"best", "--json", "--db", dir.file("none.db")}));
  auto key = json::parse(probe.out)["key"];
  ASSERT_TRUE(key.is_object()) << probe.out << probe.err;
  auto put = [&](const std::string& body) {
    std::ofstream(dir.file("r.json")) << body;
    auto r = runTessera({"cache", "put", dir.file("r.json")}, {url, "TESSERA_TOKEN=" + writer});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  };

  // 1. A config the service accepts (known knob, value in range) that this kernel's space does
  // not allow: refused by the client, not stored locally, and the tune goes on.
  put(recordFor(key, R"({"MC":999,"schedule":"packed"})", 5.0));
  auto best = runTessera(cmd({"best", "--db", dir.file("none.db")}), {url, "TESSERA_TOKEN=" + reader});
  EXPECT_EQ(best.exit_code, 5) << best.out << best.err;
  EXPECT_NE(best.err.find("failed verification"), std::string::npos) << best.err;
  const std::string local1 = dir.file("local1.db");
  auto tune = runTessera(cmd({"tune", "--db", local1}, {"--trials", "2", "--top-k", "0", "--min-time", "0.005"}),
                         {url, "TESSERA_TOKEN=" + writer});
  EXPECT_EQ(tune.exit_code, 0) << tune.err;
  EXPECT_EQ(tune.out.find("already tuned"), std::string::npos) << tune.out;
  EXPECT_NE(tune.err.find("failed verification"), std::string::npos) << tune.err;
  EXPECT_NE(tune.err.find("not legal here"), std::string::npos) << tune.err;
  EXPECT_NE(tune.out.find("best config"), std::string::npos) << tune.out;
  EXPECT_TRUE(test::queryRows(local1, "SELECT 1 FROM records WHERE config LIKE '%999%'").empty());

  // 2. A legal config with a made-up time (plausible for the roofline, up to 10x faster than
  // this machine runs it), posted as a plain measurement
  // and again as "re-measured" (issue 25, finding 1: the second request made the claim outrank
  // everything). One token's word is a claim: every client re-times it before use (no
  // --verify-time needed) and refuses it.
  auto local_best = runTessera(cmd({"best", "--json", "--db", local1}));
  auto mine = json::parse(local_best.out)["record"];
  ASSERT_TRUE(mine.is_object()) << local_best.out;
  const std::string cfg = mine["config"].dump();
  const double real_us = mine["result"]["median_us"];
  // The provenance of this machine's record (an attacker copies it, or the asker's CPU would not
  // match and the service would prefer the honest record anyway).
  json prov = mine["provenance"];
  prov["created_at"] = "2025-01-01T00:00:00Z";
  // 10x faster, or as fast as the roofline check lets through where the host runs the kernel
  // within 10x of its roofline (CI's hosts vary; a Zen 4 ran it at 0.81 us against a bound of 0.17).
  const auto lie = test::lieTimeUs(key.dump(), cfg, real_us, 10);
  if (!lie) GTEST_SKIP() << "this host runs the kernel at its roofline (" << real_us << " us): no lie is plausible";
  put(recordFor(key, cfg, *lie, false, prov));
  put(recordFor(key, cfg, *lie * 1.01, /*remeasured=*/true, prov));
  const std::string local2 = dir.file("local2.db");
  auto timed = runTessera(cmd({"tune", "--db", local2}, {"--trials", "2", "--top-k", "0", "--min-time", "0.01"}),
                          {url, "TESSERA_TOKEN=" + reader});
  EXPECT_EQ(timed.exit_code, 0) << timed.err;
  EXPECT_EQ(timed.out.find("already tuned"), std::string::npos) << timed.out;
  EXPECT_NE(timed.err.find("re-timed at"), std::string::npos) << timed.err;
  // `best` refuses the claim too, says so, records the refutation (every record of w's claimed
  // config is disputed) and falls back to the next candidate: w's honest records of other configs
  // from step 1 (issue 47: it exited 5 here although they were stored).
  auto refused = runTessera(cmd({"best", "--db", dir.file("none.db")}), {url, "TESSERA_TOKEN=" + reader});
  EXPECT_EQ(refused.exit_code, 0) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("re-timed at"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("skipped the shared cache's candidate (config " + json::parse(cfg).dump()), std::string::npos)
      << refused.err;
  EXPECT_EQ(refused.out.find("config      " + json::parse(cfg).dump() + "\n"), std::string::npos) << refused.out;
  auto demoted = test::queryRows(sdb, "SELECT count(*) FROM records WHERE writer = 'w' AND config = '" +
                                          json::parse(cfg).dump() + "' AND trust = -2");
  EXPECT_GE(std::stoi(demoted[0][0]), 2) << "the claim and its re-measured form (and w's own records of the config) are disputed";

  // 3. A second identity (another write token) tunes: the disputed claim is no longer the winner
  // it meets (issue 47: before, it re-timed and refused the claim here too, and its measurement
  // refuted it). Whatever it measures, the claim is never served again; an honest winner is (w's
  // own measurement of step 1, confirmed by w2's when they agree, or w2's claim), and passes.
  const std::string writer2 = trimmed(runTessera({"serve", "token", "add", "w2", "--scope", "write", "--db", sdb}).out);
  ASSERT_TRUE(test::awaitToken(url.substr(url.find('=') + 1), writer2));  // the server's next token refresh
  auto second = runTessera(cmd({"tune", "--db", dir.file("local3.db")}, {"--trials", "2", "--min-time", "0.01"}),
                           {url, "TESSERA_TOKEN=" + writer2});
  EXPECT_EQ(second.exit_code, 0) << second.err;
  auto refuted = test::queryRows(sdb, "SELECT count(*) FROM records WHERE writer = 'w' AND config = '" +
                                          json::parse(cfg).dump() + "' AND trust < 0");
  EXPECT_EQ(refuted[0][0], demoted[0][0]) << "both forms of the claim stay disputed or refuted";
  auto shown = runTessera(cmd({"best", "--db", dir.file("none.db")}), {url, "TESSERA_TOKEN=" + reader});
  EXPECT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find("matches the reference"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("trust       "), std::string::npos) << shown.out;
  EXPECT_EQ(shown.out.find(json::parse(cfg).dump() + "\ntime        " + std::to_string(*lie).substr(0, 4)),
            std::string::npos)
      << shown.out;
  // Before (main): step 2's tune said "already tuned" and `best` showed the claim, "compiled, run
  // and matches the reference here", unless --verify-time was given.
  EXPECT_NE(shown.out.find("written by  token w"), std::string::npos) << shown.out;
  // --verify-time re-times the honest winner too, and it holds.
  auto retimed = runTessera(cmd({"best", "--verify-time", "--db", dir.file("none.db")}), {url, "TESSERA_TOKEN=" + reader});
  EXPECT_EQ(retimed.exit_code, 0) << retimed.err;
  EXPECT_NE(retimed.out.find("matches the reference"), std::string::npos) << retimed.out;
}

}  // namespace
}  // namespace tessera::cache
