// Owns bulk transfer between stores: JSON-lines export with a `since` cursor and idempotent
// JSON-lines import with per-line errors. Kernel texts travel on the records (`kernel_ir`), so that
// a store filled by an import can rebuild every winner it received (ARCHITECTURE.md §2.9).
#include <set>

#include "service/api_internal.h"
#include "service/legality.h"
#include "store/kernel_text.h"
#include "service/plausibility.h"
#include "store/record_json.h"

namespace tessera::cache {

using nlohmann::json;

namespace {
constexpr int64_t kDefaultExportLimit = 10000;
constexpr int64_t kMaxExportLimit = 100000;
constexpr size_t kMaxImportLines = 100000;
constexpr size_t kMaxReportedErrors = 100;
}  // namespace

ApiResponse routeExport(RouteContext& c, const ApiRequest& r, const RouteMatch&) {
  if (auto bad = checkQuery(r, {"since", "limit"})) return *bad;
  int64_t since = 0, limit = kDefaultExportLimit;
  if (auto bad = intParam(r, "since", 0, INT64_MAX, since)) return *bad;
  if (auto bad = intParam(r, "limit", 1, kMaxExportLimit, limit)) return *bad;
  auto recs = c.store.exportSince(since, static_cast<int>(limit));
  if (!recs.ok()) return storageProblem(recs.error());
  ApiResponse resp;
  resp.content_type = "application/x-ndjson";
  // The first record of each workload in a page carries the kernel's text: once per page, not per
  // record (a workload's trials share one text of up to 64 KiB). A text that no longer hashes to its
  // workload (the table changed behind the service's back) is left out rather than exported: an
  // import would refuse the whole line, and the record itself is still good.
  std::set<std::string> carried;
  for (Record& rec : *recs) {
    if (carried.insert(rec.key.workload).second)
      if (auto text = c.store.kernelText(rec.key.workload);
          text.ok() && *text && checkKernelText(rec.key.workload, **text).ok())
        rec.kernel_ir = std::move(**text);
    resp.body += encodeRecord(rec);
    resp.body += '\n';
    rec.kernel_ir.clear();
  }
  // The cursor to pass as `since` for the next page; More says whether to ask at all.
  const int64_t next = recs->empty() ? since : recs->back().id;
  resp.headers.emplace_back("Tessera-Next-Since", std::to_string(next));
  resp.headers.emplace_back("Tessera-More", static_cast<int64_t>(recs->size()) == limit ? "true" : "false");
  return resp;
}

ApiResponse routeImport(RouteContext& c, const ApiRequest& r, const RouteMatch&) {
  if (auto bad = checkQuery(r, {"partial"})) return *bad;
  bool partial = false;
  if (const std::string* p = r.param("partial")) {
    if (*p != "0" && *p != "1" && *p != "true" && *p != "false")
      return problem(400, "invalid-query", "Invalid query", "partial: expected 0, 1, true or false");
    partial = *p == "1" || *p == "true";
  }
  std::vector<Record> records;
  json errors = json::array();
  size_t error_count = 0, lines = 0, line_no = 0;
  std::string_view body = r.body;
  while (!body.empty()) {
    size_t nl = body.find('\n');
    std::string_view line = body.substr(0, nl);
    body = nl == std::string_view::npos ? std::string_view() : body.substr(nl + 1);
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    if (++lines > kMaxImportLines)
      return problem(413, "payload-too-large", "Payload too large", "at most 100000 lines per import");
    auto rec = decodeRecord(line);
    Status plausible = rec.ok() && c.opts.check_plausibility ? checkPlausible(*rec, "") : Status{};
    if (rec.ok() && plausible.ok()) {
      records.push_back(std::move(*rec));
    } else {
      ++error_count;
      if (errors.size() < kMaxReportedErrors)
        errors.push_back(json{{"line", line_no}, {"detail", rec.ok() ? plausible.error().message : rec.error().message}});
    }
  }
  if (lines == 0) return problem(422, "invalid-import", "Invalid import", "no records in the body");
  // The one legality rule (legality.h), as on POST /v1/records.
  if (c.opts.check_plausibility && !records.empty()) {
    auto refused = legalityRefusals(c.store, records, false, records.size());
    if (!refused.ok()) return storageProblem(refused.error());
    for (auto it = refused->rbegin(); it != refused->rend(); ++it) {
      ++error_count;
      if (errors.size() < kMaxReportedErrors) errors.push_back(json{{"record", it->index}, {"detail", it->message}});
      records.erase(records.begin() + static_cast<std::ptrdiff_t>(it->index));
    }
  }
  if (error_count > 0 && (!partial || records.empty()))
    return problem(422, "invalid-import", "Invalid import",
                   std::to_string(error_count) + " of " + std::to_string(lines) +
                       " lines are invalid; nothing was imported (fix them, or pass partial=1 to "
                       "import the valid lines)",
                   json{{"errors", errors}, {"invalid_lines", error_count}});
  int counts[3] = {0, 0, 0};
  int duplicates = 0;
  if (!records.empty()) {
    auto results = c.store.put(records, servicePut(c));
    if (!results.ok()) return storageProblem(results.error());
    // The kernels' texts, checked against their keys by decodeRecord (and once more by the store),
    // into the kernel table: a record imported without its text could not be rebuilt here.
    for (const Record& rec : records)
      if (!rec.kernel_ir.empty())
        if (Status s = c.store.putKernelText(rec.key.workload, rec.kernel_ir); !s.ok()) return storageProblem(s.error());
    countWrites(c.metrics, *results);
    for (const PutResult& p : *results) {
      ++counts[static_cast<int>(p.outcome)];
      duplicates += p.duplicate;
    }
  }
  return jsonResponse(json{{"lines", lines},
                           {"records", records.size()},
                           {"inserted", counts[0]},
                           {"improved", counts[1]},
                           {"kept", counts[2]},
                           {"duplicates", duplicates},
                           {"invalid_lines", error_count},
                           {"errors", errors}});
}

}  // namespace tessera::cache
