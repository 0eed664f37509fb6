// Tests the record model: key ids, the JSON codec and its field-by-field validation, ordering,
// staleness helpers, shape distance and timestamps.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "store/record.h"
#include "tests/cache_service/test_util.h"

namespace tessera::cache {
namespace {

using nlohmann::json;
using test::makeRecord;
using test::RecordSpec;

json validJson() { return json::parse(encodeRecord(makeRecord({}))); }

TEST(KeyId, IsStableAcrossReleases) {
  // Changing the canonical key orphans every stored record: this value must never change.
  HardKey k{"gemm", "9f86d081884c7d65", {1024, 1024, 512}, "f32", "row", "host", "x86-64-v4", 2};
  EXPECT_EQ(canonicalKey(k),
            R"(["tessera-key/1","gemm","9f86d081884c7d65",[1024,1024,512],"f32","row","host","x86-64-v4",2])");
  EXPECT_EQ(keyIdOf(k), "58dc9d6565742c37f1b1689c511cca57134eaeefcde91b1dcf88b54632979825");
  EXPECT_TRUE(isKeyId(keyIdOf(k)));
}

TEST(KeyId, EveryHardFieldMatters) {
  HardKey base{"gemm", "9f86d081884c7d65", {1024, 1024, 512}, "f32", "row", "host", "x86-64-v4", 2};
  std::vector<HardKey> variants(8, base);
  variants[0].family = "attention";
  variants[1].workload = "9f86d081884c7d66";
  variants[2].shape = {1024, 512, 1024};
  variants[3].dtype = "f16";
  variants[4].layout = "tA";
  variants[5].target = "sm_90a";
  variants[6].arch = "x86-64-v3";
  variants[7].units = 4;
  for (const auto& v : variants) EXPECT_NE(keyIdOf(v), keyIdOf(base));
}

TEST(RecordJson, RoundTripsEveryField) {
  Record r = makeRecord({.key = 3, .median_us = 12.5, .llvm_version = "22.0.1", .config = R"({"b":[1,2],"a":{"x":1}})"});
  r.gbps = 3.25;
  r.peak_fraction = 0.5;
  r.max_abs_err = 1e-7;
  r.max_rel_err = 2e-6;
  r.provenance.cuda_version = "12.8";
  auto back = decodeRecord(encodeRecord(r));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->key, r.key);
  EXPECT_EQ(back->provenance, r.provenance);
  EXPECT_EQ(back->config, R"({"a":{"x":1},"b":[1,2]})");  // canonical: sorted keys
  EXPECT_EQ(back->median_us, 12.5);
  EXPECT_EQ(back->gbps, 3.25);
  EXPECT_EQ(back->max_abs_err, 1e-7);
  EXPECT_EQ(back->trials, r.trials);
  EXPECT_EQ(back->key_id, r.key_id);
  EXPECT_EQ(fingerprint(*back), fingerprint(r));
  EXPECT_FALSE(back->remeasured);
  EXPECT_EQ(encodeRecord(r).find("remeasured"), std::string::npos);  // old fingerprints unchanged
  r.remeasured = true;
  auto marked = decodeRecord(encodeRecord(r));
  ASSERT_TRUE(marked.ok()) << marked.error().message;
  EXPECT_TRUE(marked->remeasured);
  EXPECT_NE(fingerprint(*marked), fingerprint(*back));
}

TEST(RecordJson, FingerprintIgnoresConfigKeyOrderAndStoreFields) {
  Record a = makeRecord({.config = R"({"x":1,"y":2})"});
  Record b = makeRecord({.config = R"({"y":2,"x":1})"});
  b.id = 99;
  b.stale = true;
  EXPECT_EQ(fingerprint(a), fingerprint(b));
  Record c = makeRecord({.host = "other-host"});
  EXPECT_NE(fingerprint(a), fingerprint(c));
}

struct BadCase {
  const char* name;
  std::function<void(json&)> mutate;
  const char* expect;  // substring of the error message
};

TEST(RecordJson, RefusesBadFieldsWithTheirPath) {
  const std::vector<BadCase> cases = {
      {"missing key", [](json& j) { j.erase("key"); }, "key: missing"},
      {"key not object", [](json& j) { j["key"] = 5; }, "key: expected an object"},
      {"missing family", [](json& j) { j["key"].erase("family"); }, "key.family: missing"},
      {"family wrong type", [](json& j) { j["key"]["family"] = 1; }, "key.family: expected a string"},
      {"family with space", [](json& j) { j["key"]["family"] = "ge mm"; }, "key.family"},
      {"workload not hex", [](json& j) { j["key"]["workload"] = "XYZ12345"; }, "key.workload"},
      {"shape empty", [](json& j) { j["key"]["shape"] = json::array(); }, "key.shape"},
      {"shape float", [](json& j) { j["key"]["shape"] = {1.5, 2}; }, "key.shape[0]: expected an integer"},
      {"shape zero", [](json& j) { j["key"]["shape"] = {0, 2}; }, "key.shape[0]"},
      {"shape negative", [](json& j) { j["key"]["shape"] = {-4}; }, "key.shape[0]"},
      {"shape rank 9", [](json& j) { j["key"]["shape"] = {1, 1, 1, 1, 1, 1, 1, 1, 1}; }, "at most 8"},
      {"shape huge", [](json& j) { j["key"]["shape"] = {uint64_t{1} << 63}; }, "too large"},
      {"units string", [](json& j) { j["key"]["units"] = "2"; }, "key.units: expected an integer"},
      {"units zero", [](json& j) { j["key"]["units"] = 0; }, "key.units"},
      {"unknown key field", [](json& j) { j["key"]["color"] = "red"; }, "key.color: unknown field"},
      {"unknown top field", [](json& j) { j["median"] = 3; }, "median: unknown field"},
      {"missing provenance", [](json& j) { j.erase("provenance"); }, "provenance: missing"},
      {"missing created_at", [](json& j) { j["provenance"].erase("created_at"); }, "created_at: missing"},
      {"bad created_at", [](json& j) { j["provenance"]["created_at"] = "yesterday"; }, "created_at"},
      {"control char", [](json& j) { j["provenance"]["host"] = std::string("a\x01b"); }, "provenance.host"},
      {"config array", [](json& j) { j["config"] = json::array(); }, "config: expected a JSON object"},
      {"config huge", [](json& j) { j["config"] = {{"x", std::string(20000, 'a')}}; }, "config: larger"},
      {"bad status", [](json& j) { j["status"] = "great"; }, "status: expected one of"},
      {"status number", [](json& j) { j["status"] = 1; }, "status: expected a string"},
      {"ok without result", [](json& j) { j.erase("result"); }, "result: missing"},
      {"ok without median", [](json& j) { j["result"].erase("median_us"); }, "result.median_us: missing"},
      {"median zero", [](json& j) { j["result"]["median_us"] = 0; }, "result.median_us"},
      {"median string", [](json& j) { j["result"]["median_us"] = "fast"; }, "result.median_us: expected a number"},
      {"median negative", [](json& j) { j["result"]["median_us"] = -1.0; }, "result.median_us"},
      {"n float", [](json& j) { j["result"]["n"] = 2.5; }, "result.n: expected an integer"},
      {"quantiles inverted", [](json& j) { j["result"]["p20_us"] = 1e9; }, "p20_us <= median_us"},
      {"gflops negative", [](json& j) { j["result"]["gflops"] = -3; }, "result.gflops"},
      {"key_id mismatch", [](json& j) { j["key_id"] = std::string(64, 'a'); }, "key_id: does not match"},
      {"stale wrong type", [](json& j) { j["stale"] = "no"; }, "stale: expected a boolean"},
      {"id negative", [](json& j) { j["id"] = -3; }, "id"},
      {"remeasured not bool", [](json& j) { j["result"]["remeasured"] = 1; }, "result.remeasured: expected true or false"},
      {"remeasured failure",
       [](json& j) {
         j["status"] = "crash";
         j["result"]["remeasured"] = true;
       },
       "result.remeasured: only an ok record"},
  };
  for (const auto& c : cases) {
    json j = validJson();
    c.mutate(j);
    auto r = decodeRecord(j.dump());
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument) << c.name;
    EXPECT_NE(r.error().message.find(c.expect), std::string::npos)
        << c.name << ": got '" << r.error().message << "'";
  }
}

TEST(RecordJson, RefusesMalformedAndDeepInput) {
  for (const char* text : {"", "{", "[1,2", "nul", "{\"key\":}", "\xff\xfe", "{\"a\":\"\xc3\x28\"}"})
    EXPECT_FALSE(decodeRecord(text).ok()) << text;
  // Under the line cap (a record with its kernel text may take 192 KiB): refused by the depth check.
  std::string deep(100000, '[');
  auto r = decodeRecord(deep);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("nested deeper"), std::string::npos) << r.error().message;
  // Over it: refused before any parsing.
  auto huge = decodeRecord(std::string(200 * 1024, '['));
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.error().code, ErrorCode::InvalidArgument);
  EXPECT_NE(huge.error().message.find("larger than"), std::string::npos) << huge.error().message;
  std::string deep_config = R"({"config":)" + std::string(40, '[') + std::string(40, ']') + "}";
  EXPECT_FALSE(decodeRecord(deep_config).ok());
  EXPECT_FALSE(jsonDepthWithin(std::string(33, '{'), 32));
  EXPECT_TRUE(jsonDepthWithin("\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\"", 2));  // inside a string
}

// An estimate names its model and bound; only an estimate may (a measurement carrying an estimator
// would hide a prediction among measurements).
TEST(RecordJson, EstimatesNameTheirModel) {
  json j = validJson();
  j["status"] = "estimated";
  j["estimate"] = {{"model", "analytic-v1"}, {"bound", "memory"}};
  auto r = decodeRecord(j.dump());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->estimator, "analytic-v1");
  EXPECT_EQ(r->bound, "memory");
  EXPECT_FALSE(isWinnerCandidate(*r));
  auto again = decodeRecord(encodeRecord(*r));
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(fingerprint(*again), fingerprint(*r));
  json missing = j;
  missing.erase("estimate");
  auto m = decodeRecord(missing.dump());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("estimate.model"), std::string::npos) << m.error().message;
  json measured = validJson();
  measured["estimate"] = {{"model", "analytic-v1"}, {"bound", "memory"}};
  auto x = decodeRecord(measured.dump());
  ASSERT_FALSE(x.ok());
  EXPECT_NE(x.error().message.find("only an estimated record"), std::string::npos) << x.error().message;
  json extra = j;
  extra["estimate"]["terms"] = 1;
  EXPECT_FALSE(decodeRecord(extra.dump()).ok());
}

TEST(RecordJson, FailedCandidatesNeedNoMeasurement) {
  json j = validJson();
  j["status"] = "compile-error";
  j.erase("result");
  auto r = decodeRecord(j.dump());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->status, RecordStatus::CompileError);
  EXPECT_FALSE(isWinnerCandidate(*r));
}

TEST(Record, BetterMeansOkAndFaster) {
  Record fast = makeRecord({.median_us = 10});
  Record slow = makeRecord({.median_us = 20});
  Record failed = makeRecord({.status = RecordStatus::Timeout});
  Record estimated = makeRecord({.status = RecordStatus::Estimated});
  EXPECT_TRUE(isBetter(fast, slow));
  EXPECT_FALSE(isBetter(slow, fast));
  EXPECT_FALSE(isBetter(fast, fast));
  EXPECT_TRUE(isBetter(slow, failed));
  EXPECT_FALSE(isBetter(failed, slow));
  EXPECT_FALSE(isBetter(estimated, failed));
  // Among reproduced records a re-measured winner outranks single measurements; among one token's
  // claims the flag counts for nothing (issue 47), and a disputed claim ranks below every claim.
  Record confirmed = makeRecord({.median_us = 30, .remeasured = true});
  EXPECT_FALSE(isBetter(confirmed, fast));
  confirmed.trust = fast.trust = Trust::Confirmed;
  EXPECT_TRUE(isBetter(confirmed, fast));
  EXPECT_FALSE(isBetter(fast, confirmed));
  Record faster = makeRecord({.median_us = 25, .remeasured = true});
  faster.trust = Trust::Confirmed;
  EXPECT_TRUE(isBetter(faster, confirmed));
  Record disputed = makeRecord({.median_us = 1});
  disputed.trust = Trust::Disputed;
  EXPECT_TRUE(isBetter(slow, disputed));
  EXPECT_TRUE(isBetter(disputed, failed));
}

TEST(Record, StatusNamesAndErrorMapping) {
  for (auto s : {RecordStatus::Ok, RecordStatus::InvalidConfig, RecordStatus::CompileError, RecordStatus::Timeout,
                 RecordStatus::Crash, RecordStatus::WrongResult, RecordStatus::Estimated})
    EXPECT_EQ(parseRecordStatus(recordStatusName(s)), s);
  EXPECT_EQ(recordStatusFromError(ErrorCode::InvalidConfig), RecordStatus::InvalidConfig);
  EXPECT_EQ(recordStatusFromError(ErrorCode::WrongResult), RecordStatus::WrongResult);
  EXPECT_EQ(recordStatusFromError(ErrorCode::Internal), RecordStatus::Crash);
  EXPECT_FALSE(parseRecordStatus("OK"));
}

TEST(Record, ProvenanceMismatchListsDifferingFields) {
  Provenance rec{"0.1.0", "22.1.0", "12.8", "Xeon", "a", "b", "2025-01-01T00:00:00Z"};
  EXPECT_TRUE(provenanceMismatch(rec, {}).empty());
  Provenance cur;
  cur.llvm_version = "22.2.0";
  cur.cpu_model = "Xeon";
  EXPECT_EQ(provenanceMismatch(rec, cur), std::vector<std::string>{"llvm_version"});
  cur.tessera_version = "0.2.0";
  cur.cuda_version = "13.0";
  cur.cpu_model = "EPYC";
  EXPECT_EQ(provenanceMismatch(rec, cur).size(), 4u);
}

TEST(Record, ShapeDistanceIsSumOfLogRatios) {
  EXPECT_DOUBLE_EQ(*shapeDistance({1024, 1024}, {1024, 1024}), 0.0);
  EXPECT_DOUBLE_EQ(*shapeDistance({1024, 512}, {512, 1024}), 2 * std::log(2.0));
  EXPECT_DOUBLE_EQ(*shapeDistance({100}, {400}), std::log(4.0));
  EXPECT_FALSE(shapeDistance({64, 64}, {64, 64, 64}));
}

TEST(Record, ShapeText) {
  EXPECT_EQ(formatShape({1024, 16, 3}), "1024x16x3");
  auto s = parseShape("1024x16x3");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, (std::vector<int64_t>{1024, 16, 3}));
  for (const char* bad : {"", "x", "12x", "0x4", "-1", "4x4.5", "1x1x1x1x1x1x1x1x1", "99999999999999999"})
    EXPECT_FALSE(parseShape(bad).ok()) << bad;
}

TEST(Record, TimestampsAreStrictUtc) {
  EXPECT_TRUE(isUtcTimestamp(utcNow()));
  EXPECT_TRUE(isUtcTimestamp("2025-12-31T23:59:60Z"));
  for (const char* bad : {"2025-01-31 12:00:00Z", "2025-01-31T12:00:00", "2025-13-01T00:00:00Z",
                          "2025-01-31T12:00:00.5Z", "2025-01-31T12:00:00+01:00", "25-01-31T12:00:00Z"})
    EXPECT_FALSE(isUtcTimestamp(bad)) << bad;
}

TEST(Record, FinalizeRejectsInvalidRecordsBuiltInCode) {
  Record r = makeRecord({});
  r.key.units = 0;
  EXPECT_FALSE(finalizeRecord(r).ok());
  Record bad_utf8 = makeRecord({});
  bad_utf8.provenance.cpu_model = "\xff\xfe";
  EXPECT_FALSE(finalizeRecord(bad_utf8).ok());
  Record cfg = makeRecord({});
  cfg.config = "[1]";
  EXPECT_FALSE(finalizeRecord(cfg).ok());
}

// Why a stored record did not answer: the key fields that differ, named as the flags that ask for
// them (a host's units are its --threads); a workload hash that differs only with the shape is
// not "another kernel".
TEST(Record, KeyDifferencesNameTheFieldsThatDiffer) {
  HardKey asked = test::keyFor(1);
  EXPECT_TRUE(keyDifferences(asked, asked).empty());
  HardKey oneThread = asked;
  oneThread.units = 1;
  EXPECT_EQ(keyDifferences(asked, oneThread), std::vector<std::string>{"threads 1 (asked 2)"});
  HardKey otherShape = test::keyFor(2);
  auto d = keyDifferences(asked, otherShape);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].rfind("shape ", 0), 0u) << d[0];
  HardKey otherKernel = asked;
  otherKernel.workload = "00c0ffee99999999";
  otherKernel.target = "sm_90";
  otherKernel.units = 132;
  EXPECT_EQ(keyDifferences(asked, otherKernel),
            (std::vector<std::string>{"another workload of the family (another kernel or epilogue)", "target sm_90 (asked host)",
                                      "threads 132 (asked 2)"}));
}

}  // namespace
}  // namespace tessera::cache

namespace tessera::cache {
namespace {

// The one trust rule (trust.h) both engines and the in-memory store apply.
TEST(TrustRule, ConfirmationRefutationAndTheGrayZoneBetween) {
  EXPECT_TRUE(timesAgree(100, 150));
  EXPECT_FALSE(timesAgree(100, 151));
  EXPECT_FALSE(contradicts(100, 225));  // slower, within 1.5^2: neither confirmed nor refuted
  EXPECT_TRUE(contradicts(100, 226));
  EXPECT_FALSE(contradicts(100, 10));  // a claim slower than the truth harms no one
  auto trustOf = [](const std::vector<std::pair<int64_t, Trust>>& changed, int64_t id, Trust was) {
    for (const auto& [i, t] : changed)
      if (i == id) return t;
    return was;
  };
  // One identity twice confirms nothing; another one agreeing does.
  std::vector<Measurement> g = {{1, "alice", 100, Trust::Claim}, {2, "alice", 101, Trust::Claim}};
  EXPECT_TRUE(settleTrust(g).empty());
  g.push_back({3, "bob", 120, Trust::Claim});
  auto c = settleTrust(g);
  EXPECT_EQ(trustOf(c, 1, Trust::Claim), Trust::Confirmed);
  EXPECT_EQ(trustOf(c, 3, Trust::Claim), Trust::Confirmed);
  // A lie ten times too fast is refused by an honest measurement, which stays a claim; the gray
  // zone (2x) refutes nothing.
  std::vector<Measurement> lie = {{1, "mallory", 10, Trust::Claim}, {2, "carol", 100, Trust::Claim},
                                  {3, "dave", 20, Trust::Claim}};
  c = settleTrust(lie);
  EXPECT_EQ(trustOf(c, 1, Trust::Claim), Trust::Refuted);
  EXPECT_EQ(trustOf(c, 2, Trust::Claim), Trust::Claim);
  EXPECT_EQ(trustOf(c, 3, Trust::Claim), Trust::Refuted);  // 100 > 2.25 x 20
  // Vouched stays vouched; confirmation outranks refutation.
  std::vector<Measurement> pinned = {{1, "ops", 10, Trust::Vouched}, {2, "x", 100, Trust::Claim},
                                     {3, "y", 11, Trust::Claim}};
  c = settleTrust(pinned);
  EXPECT_EQ(trustOf(c, 1, Trust::Vouched), Trust::Vouched);
  EXPECT_EQ(trustOf(c, 3, Trust::Claim), Trust::Confirmed);
  // The winner order: confirmed before claims (even re-measured ones), refuted never.
  EXPECT_GT(*winnerRank(Trust::Confirmed, false), *winnerRank(Trust::Claim, true));
  EXPECT_EQ(*winnerRank(Trust::Vouched, true), *winnerRank(Trust::Confirmed, true));
  EXPECT_FALSE(winnerRank(Trust::Refuted, true));
  for (auto t : {Trust::Disputed, Trust::Refuted, Trust::Claim, Trust::Confirmed, Trust::Vouched})
    EXPECT_EQ(parseTrust(trustName(t)), t);
}

}  // namespace
}  // namespace tessera::cache
