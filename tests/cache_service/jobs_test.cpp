// Tests the measurement job queue through the real server on a loopback port (api_jobs.cpp,
// sql_job_queue.cpp): worker tokens may only register, lease and report, and no other token may
// lease; a job is leased only to workers of its key's hardware; a lease that is not renewed
// expires and its item goes to another worker, whose report is the one recorded, once; a
// report must carry the job's key and the item's config; and the limits on job sizes.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "client/job_client.h"
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
using test::makeRecord;
using test::Reply;
using test::ServerFixture;

TEST_P(JobQueue, WorkerTokensOnlyLeaseAndReportAndOnlyThey) {
  QueueFixture q(GetParam());
  ServerFixture& f = q.f;
  // A worker token reads nothing and writes no record or job.
  EXPECT_EQ(f.get("/status", q.worker).status, 403);
  EXPECT_EQ(f.get("/v1/records", q.worker).status, 403);
  EXPECT_EQ(f.get("/v1/workers", q.worker).status, 403);
  EXPECT_EQ(f.post("/v1/records", encodeRecord(makeRecord({})), q.worker).status, 403);
  EXPECT_EQ(f.post("/v1/jobs", jobBody({R"({"MC":64})"}).dump(), q.worker).status, 403);
  Reply forbidden = f.post("/v1/admin/records/delete", R"({"writer":"x"})", q.worker);
  EXPECT_EQ(forbidden.status, 403);
  // No other scope may register, lease or report, not even admin.
  for (const auto& t : {f.read_token, f.write_token, f.admin_token}) {
    EXPECT_EQ(f.post("/v1/workers", json{{"id", kWorkerA}, {"target", "host"}, {"arch", "x86-64-v4"}, {"units", 2}}.dump(), t)
                  .status,
              403);
    EXPECT_EQ(f.post("/v1/workers/" + kWorkerA + "/lease", "{}", t).status, 403);
  }
  ASSERT_EQ(q.registerWorker(kWorkerA, "x86-64-v4").status, 200);
  EXPECT_EQ(f.post("/v1/workers/" + kWorkerA + "/heartbeat", "", q.worker).status, 200);
  // A worker id is its token's: another token cannot take it over.
  auto tokens = TokenStore::open(f.db);
  const std::string thief = *(*tokens)->add("box2", Scope::Worker);
  ASSERT_TRUE(test::awaitToken(f.url(), thief));
  EXPECT_EQ(f.post("/v1/workers", json{{"id", kWorkerA}, {"target", "host"}, {"arch", "x86-64-v4"}, {"units", 2}}.dump(), thief)
                .status,
            409);
  EXPECT_EQ(f.post("/v1/workers/" + kWorkerA + "/lease", "{}", thief).status, 404);
}

TEST_P(JobQueue, LeasesMatchHardwareExpireAndRecordEachItemOnce) {
  QueueFixture q(GetParam());
  ServerFixture& f = q.f;
  ASSERT_EQ(q.registerWorker(kWorkerA, "x86-64-v4").status, 200);
  ASSERT_EQ(q.registerWorker(kWorkerB, "x86-64-v3").status, 200);  // other hardware than the key's
  ASSERT_EQ(q.registerWorker(kWorkerC, "x86-64-v4").status, 200);
  const std::string c0 = R"({"MC":64})", c1 = R"({"MC":32})";
  Reply sub = f.post("/v1/jobs", jobBody({c0, c1}).dump(), f.write_token);
  ASSERT_EQ(sub.status, 200) << sub.body;
  EXPECT_EQ(json::parse(sub.body).value("live_workers", 0), 2);  // A and C
  // A retried submission is the same job; another submitter cannot take its id.
  EXPECT_FALSE(json::parse(f.post("/v1/jobs", jobBody({c0, c1}).dump(), f.write_token).body).value("created", true));
  EXPECT_EQ(f.post("/v1/jobs", jobBody({c0, c1}).dump(), q.other_writer).status, 409);
  EXPECT_EQ(f.get("/v1/jobs/" + kJob, q.other_writer).status, 404);  // not theirs to see

  EXPECT_TRUE(q.lease(kWorkerB, 8).at("items").empty());  // never to mismatched hardware
  json a = q.lease(kWorkerA, 1);
  ASSERT_EQ(a.at("items").size(), 1u);
  EXPECT_EQ(a.at("items")[0].at("item"), 0);
  ASSERT_EQ(a.at("jobs").size(), 1u);
  EXPECT_EQ(a.at("jobs")[0].at("kernel"), "kernel text");
  // A stops renewing (as a killed worker does): once its lease expires, C takes its item.
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  json c = q.lease(kWorkerC, 8);
  ASSERT_EQ(c.at("items").size(), 2u) << c.dump();
  EXPECT_EQ(c.at("items")[0].at("item"), 0);
  EXPECT_EQ(c.at("items")[0].at("attempt"), 2);

  // A report must carry the job's key and the item's config.
  Reply wrong_cfg = q.report(kWorkerC, 0, measured(c1, 50));
  EXPECT_EQ(wrong_cfg.status, 422) << wrong_cfg.body;
  Record other_key = makeRecord({.key = 1, .median_us = 50, .config = c0});
  EXPECT_EQ(q.report(kWorkerC, 0, other_key).status, 422);
  Record estimated = measured(c0, 50);
  estimated.status = RecordStatus::Estimated;
  EXPECT_EQ(q.report(kWorkerC, 0, estimated).status, 422);

  // The holder's report is recorded once; the late report of the lost worker is refused.
  Reply first = q.report(kWorkerC, 0, measured(c0, 50));
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(json::parse(first.body).value("outcome", ""), "recorded");
  Reply late = q.report(kWorkerA, 0, measured(c0, 40));
  EXPECT_EQ(late.status, 409) << late.body;
  EXPECT_NE(late.body.find("lease-lost"), std::string::npos);
  Reply again = q.report(kWorkerC, 0, measured(c0, 50));
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(json::parse(again.body).value("outcome", ""), "duplicate");
  ASSERT_EQ(q.report(kWorkerC, 1, measured(c1, 60)).status, 200);

  Reply job = f.get("/v1/jobs/" + kJob, f.write_token);
  ASSERT_EQ(job.status, 200) << job.body;
  json j = json::parse(job.body);
  EXPECT_EQ(j.value("state", ""), "done");
  EXPECT_EQ(j.value("done", 0), 2);
  for (const json& it : j.at("items")) {
    EXPECT_EQ(it.value("worker", ""), kWorkerC);
    EXPECT_EQ(it.at("result").at("records").size(), 1u);
  }
  // Two items, two records, both written by the worker's token.
  Reply recs = f.get("/v1/records?key_id=" + keyIdOf(test::keyFor(0)), f.read_token);
  ASSERT_EQ(recs.status, 200);
  json rj = json::parse(recs.body);
  ASSERT_EQ(rj.at("records").size(), 2u);
  for (const json& r : rj.at("records")) EXPECT_EQ(r.value("writer", ""), "box1");
  EXPECT_TRUE(q.lease(kWorkerA, 8).at("items").empty());
}

// Issue 26: a worker that stops deregisters; it is not live from then on (not after its TTL), its
// leased items go to another worker at once (without waiting for the lease to expire), it is
// unknown to beats and leases until it registers again, and only its own token may stop it.
TEST_P(JobQueue, ADeregisteredWorkerIsNotLiveAndItsItemsGoBackAtOnce) {
  ServerOptions o = queueOptions();
  o.queue.lease_s = 60;  // nothing expires during the test: only the deregistration frees A's items
  QueueFixture q(GetParam(), o);
  ServerFixture& f = q.f;
  auto tokens = TokenStore::open(f.db);
  const std::string thief = *(*tokens)->add("box2", Scope::Worker);
  ASSERT_TRUE(test::awaitToken(f.url(), thief));  // the server's token refresh
  ASSERT_EQ(q.registerWorker(kWorkerA, "x86-64-v4").status, 200);
  ASSERT_EQ(q.registerWorker(kWorkerC, "x86-64-v4").status, 200);
  ASSERT_EQ(f.post("/v1/jobs", jobBody({R"({"MC":64})", R"({"MC":32})"}).dump(), f.write_token).status, 200);
  ASSERT_EQ(q.lease(kWorkerA, 8).at("items").size(), 2u);
  EXPECT_TRUE(q.lease(kWorkerC, 8).at("items").empty());  // A holds both (negative control)
  auto live = [&] {
    std::set<std::string> ids;
    Reply list = f.get("/v1/workers", f.read_token);
    EXPECT_EQ(list.status, 200) << list.body;
    const json body = json::parse(list.body);
    for (const json& w : body.at("workers")) ids.insert(w.at("id").get<std::string>());
    return ids;
  };
  EXPECT_EQ(live(), (std::set<std::string>{kWorkerA, kWorkerC}));

  // Another token cannot stop A, nor can any other scope; an unknown id is a 404.
  EXPECT_EQ(f.post("/v1/workers/" + kWorkerA + "/deregister", "", thief).status, 404);
  EXPECT_EQ(f.post("/v1/workers/" + kWorkerA + "/deregister", "", f.write_token).status, 403);
  EXPECT_EQ(f.post("/v1/workers/" + kWorkerB + "/deregister", "", q.worker).status, 404);
  EXPECT_EQ(live(), (std::set<std::string>{kWorkerA, kWorkerC}));

  Reply stop = f.post("/v1/workers/" + kWorkerA + "/deregister", "", q.worker);
  ASSERT_EQ(stop.status, 200) << stop.body;
  EXPECT_EQ(json::parse(stop.body).value("released", -1), 2);
  EXPECT_EQ(json::parse(f.post("/v1/workers/" + kWorkerA + "/deregister", "", q.worker).body).value("released", -1), 0);
  EXPECT_EQ(live(), std::set<std::string>{kWorkerC});
  EXPECT_EQ(json::parse(f.get("/v1/jobs/" + kJob, f.write_token).body).value("live_workers", 0), 1);
  EXPECT_EQ(q.lease(kWorkerC, 8).at("items").size(), 2u);
  EXPECT_EQ(f.post("/v1/workers/" + kWorkerA + "/heartbeat", "", q.worker).status, 404);
  EXPECT_EQ(f.post("/v1/workers/" + kWorkerA + "/lease", R"({"max_items":1})", q.worker).status, 404);
  ASSERT_EQ(q.registerWorker(kWorkerA, "x86-64-v4").status, 200);  // back again
  EXPECT_EQ(live(), (std::set<std::string>{kWorkerA, kWorkerC}));
}

// Issue 30: a poll that passes back the cursor of its last answer gets only the items that changed
// since (leased, done), with the job's state and done count; a poll without it (an older client)
// still gets every item. The job client follows the cursor and still hands its callers every item.
TEST_P(JobQueue, JobPollsReturnOnlyWhatChangedSinceTheirCursor) {
  ServerOptions o = queueOptions();
  o.queue.lease_s = 60;
  QueueFixture q(GetParam(), o);
  ServerFixture& f = q.f;
  ASSERT_EQ(q.registerWorker(kWorkerA, "x86-64-v4").status, 200);
  const std::string c0 = R"({"MC":64})", c1 = R"({"MC":32})", c2 = R"({"MC":16})";
  ASSERT_EQ(f.post("/v1/jobs", jobBody({c0, c1, c2}).dump(), f.write_token).status, 200);
  auto poll = [&](const std::string& query) {
    Reply r = f.get("/v1/jobs/" + kJob + query, f.write_token);
    EXPECT_EQ(r.status, 200) << query << " " << r.body;
    return json::parse(r.body, nullptr, false);
  };
  auto itemsOf = [](const json& j) {
    std::vector<std::pair<int64_t, std::string>> out;
    for (const json& it : j.at("items")) out.emplace_back(it.at("item").get<int64_t>(), it.at("state").get<std::string>());
    return out;
  };
  json full = poll("");
  ASSERT_EQ(full.at("items").size(), 3u);
  const int64_t c_start = full.at("cursor").get<int64_t>();
  EXPECT_TRUE(poll("?since=" + std::to_string(c_start)).at("items").empty());  // nothing moved yet

  ASSERT_EQ(q.lease(kWorkerA, 1).at("items").size(), 1u);
  json leased = poll("?since=" + std::to_string(c_start));
  EXPECT_EQ(itemsOf(leased), (std::vector<std::pair<int64_t, std::string>>{{0, "leased"}}));
  const int64_t c_leased = leased.at("cursor").get<int64_t>();
  EXPECT_GT(c_leased, c_start);
  EXPECT_TRUE(poll("?since=" + std::to_string(c_leased)).at("items").empty());

  ASSERT_EQ(q.report(kWorkerA, 0, measured(c0, 50)).status, 200);
  json done = poll("?since=" + std::to_string(c_leased));
  EXPECT_EQ(itemsOf(done), (std::vector<std::pair<int64_t, std::string>>{{0, "done"}}));
  EXPECT_EQ(done.at("items")[0].at("result").at("records").size(), 1u);
  EXPECT_EQ(done.value("done", -1), 1);
  EXPECT_EQ(done.value("state", ""), "open");
  // An older client's poll: every item, as before.
  EXPECT_EQ(itemsOf(poll("")), (std::vector<std::pair<int64_t, std::string>>{{0, "done"}, {1, "queued"}, {2, "queued"}}));
  for (const std::string bad : {"?since=-1", "?since=x", "?since=", "?since=99999999999999999999", "?after=1"})
    EXPECT_EQ(f.get("/v1/jobs/" + kJob + bad, f.write_token).status, 400) << bad;

  // The job client: every item every time, whatever it asked the service for.
  JobClient client({{f.url()}, f.write_token, "", 5, 5});
  for (int round = 0; round < 3; ++round) {
    if (round == 1) ASSERT_EQ(q.lease(kWorkerA, 1).at("items").size(), 1u);
    if (round == 2) ASSERT_EQ(q.report(kWorkerA, 1, measured(c1, 60)).status, 200);
    auto p = client.progress(kJob);
    ASSERT_TRUE(p.ok()) << p.error().message;
    ASSERT_EQ(p->items.size(), 3u) << round;
    EXPECT_EQ(p->items[0].state, "done");
    EXPECT_TRUE(p->items[0].result.has_value());
    EXPECT_EQ(p->items[1].state, round == 0 ? "queued" : round == 1 ? "leased" : "done") << round;
    EXPECT_EQ(p->items[2].state, "queued");
  }
}

// Issue 30: a worker registers the driver and runtime it measures with; the list shows them, and a
// hostile value is refused like any other field.
TEST_P(JobQueue, WorkersRegisterTheirDriverAndRuntimeVersions) {
  QueueFixture q(GetParam());
  ServerFixture& f = q.f;
  json w = {{"id", kWorkerA}, {"target", "host"}, {"arch", "x86-64-v4"}, {"units", 2},
            {"driver_version", "550.54.15"}, {"runtime_version", "12.4"}};
  ASSERT_EQ(f.post("/v1/workers", w.dump(), q.worker).status, 200);
  const json list = json::parse(f.get("/v1/workers", f.read_token).body);
  ASSERT_EQ(list.at("workers").size(), 1u);
  EXPECT_EQ(list.at("workers")[0].value("driver_version", ""), "550.54.15");
  EXPECT_EQ(list.at("workers")[0].value("runtime_version", ""), "12.4");
  w["runtime_version"] = std::string(300, '9');
  EXPECT_EQ(f.post("/v1/workers", w.dump(), q.worker).status, 422);
  w["runtime_version"] = std::string("12.4\x07");
  EXPECT_EQ(f.post("/v1/workers", w.dump(), q.worker).status, 422);
}

TEST_P(JobQueue, ItemsWhoseLeasesKeepExpiringAreGivenUp) {
  ServerOptions o = queueOptions();
  o.queue.lease_s = 0.5;
  o.queue.max_attempts = 2;
  ServerFixture f(o, true, GetParam());
  auto tokens = TokenStore::open(f.db);
  // Two machines with a token each: a lost lease counts against its item once per token.
  const std::string box = *(*tokens)->add("box", Scope::Worker), box2 = *(*tokens)->add("box2", Scope::Worker);
  ASSERT_TRUE(test::awaitToken(f.url(), box) && test::awaitToken(f.url(), box2));  // the server's token refresh
  std::map<std::string, std::string> token_of = {{kWorkerA, box}, {kWorkerC, box2}};
  for (const auto& id : {kWorkerA, kWorkerC})
    ASSERT_EQ(f.post("/v1/workers", json{{"id", id}, {"target", "host"}, {"arch", "x86-64-v4"}, {"units", 2}}.dump(),
                     token_of[id])
                  .status,
              200);
  ASSERT_EQ(f.post("/v1/jobs", jobBody({R"({"MC":64})"}).dump(), f.write_token).status, 200);
  auto lease = [&](const std::string& id) {
    return json::parse(f.post("/v1/workers/" + id + "/lease", R"({"max_items":1})", token_of[id]).body);
  };
  // A candidate that takes its worker down every time: after max_attempts tokens lost it, it is
  // failed (a result saying so, no record) instead of killing the fleet one worker at a time.
  EXPECT_EQ(lease(kWorkerA).at("items").size(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  EXPECT_EQ(lease(kWorkerC).at("items").size(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  EXPECT_TRUE(lease(kWorkerA).at("items").empty());
  json j = json::parse(f.get("/v1/jobs/" + kJob, f.write_token).body);
  EXPECT_EQ(j.value("state", ""), "done") << j.dump();
  EXPECT_EQ(j.at("items")[0].at("result").value("lost", 0), 2) << j.dump();
  EXPECT_EQ(json::parse(f.get("/v1/records", f.read_token).body).at("records").size(), 0u);
}

TEST_P(JobQueue, JobsAreBounded) {
  QueueFixture q(GetParam());
  ServerFixture& f = q.f;
  auto submit = [&](const json& body) { return f.post("/v1/jobs", body.dump(), f.write_token); };
  std::vector<std::string> many;
  for (int i = 0; i < 1001; ++i) many.push_back(R"({"MC":)" + std::to_string(i + 1) + "}");
  EXPECT_EQ(submit(jobBody(many)).status, 422);  // more than 1000 items
  EXPECT_EQ(submit(jobBody({R"({"MC":64})", R"({"MC":64})"})).status, 422);  // a config twice
  EXPECT_EQ(submit(jobBody({R"({"MC":64})"}, std::string((1u << 20) + 1, 'x'))).status, 422);  // IR text > 1 MiB
  EXPECT_EQ(submit(jobBody({R"({"MC":64})"}, std::string("a\0b", 3))).status, 422);
  EXPECT_EQ(submit(jobBody({R"({"MC":64})"}, "")).status, 422);
  json big_settings = jobBody({R"({"MC":64})"});
  big_settings["settings"] = json{{"pad", std::string(17 * 1024, 'x')}};
  EXPECT_EQ(submit(big_settings).status, 422);
  json bad_id = jobBody({R"({"MC":64})"});
  bad_id["id"] = "../../etc";
  EXPECT_EQ(submit(bad_id).status, 422);
  json extra = jobBody({R"({"MC":64})"});
  extra["submitter"] = "admin";  // the service names the submitter, never the body
  EXPECT_EQ(submit(extra).status, 422);
  json big_config = jobBody({R"({"MC":64})"});
  big_config["configs"][0]["pad"] = std::string(17 * 1024, 'x');
  EXPECT_EQ(submit(big_config).status, 422);
  EXPECT_EQ(f.post("/v1/workers/" + kWorkerA + "/lease", R"({"max_items":65})", q.worker).status, 422);
  EXPECT_EQ(f.post("/v1/workers/not-an-id/lease", "{}", q.worker).status, 400);
  // Nothing of that was queued.
  EXPECT_EQ(f.get("/v1/jobs/" + kJob, f.write_token).status, 404);
}

INSTANTIATE_TEST_SUITE_P(Engines, JobQueue, ::testing::ValuesIn(test::builtEngines()),
                         [](const auto& info) { return std::string(test::engineName(info.param)); });

}  // namespace
}  // namespace tessera::cache
