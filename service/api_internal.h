// Owns what the API's route files share (private to service/): the route table, the
// context a route runs with, and the builders of JSON and problem+json responses.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "service/api.h"

namespace tessera::cache {

enum class RouteId : size_t {
  Best,         // GET  /v1/best/{key_id}
  BestQuery,    // GET  /v1/best?family=&workload=&shape=&dtype=&layout=&target=&arch=&units=
  BestBatch,    // POST /v1/best/batch
  RecordsPost,  // POST /v1/records
  RecordsList,  // GET  /v1/records
  Nearest,      // GET  /v1/nearest
  Export,       // GET  /v1/export
  Import,       // POST /v1/import
  Backup,       // POST /v1/admin/backup
  AdminRecords,     // GET  /v1/admin/records
  AdminQuarantine,  // POST /v1/admin/records/quarantine
  AdminRelease,     // POST /v1/admin/records/release
  AdminDelete,      // POST /v1/admin/records/delete
  AdminPin,         // POST /v1/admin/records/pin
  AdminUnpin,       // POST /v1/admin/records/unpin
  WorkersRegister,  // POST /v1/workers                     (worker scope)
  WorkersList,      // GET  /v1/workers
  WorkerHeartbeat,  // POST /v1/workers/{id}/heartbeat      (worker scope)
  WorkerLease,      // POST /v1/workers/{id}/lease          (worker scope)
  WorkerReport,     // POST /v1/workers/{id}/report         (worker scope)
  WorkerDeregister, // POST /v1/workers/{id}/deregister     (worker scope)
  JobsSubmit,       // POST /v1/jobs
  JobGet,           // GET  /v1/jobs/{id}
  JobCancel,        // POST /v1/jobs/{id}/cancel
  JobCheck,         // POST /v1/jobs/{id}/check: the submitter's own measurement of an item's config
  Healthz,
  Readyz,
  Status,
  MetricsText,
  OpenApi,
  // The web dashboard (api_dashboard.cpp): its pages, and the read routes they call.
  UiRoot,            // GET  /              (redirects to the dashboard)
  UiAsset,           // GET  /ui/{file}
  Kernels,           // GET  /v1/kernels
  KernelSummary,     // GET  /v1/kernels/{key_id}
  KernelText,        // GET  /v1/kernel-texts/{workload}: a kernel's canonical IR text
  Compare,           // POST /v1/compare
  JobsList,          // GET  /v1/jobs
  AdminTokens,       // GET  /v1/admin/tokens
  AdminTokenRevoke,  // POST /v1/admin/tokens/revoke
  AdminAudit,        // GET  /v1/admin/audit
  WhoAmI,            // GET  /v1/whoami
  RecordDispute,     // POST /v1/records/{id}/dispute: a reader's own run refuted a claim (read scope)
  Gpus,              // GET  /v1/gpus: the GPU products a target may name, with their chips
  Unknown,
  Count
};
inline constexpr const char* kRouteNames[] = {
    "best",          "best_query",       "best_batch",    "records_post", "records_list", "nearest",
    "export",        "import",           "backup",        "admin_records", "admin_quarantine",
    "admin_release", "admin_delete",     "admin_pin",     "admin_unpin",  "workers_register",
    "workers_list",  "worker_heartbeat", "worker_lease",  "worker_report", "worker_deregister", "jobs_submit",
    "job_get",       "job_cancel",       "job_check",     "healthz",      "readyz",
    "status",        "metrics",          "openapi",       "ui_root",      "ui_asset",
    "kernels",       "kernel_summary",   "kernel_text",   "compare",       "jobs_list",    "admin_tokens",
    "admin_token_revoke", "admin_audit", "whoami",        "record_dispute", "gpus", "unknown"};
static_assert(std::size(kRouteNames) == static_cast<size_t>(RouteId::Count));

// What a route accepts as body; decides the Content-Type check before the body is read.
enum class BodyKind { None, Json, JsonLines, OptionalJson };

struct RouteMatch {
  RouteId id = RouteId::Unknown;
  std::optional<Scope> scope;  // nullopt: no token needed (health, openapi)
  BodyKind body = BodyKind::None;
  std::string_view key_id;     // the {key_id} path segment of /v1/best/{key_id}
  std::string_view path_id;    // the {id} path segment of /v1/workers/{id}/... and /v1/jobs/{id}
  bool token_required = false; // a read route that anonymous reads do not open (it names tokens and hosts)
  size_t max_body = 0;         // the route's body limit when below the server's (0: the server's)
  int refuse = 0;              // 404 (no such path) or 405 (path exists, other method)
  std::string allow;           // Allow header for 405
};
RouteMatch matchRoute(std::string_view method, std::string_view path);
// The dashboard's routes (api_dashboard.cpp), matched before the others; nullopt: not one of them.
std::optional<RouteMatch> matchDashboardRoute(std::string_view method, std::string_view path);

struct RouteContext {
  RecordStore& store;
  const TokenAuthenticator& auth;
  Metrics& metrics;
  const ApiOptions& opts;
  std::chrono::steady_clock::time_point started;
  std::string token_name;  // the authenticated token ("" for anonymous reads)
  std::optional<Scope> token_scope;  // its scope (nullopt for anonymous reads)
  TokenRate* disputes = nullptr;     // the per-token bound on disputes
};

ApiResponse problem(int status, std::string_view slug, std::string_view title, std::string detail,
                    nlohmann::json extra = nlohmann::json::object());
ApiResponse jsonResponse(const nlohmann::json& j, int status = 200);
// A store failure is the server's fault, never the client's: 503 so clients retry later.
ApiResponse storageProblem(const Error& e);

// Refuses query parameters outside `allowed` and repeated ones (a typo must not silently widen
// a filter). nullopt when the query is acceptable.
std::optional<ApiResponse> checkQuery(const ApiRequest& r, std::initializer_list<std::string_view> allowed);
// Optional integer parameter in [lo, hi]; a 400 problem when present and malformed.
std::optional<ApiResponse> intParam(const ApiRequest& r, std::string_view name, int64_t lo, int64_t hi,
                                    int64_t& out);

// Routes (api_records.cpp).
ApiResponse routeBest(RouteContext& c, const ApiRequest& r, const RouteMatch& m);
ApiResponse routeBestQuery(RouteContext& c, const ApiRequest& r, const RouteMatch& m);
ApiResponse routeBestBatch(RouteContext& c, const ApiRequest& r, const RouteMatch& m);
ApiResponse routeRecordsPost(RouteContext& c, const ApiRequest& r, const RouteMatch& m);
ApiResponse routeRecordsList(RouteContext& c, const ApiRequest& r, const RouteMatch& m);
ApiResponse routeNearest(RouteContext& c, const ApiRequest& r, const RouteMatch& m);
ApiResponse routeRecordDispute(RouteContext& c, const ApiRequest& r, const RouteMatch& m);
// Routes (api_transfer.cpp).
ApiResponse routeExport(RouteContext& c, const ApiRequest& r, const RouteMatch& m);
ApiResponse routeImport(RouteContext& c, const ApiRequest& r, const RouteMatch& m);
// Routes (api_admin.cpp).
ApiResponse routeAdminRecords(RouteContext& c, const ApiRequest& r, const RouteMatch& m);
ApiResponse routeAdminAction(RouteContext& c, const ApiRequest& r, const RouteMatch& m);
// Routes (api_jobs.cpp): measurement workers and their job queue.
ApiResponse routeWorkersRegister(RouteContext& c, const ApiRequest& r, const RouteMatch& m);
ApiResponse routeWorkersList(RouteContext& c, const ApiRequest& r, const RouteMatch& m);
ApiResponse routeWorkerHeartbeat(RouteContext& c, const ApiRequest& r, const RouteMatch& m);
ApiResponse routeWorkerLease(RouteContext& c, const ApiRequest& r, const RouteMatch& m);
ApiResponse routeWorkerDeregister(RouteContext& c, const ApiRequest& r, const RouteMatch& m);
ApiResponse routeWorkerReport(RouteContext& c, const ApiRequest& r, const RouteMatch& m);
ApiResponse routeJobsSubmit(RouteContext& c, const ApiRequest& r, const RouteMatch& m);
ApiResponse routeJobGet(RouteContext& c, const ApiRequest& r, const RouteMatch& m);
ApiResponse routeJobCancel(RouteContext& c, const ApiRequest& r, const RouteMatch& m);
ApiResponse routeJobCheck(RouteContext& c, const ApiRequest& r, const RouteMatch& m);
// Routes (api_ops.cpp).
ApiResponse routeBackup(RouteContext& c, const ApiRequest& r, const RouteMatch& m);
ApiResponse routeHealthz(RouteContext& c, const ApiRequest& r, const RouteMatch& m);
ApiResponse routeReadyz(RouteContext& c, const ApiRequest& r, const RouteMatch& m);
ApiResponse routeStatus(RouteContext& c, const ApiRequest& r, const RouteMatch& m);
ApiResponse routeMetrics(RouteContext& c, const ApiRequest& r, const RouteMatch& m);
ApiResponse routeOpenApi(RouteContext& c, const ApiRequest& r, const RouteMatch& m);
// Routes (api_dashboard.cpp): the dashboard's pages and the read routes they call.
ApiResponse routeDashboard(RouteContext& c, const ApiRequest& r, const RouteMatch& m);

// Counts the outcome of a put in the metrics.
void countWrites(Metrics& m, const std::vector<PutResult>& results);
// How a service stores a client's records: attributed to its token, re-measured claims verified.
PutOptions servicePut(const RouteContext& c);
// A page of records as the list routes answer it.
std::string recordsPage(const ListPage& page);

}  // namespace tessera::cache
