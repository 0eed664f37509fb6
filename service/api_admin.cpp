// Owns the admin routes of the trust model (issues 15, 25): listing records with their writers,
// trust and quarantine state, and quarantining, releasing, deleting, pinning (vouching for) or
// unpinning them by id, key, writer (token name) or time received. The trust and the winners of
// the affected keys are settled again in the same transaction.
#include <cctype>

#include "service/api_internal.h"
#include "store/record_json.h"

namespace tessera::cache {

using nlohmann::json;

namespace {

constexpr size_t kMaxIds = 1000;

bool isTokenName(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (unsigned char c : s)
    if (!(std::isalnum(c) || c == '_' || c == '-' || c == '.' || c == '@')) return false;
  return true;
}

// key_id, writer, since, until: the filters both the list and the actions take. `where` is
// "query" or "body", for the messages.
std::optional<ApiResponse> checkFilters(const std::string& key_id, const std::string& writer, const std::string& since,
                                        const std::string& until, int status) {
  auto refuse = [&](std::string detail) {
    return status == 400 ? problem(400, "invalid-query", "Invalid query", std::move(detail))
                         : problem(422, "invalid-request", "Invalid request", std::move(detail));
  };
  if (!key_id.empty() && !isKeyId(key_id)) return refuse("key_id: expected 64 lowercase hex digits");
  if (!writer.empty() && !isTokenName(writer)) return refuse("writer: expected a token name of 1-64 [A-Za-z0-9_.@-]");
  if (!since.empty() && !isUtcTimestamp(since)) return refuse("since: expected a UTC time like 2025-01-31T12:00:00Z");
  if (!until.empty() && !isUtcTimestamp(until)) return refuse("until: expected a UTC time like 2025-01-31T12:00:00Z");
  return std::nullopt;
}

}  // namespace

ApiResponse routeAdminRecords(RouteContext& c, const ApiRequest& r, const RouteMatch&) {
  if (auto bad = checkQuery(r, {"key_id", "writer", "since", "until", "quarantined", "status", "after", "limit"}))
    return *bad;
  ListQuery q;
  q.quarantine = QuarantineFilter::Include;
  for (auto [name, field] : {std::pair<std::string_view, std::string*>{"key_id", &q.key_id}, {"writer", &q.writer},
                             {"since", &q.since}, {"until", &q.until}, {"status", &q.status}})
    if (const std::string* v = r.param(name)) {
      if (v->empty()) return problem(400, "invalid-query", "Invalid query", std::string(name) + ": empty");
      *field = *v;
    }
  if (auto bad = checkFilters(q.key_id, q.writer, q.since, q.until, 400)) return *bad;
  if (!q.status.empty() && !parseRecordStatus(q.status))
    return problem(400, "invalid-query", "Invalid query", "status: not a record status");
  if (const std::string* v = r.param("quarantined")) {
    if (*v == "1") q.quarantine = QuarantineFilter::Only;
    else if (*v == "0") q.quarantine = QuarantineFilter::Exclude;
    else if (*v != "all") return problem(400, "invalid-query", "Invalid query", "quarantined: expected 0, 1 or all");
  }
  int64_t after = 0, limit = 100;
  if (auto bad = intParam(r, "after", 0, INT64_MAX, after)) return *bad;
  if (auto bad = intParam(r, "limit", 1, kMaxListLimit, limit)) return *bad;
  q.after_id = after;
  q.limit = static_cast<int>(limit);
  auto page = c.store.list(q);
  if (!page.ok()) return storageProblem(page.error());
  ApiResponse resp;
  resp.body = recordsPage(*page);
  return resp;
}

ApiResponse routeAdminAction(RouteContext& c, const ApiRequest& r, const RouteMatch& m) {
  if (auto bad = checkQuery(r, {})) return *bad;
  auto body = parseJson(r.body);
  if (!body.ok()) return problem(400, "malformed-json", "Malformed JSON", body.error().message);
  auto invalid = [](std::string detail) { return problem(422, "invalid-request", "Invalid request", std::move(detail)); };
  if (!body->is_object()) return invalid("expected an object: {\"ids\", \"key_id\", \"writer\", \"since\", \"until\", \"dry_run\"}");
  RecordSelector sel;
  bool dry_run = false;
  for (auto it = body->begin(); it != body->end(); ++it) {
    const std::string& k = it.key();
    const json& v = *it;
    if (k == "ids") {
      if (!v.is_array() || v.empty() || v.size() > kMaxIds) return invalid("ids: expected an array of 1-1000 record ids");
      for (const json& id : v) {
        if (!id.is_number_integer() || id.get<int64_t>() < 1) return invalid("ids: expected positive integers");
        sel.ids.push_back(id.get<int64_t>());
      }
    } else if (k == "key_id" || k == "writer" || k == "since" || k == "until") {
      if (!v.is_string() || v.get_ref<const std::string&>().empty()) return invalid(k + ": expected a non-empty string");
      std::string& field = k == "key_id" ? sel.key_id : k == "writer" ? sel.writer : k == "since" ? sel.since : sel.until;
      field = v.get<std::string>();
    } else if (k == "dry_run") {
      if (!v.is_boolean()) return invalid("dry_run: expected true or false");
      dry_run = v.get<bool>();
    } else {
      return invalid(k + ": unknown field");
    }
  }
  if (auto bad = checkFilters(sel.key_id, sel.writer, sel.since, sel.until, 422)) return *bad;
  // An empty selector would select everything: say what to select instead.
  if (sel.empty()) return invalid("give at least one of ids, key_id, writer, since, until");
  const AdminAction action = m.id == RouteId::AdminQuarantine ? AdminAction::Quarantine
                             : m.id == RouteId::AdminRelease  ? AdminAction::Release
                             : m.id == RouteId::AdminPin      ? AdminAction::Pin
                             : m.id == RouteId::AdminUnpin    ? AdminAction::Unpin
                                                              : AdminAction::Delete;
  const char* name = action == AdminAction::Quarantine ? "quarantine"
                     : action == AdminAction::Release  ? "release"
                     : action == AdminAction::Pin      ? "pin"
                     : action == AdminAction::Unpin    ? "unpin"
                                                       : "delete";
  auto n = c.store.administer(sel, dry_run ? AdminAction::Count : action, c.opts.agree_factor);
  if (!n.ok()) return storageProblem(n.error());
  if (!dry_run)
    std::fprintf(stderr, "tessera serve: admin '%s' %s %lld records (%s)\n", c.token_name.c_str(), name,
                 static_cast<long long>(*n), dumpJson(*body).c_str());
  return jsonResponse(json{{"action", name}, {"dry_run", dry_run}, {"records", *n}});
}

}  // namespace tessera::cache
