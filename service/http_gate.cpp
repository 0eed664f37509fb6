// Owns the connection gate (http_gate.h): the epoll loop that reads request heads and bodies
// under deadlines and size caps, the open-connection caps with an early 503, and the worker pool
// that runs complete requests.
#include "service/http_gate.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include "service/http_framing.h"
#include "support/strings.h"

namespace tessera::cache {

namespace {

using Clock = std::chrono::steady_clock;

// How long a worker that just answered a keep-alive connection waits for its next request when
// no other connection is queued for a worker.
constexpr int kInlineWaitMs = 20;

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

std::string peerAddress(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "?";
  char text[INET6_ADDRSTRLEN] = "?";
  if (addr.ss_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&addr)->sin_addr, text, sizeof text);
  else if (addr.ss_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&addr)->sin6_addr, text, sizeof text);
  return text;
}

std::string percentDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  auto hex = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
  };
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// Request line and header fields of a complete head (which ends with an empty line). Only what
// the precheck needs; cpp-httplib parses the request again on the worker.
ApiRequest parseHead(std::string_view head) {
  ApiRequest r;
  size_t eol = head.find("\r\n");
  std::string_view line = head.substr(0, eol);
  size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
  if (sp1 != std::string_view::npos && sp2 > sp1) {
    r.method = std::string(line.substr(0, sp1));
    std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    r.path = percentDecode(target.substr(0, target.find('?')));
  }
  size_t at = eol == std::string_view::npos ? head.size() : eol + 2;
  while (at < head.size()) {
    size_t end = head.find("\r\n", at);
    if (end == std::string_view::npos || end == at) break;
    std::string_view field = head.substr(at, end - at);
    size_t colon = field.find(':');
    if (colon != std::string_view::npos)
      r.headers.emplace_back(std::string(trim(field.substr(0, colon))), std::string(trim(field.substr(colon + 1))));
    at = end + 2;
  }
  return r;
}

const char* reasonPhrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
    default: return status < 400 ? "OK" : status < 500 ? "Bad Request" : "Server Error";
  }
}

ApiResponse gateProblem(int status, const char* slug, const char* title, const std::string& detail) {
  ApiResponse r;
  r.status = status;
  r.content_type = "application/problem+json";
  // The detail texts are ours (no client bytes), so plain concatenation is valid JSON.
  r.body = std::string("{\"type\":\"") + std::string(kProblemPrefix) + slug + "\",\"title\":\"" + title +
           "\",\"status\":" + std::to_string(status) + ",\"detail\":\"" + detail + "\"}";
  return r;
}

// Best effort on a non-blocking socket: the answers are small and the send buffer is empty.
void sendAll(int fd, const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

// Reads what is already queued so that close() sends FIN, not RST, and the client can still read
// the answer written just before.
void drainAndClose(int fd) {
  char sink[4096];
  for (int i = 0; i < 16 && ::recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; ++i) {
  }
  ::shutdown(fd, SHUT_WR);
  ::close(fd);
}

}  // namespace

std::string cannedResponse(const ApiResponse& r, bool close) {
  std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " + reasonPhrase(r.status) + "\r\n";
  if (!r.content_type.empty()) out += "Content-Type: " + r.content_type + "\r\nX-Content-Type-Options: nosniff\r\n";
  out += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
  for (const auto& [k, v] : r.headers) out += k + ": " + v + "\r\n";
  if (close) out += "Connection: close\r\n";
  out += "\r\n";
  out += r.body;
  return out;
}

ConnectionGate::ConnectionGate(const GateLimits& limits, Serve serve, Precheck precheck, Metrics& metrics)
    : limits_(limits), serve_(std::move(serve)), precheck_(std::move(precheck)), metrics_(metrics) {
  limits_.workers = std::max(limits_.workers, 1);
  limits_.max_connections = std::max(limits_.max_connections, 1);
  epoll_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_fd_;
  epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_fd_, &ev);
  loop_thread_ = std::thread([this] { loop(); });
  for (int i = 0; i < limits_.workers; ++i) workers_.emplace_back([this] { work(); });
}

ConnectionGate::~ConnectionGate() {
  stop();
  join();
  ::close(wake_fd_);
  ::close(epoll_);
}

void ConnectionGate::join() {
  if (loop_thread_.joinable()) loop_thread_.join();
  {
    std::lock_guard<std::mutex> g(work_mu_);
    work_stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_)
    if (t.joinable()) t.join();
  // Sockets adopted after the loop ended.
  std::lock_guard<std::mutex> g(mu_);
  for (int fd : adopted_) ::close(fd);
  adopted_.clear();
}

void ConnectionGate::wake() {
  uint64_t one = 1;
  ssize_t n = ::write(wake_fd_, &one, sizeof one);
  (void)n;
}

void ConnectionGate::adopt(int fd) {
  {
    std::lock_guard<std::mutex> g(mu_);
    adopted_.push_back(fd);
  }
  wake();
}

void ConnectionGate::stop() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stopping_ = true;
  }
  wake();
}

void ConnectionGate::finished(GateConn* c, bool keep) {
  {
    std::lock_guard<std::mutex> g(mu_);
    returned_.emplace_back(c, keep);
  }
  wake();
}

void ConnectionGate::arm(GateConn* c, bool add) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = c->fd;
  epoll_ctl(epoll_, add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, c->fd, &ev);
}

void ConnectionGate::close(GateConn* c) {
  if (c->state != GateConn::State::Busy) epoll_ctl(epoll_, EPOLL_CTL_DEL, c->fd, nullptr);
  drainAndClose(c->fd);
  body_in_flight_ -= c->reserved;
  if (c->probe_only) {
    --probes_;
  } else {
    auto it = per_client_.find(c->peer);
    if (it != per_client_.end() && --it->second <= 0) per_client_.erase(it);
  }
  metrics_.openConnections(-1);
  conns_.erase(c->fd);  // destroys c
}

void ConnectionGate::refuse(GateConn* c, const ApiResponse& r) {
  sendAll(c->fd, cannedResponse(r, /*close=*/true));
  // Closing with unread input would reset the connection, and the client might never read the
  // answer: stop writing, and discard its input for a moment first.
  ::shutdown(c->fd, SHUT_WR);
  c->state = GateConn::State::Linger;
  c->buf.clear();
  c->buf.shrink_to_fit();
  c->need = limits_.linger_bytes;
  c->deadline = Clock::now() + seconds(limits_.linger_s);
}

void ConnectionGate::loop() {
  epoll_event events[128];
  for (;;) {
    int n = epoll_wait(epoll_, events, 128, 50);
    std::vector<int> adopted;
    std::vector<std::pair<GateConn*, bool>> returned;
    bool stopping;
    {
      std::lock_guard<std::mutex> g(mu_);
      adopted.swap(adopted_);
      returned.swap(returned_);
      stopping = stopping_;
    }
    const auto now = Clock::now();
    for (int fd : adopted) {
      metrics_.connection(Metrics::Conn::Accepted);
      std::string peer = peerAddress(fd);
      const bool client_full = limits_.max_connections_per_client > 0 && per_client_.count(peer) &&
                               per_client_[peer] >= limits_.max_connections_per_client;
      bool full = stopping || client_full || static_cast<int>(conns_.size()) - probes_ >= limits_.max_connections;
      if (full && !stopping && !client_full) {
        // Room from the longest-idle connection (one waiting for the first byte of a request).
        GateConn* victim = nullptr;
        for (auto& [vfd, vc] : conns_)
          if (vc->state == GateConn::State::Head && !vc->head_started && !vc->probe_only && vc->buf.empty() &&
              (!victim || vc->idle_since < victim->idle_since))
            victim = vc.get();
        if (victim) {
          metrics_.connection(Metrics::Conn::Evicted);
          close(victim);
          full = false;
        }
      }
      // A liveness probe must not fail because others hold every connection (a restart for
      // nothing): a few connections past the caps may ask /healthz or /readyz, quickly.
      const bool probe = full && !stopping && probes_ < limits_.probe_reserve;
      if (full && !probe) {
        metrics_.connection(Metrics::Conn::RefusedBusy);
        ApiResponse r = gateProblem(503, "too-many-connections", "Service unavailable",
                                    "too many open connections (at most " + std::to_string(limits_.max_connections) +
                                        ", " + std::to_string(limits_.max_connections_per_client) +
                                        " per client); retry later");
        r.headers.emplace_back("Retry-After", "1");
        sendAll(fd, cannedResponse(r, true));
        drainAndClose(fd);
        continue;
      }
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
      auto c = std::make_unique<GateConn>();
      c->fd = fd;
      c->peer = std::move(peer);
      c->deadline = now + seconds(probe ? limits_.probe_timeout_s : limits_.head_timeout_s);
      c->idle_since = now;
      c->probe_only = probe;
      if (probe) ++probes_;
      else ++per_client_[c->peer];
      metrics_.openConnections(1);
      GateConn* raw = c.get();
      conns_.emplace(fd, std::move(c));
      arm(raw, true);
    }
    for (auto [c, keep] : returned) {
      body_in_flight_ -= c->reserved;  // the request is answered: its body is gone
      trim_pending_ = trim_pending_ || (limits_.trim_after_bytes > 0 && c->reserved >= limits_.trim_after_bytes * kBodyCost);
      c->reserved = 0;
      if (c->buf.capacity() > limits_.keep_buffer_bytes) c->buf.shrink_to_fit();
      if (!keep || stopping || c->probe_only) {
        close(c);
        continue;
      }
      c->state = GateConn::State::Head;
      c->head_started = false;
      c->deadline = now + seconds(limits_.idle_timeout_s);
      c->idle_since = now;
      arm(c, true);
      if (!c->buf.empty()) advance(c);  // a pipelined request is already here
    }
    if (trim_pending_ && body_in_flight_ == 0) {
      trim_pending_ = false;
      ::malloc_trim(0);
    }
    for (int i = 0; i < n; ++i) {
      if (events[i].data.fd == wake_fd_) {
        uint64_t v;
        while (::read(wake_fd_, &v, sizeof v) > 0) {
        }
        continue;
      }
      auto it = conns_.find(events[i].data.fd);
      if (it != conns_.end() && it->second->state != GateConn::State::Busy) onReadable(it->second.get());
    }
    if (stopping) {
      std::vector<GateConn*> idle;
      for (auto& [fd, c] : conns_)
        if (c->state != GateConn::State::Busy) idle.push_back(c.get());
      for (GateConn* c : idle) close(c);
      if (conns_.empty()) return;  // busy ones come back through returned_ and are closed then
    }
    if (now - last_sweep_ >= std::chrono::milliseconds(20)) {
      sweep(now);
      last_sweep_ = now;
    }
  }
}

void ConnectionGate::sweep(Clock::time_point now) {
  std::vector<GateConn*> late;
  for (auto& [fd, c] : conns_)
    if (c->state != GateConn::State::Busy && now > c->deadline) late.push_back(c.get());
  for (GateConn* c : late) {
    if (c->state == GateConn::State::Linger) {
      close(c);
      continue;
    }
    const bool midway = c->state == GateConn::State::Body || c->head_started;
    if (!midway) {  // idle keep-alive or a connection that never sent a byte
      close(c);
      continue;
    }
    metrics_.connection(Metrics::Conn::TimedOut);
    const bool body = c->state == GateConn::State::Body;
    refuse(c, gateProblem(408, "request-timeout", "Request timeout",
                          std::string(body ? "the request body" : "the request head") + " did not arrive within " +
                              formatDouble(body ? limits_.body_timeout_s : limits_.head_timeout_s) + " s"));
  }
}

void ConnectionGate::onReadable(GateConn* c) {
  if (c->state == GateConn::State::Linger) {
    char sink[16384];
    ssize_t n;
    while ((n = ::recv(c->fd, sink, sizeof sink, 0)) > 0 && static_cast<size_t>(n) < c->need)
      c->need -= static_cast<size_t>(n);
    if (n == 0 || n > 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) close(c);
    return;
  }
  bool eof = false;
  for (;;) {
    // Never buffer more than the current step may hold: a head one byte past its limit is enough
    // to refuse it, a body stops at its length (a pipelined request waits in the socket).
    const size_t cap = c->state == GateConn::State::Head ? limits_.max_head_bytes + 1 : c->need;
    if (c->buf.size() >= cap) break;
    const size_t want = std::min<size_t>(cap - c->buf.size(), 64 * 1024);
    const size_t old = c->buf.size();
    c->buf.resize(old + want);
    ssize_t n = ::recv(c->fd, c->buf.data() + old, want, 0);
    c->buf.resize(old + static_cast<size_t>(std::max<ssize_t>(n, 0)));
    if (n > 0) continue;
    if (n == 0) eof = true;
    else if (errno == EINTR) continue;
    else if (errno != EAGAIN && errno != EWOULDBLOCK) eof = true;
    break;
  }
  const int fd = c->fd;
  advance(c);  // may close c
  // A client may half-close after sending a complete request: answer it, then close. Anything
  // less than a complete request at end of stream is dropped.
  if (!eof) return;
  auto it = conns_.find(fd);
  if (it != conns_.end() && it->second->state != GateConn::State::Busy) close(it->second.get());
}

void ConnectionGate::advance(GateConn* c) {
  const auto now = Clock::now();
  if (c->state == GateConn::State::Head) {
    if (c->buf.empty()) return;
    if (!c->head_started) {
      c->head_started = true;
      c->deadline = now + seconds(c->probe_only ? limits_.probe_timeout_s : limits_.head_timeout_s);
    }
    const size_t end = c->buf.find("\r\n\r\n");
    const size_t scanned = end == std::string::npos ? c->buf.size() : end + 4;
    // Lines: the request line, one per field, and the empty line that ends the head.
    const auto lines = std::count(c->buf.begin(), c->buf.begin() + static_cast<std::ptrdiff_t>(scanned), '\n');
    const bool too_many = lines > limits_.max_header_fields + 2;
    if (too_many || scanned > limits_.max_head_bytes) {
      metrics_.connection(Metrics::Conn::RefusedHead);
      return refuse(c, gateProblem(431, "headers-too-large", "Request header fields too large",
                                   "at most " + std::to_string(limits_.max_header_fields) + " header fields and " +
                                       std::to_string(limits_.max_head_bytes) + " bytes of request head"));
    }
    // A bare LF may hide a line from this parser but not from the one behind it: refused (and the
    // connection closed) as soon as it shows, before the head is complete.
    std::string_view so_far = std::string_view(c->buf).substr(0, end == std::string::npos ? c->buf.size() : scanned);
    if (end == std::string::npos && !so_far.empty() && so_far.back() == '\r') so_far.remove_suffix(1);  // its LF is on the way
    if (auto bad = framingError(so_far); bad && (end != std::string::npos || bad->find("bare") != std::string::npos)) {
      metrics_.connection(Metrics::Conn::RefusedHead);
      return refuse(c, gateProblem(400, "bad-framing", "Bad request", "malformed request head: " + *bad));
    }
    if (end == std::string::npos) return;
    ApiRequest head = parseHead(std::string_view(c->buf).substr(0, scanned));
    if (c->probe_only) {
      // Admitted past the caps for a health probe only.
      if (head.method == "GET" && (head.path == "/healthz" || head.path == "/readyz") && !head.header("Content-Length") &&
          !head.header("Transfer-Encoding")) {
        c->need = scanned;
        return dispatch(c);
      }
      metrics_.connection(Metrics::Conn::RefusedBusy);
      ApiResponse r = gateProblem(503, "too-many-connections", "Service unavailable",
                                  "too many open connections; only /healthz and /readyz are answered past the cap");
      r.headers.emplace_back("Retry-After", "1");
      return refuse(c, r);
    }
    // cpp-httplib answers a method it does not know (QUERY, BREW, ...) with a bare 400; the API's
    // route table answers 405 on a known path (with Allow) and 404 elsewhere.
    static constexpr std::string_view kHttplibMethods[] = {"GET",     "HEAD",  "POST",  "PUT", "DELETE",
                                                           "CONNECT", "OPTIONS", "TRACE", "PATCH"};
    if (precheck_ && std::find(std::begin(kHttplibMethods), std::end(kHttplibMethods), head.method) ==
                         std::end(kHttplibMethods)) {
      if (auto refused = precheck_(head)) return refuse(c, *refused);
    }
    const std::string* te = head.header("Transfer-Encoding");
    const std::string* cl = head.header("Content-Length");
    std::optional<int64_t> length;
    if (cl) length = parseInt(trim(*cl));
    const bool may_have_body = te || (length && *length > 0) || head.method == "POST" || head.method == "PUT" ||
                               head.method == "PATCH";
    if (may_have_body && precheck_) {
      if (auto refused = precheck_(head)) {
        metrics_.connection(Metrics::Conn::RefusedBeforeBody);
        return refuse(c, *refused);
      }
    }
    c->need = scanned;
    // The body budget (GateLimits::body_budget_bytes): what this body will cost, reserved before a
    // byte of it is read, or a 503 the client retries.
    if (!te && length && *length > 0 && static_cast<uint64_t>(*length) <= limits_.max_body_bytes &&
        limits_.body_budget_bytes > 0) {
      const size_t cost = static_cast<size_t>(*length) * kBodyCost;
      if (body_in_flight_ > 0 && body_in_flight_ + cost > limits_.body_budget_bytes) {
        metrics_.connection(Metrics::Conn::RefusedBeforeBody);
        ApiResponse r = gateProblem(503, "busy", "Service unavailable",
                                    "the server is reading and parsing as many request bodies as its memory budget "
                                    "allows; retry shortly");
        r.headers.emplace_back("Retry-After", "1");
        return refuse(c, r);
      }
      c->reserved = cost;
      body_in_flight_ += cost;
    }
    if (!te && length && *length >= 0 && static_cast<uint64_t>(*length) <= limits_.max_body_bytes) {
      // The gate reads the body itself; the client's Expect: 100-continue is answered here and
      // removed so that the worker does not answer it a second time.
      const std::string* expect = head.header("Expect");
      if (expect && iequals(trim(*expect), "100-continue")) {
        size_t at = c->buf.find("\r\n") + 2;
        while (at < scanned - 2) {
          size_t eol = c->buf.find("\r\n", at);
          if (eol - at >= 7 && iequals(std::string_view(c->buf).substr(at, 7), "expect:")) {
            c->buf.erase(at, eol + 2 - at);
            break;
          }
          at = eol + 2;
        }
        c->need = c->buf.find("\r\n\r\n") + 4;
        sendAll(c->fd, "HTTP/1.1 100 Continue\r\n\r\n");
      }
      c->need += static_cast<size_t>(*length);
      c->state = GateConn::State::Body;
      c->deadline = now + seconds(limits_.body_timeout_s);
    } else {
      // No body the gate can read (none, chunked, or over the limit): the worker and the API
      // deal with it under the body deadline.
      return dispatch(c);
    }
  }
  if (c->state == GateConn::State::Body && c->buf.size() >= c->need) dispatch(c);
}

void ConnectionGate::dispatch(GateConn* c) {
  epoll_ctl(epoll_, EPOLL_CTL_DEL, c->fd, nullptr);
  c->state = GateConn::State::Busy;
  c->pos = 0;
  c->last = c->requests + 1 >= limits_.max_requests_per_connection;
  c->read_deadline = Clock::now() + seconds(limits_.body_timeout_s);
  {
    std::lock_guard<std::mutex> g(work_mu_);
    ready_.push_back(c);
    waiting_.store(static_cast<int>(ready_.size()), std::memory_order_relaxed);
  }
  work_cv_.notify_one();
}

void ConnectionGate::work() {
  for (;;) {
    GateConn* c = nullptr;
    {
      std::unique_lock<std::mutex> lk(work_mu_);
      work_cv_.wait(lk, [&] { return work_stop_ || !ready_.empty(); });
      if (ready_.empty()) return;
      c = ready_.front();
      ready_.pop_front();
      waiting_.store(static_cast<int>(ready_.size()), std::memory_order_relaxed);
    }
    bool keep = false;
    // A busy keep-alive client sends its next request as soon as it has the answer: serving it on
    // this worker saves two thread hand-offs and four epoll calls per request. Bounded (at most
    // 20 ms of waiting and only while no other connection is queued, 32 requests in a row) so a
    // slow client never keeps a worker from someone else; anything but a complete bodiless GET
    // goes back to the gate.
    for (int in_a_row = 0;; ++in_a_row) {
      try {
        keep = serve_(*c);
      } catch (...) {
        keep = false;  // the transport reports; the connection is not reusable
      }
      c->buf.erase(0, std::min(c->pos, c->buf.size()));
      c->pos = 0;
      ++c->requests;
      // After 32 in a row, another connection waiting for a worker gets this one.
      if (!keep || (in_a_row >= 32 && waiting_.load(std::memory_order_relaxed) > 0) || !nextRequestIsHere(c)) break;
      if (in_a_row >= 32) in_a_row = 0;
    }
    finished(c, keep);
  }
}

bool ConnectionGate::nextRequestIsHere(GateConn* c) {
  if (c->requests + 1 >= limits_.max_requests_per_connection) return false;
  if (c->buf.find("\r\n\r\n") == std::string::npos) {
    // Wait for the client's next request while no other connection waits for a worker (then
    // this is thread-per-connection's fast path), at most kInlineWaitMs; give up at once when
    // someone else is queued.
    if (c->buf.empty()) {
      pollfd p{c->fd, POLLIN, 0};
      bool readable = false;
      for (int waited = 0; waited < kInlineWaitMs && !readable; ++waited) {
        if (waiting_.load(std::memory_order_relaxed) > 0) return false;
        readable = ::poll(&p, 1, 1) == 1;
      }
      if (!readable) return false;
    }
    const size_t old = c->buf.size();
    const size_t want = limits_.max_head_bytes + 1 > old ? limits_.max_head_bytes + 1 - old : 0;
    if (want == 0) return false;
    c->buf.resize(old + want);
    ssize_t n = ::recv(c->fd, c->buf.data() + old, want, MSG_DONTWAIT);
    c->buf.resize(old + static_cast<size_t>(std::max<ssize_t>(n, 0)));
    if (n <= 0) return false;  // end of stream or nothing yet: the gate decides
  }
  const size_t end = c->buf.find("\r\n\r\n");
  if (end == std::string::npos || end + 4 > limits_.max_head_bytes) return false;
  std::string_view head = std::string_view(c->buf).substr(0, end + 4);
  if (head.substr(0, 4) != "GET ") return false;
  if (framingError(head)) return false;  // the gate refuses it (and closes the connection)
  if (std::count(head.begin(), head.end(), '\n') > limits_.max_header_fields + 2) return false;
  for (size_t at = head.find("\r\n"); at != std::string_view::npos && at + 2 < head.size(); at = head.find("\r\n", at + 2)) {
    std::string_view field = head.substr(at + 2, 18);
    if (iequals(field.substr(0, std::min<size_t>(field.size(), 15)), "content-length:") ||
        iequals(field.substr(0, std::min<size_t>(field.size(), 18)), "transfer-encoding:"))
      return false;
  }
  c->last = c->requests + 1 >= limits_.max_requests_per_connection;
  c->read_deadline = Clock::now() + seconds(limits_.body_timeout_s);
  return true;
}

}  // namespace tessera::cache
