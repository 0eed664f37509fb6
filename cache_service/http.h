// Owns the HTTP transport seen by the rest of the cache service, free of cpp-httplib types: a
// server that feeds requests to an Api, and a keep-alive client connection. The one file that
// includes httplib.h implements both (http_transport.cpp).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "cache_service/api.h"
#include "support/status.h"

namespace tessera::cache {

struct HttpServerOptions {
  std::string bind = "127.0.0.1";  // loopback unless the operator opens it up
  int port = 0;                    // 0: any free port (see HttpServer::port())
  // Worker threads. They run complete requests only: the connection gate (http_gate.h) holds
  // connections while their heads and bodies arrive and while they idle between requests.
  int threads = 16;
  size_t max_body_bytes = 16u << 20;
  int read_timeout_s = 5, write_timeout_s = 5;
  double keep_alive_timeout_s = 5;
  // cpp-httplib's default (5) closes a connection every 5 requests; reconnecting costs more
  // than answering a cached lookup.
  int keep_alive_max_requests = 10000;
  // Limits the gate enforces (see GateLimits): open connections in total and per client (0: no
  // per-client cap, for a server behind a proxy), the request head, overall head and body
  // deadlines, and the listen backlog (0: max(128, max_connections)).
  int max_connections = 512;
  int max_connections_per_client = 128;
  size_t max_head_bytes = 16 * 1024;
  int max_header_fields = 100;
  double head_timeout_s = 10, body_timeout_s = 30;
  int backlog = 0;
  // Memory of request bodies in flight (GateLimits::body_budget_bytes; 0: none) and the health
  // probes answered past the connection caps (GateLimits::probe_reserve).
  size_t body_budget_bytes = size_t{1} << 30;
  int probe_reserve = 16;
  // The heap is handed back to the system after bodies of at least this (GateLimits::trim_after_bytes; 0: never).
  size_t trim_after_bytes = 1u << 20;
};

class HttpServer {
 public:
  virtual ~HttpServer() = default;
  virtual int port() const = 0;
  // Stops accepting and lets in-flight requests finish; wait() then returns.
  virtual void stop() = 0;
  virtual void wait() = 0;
};

// Binds synchronously (a taken port is an error here, not later) and serves on background
// threads. `api` must outlive the server.
Expected<std::unique_ptr<HttpServer>> startHttpServer(Api& api, const HttpServerOptions& opts);

struct HttpReply {
  int status = 0;
  std::string body;
  HeaderList headers;
  const std::string* header(std::string_view name) const;
};

// One keep-alive connection to a service at `base_url` (http://host:port[/prefix], or https).
// Thread-safe: concurrent calls are serialized. Every failure (refused, timed out, reset) is an
// IOError value; nothing throws.
class HttpConnection {
 public:
  virtual ~HttpConnection() = default;
  // `path` is appended to the base URL's prefix; it may carry a query string.
  virtual Expected<HttpReply> send(std::string_view method, const std::string& path,
                                   const HeaderList& headers, const std::string& body,
                                   const std::string& content_type, double timeout_s) = 0;
};
// `ca_cert`: a PEM file of the certificate authority (or the self-signed certificate) that an
// https service's certificate must chain to; empty: the system's.
Expected<std::unique_ptr<HttpConnection>> openHttpConnection(std::string_view base_url,
                                                              double connect_timeout_s,
                                                              const std::string& ca_cert = "");

// Both ends ignore SIGPIPE process-wide (once, if it is at its default): cpp-httplib writes to
// sockets without MSG_NOSIGNAL, and a peer that hangs up must cost a request, not the process.
void ignoreSigpipe();

// "%xx"-encodes a query value.
std::string urlEncode(std::string_view s);

}  // namespace tessera::cache
