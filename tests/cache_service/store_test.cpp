// Tests the RecordStore rules on every implementation (SQLite on a real file, PostgreSQL on the
// tests' throw-away server, in-memory): best-wins outcomes, idempotence, staleness, listing,
// nearest shapes, export/import, the outbox; plus the SQLite store's backup and winners-index
// coherence (its file and older layouts: store_file_test.cpp; PostgreSQL's own: pg_store_test.cpp).
#include <gtest/gtest.h>

#include <sqlite3.h>

#include <atomic>
#include <cmath>
#include <fstream>
#include <map>
#include <thread>

#include "store/engine.h"
#include "store/kernel_text.h"
#include "store/outbox.h"
#include "store/schema.h"
#include "store/store.h"
#include "support/hash.h"
#include "store/tokens.h"
#include "tests/cache_service/test_util.h"

namespace tessera::cache {
namespace {

using test::makeRecord;
using test::RecordSpec;
using test::TempDir;

struct StoreKind {
  const char* name;
  bool sqlite;
  bool index;
  bool postgres = false;
};

void PrintTo(const StoreKind& k, std::ostream* os) { *os << k.name; }

class StoreTest : public ::testing::TestWithParam<StoreKind> {
 protected:
  std::unique_ptr<RecordStore> open(const std::string& name = "store.db") {
    if (GetParam().postgres) return openPostgres(name, {});
    if (!GetParam().sqlite) return makeMemoryStore();
    SqliteStoreOptions o;
    o.synchronous_full = false;
    o.index_winners = GetParam().index;
    auto s = openSqliteStore(dir_.file(name), o);
    EXPECT_TRUE(s.ok()) << s.error().message;
    return std::move(*s);
  }
  std::unique_ptr<RecordStore> openWith(const Provenance& current, const std::string& name = "current.db") {
    if (GetParam().postgres) return openPostgres(name, current);
    if (!GetParam().sqlite) return makeMemoryStore(current);
    SqliteStoreOptions o;
    o.synchronous_full = false;
    o.index_winners = GetParam().index;
    o.current = current;
    auto s = openSqliteStore(dir_.file(name), o);
    EXPECT_TRUE(s.ok()) << s.error().message;
    return std::move(*s);
  }
  // Each name is its own fresh database, as each SQLite name is its own file.
  std::unique_ptr<RecordStore> openPostgres(const std::string& name, const Provenance& current) {
    auto& db = pg_[name];
    if (!db) db = std::make_unique<test::PgDatabase>();
    EngineOptions o;
    o.synchronous_full = false;
    o.current = current;
    auto s = openStore(db->url(), o);
    EXPECT_TRUE(s.ok()) << s.error().message;
    return s.ok() ? std::move(*s) : makeMemoryStore();
  }
  static PutResult put(RecordStore& s, const Record& r, PutOptions o = {}) {
    auto res = s.putOne(r, o);
    EXPECT_TRUE(res.ok()) << res.error().message;
    return res.ok() ? *res : PutResult{};
  }
  static ServedRecordPtr best(RecordStore& s, const std::string& key_id) {
    auto b = s.best(key_id);
    EXPECT_TRUE(b.ok());
    return b.ok() ? *b : nullptr;
  }
  TempDir dir_;
  std::map<std::string, std::unique_ptr<test::PgDatabase>> pg_;
};

// Issue 30: records keep the GPU driver and runtime versions they were measured with, on every
// engine, through export; a record without them keeps the JSON (and so the fingerprint: a
// re-import stays a duplicate) it always had; hostile values are refused like any provenance.
TEST_P(StoreTest, RecordsKeepTheDriverAndRuntimeVersions) {
  auto s = open();
  Record gpu = makeRecord({.key = 1, .median_us = 100});
  gpu.provenance.driver_version = "550.54.15";
  gpu.provenance.runtime_version = "12.4";
  gpu.key_id = keyIdOf(gpu.key);
  Record plain = makeRecord({.key = 2, .median_us = 100});
  ASSERT_FALSE(put(*s, gpu).duplicate);
  ASSERT_FALSE(put(*s, plain).duplicate);
  auto back = s->exportSince(0, 10);
  ASSERT_TRUE(back.ok()) << back.error().message;
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0].provenance.driver_version, "550.54.15");
  EXPECT_EQ((*back)[0].provenance.runtime_version, "12.4");
  EXPECT_EQ((*back)[1].provenance.driver_version, "");
  const std::string json = encodeRecord((*back)[1]);
  EXPECT_EQ(json.find("driver_version"), std::string::npos) << json;
  EXPECT_EQ(json.find("runtime_version"), std::string::npos) << json;
  auto decoded = decodeRecord(encodeRecord((*back)[0]));
  ASSERT_TRUE(decoded.ok()) << decoded.error().message;
  EXPECT_EQ(decoded->provenance.runtime_version, "12.4");
  EXPECT_TRUE(put(*s, (*back)[0]).duplicate);  // the same record again, versions and all
  EXPECT_TRUE(put(*s, plain).duplicate);
  Record hostile = gpu;
  hostile.provenance.driver_version = std::string(300, 'x');
  EXPECT_FALSE(decodeRecord(encodeRecord(hostile)).ok());
  hostile.provenance.driver_version = "550\n54";
  EXPECT_FALSE(decodeRecord(encodeRecord(hostile)).ok());
}

TEST_P(StoreTest, BestWinsOutcomes) {
  auto s = open();
  Record first = makeRecord({.key = 1, .median_us = 100});
  EXPECT_EQ(best(*s, first.key_id), nullptr);
  PutResult a = put(*s, first);
  EXPECT_EQ(a.outcome, PutOutcome::Inserted);
  EXPECT_GT(a.id, 0);
  EXPECT_EQ(a.key_id, first.key_id);
  EXPECT_EQ(put(*s, makeRecord({.key = 1, .median_us = 150})).outcome, PutOutcome::Kept);
  EXPECT_EQ(put(*s, makeRecord({.key = 1, .median_us = 100, .host = "tie"})).outcome, PutOutcome::Kept);
  PutResult better = put(*s, makeRecord({.key = 1, .median_us = 80}));
  EXPECT_EQ(better.outcome, PutOutcome::Improved);
  EXPECT_EQ(put(*s, makeRecord({.key = 1, .status = RecordStatus::Crash})).outcome, PutOutcome::Kept);
  auto w = best(*s, first.key_id);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->record.id, better.id);
  EXPECT_EQ(w->record.median_us, 80);
  EXPECT_EQ(w->json, encodeRecord(w->record));
  auto st = s->stats();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->records, 5);  // every measured candidate is kept
  EXPECT_EQ(st->keys, 1);
  EXPECT_EQ(st->winners, 1);
}

// A tuning run's re-measured winner outranks single measurements whatever their medians (a lucky
// sample among them must not be what is served), and only a faster re-measured record replaces it.
TEST_P(StoreTest, ReMeasuredWinnerOutranksSingleMeasurements) {
  auto s = open();
  EXPECT_EQ(put(*s, makeRecord({.key = 11, .median_us = 90, .config = R"({"tile":16})"})).outcome,
            PutOutcome::Inserted);
  PutResult confirmed = put(*s, makeRecord({.key = 11, .median_us = 100, .config = R"({"tile":32})", .remeasured = true}));
  EXPECT_EQ(confirmed.outcome, PutOutcome::Improved);
  EXPECT_EQ(put(*s, makeRecord({.key = 11, .median_us = 50, .config = R"({"tile":8})"})).outcome, PutOutcome::Kept);
  EXPECT_EQ(put(*s, makeRecord({.key = 11, .median_us = 120, .remeasured = true})).outcome, PutOutcome::Kept);
  auto w = best(*s, confirmed.key_id);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->record.id, confirmed.id);
  EXPECT_TRUE(w->record.remeasured);
  EXPECT_EQ(w->record.config, R"({"tile":32})");
  PutResult faster = put(*s, makeRecord({.key = 11, .median_us = 95, .host = "b", .remeasured = true}));
  EXPECT_EQ(faster.outcome, PutOutcome::Improved);
  EXPECT_EQ(best(*s, confirmed.key_id)->record.id, faster.id);
  // The mark is part of the record: the same numbers without it are another record.
  EXPECT_FALSE(put(*s, makeRecord({.key = 11, .median_us = 95, .host = "b"})).duplicate);
  auto winners = s->list({.key_id = confirmed.key_id, .winners_only = true});
  ASSERT_TRUE(winners.ok());
  ASSERT_EQ(winners->records.size(), 1u);
  EXPECT_TRUE(winners->records[0].remeasured);
}

// The kernel table (kernel_text.h): a text is kept under the hash it has, once; a text that does
// not hash to the workload it is filed under, an oversized one or one with control bytes is
// refused and nothing is kept.
TEST_P(StoreTest, KernelTableKeepsTextsUnderTheirHash) {
  auto s = open();
  const std::string text = "kernel _ : elementwise {\n  in t0: f32[8]\n  out t1: f32[8]\n  t1[v0] = t0[v0] * 2\n}\n";
  const std::string workload = sha256Hex(text);
  auto none = s->kernelText(workload);
  ASSERT_TRUE(none.ok()) << none.error().message;
  EXPECT_FALSE(none->has_value());
  ASSERT_TRUE(s->putKernelText(workload, text).ok());
  ASSERT_TRUE(s->putKernelText(workload, text).ok());  // again: a no-op
  auto back = s->kernelText(workload);
  ASSERT_TRUE(back.ok() && back->has_value());
  EXPECT_EQ(**back, text);
  // Another text under that workload: refused, the kept one unchanged.
  const std::string other = text + " ";
  Status wrong = s->putKernelText(workload, other);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().message.find("does not hash to the key's workload"), std::string::npos) << wrong.error().message;
  EXPECT_EQ(**s->kernelText(workload), text);
  EXPECT_FALSE(s->kernelText(sha256Hex(other))->has_value());
  const std::string huge(kMaxKernelTextBytes + 1, 'x');
  EXPECT_FALSE(s->putKernelText(sha256Hex(huge), huge).ok());
  const std::string binary = std::string("kernel \x01") + '\0';
  EXPECT_FALSE(s->putKernelText(sha256Hex(binary), binary).ok());
  EXPECT_FALSE(s->putKernelText("not-a-hash", text).ok());
}

TEST_P(StoreTest, FailedRecordsNeverWin) {
  auto s = open();
  Record failed = makeRecord({.key = 2, .status = RecordStatus::WrongResult});
  EXPECT_EQ(put(*s, failed).outcome, PutOutcome::Kept);
  EXPECT_EQ(put(*s, makeRecord({.key = 2, .status = RecordStatus::Estimated})).outcome, PutOutcome::Kept);
  EXPECT_EQ(best(*s, failed.key_id), nullptr);
  EXPECT_EQ(put(*s, makeRecord({.key = 2, .median_us = 5000})).outcome, PutOutcome::Inserted);
  auto st = s->stats();
  EXPECT_EQ(st->keys, 1);
  EXPECT_EQ(st->winners, 1);
}

TEST_P(StoreTest, DuplicatesAreIdempotent) {
  auto s = open();
  Record r = makeRecord({.key = 3, .median_us = 50});
  PutResult a = put(*s, r);
  Record again = r;
  again.id = 1234;  // ids from another store do not change identity
  PutResult b = put(*s, again);
  EXPECT_TRUE(b.duplicate);
  EXPECT_EQ(b.id, a.id);
  EXPECT_EQ(b.outcome, PutOutcome::Kept);
  EXPECT_EQ(s->stats()->records, 1);
}

TEST_P(StoreTest, BatchResultsAreInOrder) {
  auto s = open();
  std::vector<Record> batch = {makeRecord({.key = 4, .median_us = 30}), makeRecord({.key = 4, .median_us = 20}),
                               makeRecord({.key = 5, .median_us = 7}), makeRecord({.key = 4, .median_us = 25})};
  auto res = s->put(batch);
  ASSERT_TRUE(res.ok());
  ASSERT_EQ(res->size(), 4u);
  EXPECT_EQ((*res)[0].outcome, PutOutcome::Inserted);
  EXPECT_EQ((*res)[1].outcome, PutOutcome::Improved);
  EXPECT_EQ((*res)[2].outcome, PutOutcome::Inserted);
  EXPECT_EQ((*res)[3].outcome, PutOutcome::Kept);
  EXPECT_EQ(best(*s, batch[0].key_id)->record.median_us, 20);
}

TEST_P(StoreTest, RefusesUnfinalizedRecords) {
  auto s = open();
  Record r = makeRecord({});
  r.key_id.clear();
  EXPECT_FALSE(s->putOne(r).ok());
  r = makeRecord({});
  r.key.units = 99;  // key changed after finalize: key_id no longer matches
  EXPECT_FALSE(s->putOne(r).ok());
  EXPECT_EQ(s->stats()->records, 0);
}

// Staleness is per record, against the store's current toolchain: what other records of the key
// say never matters. (Before issue 15 the newest record by created_at defined the key's toolchain,
// so one record dated 9999-12-31 with tessera_version "999" made every record of its key stale.)
TEST_P(StoreTest, StaleIsPerRecordAgainstTheCurrentToolchain) {
  Provenance current;
  current.llvm_version = "22.1.0";
  auto s = openWith(current);
  Record old_fast = makeRecord({.key = 6, .median_us = 10, .created_at = "2025-01-01T00:00:00Z", .llvm_version = "21.0.0"});
  Record fresh = makeRecord({.key = 6, .median_us = 12, .created_at = "2025-02-01T00:00:00Z", .llvm_version = "22.1.0"});
  put(*s, old_fast);
  put(*s, fresh);
  auto w = best(*s, old_fast.key_id);
  EXPECT_EQ(w->record.median_us, 10);  // the fastest stays the winner, flagged
  EXPECT_TRUE(w->record.stale);
  EXPECT_EQ(s->stats()->stale_winners, 1);
  // The future-dated poison: a record of another toolchain, dated 9999, changes nothing for the
  // others, and honest records posted after it are fresh.
  Record poison = makeRecord({.key = 6, .median_us = 500, .status = RecordStatus::Timeout,
                              .created_at = "9999-12-31T23:59:59Z", .llvm_version = "999"});
  put(*s, poison);
  Record later = makeRecord({.key = 6, .median_us = 11, .created_at = "2025-03-01T00:00:00Z", .llvm_version = "22.1.0"});
  put(*s, later);
  auto page = s->list({.key_id = old_fast.key_id});
  ASSERT_EQ(page->records.size(), 4u);
  EXPECT_TRUE(page->records[0].stale);   // 21.0.0
  EXPECT_FALSE(page->records[1].stale);  // 22.1.0
  EXPECT_TRUE(page->records[2].stale);   // 999
  EXPECT_FALSE(page->records[3].stale);  // 22.1.0, after the poison
  // What is fresh for an asker on 22.1.0: the best record of its toolchain.
  Provenance asker;
  asker.llvm_version = "22.1.0";
  auto f = s->bestMatching(old_fast.key_id, asker);
  ASSERT_TRUE(f.ok() && *f);
  EXPECT_EQ((*f)->record.median_us, 11);
  EXPECT_FALSE((*f)->record.stale);
  asker.llvm_version = "23";
  EXPECT_EQ(*s->bestMatching(old_fast.key_id, asker), nullptr);
  // Without a current toolchain nothing is stale.
  auto plain = open("plain.db");
  put(*plain, old_fast);
  put(*plain, poison);
  EXPECT_FALSE(best(*plain, old_fast.key_id)->record.stale);
}

// Admin actions (issue 15): quarantine, release and delete by writer, key, id or time received;
// the winners of the affected keys are recomputed, quarantined records are neither served nor
// listed unless asked, and an empty selector touches nothing.
TEST_P(StoreTest, QuarantineAndDeleteRecomputeWinners) {
  auto s = open();
  Record honest = makeRecord({.key = 20, .median_us = 30});
  Record honest2 = makeRecord({.key = 21, .median_us = 40});
  Record junk = makeRecord({.key = 20, .median_us = 3, .config = R"({"MC":16})"});
  Record junk2 = makeRecord({.key = 22, .median_us = 4});
  put(*s, honest, {.writer = "alice"});
  put(*s, honest2, {.writer = "alice"});
  put(*s, junk, {.writer = "mallory"});
  put(*s, junk2, {.writer = "mallory"});
  EXPECT_EQ(best(*s, honest.key_id)->record.median_us, 3);
  EXPECT_EQ(best(*s, honest.key_id)->record.writer, "mallory");
  EXPECT_EQ(*s->administer({}, AdminAction::Delete), 0);  // an empty selector selects nothing
  EXPECT_EQ(*s->administer({.writer = "mallory"}, AdminAction::Count), 2);

  EXPECT_EQ(*s->administer({.writer = "mallory"}, AdminAction::Quarantine), 2);
  EXPECT_EQ(*s->administer({.writer = "mallory"}, AdminAction::Quarantine), 0);  // already
  auto w = best(*s, honest.key_id);
  EXPECT_EQ(w->record.median_us, 30);
  EXPECT_EQ(w->record.writer, "alice");
  EXPECT_EQ(best(*s, junk2.key_id), nullptr);
  EXPECT_EQ(s->list({})->records.size(), 2u);
  EXPECT_EQ(s->list({.quarantine = QuarantineFilter::Only})->records.size(), 2u);
  EXPECT_TRUE(s->list({.quarantine = QuarantineFilter::Only})->records[0].quarantined);
  EXPECT_EQ(s->exportSince(0, 100)->size(), 2u);
  EXPECT_EQ(s->stats()->quarantined, 2);
  // A quarantined key's first new winner is "inserted" again.
  EXPECT_EQ(put(*s, makeRecord({.key = 22, .median_us = 50})).outcome, PutOutcome::Inserted);

  EXPECT_EQ(*s->administer({.key_id = junk.key_id}, AdminAction::Release), 1);
  EXPECT_EQ(best(*s, honest.key_id)->record.median_us, 3);
  EXPECT_EQ(*s->administer({.ids = {best(*s, honest.key_id)->record.id}}, AdminAction::Delete), 1);
  EXPECT_EQ(best(*s, honest.key_id)->record.median_us, 30);
  // Time range: everything was received now.
  EXPECT_EQ(*s->administer({.since = "2000-01-01T00:00:00Z", .until = "2000-01-02T00:00:00Z"}, AdminAction::Count), 0);
  EXPECT_EQ(*s->administer({.since = "2000-01-01T00:00:00Z"}, AdminAction::Count), 4);
  EXPECT_EQ(*s->administer({.writer = "mallory"}, AdminAction::Delete), 1);  // junk2, still quarantined
  EXPECT_EQ(s->stats()->quarantined, 0);
  EXPECT_EQ(s->list({.writer = "alice"})->records.size(), 2u);
}

// The writer comes from the store's caller (the authenticated token), never from the record, and
// a re-measured claim from an untrusted writer needs an earlier measurement of the same config.
TEST_P(StoreTest, WriterAndRemeasuredAreTheStoresToDecide) {
  auto s = open();
  Record claimed = makeRecord({.key = 23, .median_us = 500, .config = R"({"MC":8})", .remeasured = true});
  claimed.writer = "admin";  // in the body: ignored
  PutResult p = put(*s, claimed, {.writer = "mallory", .trusted = false});
  EXPECT_FALSE(p.remeasured);
  put(*s, makeRecord({.key = 23, .median_us = 100, .config = R"({"MC":16})"}), {.writer = "alice", .trusted = false});
  auto w = best(*s, claimed.key_id);
  EXPECT_EQ(w->record.median_us, 100);  // the bare claim did not outrank a faster measurement
  EXPECT_FALSE(s->list({.key_id = claimed.key_id})->records[0].remeasured);
  EXPECT_EQ(s->list({.key_id = claimed.key_id})->records[0].writer, "mallory");
  // A run's re-measurement of a config it measured before stands, but among claims it counts for
  // nothing (issue 47: one identity re-measuring its own claim is still its word): the faster claim
  // stays the winner. Among reproduced records it ranks first (ReMeasuredWinnerOutranks...).
  PutResult confirmed = put(*s, makeRecord({.key = 23, .median_us = 110, .config = R"({"MC":16})", .remeasured = true}),
                            {.writer = "alice", .trusted = false});
  EXPECT_TRUE(confirmed.remeasured);
  EXPECT_EQ(confirmed.outcome, PutOutcome::Kept);
  EXPECT_EQ(best(*s, claimed.key_id)->record.median_us, 100);
  // A retried submission is a duplicate even though its claim was not taken.
  EXPECT_TRUE(put(*s, claimed, {.writer = "mallory", .trusted = false}).duplicate);
  // A local store trusts its own tuner.
  auto local = open("local.db");
  EXPECT_TRUE(put(*local, claimed).remeasured);
}

TEST_P(StoreTest, ListFiltersAndPages) {
  auto s = open();
  for (int i = 0; i < 25; ++i) put(*s, makeRecord({.key = i % 5, .median_us = 100.0 + i}));
  put(*s, makeRecord({.key = 0, .status = RecordStatus::Timeout}));
  ListQuery q;
  q.limit = 10;
  std::vector<int64_t> ids;
  for (;;) {
    auto page = s->list(q);
    ASSERT_TRUE(page.ok());
    for (const auto& r : page->records) ids.push_back(r.id);
    if (!page->next_after) break;
    EXPECT_EQ(page->records.size(), 10u);
    q.after_id = page->next_after;
  }
  ASSERT_EQ(ids.size(), 26u);
  EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
  ListQuery winners;
  winners.winners_only = true;
  auto w = s->list(winners);
  EXPECT_EQ(w->records.size(), 5u);
  for (const auto& r : w->records) EXPECT_LT(r.median_us, 105);
  ListQuery timeouts;
  timeouts.status = "timeout";
  EXPECT_EQ(s->list(timeouts)->records.size(), 1u);
  ListQuery one_key;
  one_key.key_id = makeRecord({.key = 3}).key_id;
  one_key.family = "gemm";
  one_key.units = 2;
  EXPECT_EQ(s->list(one_key)->records.size(), 5u);
  one_key.units = 3;
  EXPECT_EQ(s->list(one_key)->records.size(), 0u);
  ListQuery other;
  other.target = "sm_90a";
  EXPECT_TRUE(s->list(other)->records.empty());
}

TEST_P(StoreTest, NearestRanksByShapeDistance) {
  auto s = open();
  auto mk = [](std::vector<int64_t> shape, double us, std::string layout = "row", std::string dtype = "f32") {
    Record r = makeRecord({.median_us = us});
    r.key.shape = std::move(shape);
    r.key.layout = std::move(layout);
    r.key.dtype = std::move(dtype);
    EXPECT_TRUE(finalizeRecord(r).ok());
    return r;
  };
  put(*s, mk({1024, 1024, 1024}, 50));
  put(*s, mk({512, 512, 512}, 20));
  put(*s, mk({2048, 1024, 1024}, 90));
  put(*s, mk({1024, 1024, 1024}, 40, "tA"));     // same shape, other layout
  put(*s, mk({1000, 1000, 1000}, 1, "row", "f16"));  // other dtype: excluded
  put(*s, mk({1024, 1024}, 1));                       // other rank: excluded
  HardKey want = mk({1024, 1024, 900}, 1).key;
  auto near = s->nearest(want, 3);
  ASSERT_TRUE(near.ok());
  ASSERT_EQ(near->size(), 3u);
  EXPECT_EQ((*near)[0].record.key.layout, "row");  // same distance: the asked layout first
  EXPECT_EQ((*near)[0].record.key.shape, (std::vector<int64_t>{1024, 1024, 1024}));
  EXPECT_NEAR((*near)[0].distance, std::log(1024.0 / 900.0), 1e-12);
  EXPECT_EQ((*near)[1].record.key.layout, "tA");
  EXPECT_EQ((*near)[2].record.key.shape, (std::vector<int64_t>{2048, 1024, 1024}));
  HardKey gpu = want;
  gpu.target = "sm_90a";
  EXPECT_TRUE(s->nearest(gpu, 3)->empty());
}

TEST_P(StoreTest, ExportImportIntoEmptyStoreGivesIdenticalWinners) {
  auto src = open("src.db");
  std::vector<std::string> keys;
  for (int i = 0; i < 300; ++i) {
    RecordSpec spec{.key = i % 17, .median_us = 10.0 + (i * 37) % 101, .config = "{\"i\":" + std::to_string(i) + "}"};
    if (i % 7 == 0) spec.status = RecordStatus::CompileError;
    if (i % 11 == 0) spec.llvm_version = "21.0.0", spec.created_at = "2024-06-01T00:00:00Z";
    put(*src, makeRecord(spec));
  }
  for (int i = 0; i < 17; ++i) keys.push_back(makeRecord({.key = i}).key_id);
  // Export in pages via the cursor, import into an empty store (SQLite and in-memory).
  std::vector<Record> exported;
  int64_t since = 0;
  for (;;) {
    auto page = src->exportSince(since, 64);
    ASSERT_TRUE(page.ok());
    if (page->empty()) break;
    since = page->back().id;
    for (auto& r : *page) {
      auto line = decodeRecord(encodeRecord(r));  // through the wire form, like /v1/import
      ASSERT_TRUE(line.ok()) << line.error().message;
      exported.push_back(std::move(*line));
    }
  }
  ASSERT_EQ(exported.size(), 300u);
  std::vector<std::unique_ptr<RecordStore>> targets;
  targets.push_back(open("dst.db"));
  targets.push_back(makeMemoryStore());
  for (auto& dst : targets) {
    ASSERT_TRUE(dst->put(exported).ok());
    auto again = dst->put(exported);  // idempotent
    ASSERT_TRUE(again.ok());
    for (const auto& r : *again) EXPECT_TRUE(r.duplicate);
    for (const auto& k : keys) {
      auto a = best(*src, k), b = best(*dst, k);
      ASSERT_EQ(a == nullptr, b == nullptr) << k;
      if (!a) continue;
      EXPECT_EQ(fingerprint(a->record), fingerprint(b->record));
      EXPECT_EQ(a->record.stale, b->record.stale);
    }
    EXPECT_EQ(dst->stats()->records, 300);
  }
}

TEST_P(StoreTest, OutboxHoldsUnpushedRecords) {
  auto s = open();
  put(*s, makeRecord({.key = 1}));  // not an outbox record
  std::vector<Record> mine = {makeRecord({.key = 2}), makeRecord({.key = 3}), makeRecord({.key = 4})};
  ASSERT_TRUE(s->put(mine, {.outbox = true}).ok());
  auto box = s->outbox()->pending(10);
  ASSERT_TRUE(box.ok());
  ASSERT_EQ(box->size(), 3u);
  EXPECT_EQ(s->stats()->outbox, 3);
  std::vector<int64_t> ids = {(*box)[0].id, (*box)[1].id};
  ASSERT_TRUE(s->outbox()->markPushed(ids).ok());
  box = s->outbox()->pending(10);
  ASSERT_EQ(box->size(), 1u);
  EXPECT_EQ(fingerprint((*box)[0]), fingerprint(mine[2]));
}

std::vector<StoreKind> storeKinds() {
  std::vector<StoreKind> kinds = {StoreKind{"memory", false, false}, StoreKind{"sqlite", true, false},
                                  StoreKind{"sqlite_indexed", true, true}};
  if (test::postgresBuiltIn()) kinds.push_back(StoreKind{"postgres", false, false, true});
  return kinds;
}

INSTANTIATE_TEST_SUITE_P(Kinds, StoreTest, ::testing::ValuesIn(storeKinds()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(SqliteStore, RefusesForeignAndNewerDatabases) {
  TempDir dir;
  const std::string other = dir.file("other.db");
  {
    sqlite3* db = nullptr;
    sqlite3_open(other.c_str(), &db);
    sqlite3_exec(db, "CREATE TABLE t(x)", nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
  auto s = openSqliteStore(other);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("not a Tessera database"), std::string::npos);
  EXPECT_EQ(test::queryRows(other, "SELECT count(*) FROM sqlite_master")[0][0], "1");  // untouched

  const std::string newer = dir.file("newer.db");
  ASSERT_TRUE(openSqliteStore(newer).ok());
  {
    sqlite3* db = nullptr;
    sqlite3_open(newer.c_str(), &db);
    sqlite3_exec(db, "PRAGMA user_version=99", nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
  auto n = openSqliteStore(newer);
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.error().message.find("newer"), std::string::npos);

  const std::string junk = dir.file("junk.db");
  std::ofstream(junk) << "this is not a database, just text that is long enough to look like a header";
  EXPECT_FALSE(openSqliteStore(junk).ok());
}

TEST(SqliteStore, OnlineBackupIsAConsistentCopy) {
  TempDir dir;
  auto s = openSqliteStore(dir.file("live.db"), {.synchronous_full = false});
  ASSERT_TRUE(s.ok());
  for (int i = 0; i < 50; ++i) ASSERT_TRUE((*s)->putOne(makeRecord({.key = i % 10, .median_us = 100.0 - i})).ok());
  // Writers keep going while the backup runs.
  std::thread writer([&] {
    for (int i = 0; i < 50; ++i) (void)(*s)->putOne(makeRecord({.key = 20 + i, .median_us = 5}));
  });
  Status b = (*s)->backup(dir.file("copy.db"));
  writer.join();
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ(test::integrityCheck(dir.file("copy.db")), "ok");
  auto copy = openSqliteStore(dir.file("copy.db"));
  ASSERT_TRUE(copy.ok());
  for (int k = 0; k < 10; ++k) {
    auto a = (*s)->best(makeRecord({.key = k}).key_id);
    auto c = (*copy)->best(makeRecord({.key = k}).key_id);
    ASSERT_TRUE(*a && *c);
    EXPECT_EQ(fingerprint((*a)->record), fingerprint((*c)->record));
  }
  EXPECT_GE((*copy)->stats()->records, 50);
  Status again = (*s)->backup(dir.file("copy.db"));
  EXPECT_FALSE(again.ok());  // never overwrites
}

TEST(SqliteStore, WinnersIndexNoticesWritesByOtherProcesses) {
  TempDir dir;
  const std::string path = dir.file("shared.db");
  auto server = openSqliteStore(path, {.synchronous_full = false, .index_winners = true});
  auto other = openSqliteStore(path, {.synchronous_full = false});
  ASSERT_TRUE(server.ok() && other.ok());
  Record r = makeRecord({.key = 1, .median_us = 10});
  ASSERT_TRUE((*server)->putOne(makeRecord({.key = 1, .median_us = 20})).ok());
  ASSERT_TRUE((*other)->putOne(r).ok());  // behind the index's back
  // The other connection's opening commit (its schema check) was noticed at the server's write:
  // lookups read the file since, so this one is already fresh.
  EXPECT_EQ((**(*server)->best(r.key_id)).record.median_us, 10);
  auto refreshed = (*server)->refreshIfChangedExternally();
  ASSERT_TRUE(refreshed.ok());
  EXPECT_TRUE(*refreshed);
  EXPECT_EQ((**(*server)->best(r.key_id)).record.median_us, 10);
  EXPECT_FALSE(*(*server)->refreshIfChangedExternally());
  // The server's own next write also notices a foreign write first.
  ASSERT_TRUE((*other)->putOne(makeRecord({.key = 2, .median_us = 3})).ok());
  ASSERT_TRUE((*server)->putOne(makeRecord({.key = 3, .median_us = 4})).ok());
  auto two = (*server)->best(makeRecord({.key = 2}).key_id);
  ASSERT_TRUE(two.ok() && *two);
}

// Two replicas on one file writing in turn: each replica reads lookups from the file while the other
// keeps committing (no whole-index reload per foreign commit, which stalled writes to a few per
// second), sees the other's winners at once, and reloads its index once the other is quiet.
TEST(SqliteStore, AnotherWritersCommitsAreReadThroughUntilItIsQuiet) {
  TempDir dir;
  const std::string path = dir.file("shared.db");
  auto server = openSqliteStore(path, {.synchronous_full = false, .index_winners = true});
  auto other = openSqliteStore(path, {.synchronous_full = false, .index_winners = true});
  ASSERT_TRUE(server.ok() && other.ok());
  Record r = makeRecord({.key = 1, .median_us = 20});
  ASSERT_TRUE((*other)->putOne(r).ok());
  ASSERT_TRUE((*server)->putOne(makeRecord({.key = 2, .median_us = 5})).ok());  // notices the foreign commit
  for (int i = 0; i < 5; ++i) {
    // Each commit of one is visible to the other's next lookup, without a refresh.
    ASSERT_TRUE((*other)->putOne(makeRecord({.key = 1, .median_us = 19.0 - i})).ok());
    EXPECT_EQ((**(*server)->best(r.key_id)).record.median_us, 19.0 - i);
    ASSERT_TRUE((*server)->putOne(makeRecord({.key = 3, .median_us = 9.0 - i})).ok());
    EXPECT_EQ((**(*other)->best(makeRecord({.key = 3}).key_id)).record.median_us, 9.0 - i);
  }
  EXPECT_FALSE(*(*server)->refreshIfChangedExternally());  // the other was busy a moment ago
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_TRUE(*(*server)->refreshIfChangedExternally());  // quiet: the index is reloaded once
  EXPECT_FALSE(*(*server)->refreshIfChangedExternally());
  EXPECT_EQ((**(*server)->best(r.key_id)).record.median_us, 15);
  EXPECT_EQ((**(*server)->best(makeRecord({.key = 3}).key_id)).record.median_us, 5);
}

TEST(SqliteStore, ConcurrentWritersShareCommitsAndLoseNothing) {
  TempDir dir;
  auto s = openSqliteStore(dir.file("c.db"), {.synchronous_full = false, .index_winners = true});
  ASSERT_TRUE(s.ok());
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i)
        if (!(*s)->putOne(makeRecord({.key = i % 13, .median_us = 1.0 + t * 100 + i})).ok()) ++failures;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ((*s)->stats()->records, 800);
  for (int k = 0; k < 13; ++k) {
    auto w = (*s)->best(makeRecord({.key = k}).key_id);
    ASSERT_TRUE(*w);
    EXPECT_EQ((*w)->record.median_us, 1.0 + k);  // thread 0 measured the fastest of each key
  }
  EXPECT_EQ(test::integrityCheck(dir.file("c.db")), "ok");
}

}  // namespace
}  // namespace tessera::cache
