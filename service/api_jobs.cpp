// Owns the routes of measurement workers and their job queue (jobs.h): registration, heartbeats,
// leases and reports (worker tokens only), job submission, progress and cancellation (write
// tokens, each job visible to its submitter and admins only), and the list of workers. A worker's
// report is held to its job: the key, the config of the item and a measurement status, checked
// for plausibility like any submitted record, and stored under the worker's token.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <span>

#include "service/api_internal.h"
#include "service/legality.h"
#include "service/plausibility.h"
#include "ir/text.h"
#include "store/record_json.h"

namespace tessera::cache {

using nlohmann::json;

namespace {

constexpr size_t kMaxJobItems = 1000;
constexpr size_t kMaxSettingsBytes = 16 * 1024;
constexpr size_t kMaxMessageBytes = 4096;
constexpr int kMaxLeaseItems = 64;

ApiResponse invalid(std::string detail) { return problem(422, "invalid-request", "Invalid request", std::move(detail)); }

std::optional<ApiResponse> onlyFields(const json& j, std::initializer_list<std::string_view> allowed) {
  if (!j.is_object()) return invalid("expected a JSON object");
  for (auto it = j.begin(); it != j.end(); ++it)
    if (std::find(allowed.begin(), allowed.end(), it.key()) == allowed.end()) return invalid(it.key() + ": unknown field");
  return std::nullopt;
}

// Field getters: an absent optional field leaves `out` alone; a wrong one is a 422 naming it.
std::optional<ApiResponse> text(const json& j, const char* name, std::string& out, bool required, size_t max_len,
                                bool name_chars) {
  auto it = j.find(name);
  if (it == j.end()) return required ? std::optional(invalid(std::string(name) + ": missing")) : std::nullopt;
  if (!it->is_string()) return invalid(std::string(name) + ": expected a string");
  const std::string& v = it->get_ref<const std::string&>();
  if (name_chars ? !isNameText(v, max_len) : !isPrintableText(v, max_len))
    return invalid(std::string(name) + (name_chars ? ": expected a name of [A-Za-z0-9_.:+-]" : ": expected printable text") +
                   " of at most " + std::to_string(max_len) + " characters");
  out = v;
  return std::nullopt;
}

std::optional<ApiResponse> integer(const json& j, const char* name, int64_t& out, bool required, int64_t lo, int64_t hi) {
  auto it = j.find(name);
  if (it == j.end()) return required ? std::optional(invalid(std::string(name) + ": missing")) : std::nullopt;
  if (!it->is_number_integer() || (it->is_number_unsigned() && it->get<uint64_t>() > uint64_t(INT64_MAX)) ||
      it->get<int64_t>() < lo || it->get<int64_t>() > hi)
    return invalid(std::string(name) + ": expected an integer in " + std::to_string(lo) + ".." + std::to_string(hi));
  out = it->get<int64_t>();
  return std::nullopt;
}

std::optional<ApiResponse> number(const json& j, const char* name, double& out) {
  auto it = j.find(name);
  if (it == j.end()) return std::nullopt;
  if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0 || it->get<double>() > 1e9)
    return invalid(std::string(name) + ": expected a number in 0..1e9");
  out = it->get<double>();
  return std::nullopt;
}

std::optional<ApiResponse> idText(const json& j, const char* name, std::string& out) {
  auto it = j.find(name);
  if (it == j.end()) return invalid(std::string(name) + ": missing");
  if (!it->is_string() || !isJobId(it->get_ref<const std::string&>()))
    return invalid(std::string(name) + ": expected 32 lowercase hex digits");
  out = it->get<std::string>();
  return std::nullopt;
}

std::optional<ApiResponse> queueOf(RouteContext& c, JobQueue*& q) {
  q = c.store.jobs();
  if (!q) return problem(503, "no-job-queue", "No job queue", "this store keeps no job queue");
  return std::nullopt;
}

std::optional<ApiResponse> pathId(const RouteMatch& m, std::string_view what) {
  if (!isJobId(m.path_id))
    return problem(400, "bad-id", "Bad id", std::string(what) + " id: expected 32 lowercase hex digits");
  return std::nullopt;
}

ApiResponse queueError(const Error& e, std::string_view what) {
  if (e.code == ErrorCode::NotFound) return problem(404, "unknown-" + std::string(what), "Not found", e.message);
  if (e.code == ErrorCode::InvalidArgument) return problem(409, "conflict", "Conflict", e.message);
  if (e.code == ErrorCode::Unsupported) return problem(403, "worker-quarantined", "Forbidden", e.message);
  if (e.code == ErrorCode::RuntimeError) {
    ApiResponse resp = problem(429, "too-many-workers", "Too many workers", e.message);
    resp.headers.emplace_back("Retry-After", "30");
    return resp;
  }
  return storageProblem(e);
}

json jobJson(const JobSpec& j) {
  auto settings = parseJson(j.settings);
  return json{{"id", j.id},
              {"kind", j.kind},
              {"key", hardKeyToJson(j.key)},
              {"key_id", keyIdOf(j.key)},
              {"model", j.model},
              {"kernel", j.kernel},
              {"settings", settings.ok() ? *settings : json::object()},
              {"rounds", j.rounds},
              {"first_trial", j.first_trial},
              {"elapsed_s", j.elapsed_s}};
}

// The canonical text of a config object (records store configs canonicalized the same way).
std::optional<ApiResponse> canonicalConfig(const json& cfg, const std::string& path, std::string& out) {
  if (!cfg.is_object()) return invalid(path + ": expected a JSON object");
  out = dumpJson(cfg);
  if (out.size() > kMaxConfigBytes) return invalid(path + ": larger than 16 KiB");
  return std::nullopt;
}

// A job is its submitter's (and admins') business: anyone else is told it does not exist.
bool mayAccess(const RouteContext& c, const JobSpec& j) {
  return j.submitter == c.token_name || (c.token_scope && *c.token_scope == Scope::Admin);
}

}  // namespace

ApiResponse routeWorkersRegister(RouteContext& c, const ApiRequest& r, const RouteMatch&) {
  if (auto bad = checkQuery(r, {})) return *bad;
  JobQueue* q = nullptr;
  if (auto bad = queueOf(c, q)) return *bad;
  auto body = parseJson(r.body);
  if (!body.ok()) return problem(400, "malformed-json", "Malformed JSON", body.error().message);
  const json& j = *body;
  if (auto bad = onlyFields(j, {"id", "target", "arch", "units", "model", "device", "host", "tessera_version",
                                "llvm_version", "toolkit_version", "driver_version", "runtime_version", "slots",
                                "probe"}))
    return *bad;
  WorkerInfo w;
  w.token = c.token_name;
  if (auto bad = idText(j, "id", w.id)) return *bad;
  if (auto bad = text(j, "target", w.target, true, 64, true)) return *bad;
  if (auto bad = text(j, "arch", w.arch, true, 128, true)) return *bad;
  if (auto bad = integer(j, "units", w.units, true, 1, kMaxUnits)) return *bad;
  for (auto [name, field] : {std::pair<const char*, std::string*>{"model", &w.model}, {"device", &w.device},
                             {"host", &w.host}, {"tessera_version", &w.tessera_version},
                             {"llvm_version", &w.llvm_version}, {"toolkit_version", &w.toolkit_version},
                             {"driver_version", &w.driver_version}, {"runtime_version", &w.runtime_version}})
    if (auto bad = text(j, name, *field, false, 256, false)) return *bad;
  if (auto bad = integer(j, "slots", w.slots, false, 1, kMaxLeaseItems)) return *bad;
  // The hardware a worker registers is checked against what its start probed (issue 47: a worker
  // that named another CPU model dodged its submitter's spot check).
  std::string signature;
  if (auto probe = j.find("probe"); probe != j.end()) {
    auto sig = checkWorkerProbe(w, *probe);
    if (!sig.ok()) return invalid(sig.error().message);
    signature = *sig;
  }
  w.probe_signature = signature;
  if (Status s = q->registerWorker(w, c.opts.queue); !s.ok()) return queueError(s.error(), "worker");
  const QueuePolicy& p = c.opts.queue;
  json answer = {{"id", w.id},
                 {"lease_s", p.lease_s},
                 {"worker_ttl_s", p.worker_ttl_s},
                 {"heartbeat_s", std::min(p.lease_s, p.worker_ttl_s) / 3}};
  if (!signature.empty()) answer["probe_signature"] = signature;
  return jsonResponse(answer);
}

ApiResponse routeWorkersList(RouteContext& c, const ApiRequest& r, const RouteMatch&) {
  if (auto bad = checkQuery(r, {"target", "arch", "units", "model", "all"})) return *bad;
  JobQueue* q = nullptr;
  if (auto bad = queueOf(c, q)) return *bad;
  WorkerFilter f;
  for (auto [name, field] : {std::pair<const char*, std::string*>{"target", &f.target}, {"arch", &f.arch},
                             {"model", &f.model}})
    if (const std::string* v = r.param(name)) {
      if (v->empty() || v->size() > 256)
        return problem(400, "invalid-query", "Invalid query", std::string(name) + ": expected 1-256 characters");
      *field = *v;
    }
  int64_t units = 0;
  if (auto bad = intParam(r, "units", 1, kMaxUnits, units)) return *bad;
  if (r.param("units")) f.units = units;
  if (const std::string* all = r.param("all")) {
    if (*all != "0" && *all != "1") return problem(400, "invalid-query", "Invalid query", "all: expected 0 or 1");
    f.live_only = *all == "0";
  }
  auto ws = q->workers(f, c.opts.queue);
  if (!ws.ok()) return storageProblem(ws.error());
  json arr = json::array();
  for (const WorkerInfo& w : *ws) arr.push_back(workerInfoToJson(w));
  return jsonResponse(json{{"workers", arr}});
}

ApiResponse routeWorkerHeartbeat(RouteContext& c, const ApiRequest& r, const RouteMatch& m) {
  if (auto bad = checkQuery(r, {})) return *bad;
  if (auto bad = pathId(m, "worker")) return *bad;
  JobQueue* q = nullptr;
  if (auto bad = queueOf(c, q)) return *bad;
  auto renewed = q->heartbeat(std::string(m.path_id), c.token_name, c.opts.queue);
  if (!renewed.ok()) return queueError(renewed.error(), "worker");
  return jsonResponse(json{{"renewed", *renewed}, {"lease_s", c.opts.queue.lease_s}});
}

ApiResponse routeWorkerDeregister(RouteContext& c, const ApiRequest& r, const RouteMatch& m) {
  if (auto bad = checkQuery(r, {})) return *bad;
  if (auto bad = pathId(m, "worker")) return *bad;
  JobQueue* q = nullptr;
  if (auto bad = queueOf(c, q)) return *bad;
  auto released = q->deregisterWorker(std::string(m.path_id), c.token_name);
  if (!released.ok()) return queueError(released.error(), "worker");
  return jsonResponse(json{{"released", *released}});
}

ApiResponse routeWorkerLease(RouteContext& c, const ApiRequest& r, const RouteMatch& m) {
  if (auto bad = checkQuery(r, {})) return *bad;
  if (auto bad = pathId(m, "worker")) return *bad;
  JobQueue* q = nullptr;
  if (auto bad = queueOf(c, q)) return *bad;
  auto body = parseJson(r.body);
  if (!body.ok()) return problem(400, "malformed-json", "Malformed JSON", body.error().message);
  if (auto bad = onlyFields(*body, {"max_items"})) return *bad;
  int64_t max_items = 1;
  if (auto bad = integer(*body, "max_items", max_items, false, 1, kMaxLeaseItems)) return *bad;
  auto lease = q->lease(std::string(m.path_id), c.token_name, static_cast<int>(max_items), c.opts.queue);
  if (!lease.ok()) return queueError(lease.error(), "worker");
  json items = json::array(), jobs = json::array();
  for (const LeasedItem& it : lease->items) {
    auto payload = parseJson(it.payload);
    items.push_back(json{{"job_id", it.job_id}, {"item", it.item}, {"attempt", it.attempt},
                         {"payload", payload.ok() ? *payload : json()}});
  }
  for (const JobSpec& j : lease->jobs) jobs.push_back(jobJson(j));
  return jsonResponse(json{{"items", items}, {"jobs", jobs}, {"lease_s", c.opts.queue.lease_s}});
}

ApiResponse routeWorkerReport(RouteContext& c, const ApiRequest& r, const RouteMatch& m) {
  if (auto bad = checkQuery(r, {})) return *bad;
  if (auto bad = pathId(m, "worker")) return *bad;
  JobQueue* q = nullptr;
  if (auto bad = queueOf(c, q)) return *bad;
  auto body = parseJson(r.body);
  if (!body.ok()) return problem(400, "malformed-json", "Malformed JSON", body.error().message);
  const json& j = *body;
  if (auto bad = onlyFields(j, {"job_id", "item", "records", "messages", "compile_s", "run_s", "refused"})) return *bad;
  ItemReport rep;
  rep.worker_id = std::string(m.path_id);
  rep.token = c.token_name;
  if (auto bad = idText(j, "job_id", rep.job_id)) return *bad;
  if (auto bad = integer(j, "item", rep.item, true, 0, kMaxJobItems - 1)) return *bad;
  // A worker that will not run a job (its IR does not parse or verify there, or the kernel there
  // has another key than the job's) says so instead of measuring: the item goes to another worker,
  // and only when no other may take it is it finished as refused (one token cannot deny the
  // measurement to everyone; jobs.h, fair leasing).
  if (auto it = j.find("refused"); it != j.end()) {
    std::string why;
    if (auto bad = text(j, "refused", why, true, kMaxMessageBytes, false)) return *bad;
    if (j.contains("records")) return invalid("refused: a refusal carries no records");
    rep.result = dumpJson(json{{"worker", rep.worker_id}, {"token", c.token_name}, {"refused", why}});
    auto done = q->refuse(rep, c.opts.queue);
    if (!done.ok()) return queueError(done.error(), "worker");
    if (*done == ReportOutcome::NotLeased)
      return problem(409, "lease-lost", "Lease lost", "item " + std::to_string(rep.item) + " of job " + rep.job_id +
                                                          " is not leased to this worker");
    return jsonResponse(json{{"outcome", *done == ReportOutcome::Recorded ? "recorded" : "duplicate"}});
  }
  double compile_s = 0, run_s = 0;
  if (auto bad = number(j, "compile_s", compile_s)) return *bad;
  if (auto bad = number(j, "run_s", run_s)) return *bad;
  auto recs = j.find("records");
  if (recs == j.end() || !recs->is_array() || recs->empty() || recs->size() > kMaxJobItems)
    return invalid("records: expected an array of 1-1000 records");
  json messages = json::array();
  if (auto it = j.find("messages"); it != j.end()) {
    if (!it->is_array() || it->size() != recs->size()) return invalid("messages: expected one string per record");
    for (const json& msg : *it) {
      if (!msg.is_string() || msg.get_ref<const std::string&>().size() > kMaxMessageBytes)
        return invalid("messages: expected strings of at most 4096 bytes");
      messages.push_back(msg);
    }
  }
  // The job says what this item may hold: its key, its config(s), in order.
  auto view = q->job(rep.job_id, c.opts.queue);
  if (!view.ok()) return storageProblem(view.error());
  if (!*view || rep.item >= static_cast<int64_t>((*view)->spec.items.size()))
    return problem(404, "unknown-item", "Not found", "no item " + std::to_string(rep.item) + " in job " + rep.job_id);
  const JobSpec& spec = (*view)->spec;
  std::vector<std::string> expected;
  if (spec.kind == kJobRemeasure) {
    auto arr = parseJson(spec.items[static_cast<size_t>(rep.item)]);
    if (!arr.ok() || !arr->is_array()) return problem(500, "internal", "Internal error", "corrupt remeasure item");
    for (const json& cfg : *arr) expected.push_back(dumpJson(cfg));
  } else {
    expected.push_back(spec.items[static_cast<size_t>(rep.item)]);
  }
  if (recs->size() != expected.size())
    return invalid("records: this item takes " + std::to_string(expected.size()) + " record(s)");
  json stored = json::array();
  std::vector<Record> records;
  for (size_t i = 0; i < recs->size(); ++i) {
    const std::string path = "records[" + std::to_string(i) + "]";
    auto rec = recordFromJson((*recs)[i], path);
    if (!rec.ok()) return invalid(rec.error().message);
    if (rec->key_id != spec.key_id) return invalid(path + ".key: not the key of job " + spec.id);
    if (rec->config != expected[i]) return invalid(path + ".config: not the config of this item");
    if (rec->status == RecordStatus::Estimated) return invalid(path + ".status: a worker measures; estimated is refused");
    if (rec->remeasured) return invalid(path + ".result.remeasured: the tuner decides its winner, not a worker");
    if (c.opts.check_plausibility)
      if (Status s = checkPlausible(*rec, path); !s.ok()) return invalid(s.error().message);
    stored.push_back(recordToJson(*rec));
    records.push_back(std::move(*rec));
  }
  if (spec.kind == kJobMeasure) rep.record = records.front();
  // The worker measured for the job's submitter: its records stay claims that confirm nobody
  // (trust.h, Measurement::by_worker): the service cannot tell a worker token from an accomplice of
  // a claim's writer. The submitter's spot check judges them; a measuring token's are vouched for.
  json result = {{"worker", rep.worker_id}, {"token", c.token_name}, {"records", stored}, {"compile_s", compile_s},
                 {"run_s", run_s}};
  if (!messages.empty()) result["messages"] = messages;
  rep.result = dumpJson(result);
  PutOptions put = servicePut(c);
  if (!put.trusted) put.measured_for = spec.submitter;
  auto done = q->report(rep, put);
  if (!done.ok()) return queueError(done.error(), "worker");
  if (done->outcome == ReportOutcome::NotLeased)
    return problem(409, "lease-lost", "Lease lost",
                   "item " + std::to_string(rep.item) + " of job " + rep.job_id +
                       " is not leased to this worker (another worker holds it or reported it first)");
  if (done->outcome == ReportOutcome::Recorded && rep.record) countWrites(c.metrics, {done->put});
  json answer = {{"outcome", done->outcome == ReportOutcome::Recorded ? "recorded" : "duplicate"}};
  if (done->put.id) answer["record_id"] = done->put.id;
  if (done->outcome == ReportOutcome::Recorded && rep.record) answer["put"] = putOutcomeName(done->put.outcome);
  return jsonResponse(answer);
}

ApiResponse routeJobsSubmit(RouteContext& c, const ApiRequest& r, const RouteMatch&) {
  if (auto bad = checkQuery(r, {})) return *bad;
  JobQueue* q = nullptr;
  if (auto bad = queueOf(c, q)) return *bad;
  auto body = parseJson(r.body);
  if (!body.ok()) return problem(400, "malformed-json", "Malformed JSON", body.error().message);
  const json& j = *body;
  if (auto bad = onlyFields(j, {"id", "kind", "key", "model", "kernel", "settings", "configs", "rounds",
                                "first_trial", "elapsed_s"}))
    return *bad;
  JobSpec spec;
  spec.submitter = c.token_name;
  if (auto bad = idText(j, "id", spec.id)) return *bad;
  if (auto bad = text(j, "kind", spec.kind, false, 16, true)) return *bad;
  if (spec.kind != kJobMeasure && spec.kind != kJobRemeasure) return invalid("kind: expected measure or remeasure");
  auto key = j.find("key");
  if (key == j.end()) return invalid("key: missing");
  auto hk = hardKeyFromJson(*key, "key");
  if (!hk.ok()) return invalid(hk.error().message);
  spec.key = *hk;
  spec.key_id = keyIdOf(spec.key);
  if (auto bad = text(j, "model", spec.model, false, 256, false)) return *bad;
  auto kernel = j.find("kernel");
  if (kernel == j.end() || !kernel->is_string() || kernel->get_ref<const std::string&>().empty() ||
      kernel->get_ref<const std::string&>().size() > ir::kMaxIrTextBytes ||
      kernel->get_ref<const std::string&>().find('\0') != std::string::npos)
    return invalid("kernel: expected the kernel's IR text (1 byte to 1 MiB)");
  spec.kernel = kernel->get<std::string>();
  spec.settings = "{}";
  if (auto it = j.find("settings"); it != j.end()) {
    if (!it->is_object()) return invalid("settings: expected an object");
    spec.settings = dumpJson(*it);
    if (spec.settings.size() > kMaxSettingsBytes) return invalid("settings: larger than 16 KiB");
  }
  auto cfgs = j.find("configs");
  if (cfgs == j.end() || !cfgs->is_array() || cfgs->empty() || cfgs->size() > kMaxJobItems)
    return invalid("configs: expected an array of 1-1000 config objects");
  std::vector<std::string> configs;
  for (size_t i = 0; i < cfgs->size(); ++i) {
    std::string canon;
    if (auto bad = canonicalConfig((*cfgs)[i], "configs[" + std::to_string(i) + "]", canon)) return *bad;
    // An item is identified by its job and its config: one config, one item, one record.
    if (std::find(configs.begin(), configs.end(), canon) != configs.end())
      return invalid("configs[" + std::to_string(i) + "]: repeated in this job");
    configs.push_back(std::move(canon));
  }
  // The one legality rule of records (legality.h), so a job cannot bring a config the space cannot
  // run in through its workers' reports (issue 47): the knob table, and the tuner's space for the
  // job's kernel (or the store's text of its workload when the job's text is no kernel).
  if (c.opts.check_plausibility) {
    std::optional<std::string> kernel_text;
    if (checkKernelTextKernel(spec.key, spec.kernel, "").ok()) {
      kernel_text = spec.kernel;
    } else {
      auto stored = c.store.kernelText(spec.key.workload);
      if (!stored.ok()) return storageProblem(stored.error());
      kernel_text = std::move(*stored);
    }
    Record probe;
    probe.key = spec.key;
    for (size_t i = 0; i < configs.size(); ++i) {
      const std::string path = "configs[" + std::to_string(i) + "]";
      probe.config = configs[i];
      if (Status s = checkConfigKnobs(spec.key, configs[i], path); !s.ok()) return invalid(s.error().message);
      if (Status s = checkConfigLegal(probe, kernel_text, path); !s.ok()) return invalid(s.error().message);
    }
  }
  if (auto bad = integer(j, "rounds", spec.rounds, spec.kind == kJobRemeasure, spec.kind == kJobRemeasure ? 1 : 0, 100))
    return *bad;
  if (auto bad = integer(j, "first_trial", spec.first_trial, false, 0, int64_t{1} << 40)) return *bad;
  if (auto bad = number(j, "elapsed_s", spec.elapsed_s)) return *bad;
  if (spec.kind == kJobRemeasure) {
    json arr = json::array();
    for (const auto& cfg : configs) arr.push_back(json::parse(cfg));
    spec.items.push_back(dumpJson(arr));
  } else {
    spec.items = std::move(configs);
  }
  auto res = q->submit(spec, c.opts.queue);
  if (!res.ok()) return queueError(res.error(), "job");
  return jsonResponse(json{{"id", spec.id},
                           {"created", res->created},
                           {"items", spec.items.size()},
                           {"key_id", spec.key_id},
                           {"live_workers", res->live_workers}});
}

// The job a path names, if it exists and the caller may see it (its submitter or an admin).
// since >= 0: the GET of a poller that follows the cursor (JobQueue::job).
std::optional<ApiResponse> ownJob(RouteContext& c, const ApiRequest& r, const RouteMatch& m, JobQueue*& q,
                                  std::optional<JobView>& out, int64_t since = -1) {
  if (auto bad = pathId(m, "job")) return bad;
  if (auto bad = queueOf(c, q)) return bad;
  auto view = q->job(std::string(m.path_id), c.opts.queue, since);
  if (!view.ok()) return storageProblem(view.error());
  if (!*view || !mayAccess(c, (*view)->spec))
    return problem(404, "unknown-job", "Not found", "no job " + std::string(m.path_id) + " of yours");
  out = std::move(*view);
  return std::nullopt;
}

ApiResponse routeJobGet(RouteContext& c, const ApiRequest& r, const RouteMatch& m) {
  // ?since=CURSOR (the `cursor` of an earlier answer): only the items changed since, so a poller
  // of a large job reads what moved, not every item every time. Without it: every item.
  if (auto bad = checkQuery(r, {"since"})) return *bad;
  int64_t since = -1;
  if (auto bad = intParam(r, "since", 0, int64_t{1} << 53, since)) return *bad;
  JobQueue* q = nullptr;
  std::optional<JobView> view;
  if (auto bad = ownJob(c, r, m, q, view, since)) return *bad;
  const JobView& v = *view;
  json items = json::array();
  int64_t done = since >= 0 ? v.done_items : 0;
  for (const JobItemView& it : v.items) {
    json item = {{"item", it.item}, {"state", it.state}, {"attempts", it.attempts}, {"worker", it.worker_id}};
    if (it.state == "done") {
      if (since < 0) ++done;
      auto res = parseJson(it.result);
      item["result"] = res.ok() ? *res : json();
    }
    items.push_back(std::move(item));
  }
  return jsonResponse(json{{"id", v.spec.id},
                           {"kind", v.spec.kind},
                           {"state", v.state},
                           {"key_id", v.spec.key_id},
                           {"live_workers", v.live_workers},
                           {"done", done},
                           {"cursor", v.changes},
                           {"items", items}});
}

ApiResponse routeJobCancel(RouteContext& c, const ApiRequest& r, const RouteMatch& m) {
  JobQueue* q = nullptr;
  std::optional<JobView> view;
  if (auto bad = checkQuery(r, {})) return *bad;
  if (auto bad = ownJob(c, r, m, q, view)) return *bad;
  auto cancelled = q->cancel(std::string(m.path_id));
  if (!cancelled.ok()) return storageProblem(cancelled.error());
  return jsonResponse(json{{"id", std::string(m.path_id)}, {"cancelled", *cancelled}});
}

}  // namespace tessera::cache

namespace tessera::cache {

// The spot check of issue 25: the submitter measured the config of one of its job's items itself,
// on hardware of the job's key. Its record is stored like any of its records (under its token; the
// worker's record confirms nothing and is not confirmed by it, trust.h); when it contradicts the worker's claim (slower by more than the noise), the worker is
// quarantined: it leases nothing more, and the records it reported are set aside.
ApiResponse routeJobCheck(RouteContext& c, const ApiRequest& r, const RouteMatch& m) {
  JobQueue* q = nullptr;
  std::optional<JobView> view;
  if (auto bad = checkQuery(r, {})) return *bad;
  if (auto bad = ownJob(c, r, m, q, view)) return *bad;
  auto body = parseJson(r.body);
  if (!body.ok()) return problem(400, "malformed-json", "Malformed JSON", body.error().message);
  const json& j = *body;
  if (auto bad = onlyFields(j, {"item", "record"})) return *bad;
  int64_t item = 0;
  if (auto bad = integer(j, "item", item, true, 0, static_cast<int64_t>(view->items.size()) - 1)) return *bad;
  const JobItemView& it = view->items[static_cast<size_t>(item)];
  auto rj = j.find("record");
  if (rj == j.end()) return invalid("record: missing");
  auto rec = recordFromJson(*rj, "record");
  if (!rec.ok()) return invalid(rec.error().message);
  if (rec->key_id != view->spec.key_id) return invalid("record.key: not the key of job " + view->spec.id);
  if (rec->status != RecordStatus::Ok) return invalid("record.status: a check is an ok measurement");
  if (rec->remeasured) return invalid("record.result.remeasured: a check is one measurement");
  if (c.opts.check_plausibility)
    if (Status s = checkPlausible(*rec, "record"); !s.ok()) return invalid(s.error().message);
  auto result = parseJson(it.result);
  const json reported = it.state == "done" && result.ok() && result->is_object() ? result->value("records", json::array())
                                                                                : json::array();
  const json* claim = nullptr;
  for (const json& w : reported)
    if (auto cfg = w.find("config"); w.is_object() && cfg != w.end() && dumpJson(*cfg) == rec->config) claim = &w;
  if (!claim || it.worker_id.empty())
    return problem(409, "nothing-to-check", "Conflict",
                   "item " + std::to_string(item) + " of job " + view->spec.id + " holds no measurement of that config");
  const double claimed = claim->value("result", json::object()).value("median_us", 0.0);
  auto put = c.store.put(std::span<const Record>(&*rec, 1), servicePut(c));
  if (!put.ok()) return storageProblem(put.error());
  countWrites(c.metrics, *put);
  // Like with like (issue 47): the check is judged at the noise's factor when the submitter's
  // machine is the worker's registered model, and with room for another CPU of the key's ISA level
  // and threads when it is not; a worker naming another model no longer escapes the check.
  std::string worker_model;
  {
    WorkerFilter wf;
    wf.target = view->spec.key.target;
    wf.arch = view->spec.key.arch;
    wf.live_only = false;
    auto ws = q->workers(wf, c.opts.queue);
    if (!ws.ok()) return storageProblem(ws.error());
    for (const WorkerInfo& w : *ws)
      if (w.id == it.worker_id) worker_model = w.model;
  }
  const double factor = spotCheckFactor(view->spec.key.target, worker_model, rec->provenance.cpu_model, c.opts.agree_factor);
  const bool contradicted = contradicts(claimed, rec->median_us, factor);
  json answer = {{"agrees", !contradicted},
                 {"worker", it.worker_id},
                 {"claimed_us", claimed},
                 {"measured_us", rec->median_us},
                 {"record_id", put->front().id},
                 {"trust", trustName(put->front().trust)}};
  if (contradicted) {
    char why[256];
    std::snprintf(why, sizeof why, "claimed %.4g us for a config of job %s; its submitter '%s' measured %.4g us",
                  claimed, view->spec.id.c_str(), c.token_name.c_str(), rec->median_us);
    auto ids = q->quarantineWorker(it.worker_id, why, c.token_name);
    if (!ids.ok()) return queueError(ids.error(), "worker");
    int64_t set_aside = 0;
    if (!ids->empty()) {
      auto n = c.store.administer({.ids = *ids}, AdminAction::Quarantine, c.opts.agree_factor);
      if (!n.ok()) return storageProblem(n.error());
      set_aside = *n;
    }
    std::fprintf(stderr, "tessera serve: worker %s quarantined (%s); %lld of its records set aside\n",
                 it.worker_id.c_str(), why, static_cast<long long>(set_aside));
    answer["quarantined"] = {{"worker", it.worker_id}, {"why", why}, {"records", set_aside}};
  }
  return jsonResponse(answer);
}

}  // namespace tessera::cache
