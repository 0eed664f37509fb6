// Fuzz-style test of the whole server: thousands of malformed or random requests (mutated and
// type-confused records, broken imports, random routes, queries, tokens, framing and raw bytes).
// Every answer must be a 4xx problem (or, for bytes that are not HTTP, no answer), the server must
// stay healthy, and the database must be byte-for-byte unchanged, on either store engine.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "store/record_json.h"
#include "tests/cache_service/test_util.h"

namespace tessera::cache {
namespace {

using nlohmann::json;

class Fuzzer {
 public:
  explicit Fuzzer(uint64_t seed) : rng_(seed) {}
  size_t below(size_t n) { return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  bool coin() { return below(2) == 0; }
  std::string bytes(size_t n) {
    std::string s;
    for (size_t i = 0; i < n; ++i) s += static_cast<char>(below(256));
    return s;
  }
  std::string mutate(std::string s) {
    const int edits = 1 + static_cast<int>(below(4));
    for (int e = 0; e < edits && !s.empty(); ++e) {
      size_t at = below(s.size());
      switch (below(6)) {
        case 0: s[at] = static_cast<char>(below(256)); break;                        // flip a byte
        case 1: s.erase(at, 1 + below(20)); break;                                   // delete a run
        case 2: s.insert(at, bytes(1 + below(8))); break;                            // insert junk
        case 3: s.insert(at, std::string(1 + below(3), "{}[]\",:"[below(7)])); break;  // JSON syntax
        case 4: s.resize(at); break;                                                 // truncate
        case 5: s.insert(at, s.substr(below(s.size()), below(30))); break;           // duplicate a run
      }
    }
    return s;
  }
  json randomValue() {
    switch (below(9)) {
      case 0: return nullptr;
      case 1: return coin();
      case 2: return static_cast<int64_t>(below(1000)) - 500;
      case 3: return -1.5e300;
      case 4: return "x";
      case 5: return json::array({1, "a"});
      case 6: return json::object({{"k", 1}});
      case 7: return std::string(300, 'z');
      default: return 1e-300;
    }
  }

 private:
  std::mt19937_64 rng_;
};

// Mirrors what POST /v1/records accepts, so a mutation that happens to stay valid is not sent
// (it would rightly be stored).
bool acceptedAsRecords(const std::string& body) {
  auto j = parseJson(body);
  if (!j.ok()) return false;
  const json* list = j->is_array() ? &*j : (j->is_object() && j->size() == 1 && j->contains("records")) ? &(*j)["records"] : nullptr;
  if (!list) return j->is_object() && recordFromJson(*j, "").ok();
  if (!list->is_array() || list->empty() || list->size() > 1000) return false;
  for (const auto& r : *list)
    if (!recordFromJson(r, "").ok()) return false;
  return true;
}

// Every JSON path of a record object, for type confusion.
void paths(const json& j, std::vector<json::json_pointer>& out, json::json_pointer at = json::json_pointer()) {
  if (!at.empty()) out.push_back(at);
  if (j.is_object())
    for (auto it = j.begin(); it != j.end(); ++it) paths(*it, out, at / it.key());
  else if (j.is_array())
    for (size_t i = 0; i < j.size(); ++i) paths(j[i], out, at / i);
}

class FuzzRequests : public ::testing::TestWithParam<test::Engine> {};

TEST_P(FuzzRequests, MalformedRequestsGet4xxAndChangeNothing) {
  test::ServerFixture f(test::testOptions(), true, GetParam());
  std::vector<Record> seed;
  for (int i = 0; i < 20; ++i) seed.push_back(test::makeRecord({.key = i % 5, .median_us = 50.0 + i}));
  ASSERT_EQ(f.post("/v1/records", test::recordsBody(seed), f.write_token).status, 200);
  const std::string before = test::dbSnapshot(f.db);
  const std::string before_status = f.get("/status", f.read_token).body;

  Fuzzer fz(20250131);
  const std::string valid = encodeRecord(test::makeRecord({.key = 42, .median_us = 1}));
  const json valid_json = json::parse(valid);
  std::vector<json::json_pointer> fields;
  paths(valid_json, fields);

  auto conn = openHttpConnection(f.url(), 5.0);
  ASSERT_TRUE(conn.ok());
  const HeaderList write_auth = {{"Authorization", "Bearer " + f.write_token}};
  const HeaderList read_auth = {{"Authorization", "Bearer " + f.read_token}};
  int sent = 0, skipped_valid = 0;
  auto check = [&](int status, const std::string& content_type, const std::string& what) {
    ++sent;
    EXPECT_TRUE(status >= 400 && status < 500) << what << " -> " << status;
    if (status >= 400) {
      EXPECT_EQ(content_type, "application/problem+json") << what;
    }
  };
  auto send = [&](const char* method, const std::string& target, const HeaderList& h, const std::string& body,
                  const std::string& type) {
    auto r = (*conn)->send(method, target, h, body, type, 5.0);
    ASSERT_TRUE(r.ok()) << target << ": " << r.error().message;
    const std::string* ct = r->header("Content-Type");
    check(r->status, ct ? *ct : "", std::string(method) + " " + target + " " + body.substr(0, 200));
  };

  // 1. Mutated records (single, array and batch forms).
  for (int i = 0; i < 1500; ++i) {
    std::string body = fz.mutate(valid);
    if (i % 3 == 1) body = "[" + body + "]";
    if (i % 3 == 2) body = "{\"records\":[" + valid + "," + body + "]}";
    if (acceptedAsRecords(body)) {
      ++skipped_valid;
      continue;
    }
    send("POST", "/v1/records", write_auth, body, "application/json");
  }
  // 2. Type confusion on every field, and missing fields.
  for (const auto& ptr : fields) {
    for (int k = 0; k < 6; ++k) {
      json j = valid_json;
      j[ptr] = fz.randomValue();
      std::string body = j.dump(-1, ' ', false, json::error_handler_t::replace);
      if (acceptedAsRecords(body)) {
        ++skipped_valid;
        continue;
      }
      send("POST", "/v1/records", write_auth, body, "application/json");
    }
    json j = valid_json;
    json& parent = j[ptr.parent_pointer()];
    if (parent.is_object()) parent.erase(ptr.back());
    else if (parent.is_array()) parent.erase(std::stoul(ptr.back()));
    if (!acceptedAsRecords(j.dump())) send("POST", "/v1/records", write_auth, j.dump(), "application/json");
  }
  // 3. Imports with one broken line.
  for (int i = 0; i < 300; ++i) {
    std::string bad = fz.mutate(valid);
    if (bad.find('\n') != std::string::npos || decodeRecord(bad).ok()) continue;
    send("POST", "/v1/import", write_auth, valid + "\n" + bad + "\n", "application/x-ndjson");
  }
  // 4. Random routes, methods and queries.
  const char* methods[] = {"GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"};
  const char* bases[] = {"/v1/", "/v1/best/", "/v1/records/", "/v2/", "/", "/v1/admin/", "/healthz/"};
  const std::string alphabet = "abcdefXYZ0123456789-_.~%/";
  for (int i = 0; i < 600; ++i) {
    std::string path = bases[fz.below(std::size(bases))];
    for (size_t n = 1 + fz.below(20); n > 0; --n) path += alphabet[fz.below(alphabet.size())];
    if (path.find('%') != std::string::npos) path += "41";
    send(methods[fz.below(std::size(methods))], path, write_auth, fz.coin() ? "" : "{}", "application/json");
  }
  const char* params[] = {"family", "kernel", "shape", "dtype", "units", "limit", "after", "since", "nearest", "zzz"};
  const char* reads[] = {"/v1/best", "/v1/records", "/v1/nearest", "/v1/export", "/status", "/metrics"};
  for (int i = 0; i < 400; ++i) {
    std::string target = std::string(reads[fz.below(std::size(reads))]) + "?";
    for (size_t n = 1 + fz.below(4); n > 0; --n)
      target += std::string(params[fz.below(std::size(params))]) + "=" + (fz.coin() ? "-1" : "x%20y") + "&";
    target += "zzz=1";  // always at least one unknown parameter
    send("GET", target, read_auth, "", "");
  }
  // 5. Wrong tokens.
  for (int i = 0; i < 200; ++i) {
    std::string tok = fz.coin() ? f.write_token : "tsk_" + std::string(64, '0');
    const std::string printable = "ghijklmnopqrstuvwxyzGHIJKLMNOP_-.";
    tok[4 + fz.below(tok.size() - 4)] = printable[fz.below(printable.size())];  // hex part: never hex again
    const HeaderList h = {{"Authorization", (fz.coin() ? "Bearer " : "Token ") + tok}};
    send("POST", "/v1/records", h, valid, "application/json");
  }
  // 6. Broken framing and raw bytes (fresh connections).
  for (int i = 0; i < 200; ++i) {
    std::string req;
    const std::string auth = "Authorization: Bearer " + f.write_token;
    int wait_ms = 2000;
    switch (i % 5) {
      case 0: req = fz.bytes(1 + fz.below(300)) + "\r\n\r\n"; break;
      case 1:
        if (i % 20 != 1) continue;  // the server rightly waits for the missing bytes: keep these few
        req = test::httpRequest("POST", "/v1/records", valid.substr(0, valid.size() / 2),
                                {auth, "Content-Type: application/json", "Content-Length: " + std::to_string(valid.size())}, false);
        wait_ms = 300;
        break;
      case 2: req = test::httpRequest("POST", "/v1/records", valid, {auth, "Content-Type: application/json", "Transfer-Encoding: chunked"}, false);
        break;
      case 3: req = test::httpRequest("POST", "/v1/records", valid, {auth, "Content-Type: application/json", "Content-Encoding: br"});
        break;
      case 4: req = "POST /v1/records HTTP/1.1\r\n" + fz.mutate(auth + "\r\nContent-Type: application/json\r\nContent-Length: 10") + "\r\n\r\n" + valid;
        break;
    }
    test::Reply r = test::rawRequest(f.port(), req, wait_ms);
    if (r.status != 0) check(r.status, r.content_type, "raw case " + std::to_string(i % 5));
  }
  EXPECT_GT(sent, 2500) << "skipped as valid: " << skipped_valid;
  EXPECT_EQ(f.get("/healthz").status, 200);
  EXPECT_EQ(test::dbSnapshot(f.db), before);
  // /status is unchanged apart from uptime.
  auto a = json::parse(before_status), b = json::parse(f.get("/status", f.read_token).body);
  a.erase("uptime_s");
  b.erase("uptime_s");
  EXPECT_EQ(a, b);
}

INSTANTIATE_TEST_SUITE_P(Engines, FuzzRequests, ::testing::ValuesIn(test::builtEngines()),
                         [](const auto& info) { return std::string(test::engineName(info.param)); });

}  // namespace
}  // namespace tessera::cache
