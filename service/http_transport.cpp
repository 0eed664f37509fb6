// Owns the server end of cpp-httplib: the server that hands requests to Api through the connection
// gate. It and the client end (http_client.cpp) are the only files that include httplib.h, both
// built with its Cflags, which change its class layout (ARCHITECTURE.md §5).
#include <httplib.h>

#include <arpa/inet.h>
#include <poll.h>

#include <cctype>
#include <cmath>
#include <csignal>
#include <cstring>
#include <mutex>
#include <thread>

#include "service/http_server.h"
#include "service/http_compress.h"
#include "service/http_gate.h"

namespace tessera::cache {

namespace {

using HR = httplib::Server::HandlerResponse;

ApiRequest toApi(const httplib::Request& req, bool with_body) {
  ApiRequest a;
  a.method = req.method;
  a.path = req.path;
  a.query.reserve(req.params.size());
  for (const auto& [k, v] : req.params) a.query.emplace_back(k, v);
  a.headers.reserve(req.headers.size());
  for (const auto& [k, v] : req.headers) a.headers.emplace_back(k, v);
  if (with_body) a.body = req.body;
  a.peer = req.remote_addr;
  return a;
}

void fromApi(ApiResponse&& a, httplib::Response& res, std::string_view accept_encoding = {}) {
  compressResponse(a, accept_encoding);
  res.status = a.status;
  for (auto& [k, v] : a.headers) res.set_header(k.c_str(), v);
  // No answer is to be read as another type than it says (a kernel text as HTML, a problem as a
  // script): browsers must not sniff.
  if (!res.has_header("X-Content-Type-Options")) res.set_header("X-Content-Type-Options", "nosniff");
  // The body was left unread: tell the client to drop the connection instead of reusing it.
  if (a.close_connection) res.set_header("Connection", "close");
  if (!a.content_type.empty()) res.set_content(std::move(a.body), a.content_type.c_str());
}

// One request's view of a gated connection: the bytes the gate already read, then the socket,
// under the connection's read deadline (a body the gate did not pre-read cannot drip forever).
class GateStream final : public httplib::Stream {
 public:
  GateStream(GateConn& c, double write_timeout_s) : c_(c), write_timeout_ms_(int(write_timeout_s * 1000)) {}

  bool is_readable() const override { return c_.pos < c_.buf.size() || waitFor(POLLIN, remainingMs()) > 0; }
  bool is_writable() const override { return waitFor(POLLOUT, write_timeout_ms_) > 0; }

  ssize_t read(char* ptr, size_t size) override {
    if (c_.pos < c_.buf.size()) {
      size_t n = std::min(size, c_.buf.size() - c_.pos);
      std::memcpy(ptr, c_.buf.data() + c_.pos, n);
      c_.pos += n;
      return static_cast<ssize_t>(n);
    }
    for (;;) {
      int left = remainingMs();
      if (left <= 0) {
        timed_out = true;
        return -1;
      }
      int ready = waitFor(POLLIN, left);
      if (ready < 0) return -1;
      if (ready == 0) continue;
      ssize_t n = ::recv(c_.fd, ptr, size, 0);
      if (n >= 0) return n;
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
    }
  }

  ssize_t write(const char* ptr, size_t size) override {
    size_t off = 0;
    while (off < size) {
      ssize_t n = ::send(c_.fd, ptr + off, size - off, MSG_NOSIGNAL);
      if (n > 0) {
        off += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && waitFor(POLLOUT, write_timeout_ms_) > 0) continue;
      return -1;  // peer gone, or it stopped reading for write_timeout
    }
    return static_cast<ssize_t>(size);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { address(true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address(false, ip, port); }
  socket_t socket() const override { return c_.fd; }

  bool timed_out = false;    // a read ran into the deadline: answer 408, not 400
  bool close_after = false;  // the answer says Connection: close

 private:
  int remainingMs() const {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(c_.read_deadline - std::chrono::steady_clock::now());
    return static_cast<int>(std::max<int64_t>(left.count(), 0));
  }
  int waitFor(short events, int timeout_ms) const {
    pollfd p{c_.fd, events, 0};
    int r;
    do r = ::poll(&p, 1, timeout_ms);
    while (r < 0 && errno == EINTR);
    return r;
  }
  void address(bool peer, std::string& ip, int& port) const {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    int rc = peer ? getpeername(c_.fd, reinterpret_cast<sockaddr*>(&addr), &len)
                  : getsockname(c_.fd, reinterpret_cast<sockaddr*>(&addr), &len);
    if (rc != 0) return;
    char text[INET6_ADDRSTRLEN] = "";
    if (addr.ss_family == AF_INET) {
      auto* a = reinterpret_cast<sockaddr_in*>(&addr);
      inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
      port = ntohs(a->sin_port);
    } else if (addr.ss_family == AF_INET6) {
      auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
      inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof text);
      port = ntohs(a->sin6_port);
    }
    ip = text;
  }

  GateConn& c_;
  int write_timeout_ms_;
};

// The stream of the request this worker thread is answering, for the handlers that shape the
// answer from the connection's state (a read timeout is 408; Connection: close ends it).
thread_local GateStream* tCurrentStream = nullptr;

// cpp-httplib's acceptor hands each accepted socket to a TaskQueue; this one runs the hand-off
// inline, and the hand-off (process_and_close_socket, a virtual of httplib::Server) gives the
// socket to the gate. No worker thread is tied to a connection that has not sent a request.
class InlineQueue final : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override {}
};

class GatedServer final : public httplib::Server {
 public:
  ConnectionGate* gate = nullptr;
  double write_timeout_s = 5;

  // Runs one complete request on a worker thread; true keeps the connection.
  bool serve(GateConn& c) {
    GateStream strm(c, write_timeout_s);
    tCurrentStream = &strm;
    bool closed = false;
    bool ok = process_request(strm, c.last, closed, nullptr);
    tCurrentStream = nullptr;
    return ok && !closed && !c.last && !strm.close_after && !strm.timed_out;
  }

  // The listen socket, to widen the backlog cpp-httplib fixes at 5.
  socket_t listenSocket() const { return svr_sock_; }

 private:
  bool process_and_close_socket(socket_t sock) override {
    gate->adopt(sock);
    return true;
  }
};

class HttplibServer final : public HttpServer {
 public:
  HttplibServer(Api& api, const HttpServerOptions& o) : api_(api) {
    GateLimits limits;
    limits.workers = std::max(o.threads, 1);
    limits.max_connections = o.max_connections;
    limits.max_connections_per_client = o.max_connections_per_client;
    limits.max_head_bytes = o.max_head_bytes;
    limits.max_header_fields = o.max_header_fields;
    limits.head_timeout_s = o.head_timeout_s;
    limits.body_timeout_s = o.body_timeout_s;
    limits.idle_timeout_s = o.keep_alive_timeout_s;
    limits.write_timeout_s = o.write_timeout_s;
    limits.max_requests_per_connection = std::max(o.keep_alive_max_requests, 1);
    limits.max_body_bytes = o.max_body_bytes;
    limits.body_budget_bytes = o.body_budget_bytes;
    limits.probe_reserve = o.probe_reserve;
    limits.trim_after_bytes = o.trim_after_bytes;
    gate_ = std::make_unique<ConnectionGate>(
        limits, [this](GateConn& c) { return svr_.serve(c); },
        [this](const ApiRequest& head) { return api_.precheck(head); }, api_.metrics());
    svr_.gate = gate_.get();
    svr_.write_timeout_s = o.write_timeout_s;
    backlog_ = o.backlog > 0 ? o.backlog : std::max(128, o.max_connections);

    // Without TCP_NODELAY every keep-alive answer waits for a delayed ACK (~40 ms).
    svr_.set_tcp_nodelay(true);
    svr_.new_task_queue = [] { return new InlineQueue(); };
    svr_.set_payload_max_length(o.max_body_bytes);
    svr_.set_read_timeout(o.read_timeout_s, 0);
    svr_.set_write_timeout(o.write_timeout_s, 0);
    svr_.set_keep_alive_timeout(static_cast<time_t>(std::ceil(o.keep_alive_timeout_s)));
    svr_.set_keep_alive_max_count(static_cast<size_t>(std::max(o.keep_alive_max_requests, 1)));
    // SO_REUSEADDR only: cpp-httplib's default adds SO_REUSEPORT, which would let a second server
    // bind the same port and silently take half of the traffic.
    svr_.set_socket_options([](socket_t sock) {
      int yes = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });

    // Every request passes here with headers parsed and the body not yet read. Everything but a
    // POST that passes the checks is answered right here: no regex routing on the lookup path,
    // and bodies of refused requests are never read.
    svr_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      ApiRequest head = toApi(req, /*with_body=*/false);
      // cpp-httplib would brotli-compress every text answer at the library's quality 11 on the
      // fly (~1 s for a 938 KB page of records); compressResponse chooses instead, so httplib
      // must not see what the client accepts. The Request is httplib's own non-const object.
      const std::string accept = req.get_header_value("Accept-Encoding");
      const_cast<httplib::Request&>(req).headers.erase("Accept-Encoding");
      if (req.method == "POST") {
        auto refused = api_.precheck(head);
        if (!refused) return HR::Unhandled;  // httplib reads the body, then the POST handler runs
        fromApi(std::move(*refused), res);
        return HR::Handled;
      }
      fromApi(api_.handle(head), res, accept);
      return HR::Handled;
    });
    // A client that asks before sending its body (Expect: 100-continue, as curl does for large
    // bodies) learns about a refusal without uploading anything. (The gate answers the usual case
    // itself; this one covers bodies the gate does not pre-read.)
    svr_.set_expect_100_continue_handler([this](const httplib::Request& req, httplib::Response& res) {
      auto refused = api_.precheck(toApi(req, /*with_body=*/false));
      if (!refused) return 100;
      const int status = refused->status;
      fromApi(std::move(*refused), res);
      return status;
    });
    svr_.Post(".*", [this](const httplib::Request& req, httplib::Response& res) {
      fromApi(api_.handle(toApi(req, /*with_body=*/true)), res);
    });
    // Errors cpp-httplib produces itself (malformed request line, URI too long, body over the
    // payload limit, a body that ends early or too late) get the same problem+json shape as ours.
    svr_.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request&, httplib::Response& res) {
      if (!res.body.empty()) return HR::Unhandled;
      if (tCurrentStream && tCurrentStream->timed_out) res.status = 408;
      std::string title = res.status == 400   ? "Bad request"
                          : res.status == 408 ? "Request timeout"
                          : res.status == 413 ? "Payload too large"
                          : res.status == 414 ? "URI too long"
                          : res.status == 404 ? "Not found"
                                              : "Request refused";
      res.set_header("X-Content-Type-Options", "nosniff");
      res.set_content("{\"type\":\"urn:tessera:problem:http-" + std::to_string(res.status) +
                          "\",\"title\":\"" + title + "\",\"status\":" + std::to_string(res.status) +
                          ",\"detail\":\"refused by the HTTP layer\"}",
                      "application/problem+json");
      return HR::Handled;
    }));
    // An answer that closes the connection (a refused request whose body is unread) must end it
    // here too: the unread bytes are not the next request.
    svr_.set_post_routing_handler([](const httplib::Request&, httplib::Response& res) {
      if (tCurrentStream && res.get_header_value("Connection") == "close") tCurrentStream->close_after = true;
    });
    svr_.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
      res.status = 500;
      res.set_content("{\"type\":\"urn:tessera:problem:internal\",\"title\":\"Internal error\",\"status\":500}",
                      "application/problem+json");
    });
  }

  Status start(const HttpServerOptions& o) {
    if (o.port == 0) {
      port_ = svr_.bind_to_any_port(o.bind);
    } else {
      port_ = svr_.bind_to_port(o.bind, o.port) ? o.port : -1;
    }
    if (port_ <= 0)
      return makeError(ErrorCode::IOError,
                       "cannot listen on " + o.bind + ":" + std::to_string(o.port) + " (in use or bad address)");
    // listen() again on a listening socket only changes its backlog. cpp-httplib's 5 drops SYNs of
    // a burst of connects, which then retry after 1, 3, 7 s.
    if (::listen(svr_.listenSocket(), backlog_) != 0)
      return makeError(ErrorCode::IOError, "cannot set the listen backlog to " + std::to_string(backlog_));
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
    return {};
  }

  ~HttplibServer() override {
    stop();
    wait();
  }
  int port() const override { return port_; }
  void stop() override {
    svr_.stop();
    gate_->stop();
  }
  void wait() override {
    if (thread_.joinable()) thread_.join();
    gate_->join();
  }

 private:
  Api& api_;
  GatedServer svr_;
  std::unique_ptr<ConnectionGate> gate_;
  std::thread thread_;
  int port_ = -1;
  int backlog_ = 128;
};

}  // namespace

Expected<std::unique_ptr<HttpServer>> startHttpServer(Api& api, const HttpServerOptions& opts) {
  ignoreSigpipe();
  auto s = std::make_unique<HttplibServer>(api, opts);
  TESSERA_TRY(s->start(opts));
  return std::unique_ptr<HttpServer>(std::move(s));
}

}  // namespace tessera::cache
