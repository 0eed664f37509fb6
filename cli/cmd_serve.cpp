// Owns `tessera serve` (run the shared tuning-cache service until SIGINT/SIGTERM) and its
// administration subcommands: `serve token add|list|revoke`, `serve backup` and `serve migrate`.
// Every one but migrate takes `--store LOCATION` (a SQLite file, or a postgresql:// URL that several
// replicas share; env TESSERA_STORE; `--db` is the older name of the same option); migrate takes
// `--from` and `--to`.
#include <pthread.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "store/engine.h"
#include "service/server.h"
#include "store/store_migrate.h"
#include "store/tokens.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "support/strings.h"
#ifdef TESSERA_WITH_MLIR
#include "cli/compare_view.h"
#endif

namespace tessera::cli {

namespace {

struct ServeArgs {
  std::string db = "tessera.db";
  int port = 8787;
  std::string bind = "127.0.0.1";
  int threads = 16;
  bool anonymous_reads = false;
  int max_body_mb = 16;
  int read_timeout_s = 5, write_timeout_s = 5;
  int max_connections = 512, max_connections_per_client = 128;
  double head_timeout_s = 10, body_timeout_s = 30, keep_alive_timeout_s = 5;
  std::string backup_dir;
  std::string port_file;
  std::string sync = "full";
  std::string toolchain;  // "tessera_version=0.1.0,llvm_version=22,cuda_version=12.8"
  double lease_s = 60, worker_ttl_s = 30;
  int max_attempts = 3;
  int store_connections = 16;
  int max_workers_per_token = 64, max_leased_per_token = 64;
  double max_hold_s = 3600, steal_after_s = 120;
  double agree_factor = cache::kDefaultAgreeFactor;
  int max_inflight_mb = 1024;
  std::vector<std::string> measuring_tokens;
  int disputes_per_minute = 10;
  int searches_per_minute = 300;
  int search_cpu_ms = 2000;
};

constexpr const char* kStoreHelp =
    "the store: a SQLite database file (created if missing) or a PostgreSQL URL postgresql://user@host/db "
    "(the password from PGPASSWORD or PGPASSFILE, not the command line); env TESSERA_STORE";

CLI::Option* addStoreOption(CLI::App* app, std::string& target) {
  return app->add_option("--store,--db", target, kStoreHelp)->envname("TESSERA_STORE")->capture_default_str();
}

// --toolchain: what records are stale against when an asker does not say its own.
cache::Provenance parseToolchain(const std::string& spec) {
  cache::Provenance p;
  if (spec.empty()) return p;
  for (const std::string& part : split(spec, ',')) {
    auto eq = part.find('=');
    std::string name = part.substr(0, eq), value = eq == std::string::npos ? "" : part.substr(eq + 1);
    if (value.empty() || value.size() > 64) fail("--toolchain: expected name=value pairs, got '" + part + "'", kExitBadInput);
    if (name == "tessera_version") p.tessera_version = value;
    else if (name == "llvm_version") p.llvm_version = value;
    else if (name == "cuda_version") p.cuda_version = value;
    else fail("--toolchain: unknown field '" + name + "' (tessera_version, llvm_version, cuda_version)", kExitBadInput);
  }
  return p;
}

void writePortFile(const std::string& path, int port) {
  // Write then rename, so a reader polling for the file never sees it half-written.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    f << port << "\n";
    if (!f) fail("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail("cannot write " + path);
}

void runServer(const ServeArgs& a) {
  if (a.sync != "full" && a.sync != "normal") fail("--sync must be full or normal", kExitBadInput);
  if (a.threads < 1 || a.threads > 4096) fail("--threads must be in 1..4096", kExitBadInput);
  if (a.max_body_mb < 1 || a.max_body_mb > 1024) fail("--max-body-mb must be in 1..1024", kExitBadInput);
  if (a.port < 0 || a.port > 65535) fail("--port must be in 0..65535", kExitBadInput);
  if (a.read_timeout_s < 1 || a.read_timeout_s > 600 || a.write_timeout_s < 1 || a.write_timeout_s > 600)
    fail("--read-timeout and --write-timeout must be in 1..600 seconds", kExitBadInput);
  if (a.max_connections < 1 || a.max_connections > 65536) fail("--max-connections must be in 1..65536", kExitBadInput);
  if (a.max_connections_per_client < 0 || a.max_connections_per_client > a.max_connections)
    fail("--max-connections-per-client must be in 0..--max-connections (0: no per-client cap)", kExitBadInput);
  for (auto [v, name] : {std::pair{a.head_timeout_s, "--head-timeout"}, {a.body_timeout_s, "--body-timeout"},
                         {a.keep_alive_timeout_s, "--keep-alive-timeout"}})
    if (!(v >= 0.1 && v <= 3600)) fail(std::string(name) + " must be in 0.1..3600 seconds");
  if (!(a.lease_s >= 0.5 && a.lease_s <= 86400)) fail("--lease-seconds must be in 0.5..86400", kExitBadInput);
  if (!(a.worker_ttl_s >= 0.5 && a.worker_ttl_s <= 86400)) fail("--worker-ttl must be in 0.5..86400 seconds", kExitBadInput);
  if (a.max_attempts < 1 || a.max_attempts > 100) fail("--max-attempts must be in 1..100", kExitBadInput);
  if (a.store_connections < 1 || a.store_connections > 1000) fail("--store-connections must be in 1..1000", kExitBadInput);
  if (a.max_workers_per_token < 1 || a.max_workers_per_token > 100000) fail("--max-workers-per-token must be in 1..100000", kExitBadInput);
  if (a.max_leased_per_token < 1 || a.max_leased_per_token > 100000) fail("--max-leased-per-token must be in 1..100000", kExitBadInput);
  if (!(a.max_hold_s >= a.lease_s && a.max_hold_s <= 7 * 86400))
    fail("--max-hold-seconds must be in --lease-seconds..604800", kExitBadInput);
  if (!(a.steal_after_s >= a.lease_s && a.steal_after_s <= 7 * 86400))
    fail("--steal-after-seconds must be in --lease-seconds..604800", kExitBadInput);
  if (!(a.agree_factor >= 1.05 && a.agree_factor <= 10)) fail("--agree-factor must be in 1.05..10", kExitBadInput);
  if (a.disputes_per_minute < 0 || a.disputes_per_minute > 10000) fail("--disputes-per-minute must be in 0..10000", kExitBadInput);
  if (a.searches_per_minute < 0 || a.searches_per_minute > 1000000)
    fail("--searches-per-minute must be in 0..1000000 (0: no limit)", kExitBadInput);
  if (a.search_cpu_ms < 0 || a.search_cpu_ms > 3600000)
    fail("--search-cpu-ms must be in 0..3600000 (0: no budget)", kExitBadInput);
  for (const std::string& t : a.measuring_tokens)
    if (t.empty() || t.size() > 64) fail("--measuring-token: expected a token's name", kExitBadInput);
  if (a.max_inflight_mb < 0 || a.max_inflight_mb > 1 << 20) fail("--max-inflight-mb must be in 0..1048576 (0: no limit)", kExitBadInput);
  cache::ServerOptions o;
  o.db_path = a.db;
  o.http.bind = a.bind;
  o.http.port = a.port;
  o.http.threads = a.threads;
  o.http.max_body_bytes = static_cast<size_t>(a.max_body_mb) << 20;
  o.http.read_timeout_s = a.read_timeout_s;
  o.http.write_timeout_s = a.write_timeout_s;
  o.http.max_connections = a.max_connections;
  o.http.max_connections_per_client = a.max_connections_per_client;
  o.http.head_timeout_s = a.head_timeout_s;
  o.http.body_timeout_s = a.body_timeout_s;
  o.http.keep_alive_timeout_s = a.keep_alive_timeout_s;
  o.http.body_budget_bytes = static_cast<size_t>(a.max_inflight_mb) << 20;
  o.allow_anonymous_reads = a.anonymous_reads;
  o.backup_dir = a.backup_dir;
  o.synchronous_full = a.sync == "full";
  o.version = TESSERA_VERSION;
  o.current_toolchain = parseToolchain(a.toolchain);
  o.queue.lease_s = a.lease_s;
  o.queue.worker_ttl_s = a.worker_ttl_s;
  o.queue.max_attempts = a.max_attempts;
  o.queue.max_workers_per_token = a.max_workers_per_token;
  o.queue.max_leased_per_token = a.max_leased_per_token;
  o.queue.max_hold_s = a.max_hold_s;
  o.queue.steal_after_s = a.steal_after_s;
  o.agree_factor = a.agree_factor;
  o.measuring_tokens = a.measuring_tokens;
  o.disputes_per_minute = a.disputes_per_minute;
  o.scans_per_minute_per_token = a.searches_per_minute;
  o.scans_per_minute_per_address = 2 * a.searches_per_minute;
  o.scan_cpu_budget_s = a.search_cpu_ms / 1000.0;
  o.store_connections = a.store_connections;
#ifdef TESSERA_WITH_MLIR
  // The dashboard's Compare page: `tessera compare` over this store (builds without the compiler
  // answer 501).
  o.compare = serveCompare;
#endif

  // A store a migration is still copying into would answer every write 503 (its tables are
  // half-copied): refused, naming the command that finishes it.
  if (auto from = cache::unfinishedMigration(a.db); from.ok() && *from)
    fail("the store " + cache::redactLocation(a.db) + " is the destination of an unfinished migration from " + **from +
             ": finish it first with `tessera serve migrate --from " + **from + " --to " + cache::redactLocation(a.db) +
             "` (the same command continues where it stopped)",
         kExitBadInput);

  // Block the stop signals before any server thread exists so every thread inherits the mask and
  // only the sigwait below receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto server = cache::CacheServer::start(o);
  if (!server.ok()) fail(server.error().message);
  const int port = (*server)->port();
  const std::string shown = cache::redactLocation(a.db);
  std::printf("tessera serve: listening on http://%s:%d (store %s, %d threads%s)\n", a.bind.c_str(), port,
              shown.c_str(), a.threads, a.anonymous_reads ? ", anonymous reads" : "");
  auto tokens = cache::TokenStore::open(a.db);
  if (tokens.ok()) {
    auto active = (*tokens)->active();
    if (active.ok() && active->empty())
      std::printf("tessera serve: no tokens yet; add one with: tessera serve token add NAME --scope write --store %s\n",
                  shown.c_str());
  }
  std::fflush(stdout);
  if (!a.port_file.empty()) writePortFile(a.port_file, port);

  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::printf("tessera serve: signal %d, stopping\n", sig);
  std::fflush(stdout);
  (*server)->stop();
  (*server)->wait();
}

// `serve migrate`: progress on stderr, the verification table on stdout, one line and a non-zero
// exit for anything wrong (a table that differs after the copy: exit 1, naming it).
void runMigrate(cache::MigrateOptions o, bool json) {
  const auto start = std::chrono::steady_clock::now();
  o.progress = [start](const std::string& line) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "tessera serve migrate: [%6.1f s] %s\n", s, line.c_str());
    std::fflush(stderr);
  };
  auto report = cache::migrateStore(o);
  if (!report.ok()) failWith(report.error());
  const cache::MigrateReport& r = *report;
  if (json) {
    nlohmann::json j = {{"from", r.from_shown}, {"to", r.to_shown}, {"resumed", r.resumed},
                        {"already_done", r.already_done}, {"verified", r.mismatch.empty()}, {"tables", nlohmann::json::array()}};
    for (const cache::MigrateCheck& c : r.checks)
      j["tables"].push_back({{"table", c.table}, {"source_rows", c.source_rows}, {"destination_rows", c.destination_rows},
                             {"source_sha256", c.source_sha256}, {"destination_sha256", c.destination_sha256},
                             {"equal", c.equal()}});
    if (!r.mismatch.empty()) j["mismatch"] = r.mismatch;
    std::printf("%s\n", j.dump(2).c_str());
    std::fflush(stdout);
    if (!r.mismatch.empty()) {
      std::fprintf(stderr, "tessera: error: verification failed: table %s differs\n", r.mismatch.c_str());
      throw CLI::RuntimeError(kExitFailure);
    }
    return;
  }
  std::printf("%s -> %s%s\n", r.from_shown.c_str(), r.to_shown.c_str(),
              r.already_done ? " (finished before: verified again)" : r.resumed ? " (continued)" : "");
  std::printf("%-28s %12s %12s  %-16s %-16s %s\n", "TABLE", "SOURCE", "DESTINATION", "SOURCE SHA-256",
              "DEST. SHA-256", "");
  for (const cache::MigrateCheck& c : r.checks) {
    const bool counter = c.table.find(" high-water") != std::string::npos;
    if (counter)
      std::printf("%-28s %12s %12s  %-16s %-16s %s\n", c.table.c_str(), c.source_sha256.c_str(),
                  c.destination_sha256.c_str(), "", "", c.equal() ? "equal" : "DIFFERS");
    else
      std::printf("%-28s %12lld %12lld  %-16s %-16s %s\n", c.table.c_str(), static_cast<long long>(c.source_rows),
                  static_cast<long long>(c.destination_rows), c.source_sha256.substr(0, 16).c_str(),
                  c.destination_sha256.substr(0, 16).c_str(), c.equal() ? "equal" : "DIFFERS");
  }
  std::fflush(stdout);
  if (!r.mismatch.empty())
    fail("verification failed: table " + r.mismatch +
         " differs between the source and the destination (was the source written during the migration, or the "
         "destination since? the destination is left as it is)");
  std::printf("verified: every table has the same rows and checksum on both sides\n");
}

std::unique_ptr<cache::TokenStore> openTokens(const std::string& db) {
  auto t = cache::TokenStore::open(db);
  if (!t.ok()) fail(t.error().message);
  return std::move(*t);
}

}  // namespace

void addServeCommand(CLI::App& app) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* serve = app.add_subcommand("serve", "Run the shared tuning-cache service (HTTP; SQLite or PostgreSQL)");
  addStoreOption(serve, args->db);
  serve->add_option("--store-connections", args->store_connections,
                    "PostgreSQL: connections this replica opens at most (requests wait for a free one)")
      ->capture_default_str();
  serve->add_option("--port", args->port, "TCP port (0: any free port)")->capture_default_str();
  serve->add_option("--bind", args->bind, "address to listen on (loopback by default)")->capture_default_str();
  serve->add_option("--threads", args->threads,
                    "worker threads (they run complete requests; waiting connections hold none)")->capture_default_str();
  serve->add_option("--max-connections", args->max_connections,
                    "open connections at most; more are answered 503 at once")->capture_default_str();
  serve->add_option("--max-connections-per-client", args->max_connections_per_client,
                    "open connections per client address (0: no cap; use 0 behind a proxy)")->capture_default_str();
  serve->add_option("--head-timeout", args->head_timeout_s, "seconds to receive a whole request head (then 408)")
      ->capture_default_str();
  serve->add_option("--body-timeout", args->body_timeout_s, "seconds to receive a whole request body (then 408)")
      ->capture_default_str();
  serve->add_option("--keep-alive-timeout", args->keep_alive_timeout_s,
                    "seconds an idle connection is kept for its next request")->capture_default_str();
  serve->add_flag("--allow-anonymous-reads", args->anonymous_reads, "serve read routes without a token");
  serve->add_option("--max-body-mb", args->max_body_mb, "request body limit in MiB")->capture_default_str();
  serve->add_option("--max-inflight-mb", args->max_inflight_mb,
                    "memory for request bodies being read and parsed at once (each costs 8x its size); more waits "
                    "(503, Retry-After) (0: no limit)")
      ->capture_default_str();
  serve->add_option("--read-timeout", args->read_timeout_s, "seconds")->capture_default_str();
  serve->add_option("--write-timeout", args->write_timeout_s, "seconds")->capture_default_str();
  serve->add_option("--backup-dir", args->backup_dir, "directory for POST /v1/admin/backup (off if unset)");
  serve->add_option("--port-file", args->port_file, "write the bound port to this file once listening");
  serve->add_option("--sync", args->sync,
                    "full: fsync every commit (power-loss safe); normal: survives process crashes only")
      ->capture_default_str();
  serve->add_option("--toolchain", args->toolchain,
                    "records of another toolchain are served flagged stale to askers that do not say theirs, "
                    "e.g. 'tessera_version=0.1.0,llvm_version=22'");
  serve->add_option("--lease-seconds", args->lease_s,
                    "a worker's lease on a measurement expires after this long without a heartbeat")->capture_default_str();
  serve->add_option("--worker-ttl", args->worker_ttl_s, "a worker not heard from for this long is not live")
      ->capture_default_str();
  serve->add_option("--max-attempts", args->max_attempts,
                    "tokens whose leases of one candidate may expire before it is given up as a crash (and workers "
                    "that may refuse it before it is given up as refused)")->capture_default_str();
  serve->add_option("--max-workers-per-token", args->max_workers_per_token,
                    "live worker ids one worker token may register")->capture_default_str();
  serve->add_option("--max-leased-per-token", args->max_leased_per_token,
                    "measurement items the workers of one token may hold at once")->capture_default_str();
  serve->add_option("--max-hold-seconds", args->max_hold_s,
                    "heartbeats renew a lease for at most this long after it was taken")->capture_default_str();
  serve->add_option("--steal-after-seconds", args->steal_after_s,
                    "an idle worker of another token takes over an item held (and renewed) this long")
      ->capture_default_str();
  serve->add_option("--agree-factor", args->agree_factor,
                    "two identities' measurements of a config agree (confirm each other) within this factor; one "
                    "slower than another by more than its square refutes it")->capture_default_str();
  serve->add_option("--measuring-token", args->measuring_tokens,
                    "a token whose records are reproduced measurements (an admin-designated measuring identity, "
                    "e.g. the team's own worker fleet); repeatable");
  serve->add_option("--disputes-per-minute", args->disputes_per_minute,
                    "disputes (a reader's refutation of a claim) one token may file per minute")->capture_default_str();
  serve->add_option("--searches-per-minute", args->searches_per_minute,
                    "searches and lists (dashboard search, GET /v1/records, nearest, compare) one token may run per "
                    "minute; twice that per client address (0: no limit)")->capture_default_str();
  serve->add_option("--search-cpu-ms", args->search_cpu_ms,
                    "CPU time one search or list may take before it is cut with 503 (0: no budget)")
      ->capture_default_str();
  serve->require_subcommand(0, 1);
  serve->callback([serve, args] {
    if (serve->get_subcommands().empty()) runServer(*args);
  });

  CLI::App* token = serve->add_subcommand("token", "Manage bearer tokens (stored as hashes)");
  token->require_subcommand(1);

  // One --json for the subcommands below (one of them runs).
  auto json = std::make_shared<bool>(false);
  auto add = std::make_shared<std::tuple<std::string, std::string, std::string>>("tessera.db", "", "read");
  CLI::App* tadd = token->add_subcommand("add", "Create a token and print its secret (shown once)");
  addStoreOption(tadd, std::get<0>(*add));
  tadd->add_option("name", std::get<1>(*add), "token name (e.g. a person or a CI job)")->required();
  tadd->add_option("--scope", std::get<2>(*add), "read, write, admin, or worker (lease and report only)")
      ->capture_default_str();
  addJsonFlag(tadd, *json);
  tadd->callback([add, json] {
    auto scope = cache::parseScope(std::get<2>(*add));
    if (!scope) fail("--scope must be read, write, admin or worker", kExitBadInput);
    auto secret = openTokens(std::get<0>(*add))->add(std::get<1>(*add), *scope);
    if (!secret.ok()) fail(secret.error().message);
    if (*json)
      std::printf("%s\n", nlohmann::json({{"name", std::get<1>(*add)}, {"scope", std::get<2>(*add)}, {"secret", *secret}})
                              .dump(2)
                              .c_str());
    else
      std::printf("%s\n", secret->c_str());
    std::fprintf(stderr, "token '%s' (%s) created; store the secret now, it is not kept\n",
                 std::get<1>(*add).c_str(), std::get<2>(*add).c_str());
  });

  auto list_db = std::make_shared<std::string>("tessera.db");
  CLI::App* tlist = token->add_subcommand("list", "List tokens (names, scopes, hash prefixes)");
  addStoreOption(tlist, *list_db);
  addJsonFlag(tlist, *json);
  tlist->callback([list_db, json] {
    auto all = openTokens(*list_db)->list();
    if (!all.ok()) fail(all.error().message);
    if (*json) {
      nlohmann::json arr = nlohmann::json::array();
      for (const auto& t : *all)
        arr.push_back({{"name", t.name}, {"scope", std::string(cache::scopeName(t.scope))}, {"hash_prefix", t.hash_prefix},
                       {"created_at", t.created_at}, {"revoked_at", t.revoked_at}});
      std::printf("%s\n", arr.dump(2).c_str());
      return;
    }
    std::printf("%-24s %-6s %-14s %-21s %s\n", "NAME", "SCOPE", "HASH", "CREATED", "REVOKED");
    for (const auto& t : *all)
      std::printf("%-24s %-6s %-14s %-21s %s\n", t.name.c_str(), std::string(cache::scopeName(t.scope)).c_str(),
                  t.hash_prefix.c_str(), t.created_at.c_str(), t.revoked_at.empty() ? "-" : t.revoked_at.c_str());
  });

  auto rev = std::make_shared<std::tuple<std::string, std::string, std::string>>("tessera.db", "", "");
  CLI::App* trev = token->add_subcommand("revoke", "Revoke a token (a running server drops it within ~1 s)");
  addStoreOption(trev, std::get<0>(*rev));
  trev->add_option("name", std::get<1>(*rev), "token name")->required();
  trev->add_option("--retract", std::get<2>(*rev),
                   "also retract the records it wrote: quarantine (kept, never served) or delete");
  addJsonFlag(trev, *json);
  trev->callback([rev, json] {
    const auto& [db, name, retract] = *rev;
    if (!retract.empty() && retract != "quarantine" && retract != "delete")
      fail("--retract must be quarantine or delete", kExitBadInput);
    if (Status s = openTokens(db)->revoke(name); !s.ok()) fail(s.error().message);
    if (!*json) std::printf("revoked %s\n", name.c_str());
    if (retract.empty()) {
      if (*json) std::printf("%s\n", nlohmann::json({{"revoked", name}}).dump(2).c_str());
      return;
    }
    // Through the store, so the winners of the affected keys are recomputed; a running server
    // notices the commit within its refresh interval and reloads its winners.
    auto store = cache::openStore(db);
    if (!store.ok()) fail(store.error().message);
    auto n = (*store)->administer({.writer = name},
                                  retract == "delete" ? cache::AdminAction::Delete : cache::AdminAction::Quarantine);
    if (!n.ok()) fail(n.error().message);
    if (*json) {
      std::printf("%s\n", nlohmann::json({{"revoked", name}, {"retract", retract}, {"records", *n}}).dump(2).c_str());
      return;
    }
    std::printf("%s %lld records written by %s\n", retract == "delete" ? "deleted" : "quarantined",
                static_cast<long long>(*n), name.c_str());
  });

  auto mig = std::make_shared<cache::MigrateOptions>();
  CLI::App* migrate = serve->add_subcommand(
      "migrate",
      "Copy a whole store to another database, SQLite <-> PostgreSQL: every record as stored (writer, received_at, "
      "quarantine, trust), tokens as their hashes, workers, jobs and the kernel table; resumable, verified by counts "
      "and checksums");
  migrate->add_option("--from", mig->from,
                      "the store to copy: a SQLite file or a postgresql:// URL (read in one snapshot, never written; "
                      "stop its writers first)")
      ->required();
  migrate->add_option("--to", mig->to,
                      "where to copy it: a new SQLite file or an empty PostgreSQL database; one that holds an "
                      "interrupted migration from the same store continues it")
      ->required();
  migrate->add_option("--batch-rows", mig->batch_rows, "rows per destination transaction (1..100000)")
      ->capture_default_str();
  addJsonFlag(migrate, *json);
  migrate->callback([mig, json] { runMigrate(*mig, *json); });

  auto bk = std::make_shared<std::pair<std::string, std::string>>("tessera.db", "");
  CLI::App* backup = serve->add_subcommand(
      "backup", "Write a consistent copy of a SQLite store (safe while serving; PostgreSQL: use pg_dump)");
  addStoreOption(backup, bk->first);
  backup->add_option("out", bk->second, "new file to write")->required();
  addJsonFlag(backup, *json);
  backup->callback([bk, json] {
    auto store = cache::openStore(bk->first);
    if (!store.ok()) fail(store.error().message);
    if (Status s = (*store)->backup(bk->second); !s.ok()) fail(s.error().message);
    if (*json)
      std::printf("%s\n", nlohmann::json({{"backup", bk->second}}).dump(2).c_str());
    else
      std::printf("backup written to %s\n", bk->second.c_str());
  });
}

}  // namespace tessera::cli
