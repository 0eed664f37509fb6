// Owns the shared test helpers (see test_util.h).
#include "tests/cache_service/test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include "store/engine.h"
#include "store/record_json.h"
#include "store/trust.h"
#include "service/plausibility.h"
#include "service/roofline.h"
#include "store/tokens.h"
#include "support/hash.h"

#ifdef TESSERA_WITH_POSTGRES
#include <pqxx/pqxx>
#endif

namespace tessera::cache::test {

TempDir::TempDir() {
  char tmpl[] = "/tmp/tessera-cache-test-XXXXXX";
  if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

HardKey keyFor(int key) {
  HardKey k;
  k.family = "gemm";
  k.workload = "00c0ffee" + std::to_string(10000000 + key);
  // Shapes spread over powers of two so nearest-shape distances are distinct, and small enough
  // that the service's roofline check (plausibility.h) accepts the tests' microsecond medians.
  k.shape = {int64_t{4} << (key % 5), int64_t{4} << ((key / 5) % 5), 16 + key};
  k.dtype = "f32";
  k.layout = "row";
  k.target = "host";
  k.arch = "x86-64-v4";
  k.units = 2;
  return k;
}

Record makeRecord(const RecordSpec& s) {
  Record r;
  r.key = keyFor(s.key);
  r.provenance = {"0.1.0", s.llvm_version, "", "Test CPU", s.host, "tester", s.created_at};
  r.config = s.config;
  r.status = s.status;
  if (s.status == RecordStatus::Estimated) {  // a prediction: a time, its model and its bound
    r.median_us = r.p20_us = r.p80_us = s.median_us;
    r.estimator = "analytic-v1";
    r.bound = "compute";
  }
  if (s.status == RecordStatus::Ok) {
    r.n = 10;
    r.median_us = s.median_us;
    r.p20_us = s.median_us * 0.9;
    r.p80_us = s.median_us * 1.1;
    r.gflops = 1000.0 / s.median_us;
  }
  r.trials = 5;
  r.tuning_seconds = 1.5;
  r.remeasured = s.remeasured;
  Status st = finalizeRecord(r);
  if (!st.ok()) throw std::runtime_error("test record invalid: " + st.error().message);
  return r;
}

std::string Reply::header(const std::string& name) const {
  for (const auto& [k, v] : headers) {
    if (k.size() != name.size()) continue;
    bool eq = true;
    for (size_t i = 0; i < k.size(); ++i) eq = eq && std::tolower(k[i]) == std::tolower(name[i]);
    if (eq) return v;
  }
  return "";
}

namespace {
Reply parseResponse(const std::string& raw) {
  Reply r;
  size_t end = raw.find("\r\n\r\n");
  if (raw.compare(0, 5, "HTTP/") != 0 || end == std::string::npos) return r;
  size_t sp = raw.find(' ');
  r.status = std::atoi(raw.c_str() + sp + 1);
  size_t pos = raw.find("\r\n") + 2;
  while (pos < end) {
    size_t eol = raw.find("\r\n", pos);
    std::string line = raw.substr(pos, eol - pos);
    size_t colon = line.find(':');
    if (colon != std::string::npos) {
      std::string v = line.substr(colon + 1);
      while (!v.empty() && v.front() == ' ') v.erase(0, 1);
      r.headers.emplace_back(line.substr(0, colon), v);
    }
    pos = eol + 2;
  }
  r.content_type = r.header("Content-Type");
  std::string len = r.header("Content-Length");
  r.body = raw.substr(end + 4);
  if (!len.empty()) r.body = r.body.substr(0, std::min(r.body.size(), static_cast<size_t>(std::atoll(len.c_str()))));
  return r;
}
}  // namespace

// Whether `raw` holds one whole response (headers, and the body its Content-Length announces).
bool complete(const std::string& raw, bool head_request) {
  size_t end = raw.find("\r\n\r\n");
  if (end == std::string::npos) return false;
  if (head_request) return true;
  Reply r = parseResponse(raw.substr(0, end + 4));
  std::string len = r.header("Content-Length");
  if (len.empty()) return r.status == 304 || r.status == 204;
  return raw.size() >= end + 4 + static_cast<size_t>(std::atoll(len.c_str()));
}

Reply rawRequest(int port, const std::string& bytes, int timeout_ms) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return {};
  }
  size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may refuse early and close; read what it said
    sent += static_cast<size_t>(n);
  }
  // No half-close: cpp-httplib treats a half-closed peer as gone and would not answer. Read until
  // one whole response is in, the server closes, or the time is up (a server still waiting for
  // the rest of a request that will never come).
  const bool head = bytes.rfind("HEAD ", 0) == 0;
  std::string raw;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[65536];
  while (!complete(raw, head)) {
    int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                    deadline - std::chrono::steady_clock::now())
                                    .count());
    if (left <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, left) <= 0) break;
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    raw.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return parseResponse(raw);
}

std::string httpRequest(const std::string& method, const std::string& target, const std::string& body,
                        const std::vector<std::string>& extra_headers, bool with_length) {
  std::string req = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  for (const auto& h : extra_headers) req += h + "\r\n";
  if (with_length && (!body.empty() || method == "POST")) req += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  req += "\r\n" + body;
  return req;
}

std::vector<Engine> builtEngines() {
  if (postgresBuiltIn()) return {Engine::Sqlite, Engine::Postgres};
  return {Engine::Sqlite};
}

ServerFixture::ServerFixture(ServerOptions opts, bool with_tokens, Engine engine) {
  if (engine == Engine::Postgres) {
    pg = std::make_unique<PgDatabase>();
    db = pg->url();
  } else {
    db = dir.file("cache.db");
  }
  opts.db_path = db;
  if (opts.version.empty() || opts.version == "dev") opts.version = "test";
  if (with_tokens) {
    auto tokens = TokenStore::open(db);
    if (!tokens.ok()) throw std::runtime_error(tokens.error().message);
    read_token = *(*tokens)->add("reader", Scope::Read);
    write_token = *(*tokens)->add("writer", Scope::Write);
    admin_token = *(*tokens)->add("admin", Scope::Admin);
  }
  auto s = CacheServer::start(opts);
  if (!s.ok()) throw std::runtime_error(s.error().message);
  server = std::move(*s);
}

ServerFixture::~ServerFixture() {
  server->stop();
  server->wait();
}

namespace {
Reply viaClient(const std::string& url, const std::string& method, const std::string& target, const std::string& body,
                const std::string& token, const std::string& content_type, const std::vector<std::string>& extra) {
  auto conn = openHttpConnection(url, 2.0);
  if (!conn.ok()) throw std::runtime_error(conn.error().message);
  HeaderList headers;
  if (!token.empty()) headers.emplace_back("Authorization", "Bearer " + token);
  for (const auto& h : extra) {
    size_t colon = h.find(':');
    headers.emplace_back(h.substr(0, colon), h.substr(colon + 2));
  }
  auto r = (*conn)->send(method, target, headers, body, content_type, 10.0);
  Reply out;
  if (!r.ok()) return out;
  out.status = r->status;
  out.body = r->body;
  out.headers = r->headers;
  out.content_type = out.header("Content-Type");
  return out;
}
}  // namespace

bool awaitToken(const std::string& url, const std::string& token, bool known, double limit_s) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_s);
  for (;;) {
    const int status = viaClient(url, "GET", "/status", "", token, "", {}).status;
    if (status != 0 && (status == 401) != known) return true;
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

Reply ServerFixture::get(const std::string& target, const std::string& token, const std::vector<std::string>& headers) {
  return viaClient(url(), "GET", target, "", token, "", headers);
}

Reply ServerFixture::post(const std::string& target, const std::string& body, const std::string& token,
                          const std::string& content_type) {
  return viaClient(url(), "POST", target, body, token, content_type, {});
}

#ifdef TESSERA_WITH_POSTGRES
namespace {

std::string trimmedOutput(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[512];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int rc = ::pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return rc == 0 ? out : std::string();
}

// The tests' server URL, without a password (tessera refuses one on its command line): the
// password reaches libpq, in this process and in every tessera it starts, through PGPASSFILE (the
// server's DIR/pgpass) or PGPASSWORD (taken out of a TESSERA_TEST_PG URL that holds one).
const std::string& pgServerUrl() {
  static const std::string url = [] {
    if (const char* env = std::getenv("TESSERA_TEST_PG"); env && *env) {
      std::string u = env;
      const size_t user = u.find("://") + 3, at = u.find('@'), colon = u.find(':', user);
      if (at != std::string::npos && colon < at) {
        ::setenv("PGPASSWORD", u.substr(colon + 1, at - colon - 1).c_str(), 1);
        u.erase(colon, at - colon);
      }
      return u;
    }
    // Idempotent: prints the running server's URL, or starts it; flock keeps two test processes
    // from running initdb at once.
    const std::string dir = TESSERA_PG_DIR;
    std::string u = trimmedOutput("flock -o " + dir + ".lock bash " + std::string(TESSERA_SOURCE_DIR) +
                                  "/scripts/pg_server.sh start " + dir + " 2>&1");
    if (!isPostgresLocation(u))
      throw std::runtime_error("the tests' PostgreSQL server did not start (scripts/pg_server.sh start " + dir +
                               "): " + u);
    ::setenv("PGPASSFILE", (dir + "/pgpass").c_str(), 1);
    return u;
  }();
  return url;
}

// The server URL with its database (the path) replaced.
std::string withDatabase(const std::string& url, const std::string& db) {
  const size_t q = url.find('?');
  const std::string base = url.substr(0, q), query = q == std::string::npos ? "" : url.substr(q);
  const size_t slash = base.find('/', base.find("://") + 3);
  return (slash == std::string::npos ? base : base.substr(0, slash)) + "/" + db + query;
}

}  // namespace

PgDatabase::PgDatabase() {
  auto hex = randomHex(8);
  if (!hex.ok()) throw std::runtime_error(hex.error().message);
  name_ = "t_" + *hex;
  pqxx::connection admin(pgServerUrl());
  pqxx::nontransaction t(admin);
  t.exec("CREATE DATABASE " + name_);
  url_ = withDatabase(pgServerUrl(), name_);
}

PgDatabase::~PgDatabase() {
  try {
    pqxx::connection admin(pgServerUrl());
    pqxx::nontransaction t(admin);
    t.exec("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
  } catch (const std::exception&) {
    // The server's folder goes with the build; a leftover database costs nothing.
  }
}

bool postgresBuiltIn() { return true; }

std::string pgServerPassword() {
  (void)pgServerUrl();
  if (const char* pw = std::getenv("PGPASSWORD"); pw && *pw) return pw;
  std::ifstream in(std::string(TESSERA_PG_DIR) + "/pgpass");
  std::string line;
  std::getline(in, line);
  return line.substr(line.rfind(':') + 1);
}

namespace {
std::vector<std::vector<std::string>> pgQueryRows(const std::string& url, const std::string& sql) {
  pqxx::connection c(url);
  pqxx::nontransaction t(c);
  std::vector<std::vector<std::string>> rows;
  for (const auto& row : t.exec(sql)) {
    std::vector<std::string> out;
    for (const auto& f : row) out.emplace_back(f.is_null() ? "NULL" : f.c_str());
    rows.push_back(std::move(out));
  }
  return rows;
}
}  // namespace
#else
PgDatabase::PgDatabase() { throw std::runtime_error("this build has no PostgreSQL engine"); }
PgDatabase::~PgDatabase() = default;
bool postgresBuiltIn() { return false; }
#endif

std::vector<std::vector<std::string>> queryRows(const std::string& db_path, const std::string& sql) {
#ifdef TESSERA_WITH_POSTGRES
  if (isPostgresLocation(db_path)) return pgQueryRows(db_path, sql);
#endif
  sqlite3* db = nullptr;
  std::vector<std::vector<std::string>> rows;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    throw std::runtime_error("cannot open " + db_path);
  }
  sqlite3_busy_timeout(db, 5000);
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
    std::string err = sqlite3_errmsg(db);
    sqlite3_close(db);
    throw std::runtime_error("bad test query: " + err);
  }
  while (sqlite3_step(st) == SQLITE_ROW) {
    std::vector<std::string> row;
    for (int i = 0; i < sqlite3_column_count(st); ++i) {
      const unsigned char* t = sqlite3_column_text(st, i);
      row.emplace_back(t ? reinterpret_cast<const char*>(t) : "NULL");
    }
    rows.push_back(std::move(row));
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return rows;
}

std::string integrityCheck(const std::string& db_path) {
  auto rows = queryRows(db_path, "PRAGMA integrity_check");
  std::string out;
  for (const auto& r : rows) out += r.empty() ? "" : r[0];
  return out;
}

std::string dbSnapshot(const std::string& db_path) {
  std::string all;
  for (const char* q : {"SELECT * FROM records ORDER BY id", "SELECT * FROM keys ORDER BY key_id",
                        "SELECT * FROM tokens ORDER BY name"}) {
    for (const auto& row : queryRows(db_path, q)) {
      for (const auto& col : row) all += col + '\x1f';
      all += '\n';
    }
    all += "--\n";
  }
  return sha256Hex(all);
}

std::string recordsBody(const std::vector<Record>& recs) {
  std::string body = "{\"records\":[";
  for (size_t i = 0; i < recs.size(); ++i) body += (i ? "," : "") + encodeRecord(recs[i]);
  return body + "]}";
}

std::optional<double> lieTimeUs(const std::string& key_json, const std::string& config_json, double real_us,
                                double divisor) {
  auto j = parseJson(key_json);
  if (!j.ok()) throw std::runtime_error("lieTimeUs: the key is not JSON: " + key_json);
  auto key = hardKeyFromJson(*j, "key");
  if (!key.ok()) throw std::runtime_error("lieTimeUs: not a key: " + key_json);
  double us = real_us / divisor;
  // The service refuses a host time below bound / roofline_margin; stay 20 % above that line.
  if (auto bound = rooflineBoundUs(*key, config_json))
    us = std::max(us, *bound / PlausibilityOptions{}.roofline_margin * 1.2);
  // A client calls a claim a lie beyond agree_factor^2 of its own time; keep a 1.5x margin for noise.
  if (us * kDefaultAgreeFactor * kDefaultAgreeFactor * 1.5 > real_us) return std::nullopt;
  return us;
}

}  // namespace tessera::cache::test
