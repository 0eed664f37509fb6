// Owns the HTTP client of the job protocol: requests and answers as JSON, retries over replicas.
#include "client/job_client.h"


#include <chrono>
#include <thread>

#include "store/record_json.h"
#include "store/tokens.h"

namespace tessera::cache {

using nlohmann::json;

Expected<std::string> newJobId() { return randomHex(16); }

JobClient::JobClient(JobClientOptions o)
    : o_(std::move(o)), endpoints_(EndpointOptions{o_.urls, o_.token, o_.ca_cert, std::min(o_.timeout_s, 2.0)}) {}

Expected<JobClient::Answer> JobClient::call(const char* method, const std::string& path, const std::string& body) {
  using Clock = std::chrono::steady_clock;
  const auto give_up = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o_.patience_s));
  double pause = 0.1;
  for (;;) {
    auto reply = endpoints_.send(method, path, body, body.empty() ? "" : "application/json", o_.timeout_s);
    if (reply.ok() && reply->status != 502 && reply->status != 503 && reply->status != 504)
      return Answer{reply->status, std::move(reply->body)};
    if (!reply.ok() && reply.error().code == ErrorCode::InvalidArgument) return reply.takeError();  // a bad URL
    std::string why = reply.ok() ? "HTTP " + std::to_string(reply->status) : reply.error().message;
    if (Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(pause)) > give_up)
      return makeError(ErrorCode::Unavailable, "no answer from " + std::to_string(o_.urls.size()) + " service URL(s) within " +
                                               std::to_string(int(o_.patience_s)) + " s (" + why + ")");
    std::this_thread::sleep_for(std::chrono::duration<double>(pause));
    pause = std::min(pause * 2, 1.0);
  }
}

Error JobClient::refusal(const std::string& what, const Answer& a) const {
  std::string detail;
  auto j = parseJson(a.body);
  if (j.ok() && j->is_object()) detail = j->value("detail", "");
  const std::string msg = what + ": HTTP " + std::to_string(a.status) + (detail.empty() ? "" : " (" + detail + ")");
  if (a.status == 404) return makeError(ErrorCode::NotFound, msg);
  if (a.status == 401 || a.status == 403) return makeError(ErrorCode::PermissionDenied, msg);
  if (a.status == 409 && j.ok() && j->is_object() && j->value("type", "") == "urn:tessera:problem:lease-lost")
    return makeError(ErrorCode::Unsupported, msg);
  return makeError(ErrorCode::InvalidArgument, msg);
}

namespace {

Expected<json> okJson(const std::string& body, const std::string& what) {
  auto j = parseJson(body);
  if (!j.ok() || !j->is_object()) return makeError(ErrorCode::IOError, what + ": unreadable answer");
  return j;
}

Expected<JobSpec> jobFromJson(const json& j) {
  try {
    JobSpec s;
    s.id = j.at("id").get<std::string>();
    s.kind = j.at("kind").get<std::string>();
    TESSERA_ASSIGN(s.key, hardKeyFromJson(j.at("key"), "key"));
    s.key_id = keyIdOf(s.key);
    s.model = j.value("model", "");
    s.kernel = j.at("kernel").get<std::string>();
    s.settings = dumpJson(j.value("settings", json::object()));
    s.rounds = j.value("rounds", int64_t{0});
    s.first_trial = j.value("first_trial", int64_t{0});
    s.elapsed_s = j.value("elapsed_s", 0.0);
    if (!isJobId(s.id)) return makeError(ErrorCode::IOError, "lease: malformed job id");
    return s;
  } catch (const std::exception& e) {
    return makeError(ErrorCode::IOError, std::string("lease: malformed job (") + e.what() + ")");
  }
}

Expected<ItemResult> itemResultFromJson(const json& j) {
  ItemResult r;
  if (!j.is_object()) return makeError(ErrorCode::IOError, "malformed item result");
  if (auto lost = j.find("lost"); lost != j.end()) {
    r.lost = lost->is_number_integer() ? lost->get<int64_t>() : 1;
    r.lost_message = j.value("message", "lost");
    return r;
  }
  r.worker = j.value("worker", "");
  r.token = j.value("token", "");
  if (auto refused = j.find("refused"); refused != j.end()) {
    r.refused = refused->is_string() ? refused->get<std::string>() : "refused";
    if (r.refused.empty()) r.refused = "refused";
    return r;
  }
  r.compile_s = j.value("compile_s", 0.0);
  r.run_s = j.value("run_s", 0.0);
  auto recs = j.find("records");
  if (recs == j.end() || !recs->is_array()) return makeError(ErrorCode::IOError, "item result without records");
  for (size_t i = 0; i < recs->size(); ++i) {
    TESSERA_ASSIGN(Record rec, recordFromJson((*recs)[i], "records[" + std::to_string(i) + "]"));
    r.records.push_back(std::move(rec));
  }
  if (auto msgs = j.find("messages"); msgs != j.end() && msgs->is_array())
    for (const json& m : *msgs) r.messages.push_back(m.is_string() ? m.get<std::string>() : "");
  return r;
}

}  // namespace

Expected<WorkerGrant> JobClient::registerWorker(const WorkerInfo& w, const std::string& probe_json) {
  // The service's own view of a worker, less what only the service sets.
  json body = workerInfoToJson(w);
  for (const char* k : {"token", "live", "leased", "registered_at", "last_seen", "quarantined", "probe_signature"})
    body.erase(k);
  if (!probe_json.empty()) body["probe"] = json::parse(probe_json);
  TESSERA_ASSIGN(Answer a, call("POST", "/v1/workers", dumpJson(body)));
  if (a.status != 200) return refusal("register", a);
  TESSERA_ASSIGN(json j, okJson(a.body, "register"));
  WorkerGrant g;
  g.lease_s = j.value("lease_s", 60.0);
  g.heartbeat_s = j.value("heartbeat_s", 10.0);
  g.worker_ttl_s = j.value("worker_ttl_s", 30.0);
  return g;
}

Expected<int64_t> JobClient::heartbeat(const std::string& worker_id) {
  TESSERA_ASSIGN(Answer a, call("POST", "/v1/workers/" + worker_id + "/heartbeat", ""));
  if (a.status != 200) return refusal("heartbeat", a);
  TESSERA_ASSIGN(json j, okJson(a.body, "heartbeat"));
  return j.value("renewed", int64_t{0});
}

Expected<int64_t> JobClient::deregister(const std::string& worker_id) {
  TESSERA_ASSIGN(Answer a, call("POST", "/v1/workers/" + worker_id + "/deregister", ""));
  if (a.status != 200) return refusal("deregister", a);
  TESSERA_ASSIGN(json j, okJson(a.body, "deregister"));
  return j.value("released", int64_t{0});
}

Expected<LeaseGrant> JobClient::lease(const std::string& worker_id, int max_items) {
  TESSERA_ASSIGN(Answer a, call("POST", "/v1/workers/" + worker_id + "/lease", dumpJson(json{{"max_items", max_items}})));
  if (a.status != 200) return refusal("lease", a);
  TESSERA_ASSIGN(json j, okJson(a.body, "lease"));
  LeaseGrant g;
  try {
    for (const json& it : j.at("items")) {
      LeasedItem li;
      li.job_id = it.at("job_id").get<std::string>();
      li.item = it.at("item").get<int64_t>();
      li.attempt = it.value("attempt", int64_t{1});
      li.payload = dumpJson(it.at("payload"));
      g.items.push_back(std::move(li));
    }
    for (const json& jj : j.at("jobs")) {
      TESSERA_ASSIGN(JobSpec s, jobFromJson(jj));
      g.jobs.push_back(std::move(s));
    }
  } catch (const std::exception& e) {
    return makeError(ErrorCode::IOError, std::string("lease: malformed answer (") + e.what() + ")");
  }
  return g;
}

Expected<std::string> JobClient::report(const std::string& worker_id, const std::string& job_id, int64_t item,
                                        const std::vector<Record>& records, const std::vector<std::string>& messages,
                                        double compile_s, double run_s) {
  json recs = json::array();
  for (const Record& r : records) recs.push_back(recordToJson(r));
  json body = {{"job_id", job_id}, {"item", item}, {"records", recs}, {"compile_s", compile_s}, {"run_s", run_s}};
  if (!messages.empty()) {
    json msgs = json::array();
    for (const auto& m : messages) msgs.push_back(m.size() > 4096 ? m.substr(0, 4096) : m);
    body["messages"] = msgs;
  }
  TESSERA_ASSIGN(Answer a, call("POST", "/v1/workers/" + worker_id + "/report", dumpJson(body)));
  if (a.status != 200) return refusal("report", a);
  TESSERA_ASSIGN(json j, okJson(a.body, "report"));
  return j.value("outcome", "");
}

Expected<std::string> JobClient::refuse(const std::string& worker_id, const std::string& job_id, int64_t item,
                                        const std::string& why) {
  std::string text = why.size() > 4000 ? why.substr(0, 4000) : why;
  for (char& ch : text)
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ch = ' ';
  json body = {{"job_id", job_id}, {"item", item}, {"refused", text}};
  TESSERA_ASSIGN(Answer a, call("POST", "/v1/workers/" + worker_id + "/report", dumpJson(body)));
  if (a.status != 200) return refusal("report", a);
  TESSERA_ASSIGN(json j, okJson(a.body, "report"));
  return j.value("outcome", "");
}

Expected<SubmitResult> JobClient::submit(const JobSpec& job, const std::vector<std::string>& configs) {
  json cfgs = json::array();
  for (const auto& c : configs) {
    auto j = parseJson(c);
    if (!j.ok()) return makeError(ErrorCode::InvalidArgument, "submit: a config is not JSON");
    cfgs.push_back(std::move(*j));
  }
  auto settings = parseJson(job.settings.empty() ? "{}" : job.settings);
  json body = {{"id", job.id},
               {"kind", job.kind},
               {"key", hardKeyToJson(job.key)},
               {"kernel", job.kernel},
               {"settings", settings.ok() ? *settings : json::object()},
               {"configs", cfgs},
               {"first_trial", job.first_trial},
               {"elapsed_s", job.elapsed_s}};
  if (!job.model.empty()) body["model"] = job.model;
  if (job.kind == kJobRemeasure) body["rounds"] = job.rounds;
  TESSERA_ASSIGN(Answer a, call("POST", "/v1/jobs", dumpJson(body)));
  if (a.status != 200) return refusal("submit", a);
  TESSERA_ASSIGN(json j, okJson(a.body, "submit"));
  SubmitResult r;
  r.created = j.value("created", false);
  r.live_workers = j.value("live_workers", int64_t{0});
  return r;
}

Expected<JobProgress> JobClient::fetchProgress(const std::string& job_id, std::optional<int64_t> since,
                                                int64_t& cursor) {
  const std::string path = "/v1/jobs/" + job_id + (since ? "?since=" + std::to_string(*since) : "");
  TESSERA_ASSIGN(Answer a, call("GET", path, ""));
  if (a.status != 200) return refusal("job " + job_id, a);
  TESSERA_ASSIGN(json j, okJson(a.body, "job"));
  JobProgress p;
  try {
    p.state = j.at("state").get<std::string>();
    p.live_workers = j.value("live_workers", int64_t{0});
    cursor = j.value("cursor", int64_t{-1});
    for (const json& it : j.at("items")) {
      JobItemProgress ip;
      ip.item = it.at("item").get<int64_t>();
      ip.state = it.at("state").get<std::string>();
      ip.attempts = it.value("attempts", int64_t{0});
      ip.worker = it.value("worker", "");
      if (ip.state == "done") {
        TESSERA_ASSIGN(ItemResult r, itemResultFromJson(it.value("result", json())));
        ip.result = std::move(r);
      }
      p.items.push_back(std::move(ip));
    }
  } catch (const std::exception& e) {
    return makeError(ErrorCode::IOError, std::string("job: malformed answer (") + e.what() + ")");
  }
  return p;
}

Expected<JobProgress> JobClient::progress(const std::string& job_id) {
  std::optional<Followed> seen;
  {
    std::lock_guard<std::mutex> g(follow_->mu);
    if (auto it = follow_->jobs.find(job_id); it != follow_->jobs.end()) seen = it->second;
  }
  int64_t cursor = -1;
  auto got = fetchProgress(job_id, seen ? std::optional<int64_t>(seen->cursor) : std::nullopt, cursor);
  if (!got.ok() && seen && got.error().code == ErrorCode::InvalidArgument) {
    // A replica without cursors (an older service during an upgrade) refuses `since`: ask in full.
    seen.reset();
    got = fetchProgress(job_id, std::nullopt, cursor);
  }
  if (!got.ok()) return got.takeError();
  JobProgress p = std::move(*got);
  if (seen) {
    // The changed items replace what the last answer said of them.
    std::map<int64_t, JobItemProgress> items;
    for (auto& it : seen->progress.items) items[it.item] = std::move(it);
    for (auto& it : p.items) items[it.item] = std::move(it);
    p.items.clear();
    for (auto& [n, it] : items) p.items.push_back(std::move(it));
  }
  std::lock_guard<std::mutex> g(follow_->mu);
  if (cursor < 0 || p.state != "open") {
    follow_->jobs.erase(job_id);
  } else {
    if (!follow_->jobs.count(job_id) && follow_->jobs.size() >= kMaxFollowed) follow_->jobs.erase(follow_->jobs.begin());
    follow_->jobs[job_id] = Followed{cursor, p};
  }
  return p;
}

Status JobClient::cancel(const std::string& job_id) {
  TESSERA_ASSIGN(Answer a, call("POST", "/v1/jobs/" + job_id + "/cancel", ""));
  if (a.status != 200) return refusal("cancel", a);
  return {};
}

Expected<CheckVerdict> JobClient::check(const std::string& job_id, int64_t item, const Record& here) {
  json body = {{"item", item}, {"record", recordToJson(here)}};
  TESSERA_ASSIGN(Answer a, call("POST", "/v1/jobs/" + job_id + "/check", dumpJson(body)));
  if (a.status != 200) return refusal("check of job " + job_id, a);
  TESSERA_ASSIGN(json j, okJson(a.body, "check"));
  CheckVerdict v;
  v.agrees = j.value("agrees", true);
  v.worker = j.value("worker", "");
  v.claimed_us = j.value("claimed_us", 0.0);
  v.measured_us = j.value("measured_us", 0.0);
  if (auto q = j.find("quarantined"); q != j.end() && q->is_object()) {
    v.quarantined = true;
    v.quarantined_records = q->value("records", int64_t{0});
  }
  return v;
}

Expected<std::vector<WorkerInfo>> JobClient::workers(const WorkerFilter& f) {
  std::string q = "/v1/workers";
  char sep = '?';
  auto add = [&](const char* name, const std::string& v) {
    if (v.empty()) return;
    q += sep;
    q += name;
    q += '=';
    q += urlEncode(v);
    sep = '&';
  };
  add("target", f.target);
  add("arch", f.arch);
  add("model", f.model);
  if (f.units) add("units", std::to_string(*f.units));
  if (!f.live_only) add("all", "1");
  TESSERA_ASSIGN(Answer a, call("GET", q, ""));
  if (a.status != 200) return refusal("workers", a);
  TESSERA_ASSIGN(json j, okJson(a.body, "workers"));
  std::vector<WorkerInfo> out;
  try {
    for (const json& w : j.at("workers")) {
      WorkerInfo wi;
      wi.id = w.value("id", "");
      wi.token = w.value("token", "");
      wi.target = w.value("target", "");
      wi.arch = w.value("arch", "");
      wi.units = w.value("units", int64_t{1});
      wi.model = w.value("model", "");
      wi.device = w.value("device", "");
      wi.host = w.value("host", "");
      wi.tessera_version = w.value("tessera_version", "");
      wi.llvm_version = w.value("llvm_version", "");
      wi.toolkit_version = w.value("toolkit_version", "");
      wi.driver_version = w.value("driver_version", "");
      wi.runtime_version = w.value("runtime_version", "");
      wi.slots = w.value("slots", int64_t{1});
      wi.live = w.value("live", false);
      wi.leased = w.value("leased", int64_t{0});
      wi.quarantined = w.value("quarantined", "");
      wi.registered_at = w.value("registered_at", 0.0);
      wi.last_seen = w.value("last_seen", 0.0);
      out.push_back(std::move(wi));
    }
  } catch (const std::exception& e) {
    return makeError(ErrorCode::IOError, std::string("workers: malformed answer (") + e.what() + ")");
  }
  return out;
}

}  // namespace tessera::cache
