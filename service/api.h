// Owns the cache service's HTTP API (ARCHITECTURE.md §2.10) as plain request -> response functions, so
// every route, status code and scope is testable without sockets; http_transport.cpp only moves
// bytes between cpp-httplib and these structs.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "service/dashboard.h"
#include "client/http.h"
#include "store/jobs.h"
#include "service/metrics.h"
#include "store/store.h"
#include "store/tokens.h"

namespace tessera::cache {

struct ApiRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // decoded path without the query
  HeaderList query;    // decoded query parameters in order (repeats kept)
  HeaderList headers;  // as received; lookups are case-insensitive
  std::string body;
  std::string peer;    // the client's address as the transport saw it (empty: unknown)

  const std::string* header(std::string_view name) const;
  const std::string* param(std::string_view name) const;
};

struct ApiResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  HeaderList headers;
  // The request's body was not read (refused before reading): the transport must close the
  // connection instead of parsing the unread bytes as the next request.
  bool close_connection = false;
};

struct ApiOptions {
  bool allow_anonymous_reads = false;
  size_t max_body_bytes = 16u << 20;
  std::string backup_dir;  // where POST /v1/admin/backup writes; empty: backups disabled
  std::string version;     // reported by /status
  // The toolchain records are stale against when an asker does not say its own (the store is
  // opened with the same); empty fields are not compared.
  Provenance current_toolchain;
  // Plausibility checks on every submitted record (plausibility.h); off only for tests that need
  // to store what a hostile client would have stored before them.
  bool check_plausibility = true;
  // Leases, worker liveness and retries of the measurement job queue (jobs.h).
  QueuePolicy queue;
  // Two measurements of a config by different identities agree within this factor (trust.h).
  double agree_factor = kDefaultAgreeFactor;
  // The web dashboard (/ui/) and what its routes need from the serving process (dashboard.h).
  DashboardOptions dashboard;
  // Tokens an admin designated as measuring identities (`serve --measuring-token`): their records
  // are reproduced measurements (trust.h: vouched), like an admin's pin.
  std::vector<std::string> measuring_tokens;
  // A reader's disputes (POST /v1/records/{id}/dispute) a token may file per minute, per replica.
  int disputes_per_minute = 10;
  // Bounded work per client (issue 47): the routes that scan many keys (the dashboard's kernel
  // search and list, GET /v1/records, nearest, compare) are counted per token (anonymous reads per
  // address) and per address, and at most `scans_in_flight` run at once, all clients together, so
  // the other workers stay free for /healthz, /metrics and winner lookups. Past either bound: 429
  // with Retry-After, at once. 0 turns a bound off.
  int scans_per_minute_per_token = 300;
  int scans_per_minute_per_address = 600;
  int scans_in_flight = 4;
  // Each of those requests runs under a CPU budget of this many seconds of its thread (cpu_budget.h;
  // PostgreSQL's time on its statements counted alike): past it its statements are cut and the
  // answer is 503 naming the budget. 0: none.
  double scan_cpu_budget_s = 2;
};

// At most `per_minute` events per name in any 60 s: what one token may change for every reader
// (its disputes) is bounded. Per process: each replica counts its own.
class TokenRate {
 public:
  explicit TokenRate(int per_minute) : per_minute_(per_minute) {}
  bool take(const std::string& name);

 private:
  std::mutex mu_;
  int per_minute_;
  std::unordered_map<std::string, std::deque<std::chrono::steady_clock::time_point>> seen_;
};

// Problem types, each a stable URN ("urn:tessera:problem:<slug>") clients may switch on.
inline constexpr std::string_view kProblemPrefix = "urn:tessera:problem:";

class Api {
 public:
  Api(RecordStore& store, const TokenAuthenticator& auth, ApiOptions opts);

  // Called with headers only, before any body byte is read. Answers (and counts) the requests
  // that must be refused before their body is read: unknown route or method, missing or wrong
  // token, insufficient scope, missing Content-Length, chunked or compressed bodies, bodies over
  // the limit, bodies on GET. nullopt: read the body (at most max_body_bytes), then handle().
  std::optional<ApiResponse> precheck(const ApiRequest& head);

  // Full handling of a request whose body has been read (runs the same checks as precheck).
  // Never throws: a broken invariant becomes a 500 problem, bad input always a 4xx.
  ApiResponse handle(const ApiRequest& req);

  Metrics& metrics() { return metrics_; }
  const ApiOptions& options() const { return opts_; }
  const TokenUsage& tokenUsage() const { return *usage_; }

 private:
  struct ScanSlot;
  RecordStore& store_;
  const TokenAuthenticator& auth_;
  ApiOptions opts_;
  Metrics metrics_;
  std::chrono::steady_clock::time_point started_;
  std::shared_ptr<TokenUsage> usage_;
  std::shared_ptr<TokenRate> disputes_;
  std::shared_ptr<TokenRate> scans_by_token_, scans_by_address_;
  std::shared_ptr<std::atomic<int>> scans_running_;
};

// The OpenAPI description served at /openapi.yaml (service/openapi.yaml, embedded at build
// time).
std::string_view openApiYaml();

}  // namespace tessera::cache
