// Owns the operational routes: health and readiness probes, /status, Prometheus /metrics,
// /openapi.yaml and the admin-only online backup.
#include <sys/stat.h>

#include <cctype>

#include "service/api_internal.h"
#include "service/openapi_embed.h"
#include "store/record_json.h"

namespace tessera::cache {

using nlohmann::json;

std::string_view openApiYaml() { return kOpenApiYaml; }

ApiResponse routeHealthz(RouteContext&, const ApiRequest& r, const RouteMatch&) {
  if (auto bad = checkQuery(r, {})) return *bad;
  return jsonResponse(json{{"status", "ok"}});
}

ApiResponse routeReadyz(RouteContext& c, const ApiRequest& r, const RouteMatch&) {
  if (auto bad = checkQuery(r, {})) return *bad;
  if (Status s = c.store.ping(); !s.ok())
    return problem(503, "not-ready", "Not ready", "store unavailable: " + s.error().message);
  return jsonResponse(json{{"status", "ready"}});
}

namespace {
double uptime(const RouteContext& c) {
  std::chrono::duration<double> d = std::chrono::steady_clock::now() - c.started;
  return d.count();
}
}  // namespace

ApiResponse routeStatus(RouteContext& c, const ApiRequest& r, const RouteMatch&) {
  if (auto bad = checkQuery(r, {})) return *bad;
  auto st = c.store.stats();
  if (!st.ok()) return storageProblem(st.error());
  return jsonResponse(json{{"service", "tessera-cache"},
                           {"version", c.opts.version},
                           {"schema_version", st->schema_version},
                           {"uptime_s", uptime(c)},
                           {"records", st->records},
                           {"keys", st->keys},
                           {"winners", st->winners},
                           {"stale_winners", st->stale_winners},
                           {"quarantined", st->quarantined},
                           {"current_toolchain", json{{"tessera_version", c.opts.current_toolchain.tessera_version},
                                                      {"llvm_version", c.opts.current_toolchain.llvm_version},
                                                      {"cuda_version", c.opts.current_toolchain.cuda_version}}},
                           {"last_id", st->last_id},
                           {"db_bytes", st->db_bytes},
                           {"tokens_active", c.auth.size()},
                           {"anonymous_reads", c.opts.allow_anonymous_reads},
                           {"max_body_bytes", c.opts.max_body_bytes},
                           {"backups", !c.opts.backup_dir.empty()}});
}

ApiResponse routeMetrics(RouteContext& c, const ApiRequest& r, const RouteMatch&) {
  if (auto bad = checkQuery(r, {})) return *bad;
  auto st = c.store.stats();
  if (!st.ok()) return storageProblem(st.error());
  ApiResponse resp;
  resp.content_type = "text/plain; version=0.0.4; charset=utf-8";
  resp.body = c.metrics.render({
      {"tessera_records", "Records stored (every measured candidate).", double(st->records)},
      {"tessera_keys", "Distinct hard keys.", double(st->keys)},
      {"tessera_winners", "Keys with a winner (an ok record).", double(st->winners)},
      {"tessera_stale_winners", "Winners measured with another toolchain than the server's current one.",
       double(st->stale_winners)},
      {"tessera_quarantined_records", "Records an admin set aside (kept, never served).", double(st->quarantined)},
      {"tessera_db_bytes", "Database size in bytes (main file + WAL).", double(st->db_bytes)},
      {"tessera_tokens_active", "Active bearer tokens.", double(c.auth.size())},
      {"tessera_uptime_seconds", "Seconds since the server started.", uptime(c)},
  });
  return resp;
}

ApiResponse routeOpenApi(RouteContext&, const ApiRequest& r, const RouteMatch&) {
  if (auto bad = checkQuery(r, {})) return *bad;
  ApiResponse resp;
  resp.content_type = "application/yaml";
  resp.body = std::string(kOpenApiYaml);
  return resp;
}

ApiResponse routeBackup(RouteContext& c, const ApiRequest& r, const RouteMatch&) {
  if (auto bad = checkQuery(r, {})) return *bad;
  if (c.opts.backup_dir.empty())
    return problem(409, "backups-disabled", "Backups disabled",
                   "start the server with --backup-dir DIR to allow online backups");
  // Optional body {"label": "..."}: a suffix for the file name; never a path.
  std::string label;
  if (!r.body.empty()) {
    auto body = parseJson(r.body);
    if (!body.ok()) return problem(400, "malformed-json", "Malformed JSON", body.error().message);
    if (!body->is_object()) return problem(422, "invalid-request", "Invalid request", "expected an object");
    for (auto it = body->begin(); it != body->end(); ++it) {
      if (it.key() != "label") return problem(422, "invalid-request", "Invalid request", it.key() + ": unknown field");
      if (!it->is_string()) return problem(422, "invalid-request", "Invalid request", "label: expected a string");
      label = it->get<std::string>();
      bool ok = !label.empty() && label.size() <= 32;
      for (unsigned char ch : label) ok = ok && (std::isalnum(ch) || ch == '-' || ch == '_');
      if (!ok) return problem(422, "invalid-request", "Invalid request", "label: expected 1-32 of [A-Za-z0-9_-]");
    }
  }
  std::string stamp = utcNow();  // 2025-01-31T12:00:00Z -> 20250131T120000Z
  std::string compact;
  for (char ch : stamp)
    if (ch != '-' && ch != ':') compact += ch;
  // Two backups in the same second (and with the same label) get distinct names.
  const std::string stem = c.opts.backup_dir + "/tessera-" + compact + (label.empty() ? "" : "-" + label);
  std::string path = stem + ".db";
  struct stat taken {};
  for (int i = 2; i < 100 && ::stat(path.c_str(), &taken) == 0; ++i) path = stem + "." + std::to_string(i) + ".db";
  Status s = c.store.backup(path);
  if (!s.ok()) {
    if (s.error().code == ErrorCode::InvalidArgument)
      return problem(409, "backup-exists", "Backup exists", s.error().message);
    // A PostgreSQL store: its own tools back it up (the message names them).
    if (s.error().code == ErrorCode::Unsupported)
      return problem(409, "backups-disabled", "Backups disabled", s.error().message);
    return storageProblem(s.error());
  }
  struct stat info {};
  ::stat(path.c_str(), &info);
  return jsonResponse(json{{"path", path}, {"bytes", static_cast<int64_t>(info.st_size)}});
}

}  // namespace tessera::cache
