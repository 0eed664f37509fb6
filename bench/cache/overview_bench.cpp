// Owns the dashboard overview's benchmark (issue 28): a SQLite store of N records spread over keys
// of every family, several targets, failures and estimates (R records per key), served by a real
// `tessera serve` (CacheServer) on loopback; times the overview's pages (GET /v1/kernels: first
// page cold and warm, by kernel, filtered, searched, a deep page, one kernel's summary) against
// anchors measured in the same run: the records API's first page (GET /v1/records?limit=50, what a
// page would otherwise page through) and a winner lookup (GET /v1/best/{key_id}).
// Usage: overview_bench [RECORDS=100000] [RECORDS_PER_KEY=10] [DIR=/tmp] [keep: leave the store file]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "client/http.h"
#include "service/server.h"
#include "store/store.h"
#include "store/tokens.h"
#include "support/hash.h"

using namespace tessera::cache;
using Clock = std::chrono::steady_clock;

namespace {

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Key k's records: one family, shape, dtype and target per key; GPU keys are half estimated only.
std::vector<Record> keyRecords(int64_t k, int per_key, std::mt19937_64& rng) {
  static const char* families[] = {"gemm", "elementwise", "attention"};
  static const char* dtypes[] = {"f32", "f16", "bf16"};
  static const char* targets[] = {"host", "sm_90a", "gfx942"};
  static const int64_t units[] = {2, 132, 304};
  std::uniform_int_distribution<int> pow2(6, 12);
  std::uniform_real_distribution<double> us(5.0, 5000.0), u01(0, 1);
  Record base;
  const int f = int(k % 3), t = int((k / 3) % 3);
  base.key.family = families[f];
  base.key.workload = tessera::sha256Hex("workload-" + std::to_string(k)).substr(0, 16);
  if (f == 0) base.key.shape = {int64_t{1} << pow2(rng), int64_t{1} << pow2(rng), int64_t{1} << pow2(rng)};
  else if (f == 1) base.key.shape = {int64_t{1} << pow2(rng), int64_t{1} << pow2(rng)};
  else base.key.shape = {1, 8, 8, int64_t{1} << pow2(rng), int64_t{1} << pow2(rng), 64};
  base.key.dtype = dtypes[(k / 9) % 3];
  base.key.layout = "row";
  base.key.target = targets[t];
  base.key.arch = t == 0 ? "x86-64-v4" : targets[t];
  base.key.units = units[t];
  base.provenance = {"0.1.0", "22.1.0", t == 1 ? "12.8" : "", "bench-cpu", "bench-host", "bench", "2025-01-31T12:00:00Z"};
  const bool estimated = t != 0 && k % 2 == 1;
  std::vector<Record> out;
  for (int i = 0; i < per_key; ++i) {
    Record r = base;
    r.config = "{\"BM\":" + std::to_string(16 << (i % 4)) + ",\"BN\":" + std::to_string(16 << (i % 3)) +
               ",\"STAGES\":" + std::to_string(1 + i % 4) + ",\"i\":" + std::to_string(i) + "}";
    r.median_us = us(rng);
    r.trials = i + 1;
    if (estimated) {
      r.status = RecordStatus::Estimated;
      r.p20_us = r.p80_us = r.median_us;
      r.estimator = "analytic-v1";
      r.bound = "compute";
    } else if (u01(rng) < 0.1) {
      r.status = RecordStatus::CompileError;
      r.median_us = 0;
    } else {
      r.status = RecordStatus::Ok;
      r.n = 20;
      r.p20_us = r.median_us * 0.98;
      r.p80_us = r.median_us * 1.03;
      r.gflops = 1e3 / r.median_us;
      r.peak_fraction = 0.5;
    }
    (void)finalizeRecord(r);
    out.push_back(std::move(r));
  }
  return out;
}

struct Timing {
  double median = 0, max = 0;
  int status = 0;
};

Timing timeGet(HttpConnection& c, const std::string& path, const std::string& token, int reps) {
  std::vector<double> t;
  Timing out;
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    auto r = c.send("GET", path, {{"Authorization", "Bearer " + token}}, "", "", 30);
    t.push_back(ms(Clock::now() - t0));
    out.status = r.ok() ? r->status : -1;
  }
  std::sort(t.begin(), t.end());
  out.median = t[t.size() / 2];
  out.max = t.back();
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 100000;
  const int per_key = argc > 2 ? std::atoi(argv[2]) : 10;
  const std::string dir = argc > 3 ? argv[3] : "/tmp";
  if (n < per_key || per_key < 1) {
    std::fprintf(stderr, "usage: overview_bench [RECORDS>=RECORDS_PER_KEY] [RECORDS_PER_KEY>=1] [DIR]\n");
    return 2;
  }
  const std::string db = dir + "/tessera-overview-bench-" + std::to_string(n) + "-" + std::to_string(per_key) + ".db";
  for (const char* ext : {"", "-wal", "-shm"}) std::filesystem::remove(db + ext);
  auto t_seed = Clock::now();
  std::string key_id;
  {
    SqliteStoreOptions o;
    o.synchronous_full = false;
    auto store = openSqliteStore(db, o);
    if (!store.ok()) return std::fprintf(stderr, "%s\n", store.error().message.c_str()), 1;
    std::mt19937_64 rng(20251125);
    std::vector<Record> batch;
    for (int64_t k = 0; k * per_key < n; ++k) {
      for (Record& r : keyRecords(k, per_key, rng)) batch.push_back(std::move(r));
      if (k == 3) key_id = batch.back().key_id;
      if (batch.size() >= 2000) {
        if (auto s = (*store)->put(batch); !s.ok()) return std::fprintf(stderr, "%s\n", s.error().message.c_str()), 1;
        batch.clear();
      }
    }
    if (!batch.empty() && !(*store)->put(batch).ok()) return 1;
  }
  const double seed_s = ms(Clock::now() - t_seed) / 1e3;
  auto tokens = TokenStore::open(db);
  if (!tokens.ok()) return 1;
  const std::string token = *(*tokens)->add("bench", Scope::Read);
  ServerOptions so;
  so.db_path = db;
  so.synchronous_full = false;
  auto t_start = Clock::now();
  auto server = CacheServer::start(so);
  if (!server.ok()) return std::fprintf(stderr, "%s\n", server.error().message.c_str()), 1;
  const double start_ms = ms(Clock::now() - t_start);
  auto conn = openHttpConnection("http://127.0.0.1:" + std::to_string((*server)->port()), 5);
  if (!conn.ok()) return 1;
  auto stats = (*server)->store().stats();
  std::printf("overview_bench: %lld records, %lld keys (%d per key), seeded in %.1f s; server up in %.0f ms\n",
              static_cast<long long>(stats->records), static_cast<long long>(stats->keys), per_key, seed_s, start_ms);
  // The first page right after the server started, before anything warmed SQLite's page cache.
  Timing cold = timeGet(**conn, "/v1/kernels?limit=50", token, 1);
  const int reps = 15;
  Timing anchor = timeGet(**conn, "/v1/records?limit=50", token, reps);
  Timing lookup = timeGet(**conn, "/v1/best/" + key_id, token, reps);
  const int64_t deep = std::max<int64_t>(0, stats->keys - 50);
  struct Row {
    std::string what, path;
  };
  const std::vector<Row> rows = {
      {"overview, first page (newest first)", "/v1/kernels?limit=50"},
      {"overview, by kernel", "/v1/kernels?limit=50&order=kernel"},
      {"overview, target + label filter", "/v1/kernels?limit=50&target=sm_90a&label=measured"},
      {"overview, search 'gemm bf16 1024'", "/v1/kernels?limit=50&q=gemm%20bf16%201024"},
      {"overview, last page (offset " + std::to_string(deep) + ")", "/v1/kernels?limit=50&offset=" + std::to_string(deep)},
      {"one kernel's summary", "/v1/kernels/" + key_id},
  };
  std::printf("\n%-44s %10s %10s %14s\n", "request", "median ms", "max ms", "vs records p.1");
  std::printf("%-44s %10.2f %10.2f %14s\n", "anchor: GET /v1/records?limit=50", anchor.median, anchor.max, "1.00x");
  std::printf("%-44s %10.2f %10.2f %13.2fx\n", "anchor: GET /v1/best/{key_id}", lookup.median, lookup.max,
              lookup.median / anchor.median);
  std::printf("%-44s %10.2f %10s %13.2fx\n", "overview, first page, cold (first request)", cold.median, "-",
              cold.median / anchor.median);
  double first_warm = 0;
  for (const Row& r : rows) {
    Timing t = timeGet(**conn, r.path, token, reps);
    if (t.status != 200) std::printf("  (%s answered %d)\n", r.path.c_str(), t.status);
    if (first_warm == 0) first_warm = t.median;
    std::printf("%-44s %10.2f %10.2f %13.2fx\n", r.what.c_str(), t.median, t.max, t.median / anchor.median);
  }
  std::printf("\nfirst page of the overview: %.0f ms cold, %.0f ms warm (limit 1000 ms: %s)\n", cold.median, first_warm,
              std::max(cold.median, first_warm) < 1000 ? "met" : "NOT met");
  (*server)->stop();
  (*server)->wait();
  if (argc > 4 && std::string(argv[4]) == "keep") std::printf("store kept: %s\n", db.c_str());
  else
    for (const char* ext : {"", "-wal", "-shm"}) std::filesystem::remove(db + ext);
  return 0;
}
