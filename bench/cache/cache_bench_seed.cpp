// Owns the data of the cache load benchmarks: fills a Tessera store (any engine: a SQLite file or
// a postgresql:// URL, opened through cache::openStore) and optionally the anchor's rec table with
// the same N records (the anchor's body is the record's JSON, so both answer with the same bytes),
// writes the key ids, one per line, for the wrk lookup script, and reports the store's own size
// (StoreStats::db_bytes) before and after, so benches can state bytes per record.
// Usage: cache_bench_seed RECORDS STORE ANCHOR_DB|- KEYS_FILE|-
// The records depend on RECORDS only (fixed seed), so two stores seeded alike hold the same keys.
#include <sqlite3.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "store/engine.h"
#include "store/record.h"
#include "store/store.h"
#include "support/hash.h"

using namespace tessera::cache;

namespace {

Record makeRecord(int i, std::mt19937_64& rng) {
  static const char* families[] = {"gemm", "elementwise", "attention"};
  static const char* dtypes[] = {"f32", "f16", "bf16"};
  static const char* layouts[] = {"row", "tA", "tB"};
  static const char* targets[][2] = {{"host", "x86-64-v4"}, {"sm_90a", "sm_90a"}, {"gfx942", "gfx942"}};
  static const int64_t units[] = {2, 132, 304};
  Record r;
  const int f = i % 3, t = (i / 3) % 3;
  r.key.family = families[f];
  r.key.workload = tessera::sha256Hex("workload-" + std::to_string(i)).substr(0, 16);
  std::uniform_int_distribution<int> pow2(4, 13);
  if (f == 0) r.key.shape = {int64_t{1} << pow2(rng), int64_t{1} << pow2(rng), int64_t{1} << pow2(rng)};
  else if (f == 1) r.key.shape = {int64_t{1} << pow2(rng), int64_t{1} << pow2(rng)};
  else r.key.shape = {1 + i % 8, 8, int64_t{1} << pow2(rng), 64};
  r.key.dtype = dtypes[(i / 9) % 3];
  r.key.layout = f == 0 ? layouts[(i / 27) % 3] : "row";
  r.key.target = targets[t][0];
  r.key.arch = targets[t][1];
  r.key.units = units[t];
  r.provenance = {"0.1.0", "22.1.0", t == 1 ? "12.8" : "", "bench-cpu", "bench-host", "bench", "2025-01-31T12:00:00Z"};
  std::uniform_int_distribution<int> tile(2, 8);
  r.config = "{\"tile_m\":" + std::to_string(1 << tile(rng)) + ",\"tile_n\":" + std::to_string(1 << tile(rng)) +
             ",\"tile_k\":" + std::to_string(1 << tile(rng)) + ",\"vector\":16,\"unroll\":4,\"stages\":2}";
  r.status = RecordStatus::Ok;
  std::uniform_real_distribution<double> us(5.0, 5000.0);
  r.n = 20;
  r.median_us = us(rng);
  r.p20_us = r.median_us * 0.98;
  r.p80_us = r.median_us * 1.03;
  r.gflops = 123.4;
  r.peak_fraction = 0.61;
  r.max_abs_err = 1e-6;
  r.trials = 256;
  r.tuning_seconds = 30.5;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: cache_bench_seed RECORDS STORE ANCHOR_DB|- KEYS_FILE|-\n");
    return 2;
  }
  const int n = std::atoi(argv[1]);
  const std::string anchor_path = argv[3], keys_path = argv[4];
  EngineOptions eo;
  eo.synchronous_full = false;  // seeding speed; the server reopens with its own setting
  auto store = openStore(argv[2], eo);
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.error().message.c_str());
    return 1;
  }
  auto before = (*store)->stats();
  if (!before.ok()) {
    std::fprintf(stderr, "%s\n", before.error().message.c_str());
    return 1;
  }
  sqlite3* anchor = nullptr;
  sqlite3_stmt* ins = nullptr;
  if (anchor_path != "-") {
    sqlite3_open(anchor_path.c_str(), &anchor);
    sqlite3_exec(anchor,
                 "PRAGMA journal_mode=WAL; CREATE TABLE IF NOT EXISTS rec(key_id TEXT PRIMARY KEY, body TEXT);"
                 "BEGIN;",
                 nullptr, nullptr, nullptr);
    sqlite3_prepare_v2(anchor, "insert or replace into rec values(?, ?)", -1, &ins, nullptr);
  }
  std::ofstream keys;
  if (keys_path != "-") keys.open(keys_path);
  std::mt19937_64 rng(42);
  std::vector<Record> batch;
  size_t body_bytes = 0;
  for (int i = 0; i < n; ++i) {
    Record r = makeRecord(i, rng);
    if (auto s = finalizeRecord(r); !s.ok()) {
      std::fprintf(stderr, "bad record: %s\n", s.error().message.c_str());
      return 1;
    }
    batch.push_back(std::move(r));
    if (batch.size() == 1000 || i + 1 == n) {
      auto res = (*store)->put(batch);
      if (!res.ok()) {
        std::fprintf(stderr, "%s\n", res.error().message.c_str());
        return 1;
      }
      for (size_t k = 0; k < batch.size(); ++k) {
        Record stored = batch[k];
        stored.id = (*res)[k].id;
        const std::string body = encodeRecord(stored);
        body_bytes += body.size();
        if (ins) {
          sqlite3_reset(ins);
          sqlite3_bind_text(ins, 1, stored.key_id.c_str(), -1, SQLITE_TRANSIENT);
          sqlite3_bind_text(ins, 2, body.c_str(), static_cast<int>(body.size()), SQLITE_TRANSIENT);
          sqlite3_step(ins);
        }
        if (keys.is_open()) keys << stored.key_id << "\n";
      }
      batch.clear();
    }
  }
  if (anchor) {
    sqlite3_finalize(ins);
    sqlite3_exec(anchor, "COMMIT;", nullptr, nullptr, nullptr);
    sqlite3_close(anchor);
  }
  auto after = (*store)->stats();
  if (!after.ok()) {
    std::fprintf(stderr, "%s\n", after.error().message.c_str());
    return 1;
  }
  std::printf("seeded %d records (mean JSON %zu bytes)\n", n, n ? body_bytes / static_cast<size_t>(n) : 0);
  // One line for scripts: the store's size as its engine reports it (SQLite: file + WAL).
  std::printf("store_bytes_before=%lld store_bytes_after=%lld records_after=%lld\n",
              static_cast<long long>(before->db_bytes), static_cast<long long>(after->db_bytes),
              static_cast<long long>(after->records));
  return 0;
}
