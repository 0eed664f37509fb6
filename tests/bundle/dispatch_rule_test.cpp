// Tests shape-range dispatch: parsing ranges and lists (bad ones in one line), the representative
// points, fitting the bucket table to measured times on a tiny range (the crossover found, the
// bucket count chosen by held-out regret, the kernel limit kept) and the rule's JSON round trip;
// negative controls: a one-bucket limit leaves regret, a malformed rule is refused.
// The range tune's pruning of long points: only candidates near the best are measured again.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "bundle/dispatch_rule.h"
#include "session/range_tune.h"

using namespace tessera;
using namespace tessera::bundle;
using namespace tessera::session;

TEST(DispatchRule, ParsesRangesAndLists) {
  auto r = parseShapeRange("1..8192", "--m");
  ASSERT_TRUE(r.ok()) << r.error().str();
  EXPECT_EQ(r->lo, 1);
  EXPECT_EQ(r->hi, 8192);
  EXPECT_TRUE(r->list.empty());
  auto l = parseShapeRange("64, 7,1,7", "--m");
  ASSERT_TRUE(l.ok()) << l.error().str();
  EXPECT_EQ(l->list, (std::vector<int64_t>{1, 7, 64}));
  EXPECT_EQ(l->lo, 1);
  EXPECT_EQ(l->hi, 64);
  EXPECT_TRUE(isRangeText("1..4"));
  EXPECT_TRUE(isRangeText("1,4"));
  EXPECT_FALSE(isRangeText("4"));
}

TEST(DispatchRule, RefusesBadRangesInOneLine) {
  std::string many;
  for (int i = 1; i <= 65; ++i) many += (i > 1 ? "," : "") + std::to_string(i);
  for (const char* text : {"0..5", "9..3", "1..99999999999", "1..2000000", "1..", "..5", "a..b", "1...5", "1..2..3", "1,,3",
                           "1,-3", "1,x", ",", "0,4", "-1..4", "1 ..4x"}) {
    auto r = parseShapeRange(text, "--m");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument) << text;
    EXPECT_EQ(r.error().message.find('\n'), std::string::npos) << text;
    EXPECT_NE(r.error().message.find("--m"), std::string::npos) << r.error().message;
  }
  EXPECT_FALSE(parseShapeRange(many, "--m").ok());
}

TEST(DispatchRule, RepresentativePointsAreLogSpacedWithOddHeldOut) {
  auto p = rangePoints(*parseShapeRange("1..8192", "--m"));
  EXPECT_EQ(p.train.front(), 1);
  EXPECT_EQ(p.train.back(), 8192);
  EXPECT_LE(p.train.size(), 14u);
  for (size_t i = 0; i + 1 < p.train.size(); ++i) EXPECT_LT(p.train[i], p.train[i + 1]);
  ASSERT_FALSE(p.heldOut.empty());
  for (int64_t h : p.heldOut) {
    EXPECT_TRUE(std::find(p.train.begin(), p.train.end(), h) == p.train.end()) << h;
    EXPECT_GT(h, 1);
    EXPECT_LT(h, 8192);
  }
  size_t odd = std::count_if(p.heldOut.begin(), p.heldOut.end(), [](int64_t h) { return h % 2 == 1; });
  EXPECT_GE(odd * 2, p.heldOut.size());
  // A narrow range: every training point, held-out points only where there is room.
  auto q = rangePoints(*parseShapeRange("3..5", "--m"));
  EXPECT_EQ(q.train, (std::vector<int64_t>{3, 4, 5}));
  EXPECT_TRUE(q.heldOut.empty());
}

namespace {

// Two configs with a crossover at m = 18: "small" costs 1 + m, "large" 10 + m/2; a third is
// never best. Points 1..64 (all of them), training ones the powers of two.
TimeTable crossover(std::vector<size_t>* train, std::vector<size_t>* held) {
  TimeTable t;
  t.configs = {"small", "large", "never"};
  t.times.assign(3, {});
  for (int64_t m = 1; m <= 64; ++m) {
    t.points.push_back(m);
    t.times[0].push_back(1.0 + double(m));
    t.times[1].push_back(10.0 + 0.5 * double(m));
    t.times[2].push_back(100.0 + double(m));
    bool pow2 = (m & (m - 1)) == 0;
    (pow2 || m == 64 ? train : held)->push_back(size_t(m - 1));
  }
  return t;
}

}  // namespace

TEST(DispatchRule, FitsTheCrossoverOnATinyRange) {
  std::vector<size_t> train, held;
  TimeTable t = crossover(&train, &held);
  auto r = fitDispatchRule(t, train, held, 1, 64);
  ASSERT_TRUE(r.ok()) << r.error().str();
  ASSERT_EQ(r->buckets.size(), 2u);
  ASSERT_EQ(r->configs.size(), 2u);
  EXPECT_EQ(r->configs[size_t(r->buckets[0].config)], "small");
  EXPECT_EQ(r->configs[size_t(r->buckets[1].config)], "large");
  // The boundary lies between the training points 16 and 32, placed by the held-out points there.
  EXPECT_GE(r->buckets[0].hi, 16);
  EXPECT_LE(r->buckets[0].hi, 21);
  EXPECT_LT(r->heldOutRegret, 0.02);
  EXPECT_EQ(r->bucketOf(1), 0);
  EXPECT_EQ(r->bucketOf(64), 1);
  EXPECT_EQ(r->bucketOf(0), -1);
  EXPECT_EQ(r->bucketOf(65), -1);
  // Every value of the range has one bucket.
  for (int64_t m = 1; m <= 64; ++m) EXPECT_GE(r->bucketOf(m), 0) << m;
}

TEST(DispatchRule, OneBucketLimitLeavesRegretAndOneConfigNeedsOneBucket) {
  std::vector<size_t> train, held;
  TimeTable t = crossover(&train, &held);
  auto one = fitDispatchRule(t, train, held, 1, 64, {.maxBuckets = 1});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->buckets.size(), 1u);
  EXPECT_GT(one->heldOutRegret, 0.05);  // negative control: one config cannot be best everywhere
  auto kernels = fitDispatchRule(t, train, held, 1, 64, {.maxKernels = 1});
  ASSERT_TRUE(kernels.ok());
  EXPECT_EQ(kernels->configs.size(), 1u);
  TimeTable single = t;
  single.configs = {"only"};
  single.times = {t.times[0]};
  auto s = fitDispatchRule(single, train, held, 1, 64);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->buckets.size(), 1u);
  EXPECT_DOUBLE_EQ(s->heldOutRegret, 0.0);
  // A candidate that failed at a point is never chosen there.
  TimeTable failed = t;
  for (auto& v : failed.times[1]) v = std::numeric_limits<double>::infinity();
  auto f = fitDispatchRule(failed, train, held, 1, 64);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->configs, (std::vector<std::string>{"small"}));
  EXPECT_FALSE(fitDispatchRule(TimeTable{}, train, held, 1, 64).ok());
}

TEST(DispatchRule, JsonRoundTripAndMalformedRules) {
  std::vector<size_t> train, held;
  TimeTable t = crossover(&train, &held);
  auto r = fitDispatchRule(t, train, held, 1, 64);
  ASSERT_TRUE(r.ok());
  std::string text = ruleToJson(*r, R"({"kernel": "gemm"})");
  EXPECT_NE(text.find("\"kernel\""), std::string::npos);
  auto back = ruleFromJson(text);
  ASSERT_TRUE(back.ok()) << back.error().str();
  EXPECT_EQ(back->configs, r->configs);
  ASSERT_EQ(back->buckets.size(), r->buckets.size());
  for (size_t i = 0; i < r->buckets.size(); ++i) {
    EXPECT_EQ(back->buckets[i].lo, r->buckets[i].lo);
    EXPECT_EQ(back->buckets[i].hi, r->buckets[i].hi);
    EXPECT_EQ(back->buckets[i].config, r->buckets[i].config);
  }
  for (const char* badRule :
       {"", "[]", "{\"dim\":\"M\"}",
        R"({"dim":"M","lo":1,"hi":8,"configs":["a"],"buckets":[{"lo":1,"hi":3,"config":0},{"lo":5,"hi":8,"config":0}]})",
        R"({"dim":"M","lo":1,"hi":8,"configs":["a"],"buckets":[{"lo":1,"hi":8,"config":1}]})",
        R"({"dim":"M","lo":1,"hi":8,"configs":["a"],"buckets":[{"lo":1,"hi":7,"config":0}]})",
        R"({"dim":"N","lo":1,"hi":8,"configs":["a"],"buckets":[{"lo":1,"hi":8,"config":0}]})",
        R"({"dim":"M","lo":0,"hi":8,"configs":["a"],"buckets":[{"lo":0,"hi":8,"config":0}]})",
        R"({"dim":"M","lo":1,"hi":8,"configs":"a","buckets":[]})"}) {
    auto b = ruleFromJson(badRule);
    EXPECT_FALSE(b.ok()) << badRule;
  }
  // An elementwise kernel's rule dispatches on its rows (leading dimension).
  auto rows = ruleFromJson(R"({"dim":"rows","lo":1,"hi":8,"configs":["a"],"buckets":[{"lo":1,"hi":8,"config":0}]})");
  ASSERT_TRUE(rows.ok()) << rows.error().str();
  EXPECT_EQ(rows->dim, "rows");
  // An attention kernel's rule dispatches on its sequence length.
  auto seq = ruleFromJson(R"({"dim":"seq","lo":1,"hi":8,"configs":["a"],"buckets":[{"lo":1,"hi":8,"config":0}]})");
  ASSERT_TRUE(seq.ok()) << seq.error().str();
  EXPECT_EQ(seq->dim, "seq");
  EXPECT_FALSE(ruleFromJson(R"({"dim":"seq_kv","lo":1,"hi":8,"configs":["a"],"buckets":[{"lo":1,"hi":8,"config":0}]})").ok());
}

// The cross measurement of a range tune stops measuring clearly slower candidates once runs are
// long (the full N = K = 4096 sweep spends most of its time there), and only then.
TEST(DispatchRule, LongPointsMeasureOnlyTheCandidatesNearTheBest) {
  const double inf = std::numeric_limits<double>::infinity();
  TimeTable t;
  t.points = {1024, 2048};
  t.configs = {"a", "b", "c", "d", "e"};
  // At M = 1024: a 100 ms, b 140 ms, c 200 ms, d failed, e 400 ms.
  t.times = {{1e5, inf}, {1.4e5, inf}, {2e5, inf}, {inf, inf}, {4e5, inf}};
  RangeTuneSettings s;
  s.pruneAboveUs = 5e4;
  s.pruneFactor = 1.5;
  s.keepAtLeast = 1;
  EXPECT_EQ(rangeCandidatesToMeasure(t, 0, s), (std::vector<size_t>{0, 1}));  // within 1.5x of 100 ms
  s.keepAtLeast = 3;
  EXPECT_EQ(rangeCandidatesToMeasure(t, 0, s), (std::vector<size_t>{0, 1, 2}));  // the 3 fastest; never the failed one
  s.keepAtLeast = 8;
  EXPECT_EQ(rangeCandidatesToMeasure(t, 0, s), (std::vector<size_t>{0, 1, 2, 4}));
  // Negative controls: short runs, or pruning off, measure every candidate again.
  s.keepAtLeast = 1;
  s.pruneAboveUs = 2e5;
  EXPECT_EQ(rangeCandidatesToMeasure(t, 0, s).size(), 5u);
  s.pruneAboveUs = 0;
  EXPECT_EQ(rangeCandidatesToMeasure(t, 0, s).size(), 5u);
}

// A range may answer its smallest sizes with kernels of one shape each (fixed buckets): pinning
// splits the bucket around the size, the JSON keeps the mark (a rule without it loads as before),
// and a fixed bucket wider than one size, or a rule with no shape-generic bucket left, is refused.
TEST(DispatchRule, FixedBucketsAnswerOneSizeEach) {
  auto r = ruleFromJson(R"({"dim":"M","lo":1,"hi":64,"configs":["g0","g1"],
      "buckets":[{"lo":1,"hi":9,"config":0},{"lo":10,"hi":64,"config":1}]})");
  ASSERT_TRUE(r.ok()) << r.error().str();
  for (const auto& b : r->buckets) EXPECT_FALSE(b.fixed);  // an earlier rule: every bucket shape-generic
  ASSERT_TRUE(pinFixedBucket(*r, 1, "schedule=nvec").ok());
  ASSERT_TRUE(pinFixedBucket(*r, 2, "schedule=nvec").ok());
  ASSERT_TRUE(pinFixedBucket(*r, 4, "schedule=plain").ok());
  ASSERT_EQ(r->buckets.size(), 6u);
  const int64_t want[][3] = {{1, 1, 1}, {2, 2, 1}, {3, 3, 0}, {4, 4, 1}, {5, 9, 0}, {10, 64, 0}};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(r->buckets[i].lo, want[i][0]) << i;
    EXPECT_EQ(r->buckets[i].hi, want[i][1]) << i;
    EXPECT_EQ(r->buckets[i].fixed, want[i][2] == 1) << i;
  }
  EXPECT_EQ(r->configs[size_t(r->buckets[0].config)], "schedule=nvec");
  EXPECT_EQ(r->buckets[0].config, r->buckets[1].config);  // one config, two sizes
  EXPECT_EQ(r->configs[size_t(r->buckets[3].config)], "schedule=plain");
  EXPECT_EQ(r->configs[size_t(r->buckets[4].config)], "g0");
  EXPECT_EQ(r->bucketOf(3), 2);
  // Round trip: the mark survives, only on the fixed buckets.
  const std::string text = ruleToJson(*r);
  auto back = ruleFromJson(text);
  ASSERT_TRUE(back.ok()) << back.error().str();
  ASSERT_EQ(back->buckets.size(), 6u);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(back->buckets[i].fixed, r->buckets[i].fixed) << i;
  EXPECT_EQ(ruleToJson(*ruleFromJson(R"({"dim":"M","lo":1,"hi":8,"configs":["a"],"buckets":[{"lo":1,"hi":8,"config":0}]})"))
                .find("fixed"),
            std::string::npos);
  // Refused: outside the range; a fixed bucket over two sizes; every bucket fixed.
  EXPECT_FALSE(pinFixedBucket(*r, 65, "schedule=nvec").ok());
  EXPECT_FALSE(ruleFromJson(R"({"dim":"M","lo":1,"hi":8,"configs":["a","b"],
      "buckets":[{"lo":1,"hi":2,"config":0,"fixed":true},{"lo":3,"hi":8,"config":1}]})").ok());
  EXPECT_FALSE(ruleFromJson(R"({"dim":"M","lo":1,"hi":2,"configs":["a"],
      "buckets":[{"lo":1,"hi":1,"config":0,"fixed":true},{"lo":2,"hi":2,"config":0,"fixed":true}]})").ok());
  auto two = ruleFromJson(R"({"dim":"M","lo":1,"hi":2,"configs":["a"],"buckets":[{"lo":1,"hi":1,"config":0},{"lo":2,"hi":2,"config":0}]})");
  ASSERT_TRUE(two.ok());
  ASSERT_TRUE(pinFixedBucket(*two, 1, "f").ok());
  EXPECT_FALSE(pinFixedBucket(*two, 2, "f").ok());  // the last shape-generic bucket stays
}
