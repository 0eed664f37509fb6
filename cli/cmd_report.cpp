// Owns `tessera report --db FILE [--key KEY ...] -o report.html`: the dashboard's kernel page as
// one self-contained HTML file (styles, scripts, Chart.js and the data inline; no server, no
// network), for people who tune on a laptop and share a file. The data are the documents the
// service answers (GET /v1/kernels/{key_id}?digest=1 and the key's records), read from the local store.
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <memory>

#include "service/dashboard_digest.h"
#include "service/dashboard_json.h"
#include "store/engine.h"
#include "store/record_json.h"
#include "service/ui_assets.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"

namespace tessera::cli {

namespace {

struct ReportArgs {
  std::string db, out;
  std::vector<std::string> keys;
  int max_records = 20000;
  int max_kernels = 20;
  bool json = false;
};

bool isHexPrefix(const std::string& s) {
  if (s.size() < 6 || s.size() > 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// A --key: a key_id or a unique prefix of one (at least 6 hex digits, as the pages show them).
std::string resolveKey(cache::RecordStore& store, const std::string& given) {
  if (!isHexPrefix(given)) fail("--key " + given + ": expected a key_id or a prefix of at least 6 of its hex digits", kExitBadInput);
  cache::KernelQuery q;
  if (given.size() == 64) q.key_id = given;
  else q.words = {given};
  q.limit = cache::kMaxKernelPage;
  auto page = store.kernels(q);
  if (!page.ok()) fail(page.error().message);
  std::vector<std::string> hits;
  for (const auto& row : page->rows)
    if (row.key_id.rfind(given, 0) == 0) hits.push_back(row.key_id);
  if (hits.empty()) fail("--key " + given + ": no kernel in the store has that key_id", kExitBadInput);
  if (hits.size() > 1) fail("--key " + given + ": " + std::to_string(hits.size()) + " kernels match; give more digits", kExitBadInput);
  return hits.front();
}

nlohmann::json kernelData(cache::RecordStore& store, const std::string& key_id, int max_records) {
  auto summary = cache::kernelSummaryJson(store, key_id);
  if (!summary.ok()) fail(summary.error().message);
  // The charts read the digest the service answers (GET /v1/kernels/{key_id}?digest=1).
  auto digest = cache::kernelDigestJson(store, key_id);
  if (!digest.ok()) fail(digest.error().message);
  (*summary)["digest"] = std::move(*digest);
  nlohmann::json records = nlohmann::json::array();
  cache::ListQuery q;
  q.key_id = key_id;
  q.limit = cache::kMaxListLimit;
  for (;;) {
    auto page = store.list(q);
    if (!page.ok()) fail(page.error().message);
    for (const auto& r : page->records) {
      if (static_cast<int>(records.size()) >= max_records) break;
      records.push_back(cache::recordToJson(r));
    }
    if (!page->next_after || static_cast<int>(records.size()) >= max_records) break;
    q.after_id = page->next_after;
  }
  const int64_t total = (*summary)["records"].get<int64_t>();
  return {{"summary", std::move(*summary)}, {"records", std::move(records)}, {"records_total", total}};
}

void runReport(const ReportArgs& a) {
  if (a.max_records < 1 || a.max_records > 1'000'000) fail("--max-records must be in 1..1000000", kExitBadInput);
  struct stat st {};
  // openStore would create a missing SQLite file: a report of nothing is a typo.
  if (!cache::isPostgresLocation(a.db) && ::stat(a.db.c_str(), &st) != 0) fail("no store at " + a.db, kExitBadInput);
  // A device or a FIFO is no store file: refused at once (/dev/zero was opened and failed with 1).
  if (!cache::isPostgresLocation(a.db) && !S_ISREG(st.st_mode))
    fail(a.db + " is not a store file (a device, FIFO or folder)", kExitBadInput);
  auto store = cache::openStore(a.db);
  if (!store.ok()) fail(store.error().message);
  std::vector<std::string> keys;
  for (const std::string& k : a.keys) keys.push_back(resolveKey(**store, k));
  if (keys.empty()) {
    cache::KernelQuery q;
    q.limit = a.max_kernels + 1;
    auto page = (*store)->kernels(q);
    if (!page.ok()) fail(page.error().message);
    if (page->total == 0) fail("the store at " + a.db + " holds no kernels", kExitBadInput);
    if (page->total > a.max_kernels)
      fail("the store holds " + std::to_string(page->total) + " kernels; choose up to " + std::to_string(a.max_kernels) +
               " with --key (key_ids as `tessera cache` and the dashboard show them)",
           2);
    for (const auto& row : page->rows) keys.push_back(row.key_id);
  }
  nlohmann::json data = {{"kernels", nlohmann::json::array()}, {"generated_at", cache::utcNow()},
                         {"source", cache::redactLocation(a.db)}};
  size_t records = 0;
  for (const std::string& k : keys) {
    data["kernels"].push_back(kernelData(**store, k, a.max_records));
    records += data["kernels"].back()["records"].size();
  }
  const auto& key = data["kernels"][0]["summary"]["key"];
  std::string title = "Tessera report: " + key["family"].get<std::string>() + " " +
                      cache::formatShape(key["shape"].get<std::vector<int64_t>>()) + " " + key["dtype"].get<std::string>() +
                      " on " + key["target"].get<std::string>();
  if (keys.size() > 1) title += " and " + std::to_string(keys.size() - 1) + " more";
  const std::string html = cache::renderReport(data, title);
  // Written next to the destination and renamed: a reader never sees half a report.
  const std::string tmp = a.out + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) fail("cannot write " + tmp, kExitBadInput);
    f << html;
    f.close();
    if (!f) fail("cannot write " + tmp, kExitBadInput);
  }
  if (std::rename(tmp.c_str(), a.out.c_str()) != 0) {
    std::remove(tmp.c_str());
    fail("cannot write " + a.out, kExitBadInput);
  }
  if (a.json) {
    std::printf("%s\n", nlohmann::json({{"out", a.out}, {"kernels", keys.size()}, {"records", records},
                                        {"bytes", html.size()}})
                            .dump(2)
                            .c_str());
    return;
  }
  std::printf("%s: %zu kernel%s, %zu record%s, %zu KiB (open it in a browser; nothing is fetched)\n", a.out.c_str(),
              keys.size(), keys.size() == 1 ? "" : "s", records, records == 1 ? "" : "s", html.size() / 1024);
}

}  // namespace

void addReportCommand(CLI::App& app) {
  auto a = std::make_shared<ReportArgs>();
  CLI::App* c = app.add_subcommand("report", "write a kernel's dashboard page as one self-contained HTML file");
  c->add_option("--db,--store", a->db, "the store to read (a SQLite file)")->required();
  c->add_option("--key", a->keys, "key_id (or a unique prefix of 6+ hex digits) of a kernel; repeatable "
                                  "(default: every kernel, when there are at most 20)");
  c->add_option("-o,--output", a->out, "the HTML file to write")->required();
  c->add_option("--max-records", a->max_records, "records per kernel at most (the newest are left out)")
      ->capture_default_str();
  addJsonFlag(c, a->json);
  c->callback([a] { runReport(*a); });
}

}  // namespace tessera::cli
