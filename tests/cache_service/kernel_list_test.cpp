// Tests the dashboard's store queries on every engine (in-memory, SQLite with and without the
// winners index, PostgreSQL on the tests' throw-away server): the overview (RecordStore::kernels:
// labels, shown record, counts, filters, search, order, paging), newest-first listing (the audit
// trail) and the job queue's summary (JobQueue::jobList).
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "store/engine.h"
#include "store/jobs.h"
#include "store/store.h"
#include "support/hash.h"
#include "tests/cache_service/test_util.h"

namespace tessera::cache {
namespace {

using test::makeRecord;
using test::RecordSpec;

struct Kind {
  const char* name;
  bool sqlite, index, postgres;
};
void PrintTo(const Kind& k, std::ostream* os) { *os << k.name; }

class KernelListTest : public ::testing::TestWithParam<Kind> {
 protected:
  std::unique_ptr<RecordStore> open() {
    if (GetParam().postgres) {
      pg_ = std::make_unique<test::PgDatabase>();
      EngineOptions o;
      o.synchronous_full = false;
      auto s = openStore(pg_->url(), o);
      EXPECT_TRUE(s.ok()) << s.error().message;
      return std::move(*s);
    }
    if (!GetParam().sqlite) return makeMemoryStore();
    SqliteStoreOptions o;
    o.synchronous_full = false;
    o.index_winners = GetParam().index;
    auto s = openSqliteStore(dir_.file("k.db"), o);
    EXPECT_TRUE(s.ok()) << s.error().message;
    return std::move(*s);
  }
  static std::vector<PutResult> put(RecordStore& s, const std::vector<Record>& rs) {
    auto r = s.put(rs);
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? *r : std::vector<PutResult>{};
  }
  static KernelPage kernels(RecordStore& s, KernelQuery q) {
    auto p = s.kernels(q);
    EXPECT_TRUE(p.ok()) << p.error().message;
    return p.ok() ? *p : KernelPage{};
  }
  static std::map<std::string, KernelRow> byKey(const KernelPage& p) {
    std::map<std::string, KernelRow> m;
    for (const auto& r : p.rows) m[r.key_id] = r;
    return m;
  }
  test::TempDir dir_;
  std::unique_ptr<test::PgDatabase> pg_;
};

Record withKey(Record r, const std::string& family, const std::string& dtype, const std::string& target) {
  r.key.family = family;
  r.key.dtype = dtype;
  r.key.target = target;
  r.key.arch = target == "host" ? "x86-64-v4" : target;
  EXPECT_TRUE(finalizeRecord(r).ok());
  return r;
}

TEST_P(KernelListTest, LabelsShownRecordsAndCounts) {
  auto s = open();
  // Key 0: two ok records (the faster wins) and a failure; key 1: estimates only (the faster is
  // shown); key 2: a failure only; key 3: everything quarantined (listed as such, no record shown).
  put(*s, {makeRecord({.key = 0, .median_us = 50}), makeRecord({.key = 0, .median_us = 40}),
           makeRecord({.key = 0, .status = RecordStatus::CompileError}),
           makeRecord({.key = 1, .median_us = 30, .status = RecordStatus::Estimated}),
           makeRecord({.key = 1, .median_us = 20, .status = RecordStatus::Estimated, .config = "{\"MC\":32}"}),
           makeRecord({.key = 2, .status = RecordStatus::Timeout}), makeRecord({.key = 3, .median_us = 10})});
  ASSERT_TRUE(s->administer({.key_id = keyIdOf(test::keyFor(3))}, AdminAction::Quarantine).ok());
  KernelPage all = kernels(*s, {});
  EXPECT_EQ(all.total, 4);
  auto rows = byKey(all);
  ASSERT_EQ(rows.size(), 4u);
  const KernelRow& k0 = rows.at(keyIdOf(test::keyFor(0)));
  EXPECT_EQ(k0.label, KernelLabel::Measured);
  ASSERT_TRUE(k0.shown);
  EXPECT_DOUBLE_EQ(k0.shown->median_us, 40);
  EXPECT_EQ(k0.records, 3);
  EXPECT_EQ(k0.key, test::keyFor(0));
  const KernelRow& k1 = rows.at(keyIdOf(test::keyFor(1)));
  EXPECT_EQ(k1.label, KernelLabel::Estimated);
  ASSERT_TRUE(k1.shown);
  EXPECT_DOUBLE_EQ(k1.shown->median_us, 20);
  EXPECT_EQ(k1.records, 2);
  const KernelRow& k2 = rows.at(keyIdOf(test::keyFor(2)));
  EXPECT_EQ(k2.label, KernelLabel::Failed);
  EXPECT_FALSE(k2.shown);
  EXPECT_EQ(k2.records, 1);
  const KernelRow& k3 = rows.at(keyIdOf(test::keyFor(3)));
  EXPECT_EQ(k3.label, KernelLabel::Quarantined);
  EXPECT_FALSE(k3.shown);
  EXPECT_EQ(k3.records, 0);
  for (auto [label, want] : {std::pair{KernelLabel::Measured, 0}, {KernelLabel::Estimated, 1}, {KernelLabel::Failed, 2},
                             {KernelLabel::Quarantined, 3}}) {
    KernelPage p = kernels(*s, {.label = label});
    ASSERT_EQ(p.total, 1) << int(label);
    EXPECT_EQ(p.rows.at(0).key_id, keyIdOf(test::keyFor(want)));
  }
  KernelPage one = kernels(*s, {.key_id = keyIdOf(test::keyFor(1))});
  ASSERT_EQ(one.rows.size(), 1u);
  EXPECT_EQ(one.rows[0].label, KernelLabel::Estimated);
  // Released, the key shows its winner again.
  ASSERT_TRUE(s->administer({.key_id = keyIdOf(test::keyFor(3))}, AdminAction::Release).ok());
  KernelPage back = kernels(*s, {.key_id = keyIdOf(test::keyFor(3))});
  ASSERT_EQ(back.rows.size(), 1u);
  EXPECT_EQ(back.rows[0].label, KernelLabel::Measured);
  EXPECT_EQ(back.rows[0].records, 1);
}

TEST_P(KernelListTest, FiltersSearchOrderAndPaging) {
  auto s = open();
  std::vector<Record> rs;
  for (int i = 0; i < 12; ++i) {
    Record r = makeRecord({.key = i, .median_us = 10.0 + i});
    const char* family = i % 3 == 0 ? "gemm" : i % 3 == 1 ? "elementwise" : "attention";
    rs.push_back(withKey(r, family, i % 2 ? "bf16" : "f32", i < 6 ? "host" : "sm_90"));
  }
  // One at a time: ids grow with i, so "recent" lists key 11 first.
  for (const Record& r : rs) put(*s, {r});
  EXPECT_EQ(kernels(*s, {}).total, 12);
  EXPECT_EQ(kernels(*s, {.family = "gemm"}).total, 4);
  EXPECT_EQ(kernels(*s, {.dtype = "bf16"}).total, 6);
  EXPECT_EQ(kernels(*s, {.target = "sm_90"}).total, 6);
  EXPECT_EQ(kernels(*s, {.family = "gemm", .dtype = "f32", .target = "host"}).total, 1);  // i = 0
  // Words: every one must occur, case-insensitively, in "family shape dtype layout target arch units key_id".
  EXPECT_EQ(kernels(*s, {.words = {"sm_90", "bf16"}}).total, 3);
  EXPECT_EQ(kernels(*s, {.words = {"attention", "sm_90"}}).total, 2);
  const std::string id5 = keyIdOf(rs[5].key);
  KernelPage by_id = kernels(*s, {.words = {id5.substr(0, 10)}});
  ASSERT_EQ(by_id.total, 1);
  EXPECT_EQ(by_id.rows[0].key_id, id5);
  EXPECT_EQ(kernels(*s, {.words = {formatShape(rs[7].key.shape)}}).rows.at(0).key_id, keyIdOf(rs[7].key));
  EXPECT_EQ(kernels(*s, {.words = {"%"}}).total, 0);  // plain text, not a LIKE pattern
  EXPECT_EQ(kernels(*s, {.words = {"_"}}).total, 6);  // in "sm_90" only
  EXPECT_EQ(kernels(*s, {.words = {"nothing-like-this"}}).total, 0);
  // Newest record first; pages of 5 cover everything once.
  std::vector<std::string> seen;
  for (int64_t off = 0; off < 12; off += 5) {
    KernelPage p = kernels(*s, {.offset = off, .limit = 5});
    EXPECT_EQ(p.total, 12);
    for (const auto& r : p.rows) seen.push_back(r.key_id);
  }
  ASSERT_EQ(seen.size(), 12u);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(seen[i], keyIdOf(rs[11 - i].key)) << i;
  // A new winner moves its key to the front (newest shown record first).
  put(*s, {withKey(makeRecord({.key = 3, .median_us = 5}), "gemm", "bf16", "host")});
  EXPECT_EQ(kernels(*s, {.limit = 1}).rows.at(0).key_id, keyIdOf(rs[3].key));
  // By kernel: family, dtype, target, arch, rank, shape text.
  KernelPage k = kernels(*s, {.order = KernelOrder::Kernel, .limit = 200});
  ASSERT_EQ(k.rows.size(), 12u);
  for (size_t i = 1; i < k.rows.size(); ++i) {
    const HardKey &a = k.rows[i - 1].key, &b = k.rows[i].key;
    EXPECT_LE(std::tie(a.family, a.dtype, a.target), std::tie(b.family, b.dtype, b.target)) << i;
  }
  EXPECT_TRUE(kernels(*s, {.offset = 12}).rows.empty());
}

// What a person types into the dashboard (issue 51): fields without case, a target prefix, words
// found in a kernel's stored IR text or naming a GPU product of its chip; and the keys that changed
// last, by arrival and by measured time. The exact query (a bundle's) stays exact.
TEST_P(KernelListTest, PersonSearchFindsExpressionsProductsAndRecentChanges) {
  auto s = open();
  const std::string gelu = "kernel @k(%a: tensor<64xf32>) -> tensor<64xf32> { %b = gelu %a }\n";
  Record ew = withKey(makeRecord({.key = 0, .median_us = 10, .created_at = "2025-03-01T00:00:00Z"}), "elementwise", "f32", "host");
  ew.key.workload = sha256Hex(gelu);
  ASSERT_TRUE(finalizeRecord(ew).ok());
  Record h100 = withKey(makeRecord({.key = 1, .median_us = 10, .created_at = "2025-01-01T00:00:00Z"}), "gemm", "bf16", "sm_90a");
  Record plain90 = withKey(makeRecord({.key = 2, .median_us = 10, .created_at = "2025-02-01T00:00:00Z"}), "gemm", "f32", "sm_90");
  Record mi300 = withKey(makeRecord({.key = 3, .median_us = 10, .created_at = "2024-12-01T00:00:00Z"}), "gemm", "f16", "gfx942");
  for (const Record& r : {mi300, ew, h100, plain90}) put(*s, {r});
  ASSERT_TRUE(s->putKernelText(ew.key.workload, gelu).ok());
  auto ids = [&](KernelQuery q) {
    q.loose = true;
    q.word_chips.clear();
    for (const auto& w : q.words) q.word_chips.push_back(productChips(w));
    std::vector<std::string> out;
    for (const auto& r : kernels(*s, q).rows) out.push_back(r.key_id);
    return out;
  };
  const std::string kEw = keyIdOf(ew.key), kH = keyIdOf(h100.key), k90 = keyIdOf(plain90.key), kMi = keyIdOf(mi300.key);
  EXPECT_EQ(ids({.words = {"gelu"}}), std::vector<std::string>{kEw});         // the expression, from the IR text
  EXPECT_TRUE(ids({.words = {"tanh"}}).empty());                              // not in any text
  EXPECT_EQ(ids({.dtype = "F32", .order = KernelOrder::Kernel}).size(), 2u);  // without case
  EXPECT_EQ(kernels(*s, {.dtype = "F32"}).total, 0);                          // a program's query stays exact
  auto sm90 = ids({.target = "SM_90", .order = KernelOrder::Kernel});
  EXPECT_EQ(std::set<std::string>(sm90.begin(), sm90.end()), (std::set<std::string>{kH, k90}));  // a prefix
  EXPECT_EQ(ids({.target = "sm_90a"}), std::vector<std::string>{kH});
  EXPECT_EQ(kernels(*s, {.target = "sm_90"}).total, 1);  // exact for a bundle
  auto byH100 = ids({.words = {"h100"}, .order = KernelOrder::Kernel});
  EXPECT_EQ(std::set<std::string>(byH100.begin(), byH100.end()), (std::set<std::string>{kH, k90}));
  EXPECT_EQ(ids({.words = {"mi300"}}), std::vector<std::string>{kMi});
  EXPECT_EQ(ids({.words = {"h100", "bf16"}}), std::vector<std::string>{kH});
  EXPECT_TRUE(productChips("4090").empty());  // a number alone is a shape, not a GPU
  EXPECT_TRUE(productChips("gemm").empty());
  // Recency: a record that does not change the winner still moves its key up by arrival; measured
  // time orders by the records' own created_at, whatever order they arrived in.
  put(*s, {withKey(makeRecord({.key = 3, .median_us = 90, .created_at = "2024-11-01T00:00:00Z"}), "gemm", "f16", "gfx942")});
  EXPECT_EQ(ids({.order = KernelOrder::Arrived}).front(), kMi);
  EXPECT_NE(ids({.order = KernelOrder::Recent}).front(), kMi);  // its winner did not change
  EXPECT_EQ(ids({.order = KernelOrder::Measured}), (std::vector<std::string>{kEw, k90, kH, kMi}));
  KernelRow mi = byKey(kernels(*s, {.key_id = kMi})).at(kMi);
  EXPECT_EQ(mi.newest_measured, "2024-12-01T00:00:00Z");
  EXPECT_GT(mi.newest_id, byKey(kernels(*s, {.key_id = kEw})).at(kEw).newest_id);
}

TEST_P(KernelListTest, NewestFirstListingPagesBackwards) {
  auto s = open();
  std::vector<Record> rs;
  for (int i = 0; i < 7; ++i) rs.push_back(makeRecord({.key = i % 2, .median_us = 10.0 + i}));
  auto ids = put(*s, rs);
  ASSERT_EQ(ids.size(), 7u);
  ListQuery q;
  q.newest_first = true;
  q.limit = 3;
  std::vector<int64_t> seen;
  for (int pages = 0; pages < 5; ++pages) {
    auto p = s->list(q);
    ASSERT_TRUE(p.ok());
    for (const auto& r : p->records) seen.push_back(r.id);
    if (!p->next_after) break;
    q.after_id = p->next_after;
  }
  ASSERT_EQ(seen.size(), 7u);
  for (size_t i = 0; i < 7; ++i) EXPECT_EQ(seen[i], ids[6 - i].id);
  q = {};
  q.newest_first = true;
  q.key_id = keyIdOf(test::keyFor(1));
  auto p = s->list(q);
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->records.size(), 3u);
  EXPECT_EQ(p->records[0].id, ids[5].id);
}

// The engines with a job queue (the in-memory store keeps none).
class JobListTest : public KernelListTest {};

TEST_P(JobListTest, CountsItemsAndHolders) {
  auto s = open();
  JobQueue* q = s->jobs();
  ASSERT_NE(q, nullptr);
  QueuePolicy p;
  WorkerInfo w;
  w.id = std::string(32, 'a');
  w.token = "worker-1";
  w.target = "host";
  w.arch = "x86-64-v4";
  w.units = 2;
  w.model = "Test CPU";
  w.slots = 2;  // a worker leases at most its slots
  ASSERT_TRUE(q->registerWorker(w, {}).ok());
  auto job = [&](char id, const std::string& submitter, int items) {
    JobSpec j;
    j.id = std::string(32, id);
    j.submitter = submitter;
    j.key = test::keyFor(0);
    j.key_id = keyIdOf(j.key);
    j.kernel = "kernel text";
    j.settings = "{}";
    for (int i = 0; i < items; ++i) j.items.push_back("{\"MC\":" + std::to_string(8 * (i + 1)) + "}");
    auto r = q->submit(j, p);
    ASSERT_TRUE(r.ok()) << r.error().message;
  };
  job('1', "alice", 3);
  job('2', "bob", 2);
  auto lease = q->lease(w.id, w.token, 2, p);
  ASSERT_TRUE(lease.ok());
  ASSERT_EQ(lease->items.size(), 2u);  // the older job's first two items
  ItemReport done;
  done.worker_id = w.id;
  done.token = w.token;
  done.job_id = lease->items[0].job_id;
  done.item = lease->items[0].item;
  done.result = "{\"refused\":\"test\"}";
  ASSERT_TRUE(q->report(done, {}).ok());

  auto all = q->jobList("", 100, p);
  ASSERT_TRUE(all.ok()) << all.error().message;
  ASSERT_EQ(all->jobs.size(), 2u);
  const JobSummary& bob = all->jobs[0];  // newest first
  const JobSummary& alice = all->jobs[1];
  EXPECT_EQ(bob.submitter, "bob");
  EXPECT_EQ(bob.queued, 2);
  EXPECT_EQ(alice.submitter, "alice");
  EXPECT_EQ(alice.items, 3);
  EXPECT_EQ(alice.done, 1);
  EXPECT_EQ(alice.leased, 1);
  EXPECT_EQ(alice.queued, 1);
  EXPECT_EQ(alice.holders, std::vector<std::string>{w.id});
  EXPECT_EQ(alice.key_id, keyIdOf(test::keyFor(0)));
  EXPECT_EQ(all->totals.open_jobs, 2);
  EXPECT_EQ(all->totals.queued, 3);
  EXPECT_EQ(all->totals.leased, 1);
  EXPECT_EQ(all->totals.done, 1);
  EXPECT_GT(all->now, 0);
  auto mine = q->jobList("bob", 100, p);
  ASSERT_TRUE(mine.ok());
  ASSERT_EQ(mine->jobs.size(), 1u);
  EXPECT_EQ(mine->jobs[0].submitter, "bob");
  EXPECT_EQ(mine->totals.open_jobs, 2);  // totals count everyone's
}

std::vector<Kind> kinds() {
  std::vector<Kind> k = {{"memory", false, false, false}, {"sqlite", true, false, false}, {"sqlite_indexed", true, true, false}};
  if (test::postgresBuiltIn()) k.push_back({"postgres", false, false, true});
  return k;
}

INSTANTIATE_TEST_SUITE_P(Kinds, KernelListTest, ::testing::ValuesIn(kinds()),
                         [](const auto& info) { return std::string(info.param.name); });

std::vector<Kind> queueKinds() {
  std::vector<Kind> k = kinds();
  k.erase(k.begin());  // memory
  return k;
}

INSTANTIATE_TEST_SUITE_P(Kinds, JobListTest, ::testing::ValuesIn(queueKinds()),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tessera::cache
