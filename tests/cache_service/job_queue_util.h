// Owns what the job queue's tests share (jobs_test.cpp, jobs_hostile_test.cpp): a server on a
// loopback port with a worker token and a second write token, jobs and measured records to put on
// it, and the test suite that runs every test on each engine built.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "store/record_json.h"
#include "store/tokens.h"
#include "tests/cache_service/test_util.h"

namespace tessera::cache::job_test {


using nlohmann::json;
using test::makeRecord;
using test::Reply;
using test::ServerFixture;

const std::string kWorkerA = std::string(31, 'a') + "1";
const std::string kWorkerB = std::string(31, 'b') + "2";
const std::string kWorkerC = std::string(31, 'c') + "3";
const std::string kJob = std::string(31, 'd') + "4";

inline ServerOptions queueOptions() {
  ServerOptions o = test::testOptions();
  o.queue.lease_s = 0.8;
  o.queue.worker_ttl_s = 30;
  return o;
}

struct QueueFixture {
  explicit QueueFixture(test::Engine engine, ServerOptions o = queueOptions()) : f(o, true, engine) {
    auto tokens = TokenStore::open(f.db);
    if (!tokens.ok()) throw std::runtime_error(tokens.error().message);
    worker = *(*tokens)->add("box1", Scope::Worker);
    other_writer = *(*tokens)->add("writer2", Scope::Write);
    // The server's next token refresh.
    if (!test::awaitToken(f.url(), worker) || !test::awaitToken(f.url(), other_writer))
      throw std::runtime_error("the server did not pick up the tokens");
  }
  Reply registerWorker(const std::string& id, const std::string& arch) {
    return f.post("/v1/workers",
                  json{{"id", id}, {"target", "host"}, {"arch", arch}, {"units", 2}, {"model", "cpu"}, {"slots", 8}}.dump(),
                  worker);
  }
  json lease(const std::string& id, int max_items) {
    Reply r = f.post("/v1/workers/" + id + "/lease", json{{"max_items", max_items}}.dump(), worker);
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body, nullptr, false);
  }
  Reply report(const std::string& id, int64_t item, const Record& rec) {
    return f.post("/v1/workers/" + id + "/report",
                  json{{"job_id", kJob}, {"item", item}, {"records", json::array({recordToJson(rec)})}}.dump(), worker);
  }
  ServerFixture f;
  std::string worker, other_writer;
};

inline json jobBody(std::vector<std::string> configs, const std::string& kernel = "kernel text") {
  json cfgs = json::array();
  for (const auto& c : configs) cfgs.push_back(json::parse(c));
  return json{{"id", kJob}, {"key", hardKeyToJson(test::keyFor(0))}, {"kernel", kernel}, {"configs", cfgs}};
}

inline Record measured(const std::string& config, double median_us) {
  return makeRecord({.key = 0, .median_us = median_us, .config = config});
}

// Every test runs on both engines: the queue's rules are the store interface's, not SQLite's.
class JobQueue : public ::testing::TestWithParam<test::Engine> {};

}  // namespace tessera::cache::job_test
