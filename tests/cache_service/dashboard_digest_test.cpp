// Tests what makes the dashboard fast on big kernels (issue 51), service side: the kernel digest
// (one bounded answer for every record of a key, estimates kept apart and refusals counted), the
// long poll of a live page and its bound, the compression a request's Accept-Encoding chooses on
// a real server (low-quality brotli or gzip on the fly; static files compressed once, named by
// version and cached a year). What a browser makes of it: tests/ui/kernel_page_test.py.
#include <gtest/gtest.h>
#include <zlib.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "service/api.h"
#include "service/dashboard_digest.h"
#include "service/http_compress.h"
#include "store/record_json.h"
#include "service/ui_assets.h"
#include "support/hash.h"
#include "tests/cache_service/test_util.h"

namespace tessera::cache {
namespace {

using nlohmann::json;
using test::makeRecord;

std::string gunzip(const std::string& z) {
  z_stream s{};
  if (inflateInit2(&s, 15 + 32) != Z_OK) return "";
  std::string out(size_t{1} << 22, '\0');
  s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(z.data()));
  s.avail_in = static_cast<uInt>(z.size());
  s.next_out = reinterpret_cast<Bytef*>(out.data());
  s.avail_out = static_cast<uInt>(out.size());
  const int rc = inflate(&s, Z_FINISH);
  out.resize(s.total_out);
  inflateEnd(&s);
  return rc == Z_STREAM_END ? out : "";
}

// 300 records of one key in three tunes of 100 trials: ok ones whose time follows MC, estimated
// ones (another MC rule) and a refusal every 10th trial.
std::vector<Record> tuneRecords() {
  std::vector<Record> v;
  for (int i = 0; i < 300; ++i) {
    const int mc = 32 * (1 + i % 4);
    const bool refused = i % 10 == 9, estimated = i >= 200;
    Record r = makeRecord({.key = 0,
                           .median_us = estimated ? 50.0 + mc : 100.0 + mc + (i % 7),
                           .status = refused ? RecordStatus::InvalidConfig : estimated ? RecordStatus::Estimated : RecordStatus::Ok,
                           .config = "{\"MC\":" + std::to_string(mc) + ",\"NR\":" + std::to_string(8 * (1 + i % 3)) + "}"});
    r.trials = i % 100 + 1;
    r.n = estimated ? 0 : 10;
    if (estimated) r.estimator = "analytic-v1", r.bound = "compute";
    if (refused) r.median_us = r.p20_us = r.p80_us = r.gflops = 0;
    v.push_back(std::move(r));
  }
  return v;
}

TEST(DashboardDigest, SummarizesEveryRecordWithinItsBounds) {
  auto store = makeMemoryStore();
  auto records = tuneRecords();
  ASSERT_TRUE(store->put(records).ok());
  const std::string key = keyIdOf(test::keyFor(0));
  DigestLimits lim;
  lim.time_points = 50;
  lim.sample = 10;
  auto d = kernelDigestJson(*store, key, lim);
  ASSERT_TRUE(d.ok()) << d.error().message;
  const json& j = *d;
  EXPECT_EQ(j["records"], 300);
  EXPECT_FALSE(j["capped"]);
  EXPECT_EQ(j["statuses"]["invalid-config"], 30);
  EXPECT_EQ(j["statuses"]["estimated"], 90);
  EXPECT_EQ(j["statuses"]["ok"], 180);
  // Bounded: every 6th record and the sample's fastest.
  EXPECT_TRUE(j["time"]["thinned"]);
  EXPECT_LE(j["time"]["points"].size(), 60u);
  EXPECT_GE(j["time"]["points"].size(), 50u);
  ASSERT_EQ(j["sample"].size(), 10u);
  for (size_t i = 1; i < 10; ++i) EXPECT_LE(j["sample"][i - 1]["result"]["median_us"], j["sample"][i]["result"]["median_us"]);
  // Three tunes; the third only has estimates and refusals: its curve is predicted, not empty.
  ASSERT_EQ(j["tunes"].size(), 3u);
  EXPECT_FALSE(j["tunes"][0]["estimated"]);
  EXPECT_TRUE(j["tunes"][2]["estimated"]);
  int refusals = 0, best_points = 0;
  for (const json& p : j["tunes"][2]["points"]) {
    refusals += p[2] == "invalid-config";
    best_points += !p[3].is_null();
  }
  EXPECT_EQ(refusals, 10);
  EXPECT_GE(best_points, 90);
  // Knobs: measured medians from the ok records, predicted from the estimates, apart.
  auto effect = [&](const char* kind, const char* knob) {
    for (const json& e : j["knobs"][kind])
      if (e["knob"] == knob) return e;
    return json();
  };
  const json mc = effect("measured", "MC");
  ASSERT_TRUE(mc.is_object()) << j["knobs"].dump();
  EXPECT_EQ(mc["values"].size(), 4u);
  EXPECT_EQ(mc["best"]["value"], "32");
  EXPECT_EQ(mc["worst"]["value"], "128");
  EXPECT_GT(mc["importance"].get<double>(), 0.9);  // MC decides the time; NR barely
  EXPECT_LT(effect("measured", "NR")["importance"].get<double>(), 0.2);
  const json pmc = effect("predicted", "MC");
  ASSERT_TRUE(pmc.is_object());
  EXPECT_DOUBLE_EQ(pmc["best"]["median"].get<double>(), 82.0);  // 50 + 32: the estimates' own medians
  // The neighbour: a key without records digests to nothing, never to another key's records.
  auto none = kernelDigestJson(*store, std::string(64, 'a'), lim);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ((*none)["records"], 0);
  EXPECT_EQ((*none)["sample"].size(), 0u);
}

TEST(DashboardDigest, AcceptEncodingIsReadAsTheRfcSays) {
  EXPECT_EQ(acceptedEncoding("gzip, deflate, br, zstd"), Encoding::Brotli);  // Chromium's
  EXPECT_EQ(acceptedEncoding("gzip, deflate"), Encoding::Gzip);
  EXPECT_EQ(acceptedEncoding("br;q=0, gzip;q=0.5"), Encoding::Gzip);
  EXPECT_EQ(acceptedEncoding("gzip;q=0"), Encoding::Identity);
  EXPECT_EQ(acceptedEncoding("identity"), Encoding::Identity);
  EXPECT_EQ(acceptedEncoding(""), Encoding::Identity);
  EXPECT_EQ(acceptedEncoding("*"), Encoding::Brotli);
  const std::string text(5000, 'x');
  EXPECT_EQ(gunzip(gzipCompress(text, 5)), text);
  EXPECT_LT(brotliCompress(text, 4).size(), 100u);
}

TEST(DashboardDigest, RealServerCompressesForTheBrowserAndCachesStaticFiles) {
  test::ServerFixture f;
  std::vector<std::string> lines;
  for (int i = 0; i < 40; ++i) lines.push_back(encodeRecord(makeRecord({.key = i % 3, .median_us = 100.0 + i})));
  std::string batch = "{\"records\":[";
  for (size_t i = 0; i < lines.size(); ++i) batch += (i ? "," : "") + lines[i];
  ASSERT_EQ(f.post("/v1/records", batch + "]}", f.write_token).status, 200);
  const std::string chromium = "Accept-Encoding: gzip, deflate, br, zstd";
  // An API answer: brotli at a low quality for a browser, gzip for gzip, as is for no header.
  test::Reply br = f.get("/v1/records?limit=40", f.read_token, {chromium});
  test::Reply gz = f.get("/v1/records?limit=40", f.read_token, {"Accept-Encoding: gzip"});
  test::Reply plain = f.get("/v1/records?limit=40", f.read_token);
  ASSERT_EQ(plain.status, 200);
  EXPECT_EQ(br.header("Content-Encoding"), "br");
  EXPECT_EQ(gz.header("Content-Encoding"), "gzip");
  EXPECT_EQ(plain.header("Content-Encoding"), "");
  EXPECT_EQ(gunzip(gz.body), plain.body);
  EXPECT_LT(br.body.size(), plain.body.size() / 3);
  EXPECT_NE(br.header("Vary").find("Accept-Encoding"), std::string::npos);
  // A static file: compressed once, the page names it by version, and by that name it is kept a year.
  test::Reply page = f.get("/ui/kernel.html", f.read_token);
  const UiAsset* js = findUiAsset("common.js");
  ASSERT_NE(page.body.find("common.js?v=" + js->version), std::string::npos);  // (asked without Accept-Encoding: as it is)
  test::Reply pinned = f.get("/ui/common.js?v=" + js->version, "", {chromium});
  EXPECT_EQ(pinned.header("Content-Encoding"), "br");
  EXPECT_NE(pinned.header("Cache-Control").find("max-age=31536000"), std::string::npos);
  EXPECT_NE(pinned.header("Content-Security-Policy").find("script-src 'self'"), std::string::npos);
  // The neighbours: an old or missing version is revalidated, not kept; gzip for a gzip client.
  EXPECT_EQ(f.get("/ui/common.js?v=000000000000", "", {chromium}).header("Cache-Control"), "no-cache");
  test::Reply gzjs = f.get("/ui/common.js", "", {"Accept-Encoding: gzip"});
  EXPECT_EQ(gzjs.header("Cache-Control"), "no-cache");
  EXPECT_EQ(gunzip(gzjs.body), js->served);
  test::Reply again = f.get("/ui/common.js", "", {"Accept-Encoding: gzip", "If-None-Match: " + gzjs.header("ETag")});
  EXPECT_EQ(again.status, 304);
}

TEST(DashboardDigest, ALivePageWaitsForNewRecordsWithinItsBound) {
  auto store = makeMemoryStore();
  ASSERT_TRUE(store->put(std::vector<Record>{makeRecord({.key = 0})}).ok());
  TokenAuthenticator auth;
  auth.reset({{sha256Hex("tsk_read"), Scope::Read, "reader"}});
  Api api(*store, auth, {});
  const std::string key = keyIdOf(test::keyFor(0));
  auto get = [&](const std::string& query) {
    ApiRequest r;
    r.method = "GET";
    r.path = "/v1/kernels/" + key;
    for (size_t at = 0; at < query.size();) {
      size_t amp = query.find('&', at);
      if (amp == std::string::npos) amp = query.size();
      const std::string kv = query.substr(at, amp - at);
      r.query.emplace_back(kv.substr(0, kv.find('=')), kv.substr(kv.find('=') + 1));
      at = amp + 1;
    }
    r.headers.emplace_back("Authorization", "Bearer tsk_read");
    return api.handle(r);
  };
  ApiResponse first = get("digest=1");
  ASSERT_EQ(first.status, 200) << first.body;
  const int64_t max_id = json::parse(first.body)["digest"]["max_id"];
  // Nothing new: the answer waits the time asked, then says unchanged.
  const auto t0 = std::chrono::steady_clock::now();
  ApiResponse idle = get("digest=1&after=" + std::to_string(max_id) + "&wait=1");
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(json::parse(idle.body)["unchanged"].get<bool>());
  EXPECT_GE(waited, 0.9);
  // Something new: answered at once with the digest.
  ApiResponse fresh = get("digest=1&after=" + std::to_string(max_id - 1) + "&wait=5");
  EXPECT_EQ(json::parse(fresh.body)["digest"]["max_id"], max_id);
  for (const std::string bad : {"wait=26", "after=-1", "digest=2", "wait=x"}) EXPECT_EQ(get(bad).status, 400) << bad;
}

}  // namespace
}  // namespace tessera::cache
