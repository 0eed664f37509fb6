// Tests the resource limits of `tessera serve` (issue 15, findings 3, 4 and the backlog of 6) by
// repeating the attacks against the real binary, on either store engine: slow-drip heads and
// bodies from 300 connections, a request with a million header fields (16 at once), a burst of
// connects, idle keep-alive connections. Throughout, /healthz from another client address must
// keep answering (HealthProbe says how fast).
// Attackers connect from 127.0.0.2 (all of 127/8 is loopback) so that the per-client cap, which
// is part of the defence, does not also refuse the probe. TESSERA_TEST_BIN=<other tessera> runs
// the same attacks against another build (main's, for the before).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "tests/cache_service/process_util.h"
#include "tests/cache_service/test_util.h"

namespace tessera::cache {
namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// A TCP connection from `source` (a loopback address) to the server; -1 when it cannot connect
// within timeout_ms.
int connectFrom(const char* source, int port, int timeout_ms = 3000) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in src{};
  src.sin_family = AF_INET;
  inet_pton(AF_INET, source, &src.sin_addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof src) != 0) {
    ::close(fd);
    return -1;
  }
  fcntl(fd, F_SETFL, O_NONBLOCK);
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&dst), sizeof dst) != 0 && errno != EINPROGRESS) {
    ::close(fd);
    return -1;
  }
  pollfd p{fd, POLLOUT, 0};
  int err = 0;
  socklen_t len = sizeof err;
  if (::poll(&p, 1, timeout_ms) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// What the server said on a connection so far: the status of its answer (0: none yet), and
// whether it closed the connection.
struct Seen {
  int status = 0;
  bool closed = false;
};
void poll_(int fd, Seen& s) {
  char buf[4096];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      if (s.status == 0 && n >= 12 && std::string(buf, 5) == "HTTP/") s.status = std::atoi(buf + 9);
      continue;
    }
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) s.closed = true;
    return;
  }
}

// Asks /healthz on a fresh connection every 50 ms; records every answer's time and the failures.
// What the attacks must not do is starve the probe: a starved service answers in seconds or not at
// all, so the bound is nine probes in ten within 100 ms and every one within 1 s (one slow probe on
// a busy 2-core CI machine is not starvation).
class HealthProbe {
 public:
  explicit HealthProbe(int port) : thread_([this, port] {
      while (!stop_) {
        auto t0 = Clock::now();
        test::Reply r = test::rawRequest(port, "GET /healthz HTTP/1.1\r\nHost: probe\r\n\r\n", 2000);
        const double ms = msSince(t0);
        {
          std::lock_guard<std::mutex> lock(mu_);
          times_ms_.push_back(ms);
          if (r.status != 200) ++failures_;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }) {}
  ~HealthProbe() { finish(); }
  void finish() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  double worstMs() const { return quantileMs(1.0); }
  double p90Ms() const { return quantileMs(0.9); }
  int probes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(times_ms_.size());
  }
  int failures() const {
    std::lock_guard<std::mutex> lock(mu_);
    return failures_;
  }
  // The bound above, as one gtest check.
  void expectAnswered(const char* what) const {
    EXPECT_EQ(failures(), 0) << what;
    EXPECT_LT(p90Ms(), 100) << "p90 /healthz " << what;
    EXPECT_LT(worstMs(), 1000) << "slowest /healthz " << what;
  }

 private:
  double quantileMs(double q) const {
    std::lock_guard<std::mutex> lock(mu_);
    if (times_ms_.empty()) return 0;
    std::vector<double> sorted = times_ms_;
    std::sort(sorted.begin(), sorted.end());
    const size_t i = std::min(sorted.size() - 1, static_cast<size_t>(q * static_cast<double>(sorted.size())));
    return sorted[i];
  }

  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::vector<double> times_ms_;
  int failures_ = 0;
  std::thread thread_;
};

int64_t peakRssKb(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::atoll(line.c_str() + 6);
  return -1;
}

std::string addToken(const std::string& db, const std::string& name, const std::string& scope) {
  auto r = test::runTessera({"serve", "token", "add", name, "--scope", scope, "--db", db});
  std::string s = r.out;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Sends `bytes` one byte per connection per step, `step_ms` apart, for `total_ms`, and reports
// what each connection got.
std::vector<Seen> drip(const std::vector<int>& fds, const std::string& bytes, int step_ms, int total_ms) {
  std::vector<Seen> seen(fds.size());
  size_t at = 0;
  auto t0 = Clock::now();
  while (msSince(t0) < total_ms) {
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i] < 0 || seen[i].closed) continue;
      poll_(fds[i], seen[i]);
      if (!seen[i].closed && at < bytes.size()) (void)::send(fds[i], bytes.data() + at, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    ++at;
    std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
  }
  for (size_t i = 0; i < fds.size(); ++i)
    if (fds[i] >= 0) poll_(fds[i], seen[i]);
  return seen;
}

// Finding 3. Before: 300 connections dripping one header byte every 2 s held every worker, and
// /healthz timed out from about 12 s on until the attack stopped.
// The attacked service's store: a SQLite file, or a fresh database on the tests' PostgreSQL server
// (whose connection pool the attacks must not exhaust either).
struct Store {
  Store(test::Engine e, const test::TempDir& dir, const std::string& file) {
    if (e == test::Engine::Postgres) pg = std::make_unique<test::PgDatabase>();
    db = pg ? pg->url() : dir.file(file);
  }
  std::unique_ptr<test::PgDatabase> pg;
  std::string db;
};

class Attack : public ::testing::TestWithParam<test::Engine> {};

TEST_P(Attack, SlowDripHeadsDoNotStarveTheServer) {
  test::TempDir dir;
  Store store(GetParam(), dir, "a.db");
  const std::string db = store.db;
  test::ServeProcess srv(db, dir.path(), {"--threads", "4", "--head-timeout", "2", "--sync", "normal"});
  std::vector<int> fds;
  for (int i = 0; i < 300; ++i) fds.push_back(connectFrom("127.0.0.2", srv.port()));
  HealthProbe probe(srv.port());
  auto seen = drip(fds, "GET /healthz HTTP/1.1\r\nHost: drip\r\nX-Pad: " + std::string(100, 'a'), 100, 3500);
  probe.finish();
  int refused = 0, timed_out = 0, open = 0;
  for (const Seen& s : seen) {
    refused += s.status == 503;
    timed_out += s.status == 408;
    open += !s.closed;
  }
  for (int fd : fds) ::close(fd);
  std::printf("[measured] slow-drip heads: /healthz worst %.1f ms over %d probes; 503: %d, 408: %d\n", probe.worstMs(),
              probe.probes(), refused, timed_out);
  // 128 per client are let in and dropped at the 2 s head deadline with 408, and 16 more past the
  // cap (the reserve for health probes) at the 1 s probe deadline; the rest got 503.
  EXPECT_EQ(refused, 300 - 128 - 16);
  EXPECT_EQ(timed_out, 128 + 16);
  EXPECT_EQ(open, 0);
  EXPECT_GT(probe.probes(), 20);
  probe.expectAnswered("during the attack");
}

// Finding 3, bodies. Before: the same starvation with complete heads and dripping bodies; and a
// body was read before its request was refused.
TEST_P(Attack, SlowDripBodiesDoNotStarveTheServer) {
  test::TempDir dir;
  Store store(GetParam(), dir, "b.db");
  const std::string db = store.db;
  const std::string writer = addToken(db, "w", "write");
  test::ServeProcess srv(db, dir.path(), {"--threads", "4", "--body-timeout", "2", "--sync", "normal"});
  const std::string head = "POST /v1/records HTTP/1.1\r\nHost: drip\r\nContent-Type: application/json\r\n"
                           "Content-Length: 100000\r\n";
  std::vector<int> authed, anonymous;
  for (int i = 0; i < 100; ++i) {
    int fd = connectFrom("127.0.0.2", srv.port());
    std::string h = head + "Authorization: Bearer " + writer + "\r\n\r\n";
    (void)::send(fd, h.data(), h.size(), MSG_NOSIGNAL);
    authed.push_back(fd);
  }
  for (int i = 0; i < 20; ++i) {
    int fd = connectFrom("127.0.0.3", srv.port());
    std::string h = head + "\r\n";
    (void)::send(fd, h.data(), h.size(), MSG_NOSIGNAL);
    anonymous.push_back(fd);
  }
  HealthProbe probe(srv.port());
  auto seen = drip(authed, std::string(1000, ' '), 100, 3000);
  probe.finish();
  auto anon = drip(anonymous, "", 10, 50);
  int timed_out = 0, unauthorized = 0;
  for (const Seen& s : seen) timed_out += s.status == 408 && s.closed;
  for (const Seen& s : anon) unauthorized += s.status == 401;
  for (int fd : authed) ::close(fd);
  for (int fd : anonymous) ::close(fd);
  std::printf("[measured] slow-drip bodies: /healthz worst %.1f ms over %d probes; 408: %d, 401: %d\n", probe.worstMs(),
              probe.probes(), timed_out, unauthorized);
  EXPECT_EQ(timed_out, 100);
  EXPECT_EQ(unauthorized, 20);  // refused from the head alone, body never read
  probe.expectAnswered("during the attack");
}

// Finding 4. Before: one request with 10^6 small header fields got 200 and cost about 137 MB; 16
// at once reached 2.7 GB.
TEST_P(Attack, HeaderFloodsAre431AndCostNoMemory) {
  test::TempDir dir;
  Store store(GetParam(), dir, "c.db");
  const std::string db = store.db;
  test::ServeProcess srv(db, dir.path(), {"--sync", "normal"});
  // Clean refusals: too many fields, one field too long.
  std::string many = "GET /healthz HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 101; ++i) many += "X-F" + std::to_string(i) + ": v\r\n";
  test::Reply r = test::rawRequest(srv.port(), many + "\r\n");
  EXPECT_EQ(r.status, 431) << r.body;
  EXPECT_NE(r.body.find("headers-too-large"), std::string::npos) << r.body;
  r = test::rawRequest(srv.port(), "GET /healthz HTTP/1.1\r\nX-Long: " + std::string(20000, 'a') + "\r\n\r\n");
  EXPECT_EQ(r.status, 431);
  const int64_t before_kb = peakRssKb(srv.pid());

  std::string flood = "GET /healthz HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 1000000; ++i) flood += "A: b\r\n";
  HealthProbe probe(srv.port());
  std::vector<std::thread> attackers;
  std::atomic<int> answered{0};
  auto t0 = Clock::now();
  for (int i = 0; i < 16; ++i)
    attackers.emplace_back([&] {
      int fd = connectFrom("127.0.0.2", srv.port());
      size_t sent = 0;
      while (sent < flood.size()) {
        ssize_t n = ::send(fd, flood.data() + sent, flood.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) break;  // refused and closed early
        sent += static_cast<size_t>(n);
      }
      Seen s;
      for (int k = 0; k < 100 && !s.closed; ++k) {
        poll_(fd, s);
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      // Refused: a 431, or (when the kernel's buffers took the whole flood before the server
      // closed with unread input) a reset. Never a 200, which is what main answered.
      answered += s.status == 431 || (s.status == 0 && s.closed);
      ::close(fd);
    });
  for (auto& t : attackers) t.join();
  probe.finish();
  const double elapsed = msSince(t0);
  EXPECT_EQ(answered, 16);
  EXPECT_LT(elapsed, 5000);
  const int64_t growth_kb = peakRssKb(srv.pid()) - before_kb;
  std::printf("[measured] 16 x 10^6 header fields: refused in %.0f ms, peak RSS +%lld KiB, /healthz worst %.1f ms\n",
              elapsed, static_cast<long long>(growth_kb), probe.worstMs());
  EXPECT_LT(growth_kb, 32 * 1024) << "peak RSS grew by " << growth_kb << " KiB";
  probe.expectAnswered("during the flood");
}

// Finding 6 (backlog) and the connection cap. Before: the listen backlog was 5; 300 connects in
// a row took 35 s with 84 dropped.
TEST_P(Attack, ConnectBurstsAreAcceptedOrRefusedAtOnce) {
  test::TempDir dir;
  Store store(GetParam(), dir, "d.db");
  const std::string db = store.db;
  test::ServeProcess srv(db, dir.path(),
                         {"--max-connections", "400", "--max-connections-per-client", "0", "--sync", "normal"});
  auto t0 = Clock::now();
  std::vector<int> fds;
  for (int i = 0; i < 300; ++i) fds.push_back(connectFrom("127.0.0.2", srv.port(), 5000));
  const double elapsed = msSince(t0);
  EXPECT_EQ(std::count(fds.begin(), fds.end(), -1), 0);
  EXPECT_LT(elapsed, 2000) << "300 connects";
  std::printf("[measured] 300 connects in %.0f ms, %ld failed\n", elapsed, std::count(fds.begin(), fds.end(), -1));
  // Past --max-connections, the longest-idle connections are closed to make room (issue 25: idle
  // connections must not lock a liveness probe out); none is refused while one is idle.
  std::vector<int> more;
  for (int i = 0; i < 120; ++i) more.push_back(connectFrom("127.0.0.2", srv.port()));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  int refused = 0, evicted = 0;
  for (int fd : more) {
    Seen s;
    poll_(fd, s);
    refused += s.status == 503;
  }
  for (int fd : fds) {
    Seen s;
    poll_(fd, s);
    evicted += s.closed;
  }
  EXPECT_EQ(refused, 0);
  EXPECT_EQ(evicted, 20);
  for (int fd : fds) ::close(fd);
  for (int fd : more) ::close(fd);
  // The server sees the 400 closes asynchronously (its epoll loop): a request sent at once can
  // still find the cap full and get the early 503 (it did, 2 runs in 6). What matters is that it
  // recovers: a 200 within 2 s.
  test::Reply r;
  const auto t1 = Clock::now();
  do {
    r = test::rawRequest(srv.port(), "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    if (r.status == 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (msSince(t1) < 2000);
  EXPECT_EQ(r.status, 200);
}

// Keep-alive limits: idle connections hold no worker (2 threads, 100 idle connections) and are
// closed after the keep-alive timeout.
TEST_P(Attack, IdleKeepAliveConnectionsHoldNoWorker) {
  test::TempDir dir;
  Store store(GetParam(), dir, "e.db");
  const std::string db = store.db;
  test::ServeProcess srv(db, dir.path(), {"--threads", "2", "--keep-alive-timeout", "1", "--sync", "normal"});
  std::vector<int> fds;
  const std::string req = "GET /healthz HTTP/1.1\r\nHost: idle\r\n\r\n";
  for (int i = 0; i < 100; ++i) {
    int fd = connectFrom("127.0.0.2", srv.port());
    (void)::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
    fds.push_back(fd);
  }
  HealthProbe probe(srv.port());
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  std::vector<Seen> seen(fds.size());
  for (size_t i = 0; i < fds.size(); ++i) poll_(fds[i], seen[i]);
  int answered = 0, closed_early = 0;
  for (const Seen& s : seen) {
    answered += s.status == 200;
    closed_early += s.closed;
  }
  EXPECT_EQ(answered, 100);
  EXPECT_EQ(closed_early, 0);  // kept alive for the next request...
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  int closed = 0;
  for (size_t i = 0; i < fds.size(); ++i) {
    poll_(fds[i], seen[i]);
    closed += seen[i].closed;
  }
  EXPECT_EQ(closed, 100);  // ...for at most the keep-alive timeout
  probe.finish();
  for (int fd : fds) ::close(fd);
  probe.expectAnswered("while the idle connections are held");
}

INSTANTIATE_TEST_SUITE_P(Engines, Attack, ::testing::ValuesIn(test::builtEngines()),
                         [](const auto& info) { return std::string(test::engineName(info.param)); });

}  // namespace
}  // namespace tessera::cache
