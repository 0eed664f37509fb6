// Tests the web dashboard's service side: the pages under /ui/ with their security headers, the
// read routes the pages call (overview, kernel summary, job list, identity, compare plumbing), the
// admin routes (tokens, revocation taking effect at once, the audit trail), the roofline facts,
// and the self-contained report (every inline script allowed by its hash, hostile strings unable
// to close the data block). What a browser makes of all this: tests/ui/browser_test.py.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "service/api.h"
#include "service/dashboard_json.h"
#include "store/record_json.h"
#include "service/ui_assets.h"
#include "support/hash.h"
#include "tests/cache_service/test_util.h"

namespace tessera::cache {
namespace {

using nlohmann::json;
using test::makeRecord;

// An Api over an in-memory store with one token per scope; requests as plain structs.
struct ApiFixture {
  explicit ApiFixture(ApiOptions o = {}) : store(makeMemoryStore()) {
    auth.reset({{sha256Hex("tsk_read"), Scope::Read, "reader"},
                {sha256Hex("tsk_write"), Scope::Write, "writer"},
                {sha256Hex("tsk_admin"), Scope::Admin, "boss"}});
    api = std::make_unique<Api>(*store, auth, std::move(o));
  }
  ApiResponse call(const std::string& method, const std::string& target, const std::string& token = "",
                   const std::string& body = "") {
    ApiRequest r;
    r.method = method;
    const size_t q = target.find('?');
    r.path = target.substr(0, q);
    if (q != std::string::npos) {
      std::string rest = target.substr(q + 1);
      for (size_t at = 0; at <= rest.size();) {
        size_t amp = rest.find('&', at);
        if (amp == std::string::npos) amp = rest.size();
        std::string kv = rest.substr(at, amp - at);
        const size_t eq = kv.find('=');
        if (!kv.empty()) r.query.emplace_back(kv.substr(0, eq), eq == std::string::npos ? "" : kv.substr(eq + 1));
        at = amp + 1;
      }
    }
    if (!token.empty()) r.headers.emplace_back("Authorization", "Bearer " + token);
    if (!body.empty()) {
      r.headers.emplace_back("Content-Type", "application/json");
      r.headers.emplace_back("Content-Length", std::to_string(body.size()));
      r.body = body;
    }
    return api->handle(r);
  }
  static std::string header(const ApiResponse& r, const std::string& name) {
    for (const auto& [k, v] : r.headers)
      if (k == name) return v;
    return "";
  }
  std::unique_ptr<RecordStore> store;
  TokenAuthenticator auth;
  std::unique_ptr<Api> api;
};

TEST(Dashboard, PagesCarryTheSecurityHeaders) {
  ApiFixture f;
  for (const std::string page : {"/ui/", "/ui/index.html", "/ui/kernel.html?key=abc", "/ui/compare.html", "/ui/workers.html",
                                 "/ui/admin.html", "/ui/common.js", "/ui/chart.min.js", "/ui/style.css", "/ui/favicon.svg"}) {
    ApiResponse r = f.call("GET", page);
    EXPECT_EQ(r.status, 200) << page;
    const std::string csp = ApiFixture::header(r, "Content-Security-Policy");
    EXPECT_NE(csp.find("script-src 'self'"), std::string::npos) << page;
    EXPECT_EQ(csp.find("unsafe-inline"), std::string::npos) << page;
    EXPECT_EQ(csp.find("unsafe-eval"), std::string::npos) << page;
    EXPECT_NE(csp.find("default-src 'none'"), std::string::npos) << page;
    EXPECT_NE(csp.find("frame-ancestors 'none'"), std::string::npos) << page;
    EXPECT_EQ(ApiFixture::header(r, "X-Content-Type-Options"), "nosniff") << page;
    EXPECT_FALSE(ApiFixture::header(r, "ETag").empty()) << page;
  }
  EXPECT_EQ(f.call("GET", "/ui/").content_type, "text/html; charset=utf-8");
  EXPECT_EQ(f.call("GET", "/ui/kernel.js").content_type, "text/javascript; charset=utf-8");
  // Revalidation, redirects, unknown files, no writes.
  ApiResponse a = f.call("GET", "/ui/common.js");
  ApiRequest again;
  again.method = "GET";
  again.path = "/ui/common.js";
  again.headers.emplace_back("If-None-Match", ApiFixture::header(a, "ETag"));
  EXPECT_EQ(f.api->handle(again).status, 304);
  ApiResponse root = f.call("GET", "/");
  EXPECT_EQ(root.status, 303);
  EXPECT_EQ(ApiFixture::header(root, "Location"), "ui/");
  EXPECT_EQ(ApiFixture::header(f.call("GET", "/ui"), "Location"), "ui/");
  EXPECT_EQ(f.call("GET", "/ui/nope.js").status, 404);
  EXPECT_EQ(f.call("GET", "/ui/../openapi.yaml").status, 404);
  EXPECT_EQ(f.call("GET", "/ui/a/b.js").status, 404);
  EXPECT_EQ(f.call("POST", "/ui/index.html", "", "{}").status, 405);
  // The pages hold no script inline and no markup from strings: every script is a file, and the
  // scripts build the DOM from text nodes only.
  for (const std::string name : {"index.html", "kernel.html", "compare.html", "workers.html", "admin.html"}) {
    const std::string html(findUiAsset(name)->content);
    EXPECT_FALSE(std::regex_search(html, std::regex("<script(?![^>]*src=)"))) << name;
    EXPECT_FALSE(std::regex_search(html, std::regex(R"(\son[a-z]+\s*=)", std::regex::icase))) << name;
    EXPECT_FALSE(std::regex_search(html, std::regex(R"(style=)"))) << name;
  }
  for (const std::string name : {"common.js", "overview.js", "kernel.js", "kernel_charts.js", "compare.js", "workers.js", "admin.js"}) {
    const std::string js(findUiAsset(name)->content);
    for (const std::string sink : {"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function",
                                   "localStorage", "?token=", "&token="})
      EXPECT_EQ(js.find(sink), std::string::npos) << name << " uses " << sink;
  }
}

TEST(Dashboard, OverviewRouteValidatesAndAnswers) {
  ApiFixture f;
  ASSERT_TRUE(f.store->put(std::vector<Record>{makeRecord({.key = 0, .median_us = 40}), makeRecord({.key = 1, .median_us = 30})}).ok());
  EXPECT_EQ(f.call("GET", "/v1/kernels").status, 401);
  ApiResponse ok = f.call("GET", "/v1/kernels?q=gemm%20host&limit=1", "tsk_read");
  // The struct carries the query undecoded here: "gemm%20host" is one word that matches nothing.
  EXPECT_EQ(ok.status, 200);
  ApiResponse all = f.call("GET", "/v1/kernels?order=kernel&label=measured&limit=1", "tsk_read");
  ASSERT_EQ(all.status, 200) << all.body;
  json j = json::parse(all.body);
  EXPECT_EQ(j["total"], 2);
  ASSERT_EQ(j["kernels"].size(), 1u);
  EXPECT_EQ(j["kernels"][0]["label"], "measured");
  EXPECT_EQ(j["kernels"][0]["throughput"]["unit"], "GFLOP/s");
  EXPECT_EQ(j["kernels"][0]["records"], 1);
  for (const std::string bad : {"label=best", "order=fastest", "limit=0", "limit=201", "offset=-1", "family=a%20b",
                                "q=a b c d e f g h i", "q=caf\xc3\xa9", "nope=1", "limit=5&limit=6"})
    EXPECT_EQ(f.call("GET", "/v1/kernels?" + bad, "tsk_read").status, 400) << bad;
  EXPECT_EQ(f.call("GET", "/v1/kernels?q=a b c d e f g h", "tsk_read").status, 200);  // 8 words
  // One kernel: its row, roofline facts and nearby winners.
  const std::string k0 = keyIdOf(test::keyFor(0));
  ApiResponse one = f.call("GET", "/v1/kernels/" + k0, "tsk_read");
  ASSERT_EQ(one.status, 200) << one.body;
  json s = json::parse(one.body);
  EXPECT_EQ(s["key_id"], k0);
  EXPECT_TRUE(s.contains("roofline"));
  ASSERT_EQ(s["nearest"].size(), 1u);
  EXPECT_EQ(s["nearest"][0]["key_id"], keyIdOf(test::keyFor(1)));
  EXPECT_EQ(f.call("GET", "/v1/kernels/" + std::string(64, 'a'), "tsk_read").status, 404);
  EXPECT_EQ(f.call("GET", "/v1/kernels/xyz", "tsk_read").status, 400);
}

// A kernel whose text is in the kernel table is marked rebuildable, on the overview and on its own
// page, which shows the text; one without (a record pushed with no kernel_ir) says it is not.
TEST(Dashboard, KernelsSayWhetherTheyCanBeRebuiltAndShowTheirText) {
  ApiFixture f;
  const std::string text = "kernel _ : elementwise {\n  in t0: f32[4]\n  out t1: f32[4]\n  t1[v0] = t0[v0] + 1\n}\n";
  Record with = makeRecord({.key = 0, .median_us = 40});
  with.key.workload = sha256Hex(text);
  with.key_id = keyIdOf(with.key);
  Record without = makeRecord({.key = 1, .median_us = 30});
  ASSERT_TRUE(f.store->put(std::vector<Record>{with, without}).ok());
  ASSERT_TRUE(f.store->putKernelText(with.key.workload, text).ok());
  ApiResponse all = f.call("GET", "/v1/kernels?order=kernel&limit=10", "tsk_read");
  ASSERT_EQ(all.status, 200) << all.body;
  json j = json::parse(all.body);
  ASSERT_EQ(j["kernels"].size(), 2u);
  int rebuildable = 0;
  for (const json& row : j["kernels"]) {
    ASSERT_TRUE(row.contains("rebuildable")) << row.dump();
    EXPECT_EQ(row["rebuildable"].get<bool>(), row["key_id"] == with.key_id) << row.dump();
    rebuildable += row["rebuildable"].get<bool>();
  }
  EXPECT_EQ(rebuildable, 1);
  json one = json::parse(f.call("GET", "/v1/kernels/" + with.key_id, "tsk_read").body);
  EXPECT_EQ(one["rebuildable"], true);
  EXPECT_EQ(one["kernel_text"], text);
  json other = json::parse(f.call("GET", "/v1/kernels/" + without.key_id, "tsk_read").body);
  EXPECT_EQ(other["rebuildable"], false);
  EXPECT_TRUE(other["kernel_text"].is_null());
}

TEST(Dashboard, WhoAmINeedsNoTokenButChecksOne) {
  ApiFixture f;
  EXPECT_EQ(json::parse(f.call("GET", "/v1/whoami").body)["scope"], "none");
  json admin = json::parse(f.call("GET", "/v1/whoami", "tsk_admin").body);
  EXPECT_EQ(admin["name"], "boss");
  EXPECT_EQ(admin["scope"], "admin");
  EXPECT_EQ(f.call("GET", "/v1/whoami", "tsk_wrong").status, 401);
  ApiRequest basic;
  basic.method = "GET";
  basic.path = "/v1/whoami";
  basic.headers.emplace_back("Authorization", "Basic dXNlcjpwdw==");
  EXPECT_EQ(f.api->handle(basic).status, 401);
  ApiOptions anon;
  anon.allow_anonymous_reads = true;
  ApiFixture g(anon);
  EXPECT_EQ(json::parse(g.call("GET", "/v1/whoami").body)["scope"], "anonymous");
  EXPECT_TRUE(f.api->tokenUsage().lastUsed("boss").has_value());
  EXPECT_FALSE(f.api->tokenUsage().lastUsed("writer").has_value());
}

TEST(Dashboard, CompareRouteResolvesTheKeyAndSaysWhenItCannotCompare) {
  ApiFixture without;
  const std::string k0 = keyIdOf(test::keyFor(0));
  ASSERT_TRUE(without.store->putOne(makeRecord({.key = 0})).ok());
  const std::string body = R"({"key_id":")" + k0 + R"(","targets":["sm_90","host"]})";
  EXPECT_EQ(without.call("POST", "/v1/compare", "tsk_read", body).status, 501);
  ApiOptions o;
  std::optional<CompareRequest> seen;
  o.dashboard.compare = [&](RecordStore&, const CompareRequest& req) -> Expected<std::string> {
    seen = req;
    if (req.targets.front() == "nope") return makeError(ErrorCode::InvalidArgument, "targets: unknown target nope");
    return std::string(R"({"kernel":"k","attributes":[],"why":[],"targets":[]})");
  };
  ApiFixture f(o);
  ASSERT_TRUE(f.store->putOne(makeRecord({.key = 0})).ok());
  ApiResponse r = f.call("POST", "/v1/compare", "tsk_read", body);
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_TRUE(seen && seen->key);
  EXPECT_EQ(*seen->key, test::keyFor(0));  // from the store, not from the client
  EXPECT_EQ(seen->targets, (std::vector<std::string>{"sm_90", "host"}));
  EXPECT_EQ(f.call("POST", "/v1/compare", "tsk_read", R"({"key_id":")" + k0 + R"(","targets":["nope"]})").status, 422);
  EXPECT_EQ(f.call("POST", "/v1/compare", "tsk_read", R"({"key_id":")" + std::string(64, 'b') + R"(","targets":["host"]})").status, 404);
  for (const std::string& bad : std::vector<std::string>{R"({"targets":["host"]})", R"({"key_id":")" + k0 + R"(","kernel":"x","targets":["host"]})",
                                R"({"key_id":")" + k0 + R"(","targets":[]})", R"({"key_id":")" + k0 + R"(","targets":["a","a"]})",
                                R"({"key_id":")" + k0 + R"(","targets":["<b>"]})", R"({"key_id":")" + k0 + R"(","targets":["host"],"x":1})",
                                R"({"kernel":"","targets":["host"]})", R"([1])"})
    EXPECT_EQ(f.call("POST", "/v1/compare", "tsk_read", bad).status, 422) << bad;
  EXPECT_EQ(f.call("POST", "/v1/compare", "tsk_read", "{").status, 400);
  EXPECT_EQ(f.call("GET", "/v1/compare", "tsk_read").status, 405);
}

TEST(Dashboard, AdminRoutesOnARealServer) {
  test::ServerFixture f;
  // Reads and writes leave traces: last used (this process), last write (the records).
  ASSERT_EQ(f.post("/v1/records", encodeRecord(makeRecord({.key = 0, .host = "<img src=x onerror=alert(1)>"})), f.write_token).status, 200);
  ASSERT_EQ(f.get("/v1/kernels", f.read_token).status, 200);
  EXPECT_EQ(f.get("/v1/admin/tokens", f.write_token).status, 403);
  test::Reply list = f.get("/v1/admin/tokens", f.admin_token);
  ASSERT_EQ(list.status, 200) << list.body;
  std::map<std::string, json> tokens;
  const json listed = json::parse(list.body);
  for (const json& t : listed["tokens"]) tokens[t["name"].get<std::string>()] = t;
  ASSERT_EQ(tokens.size(), 3u) << list.body;
  for (auto& [name, t] : tokens) EXPECT_TRUE(t["last_used"].is_string()) << name;
  EXPECT_TRUE(tokens.at("writer")["last_write"].is_string());
  EXPECT_TRUE(tokens.at("reader")["last_write"].is_null());
  // Revocation through the page's route takes effect at the next request, not the next refresh.
  EXPECT_EQ(f.post("/v1/admin/tokens/revoke", R"({"name":"reader"})", f.write_token).status, 403);
  ASSERT_EQ(f.post("/v1/admin/tokens/revoke", R"({"name":"reader"})", f.admin_token).status, 200);
  EXPECT_EQ(f.get("/v1/kernels", f.read_token).status, 401);
  EXPECT_EQ(f.post("/v1/admin/tokens/revoke", R"({"name":"reader"})", f.admin_token).status, 404);
  EXPECT_EQ(f.post("/v1/admin/tokens/revoke", R"({"name":"a b"})", f.admin_token).status, 422);
  EXPECT_EQ(f.get("/v1/admin/tokens/revoke?name=writer", f.admin_token).status, 405);  // no state change on GET
  // The audit trail: newest first, quarantined records included and marked.
  ASSERT_EQ(f.post("/v1/records", encodeRecord(makeRecord({.key = 1})), f.write_token).status, 200);
  ASSERT_EQ(f.post("/v1/admin/records/quarantine", R"({"key_id":")" + keyIdOf(test::keyFor(0)) + "\"}", f.admin_token).status, 200);
  test::Reply audit = f.get("/v1/admin/audit?limit=1", f.admin_token);
  ASSERT_EQ(audit.status, 200) << audit.body;
  json a = json::parse(audit.body);
  ASSERT_EQ(a["records"].size(), 1u);
  EXPECT_EQ(a["records"][0]["key_id"], keyIdOf(test::keyFor(1)));
  ASSERT_TRUE(a["next_before"].is_number());
  json older = json::parse(f.get("/v1/admin/audit?before=" + std::to_string(a["next_before"].get<int64_t>()), f.admin_token).body);
  ASSERT_EQ(older["records"].size(), 1u);
  EXPECT_EQ(older["records"][0]["quarantined"], true);
  EXPECT_EQ(older["records"][0]["provenance"]["host"], "<img src=x onerror=alert(1)>");  // data, rendered as text by the pages
  EXPECT_TRUE(older["next_before"].is_null());
  EXPECT_EQ(f.get("/v1/admin/audit?writer=a%20b", f.admin_token).status, 400);
  // Jobs: totals for everyone, jobs for their submitters and admins.
  test::Reply jobs = f.get("/v1/jobs", f.write_token);
  ASSERT_EQ(jobs.status, 200) << jobs.body;
  EXPECT_EQ(json::parse(jobs.body)["scope"], "own");
  EXPECT_EQ(json::parse(f.get("/v1/jobs", f.admin_token).body)["scope"], "all");
}

TEST(Dashboard, RooflineFactsSayWhereEachRoofComesFrom) {
  KernelRow gpu;
  gpu.key = test::keyFor(0);
  gpu.key.target = gpu.key.arch = "sm_90";
  gpu.key.units = 132;
  json g = rooflineJson(gpu);
  EXPECT_DOUBLE_EQ(g["compute_gflops"].get<double>(), 66900);  // f32 from the target table
  EXPECT_DOUBLE_EQ(g["bandwidth_gbs"].get<double>(), 3352);
  // Another product of the chip (an L4: sm_89 with 58 SMs, not the table's RTX 4090): the peak its
  // record was measured against.
  KernelRow l4 = gpu;
  l4.key.target = l4.key.arch = "sm_89";
  l4.key.units = 58;
  Record lr = makeRecord({.key = 0, .median_us = 10});
  lr.key = l4.key;
  lr.gflops = 60500;
  lr.gbps = 100;
  lr.peak_fraction = 0.5;
  lr.provenance.cpu_model = "NVIDIA L4";
  l4.shown = lr;
  json lj = rooflineJson(l4);
  EXPECT_DOUBLE_EQ(lj["compute_gflops"].get<double>(), 121000);
  EXPECT_NE(lj["compute_source"].get<std::string>().find("NVIDIA L4"), std::string::npos);
  KernelRow host;
  host.key = test::keyFor(0);
  Record r = makeRecord({.key = 0, .median_us = 10});
  r.gflops = 50;
  r.gbps = 10;
  r.peak_fraction = 0.5;
  host.shown = r;
  json h = rooflineJson(host);
  EXPECT_DOUBLE_EQ(h["compute_gflops"].get<double>(), 100);  // the peak its share was measured against
  EXPECT_TRUE(h["bandwidth_gbs"].is_null());
  EXPECT_DOUBLE_EQ(h["intensity"].get<double>(), 5);
  host.key.family = "elementwise";
  json e = rooflineJson(host);
  EXPECT_DOUBLE_EQ(e["bandwidth_gbs"].get<double>(), 20);
  EXPECT_TRUE(e["compute_gflops"].is_null());
}

TEST(Dashboard, ReportIsSelfContainedAndItsDataCannotCloseTheScript) {
  json data = {{"kernels", json::array({{{"summary", {{"key_id", "x"}}},
                                         {"records", json::array({{{"provenance", {{"host", "</script><script>alert(1)</script>"}}}}})},
                                         {"records_total", 1}}})},
               {"generated_at", "2025-01-01T00:00:00Z"},
               {"source", "a.db"}};
  const std::string html = renderReport(data, "t <b>");
  EXPECT_NE(html.find("<title>t &lt;b&gt;</title>"), std::string::npos);
  // Nothing is loaded from anywhere: no src or href attribute, no stylesheet link.
  EXPECT_FALSE(std::regex_search(html, std::regex(R"(<(script|link|img|iframe)[^>]*\s(src|href)=)")));
  // The hostile string stays inside the JSON block.
  EXPECT_EQ(html.find("</script><script>alert(1)"), std::string::npos);
  EXPECT_NE(html.find("\\u003c/script\\u003e\\u003cscript\\u003ealert(1)"), std::string::npos);
  // Every inline script is allowed by its hash, and nothing else is.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(html, m, std::regex("Content-Security-Policy\" content=\"([^\"]*)\"")));
  const std::string csp = m[1];
  EXPECT_NE(csp.find("default-src 'none'"), std::string::npos);
  EXPECT_EQ(csp.find("unsafe"), std::string::npos);
  EXPECT_EQ(csp.find("'self'"), std::string::npos);
  size_t scripts = 0;
  for (size_t at = html.find("<script>"); at != std::string::npos; at = html.find("<script>", at + 1)) {
    const size_t end = html.find("</script>", at);
    ASSERT_NE(end, std::string::npos);
    const std::string body = html.substr(at + 8, end - at - 8);
    const auto digest = sha256(body);
    // base64 of the digest, as the CSP names it.
    static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string b64;
    for (size_t i = 0; i < 32; i += 3) {
      uint32_t v = uint32_t(digest[i]) << 16 | (i + 1 < 32 ? uint32_t(digest[i + 1]) << 8 : 0) | (i + 2 < 32 ? digest[i + 2] : 0);
      b64 += k[v >> 18];
      b64 += k[(v >> 12) & 63];
      b64 += i + 1 < 32 ? k[(v >> 6) & 63] : '=';
      b64 += i + 2 < 32 ? k[v & 63] : '=';
    }
    EXPECT_NE(csp.find("'sha256-" + b64 + "'"), std::string::npos) << "script " << scripts;
    ++scripts;
  }
  EXPECT_EQ(scripts, 6u);  // Chart.js, common, chart tools, the charts, records side by side, the kernel page
  EXPECT_NE(html.find("data-mode=\"report\""), std::string::npos);
}

}  // namespace
}  // namespace tessera::cache
