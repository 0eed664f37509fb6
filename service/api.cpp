// Owns the API's front door: route matching, authentication and scope checks, the request-body
// rules (length, encoding, media type), problem+json responses, and per-request metrics.
#include "service/api.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "service/api_internal.h"
#include "store/cpu_budget.h"
#include "store/record_json.h"
#include "support/strings.h"

namespace tessera::cache {

namespace {

// "application/json; charset=utf-8" -> "application/json"
std::string mediaType(const std::string* v) {
  if (!v) return "";
  std::string_view s = *v;
  s = trim(s.substr(0, s.find(';')));
  std::string out(s);
  for (char& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

}  // namespace

const std::string* ApiRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (iequals(k, name)) return &v;
  return nullptr;
}

const std::string* ApiRequest::param(std::string_view name) const {
  for (const auto& [k, v] : query)
    if (k == name) return &v;
  return nullptr;
}

RouteMatch matchRoute(std::string_view method, std::string_view path) {
  if (auto d = matchDashboardRoute(method, path)) return *d;
  RouteMatch m;
  auto route = [&](RouteId id, std::string_view want, std::optional<Scope> scope, BodyKind body) {
    m.id = id;
    m.scope = scope;
    m.body = body;
    if (method != want) {
      m.refuse = 405;
      m.allow = std::string(want);
    }
    return m;
  };
  if (path == "/v1/best") return route(RouteId::BestQuery, "GET", Scope::Read, BodyKind::None);
  // Bodies a route never needs more of are refused before they are read (413): what a request
  // may make the server hold is proportional to what it can mean (1000 keys of a batch lookup fit
  // in 1 MiB; a 15 MiB one took 100 MB of memory to parse for nothing).
  constexpr size_t kSmallBody = 64 * 1024;
  if (path == "/v1/best/batch") {
    route(RouteId::BestBatch, "POST", Scope::Read, BodyKind::Json);
    m.max_body = size_t{1} << 20;
    return m;
  }
  if (path.starts_with("/v1/best/") && path.find('/', 9) == std::string_view::npos) {
    m.key_id = path.substr(9);
    return route(RouteId::Best, "GET", Scope::Read, BodyKind::None);
  }
  if (path == "/v1/records") {
    if (method == "POST") return route(RouteId::RecordsPost, "POST", Scope::Write, BodyKind::Json);
    route(RouteId::RecordsList, "GET", Scope::Read, BodyKind::None);
    if (m.refuse) m.allow = "GET, POST";
    return m;
  }
  if (path.starts_with("/v1/records/") && path.ends_with("/dispute") && path.size() > 20) {
    m.path_id = path.substr(12, path.size() - 20);
    route(RouteId::RecordDispute, "POST", Scope::Read, BodyKind::Json);
    m.token_required = true;  // a dispute is an identity's word: never anonymous
    m.max_body = kSmallBody;
    return m;
  }
  if (path == "/v1/nearest") return route(RouteId::Nearest, "GET", Scope::Read, BodyKind::None);
  if (path == "/v1/export") return route(RouteId::Export, "GET", Scope::Read, BodyKind::None);
  if (path == "/v1/import") return route(RouteId::Import, "POST", Scope::Write, BodyKind::JsonLines);
  if (path == "/v1/admin/backup")
    return route(RouteId::Backup, "POST", Scope::Admin, BodyKind::OptionalJson);
  if (path == "/v1/admin/records") return route(RouteId::AdminRecords, "GET", Scope::Admin, BodyKind::None);
  if (path.starts_with("/v1/admin/records/")) {
    const std::string_view action = path.substr(18);
    const RouteId id = action == "quarantine" ? RouteId::AdminQuarantine
                       : action == "release"  ? RouteId::AdminRelease
                       : action == "delete"   ? RouteId::AdminDelete
                       : action == "pin"      ? RouteId::AdminPin
                       : action == "unpin"    ? RouteId::AdminUnpin
                                              : RouteId::Unknown;
    if (id != RouteId::Unknown) {
      route(id, "POST", Scope::Admin, BodyKind::Json);
      m.max_body = kSmallBody;
      return m;
    }
  }
  if (path == "/v1/workers") {
    if (method == "POST") {
      route(RouteId::WorkersRegister, "POST", Scope::Worker, BodyKind::Json);
      m.max_body = kSmallBody;
      return m;
    }
    route(RouteId::WorkersList, "GET", Scope::Read, BodyKind::None);
    m.token_required = true;
    if (m.refuse) m.allow = "GET, POST";
    return m;
  }
  if (path.starts_with("/v1/workers/")) {
    // /v1/workers/{id}/{heartbeat|lease|report|deregister}
    std::string_view rest = path.substr(12);
    const size_t slash = rest.find('/');
    if (slash != std::string_view::npos && slash > 0) {
      m.path_id = rest.substr(0, slash);
      std::string_view action = rest.substr(slash + 1);
      if (action == "heartbeat") return route(RouteId::WorkerHeartbeat, "POST", Scope::Worker, BodyKind::None);
      if (action == "deregister") return route(RouteId::WorkerDeregister, "POST", Scope::Worker, BodyKind::None);
      if (action == "lease") {
        route(RouteId::WorkerLease, "POST", Scope::Worker, BodyKind::Json);
        m.max_body = kSmallBody;
        return m;
      }
      if (action == "report") return route(RouteId::WorkerReport, "POST", Scope::Worker, BodyKind::Json);
    }
  }
  if (path == "/v1/jobs") return route(RouteId::JobsSubmit, "POST", Scope::Write, BodyKind::Json);
  if (path.starts_with("/v1/jobs/")) {
    std::string_view rest = path.substr(9);
    const size_t slash = rest.find('/');
    if (slash == std::string_view::npos && !rest.empty()) {
      m.path_id = rest;
      return route(RouteId::JobGet, "GET", Scope::Write, BodyKind::None);
    }
    if (slash > 0 && rest.substr(slash + 1) == "cancel") {
      m.path_id = rest.substr(0, slash);
      return route(RouteId::JobCancel, "POST", Scope::Write, BodyKind::None);
    }
    if (slash > 0 && rest.substr(slash + 1) == "check") {
      m.path_id = rest.substr(0, slash);
      route(RouteId::JobCheck, "POST", Scope::Write, BodyKind::Json);
      m.max_body = kSmallBody;
      return m;
    }
  }
  if (path == "/healthz") return route(RouteId::Healthz, "GET", std::nullopt, BodyKind::None);
  if (path == "/readyz") return route(RouteId::Readyz, "GET", std::nullopt, BodyKind::None);
  if (path == "/status") return route(RouteId::Status, "GET", Scope::Read, BodyKind::None);
  if (path == "/metrics") return route(RouteId::MetricsText, "GET", Scope::Read, BodyKind::None);
  if (path == "/openapi.yaml") return route(RouteId::OpenApi, "GET", std::nullopt, BodyKind::None);
  m.id = RouteId::Unknown;
  m.refuse = 404;
  return m;
}

ApiResponse problem(int status, std::string_view slug, std::string_view title, std::string detail,
                    nlohmann::json extra) {
  nlohmann::json j = extra.is_object() ? std::move(extra) : nlohmann::json::object();
  j["type"] = std::string(kProblemPrefix) + std::string(slug);
  j["title"] = title;
  j["status"] = status;
  j["detail"] = std::move(detail);
  ApiResponse r;
  r.status = status;
  r.content_type = "application/problem+json";
  r.body = dumpJson(j);
  return r;
}

ApiResponse jsonResponse(const nlohmann::json& j, int status) {
  ApiResponse r;
  r.status = status;
  r.body = dumpJson(j);
  return r;
}

ApiResponse storageProblem(const Error& e) {
  // A search cut at its CPU budget (cpu_budget.h) is the request's fault, said as such.
  ApiResponse r = e.code == ErrorCode::Timeout ? problem(503, "over-cpu-budget", "Search over its CPU budget", e.message)
                                               : problem(503, "storage-unavailable", "Storage unavailable", e.message);
  r.headers.emplace_back("Retry-After", "1");
  return r;
}

std::optional<ApiResponse> checkQuery(const ApiRequest& r, std::initializer_list<std::string_view> allowed) {
  for (size_t i = 0; i < r.query.size(); ++i) {
    const std::string& name = r.query[i].first;
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      std::string list;
      for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      return problem(400, "invalid-query", "Invalid query",
                     "unknown query parameter '" + name + "'" +
                         (list.empty() ? " (this route takes none)" : " (allowed: " + list + ")"));
    }
    for (size_t k = 0; k < i; ++k)
      if (r.query[k].first == name)
        return problem(400, "invalid-query", "Invalid query", "query parameter '" + name + "' repeated");
  }
  return std::nullopt;
}

std::optional<ApiResponse> intParam(const ApiRequest& r, std::string_view name, int64_t lo, int64_t hi,
                                    int64_t& out) {
  const std::string* v = r.param(name);
  if (!v) return std::nullopt;
  auto n = parseInt(*v);
  if (!n || *n < lo || *n > hi)
    return problem(400, "invalid-query", "Invalid query",
                   std::string(name) + ": expected an integer in " + std::to_string(lo) + ".." +
                       std::to_string(hi));
  out = *n;
  return std::nullopt;
}

bool TokenRate::take(const std::string& name) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  if (seen_.size() > 100000) seen_.clear();  // bounded memory whatever the number of tokens
  auto& times = seen_[name];
  while (!times.empty() && now - times.front() > std::chrono::seconds(60)) times.pop_front();
  if (static_cast<int>(times.size()) >= per_minute_) return false;
  times.push_back(now);
  return true;
}

PutOptions servicePut(const RouteContext& c) {
  PutOptions o;
  o.writer = c.token_name;
  // An admin-designated measuring identity's records are reproduced measurements (trust.h).
  o.trusted = !c.token_name.empty() && std::find(c.opts.measuring_tokens.begin(), c.opts.measuring_tokens.end(),
                                                  c.token_name) != c.opts.measuring_tokens.end();
  o.agree_factor = c.opts.agree_factor;
  return o;
}

std::string recordsPage(const ListPage& page) {
  std::string out = "{\"records\":[";
  for (size_t i = 0; i < page.records.size(); ++i) {
    if (i) out += ',';
    out += encodeRecord(page.records[i]);
  }
  out += "],\"next_after\":";
  out += page.next_after ? std::to_string(page.next_after) : "null";
  out += '}';
  return out;
}

void countWrites(Metrics& m, const std::vector<PutResult>& results) {
  for (const PutResult& p : results) {
    if (p.duplicate) m.write(Metrics::Write::Duplicate);
    else if (p.outcome == PutOutcome::Inserted) m.write(Metrics::Write::Inserted);
    else if (p.outcome == PutOutcome::Improved) m.write(Metrics::Write::Improved);
    else m.write(Metrics::Write::Kept);
  }
}

namespace {

std::vector<std::string> routeNameList() {
  return std::vector<std::string>(std::begin(kRouteNames), std::end(kRouteNames));
}

bool declaresBody(const ApiRequest& r) {
  const std::string* cl = r.header("Content-Length");
  return r.header("Transfer-Encoding") != nullptr || (cl && trim(*cl) != "0");
}

// Everything that can be decided from the request line and headers. `body_read` tells whether
// the transport already consumed the body (then the connection can be kept alive).
std::optional<ApiResponse> gate(const ApiRequest& r, const RouteMatch& m, const TokenAuthenticator& auth,
                                const ApiOptions& opts, bool body_read, std::string* token_name = nullptr,
                                std::optional<Scope>* token_scope = nullptr) {
  // A request that may carry a body and is refused before it is read leaves bytes on the
  // connection that must not be parsed as the next request (even without Content-Length: a client
  // that omitted it may still have sent a body).
  const bool may_have_body = declaresBody(r) || r.method == "POST" || r.method == "PUT" || r.method == "PATCH";
  auto refuse = [&](ApiResponse resp) {
    resp.close_connection = !body_read && may_have_body;
    return std::optional<ApiResponse>(std::move(resp));
  };
  if (m.refuse == 404)
    return refuse(problem(404, "not-found", "Not found", "no route " + r.path));
  if (m.refuse == 405) {
    ApiResponse resp = problem(405, "method-not-allowed", "Method not allowed",
                               r.method + " is not allowed on " + r.path + " (allowed: " + m.allow + ")");
    resp.headers.emplace_back("Allow", m.allow);
    return refuse(std::move(resp));
  }
  if (m.scope) {
    const std::string* authz = r.header("Authorization");
    if (authz) {
      std::string_view v = *authz;
      if (v.size() < 7 || !iequals(v.substr(0, 7), "Bearer "))
        return refuse(problem(401, "invalid-token", "Unauthorized", "Authorization must be 'Bearer <token>'"));
      auto id = auth.identify(trim(v.substr(7)));
      if (!id) return refuse(problem(401, "invalid-token", "Unauthorized", "unknown or revoked token"));
      if (!scopeAllows(id->scope, *m.scope))
        return refuse(problem(403, "insufficient-scope", "Forbidden",
                              "this route needs a token with scope '" + std::string(scopeName(*m.scope)) + "'" +
                                  (*m.scope == Scope::Worker || *m.scope == Scope::Admin ? "" : " or higher") +
                                  "; yours has '" + std::string(scopeName(id->scope)) + "'" +
                                  (id->scope == Scope::Worker ? " (worker tokens may only lease and report)" : "")));
      if (token_name) *token_name = id->name;
      if (token_scope) *token_scope = id->scope;
    } else if (!(*m.scope == Scope::Read && opts.allow_anonymous_reads && !m.token_required)) {
      ApiResponse resp = problem(401, "missing-token", "Unauthorized",
                                 "send 'Authorization: Bearer <token>' (scope '" +
                                     std::string(scopeName(*m.scope)) + "'" +
                                     (*m.scope == Scope::Worker ? ")" : " or higher)"));
      resp.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"tessera\"");
      return refuse(std::move(resp));
    }
  }
  const std::string* te = r.header("Transfer-Encoding");
  const std::string* ce = r.header("Content-Encoding");
  const std::string* cl = r.header("Content-Length");
  if (m.body == BodyKind::None) {
    if (declaresBody(r))
      return refuse(problem(400, "body-not-allowed", "Bad request", r.method + " " + r.path + " takes no body"));
    return std::nullopt;
  }
  if (te)
    return refuse(problem(411, "length-required", "Length required",
                          "chunked or otherwise transfer-encoded bodies are refused; send Content-Length"));
  if (ce && !iequals(trim(*ce), "identity"))
    return refuse(problem(415, "unsupported-encoding", "Unsupported media type",
                          "compressed request bodies (Content-Encoding: " + *ce + ") are refused"));
  // A POST whose body is optional (backup) may come without one and without a length.
  if (!cl && m.body == BodyKind::OptionalJson) return std::nullopt;
  if (!cl) return refuse(problem(411, "length-required", "Length required", "writes need a Content-Length header"));
  auto len = parseInt(trim(*cl));
  if (!len || *len < 0) return refuse(problem(400, "bad-content-length", "Bad request", "malformed Content-Length"));
  const size_t limit = m.max_body ? std::min(m.max_body, opts.max_body_bytes) : opts.max_body_bytes;
  if (static_cast<uint64_t>(*len) > limit)
    return refuse(problem(413, "payload-too-large", "Payload too large",
                          "body of " + std::to_string(*len) + " bytes exceeds the limit of " + std::to_string(limit) +
                              (m.max_body ? " for " + r.path : "")));
  if (*len == 0 && m.body == BodyKind::OptionalJson) return std::nullopt;
  const std::string type = mediaType(r.header("Content-Type"));
  const bool json_ok = type == "application/json";
  const bool lines_ok = type == "application/x-ndjson" || type == "application/jsonl" || type == "text/plain";
  if ((m.body == BodyKind::JsonLines && !lines_ok) || (m.body != BodyKind::JsonLines && !json_ok))
    return refuse(problem(415, "unsupported-media-type", "Unsupported media type",
                          "Content-Type must be " +
                              std::string(m.body == BodyKind::JsonLines ? "application/x-ndjson"
                                                                        : "application/json") +
                              (type.empty() ? std::string(" (none sent)") : " (got " + type + ")")));
  if (body_read && r.body.size() != static_cast<size_t>(*len))
    return refuse(problem(400, "bad-content-length", "Bad request", "body length differs from Content-Length"));
  return std::nullopt;
}

}  // namespace

namespace {

// The routes whose work grows with the store (ApiOptions::scans_*).
bool isScan(RouteId id) {
  return id == RouteId::RecordsList || id == RouteId::Kernels || id == RouteId::Nearest || id == RouteId::Compare;
}

ApiResponse tooMany(const std::string& detail) {
  ApiResponse r = problem(429, "too-many-requests", "Too many requests", detail);
  r.headers.emplace_back("Retry-After", "1");
  return r;
}

}  // namespace

// One scan's admission: counted against its token and its address, and holding one of the
// in-flight slots until the answer is made.
struct Api::ScanSlot {
  ScanSlot(Api& api, RouteId id, const ApiRequest& req, const std::string& token) : api_(api) {
    if (!isScan(id)) return;
    const ApiOptions& o = api.opts_;
    if (o.scans_per_minute_per_token > 0 && !api.scans_by_token_->take(token.empty() ? "@" + req.peer : token)) {
      refused = tooMany("at most " + std::to_string(o.scans_per_minute_per_token) + " searches and lists a minute per " +
                        (token.empty() ? "anonymous address" : "token"));
      return;
    }
    if (o.scans_per_minute_per_address > 0 && !req.peer.empty() && !api.scans_by_address_->take(req.peer)) {
      refused = tooMany("at most " + std::to_string(o.scans_per_minute_per_address) + " searches and lists a minute per address");
      return;
    }
    if (o.scans_in_flight > 0) {
      if (api.scans_running_->fetch_add(1) >= o.scans_in_flight) {
        api.scans_running_->fetch_sub(1);
        refused = tooMany("the server runs " + std::to_string(o.scans_in_flight) + " searches and lists at once; retry");
        return;
      }
      holding_ = true;
    }
    budget_.emplace(o.scan_cpu_budget_s);
  }
  ~ScanSlot() {
    if (holding_) api_.scans_running_->fetch_sub(1);
  }
  std::optional<ApiResponse> refused;

 private:
  Api& api_;
  bool holding_ = false;
  std::optional<CpuBudget> budget_;  // the request's CPU budget, on the thread that answers it
};

Api::Api(RecordStore& store, const TokenAuthenticator& auth, ApiOptions opts)
    : store_(store), auth_(auth), opts_(std::move(opts)), metrics_(routeNameList()),
      started_(std::chrono::steady_clock::now()), usage_(std::make_shared<TokenUsage>()),
      disputes_(std::make_shared<TokenRate>(opts_.disputes_per_minute)),
      scans_by_token_(std::make_shared<TokenRate>(opts_.scans_per_minute_per_token)),
      scans_by_address_(std::make_shared<TokenRate>(opts_.scans_per_minute_per_address)),
      scans_running_(std::make_shared<std::atomic<int>>(0)) {
  opts_.dashboard.usage = usage_;
}

std::optional<ApiResponse> Api::precheck(const ApiRequest& head) {
  auto t0 = std::chrono::steady_clock::now();
  RouteMatch m = matchRoute(head.method, head.path);
  auto refused = gate(head, m, auth_, opts_, /*body_read=*/false);
  if (refused) {
    std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    metrics_.request(static_cast<size_t>(m.id), refused->status, dt.count());
  }
  return refused;
}

ApiResponse Api::handle(const ApiRequest& req) {
  auto t0 = std::chrono::steady_clock::now();
  RouteMatch m = matchRoute(req.method, req.path);
  ApiResponse resp;
  try {
    std::string token_name;
    std::optional<Scope> token_scope;
    if (auto refused = gate(req, m, auth_, opts_, /*body_read=*/true, &token_name, &token_scope)) {
      resp = std::move(*refused);
    } else {
      if (!token_name.empty()) usage_->touch(token_name);
      ScanSlot scan(*this, m.id, req, token_name);
      if (scan.refused) {
        resp = std::move(*scan.refused);
        std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
        metrics_.request(static_cast<size_t>(m.id), resp.status, dt.count());
        return resp;
      }
      RouteContext c{store_, auth_, metrics_, opts_, started_, std::move(token_name), token_scope, disputes_.get()};
      switch (m.id) {
        case RouteId::Best: resp = routeBest(c, req, m); break;
        case RouteId::BestQuery: resp = routeBestQuery(c, req, m); break;
        case RouteId::BestBatch: resp = routeBestBatch(c, req, m); break;
        case RouteId::RecordsPost: resp = routeRecordsPost(c, req, m); break;
        case RouteId::RecordsList: resp = routeRecordsList(c, req, m); break;
        case RouteId::RecordDispute: resp = routeRecordDispute(c, req, m); break;
        case RouteId::Nearest: resp = routeNearest(c, req, m); break;
        case RouteId::Export: resp = routeExport(c, req, m); break;
        case RouteId::Import: resp = routeImport(c, req, m); break;
        case RouteId::Backup: resp = routeBackup(c, req, m); break;
        case RouteId::AdminRecords: resp = routeAdminRecords(c, req, m); break;
        case RouteId::AdminQuarantine:
        case RouteId::AdminRelease:
        case RouteId::AdminDelete:
        case RouteId::AdminPin:
        case RouteId::AdminUnpin: resp = routeAdminAction(c, req, m); break;
        case RouteId::WorkersRegister: resp = routeWorkersRegister(c, req, m); break;
        case RouteId::WorkersList: resp = routeWorkersList(c, req, m); break;
        case RouteId::WorkerHeartbeat: resp = routeWorkerHeartbeat(c, req, m); break;
        case RouteId::WorkerDeregister: resp = routeWorkerDeregister(c, req, m); break;
        case RouteId::WorkerLease: resp = routeWorkerLease(c, req, m); break;
        case RouteId::WorkerReport: resp = routeWorkerReport(c, req, m); break;
        case RouteId::JobsSubmit: resp = routeJobsSubmit(c, req, m); break;
        case RouteId::JobGet: resp = routeJobGet(c, req, m); break;
        case RouteId::JobCancel: resp = routeJobCancel(c, req, m); break;
        case RouteId::JobCheck: resp = routeJobCheck(c, req, m); break;
        case RouteId::Healthz: resp = routeHealthz(c, req, m); break;
        case RouteId::Readyz: resp = routeReadyz(c, req, m); break;
        case RouteId::Status: resp = routeStatus(c, req, m); break;
        case RouteId::MetricsText: resp = routeMetrics(c, req, m); break;
        case RouteId::OpenApi: resp = routeOpenApi(c, req, m); break;
        case RouteId::UiRoot:
        case RouteId::UiAsset:
        case RouteId::Kernels:
        case RouteId::KernelSummary:
        case RouteId::KernelText:
        case RouteId::Compare:
        case RouteId::JobsList:
        case RouteId::AdminTokens:
        case RouteId::AdminTokenRevoke:
        case RouteId::AdminAudit:
        case RouteId::Gpus:
        case RouteId::WhoAmI: resp = routeDashboard(c, req, m); break;
        case RouteId::Unknown:
        case RouteId::Count: resp = problem(404, "not-found", "Not found", "no route " + req.path); break;
      }
    }
  } catch (const std::exception& e) {
    // Only a bug gets here (routes report bad input as values); say so instead of crashing.
    resp = problem(500, "internal", "Internal error", e.what());
  } catch (...) {
    resp = problem(500, "internal", "Internal error", "unknown exception");
  }
  std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
  metrics_.request(static_cast<size_t>(m.id), resp.status, dt.count());
  // Server-side failures are the operator's business: say so where they look.
  if (resp.status >= 500)
    std::fprintf(stderr, "tessera serve: %d on %s %s: %s\n", resp.status, req.method.c_str(), req.path.c_str(),
                 resp.body.c_str());
  return resp;
}

}  // namespace tessera::cache
