// Tests that a fused winner stays rebuildable wherever it travels, end to end with the real binaries
// on loopback: a `tune` or `best` answered by the shared cache leaves the kernel's IR text in the
// local store (which then bundles or compares it alone, by a hash prefix even with no records), and
// `tessera cache export` / `import` carry the texts to another service, where a tampered text is
// refused with one line and nothing imported.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "client/client.h"
#include "client/http.h"
#include "store/store.h"
#include "support/hash.h"
#include "tests/cache_service/process_util.h"
#include "tests/cache_service/test_util.h"
#include "tests/tune/team_util.h"

namespace {

using nlohmann::json;
using tessera::cache::test::queryRows;
using tessera::cache::test::runTessera;
using tessera::test::Service;
using tessera::test::slurp;

using Rows = std::vector<std::vector<std::string>>;

const std::vector<std::string> kChain = {"elementwise", "--expr", "y = gelu(x * 2 + z)", "--shape", "64x96"};

std::vector<std::string> with(std::vector<std::string> head, const std::vector<std::string>& tail) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

std::vector<std::string> bundleAll(const std::string& db, const std::string& out) {
  return {"bundle", "--all-winners", "--targets", "host", "--threads", "1", "--json", "--replace", "--db", db, "--out", out};
}

std::vector<std::string> compareKey(const std::string& db, const std::string& hash) {
  return {"compare", "--json", "--targets", "host", "--threads", "1", "--db", db, "key", hash};
}

size_t exact(const std::string& manifest) {
  size_t n = 0;
  for (size_t at = manifest.find("\"source\": \"exact\""); at != std::string::npos; at = manifest.find("\"source\": \"exact\"", at + 1)) ++n;
  return n;
}

}  // namespace

TEST(KernelTexts, ATuneOrBestHitFromTheCacheLeavesTheFusedWinnerRebuildableHere) {
  Service s(std::vector<std::string>{});
  const std::vector<std::string> tune = {"tune", "--threads", "1", "--trials", "2", "--batch", "2", "--min-time", "0.002", "--top-k", "1"};
  auto alice = runTessera(with(with(tune, {"--db", s.dir.file("alice.db")}), kChain), s.tuneEnv());
  ASSERT_EQ(alice.exit_code, 0) << alice.out << alice.err;
  auto texts = queryRows(s.db, "SELECT workload FROM kernel_texts");
  ASSERT_EQ(texts.size(), 1u) << alice.err;
  const std::string w = texts[0][0];

  // The service's compare (the dashboard's Compare page) rebuilds the chain from that text: its key
  // alone does not say what the chain computes. A key with no text that its key cannot rebuild is
  // refused with the way out (the negative control).
  auto compare = [&](const std::string& key_id) {
    auto conn = tessera::cache::openHttpConnection(s.url, 2.0);
    EXPECT_TRUE(conn.ok());
    auto r = (*conn)->send("POST", "/v1/compare", {{"Authorization", "Bearer " + s.tuner}},
                           json{{"key_id", key_id}, {"targets", {"host"}}}.dump(), "application/json", 60.0);
    EXPECT_TRUE(r.ok());
    return std::make_pair(r->status, r->body);
  };
  const auto keyIds = queryRows(s.db, "SELECT key_id FROM keys WHERE workload = '" + w + "'");
  ASSERT_EQ(keyIds.size(), 1u);
  auto [status, body] = compare(keyIds[0][0]);
  ASSERT_EQ(status, 200) << body;
  EXPECT_EQ(json::parse(body)["kernel"], "elementwise_" + w.substr(0, 8)) << body;
  {
    // A GEMM key whose workload is no GEMM's the key describes (as a fused one's is): no text, refused.
    tessera::cache::Record bare = tessera::cache::test::makeRecord({.key = 3});
    tessera::cache::CacheClient client({.base_url = s.url, .token = s.tuner});
    auto put = client.put(std::vector<tessera::cache::Record>{bare});
    ASSERT_TRUE(put.ok) << put.warning;
    auto [st2, body2] = compare(bare.key_id);
    EXPECT_EQ(st2, 422) << body2;
    EXPECT_NE(body2.find("no text"), std::string::npos) << body2;
  }

  // Dave tunes the same chain into a fresh store: the shared cache answers, and his store keeps the
  // winner and the kernel's text, so it bundles the chain with no cache at all.
  const std::string dave = s.dir.file("dave.db");
  auto hit = runTessera(with(with(tune, {"--db", dave}), kChain), s.tuneEnv());
  ASSERT_EQ(hit.exit_code, 0) << hit.out << hit.err;
  EXPECT_NE(hit.out.find("already tuned"), std::string::npos) << hit.out << hit.err;
  EXPECT_EQ(queryRows(dave, "SELECT workload FROM kernel_texts"), (Rows{{w}}));
  auto b = runTessera(bundleAll(dave, s.dir.file("b-dave")));
  ASSERT_EQ(b.exit_code, 0) << b.out << b.err;
  const std::string manifest = slurp(s.dir.file("b-dave") + "/manifest.json");
  EXPECT_NE(manifest.find("\"family\": \"elementwise\""), std::string::npos) << manifest;
  EXPECT_EQ(exact(manifest), 1u) << manifest;

  // Erin asks `best` with a store that has nothing: the cache's winner is shown, and her store keeps
  // the text only (a lookup adds no records). `compare ... key PREFIX` then finds the kernel by a
  // prefix of its hash in that texts-only store, with no cache.
  const std::string erin = s.dir.file("erin.db");
  ASSERT_TRUE(tessera::cache::openSqliteStore(erin).ok());
  auto best = runTessera(with({"best", "--threads", "1", "--db", erin}, kChain), s.tuneEnv());
  ASSERT_EQ(best.exit_code, 0) << best.out << best.err;
  EXPECT_NE(best.out.find("from " + s.url), std::string::npos) << best.out;
  EXPECT_EQ(queryRows(erin, "SELECT workload FROM kernel_texts"), (Rows{{w}}));
  EXPECT_EQ(queryRows(erin, "SELECT count(*) FROM records")[0][0], "0");
  auto cmp = runTessera(compareKey(erin, w.substr(0, 10)));
  ASSERT_EQ(cmp.exit_code, 0) << cmp.out << cmp.err;
  EXPECT_EQ(json::parse(cmp.out)["kernel"], "elementwise_" + w.substr(0, 8)) << cmp.out;

  // Controls: a miss files nothing; a store without the text cannot resolve the prefix.
  const std::string frank = s.dir.file("frank.db");
  ASSERT_TRUE(tessera::cache::openSqliteStore(frank).ok());
  auto miss = runTessera(with({"best", "--threads", "1", "--db", frank}, kChain));
  EXPECT_EQ(miss.exit_code, 5) << miss.out << miss.err;
  EXPECT_EQ(queryRows(frank, "SELECT count(*) FROM kernel_texts")[0][0], "0");
  auto none = runTessera(compareKey(frank, w.substr(0, 10)));
  EXPECT_NE(none.exit_code, 0) << none.out;
  EXPECT_NE(none.err.find("no kernel in the store"), std::string::npos) << none.err;
}

TEST(KernelTexts, CacheExportAndImportCarryTextsAndRefuseATamperedOne) {
  Service a(std::vector<std::string>{});
  const std::vector<std::string> tune = {"tune", "--threads", "1", "--trials", "2", "--batch", "2", "--min-time", "0.002", "--top-k", "1",
                                         "--db", a.dir.file("alice.db")};
  ASSERT_EQ(runTessera(with(tune, kChain), a.tuneEnv()).exit_code, 0);
  auto epi = runTessera(with(tune, {"gemm", "--m", "32", "--n", "48", "--k", "16", "--epilogue", "relu(acc + bias)", "--shape", "bias=48"}),
                        a.tuneEnv());
  ASSERT_EQ(epi.exit_code, 0) << epi.out << epi.err;
  const Rows texts = queryRows(a.db, "SELECT workload, ir FROM kernel_texts ORDER BY workload");
  ASSERT_EQ(texts.size(), 2u);

  const std::string file = a.dir.file("export.jsonl");
  auto ex = runTessera({"cache", "export", "-o", file}, a.tuneEnv());
  ASSERT_EQ(ex.exit_code, 0) << ex.err;
  std::vector<std::string> lines;
  {
    std::ifstream in(file);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
  }
  size_t carrying = 0;
  for (const auto& line : lines) carrying += json::parse(line).contains("kernel_ir");
  EXPECT_EQ(carrying, 2u) << "one text per workload in a page";

  // Into another service: its kernel table gets both texts, and a client with an empty store
  // bundles both fused winners from it.
  Service b(std::vector<std::string>{});
  auto im = runTessera({"cache", "import", file}, b.tuneEnv());
  ASSERT_EQ(im.exit_code, 0) << im.out << im.err;
  EXPECT_EQ(queryRows(b.db, "SELECT workload, ir FROM kernel_texts ORDER BY workload"), texts);
  auto bundle = runTessera(bundleAll(b.dir.file("bob.db"), b.dir.file("b-bob")), b.tuneEnv());
  ASSERT_EQ(bundle.exit_code, 0) << bundle.out << bundle.err;
  EXPECT_EQ(exact(slurp(b.dir.file("b-bob") + "/manifest.json")), 2u) << bundle.out << bundle.err;

  // A tampered file: the GEMM's text swapped for the chain's (a valid kernel, not the one its
  // record names), then one with a control byte. Each is refused with one line, nothing imported;
  // --partial imports the other lines and files no text for the refused one.
  Service c(std::vector<std::string>{});
  for (int variant = 0; variant < 2; ++variant) {
    std::string tampered;
    bool swapped = false;
    for (const auto& line : lines) {
      json j = json::parse(line);
      if (!swapped && j.contains("kernel_ir") && j["kernel_ir"].get<std::string>().find("gemm") != std::string::npos) {
        j["kernel_ir"] = variant == 0 ? (texts[0][1].find("gemm") == std::string::npos ? texts[0][1] : texts[1][1])
                                      : j["kernel_ir"].get<std::string>() + "\x1b[2J";
        swapped = true;
      }
      tampered += j.dump() + "\n";
    }
    ASSERT_TRUE(swapped);
    const std::string bad = c.dir.file("tampered" + std::to_string(variant) + ".jsonl");
    std::ofstream(bad) << tampered;
    auto refused = runTessera({"cache", "import", bad}, c.tuneEnv());
    EXPECT_EQ(refused.exit_code, 2) << refused.out << refused.err;
    EXPECT_NE(refused.err.find("kernel_ir"), std::string::npos) << refused.err;
    EXPECT_NE(refused.err.find("nothing imported"), std::string::npos) << refused.err;
    EXPECT_EQ(std::count(refused.err.begin(), refused.err.end(), '\n'), 1) << refused.err;
    EXPECT_EQ(queryRows(c.db, "SELECT count(*) FROM records")[0][0], "0");
    EXPECT_EQ(queryRows(c.db, "SELECT count(*) FROM kernel_texts")[0][0], "0");
  }
  auto partial = runTessera({"cache", "import", "--partial", c.dir.file("tampered0.jsonl")}, c.tuneEnv());
  ASSERT_EQ(partial.exit_code, 0) << partial.out << partial.err;
  EXPECT_NE(partial.err.find("does not hash"), std::string::npos) << partial.err;
  const Rows kept = queryRows(c.db, "SELECT workload, ir FROM kernel_texts");
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(tessera::sha256Hex(kept[0][1]), kept[0][0]);
  EXPECT_EQ(kept[0][1].find("gemm"), std::string::npos) << "only the chain's own text is filed";
}
