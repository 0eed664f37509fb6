// Owns what the cache-service tests share: temporary directories, record builders, a real
// server on a loopback port with tokens of every scope, raw-socket HTTP for malformed requests,
// and independent SQLite checks (integrity, content snapshot) of a database file.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client/http.h"
#include "store/record.h"
#include "service/server.h"

namespace tessera::cache::test {

class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A valid, finalized record. `key` picks one of many distinct hard keys (gemm on host, shape
// derived from the index); everything else is settable.
struct RecordSpec {
  int key = 0;
  double median_us = 100;
  RecordStatus status = RecordStatus::Ok;
  std::string created_at = "2025-01-01T00:00:00Z";
  std::string llvm_version = "22.1.0";
  std::string host = "test-host";
  std::string config = "{\"MC\":64}";
  bool remeasured = false;
};
Record makeRecord(const RecordSpec& spec);
HardKey keyFor(int key);

struct Reply {
  int status = 0;  // 0: no answer (connection closed or timed out)
  std::string content_type;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string header(const std::string& name) const;  // case-insensitive, "" if absent
};

// Sends `bytes` verbatim on a new connection, half-closes, and parses one response (if any).
Reply rawRequest(int port, const std::string& bytes, int timeout_ms = 3000);

// Waits, at most `limit_s`, until the service at `url` knows `token` (answers it other than 401;
// known = false: until it answers 401). A token added or revoked while a server runs counts from
// its next refresh (`tessera serve`: 1 s); waiting for that beats sleeping past it. False: timed out.
bool awaitToken(const std::string& url, const std::string& token, bool known = true, double limit_s = 10);

// A request with the usual framing; `extra_headers` are "Name: value" lines.
std::string httpRequest(const std::string& method, const std::string& target, const std::string& body = "",
                        const std::vector<std::string>& extra_headers = {}, bool with_length = true);

// Server settings for tests: no fsync per commit (a killed process still loses nothing) and a
// fast refresh so token changes show up quickly.
inline ServerOptions testOptions() {
  ServerOptions o;
  o.synchronous_full = false;
  o.http.threads = 32;
  o.refresh_interval_s = 0.2;
  return o;
}

// Tokens of each scope plus a running in-process server on a free loopback port.
class PgDatabase;

enum class Engine { Sqlite, Postgres };
inline const char* engineName(Engine e) { return e == Engine::Sqlite ? "sqlite" : "postgres"; }
// The engines this build has (what engine-parametrized tests run on).
std::vector<Engine> builtEngines();

struct ServerFixture {
  // engine: where the store lives (a fresh SQLite file, or a fresh database on the tests'
  // PostgreSQL server); `db` is its location either way.
  explicit ServerFixture(ServerOptions opts = testOptions(), bool with_tokens = true, Engine engine = Engine::Sqlite);
  ~ServerFixture();
  int port() const { return server->port(); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port()); }
  // Convenience calls through a fresh connection of the library's own HTTP client.
  Reply get(const std::string& target, const std::string& token = "", const std::vector<std::string>& headers = {});
  Reply post(const std::string& target, const std::string& body, const std::string& token = "",
             const std::string& content_type = "application/json");

  TempDir dir;
  std::unique_ptr<PgDatabase> pg;
  std::string db;
  std::string read_token, write_token, admin_token;
  std::unique_ptr<CacheServer> server;
};

// PRAGMA integrity_check of a database file, through a separate SQLite connection.
std::string integrityCheck(const std::string& db_path);
// SHA-256 over every row of records, keys and tokens: equal before/after means nothing changed.
std::string dbSnapshot(const std::string& db_path);
// Runs one SQL query returning rows of text columns (NULL as "NULL"), on a SQLite file or, for a
// postgresql:// location, through libpq.
std::vector<std::vector<std::string>> queryRows(const std::string& db_path, const std::string& sql);

// A fresh database on the tests' PostgreSQL server, dropped (WITH FORCE) when this goes. The server
// is scripts/pg_server.sh's, with its handle in the build's test-tmp/pg: the ctest fixture
// `postgres` starts it before and destroys it after the tests; a test binary run on its own starts
// it on first use (it stays up; `bash scripts/pg_server.sh destroy build/test-tmp/pg`). TESSERA_TEST_PG=URL names another
// server (a role that may create databases). Throws when no server can be had: a test that needs
// PostgreSQL fails, it never skips.
class PgDatabase {
 public:
  PgDatabase();
  ~PgDatabase();
  PgDatabase(const PgDatabase&) = delete;
  PgDatabase& operator=(const PgDatabase&) = delete;
  const std::string& url() const { return url_; }

 private:
  std::string name_, url_;
};
// Whether this build has the PostgreSQL engine (the tests of it are compiled only then).
bool postgresBuiltIn();
// The password of the tests' PostgreSQL server (it is never in the URLs tessera gets).
std::string pgServerPassword();

// Record JSON for request bodies: {"records":[...]}.
std::string recordsBody(const std::vector<Record>& recs);

// A made-up time for a lie about a config this machine measured at `real_us`: `real_us / divisor`,
// raised where that would be below what the service's roofline check lets through (a fast host
// runs a small kernel close to its roofline, and the service would refuse the lie before any
// client sees it). nullopt when no such time is also far enough below `real_us` for a client's
// re-timing to contradict it (the host runs the kernel at its roofline): the test cannot lie here.
// `key_json` and `config_json` are the record's key and config as JSON text.
std::optional<double> lieTimeUs(const std::string& key_json, const std::string& config_json, double real_us,
                                double divisor);

}  // namespace tessera::cache::test
