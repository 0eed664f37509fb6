// Tests CacheClient::list (GET /v1/records), what a tune reads of a kernel on other GPUs: against
// the real server (filters, paging, quarantined records never listed) and against a fake one whose
// answers are garbage (an error each time, never a crash or a half-read page).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "client/client.h"
#include "tests/cache_service/test_util.h"

namespace tessera::cache {
namespace {

using test::makeRecord;

TEST(ClientList, PagesThroughTheRealServersRecords) {
  test::ServerFixture f;
  CacheClient writer({.base_url = f.url(), .token = f.write_token});
  std::vector<Record> recs = {makeRecord({.key = 0, .median_us = 30, .config = "{\"MC\":32}"}),
                              makeRecord({.key = 0, .median_us = 20, .config = "{\"MC\":64}"}),
                              makeRecord({.key = 1, .median_us = 10, .config = "{\"MC\":64}"})};
  ASSERT_TRUE(writer.put(recs).ok);
  CacheClient c({.base_url = f.url(), .token = f.read_token});
  auto all = c.list({});
  ASSERT_TRUE(all.ok()) << all.error().message;
  EXPECT_EQ(all->records.size(), 3u);
  // One key's records, one per page.
  ListQuery q{.key_id = recs[0].key_id};
  q.limit = 1;
  std::vector<double> seen;
  for (int pages = 0; pages < 5; ++pages) {
    auto page = c.list(q);
    ASSERT_TRUE(page.ok()) << page.error().message;
    for (const auto& r : page->records) seen.push_back(r.median_us);
    if (!page->next_after || page->records.empty()) break;
    q.after_id = page->next_after;
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<double>{20, 30}));
  // A filter that matches nothing is an empty page, not an error.
  auto none = c.list({.family = "no-such-family"});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->records.empty());
}

TEST(ClientList, GarbageAnswersAreErrors) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ::listen(fd, 16);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  const int port = ntohs(a.sin_port);
  const std::string valid = encodeRecord(makeRecord({}));
  const std::vector<std::string> bodies = {"not json", R"([1,2])", R"({"records":5})", R"({"records":[{"key":1}]})",
                                           R"({"records":[)" + valid + R"(,{"median_us":"fast"}]})"};
  std::thread fake([&] {
    for (const auto& body : bodies) {
      int c = ::accept(fd, nullptr, nullptr);
      if (c < 0) return;
      char buf[4096];
      (void)!::recv(c, buf, sizeof buf, 0);
      std::string resp = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
                         std::to_string(body.size()) + "\r\n\r\n" + body;
      (void)!::send(c, resp.data(), resp.size(), MSG_NOSIGNAL);
      ::close(c);
    }
  });
  CacheClient c({.base_url = "http://127.0.0.1:" + std::to_string(port), .backoff_s = 0});
  for (const auto& body : bodies) {
    auto page = c.list({});
    EXPECT_FALSE(page.ok()) << body;
    if (!page.ok()) {
      EXPECT_EQ(page.error().message.find('\n'), std::string::npos);
    }
  }
  fake.join();
  ::close(fd);
}

}  // namespace
}  // namespace tessera::cache
