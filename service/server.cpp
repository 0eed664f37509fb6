// Owns the assembly and lifecycle of a running cache service (store, tokens, Api, HTTP server,
// background refresh).
#include "service/server.h"

#include <algorithm>
#include <cstdio>

#include "store/engine.h"

namespace tessera::cache {

Expected<std::unique_ptr<CacheServer>> CacheServer::start(const ServerOptions& opts) {
  std::unique_ptr<CacheServer> s(new CacheServer());
  s->opts_ = opts;
  EngineOptions eo;
  eo.synchronous_full = opts.synchronous_full;
  eo.index_winners = true;
  eo.current = opts.current_toolchain;
  eo.max_connections = opts.store_connections;
  TESSERA_ASSIGN(s->store_, openStore(opts.db_path, eo));
  TESSERA_ASSIGN(s->tokens_, TokenStore::open(opts.db_path));
  TESSERA_TRY(s->reloadTokens());
  ApiOptions ao;
  ao.allow_anonymous_reads = opts.allow_anonymous_reads;
  ao.max_body_bytes = opts.http.max_body_bytes;
  ao.backup_dir = opts.backup_dir;
  ao.version = opts.version;
  ao.current_toolchain = opts.current_toolchain;
  ao.queue = opts.queue;
  ao.agree_factor = opts.agree_factor;
  ao.measuring_tokens = opts.measuring_tokens;
  ao.disputes_per_minute = opts.disputes_per_minute;
  ao.scans_per_minute_per_token = opts.scans_per_minute_per_token;
  ao.scans_per_minute_per_address = opts.scans_per_minute_per_address;
  ao.scan_cpu_budget_s = opts.scan_cpu_budget_s;
  ao.scans_in_flight = opts.scans_in_flight > 0 ? opts.scans_in_flight : std::max(1, opts.http.threads / 4);
  ao.dashboard.serve_ui = opts.serve_ui;
  ao.dashboard.compare = opts.compare;
  // The admin pages' token administration has a connection of its own: the refresh loop's stays
  // the loop's alone.
  TESSERA_ASSIGN(std::unique_ptr<TokenStore> admin_tokens, TokenStore::open(opts.db_path));
  ao.dashboard.tokens = serializedTokenStore(std::move(admin_tokens));
  ao.dashboard.reload_tokens = [p = s.get(), tokens = ao.dashboard.tokens]() -> Status {
    TESSERA_ASSIGN(auto active, tokens->active());
    p->auth_.reset(std::move(active));
    return {};
  };
  s->api_ = std::make_unique<Api>(*s->store_, s->auth_, ao);
  TESSERA_ASSIGN(s->http_, startHttpServer(*s->api_, opts.http));
  s->refresher_ = std::thread([p = s.get()] { p->refreshLoop(); });
  return s;
}

CacheServer::~CacheServer() {
  stop();
  wait();
}

Status CacheServer::reloadTokens() {
  TESSERA_ASSIGN(auto active, tokens_->active());
  auth_.reset(std::move(active));
  return {};
}

void CacheServer::refreshLoop() {
  std::string last_error;
  auto last_purge = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lk(mu_);
  while (!stopping_) {
    cv_.wait_for(lk, std::chrono::duration<double>(opts_.refresh_interval_s));
    if (stopping_) break;
    lk.unlock();
    Status t = reloadTokens();
    auto r = store_->refreshIfChangedExternally();
    Status purged;
    // Finished jobs go after a while (their records stay); any replica may do it.
    if (store_->jobs() && std::chrono::steady_clock::now() - last_purge > std::chrono::seconds(60)) {
      last_purge = std::chrono::steady_clock::now();
      auto n = store_->jobs()->purge(opts_.keep_finished_jobs_s, opts_.max_open_job_s);
      if (!n.ok()) purged = n.takeError();
    }
    std::string err = !t.ok() ? t.error().str() : !r.ok() ? r.error().str() : !purged.ok() ? purged.error().str() : "";
    // Report a failing refresh once, not every interval.
    if (!err.empty() && err != last_error) std::fprintf(stderr, "tessera serve: refresh failed: %s\n", err.c_str());
    last_error = err;
    lk.lock();
  }
}

void CacheServer::stop() {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  endDashboardWaits();
  if (http_) http_->stop();
}

void CacheServer::wait() {
  if (http_) http_->wait();
  if (refresher_.joinable()) refresher_.join();
}

}  // namespace tessera::cache
