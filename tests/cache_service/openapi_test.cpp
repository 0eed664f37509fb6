// Tests that /openapi.yaml (service/openapi.yaml, embedded at build time) and the real
// routes agree both ways: every documented path and method is served, every served route is
// documented, and undocumented methods on documented paths are refused with 405.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "service/api_internal.h"
#include "store/record_json.h"
#include "store/tokens.h"
#include "tests/cache_service/test_util.h"

namespace tessera::cache {
namespace {

using Spec = std::map<std::string, std::set<std::string>>;  // path -> methods (upper case)

// The paths section is plain enough to read without a YAML library: paths are indented by two
// spaces, their operations by four.
Spec parseSpec(std::string_view yaml) {
  Spec spec;
  std::istringstream in{std::string(yaml)};
  std::string line, path;
  bool in_paths = false;
  while (std::getline(in, line)) {
    if (line == "paths:") {
      in_paths = true;
      continue;
    }
    if (!in_paths) continue;
    if (!line.empty() && line[0] != ' ') break;
    if (line.rfind("  /", 0) == 0 && line.back() == ':') {
      path = line.substr(2, line.size() - 3);
      spec[path];
    } else if (line.rfind("    ", 0) == 0 && line[4] != ' ') {
      std::string m = line.substr(4, line.find(':') - 4);
      if (m == "get" || m == "post" || m == "put" || m == "delete" || m == "patch" || m == "head") {
        for (auto& ch : m) ch = static_cast<char>(std::toupper(ch));
        spec[path].insert(m);
      }
    }
  }
  return spec;
}

// One concrete request per route. Adding a route without listing it here fails the size check.
const std::string kWorkerId = "0123456789abcdef0123456789abcdef";
const std::string kJobId = "fedcba9876543210fedcba9876543210";

struct RouteCase {
  RouteId id;
  std::string method, spec_path, target;
};
std::vector<RouteCase> routeCases() {
  const std::string key(64, 'a');
  return {
      {RouteId::Best, "GET", "/v1/best/{key_id}", "/v1/best/" + key},
      {RouteId::BestQuery, "GET", "/v1/best", "/v1/best?family=gemm&workload=00c0ffee&shape=8x8&dtype=f32&layout=row&target=host&arch=x&units=1"},
      {RouteId::BestBatch, "POST", "/v1/best/batch", "/v1/best/batch"},
      {RouteId::RecordsPost, "POST", "/v1/records", "/v1/records"},
      {RouteId::RecordsList, "GET", "/v1/records", "/v1/records"},
      {RouteId::Nearest, "GET", "/v1/nearest", "/v1/nearest?family=gemm&shape=8x8&dtype=f32&target=host&arch=x"},
      {RouteId::Export, "GET", "/v1/export", "/v1/export"},
      {RouteId::Import, "POST", "/v1/import", "/v1/import"},
      {RouteId::Backup, "POST", "/v1/admin/backup", "/v1/admin/backup"},
      {RouteId::AdminRecords, "GET", "/v1/admin/records", "/v1/admin/records"},
      {RouteId::AdminQuarantine, "POST", "/v1/admin/records/quarantine", "/v1/admin/records/quarantine"},
      {RouteId::AdminRelease, "POST", "/v1/admin/records/release", "/v1/admin/records/release"},
      {RouteId::AdminDelete, "POST", "/v1/admin/records/delete", "/v1/admin/records/delete"},
      {RouteId::AdminPin, "POST", "/v1/admin/records/pin", "/v1/admin/records/pin"},
      {RouteId::AdminUnpin, "POST", "/v1/admin/records/unpin", "/v1/admin/records/unpin"},
      {RouteId::WorkersRegister, "POST", "/v1/workers", "/v1/workers"},
      {RouteId::WorkersList, "GET", "/v1/workers", "/v1/workers"},
      {RouteId::WorkerHeartbeat, "POST", "/v1/workers/{id}/heartbeat", "/v1/workers/" + kWorkerId + "/heartbeat"},
      {RouteId::WorkerLease, "POST", "/v1/workers/{id}/lease", "/v1/workers/" + kWorkerId + "/lease"},
      {RouteId::WorkerReport, "POST", "/v1/workers/{id}/report", "/v1/workers/" + kWorkerId + "/report"},
      {RouteId::WorkerDeregister, "POST", "/v1/workers/{id}/deregister", "/v1/workers/" + kWorkerId + "/deregister"},
      {RouteId::JobsSubmit, "POST", "/v1/jobs", "/v1/jobs"},
      {RouteId::JobGet, "GET", "/v1/jobs/{id}", "/v1/jobs/" + kJobId},
      {RouteId::JobCancel, "POST", "/v1/jobs/{id}/cancel", "/v1/jobs/" + kJobId + "/cancel"},
      {RouteId::JobCheck, "POST", "/v1/jobs/{id}/check", "/v1/jobs/" + kJobId + "/check"},
      {RouteId::Healthz, "GET", "/healthz", "/healthz"},
      {RouteId::Readyz, "GET", "/readyz", "/readyz"},
      {RouteId::Status, "GET", "/status", "/status"},
      {RouteId::MetricsText, "GET", "/metrics", "/metrics"},
      {RouteId::OpenApi, "GET", "/openapi.yaml", "/openapi.yaml"},
      {RouteId::UiRoot, "GET", "/", "/"},
      {RouteId::UiAsset, "GET", "/ui/{file}", "/ui/index.html"},
      {RouteId::Kernels, "GET", "/v1/kernels", "/v1/kernels?q=gemm%20host&order=kernel&limit=5"},
      {RouteId::KernelSummary, "GET", "/v1/kernels/{key_id}", "/v1/kernels/" + key},
      {RouteId::KernelText, "GET", "/v1/kernel-texts/{workload}", "/v1/kernel-texts/" + std::string(64, 'a')},
      {RouteId::Compare, "POST", "/v1/compare", "/v1/compare"},
      {RouteId::JobsList, "GET", "/v1/jobs", "/v1/jobs?limit=5"},
      {RouteId::AdminTokens, "GET", "/v1/admin/tokens", "/v1/admin/tokens"},
      {RouteId::AdminTokenRevoke, "POST", "/v1/admin/tokens/revoke", "/v1/admin/tokens/revoke"},
      {RouteId::AdminAudit, "GET", "/v1/admin/audit", "/v1/admin/audit?limit=5"},
      {RouteId::WhoAmI, "GET", "/v1/whoami", "/v1/whoami"},
      {RouteId::Gpus, "GET", "/v1/gpus", "/v1/gpus"},
      {RouteId::RecordDispute, "POST", "/v1/records/{id}/dispute", "/v1/records/1/dispute"},
  };
}

std::string bodyFor(RouteId id) {
  switch (id) {
    case RouteId::BestBatch: return R"({"key_ids":[]})";
    case RouteId::RecordsPost: return encodeRecord(test::makeRecord({}));
    case RouteId::Import: return encodeRecord(test::makeRecord({.key = 1})) + "\n";
    case RouteId::Backup: return "{}";
    case RouteId::AdminQuarantine:
    case RouteId::AdminRelease:
    case RouteId::AdminDelete:
    case RouteId::AdminPin:
    case RouteId::AdminUnpin: return R"({"writer":"nobody"})";
    case RouteId::JobCheck:
      return R"({"item":0,"record":)" + encodeRecord(test::makeRecord({.key = 0})) + "}";
    case RouteId::WorkersRegister:
      return R"({"id":")" + kWorkerId + R"(","target":"host","arch":"x86-64-v3","units":2,"model":"cpu"})";
    case RouteId::WorkerLease: return R"({"max_items":1})";
    case RouteId::WorkerReport: return R"({"job_id":")" + kJobId + R"(","item":0,"refused":"test"})";
    case RouteId::JobsSubmit:
      return R"({"id":")" + kJobId + R"(","key":)" + dumpJson(hardKeyToJson(test::keyFor(0))) +
             R"(,"kernel":"kernel text","configs":[{"MC":64}]})";
    case RouteId::Compare: return R"({"key_id":")" + std::string(64, 'a') + R"(","targets":["host"]})";
    case RouteId::AdminTokenRevoke: return R"({"name":"nobody"})";
    case RouteId::RecordDispute: return R"({"why":"re-timed far slower here"})";
    default: return "";
  }
}

TEST(OpenApi, EmbeddedCopyIsTheRepositoryFile) {
  std::ifstream f(TESSERA_SOURCE_DIR "/service/openapi.yaml");
  std::stringstream ss;
  ss << f.rdbuf();
  ASSERT_FALSE(ss.str().empty());
  EXPECT_EQ(ss.str(), std::string(openApiYaml()));
}

TEST(OpenApi, EveryRouteIsDocumentedAndEveryDocumentedRouteIsRouted) {
  Spec spec = parseSpec(openApiYaml());
  auto cases = routeCases();
  ASSERT_EQ(cases.size(), static_cast<size_t>(RouteId::Count) - 1);  // all but Unknown
  size_t documented = 0;
  for (const auto& [path, methods] : spec) documented += methods.size();
  EXPECT_EQ(documented, cases.size());
  for (const auto& c : cases) {
    EXPECT_TRUE(spec.count(c.spec_path) && spec[c.spec_path].count(c.method)) << c.method << " " << c.spec_path;
    std::string path = c.target.substr(0, c.target.find('?'));
    RouteMatch m = matchRoute(c.method, path);
    EXPECT_EQ(m.id, c.id) << c.target;
    EXPECT_EQ(m.refuse, 0) << c.target;
  }
}

TEST(OpenApi, RealServerAnswersEveryDocumentedOperation) {
  test::TempDir backups;
  ServerOptions o = test::testOptions();
  o.backup_dir = backups.path();
  test::ServerFixture f(o);
  // The worker routes take worker tokens only (and worker tokens nothing else).
  auto tokens = TokenStore::open(f.db);
  ASSERT_TRUE(tokens.ok());
  const std::string worker_token = *(*tokens)->add("worker", Scope::Worker);
  ASSERT_TRUE(test::awaitToken(f.url(), worker_token));  // the server's token refresh
  Spec spec = parseSpec(openApiYaml());
  for (const auto& c : routeCases()) {
    const std::string body = bodyFor(c.id);
    const bool worker_route = c.id == RouteId::WorkersRegister || c.id == RouteId::WorkerHeartbeat ||
                              c.id == RouteId::WorkerLease || c.id == RouteId::WorkerReport ||
                              c.id == RouteId::WorkerDeregister;
    std::vector<std::string> headers = {"Authorization: Bearer " + (worker_route ? worker_token : f.admin_token)};
    if (!body.empty())
      headers.push_back(std::string("Content-Type: ") +
                        (c.id == RouteId::Import ? "application/x-ndjson" : "application/json"));
    test::Reply r = test::rawRequest(f.port(), test::httpRequest(c.method, c.target, body, headers));
    // The root redirects to the dashboard; this library's server has no compiler to compare with;
    // the spot check of an item that holds no measurement yet is a 409 (the job was just queued).
    const int expected = c.id == RouteId::UiRoot    ? 303
                         : c.id == RouteId::Compare  ? 501
                         : c.id == RouteId::JobCheck ? 409
                                                     : 200;
    EXPECT_TRUE(r.status == expected || r.status == 404) << c.method << " " << c.target << " -> " << r.status << " " << r.body;
    if (r.status == 404) {
      // Only lookups of unknown keys and tokens miss, and the report of an item that was never leased.
      EXPECT_TRUE(c.id == RouteId::Best || c.id == RouteId::BestQuery || c.id == RouteId::WorkerReport ||
                  c.id == RouteId::KernelSummary || c.id == RouteId::KernelText || c.id == RouteId::AdminTokenRevoke);
      EXPECT_NE(r.body.find(c.id == RouteId::Best || c.id == RouteId::BestQuery ? "no-record" : "unknown-"),
                std::string::npos);
    }
    // Methods the spec does not list for this path are refused.
    for (const std::string m : {"GET", "POST", "PUT", "DELETE", "PATCH"}) {
      if (spec[c.spec_path].count(m)) continue;
      test::Reply other = test::rawRequest(f.port(), test::httpRequest(m, c.target, "", headers));
      EXPECT_EQ(other.status, 405) << m << " " << c.target;
    }
  }
}

}  // namespace
}  // namespace tessera::cache
