// Anchor server for the cache load benchmark: the floor any Tessera cache service should beat on
// the same machine. Provenance: the project's anchor program for the cache service, kept
// here so that every checkout has it. Unchanged: GET
// /v1/best/<hex key> from an SQLite table rec(key_id TEXT PRIMARY KEY, body TEXT) with
// thread-local prepared statements, and GET /hello. Added for the write comparison: POST
// /v1/rec/<hex key> storing the body with a bare INSERT OR REPLACE on one shared connection
// (WAL, synchronous=FULL like Tessera's default), serialized by a mutex.
// Run: anchor_srv DB PORT THREADS
#include <httplib.h>
#include <sqlite3.h>

#include <cstdlib>
#include <mutex>
#include <string>

static std::string g_db;

struct Reader {
  sqlite3* db = nullptr;
  sqlite3_stmt* st = nullptr;
  Reader() {
    sqlite3_open_v2(g_db.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr);
    sqlite3_prepare_v2(db, "select body from rec where key_id=?", -1, &st, nullptr);
  }
};

struct Writer {
  std::mutex mu;
  sqlite3* db = nullptr;
  sqlite3_stmt* st = nullptr;
  Writer() {
    sqlite3_open_v2(g_db.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr);
    sqlite3_busy_timeout(db, 5000);
    sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;", nullptr, nullptr, nullptr);
    sqlite3_prepare_v2(db, "insert or replace into rec(key_id, body) values(?, ?)", -1, &st, nullptr);
  }
};

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  g_db = argv[1];
  int port = std::atoi(argv[2]), threads = std::atoi(argv[3]);
  static Writer writer;
  httplib::Server s;
  s.set_tcp_nodelay(true);  // without it: ~44 ms per keep-alive request (delayed ACK)
  s.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.Get(R"(/v1/best/([0-9a-f]+))", [](const httplib::Request& r, httplib::Response& res) {
    thread_local Reader c;
    sqlite3_reset(c.st);
    sqlite3_bind_text(c.st, 1, r.matches[1].str().c_str(), -1, SQLITE_TRANSIENT);
    if (sqlite3_step(c.st) == SQLITE_ROW)
      res.set_content(reinterpret_cast<const char*>(sqlite3_column_text(c.st, 0)), "application/json");
    else
      res.status = 404;
    sqlite3_reset(c.st);
  });
  s.Get("/hello", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("{\"ok\":true}", "application/json");
  });
  s.Post(R"(/v1/rec/([0-9a-f]+))", [](const httplib::Request& r, httplib::Response& res) {
    std::lock_guard<std::mutex> g(writer.mu);
    sqlite3_reset(writer.st);
    sqlite3_bind_text(writer.st, 1, r.matches[1].str().c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(writer.st, 2, r.body.c_str(), static_cast<int>(r.body.size()), SQLITE_TRANSIENT);
    int rc = sqlite3_step(writer.st);
    sqlite3_reset(writer.st);
    res.status = rc == SQLITE_DONE ? 200 : 500;
    res.set_content("{\"ok\":true}", "application/json");
  });
  s.listen("127.0.0.1", port);
}
