// Owns the server end of the HTTP transport, free of cpp-httplib types: a server that feeds
// requests to an Api through the connection gate (http_transport.cpp implements it).
#pragma once

#include <memory>
#include <string>

#include "service/api.h"
#include "client/http.h"
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

}  // namespace tessera::cache
