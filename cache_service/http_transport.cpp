// Owns every use of cpp-httplib in Tessera (the only file that includes httplib.h): the server
// that hands requests to Api and the client connection used by CacheClient. Keeping both here
// means one translation unit depends on httplib's Cflags-sensitive class layout (design.md §8).
#include <httplib.h>

#include <cctype>
#include <cmath>
#include <csignal>
#include <mutex>
#include <thread>

#include "cache_service/http.h"

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
  return a;
}

void fromApi(ApiResponse&& a, httplib::Response& res) {
  res.status = a.status;
  for (auto& [k, v] : a.headers) res.set_header(k.c_str(), v);
  // The body was left unread: tell the client to drop the connection instead of reusing it.
  if (a.close_connection) res.set_header("Connection", "close");
  if (!a.content_type.empty()) res.set_content(std::move(a.body), a.content_type.c_str());
}

void splitSeconds(double s, time_t& sec, time_t& usec) {
  s = std::max(s, 0.001);
  sec = static_cast<time_t>(s);
  usec = static_cast<time_t>(std::lround((s - static_cast<double>(sec)) * 1e6));
}

class HttplibServer final : public HttpServer {
 public:
  HttplibServer(Api& api, const HttpServerOptions& o) : api_(api) {
    const int threads = std::max(o.threads, 1);
    // Without TCP_NODELAY every keep-alive answer waits for a delayed ACK (~40 ms).
    svr_.set_tcp_nodelay(true);
    svr_.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
    svr_.set_payload_max_length(o.max_body_bytes);
    svr_.set_read_timeout(o.read_timeout_s, 0);
    svr_.set_write_timeout(o.write_timeout_s, 0);
    svr_.set_keep_alive_timeout(o.keep_alive_timeout_s);
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
      if (req.method == "POST") {
        auto refused = api_.precheck(head);
        if (!refused) return HR::Unhandled;  // httplib reads the body, then the POST handler runs
        fromApi(std::move(*refused), res);
        return HR::Handled;
      }
      fromApi(api_.handle(head), res);
      return HR::Handled;
    });
    // A client that asks before sending its body (Expect: 100-continue, as curl does for large
    // bodies) learns about a refusal without uploading anything.
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
    // payload limit, a body that ends early) get the same problem+json shape as ours.
    svr_.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request&, httplib::Response& res) {
      if (!res.body.empty()) return HR::Unhandled;
      std::string title = res.status == 400   ? "Bad request"
                          : res.status == 413 ? "Payload too large"
                          : res.status == 414 ? "URI too long"
                          : res.status == 404 ? "Not found"
                                              : "Request refused";
      res.set_content("{\"type\":\"urn:tessera:problem:http-" + std::to_string(res.status) +
                          "\",\"title\":\"" + title + "\",\"status\":" + std::to_string(res.status) +
                          ",\"detail\":\"refused by the HTTP layer\"}",
                      "application/problem+json");
      return HR::Handled;
    }));
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
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
    return {};
  }

  ~HttplibServer() override {
    stop();
    wait();
  }
  int port() const override { return port_; }
  void stop() override { svr_.stop(); }
  void wait() override {
    if (thread_.joinable()) thread_.join();
  }

 private:
  Api& api_;
  httplib::Server svr_;
  std::thread thread_;
  int port_ = -1;
};

class HttplibConnection final : public HttpConnection {
 public:
  HttplibConnection(const std::string& scheme_host_port, std::string prefix, double connect_timeout_s)
      : cli_(scheme_host_port), prefix_(std::move(prefix)) {
    time_t s, us;
    splitSeconds(connect_timeout_s, s, us);
    cli_.set_connection_timeout(s, us);
    cli_.set_keep_alive(true);
    cli_.set_tcp_nodelay(true);
    // Loopback/LAN service with small answers: compression would cost more CPU than it saves.
    cli_.set_decompress(false);
  }

  Expected<HttpReply> send(std::string_view method, const std::string& path, const HeaderList& headers,
                           const std::string& body, const std::string& content_type,
                           double timeout_s) override {
    std::lock_guard<std::mutex> g(mu_);
    time_t s, us;
    splitSeconds(timeout_s, s, us);
    cli_.set_read_timeout(s, us);
    cli_.set_write_timeout(s, us);
    httplib::Request req;
    req.method = std::string(method);
    req.path = prefix_ + path;
    for (const auto& [k, v] : headers) req.headers.emplace(k, v);
    if (!content_type.empty()) req.headers.emplace("Content-Type", content_type);
    req.body = body;
    httplib::Result res = cli_.send(req);
    if (!res)
      return makeError(ErrorCode::IOError, req.method + " " + req.path + ": " + httplib::to_string(res.error()));
    HttpReply reply;
    reply.status = res->status;
    reply.body = std::move(res->body);
    for (const auto& [k, v] : res->headers) reply.headers.emplace_back(k, v);
    return reply;
  }

 private:
  std::mutex mu_;
  httplib::Client cli_;
  std::string prefix_;
};

}  // namespace

void ignoreSigpipe() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction cur {};
    if (sigaction(SIGPIPE, nullptr, &cur) == 0 && cur.sa_handler == SIG_DFL) std::signal(SIGPIPE, SIG_IGN);
  });
}

Expected<std::unique_ptr<HttpServer>> startHttpServer(Api& api, const HttpServerOptions& opts) {
  ignoreSigpipe();
  auto s = std::make_unique<HttplibServer>(api, opts);
  TESSERA_TRY(s->start(opts));
  return std::unique_ptr<HttpServer>(std::move(s));
}

const std::string* HttpReply::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k.size() != name.size()) continue;
    bool eq = true;
    for (size_t i = 0; i < k.size() && eq; ++i)
      eq = std::tolower(static_cast<unsigned char>(k[i])) == std::tolower(static_cast<unsigned char>(name[i]));
    if (eq) return &v;
  }
  return nullptr;
}

Expected<std::unique_ptr<HttpConnection>> openHttpConnection(std::string_view base_url,
                                                              double connect_timeout_s) {
  auto bad = [&](const std::string& why) {
    return makeError(ErrorCode::InvalidArgument, "cache URL '" + std::string(base_url) + "': " + why);
  };
  size_t scheme_end = base_url.find("://");
  if (scheme_end == std::string_view::npos) return bad("expected http://host:port");
  std::string_view scheme = base_url.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") return bad("scheme must be http or https");
  std::string_view rest = base_url.substr(scheme_end + 3);
  size_t slash = rest.find('/');
  std::string_view hostport = rest.substr(0, slash);
  std::string prefix = slash == std::string_view::npos ? "" : std::string(rest.substr(slash));
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (hostport.empty()) return bad("missing host");
  if (prefix.find_first_of("?#") != std::string::npos) return bad("no query or fragment allowed");
  ignoreSigpipe();
  return std::unique_ptr<HttpConnection>(
      new HttplibConnection(std::string(scheme) + "://" + std::string(hostport), prefix, connect_timeout_s));
}

std::string urlEncode(std::string_view s) {
  return httplib::detail::encode_query_param(std::string(s));
}

}  // namespace tessera::cache
