// Owns the client end of cpp-httplib: a keep-alive connection to a service, and the query encoding
// and SIGPIPE setting both ends share. It and the server end (http_transport.cpp) are the only
// files that include httplib.h, both built with its Cflags (ARCHITECTURE.md §5).
#include <httplib.h>

#include <cctype>
#include <cmath>
#include <csignal>
#include <mutex>

#include "client/http.h"
#include "store/url_redact.h"

namespace tessera::cache {

namespace {

// What went wrong below HTTP, in words: cpp-httplib names its errors by their enum ("Connection",
// "Read"), which told a reader of `GET /status: Connection` nothing.
std::string transportError(httplib::Error e) {
  switch (e) {
    case httplib::Error::Connection: return "could not connect (nothing listens there, or the host is unreachable)";
    case httplib::Error::ConnectionTimeout: return "no connection within the timeout";
    case httplib::Error::Read: return "no complete answer (the connection closed or the read timed out)";
    case httplib::Error::Write: return "the request could not be sent (the connection closed or timed out)";
    case httplib::Error::SSLConnection: return "the TLS handshake failed";
    case httplib::Error::SSLServerVerification: return "the server's TLS certificate could not be verified";
    case httplib::Error::Canceled: return "canceled";
    default: return "transport error " + httplib::to_string(e);
  }
}

void splitSeconds(double s, time_t& sec, time_t& usec) {
  s = std::max(s, 0.001);
  sec = static_cast<time_t>(s);
  usec = static_cast<time_t>(std::lround((s - static_cast<double>(sec)) * 1e6));
}

class HttplibConnection final : public HttpConnection {
 public:
  HttplibConnection(const std::string& scheme_host_port, std::string prefix, double connect_timeout_s,
                    const std::string& ca_cert)
      : cli_(scheme_host_port), prefix_(std::move(prefix)) {
    if (!ca_cert.empty()) cli_.set_ca_cert_path(ca_cert.c_str());
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
      return makeError(ErrorCode::IOError, req.method + " " + req.path + ": " + transportError(res.error()));
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
                                                              double connect_timeout_s,
                                                              const std::string& ca_cert) {
  auto bad = [&](const std::string& why) {
    return makeError(ErrorCode::InvalidArgument, "cache URL '" + redactUrl(base_url) + "': " + why);
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
  // Credentials travel as a bearer token (TESSERA_TOKEN), never in a URL that logs and process
  // lists show.
  if (hostport.find('@') != std::string_view::npos)
    return bad("no user or password in a cache URL: the service takes a token (TESSERA_TOKEN)");
  if (prefix.find_first_of("?#") != std::string::npos) return bad("no query or fragment allowed");
  ignoreSigpipe();
  return std::unique_ptr<HttpConnection>(
      new HttplibConnection(std::string(scheme) + "://" + std::string(hostport), prefix, connect_timeout_s, ca_cert));
}

std::string urlEncode(std::string_view s) {
  return httplib::detail::encode_query_param(std::string(s));
}

}  // namespace tessera::cache
