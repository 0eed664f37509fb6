// Tests that kernel texts travel with bulk transfers on every engine: GET /v1/export puts each
// workload's checked text on its first record of a page, POST /v1/import files what it receives
// after the same checks as any input (the text must hash to the record's workload, printable, at
// most 64 KiB), and the kernel table answers hash prefixes (kernelTextWorkloads).
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <map>
#include <set>

#include "store/engine.h"
#include "store/record_json.h"
#include "support/hash.h"
#include "tests/cache_service/test_util.h"

namespace tessera::cache {
namespace {

using nlohmann::json;
using test::Engine;
using test::makeRecord;
using test::Reply;
using test::ServerFixture;

// A small valid canonical text per n (what the kernel table accepts: it hashes to its workload).
std::string textOf(int n) {
  return "kernel _ : elementwise {\n  in t0: f32[" + std::to_string(n + 1) + "]\n  out t1: f32[" + std::to_string(n + 1) +
         "]\n  t1[v0] = t0[v0] + 1\n}\n";
}

// Records of key `key` whose workload is textOf(n)'s hash, the text on each (as a tune pushes them).
std::vector<json> recordsOf(int key, int n, int count) {
  std::vector<json> out;
  for (int i = 0; i < count; ++i) {
    // An elementwise key with a config of its space (legality.h): distinct configs by UNROLL.
    Record r = makeRecord({.key = key, .median_us = 10.0 + i, .config = "{\"UNROLL\":" + std::to_string(1 << i) + "}"});
    r.key.family = "elementwise";
    r.key.workload = sha256Hex(textOf(n));
    r.key_id = keyIdOf(r.key);
    json j = recordToJson(r);
    j["kernel_ir"] = textOf(n);
    out.push_back(j);
  }
  return out;
}

std::string exportAll(ServerFixture& f, int limit) {
  std::string all, since = "0";
  for (int pages = 0; pages < 50; ++pages) {
    Reply page = f.get("/v1/export?limit=" + std::to_string(limit) + "&since=" + since, f.read_token);
    EXPECT_EQ(page.status, 200) << page.body;
    all += page.body;
    since = page.header("Tessera-Next-Since");
    if (page.header("Tessera-More") != "true") break;
  }
  return all;
}

std::vector<json> lines(const std::string& body) {
  std::vector<json> out;
  for (size_t at = 0; at < body.size();) {
    size_t nl = body.find('\n', at);
    out.push_back(json::parse(body.substr(at, nl - at)));
    at = nl + 1;
  }
  return out;
}

class KernelTextTransfer : public ::testing::TestWithParam<Engine> {};

TEST_P(KernelTextTransfer, ExportCarriesEachTextOncePerPageAndImportFilesIt) {
  ServerFixture src(test::testOptions(), true, GetParam()), dst(test::testOptions(), true, GetParam());
  json body = json::array();
  for (const auto& r : recordsOf(1, 1, 3)) body.push_back(r);
  for (const auto& r : recordsOf(2, 2, 2)) body.push_back(r);
  body.push_back(recordToJson(makeRecord({.key = 3})));  // a kernel of no known text
  ASSERT_EQ(src.post("/v1/records", json{{"records", body}}.dump(), src.write_token).status, 200);

  const std::string all = exportAll(src, 2);  // pages of 2: the first workload's text on pages 1 and 2
  auto ls = lines(all);
  ASSERT_EQ(ls.size(), 6u) << all;
  std::map<std::string, int> carried;
  for (const auto& l : ls)
    if (l.contains("kernel_ir")) {
      EXPECT_EQ(sha256Hex(l["kernel_ir"].get<std::string>()), l["key"]["workload"]);
      ++carried[l["key"]["workload"]];
    }
  EXPECT_EQ(carried.size(), 2u) << all;
  for (const auto& [w, n] : carried) EXPECT_LE(n, 2) << w;

  Reply imp = dst.post("/v1/import", all, dst.write_token, "application/x-ndjson");
  ASSERT_EQ(imp.status, 200) << imp.body;
  for (int n : {1, 2}) {
    Reply got = dst.get("/v1/kernel-texts/" + sha256Hex(textOf(n)), dst.read_token);
    EXPECT_EQ(got.status, 200) << got.body;
    EXPECT_EQ(got.body, textOf(n));
  }
  EXPECT_EQ(test::queryRows(dst.db, "SELECT count(*) FROM kernel_texts")[0][0], "2");

  // A text changed behind the source service's back is left out of the export (an import would
  // refuse its line), and its record still goes.
  const std::string damage = "UPDATE kernel_texts SET ir = ir || 'x' WHERE workload = '" + sha256Hex(textOf(2)) + "'";
  if (GetParam() == Engine::Sqlite) {
    sqlite3* h = nullptr;  // queryRows opens SQLite files read-only
    ASSERT_EQ(sqlite3_open(src.db.c_str(), &h), SQLITE_OK);
    sqlite3_busy_timeout(h, 5000);
    EXPECT_EQ(sqlite3_exec(h, damage.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(h);
  } else {
    test::queryRows(src.db, damage);
  }
  auto again = lines(exportAll(src, 100));
  ASSERT_EQ(again.size(), 6u);
  EXPECT_EQ(std::count_if(again.begin(), again.end(), [](const json& l) { return l.contains("kernel_ir"); }), 1);
}

TEST_P(KernelTextTransfer, ImportRefusesTamperedOversizedAndHostileTexts) {
  ServerFixture f(test::testOptions(), true, GetParam());
  const json good = recordsOf(1, 1, 1)[0];
  json swapped = recordsOf(2, 2, 1)[0];
  swapped["kernel_ir"] = textOf(1);  // a valid kernel, not the one its workload names
  json hostile = recordsOf(3, 3, 1)[0];
  hostile["kernel_ir"] = textOf(3) + "<script>\x07</script>";
  json huge = recordsOf(4, 4, 1)[0];
  huge["kernel_ir"] = std::string(70 * 1024, 'a');
  json notString = recordsOf(5, 5, 1)[0];
  notString["kernel_ir"] = json::array({1, 2});
  json endless = recordsOf(6, 6, 1)[0];
  endless["kernel_ir"] = std::string(300 * 1024, 'a');  // over any line a record may take
  for (const json* bad : {&swapped, &hostile, &huge, &notString, &endless}) {
    Reply r = f.post("/v1/import", good.dump() + "\n" + bad->dump() + "\n", f.write_token, "application/x-ndjson");
    EXPECT_EQ(r.status, 422) << r.body;
    auto j = json::parse(r.body);
    ASSERT_EQ(j["errors"].size(), 1u) << r.body;
    EXPECT_EQ(j["errors"][0]["line"], 2);
    const std::string detail = j["errors"][0]["detail"];
    EXPECT_NE(detail.find(bad == &endless ? "larger than" : "kernel_ir"), std::string::npos) << detail;
    EXPECT_EQ(detail.find('\n'), std::string::npos) << detail;
    EXPECT_EQ(test::queryRows(f.db, "SELECT count(*) FROM kernel_texts")[0][0], "0");
    EXPECT_EQ(test::queryRows(f.db, "SELECT count(*) FROM records")[0][0], "0");
  }
  // partial=1: the good line and its text go in; the swapped text is filed under no workload.
  Reply part = f.post("/v1/import?partial=1", good.dump() + "\n" + swapped.dump() + "\n", f.write_token, "application/x-ndjson");
  ASSERT_EQ(part.status, 200) << part.body;
  EXPECT_EQ(json::parse(part.body)["invalid_lines"], 1);
  EXPECT_EQ(test::queryRows(f.db, "SELECT workload FROM kernel_texts"),
            (std::vector<std::vector<std::string>>{{sha256Hex(textOf(1))}}));
}

TEST_P(KernelTextTransfer, TheKernelTableAnswersHashPrefixes) {
  ServerFixture f(test::testOptions(), true, GetParam());
  auto store = GetParam() == Engine::Sqlite ? openSqliteStore(f.db) : openStore(f.db);
  ASSERT_TRUE(store.ok()) << store.error().message;
  auto mem = makeMemoryStore();
  std::set<std::string> all;
  for (int n = 0; n < 40; ++n) {  // 40 hashes over 16 first digits: some share one
    ASSERT_TRUE((*store)->putKernelText(sha256Hex(textOf(n)), textOf(n)).ok());
    ASSERT_TRUE(mem->putKernelText(sha256Hex(textOf(n)), textOf(n)).ok());
    all.insert(sha256Hex(textOf(n)));
  }
  for (RecordStore* s : {store->get(), mem.get()}) {
    for (const std::string& w : all) {
      std::vector<std::string> want;
      for (const std::string& v : all)
        if (v[0] == w[0]) want.push_back(v);
      auto got = s->kernelTextWorkloads(w.substr(0, 1), 100);
      ASSERT_TRUE(got.ok()) << got.error().message;
      EXPECT_EQ(*got, want) << w;
      auto one = s->kernelTextWorkloads(w, 100);
      ASSERT_TRUE(one.ok());
      EXPECT_EQ(*one, std::vector<std::string>{w});
      auto capped = s->kernelTextWorkloads(w.substr(0, 1), 1);
      ASSERT_TRUE(capped.ok());
      EXPECT_EQ(capped->size(), 1u);
    }
    auto none = s->kernelTextWorkloads(std::string(64, '0'), 10);  // a hash it does not hold
    ASSERT_TRUE(none.ok());
    EXPECT_TRUE(none->empty());
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, KernelTextTransfer, ::testing::ValuesIn(test::builtEngines()),
                         [](const auto& info) { return std::string(test::engineName(info.param)); });

}  // namespace
}  // namespace tessera::cache
