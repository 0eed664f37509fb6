// Owns the running cache service as one object: the store engine (SQLite with its winners index),
// the token snapshot, the Api and the HTTP server, plus
// the background refresh that picks up token changes and records written by other processes and
// purges finished measurement jobs. `tessera serve` and the tests start it here.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "service/api.h"
#include "service/http_server.h"
#include "store/store.h"
#include "store/tokens.h"

namespace tessera::cache {

struct ServerOptions {
  // The store's location (engine.h): a SQLite database file or a postgresql:// URL.
  std::string db_path = "tessera.db";
  int store_connections = 16;  // PostgreSQL: connections at most
  HttpServerOptions http;
  bool allow_anonymous_reads = false;
  std::string backup_dir;  // enables POST /v1/admin/backup
  bool synchronous_full = true;
  // Token additions/revocations (by `tessera serve token ...` in another process) and foreign
  // record writes are noticed within this interval.
  double refresh_interval_s = 1.0;
  std::string version = "dev";
  // The toolchain records are stale against when an asker does not say its own (empty fields
  // are not compared).
  Provenance current_toolchain;
  // The measurement job queue: leases, worker liveness, retries (jobs.h), and how long finished
  // jobs are kept (their records stay) and open ones may wait.
  QueuePolicy queue;
  double keep_finished_jobs_s = 3600, max_open_job_s = 86400;
  // Two measurements of a config by different identities agree within this factor (trust.h).
  double agree_factor = kDefaultAgreeFactor;
  std::vector<std::string> measuring_tokens;  // ApiOptions::measuring_tokens
  int disputes_per_minute = 10;               // ApiOptions::disputes_per_minute
  // ApiOptions::scans_*; scans_in_flight 0: a quarter of the worker threads (at least 1).
  int scans_per_minute_per_token = 300, scans_per_minute_per_address = 600, scans_in_flight = 0;
  double scan_cpu_budget_s = 2;  // ApiOptions::scan_cpu_budget_s
  // The web dashboard (dashboard.h): its pages, and the comparison across targets, which the
  // `tessera` binary supplies when it is built with the compiler.
  bool serve_ui = true;
  CompareFn compare;
};

class CacheServer {
 public:
  // Opens (creating or migrating) the database, loads tokens and winners, binds and serves.
  static Expected<std::unique_ptr<CacheServer>> start(const ServerOptions& opts);
  ~CacheServer();

  int port() const { return http_->port(); }
  void stop();  // idempotent; in-flight requests finish
  void wait();  // returns after stop()
  RecordStore& store() { return *store_; }
  Api& api() { return *api_; }
  Status reloadTokens();

 private:
  CacheServer() = default;
  void refreshLoop();

  ServerOptions opts_;
  std::unique_ptr<RecordStore> store_;
  std::unique_ptr<TokenStore> tokens_;
  TokenAuthenticator auth_;
  std::unique_ptr<Api> api_;
  std::unique_ptr<HttpServer> http_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread refresher_;
};

}  // namespace tessera::cache
