// Tests every route, status code and scope of the real server on a loopback port: lookups (ETag,
// 304, nearest), submissions and their refusals, listing, export/import, backup, auth, metrics.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <thread>

#include "store/record_json.h"
#include "store/schema.h"
#include "support/hash.h"
#include "store/tokens.h"
#include "tests/cache_service/test_util.h"

namespace tessera::cache {
namespace {

using nlohmann::json;
using test::makeRecord;
using test::RecordSpec;
using test::Reply;
using test::ServerFixture;

void expectProblem(const Reply& r, int status, const std::string& slug) {
  EXPECT_EQ(r.status, status) << r.body;
  EXPECT_EQ(r.content_type, "application/problem+json") << r.body;
  auto j = json::parse(r.body, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.body;
  EXPECT_EQ(j.value("type", ""), "urn:tessera:problem:" + slug) << r.body;
  EXPECT_EQ(j.value("status", 0), status);
  EXPECT_FALSE(j.value("detail", "").empty());
}

std::string keyQuery(const HardKey& k) {
  return "family=" + k.family + "&workload=" + k.workload + "&shape=" + formatShape(k.shape) + "&dtype=" + k.dtype +
         "&layout=" + k.layout + "&target=" + k.target + "&arch=" + k.arch + "&units=" + std::to_string(k.units);
}

TEST(Server, HealthReadinessAndSpecNeedNoToken) {
  ServerFixture f;
  EXPECT_EQ(f.get("/healthz").status, 200);
  EXPECT_EQ(f.get("/readyz").status, 200);
  Reply spec = f.get("/openapi.yaml");
  EXPECT_EQ(spec.status, 200);
  EXPECT_EQ(spec.content_type, "application/yaml");
  EXPECT_EQ(spec.body, std::string(openApiYaml()));
  expectProblem(f.get("/healthz?x=1"), 400, "invalid-query");
}

TEST(Server, ScopesGateRoutes) {
  ServerFixture f;
  Reply none = f.get("/status");
  expectProblem(none, 401, "missing-token");
  EXPECT_EQ(none.header("WWW-Authenticate"), "Bearer realm=\"tessera\"");
  expectProblem(f.get("/status", "tsk_" + std::string(64, '0')), 401, "invalid-token");
  expectProblem(f.get("/status", "", {"Authorization: Basic dXNlcjpwYXNz"}), 401, "invalid-token");
  for (const auto& t : {f.read_token, f.write_token, f.admin_token}) EXPECT_EQ(f.get("/status", t).status, 200);
  EXPECT_EQ(f.get("/status", "", {"Authorization: bearer " + f.read_token}).status, 200);  // scheme is case-insensitive

  const std::string body = encodeRecord(makeRecord({}));
  expectProblem(f.post("/v1/records", body), 401, "missing-token");
  expectProblem(f.post("/v1/records", body, f.read_token), 403, "insufficient-scope");
  EXPECT_EQ(f.post("/v1/records", body, f.write_token).status, 200);
  EXPECT_EQ(f.post("/v1/records", body, f.admin_token).status, 200);
  expectProblem(f.post("/v1/import", body, f.read_token, "application/x-ndjson"), 403, "insufficient-scope");
  expectProblem(f.post("/v1/admin/backup", "", f.write_token, ""), 403, "insufficient-scope");
  expectProblem(f.post("/v1/admin/backup", "", f.admin_token, ""), 409, "backups-disabled");
}

TEST(Server, TokenChangesApplyWhileRunning) {
  ServerFixture f;
  auto tokens = TokenStore::open(f.db);
  ASSERT_TRUE(tokens.ok());
  auto fresh = (*tokens)->add("late", Scope::Read);
  ASSERT_TRUE(fresh.ok());
  ASSERT_TRUE((*tokens)->revoke("reader").ok());
  auto eventually = [&](const std::string& tok, int want) {
    for (int i = 0; i < 50; ++i) {
      if (f.get("/status", tok).status == want) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  };
  EXPECT_TRUE(eventually(*fresh, 200));
  EXPECT_TRUE(eventually(f.read_token, 401));
  EXPECT_FALSE((*tokens)->add("writer", Scope::Admin).ok());  // active names are not rotated silently
}

TEST(Server, AnonymousReadsWhenAllowed) {
  ServerOptions o = test::testOptions();
  o.allow_anonymous_reads = true;
  ServerFixture f(o);
  EXPECT_EQ(f.get("/status").status, 200);
  EXPECT_EQ(f.get("/metrics").status, 200);
  expectProblem(f.get("/status", "wrong"), 401, "invalid-token");  // a bad token is still an error
  expectProblem(f.post("/v1/records", encodeRecord(makeRecord({}))), 401, "missing-token");
}

// A record may carry its kernel's text (kernel_text.h); the service files it in its kernel table
// only when the text hashes to the key's workload, and refuses the submission otherwise: a 422 with
// one line, nothing stored (the negative control of what `bundle --all-winners` rebuilds from).
TEST(Server, KernelTextMustHashToTheKeysWorkload) {
  ServerFixture f;
  const std::string text = "kernel _ : elementwise {\n  in t0: f32[4]\n  out t1: f32[4]\n  t1[v0] = t0[v0] + 1\n}\n";
  Record r = makeRecord({.key = 7, .median_us = 10, .config = "{\"VW\":4}"});
  r.key.family = "elementwise";
  r.key.workload = sha256Hex(text);
  r.key_id = keyIdOf(r.key);
  json bad = recordToJson(r);
  bad["kernel_ir"] = text + "  y = 0\n";
  Reply refused = f.post("/v1/records", bad.dump(), f.write_token);
  expectProblem(refused, 422, "invalid-records");
  const std::string detail = json::parse(refused.body).value("detail", "");
  EXPECT_NE(detail.find("kernel_ir"), std::string::npos) << detail;
  EXPECT_NE(detail.find("does not hash to the key's workload"), std::string::npos) << detail;
  EXPECT_EQ(detail.find('\n'), std::string::npos) << detail;
  EXPECT_EQ(test::queryRows(f.db, "SELECT count(*) FROM records")[0][0], "0");
  EXPECT_EQ(test::queryRows(f.db, "SELECT count(*) FROM kernel_texts")[0][0], "0");
  json good = recordToJson(r);
  good["kernel_ir"] = text;
  ASSERT_EQ(f.post("/v1/records", good.dump(), f.write_token).status, 200);
  auto rows = test::queryRows(f.db, "SELECT workload, ir FROM kernel_texts");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0][0], r.key.workload);
  EXPECT_EQ(rows[0][1], text);
}

// GET /v1/kernel-texts/{workload}: the filed text, as text; a row changed behind the service's back
// no longer hashes to its workload and is never served (503, naming it), a bad hash is a 400.
TEST(Server, KernelTextsAreServedByWorkloadAndCheckedAgain) {
  ServerFixture f;
  const std::string text = "kernel _ : elementwise {\n  in t0: f32[4]\n  out t1: f32[4]\n  t1[v0] = t0[v0] + 1\n}\n";
  Record r = makeRecord({.key = 7, .median_us = 10, .config = "{\"VW\":4}"});
  r.key.family = "elementwise";
  r.key.workload = sha256Hex(text);
  r.key_id = keyIdOf(r.key);
  json good = recordToJson(r);
  good["kernel_ir"] = text;
  ASSERT_EQ(f.post("/v1/records", good.dump(), f.write_token).status, 200);
  Reply got = f.get("/v1/kernel-texts/" + r.key.workload, f.read_token);
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(got.content_type.rfind("text/plain", 0), 0u) << got.content_type;
  EXPECT_EQ(got.body, text);
  expectProblem(f.get("/v1/kernel-texts/" + std::string(64, 'a'), f.read_token), 404, "unknown-kernel");
  expectProblem(f.get("/v1/kernel-texts/" + std::string(64, 'A'), f.read_token), 400, "bad-workload");
  expectProblem(f.get("/v1/kernel-texts/abc", f.read_token), 400, "bad-workload");
  expectProblem(f.get("/v1/kernel-texts/" + r.key.workload + "?x=1", f.read_token), 400, "invalid-query");
  EXPECT_EQ(f.get("/v1/kernel-texts/" + r.key.workload, "unknown-token").status, 401);
  EXPECT_EQ(f.post("/v1/kernel-texts/" + r.key.workload, "{}", f.write_token).status, 405);
  {
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(f.db.c_str(), &h), SQLITE_OK);
    sqlite3_busy_timeout(h, 5000);
    EXPECT_EQ(sqlite3_exec(h, "UPDATE kernel_texts SET ir = ir || '  t1[v0] = 0' || char(10)", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(h);
  }
  Reply damaged = f.get("/v1/kernel-texts/" + r.key.workload, f.read_token);
  expectProblem(damaged, 503, "corrupt-kernel-text");
  EXPECT_NE(damaged.body.find("does not hash"), std::string::npos) << damaged.body;
}

TEST(Server, BestByKeyIdWithEtag) {
  ServerFixture f;
  Record r = makeRecord({.key = 1, .median_us = 42, .llvm_version = "22.1.0"});
  ASSERT_EQ(f.post("/v1/records", encodeRecord(r), f.write_token).status, 200);
  expectProblem(f.get("/v1/best/abc", f.read_token), 400, "bad-key-id");
  expectProblem(f.get("/v1/best/" + std::string(64, 'A'), f.read_token), 400, "bad-key-id");
  expectProblem(f.get("/v1/best/" + std::string(64, 'a'), f.read_token), 404, "no-record");
  Reply hit = f.get("/v1/best/" + r.key_id, f.read_token);
  ASSERT_EQ(hit.status, 200);
  EXPECT_EQ(hit.content_type, "application/json");
  auto j = json::parse(hit.body);
  EXPECT_EQ(j["match"], "exact");
  EXPECT_EQ(j["stale"], false);
  EXPECT_EQ(j["record"]["result"]["median_us"], 42);
  auto back = decodeRecord(j["record"].dump());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(fingerprint(*back), fingerprint(r));
  const std::string etag = hit.header("ETag");
  ASSERT_FALSE(etag.empty());
  for (const std::string& inm : {etag, "W/" + etag, "\"zzz\", " + etag, std::string("*")}) {
    Reply again = f.get("/v1/best/" + r.key_id, f.read_token, {"If-None-Match: " + inm});
    EXPECT_EQ(again.status, 304) << inm;
    EXPECT_TRUE(again.body.empty());
  }
  EXPECT_EQ(f.get("/v1/best/" + r.key_id, f.read_token, {"If-None-Match: \"other\""}).status, 200);
  // The asker's toolchain differs: same record, served stale, under another ETag.
  Reply stale = f.get("/v1/best/" + r.key_id + "?llvm_version=23.0.0&cpu_model=Test%20CPU", f.read_token,
                      {"If-None-Match: " + etag});
  ASSERT_EQ(stale.status, 200);
  auto sj = json::parse(stale.body);
  EXPECT_EQ(sj["stale"], true);
  EXPECT_EQ(sj["stale_reasons"], json::array({"llvm_version"}));
  EXPECT_NE(stale.header("ETag"), etag);
  expectProblem(f.get("/v1/best/" + r.key_id + "?colour=red", f.read_token), 400, "invalid-query");
  // A better record changes the winner and the ETag.
  ASSERT_EQ(f.post("/v1/records", encodeRecord(makeRecord({.key = 1, .median_us = 40})), f.write_token).status, 200);
  EXPECT_EQ(f.get("/v1/best/" + r.key_id, f.read_token, {"If-None-Match: " + etag}).status, 200);
}

TEST(Server, BestByHardKeyFallsBackToNearestShapes) {
  ServerFixture f;
  Record a = makeRecord({.key = 0, .median_us = 10});  // shape 4x4x16
  Record b = makeRecord({.key = 6, .median_us = 20});  // shape 8x8x22
  ASSERT_EQ(f.post("/v1/records", test::recordsBody({a, b}), f.write_token).status, 200);
  Reply exact = f.get("/v1/best?" + keyQuery(a.key), f.read_token);
  ASSERT_EQ(exact.status, 200);
  EXPECT_EQ(json::parse(exact.body)["match"], "exact");
  EXPECT_FALSE(exact.header("ETag").empty());
  HardKey untuned = a.key;
  untuned.shape = {7, 7, 20};
  untuned.workload = "0badc0de";
  Reply near = f.get("/v1/best?" + keyQuery(untuned), f.read_token);
  ASSERT_EQ(near.status, 200) << near.body;
  auto j = json::parse(near.body);
  EXPECT_EQ(j["match"], "nearest");
  EXPECT_EQ(j["key_id"], keyIdOf(untuned));
  ASSERT_EQ(j["candidates"].size(), 2u);
  double d0 = j["candidates"][0]["distance"], d1 = j["candidates"][1]["distance"];
  EXPECT_LE(d0, d1);
  EXPECT_NEAR(d0, 2 * std::log(8.0 / 7.0) + std::log(22.0 / 20.0), 1e-9);
  EXPECT_NEAR(d1, 2 * std::log(7.0 / 4.0) + std::log(20.0 / 16.0), 1e-9);
  EXPECT_EQ(j["candidates"][0]["key_id"], b.key_id);
  EXPECT_EQ(j["candidates"][1]["record"]["config"]["MC"], 64);
  EXPECT_EQ(json::parse(f.get("/v1/best?" + keyQuery(untuned) + "&limit=1", f.read_token).body)["candidates"].size(), 1u);
  expectProblem(f.get("/v1/best?" + keyQuery(untuned) + "&nearest=0", f.read_token), 404, "no-record");
  HardKey far = untuned;
  far.target = "gfx942";
  expectProblem(f.get("/v1/best?" + keyQuery(far), f.read_token), 404, "no-record");
  std::string q = keyQuery(a.key);
  std::string kernel = q;
  kernel.replace(0, 6, "kernel");
  EXPECT_EQ(f.get("/v1/best?" + kernel, f.read_token).status, 200);
  expectProblem(f.get("/v1/best?" + q + "&kernel=gemm", f.read_token), 400, "invalid-query");
  expectProblem(f.get("/v1/best?family=gemm&shape=8x8", f.read_token), 400, "invalid-query");
  expectProblem(f.get("/v1/best?" + q + "&shape=8x0", f.read_token), 400, "invalid-query");  // repeated
  std::string bad_shape = q;
  bad_shape.replace(bad_shape.find("shape=") + 6, formatShape(a.key.shape).size(), "8xq");
  expectProblem(f.get("/v1/best?" + bad_shape, f.read_token), 400, "invalid-query");
  expectProblem(f.get("/v1/best?" + q + "&limit=99", f.read_token), 400, "invalid-query");
  expectProblem(f.get("/v1/best?" + q + "&nearest=maybe", f.read_token), 400, "invalid-query");
  std::string bad_units = q;
  bad_units.replace(bad_units.find("units=") + 6, 1, "0");
  expectProblem(f.get("/v1/best?" + bad_units, f.read_token), 400, "invalid-query");
}

TEST(Server, NearestRoute) {
  ServerFixture f;
  ASSERT_EQ(f.post("/v1/records", test::recordsBody({makeRecord({.key = 0}), makeRecord({.key = 1})}), f.write_token).status,
            200);
  Reply r = f.get("/v1/nearest?family=gemm&shape=4x4x16&dtype=f32&target=host&arch=x86-64-v4&limit=5", f.read_token);
  ASSERT_EQ(r.status, 200) << r.body;
  auto j = json::parse(r.body);
  ASSERT_EQ(j["candidates"].size(), 2u);
  EXPECT_EQ(j["candidates"][0]["distance"], 0.0);
  EXPECT_EQ(json::parse(f.get("/v1/nearest?family=gemm&shape=64x64&dtype=f32&target=host&arch=x86-64-v4", f.read_token).body)
                ["candidates"].size(),
            0u);
  expectProblem(f.get("/v1/nearest?family=gemm", f.read_token), 400, "invalid-query");
  expectProblem(f.get("/v1/nearest?family=gemm&shape=4x4x16&dtype=f32&target=host&arch=x86-64-v4&limit=0", f.read_token),
                400, "invalid-query");
}

TEST(Server, BatchLookup) {
  ServerFixture f;
  Record a = makeRecord({.key = 1}), b = makeRecord({.key = 2});
  ASSERT_EQ(f.post("/v1/records", test::recordsBody({a, b}), f.write_token).status, 200);
  const std::string miss = std::string(64, 'b');
  json req = {{"key_ids", {a.key_id, miss}}, {"keys", {json::parse(encodeRecord(b))["key"]}},
              {"provenance", {{"llvm_version", "99"}}}};
  Reply r = f.post("/v1/best/batch", req.dump(), f.read_token);
  ASSERT_EQ(r.status, 200) << r.body;
  auto j = json::parse(r.body);
  ASSERT_EQ(j["results"].size(), 3u);
  EXPECT_EQ(j["results"][0]["match"], "exact");
  EXPECT_EQ(j["results"][0]["stale"], true);
  EXPECT_EQ(j["results"][1]["match"], "miss");
  EXPECT_EQ(j["results"][1]["key_id"], miss);
  EXPECT_EQ(j["results"][2]["key_id"], b.key_id);
  expectProblem(f.post("/v1/best/batch", R"({"key_ids":["nope"]})", f.read_token), 422, "invalid-request");
  expectProblem(f.post("/v1/best/batch", R"({"key_ids":[1]})", f.read_token), 422, "invalid-request");
  expectProblem(f.post("/v1/best/batch", R"({"keys":[{"family":"gemm"}]})", f.read_token), 422, "invalid-request");
  expectProblem(f.post("/v1/best/batch", R"({"ids":[]})", f.read_token), 422, "invalid-request");
  expectProblem(f.post("/v1/best/batch", R"({"provenance":{"host":"x"}})", f.read_token), 422, "invalid-request");
  expectProblem(f.post("/v1/best/batch", R"([1,2])", f.read_token), 422, "invalid-request");
  expectProblem(f.post("/v1/best/batch", R"({"key_ids":[)", f.read_token), 400, "malformed-json");
  json many = {{"key_ids", std::vector<std::string>(1001, miss)}};
  // Too many items is a validation error (422); 413 is kept for bodies over the byte limit.
  expectProblem(f.post("/v1/best/batch", many.dump(), f.read_token), 422, "invalid-request");
  expectProblem(f.get("/v1/best/batch", f.read_token), 405, "method-not-allowed");
  expectProblem(f.post("/v1/best/batch", req.dump()), 401, "missing-token");
}

TEST(Server, SubmissionOutcomesPerRecord) {
  ServerFixture f;
  Reply one = f.post("/v1/records", encodeRecord(makeRecord({.key = 3, .median_us = 50})), f.write_token);
  ASSERT_EQ(one.status, 200);
  auto j = json::parse(one.body);
  EXPECT_EQ(j["results"][0]["outcome"], "inserted");
  EXPECT_EQ(j["inserted"], 1);
  std::vector<Record> batch = {makeRecord({.key = 3, .median_us = 60}), makeRecord({.key = 3, .median_us = 40}),
                               makeRecord({.key = 3, .median_us = 50}), makeRecord({.key = 4, .median_us = 1})};
  Reply many = f.post("/v1/records", test::recordsBody(batch), f.write_token);
  ASSERT_EQ(many.status, 200) << many.body;
  j = json::parse(many.body);
  ASSERT_EQ(j["results"].size(), 4u);
  EXPECT_EQ(j["results"][0]["outcome"], "kept");
  EXPECT_EQ(j["results"][1]["outcome"], "improved");
  EXPECT_EQ(j["results"][2]["outcome"], "kept");
  EXPECT_EQ(j["results"][2]["duplicate"], true);  // identical to the first submission
  EXPECT_EQ(j["results"][3]["outcome"], "inserted");
  EXPECT_EQ(j["results"][3]["key_id"], batch[3].key_id);
  EXPECT_EQ(j["improved"], 1);
  EXPECT_EQ(j["duplicates"], 1);
  // A bare array is accepted too.
  json arr = json::array({json::parse(encodeRecord(makeRecord({.key = 5})))});
  EXPECT_EQ(f.post("/v1/records", arr.dump(), f.write_token).status, 200);
  EXPECT_EQ(json::parse(f.get("/v1/best/" + batch[0].key_id, f.read_token).body)["record"]["result"]["median_us"], 40);
}

TEST(Server, BadSubmissionsAreRefusedAndChangeNothing) {
  ServerOptions o = test::testOptions();
  o.http.max_body_bytes = 1 << 20;
  ServerFixture f(o);
  ASSERT_EQ(f.post("/v1/records", encodeRecord(makeRecord({.key = 1})), f.write_token).status, 200);
  const std::string before = test::dbSnapshot(f.db);
  const std::string auth = "Authorization: Bearer " + f.write_token;
  const std::string good = encodeRecord(makeRecord({.key = 2}));
  auto raw = [&](const std::string& bytes) { return test::rawRequest(f.port(), bytes); };

  Reply no_len = raw(test::httpRequest("POST", "/v1/records", good, {auth, "Content-Type: application/json"}, false));
  expectProblem(no_len, 411, "length-required");
  EXPECT_EQ(no_len.header("Connection"), "close");
  expectProblem(raw(test::httpRequest("POST", "/v1/records", "5\r\nhello\r\n0\r\n\r\n",
                                      {auth, "Content-Type: application/json", "Transfer-Encoding: chunked"}, false)),
                411, "length-required");
  expectProblem(raw(test::httpRequest("POST", "/v1/records", good, {auth, "Content-Type: application/json", "Content-Encoding: gzip"})),
                415, "unsupported-encoding");
  expectProblem(raw(test::httpRequest("POST", "/v1/records", good, {auth, "Content-Type: text/plain"})), 415,
                "unsupported-media-type");
  expectProblem(raw(test::httpRequest("POST", "/v1/records", good, {auth})), 415, "unsupported-media-type");
  Reply huge = raw("POST /v1/records HTTP/1.1\r\nHost: x\r\n" + auth +
                   "\r\nContent-Type: application/json\r\nContent-Length: 52428800\r\n\r\n{\"records\":[");
  expectProblem(huge, 413, "payload-too-large");
  EXPECT_EQ(huge.header("Connection"), "close");
  expectProblem(raw(test::httpRequest("POST", "/v1/records", good, {auth, "Content-Type: application/json",
                                                                     "Content-Length: abc"}, false)),
                400, "bad-framing");  // the gate: the one framing authority (issue 25)
  // Expect: 100-continue gets the refusal before any body byte is sent.
  expectProblem(raw("POST /v1/records HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                    "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"),
                401, "missing-token");

  expectProblem(f.post("/v1/records", "{\"key\":", f.write_token), 400, "malformed-json");
  expectProblem(f.post("/v1/records", "", f.write_token), 400, "malformed-json");
  expectProblem(f.post("/v1/records", "42", f.write_token), 422, "invalid-records");
  expectProblem(f.post("/v1/records", "[]", f.write_token), 422, "invalid-records");
  expectProblem(f.post("/v1/records", R"({"records":{}})", f.write_token), 422, "invalid-records");
  json typed = json::parse(good);
  typed["result"]["median_us"] = "fast";
  Reply wrong_type = f.post("/v1/records", typed.dump(), f.write_token);
  expectProblem(wrong_type, 422, "invalid-records");
  EXPECT_NE(wrong_type.body.find("result.median_us: expected a number"), std::string::npos);
  // One bad record refuses the whole batch and names its index.
  json missing = json::parse(good);
  missing["key"].erase("units");
  Reply mixed = f.post("/v1/records", "{\"records\":[" + good + "," + missing.dump() + "]}", f.write_token);
  expectProblem(mixed, 422, "invalid-records");
  auto mj = json::parse(mixed.body);
  EXPECT_EQ(mj["errors"][0]["index"], 1);
  EXPECT_NE(mj["errors"][0]["detail"].get<std::string>().find("records[1].key.units: missing"), std::string::npos);
  std::vector<Record> too_many(1001, makeRecord({.key = 9}));
  expectProblem(f.post("/v1/records", test::recordsBody(too_many), f.write_token), 422, "invalid-records");
  expectProblem(f.post("/v1/records?dry=1", good, f.write_token), 400, "invalid-query");
  expectProblem(raw(test::httpRequest("PUT", "/v1/records", good, {auth, "Content-Type: application/json"})), 405,
                "method-not-allowed");
  expectProblem(raw(test::httpRequest("DELETE", "/v1/records", "", {auth})), 405, "method-not-allowed");
  EXPECT_EQ(test::dbSnapshot(f.db), before);
  EXPECT_EQ(f.get("/healthz").status, 200);  // and the server is fine
}

TEST(Server, UnknownRoutesMethodsAndBodies) {
  ServerFixture f;
  expectProblem(f.get("/nope", f.read_token), 404, "not-found");
  expectProblem(f.get("/v1/best/a/b", f.read_token), 404, "not-found");
  expectProblem(f.get("/v1", f.read_token), 404, "not-found");
  Reply post404 = f.post("/v1/nothing", "{}", f.write_token);
  expectProblem(post404, 404, "not-found");
  Reply head = test::rawRequest(f.port(), test::httpRequest("HEAD", "/healthz"));
  EXPECT_EQ(head.status, 405);
  expectProblem(test::rawRequest(f.port(), test::httpRequest("GET", "/status", "{}",
                                                              {"Authorization: Bearer " + f.read_token})),
                400, "body-not-allowed");
  Reply long_uri = test::rawRequest(f.port(), test::httpRequest("GET", "/v1/best/" + std::string(9000, 'a')));
  EXPECT_EQ(long_uri.status, 414);
  EXPECT_EQ(long_uri.content_type, "application/problem+json");
  Reply garbage = test::rawRequest(f.port(), "THIS IS NOT HTTP\r\n\r\n");
  EXPECT_TRUE(garbage.status == 0 || (garbage.status >= 400 && garbage.status < 500)) << garbage.status;
  EXPECT_EQ(f.get("/healthz").status, 200);
}

TEST(Server, ListRecordsPaged) {
  ServerFixture f;
  std::vector<Record> recs;
  for (int i = 0; i < 30; ++i) recs.push_back(makeRecord({.key = i % 3, .median_us = 10.0 + i}));
  ASSERT_EQ(f.post("/v1/records", test::recordsBody(recs), f.write_token).status, 200);
  std::vector<int64_t> ids;
  std::string after = "0";
  for (int pages = 0; pages < 10; ++pages) {
    Reply r = f.get("/v1/records?limit=7&after=" + after, f.read_token);
    ASSERT_EQ(r.status, 200) << r.body;
    auto j = json::parse(r.body);
    for (const auto& rec : j["records"]) ids.push_back(rec["id"].get<int64_t>());
    if (j["next_after"].is_null()) break;
    after = std::to_string(j["next_after"].get<int64_t>());
  }
  EXPECT_EQ(ids.size(), 30u);
  auto w = json::parse(f.get("/v1/records?winners_only=1&family=gemm&dtype=f32", f.read_token).body);
  EXPECT_EQ(w["records"].size(), 3u);
  auto k = json::parse(f.get("/v1/records?key_id=" + recs[0].key_id + "&status=ok", f.read_token).body);
  EXPECT_EQ(k["records"].size(), 10u);
  expectProblem(f.get("/v1/records?limit=0", f.read_token), 400, "invalid-query");
  expectProblem(f.get("/v1/records?limit=abc", f.read_token), 400, "invalid-query");
  expectProblem(f.get("/v1/records?key_id=xyz", f.read_token), 400, "bad-key-id");
  expectProblem(f.get("/v1/records?status=great", f.read_token), 400, "invalid-query");
  expectProblem(f.get("/v1/records?winners_only=2", f.read_token), 400, "invalid-query");
  expectProblem(f.get("/v1/records?famly=gemm", f.read_token), 400, "invalid-query");
  expectProblem(f.get("/v1/records?family=", f.read_token), 400, "invalid-query");
  expectProblem(f.get("/v1/records"), 401, "missing-token");
}

TEST(Server, ExportThenImportIntoEmptyServerGivesIdenticalWinners) {
  ServerFixture src, dst;
  std::vector<Record> recs;
  for (int i = 0; i < 120; ++i) {
    RecordSpec spec{.key = i % 11, .median_us = 5.0 + (i * 7919) % 97, .config = "{\"KC\":" + std::to_string(i) + "}"};
    if (i % 9 == 0) spec.status = RecordStatus::Timeout;
    recs.push_back(makeRecord(spec));
  }
  ASSERT_EQ(src.post("/v1/records", test::recordsBody(recs), src.write_token).status, 200);
  std::string all;
  std::string since = "0";
  for (int pages = 0; pages < 20; ++pages) {
    Reply page = src.get("/v1/export?limit=25&since=" + since, src.read_token);
    ASSERT_EQ(page.status, 200);
    EXPECT_EQ(page.content_type, "application/x-ndjson");
    all += page.body;
    since = page.header("Tessera-Next-Since");
    if (page.header("Tessera-More") != "true") break;
  }
  EXPECT_EQ(std::count(all.begin(), all.end(), '\n'), 120);
  Reply imp = dst.post("/v1/import", all, dst.write_token, "application/x-ndjson");
  ASSERT_EQ(imp.status, 200) << imp.body;
  auto ij = json::parse(imp.body);
  EXPECT_EQ(ij["records"], 120);
  EXPECT_EQ(ij["inserted"], 11);
  for (int k = 0; k < 11; ++k) {
    const std::string id = makeRecord({.key = k}).key_id;
    Reply a = src.get("/v1/best/" + id, src.read_token), b = dst.get("/v1/best/" + id, dst.read_token);
    ASSERT_EQ(a.status, 200);
    ASSERT_EQ(b.status, 200);
    auto ra = decodeRecord(json::parse(a.body)["record"].dump()), rb = decodeRecord(json::parse(b.body)["record"].dump());
    EXPECT_EQ(fingerprint(*ra), fingerprint(*rb));
  }
  Reply twice = dst.post("/v1/import", all, dst.write_token, "application/x-ndjson");
  ASSERT_EQ(twice.status, 200);
  EXPECT_EQ(json::parse(twice.body)["duplicates"], 120);  // idempotent
  EXPECT_EQ(src.get("/v1/export?since=" + since, src.read_token).body, "");
  expectProblem(src.get("/v1/export?since=-1", src.read_token), 400, "invalid-query");
  expectProblem(src.get("/v1/export?limit=100001", src.read_token), 400, "invalid-query");
}

TEST(Server, ImportRefusesBadLinesUnlessPartial) {
  ServerFixture f;
  const std::string before = test::dbSnapshot(f.db);
  const std::string good1 = encodeRecord(makeRecord({.key = 1})), good2 = encodeRecord(makeRecord({.key = 2}));
  const std::string body = good1 + "\n{\"key\": 5}\n\n" + good2 + "\r\nnot json\n";
  Reply refused = f.post("/v1/import", body, f.write_token, "application/x-ndjson");
  expectProblem(refused, 422, "invalid-import");
  auto j = json::parse(refused.body);
  ASSERT_EQ(j["errors"].size(), 2u);
  EXPECT_EQ(j["errors"][0]["line"], 2);
  EXPECT_EQ(j["errors"][1]["line"], 5);
  EXPECT_EQ(test::dbSnapshot(f.db), before);
  expectProblem(f.post("/v1/import", "", f.write_token, "application/x-ndjson"), 422, "invalid-import");
  expectProblem(f.post("/v1/import", "not json\n", f.write_token, "application/x-ndjson"), 422, "invalid-import");
  expectProblem(f.post("/v1/import", good1, f.write_token, "application/json"), 415, "unsupported-media-type");
  expectProblem(f.post("/v1/import?partial=yes", good1, f.write_token, "application/x-ndjson"), 400, "invalid-query");
  EXPECT_EQ(test::dbSnapshot(f.db), before);
  Reply partial = f.post("/v1/import?partial=1", body, f.write_token, "application/x-ndjson");
  ASSERT_EQ(partial.status, 200) << partial.body;
  auto pj = json::parse(partial.body);
  EXPECT_EQ(pj["records"], 2);
  EXPECT_EQ(pj["invalid_lines"], 2);
  EXPECT_EQ(pj["errors"].size(), 2u);
}

TEST(Server, AdminBackup) {
  test::TempDir backups;
  ServerOptions o = test::testOptions();
  o.backup_dir = backups.path();
  ServerFixture f(o);
  ASSERT_EQ(f.post("/v1/records", encodeRecord(makeRecord({.key = 1})), f.write_token).status, 200);
  Reply r = f.post("/v1/admin/backup", R"({"label":"nightly"})", f.admin_token);
  ASSERT_EQ(r.status, 200) << r.body;
  auto j = json::parse(r.body);
  const std::string path = j["path"];
  EXPECT_NE(path.find("nightly"), std::string::npos);
  EXPECT_GT(j["bytes"].get<int64_t>(), 0);
  EXPECT_EQ(test::integrityCheck(path), "ok");
  EXPECT_EQ(test::queryRows(path, "SELECT count(*) FROM records")[0][0], "1");
  EXPECT_EQ(f.post("/v1/admin/backup", "", f.admin_token, "").status, 200);
  expectProblem(f.post("/v1/admin/backup", R"({"label":"../../etc"})", f.admin_token), 422, "invalid-request");
  expectProblem(f.post("/v1/admin/backup", R"({"path":"/tmp/x"})", f.admin_token), 422, "invalid-request");
  expectProblem(f.post("/v1/admin/backup", R"({"label":)", f.admin_token), 400, "malformed-json");
}

TEST(Server, StatusAndMetricsReportActivity) {
  ServerFixture f;
  Record r = makeRecord({.key = 1});
  ASSERT_EQ(f.post("/v1/records", test::recordsBody({r, makeRecord({.key = 1, .median_us = 1})}), f.write_token).status, 200);
  EXPECT_EQ(f.get("/v1/best/" + r.key_id, f.read_token).status, 200);
  EXPECT_EQ(f.get("/v1/best/" + std::string(64, 'c'), f.read_token).status, 404);
  auto st = json::parse(f.get("/status", f.read_token).body);
  EXPECT_EQ(st["records"], 2);
  EXPECT_EQ(st["winners"], 1);
  EXPECT_EQ(st["schema_version"], kSchemaVersion);
  EXPECT_EQ(st["tokens_active"], 3);
  EXPECT_GT(st["db_bytes"].get<int64_t>(), 0);
  Reply m = f.get("/metrics", f.read_token);
  ASSERT_EQ(m.status, 200);
  EXPECT_EQ(m.content_type, "text/plain; version=0.0.4; charset=utf-8");
  for (const char* line : {"tessera_http_requests_total{route=\"best\",code=\"200\"} 1",
                           "tessera_http_requests_total{route=\"best\",code=\"404\"} 1",
                           "tessera_http_requests_total{route=\"records_post\",code=\"200\"} 1",
                           "tessera_lookups_total{result=\"hit\"} 1", "tessera_lookups_total{result=\"miss\"} 1",
                           "tessera_record_writes_total{outcome=\"inserted\"} 1",
                           "tessera_record_writes_total{outcome=\"improved\"} 1", "tessera_records 2",
                           "tessera_http_request_duration_seconds_count{route=\"best\"} 2", "tessera_db_bytes "})
    EXPECT_NE(m.body.find(line), std::string::npos) << line << "\n" << m.body;
}

}  // namespace
}  // namespace tessera::cache
