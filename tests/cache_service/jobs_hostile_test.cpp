// Tests the job queue's rules against a token or worker that works against the others, through the
// real server on a loopback port (api_jobs.cpp, sql_job_queue.cpp; issue 47): refusals, lease
// expiries and take-overs counted per token, the total bound on an item's leases, a report of an
// item taken over, spot checks that judge like with like and set aside only the checker's records,
// and a worker's registered hardware checked against its probe and kept across a restart.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include "store/record_json.h"
#include "store/tokens.h"
#include "tests/cache_service/job_queue_util.h"
#include "tests/cache_service/test_util.h"

namespace tessera::cache {
namespace {

// The suite's helpers; JobQueue is the test suite, not the queue interface cache::JobQueue
// (store/jobs.h), which the using-declaration hides.
using namespace job_test;  // NOLINT(google-build-using-namespace)
using job_test::JobQueue;
using nlohmann::json;
using test::Reply;
using test::ServerFixture;

// Issue 47, finding 3. Before: refusals were counted per worker id, so three ids of one token
// refusing an item finished it as refused while an honest worker of another token was live. Now a
// refusal counts once per token, another worker of any token that did not refuse takes the item,
// and the item is finished as refused only when no one else could (the neighbour: the same three
// refusals with no other worker live).
TEST_P(JobQueue, RefusalsCountPerTokenAndCannotEndAnItemAnotherTokenCanMeasure) {
  for (const bool honest_live : {true, false}) {
    SCOPED_TRACE(honest_live ? "an honest worker of another token is live" : "no one else is live");
    QueueFixture q(GetParam());
    ServerFixture& f = q.f;
    const std::string kWorkerD = std::string(31, 'e') + "5";
    auto tokens = TokenStore::open(f.db);
    const std::string honest = *(*tokens)->add("box2", Scope::Worker);
    ASSERT_TRUE(test::awaitToken(f.url(), honest));  // the server's token refresh
    for (const auto& id : {kWorkerA, kWorkerB, kWorkerC}) ASSERT_EQ(q.registerWorker(id, "x86-64-v4").status, 200);
    if (honest_live) {
      ASSERT_EQ(f.post("/v1/workers",
                       json{{"id", kWorkerD}, {"target", "host"}, {"arch", "x86-64-v4"}, {"units", 2}}.dump(), honest)
                    .status,
                200);
    }
    ASSERT_EQ(f.post("/v1/jobs", jobBody({R"({"MC":64})"}).dump(), f.write_token).status, 200);
    for (const auto& id : {kWorkerA, kWorkerB, kWorkerC}) {
      ASSERT_EQ(q.lease(id, 1).at("items").size(), 1u) << id;
      Reply r = f.post("/v1/workers/" + id + "/report", json{{"job_id", kJob}, {"item", 0}, {"refused", "no"}}.dump(),
                       q.worker);
      ASSERT_EQ(r.status, 200) << r.body;
    }
    json j = json::parse(f.get("/v1/jobs/" + kJob, f.write_token).body);
    if (!honest_live) {
      EXPECT_EQ(j.value("state", ""), "done") << j.dump();
      continue;
    }
    EXPECT_EQ(j.value("state", ""), "open") << "one token's three ids ended the item: " << j.dump();
    json d = json::parse(f.post("/v1/workers/" + kWorkerD + "/lease", R"({"max_items":1})", honest).body);
    ASSERT_EQ(d.at("items").size(), 1u) << d.dump();
    Reply rep = f.post("/v1/workers/" + kWorkerD + "/report",
                       json{{"job_id", kJob}, {"item", 0}, {"records", json::array({recordToJson(measured(R"({"MC":64})", 50))})}}
                           .dump(),
                       honest);
    EXPECT_EQ(rep.status, 200) << rep.body;
    EXPECT_GT(json::parse(rep.body).value("record_id", 0), 0) << rep.body;
    j = json::parse(f.get("/v1/jobs/" + kJob, f.write_token).body);
    EXPECT_EQ(j.value("state", ""), "done") << j.dump();
  }
}

// Issue 47, what to build 5 (expiries per token). Before: an item was given up after 12 expired
// leases of any kind, so one worker token leasing under fresh ids and letting each lease expire
// took every item from the other tokens' workers. Now one token's expiries of an item are bounded
// (kExpiriesPerToken): past them its ids get nothing more of it while an honest worker of another
// token is live, who measures it. The neighbour: with no other token live (a tune whose only fleet
// is that token) the item is given up after the same expiries instead of hanging the tune.
TEST_P(JobQueue, OneTokensLeaseExpiriesAreBoundedPerTokenAndLeaveTheItemToOthers) {
  ServerOptions o = queueOptions();
  o.queue.lease_s = 0.2;
  QueueFixture q(GetParam(), o);
  ServerFixture& f = q.f;
  const std::string kWorkerD = std::string(31, 'e') + "5", kJob2 = std::string(31, 'f') + "6";
  auto tokens = TokenStore::open(f.db);
  const std::string honest = *(*tokens)->add("box2", Scope::Worker);
  ASSERT_TRUE(test::awaitToken(f.url(), honest));  // the server's token refresh
  int round = 0;
  // One token's fresh ids lease `job`'s item and let each lease expire, until they get nothing.
  auto rotate = [&](const std::string& job) {
    json body = jobBody({R"({"MC":64})"});
    body["id"] = job;
    EXPECT_EQ(f.post("/v1/jobs", body.dump(), f.write_token).status, 200);
    int64_t leased = 0;
    for (int n = 0; n < 14; ++n) {
      char id[40];
      std::snprintf(id, sizeof id, "%030d%02x", 7, round++);
      EXPECT_EQ(q.registerWorker(id, "x86-64-v4").status, 200);
      if (q.lease(id, 1).at("items").empty()) break;
      ++leased;
      std::this_thread::sleep_for(std::chrono::milliseconds(260));  // the lease expires unanswered
    }
    return leased;
  };
  // No other token live: the item is given up after the token's expiries, not hung.
  EXPECT_EQ(rotate(kJob), kExpiriesPerToken);
  json j = json::parse(f.get("/v1/jobs/" + kJob, f.write_token).body);
  EXPECT_EQ(j.value("state", ""), "done") << j.dump();
  EXPECT_GT(j.at("items")[0].at("result").value("lost", 0), 0) << j.dump();
  // An honest worker of another token is live: the item waits for it and it measures it.
  ASSERT_EQ(f.post("/v1/workers", json{{"id", kWorkerD}, {"target", "host"}, {"arch", "x86-64-v4"}, {"units", 2}}.dump(),
                   honest)
                .status,
            200);
  EXPECT_EQ(rotate(kJob2), kExpiriesPerToken) << "one token's fresh ids kept leasing the item";
  j = json::parse(f.get("/v1/jobs/" + kJob2, f.write_token).body);
  EXPECT_EQ(j.value("state", ""), "open") << "one token's expiries gave the item up: " << j.dump();
  json d = json::parse(f.post("/v1/workers/" + kWorkerD + "/lease", R"({"max_items":1})", honest).body);
  ASSERT_EQ(d.at("items").size(), 1u) << d.dump();
  Reply rep = f.post("/v1/workers/" + kWorkerD + "/report",
                     json{{"job_id", kJob2}, {"item", 0}, {"records", json::array({recordToJson(measured(R"({"MC":64})", 50))})}}
                         .dump(),
                     honest);
  EXPECT_EQ(rep.status, 200) << rep.body;
  EXPECT_GT(json::parse(rep.body).value("record_id", 0), 0) << rep.body;
}

// Issue 47, the total bound. Before: the per-token rules had replaced the bound on an item's
// leases, and a take-over of a live holder's item counted against no token, so two tokens' workers
// taking one slow item from each other (each renewing, none reporting) leased it without end; a
// tune beside such a token never finished (87 leases of one item in CI). Now an item leased
// leasesPerItem times is given up with a result that says so, whatever the tokens. The neighbour:
// the same job's other item, leased once and reported, is recorded.
TEST_P(JobQueue, AnItemIsLeasedAtMostLeasesPerItemTimesWhateverTheTokens) {
  ServerOptions o = queueOptions();
  o.queue.lease_s = 30;  // nothing expires: only take-overs of live holders
  o.queue.steal_after_s = 0.05;
  o.queue.max_attempts = 1;
  QueueFixture q(GetParam(), o);
  ServerFixture& f = q.f;
  auto tokens = TokenStore::open(f.db);
  const std::string other = *(*tokens)->add("box2", Scope::Worker);
  ASSERT_TRUE(test::awaitToken(f.url(), other));  // the server's token refresh
  ASSERT_EQ(q.registerWorker(kWorkerA, "x86-64-v4").status, 200);
  ASSERT_EQ(f.post("/v1/workers", json{{"id", kWorkerC}, {"target", "host"}, {"arch", "x86-64-v4"}, {"units", 2}}.dump(),
                   other)
                .status,
            200);
  ASSERT_EQ(f.post("/v1/jobs", jobBody({R"({"MC":64})", R"({"MC":32})"}).dump(), f.write_token).status, 200);
  // The neighbour: C leases item 1 and reports it at once.
  json c = json::parse(f.post("/v1/workers/" + kWorkerC + "/lease", R"({"max_items":1})", other).body);
  ASSERT_EQ(c.at("items").size(), 1u) << c.dump();
  const int64_t fair_item = c.at("items")[0].at("item");
  Reply rep = f.post("/v1/workers/" + kWorkerC + "/report",
                     json{{"job_id", kJob}, {"item", fair_item},
                          {"records", json::array({recordToJson(measured(fair_item ? R"({"MC":32})" : R"({"MC":64})", 50))})}}
                         .dump(),
                     other);
  ASSERT_EQ(rep.status, 200) << rep.body;
  // A and C take the other item from each other, each as soon as the other held it long enough
  // (each token within its kTakeOversPerToken until the total bound).
  static_assert(1 + 2 * kTakeOversPerToken >= kLeasesPerAttempt, "two tokens reach the total bound");
  int leases = 0;
  for (int n = 0; n < 3 * kLeasesPerAttempt; ++n) {
    std::this_thread::sleep_for(std::chrono::milliseconds(80));
    const bool a = n % 2 == 0;
    json l = json::parse(f.post("/v1/workers/" + (a ? kWorkerA : kWorkerC) + "/lease", R"({"max_items":1})",
                                a ? q.worker : other)
                             .body);
    if (l.at("items").empty()) break;
    ++leases;
  }
  EXPECT_EQ(leases, kLeasesPerAttempt) << "leases of the contested item";
  json j = json::parse(f.get("/v1/jobs/" + kJob, f.write_token).body);
  EXPECT_EQ(j.value("state", ""), "done") << j.dump();
  int lost = 0, recorded = 0;
  for (const json& it : j.at("items")) {
    if (it.at("result").contains("lost")) {
      ++lost;
      EXPECT_EQ(it.at("result").value("lost", 0), kLeasesPerAttempt) << it.dump();
      EXPECT_NE(it.at("result").value("message", "").find("the most one item may be leased"), std::string::npos)
          << it.dump();
    } else {
      recorded += it.at("result").at("records").size() == 1u;
    }
  }
  EXPECT_EQ(lost, 1) << j.dump();
  EXPECT_EQ(recorded, 1) << j.dump();
}

// Issue 47, take-overs per token. Before: a take-over of a live (heartbeating) holder's item was
// charged to no token, so two tokens' renewing workers took one slow item from each other until
// the total bound gave it up: neither's measurement ever counted. Now each take-over is charged to
// the token that takes over, at most kTakeOversPerToken per item (under the total bound: two
// attempts): after 1 + 2 x 4 leases the last holder keeps the item, and its report is recorded
// (the neighbour: each token's first take-overs, an idle worker relieving a slow holder, happen).
TEST_P(JobQueue, ATakeOverIsChargedToTheTokenThatTakesOver) {
  ServerOptions o = queueOptions();
  o.queue.lease_s = 30;  // nothing expires: only take-overs of live holders
  o.queue.steal_after_s = 0.05;
  o.queue.max_attempts = 2;
  QueueFixture q(GetParam(), o);
  ServerFixture& f = q.f;
  auto tokens = TokenStore::open(f.db);
  const std::string other = *(*tokens)->add("box2", Scope::Worker);
  ASSERT_TRUE(test::awaitToken(f.url(), other));  // the server's token refresh
  ASSERT_EQ(q.registerWorker(kWorkerA, "x86-64-v4").status, 200);
  ASSERT_EQ(f.post("/v1/workers", json{{"id", kWorkerC}, {"target", "host"}, {"arch", "x86-64-v4"}, {"units", 2}}.dump(),
                   other)
                .status,
            200);
  ASSERT_EQ(f.post("/v1/jobs", jobBody({R"({"MC":64})"}).dump(), f.write_token).status, 200);
  static_assert(1 + 2 * kTakeOversPerToken < 2 * kLeasesPerAttempt, "the per-token bound stops it first");
  std::vector<std::string> holders;
  for (int n = 0; n < 3 * kLeasesPerAttempt; ++n) {
    std::this_thread::sleep_for(std::chrono::milliseconds(80));
    const bool a = n % 2 == 0;
    json l = json::parse(f.post("/v1/workers/" + (a ? kWorkerA : kWorkerC) + "/lease", R"({"max_items":1})",
                                a ? q.worker : other)
                             .body);
    if (l.at("items").empty()) break;
    holders.push_back(a ? kWorkerA : kWorkerC);
  }
  ASSERT_EQ(holders.size(), static_cast<size_t>(1 + 2 * kTakeOversPerToken)) << "leases of the contested item";
  // Neither takes it again, however long it is held; the last holder's report is recorded.
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  EXPECT_TRUE(json::parse(f.post("/v1/workers/" + kWorkerC + "/lease", R"({"max_items":1})", other).body).at("items").empty());
  const bool last_a = holders.back() == kWorkerA;
  Reply rep = f.post("/v1/workers/" + holders.back() + "/report",
                     json{{"job_id", kJob}, {"item", 0}, {"records", json::array({recordToJson(measured(R"({"MC":64})", 50))})}}
                         .dump(),
                     last_a ? q.worker : other);
  ASSERT_EQ(rep.status, 200) << rep.body;
  EXPECT_GT(json::parse(rep.body).value("record_id", 0), 0) << rep.body;
  EXPECT_EQ(json::parse(f.get("/v1/jobs/" + kJob, f.write_token).body).value("state", ""), "done");
}

// Issue 47, the loop behind the total bound. Before: a token's idle ids took over an honest
// worker's item once it was held past steal_after_s, let each lease expire, and did it again after
// spending its expiries of the item (a take-over did not ask), while the honest holder's report
// was refused: the item went round without end. Now a token that spent its expiries takes the item
// over no more, and a holder whose item was taken over still reports it if it reports first. The
// neighbours: a worker that never held the item cannot report it; after the first report the later
// one is refused.
TEST_P(JobQueue, ATokenThatSpentItsExpiriesTakesNoMoreOverAndTheFirstHoldersReportWins) {
  ServerOptions o = queueOptions();
  o.queue.lease_s = 0.3;
  o.queue.steal_after_s = 0.1;
  QueueFixture q(GetParam(), o);
  ServerFixture& f = q.f;
  auto tokens = TokenStore::open(f.db);
  const std::string hog = *(*tokens)->add("box2", Scope::Worker);
  ASSERT_TRUE(test::awaitToken(f.url(), hog));  // the server's token refresh
  ASSERT_EQ(q.registerWorker(kWorkerA, "x86-64-v4").status, 200);
  ASSERT_EQ(q.registerWorker(kWorkerB, "x86-64-v4").status, 200);  // never holds the item
  ASSERT_EQ(f.post("/v1/workers", json{{"id", kWorkerC}, {"target", "host"}, {"arch", "x86-64-v4"}, {"units", 2}}.dump(),
                   hog)
                .status,
            200);
  ASSERT_EQ(f.post("/v1/jobs", jobBody({R"({"MC":64})"}).dump(), f.write_token).status, 200);
  auto leaseBy = [&](const std::string& id, const std::string& token) {
    return json::parse(f.post("/v1/workers/" + id + "/lease", R"({"max_items":1})", token).body).at("items").size();
  };
  ASSERT_EQ(q.lease(kWorkerA, 1).at("items").size(), 1u);
  int taken = 0;
  for (int n = 0; n < kExpiriesPerToken + 2; ++n) {
    // A holds and renews its lease past steal_after_s; C takes the item over and lets its lease
    // expire; A takes it back.
    ASSERT_EQ(f.post("/v1/workers/" + kWorkerA + "/heartbeat", "", q.worker).status, 200);
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    ASSERT_EQ(f.post("/v1/workers/" + kWorkerA + "/heartbeat", "", q.worker).status, 200);
    if (leaseBy(kWorkerC, hog) == 0) break;
    ++taken;
    std::this_thread::sleep_for(std::chrono::milliseconds(350));
    ASSERT_EQ(leaseBy(kWorkerA, q.worker), 1u) << "C's lease expired";
  }
  EXPECT_EQ(taken, kExpiriesPerToken) << "the hoarding token kept taking the item over";
  ASSERT_EQ(q.report(kWorkerA, 0, measured(R"({"MC":64})", 50)).status, 200);

  // A second job: C takes A's item over (its first time), and A, still measuring, reports first.
  const std::string kJob2 = std::string(31, 'f') + "6";
  json body = jobBody({R"({"MC":32})"});
  body["id"] = kJob2;
  ASSERT_EQ(f.post("/v1/jobs", body.dump(), f.write_token).status, 200);
  ASSERT_EQ(leaseBy(kWorkerA, q.worker), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  ASSERT_EQ(f.post("/v1/workers/" + kWorkerA + "/heartbeat", "", q.worker).status, 200);
  ASSERT_EQ(leaseBy(kWorkerC, hog), 1u);
  auto report = [&](const std::string& id, const std::string& token) {
    return f.post("/v1/workers/" + id + "/report",
                  json{{"job_id", kJob2}, {"item", 0}, {"records", json::array({recordToJson(measured(R"({"MC":32})", 50))})}}
                      .dump(),
                  token);
  };
  EXPECT_EQ(report(kWorkerB, q.worker).status, 409) << "a worker that never held the item";
  Reply a = report(kWorkerA, q.worker);
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(json::parse(a.body).value("outcome", ""), "recorded");
  EXPECT_EQ(report(kWorkerC, hog).status, 409) << "the later report";
  json j = json::parse(f.get("/v1/jobs/" + kJob2, f.write_token).body);
  EXPECT_EQ(j.value("state", ""), "done") << j.dump();
  EXPECT_EQ(j.at("items")[0].value("worker", ""), kWorkerA);
}

// Issue 47, finding 4. Before: a write token's false spot check on its own one-item job set aside
// every record the checked worker reported, other submitters' jobs included. Now the check sets
// aside only the records of the checking submitter's jobs; the other submitter's record stays.
TEST_P(JobQueue, ASpotCheckSetsAsideOnlyTheCheckingSubmittersRecords) {
  QueueFixture q(GetParam());
  ServerFixture& f = q.f;
  const std::string kJob2 = std::string(31, 'f') + "6";
  ASSERT_EQ(q.registerWorker(kWorkerA, "x86-64-v4").status, 200);
  ASSERT_EQ(f.post("/v1/jobs", jobBody({R"({"MC":64})"}).dump(), f.write_token).status, 200);
  json second = jobBody({R"({"MC":32})"});
  second["id"] = kJob2;
  ASSERT_EQ(f.post("/v1/jobs", second.dump(), q.other_writer).status, 200);
  json leased = q.lease(kWorkerA, 8);
  ASSERT_EQ(leased.at("items").size(), 2u) << leased.dump();
  for (const auto& [job, cfg] : {std::pair{kJob, R"({"MC":64})"}, {kJob2, R"({"MC":32})"}}) {
    Reply r = f.post("/v1/workers/" + kWorkerA + "/report",
                     json{{"job_id", job}, {"item", 0}, {"records", json::array({recordToJson(measured(cfg, 50))})}}.dump(),
                     q.worker);
    ASSERT_EQ(r.status, 200) << r.body;
  }
  // writer2 "measures" its own item 10x slower: the worker is quarantined, one record set aside.
  Reply check = f.post("/v1/jobs/" + kJob2 + "/check",
                       json{{"item", 0}, {"record", recordToJson(measured(R"({"MC":32})", 500))}}.dump(), q.other_writer);
  ASSERT_EQ(check.status, 200) << check.body;
  json answer = json::parse(check.body);
  EXPECT_EQ(answer.at("quarantined").value("records", -1), 1) << answer.dump();
  // The first submitter's record of the same worker is still listed (not set aside).
  json listed = json::parse(f.get("/v1/records?key_id=" + keyIdOf(test::keyFor(0)), f.read_token).body)["records"];
  int mc64 = 0;
  for (const json& r : listed) mc64 += r["config"] == json::parse(R"({"MC":64})");
  EXPECT_EQ(mc64, 1) << listed.dump();
}

// Issue 47, what to build 5 (a worker's hardware). A registration that brings its probe is
// checked against it: the registered model must be the probed one, the threads at most its cores,
// the ISA level one its flags carry; the neighbour, a registration that agrees with its probe, is
// accepted with the probe's signature.
TEST_P(JobQueue, AWorkersRegisteredHardwareIsCheckedAgainstItsProbe) {
  QueueFixture q(GetParam());
  ServerFixture& f = q.f;
  const json probe = {{"model", "AMD EPYC 7B13"}, {"cores", 2}, {"isa", {"sse4_2", "avx", "avx2", "fma", "avx512f"}},
                      {"l1d", 32768}, {"l2", 524288}, {"l3", 33554432}};
  json w = {{"id", kWorkerA}, {"target", "host"}, {"arch", "x86-64-v4"}, {"units", 2}, {"model", "AMD EPYC 7B13"},
            {"probe", probe}};
  Reply ok = f.post("/v1/workers", w.dump(), q.worker);
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(json::parse(ok.body).value("probe_signature", "").size(), 16u) << ok.body;
  const auto refusal = [&](json body, const std::string& field) {
    body["id"] = kWorkerB;
    Reply r = f.post("/v1/workers", body.dump(), q.worker);
    EXPECT_EQ(r.status, 422) << body.dump();
    EXPECT_NE(r.body.find(field), std::string::npos) << r.body;
  };
  json other_model = w;
  other_model["model"] = "Intel(R) Xeon(R) Platinum 8480+";
  refusal(other_model, "probe.model");
  json more_threads = w;
  more_threads["units"] = 4;
  refusal(more_threads, "probe.cores");
  json no_avx512 = w;
  no_avx512["probe"]["isa"] = {"sse4_2", "avx", "avx2", "fma"};
  refusal(no_avx512, "avx512f");
  EXPECT_EQ(json::parse(f.get("/v1/workers", f.read_token).body).at("workers").size(), 1u);
}

// Issue 47, what to build 5 (like with like). A spot check is judged at the noise's factor when the
// submitter's machine is the worker's model, and with room for another CPU of the key's level and
// threads (contradicted past 4x) when it is not: a worker naming another model is still caught
// lying by an order of magnitude (24 us claimed, 314 us true), while an honest worker of another
// model measured 3x faster than the submitter's machine is not set aside (the neighbour); the same
// 3x from the worker's own model is a contradiction.
TEST_P(JobQueue, ASpotCheckComparesLikeWithLike) {
  struct Case {
    const char* checker_model;
    double claimed_us, measured_us;
    bool quarantined;
  };
  QueueFixture q(GetParam());
  ServerFixture& f = q.f;
  int n = 0;
  for (const Case& c : {Case{"another cpu", 24, 314, true}, Case{"another cpu", 100, 300, false},
                        Case{"cpu", 100, 300, true}}) {
    SCOPED_TRACE(std::string(c.checker_model) + " " + std::to_string(c.measured_us / c.claimed_us) + "x");
    // A worker (model "cpu") and a job of its own for each case.
    const std::string worker = std::string(31, 'a') + std::to_string(++n), job = std::string(31, 'd') + std::to_string(n);
    const std::string config = R"({"MC":)" + std::to_string(8 << n) + "}";
    ASSERT_EQ(q.registerWorker(worker, "x86-64-v4").status, 200);
    json body = jobBody({config});
    body["id"] = job;
    ASSERT_EQ(f.post("/v1/jobs", body.dump(), f.write_token).status, 200);
    ASSERT_EQ(q.lease(worker, 1).at("items").size(), 1u);
    Reply rep = f.post("/v1/workers/" + worker + "/report",
                       json{{"job_id", job}, {"item", 0}, {"records", json::array({recordToJson(measured(config, c.claimed_us))})}}
                           .dump(),
                       q.worker);
    ASSERT_EQ(rep.status, 200) << rep.body;
    Record mine = measured(config, c.measured_us);
    mine.provenance.cpu_model = c.checker_model;
    Reply check = f.post("/v1/jobs/" + job + "/check", json{{"item", 0}, {"record", recordToJson(mine)}}.dump(),
                         f.write_token);
    ASSERT_EQ(check.status, 200) << check.body;
    EXPECT_EQ(json::parse(check.body).contains("quarantined"), c.quarantined) << check.body;
  }
}

// Issue 47, what to build 5 (the probe signature kept). Before: a worker's probe signature was
// checked at registration and answered, not kept, so its id could register again (after a restart
// as well) as another CPU model, and a submitter's spot check from the worker's first model then
// gave it the room of another model: 300 us measured against 100 claimed, not contradicted. Now
// the signature is stored: after a restart the id registers again with its own probe (the
// neighbour) but not with another one or none (409), and the check judges it as the model it
// registered: quarantined.
TEST_P(JobQueue, AWorkersProbeSignatureIsKeptAcrossARestart) {
  QueueFixture q(GetParam());
  ServerFixture& f = q.f;
  const json probe = {{"model", "cpu"}, {"cores", 2}, {"isa", {"sse4_2", "avx", "avx2", "fma", "avx512f"}}};
  const json w = {{"id", kWorkerA}, {"target", "host"}, {"arch", "x86-64-v4"}, {"units", 2},
                  {"model", "cpu"},  {"slots", 8},      {"probe", probe}};
  Reply first = f.post("/v1/workers", w.dump(), q.worker);
  ASSERT_EQ(first.status, 200) << first.body;
  const std::string sig = json::parse(first.body).value("probe_signature", "");
  ASSERT_EQ(sig.size(), 16u) << first.body;

  f.server->stop();
  f.server->wait();
  ServerOptions o = queueOptions();
  o.db_path = f.db;
  o.version = "test";
  auto restarted = CacheServer::start(o);
  ASSERT_TRUE(restarted.ok()) << restarted.error().message;
  f.server = std::move(*restarted);

  const json listed = json::parse(f.get("/v1/workers?all=1", f.read_token).body);
  ASSERT_EQ(listed.at("workers").size(), 1u) << listed.dump();
  EXPECT_EQ(listed["workers"][0].value("probe_signature", ""), sig);
  json other = w;
  other["model"] = "another cpu";
  other["probe"]["model"] = "another cpu";
  Reply renamed = f.post("/v1/workers", other.dump(), q.worker);
  EXPECT_EQ(renamed.status, 409) << renamed.body;
  EXPECT_NE(renamed.body.find("probe signature " + sig), std::string::npos) << renamed.body;
  json none = w;
  none.erase("probe");
  EXPECT_EQ(f.post("/v1/workers", none.dump(), q.worker).status, 409);
  Reply again = f.post("/v1/workers", w.dump(), q.worker);
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(json::parse(again.body).value("probe_signature", ""), sig);

  // The spot check still compares like with like: the worker is the model it registered.
  const std::string config = R"({"MC":16})";
  ASSERT_EQ(f.post("/v1/jobs", jobBody({config}).dump(), f.write_token).status, 200);
  ASSERT_EQ(q.lease(kWorkerA, 1).at("items").size(), 1u);
  ASSERT_EQ(q.report(kWorkerA, 0, measured(config, 100)).status, 200);
  Record mine = measured(config, 300);
  mine.provenance.cpu_model = "cpu";
  Reply check = f.post("/v1/jobs/" + kJob + "/check", json{{"item", 0}, {"record", recordToJson(mine)}}.dump(), f.write_token);
  ASSERT_EQ(check.status, 200) << check.body;
  EXPECT_TRUE(json::parse(check.body).contains("quarantined")) << check.body;
}

}  // namespace
}  // namespace tessera::cache
