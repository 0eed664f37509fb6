// Tests that a winner pulled from a team's shared cache can be compiled again, end to end with the
// real binaries on loopback: one client tunes a fused elementwise chain and a GEMM with an epilogue
// into a `tessera serve`, another with an empty store bundles every winner of the cache
// (`bundle --all-winners --cache`), the kernels' texts fetched from GET /v1/kernel-texts/{workload}.
// A service that sends a text which does not hash to its workload is refused, by the client
// (CacheClient::kernelText) and by the bundle, which then bundles nothing in its place.
// `tessera compare ... key HASH` compiles the same kernel from the kernel table, or the cache's.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
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

// A hostile service on loopback: answers each request from a table of path prefixes (status,
// content type, body), one request per connection. It speaks plain HTTP/1.1 correctly, so what
// a client refuses from it, it refuses for the content.
class CannedServer {
 public:
  struct Answer {
    std::string prefix;
    int status;
    std::string content_type, body;
  };
  explicit CannedServer(std::vector<Answer> answers) : answers_(std::move(answers)) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(listen(fd_, 16), 0);
    socklen_t len = sizeof a;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~CannedServer() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int kernelTextsServed() const { return texts_; }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      int c = accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      std::string req;
      char buf[4096];
      while (req.find("\r\n\r\n") == std::string::npos && req.size() < 65536) {
        pollfd q{c, POLLIN, 0};
        if (poll(&q, 1, 2000) <= 0) break;
        ssize_t n = read(c, buf, sizeof buf);
        if (n <= 0) break;
        req.append(buf, size_t(n));
      }
      const size_t sp = req.find(' '), sp2 = req.find(' ', sp + 1);
      const std::string path = sp == std::string::npos || sp2 == std::string::npos ? "" : req.substr(sp + 1, sp2 - sp - 1);
      Answer ans{"", 404, "application/problem+json", R"({"type":"about:blank","title":"Not found","status":404})"};
      for (const auto& a : answers_)
        if (path.starts_with(a.prefix)) {
          ans = a;
          break;
        }
      if (path.starts_with("/v1/kernel-texts/")) ++texts_;
      std::string out = "HTTP/1.1 " + std::to_string(ans.status) + " X\r\nContent-Type: " + ans.content_type +
                        "\r\nContent-Length: " + std::to_string(ans.body.size()) + "\r\nConnection: close\r\n\r\n" + ans.body;
      for (size_t at = 0; at < out.size();) {
        ssize_t n = write(c, out.data() + at, out.size() - at);
        if (n <= 0) break;
        at += size_t(n);
      }
      close(c);
    }
  }
  std::vector<Answer> answers_;
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> texts_{0};
  std::thread thread_;
};

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

const std::vector<std::string> kTune = {"tune", "--threads", "1", "--trials", "2", "--batch", "2", "--min-time", "0.002",
                                        "--top-k", "1"};

std::vector<std::string> tune(const std::string& db, std::vector<std::string> kernel) {
  std::vector<std::string> a = kTune;
  a.push_back("--db");
  a.push_back(db);
  a.insert(a.end(), kernel.begin(), kernel.end());
  return a;
}

}  // namespace

TEST(SharedWinners, APulledFusedEpilogueWinnerIsBundledFromTheCachesKernelText) {
  Service s(std::vector<std::string>{});
  const std::string alice = s.dir.file("alice.db");
  auto chain = runTessera(tune(alice, {"elementwise", "--expr", "y = gelu(x * 2 + z)", "--shape", "64x96"}), s.tuneEnv());
  ASSERT_EQ(chain.exit_code, 0) << chain.out << chain.err;
  auto epi = runTessera(tune(alice, {"gemm", "--m", "32", "--n", "48", "--k", "16", "--epilogue", "relu(acc + bias)",
                                     "--shape", "bias=48"}),
                        s.tuneEnv());
  ASSERT_EQ(epi.exit_code, 0) << epi.out << epi.err;
  // The service filed both kernels' texts with the pushed records.
  auto texts = queryRows(s.db, "SELECT workload, ir FROM kernel_texts ORDER BY ir LIKE '%gemm%'");
  ASSERT_EQ(texts.size(), 2u) << chain.err << epi.err;
  const std::string chain_w = texts[0][0], chain_ir = texts[0][1], gemm_w = texts[1][0], gemm_ir = texts[1][1];
  ASSERT_NE(gemm_ir.find("gemm"), std::string::npos) << gemm_ir;

  // The read route: the text as filed, and clear answers for everything else.
  tessera::cache::CacheClient client({.base_url = s.url, .token = s.tuner});
  auto got = client.kernelText(gemm_w);
  ASSERT_TRUE(got.ok()) << got.error().message;
  ASSERT_TRUE(*got);
  EXPECT_EQ(**got, gemm_ir);
  auto none = client.kernelText(std::string(64, 'a'));
  ASSERT_TRUE(none.ok()) << none.error().message;
  EXPECT_FALSE(*none);
  {
    auto conn = tessera::cache::openHttpConnection(s.url, 2.0);
    ASSERT_TRUE(conn.ok());
    auto bad = (*conn)->send("GET", "/v1/kernel-texts/XYZ", {{"Authorization", "Bearer " + s.tuner}}, "", "", 5.0);
    ASSERT_TRUE(bad.ok());
    EXPECT_EQ(bad->status, 400) << bad->body;
  }
  {
    auto conn = tessera::cache::openHttpConnection(s.url, 2.0);
    ASSERT_TRUE(conn.ok());
    auto anon = (*conn)->send("GET", "/v1/kernel-texts/" + gemm_w, {{"Authorization", "Bearer nope"}}, "", "", 5.0);
    ASSERT_TRUE(anon.ok());
    EXPECT_EQ(anon->status, 401) << anon->body;
  }

  // Bob has no store at all: every winner of the cache, both rebuilt from the cache's texts, exact.
  const std::string bundle_dir = s.dir.file("b1");
  auto b1 = runTessera({"bundle", "--all-winners", "--targets", "host", "--threads", "1", "--json", "--replace", "--db",
                        s.dir.file("bob.db"), "--out", bundle_dir},
                       s.tuneEnv());
  ASSERT_EQ(b1.exit_code, 0) << b1.out << b1.err;
  EXPECT_EQ(b1.err.find("cannot be rebuilt"), std::string::npos) << b1.err;
  EXPECT_FALSE(std::filesystem::exists(s.dir.file("bob.db")));
  const std::string m1 = slurp(bundle_dir + "/manifest.json");
  EXPECT_NE(m1.find("\"family\": \"elementwise\""), std::string::npos) << m1;
  EXPECT_NE(m1.find("\"family\": \"gemm\""), std::string::npos) << m1;
  EXPECT_EQ(count(m1, "\"source\": \"exact\""), 2u) << m1;

  // Carol has an empty store: the texts end up in its kernel table, checked, under their hashes.
  const std::string carol = s.dir.file("carol.db");
  ASSERT_TRUE(tessera::cache::openSqliteStore(carol).ok());
  auto b2 = runTessera({"bundle", "--all-winners", "--targets", "host", "--threads", "1", "--json", "--replace", "--db",
                        carol, "--out", s.dir.file("b2")},
                       s.tuneEnv());
  ASSERT_EQ(b2.exit_code, 0) << b2.out << b2.err;
  EXPECT_EQ(count(slurp(s.dir.file("b2") + "/manifest.json"), "\"source\": \"exact\""), 2u);
  auto filed = queryRows(carol, "SELECT workload, ir FROM kernel_texts ORDER BY ir LIKE '%gemm%'");
  ASSERT_EQ(filed.size(), 2u);
  EXPECT_EQ(filed[1][0], gemm_w);
  EXPECT_EQ(filed[1][1], gemm_ir);
  EXPECT_EQ(tessera::sha256Hex(filed[1][1]), gemm_w);

  // `compare ... key HASH` rebuilds the same GEMM with its epilogue from the kernel table: alice's
  // by a prefix of its workload, carol's (texts only) by the whole hash, and the shared cache's
  // for a store without it (which then keeps the text); alice's host winner is the one compared.
  const std::vector<std::string> cmp = {"compare", "--json", "--targets", "host", "--threads", "1", "--db"};
  auto withDb = [&](const std::string& db, const std::string& hash) {
    std::vector<std::string> a = cmp;
    a.push_back(db);
    a.push_back("key");
    a.push_back(hash);
    return a;
  };
  auto c1 = runTessera(withDb(alice, gemm_w.substr(0, 12)), s.tuneEnv());
  ASSERT_EQ(c1.exit_code, 0) << c1.out << c1.err;
  json cj = json::parse(c1.out);
  EXPECT_EQ(cj["kernel"], "gemm_" + gemm_w.substr(0, 8)) << c1.out;
  ASSERT_EQ(cj["targets"].size(), 1u) << c1.out;
  EXPECT_EQ(cj["targets"][0]["source"], "measured") << c1.out;
  auto local = runTessera(withDb(carol, gemm_w));  // carol's table, no cache: an estimate at most
  ASSERT_EQ(local.exit_code, 0) << local.out << local.err;
  EXPECT_EQ(json::parse(local.out)["kernel"], "gemm_" + gemm_w.substr(0, 8)) << local.out;
  const std::string frank = s.dir.file("frank.db");
  auto c2 = runTessera(withDb(frank, gemm_w), s.tuneEnv());
  ASSERT_EQ(c2.exit_code, 0) << c2.out << c2.err;
  EXPECT_EQ(json::parse(c2.out)["targets"][0]["source"], "measured") << c2.out;
  EXPECT_EQ(queryRows(frank, "SELECT workload FROM kernel_texts"), std::vector<std::vector<std::string>>{{gemm_w}});
  auto c3 = runTessera(withDb(s.dir.file("grace.db"), gemm_w));  // no cache: no text anywhere
  EXPECT_NE(c3.exit_code, 0) << c3.out;
  EXPECT_NE(c3.err.find("no text of kernel"), std::string::npos) << c3.err;

  // Control: without the cache, carol's twin (an empty store) has no winner to bundle.
  const std::string dave = s.dir.file("dave.db");
  ASSERT_TRUE(tessera::cache::openSqliteStore(dave).ok());
  auto alone = runTessera({"bundle", "--all-winners", "--targets", "host", "--threads", "1", "--json", "--replace",
                           "--db", dave, "--out", s.dir.file("b3")});
  EXPECT_EQ(alone.exit_code, 5) << alone.out << alone.err;

  // A hostile cache lists the same GEMM winner but sends the chain's text for it: a valid kernel,
  // not the one the key names. The client refuses it; the bundle reports the winner and files nothing.
  auto conn = tessera::cache::openHttpConnection(s.url, 2.0);
  ASSERT_TRUE(conn.ok());
  auto listed = (*conn)->send("GET", "/v1/records?winners_only=1&workload=" + gemm_w, {{"Authorization", "Bearer " + s.tuner}},
                              "", "", 5.0);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->status, 200) << listed->body;
  json page = json::parse(listed->body);
  ASSERT_EQ(page["records"].size(), 1u) << listed->body;
  page["next_after"] = nullptr;
  CannedServer hostile({{"/v1/records", 200, "application/json", page.dump()},
                        {"/v1/kernel-texts/", 200, "text/plain", chain_ir}});
  tessera::cache::CacheClient evil({.base_url = hostile.url(), .token = s.tuner});
  auto lie = evil.kernelText(gemm_w);
  ASSERT_FALSE(lie.ok());
  EXPECT_NE(lie.error().message.find("does not hash"), std::string::npos) << lie.error().message;
  // The same server telling the truth is believed: the refusal above is for the content.
  CannedServer honest({{"/v1/kernel-texts/", 200, "text/plain", gemm_ir}});
  tessera::cache::CacheClient good({.base_url = honest.url(), .token = s.tuner});
  auto truth = good.kernelText(gemm_w);
  ASSERT_TRUE(truth.ok()) << truth.error().message;
  ASSERT_TRUE(*truth);
  EXPECT_EQ(**truth, gemm_ir);

  const std::string erin = s.dir.file("erin.db");
  ASSERT_TRUE(tessera::cache::openSqliteStore(erin).ok());
  auto b4 = runTessera({"bundle", "--all-winners", "--targets", "host", "--threads", "1", "--json", "--replace", "--db",
                        erin, "--out", s.dir.file("b4")},
                       {"TESSERA_CACHE_URL=" + hostile.url(), "TESSERA_TOKEN=" + s.tuner});
  EXPECT_GE(hostile.kernelTextsServed(), 1);
  EXPECT_EQ(b4.exit_code, 5) << b4.out << b4.err;
  EXPECT_NE(b4.err.find("does not hash"), std::string::npos) << b4.err;
  EXPECT_NE(b4.err.find("cannot be rebuilt"), std::string::npos) << b4.err;
  EXPECT_EQ(queryRows(erin, "SELECT count(*) FROM kernel_texts")[0][0], "0");
  auto c4 = runTessera(withDb(s.dir.file("heidi.db"), gemm_w), {"TESSERA_CACHE_URL=" + hostile.url(), "TESSERA_TOKEN=" + s.tuner});
  EXPECT_NE(c4.exit_code, 0) << c4.out;
  EXPECT_NE(c4.err.find("does not hash"), std::string::npos) << c4.err;
  EXPECT_EQ(queryRows(s.dir.file("heidi.db"), "SELECT count(*) FROM kernel_texts")[0][0], "0");
}
