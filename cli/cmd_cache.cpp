// Owns `tessera cache get|put|export|import|stats|backup`: a person's view of the shared tuning
// cache. The service URL and token come from --cache/--token or TESSERA_CACHE_URL/TESSERA_TOKEN
// (read here, at the CLI edge, and nowhere else).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "client/client.h"
#include "client/http.h"
#include "store/record.h"
#include "support/load.h"
#include "cli/cache_flags.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "support/text_file.h"

namespace tessera::cli {

namespace {

constexpr size_t kImportChunkBytes = 4u << 20;

struct CacheArgs {
  CacheFlags service;
  double timeout_s = 2.0;
};

// An error of the service's client: its category decides the exit code (exit_codes.h: 6 refused,
// 7 unreachable, ...); the message is the line.
[[noreturn]] void failService(const Error& e) { fail(e.message, exitCodeFor(e)); }

cache::CacheClient makeClient(const CacheArgs& a, bool bulk = false) {
  if (a.service.url.empty()) fail("no cache URL: pass --cache URL or set TESSERA_CACHE_URL", kExitBadInput);
  cache::CacheClientOptions o = clientOptions(a.service);
  o.timeout_s = a.timeout_s;
  o.backoff_s = 0;  // one-shot commands: no reason to skip a retry
  if (bulk) o.bulk_timeout_s = std::max(60.0, a.timeout_s);
  return cache::CacheClient(o);
}

// Record files are read up to a cap and no further (/dev/zero or an endless pipe is an error,
// not a hang or a memory spike).
constexpr size_t kMaxInputBytes = size_t{256} << 20;

std::string readInput(const std::string& path) {
  if (path != "-") {
    // A named file must be a regular one, refused at once otherwise: a FIFO blocked the open, and
    // /dev/zero was read up to the cap (256 MiB) before it was refused.
    auto text = readTextFile(path, {.max_bytes = kMaxInputBytes, .max_line_bytes = 0, .what = "record file"});
    if (!text.ok()) fail(text.error().message, kExitBadInput);
    return std::move(*text);
  }
  std::string text;
  char buf[1 << 16];
  while (std::cin.read(buf, sizeof buf) || std::cin.gcount() > 0) {
    text.append(buf, static_cast<size_t>(std::cin.gcount()));
    if (text.size() > kMaxInputBytes)
      fail(path + " is larger than " + std::to_string(kMaxInputBytes >> 20) + " MiB (split it)", kExitBadInput);
  }
  if (std::cin.bad()) fail("cannot read " + path, kExitBadInput);
  return text;
}

// The selector of an admin action (--id, --key-id, --writer, --since, --until) as JSON.
struct SelectorArgs {
  std::vector<int64_t> ids;
  std::string key_id, writer, since, until;
  bool dry_run = false;
  void add(CLI::App* app) {
    app->add_option("--id", ids, "record id (repeatable)");
    app->add_option("--key-id", key_id, "records of this key");
    app->add_option("--writer", writer, "records written by this token name");
    app->add_option("--since", since, "records received at or after this UTC time (2025-01-31T12:00:00Z)");
    app->add_option("--until", until, "records received before this UTC time");
    app->add_flag("--dry-run", dry_run, "only count the records it would apply to");
  }
  std::string json() const {
    nlohmann::json j = nlohmann::json::object();
    if (!ids.empty()) j["ids"] = ids;
    for (auto [name, v] : {std::pair<const char*, const std::string*>{"key_id", &key_id}, {"writer", &writer},
                           {"since", &since}, {"until", &until}})
      if (!v->empty()) j[name] = *v;
    if (j.empty()) fail("select records with --id, --key-id, --writer, --since and/or --until", kExitBadInput);
    if (dry_run) j["dry_run"] = true;
    return j.dump();
  }
};

// What a put or an import did, in the user's terms: records new to the service against those it
// already had (the same fingerprint), then what they did to the winners. The service's "kept" counts
// every record that did not become its key's winner, new ones included, so it is not shown as such.
std::string storedLine(int64_t records, int64_t duplicates, int64_t firstWinners, int64_t betterWinners,
                       const std::string& verb) {
  const int64_t fresh = records - duplicates, winners = firstWinners + betterWinners;
  std::string s = verb + std::to_string(records) + " record" + (records == 1 ? "" : "s") + ": " + std::to_string(fresh) +
                  " new, " + std::to_string(duplicates) + " already present; winners: " + std::to_string(firstWinners) +
                  " of new keys, " + std::to_string(betterWinners) + " improved";
  if (fresh > winners) s += " (" + std::to_string(fresh - winners) + " new records did not beat their key's winner)";
  return s;
}

// A record file: one JSON record, an array, {"records": [...]}, or JSON lines.
std::vector<cache::Record> parseRecords(const std::string& text, const std::string& source) {
  std::vector<cache::Record> out;
  auto whole = nlohmann::json::parse(text, nullptr, false);
  auto decodeOne = [&](const std::string& json_text, const std::string& where) {
    auto r = cache::decodeRecord(json_text);
    if (!r.ok()) fail(source + " " + where + ": " + r.error().message, kExitBadInput);
    out.push_back(std::move(*r));
  };
  if (!whole.is_discarded()) {
    const nlohmann::json* list = whole.is_array() ? &whole
                                 : whole.is_object() && whole.contains("records") ? &whole["records"]
                                                                                 : nullptr;
    if (list && list->is_array()) {
      for (size_t i = 0; i < list->size(); ++i) decodeOne((*list)[i].dump(), "[" + std::to_string(i) + "]");
    } else {
      decodeOne(text, "");
    }
    return out;
  }
  std::istringstream lines(text);
  std::string line;
  for (int n = 1; std::getline(lines, line); ++n)
    if (line.find_first_not_of(" \t\r") != std::string::npos) decodeOne(line, "line " + std::to_string(n));
  return out;
}

}  // namespace

void addCacheCommand(CLI::App& app) {
  auto args = std::make_shared<CacheArgs>();
  CLI::App* c = app.add_subcommand("cache", "Talk to a shared tuning-cache service");
  addCacheFlags(c, &args->service);
  c->add_option("--timeout", args->timeout_s, "seconds per request")->capture_default_str();
  c->require_subcommand(1);
  // Subcommands created below inherit this: `tessera cache get --cache URL` works as well as
  // `tessera cache --cache URL get`.
  c->fallthrough();
  // One --json for every subcommand (one of them runs): an answer already JSON stays as it is.
  auto json = std::make_shared<bool>(false);

  // get
  struct GetArgs {
    std::string key_id, family, workload, shape, dtype, layout = "row", target, arch;
    int64_t units = 0;
    bool no_nearest = false;
  };
  auto g = std::make_shared<GetArgs>();
  CLI::App* get = c->add_subcommand(
      "get", "Best record for a key (exit 5 on a miss): --key-id, or the key's fields; a key id or workload hash may "
             "be shortened to the 12 characters `tessera run`/`tune` print (an ambiguous prefix is refused)");
  get->add_option("--key-id", g->key_id, "key id (64 hex, or a prefix of at least 4)");
  get->add_option("--family", g->family, "kernel family");
  get->add_option("--workload", g->workload, "workload hash (64 hex, or a prefix of at least 4)");
  get->add_option("--shape", g->shape, "dims, e.g. 1024x1024x512");
  get->add_option("--dtype", g->dtype, "dtype");
  get->add_option("--layout", g->layout, "layout")->capture_default_str();
  get->add_option("--target", g->target, "target name");
  get->add_option("--arch", g->arch, "target arch");
  get->add_option("--units", g->units,
                  "threads (host: default all cores, as --threads everywhere) or SMs/CUs (GPU targets)");
  get->add_flag("--no-nearest", g->no_nearest, "exact key only");
  addJsonFlag(get, *json, "accepted: the record is printed as JSON anyway");
  get->callback([args, g] {
    cache::CacheClient client = makeClient(*args);
    auto isHex = [](const std::string& v) { return v.find_first_not_of("0123456789abcdef") == std::string::npos; };
    const bool shortId = !g->key_id.empty() && g->key_id.size() < 64;
    const bool shortWorkload = !g->workload.empty() && g->workload.size() < 64;
    for (const std::string* v : {&g->key_id, &g->workload})
      if (!v->empty() && (!isHex(*v) || v->size() < 4 || v->size() > 64))
        fail("'" + *v + "' is not a key id or workload hash: 4 to 64 lowercase hex characters", kExitBadInput);
    // The host's units are its threads, all cores unless said: the default of every host key.
    if (g->units == 0 && g->target == "host") g->units = int64_t(usableCores());
    cache::LookupResult res;
    std::string keyId = shortId || g->key_id.size() == 64 ? g->key_id : "";
    const bool allFields = !g->family.empty() && !g->shape.empty() && !g->dtype.empty() && !g->target.empty() &&
                           !g->arch.empty();
    if (shortWorkload && !shortId && allFields) {
      // Every key field is given: the prefix only names the workload, and the lookup by fields
      // (nearest shapes included) goes on with the one stored workload it starts.
      auto found = client.findKeys(g->workload, 100);
      if (!found.ok()) failService(found.error());
      std::set<std::string> workloads;
      for (const auto& m : *found)
        if (m.key.workload.rfind(g->workload, 0) == 0 && m.key.family == g->family && m.key.dtype == g->dtype &&
            m.key.target == g->target && m.key.arch == g->arch)
          workloads.insert(m.key.workload);
      if (workloads.size() > 1)
        fail("workload " + g->workload + " is ambiguous: " + std::to_string(workloads.size()) +
                 " stored workloads start with it; give more characters",
             kExitBadInput);
      if (workloads.size() == 1) g->workload = *workloads.begin();
    } else if (shortId || shortWorkload) {
      // A prefix is resolved to the one stored key it names, with the fields given as filters.
      auto found = client.findKeys(shortId ? g->key_id : g->workload, 100);
      if (!found.ok()) failService(found.error());
      std::vector<cache::CacheClient::KeyMatch> keys;
      for (auto& m : *found) {
        const cache::HardKey& k = m.key;
        if (shortId && m.key_id.rfind(g->key_id, 0) != 0) continue;
        if (shortWorkload && k.workload.rfind(g->workload, 0) != 0) continue;
        if (!g->family.empty() && k.family != g->family) continue;
        if (!g->shape.empty() && cache::formatShape(k.shape) != g->shape) continue;
        if (!g->dtype.empty() && k.dtype != g->dtype) continue;
        if (!g->target.empty() && k.target != g->target) continue;
        if (!g->arch.empty() && k.arch != g->arch) continue;
        if (g->units > 0 && k.units != g->units) continue;
        keys.push_back(std::move(m));
      }
      const std::string what = shortId ? "key id " + g->key_id : "workload " + g->workload;
      if (keys.empty()) fail("no stored key matches " + what + " and the fields given", kExitNotFound);
      if (keys.size() > 1) {
        std::string list;
        for (size_t i = 0; i < keys.size() && i < 4; ++i)
          list += (i ? "; " : "") + keys[i].key_id.substr(0, 16) + " (" + keys[i].key.family + " " +
                  cache::formatShape(keys[i].key.shape) + " " + keys[i].key.dtype + " " + keys[i].key.target + "/" +
                  keys[i].key.arch + "/" + std::to_string(keys[i].key.units) + ")";
        fail(what + " is ambiguous: " + std::to_string(keys.size()) + " stored keys match (" + list +
                 (keys.size() > 4 ? "; ..." : "") + "); give more characters or --family/--shape/--dtype/--target/--units",
             kExitBadInput);
      }
      keyId = keys.front().key_id;
    }
    if (!keyId.empty()) {
      res = client.bestById(keyId);
    } else {
      if (g->family.empty() || g->workload.empty() || g->shape.empty() || g->dtype.empty() || g->target.empty() ||
          g->arch.empty())
        fail("give --key-id, or --family, --workload, --shape, --dtype, --target and --arch (a hash prefix is enough)",
             kExitBadInput);
      if (g->units <= 0) fail("give --units (the target's SMs or CUs)", kExitBadInput);
      cache::HardKey k{g->family, g->workload, {}, g->dtype, g->layout, g->target, g->arch, g->units};
      auto dims = cache::parseShape(g->shape);
      if (!dims.ok()) fail("--shape: " + dims.error().message, kExitBadInput);
      k.shape = std::move(*dims);
      res = client.best(k, {}, !g->no_nearest);
    }
    // A lookup's warning says how a tune goes on without the cache; `cache get` stops instead.
    auto asError = [](std::string w) {
      const std::string tail = "; continuing without it";
      if (w.size() >= tail.size() && w.compare(w.size() - tail.size(), tail.size(), tail) == 0) w.resize(w.size() - tail.size());
      return w;
    };
    if (res.refused()) fail(asError(res.warning), kExitRefused);
    if (!res.warning.empty() && res.http_status == 0 && res.kind == cache::LookupResult::Kind::Miss)
      fail(asError(res.warning), kExitUnreachable);  // nobody answered: not a miss
    if (!res.warning.empty()) std::fprintf(stderr, "tessera: warning: %s\n", res.warning.c_str());
    if (res.kind == cache::LookupResult::Kind::Miss) {
      std::fprintf(stderr, "miss\n");
      printJsonError("miss", kExitNotFound);
      throw CLI::RuntimeError(kExitNotFound);
    }
    std::printf("%s\n", nlohmann::json::parse(res.raw_json).dump(2).c_str());
  });

  // put
  auto put_file = std::make_shared<std::string>();
  CLI::App* put = c->add_subcommand("put", "Submit records from a file (JSON, JSON array or JSON lines; - = stdin)");
  put->add_option("file", *put_file, "input")->required();
  addJsonFlag(put, *json);
  put->callback([args, put_file, json] {
    auto records = parseRecords(readInput(*put_file), *put_file);
    if (records.empty()) fail("no records in " + *put_file, kExitBadInput);
    cache::CacheClient client = makeClient(*args);
    cache::PushResult res = client.put(records);
    if (!res.ok)
      fail(res.warning, res.http_status == 401 || res.http_status == 403 ? kExitRefused
                        : res.http_status == 0                          ? kExitUnreachable
                        : res.http_status < 500                         ? kExitBadInput
                                                                        : kExitFailure);
    int counts[3] = {0, 0, 0}, duplicates = 0;
    for (const auto& r : res.results) {
      ++counts[static_cast<int>(r.outcome)];
      duplicates += r.duplicate;
    }
    if (*json) {
      std::printf("%s\n", nlohmann::json({{"records", res.results.size()}, {"new", int(res.results.size()) - duplicates},
                                          {"duplicates", duplicates}, {"inserted", counts[0]}, {"improved", counts[1]},
                                          {"kept", counts[2]}})
                              .dump(2)
                              .c_str());
      return;
    }
    std::printf("%s\n", storedLine(int64_t(res.results.size()), duplicates, counts[0], counts[1], "").c_str());
  });

  // export
  auto ex = std::make_shared<std::pair<int64_t, std::string>>(0, "-");
  CLI::App* exp = c->add_subcommand("export", "Write records as JSON lines (all, or those after --since)");
  exp->add_option("--since", ex->first, "export records with id > since")->capture_default_str();
  exp->add_option("-o,--out", ex->second, "output file (- = stdout)")->capture_default_str();
  addJsonFlag(exp, *json, "with -o FILE: the summary as JSON on stdout (the records are JSON lines either way)");
  exp->callback([args, ex, json] {
    cache::CacheClient client = makeClient(*args, /*bulk=*/true);
    std::ofstream file;
    if (ex->second != "-") {
      file.open(ex->second, std::ios::binary | std::ios::trunc);
      if (!file) fail("cannot write " + ex->second, kExitFailure);
    }
    std::ostream& out = ex->second == "-" ? std::cout : file;
    int64_t since = ex->first;
    size_t lines = 0;
    for (;;) {
      auto page = client.exportPage(since, 10000);
      if (!page.ok()) failService(page.error());
      out << page->jsonl;
      for (char ch : page->jsonl) lines += ch == '\n';
      since = page->next_since;
      if (!page->more) break;
    }
    out.flush();
    if (!out) fail("write failed", kExitFailure);
    if (*json && ex->second != "-")
      std::printf("%s\n", nlohmann::json({{"records", lines}, {"next_since", since}, {"out", ex->second}}).dump(2).c_str());
    else
      std::fprintf(stderr, "exported %zu records; next --since %lld\n", lines, static_cast<long long>(since));
  });

  // import
  auto im = std::make_shared<std::pair<std::string, bool>>("", false);
  CLI::App* imp = c->add_subcommand("import", "Import JSON lines (idempotent; merged best-wins)");
  imp->add_option("file", im->first, "JSON-lines file (- = stdin)")->required();
  imp->add_flag("--partial", im->second, "import the valid lines even if some are invalid");
  addJsonFlag(imp, *json);
  imp->callback([args, im, json] {
    const std::string text = readInput(im->first);
    // The service refuses a chunk with any invalid line, but chunks are separate requests: check
    // every line first so a bad line late in the file cannot leave a half-done import.
    if (!im->second) {
      std::istringstream lines(text);
      std::string line;
      for (int n = 1; std::getline(lines, line); ++n) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        auto r = cache::decodeRecord(line);
        if (!r.ok())
          fail(im->first + " line " + std::to_string(n) + ": " + r.error().message + " (nothing imported)", kExitBadInput);
      }
    }
    cache::CacheClient client = makeClient(*args, /*bulk=*/true);
    // Chunks end at line boundaries and stay well under the server's body limit.
    size_t start = 0, chunks = 0;
    int64_t totals[5] = {0, 0, 0, 0, 0};  // records inserted improved kept duplicates
    while (start < text.size()) {
      size_t end = std::min(text.size(), start + kImportChunkBytes);
      if (end < text.size()) {
        size_t nl = text.rfind('\n', end);
        end = nl == std::string::npos || nl < start ? text.find('\n', end) : nl + 1;
        if (end == std::string::npos) end = text.size();
      }
      auto report = client.importLines(text.substr(start, end - start), im->second);
      if (!report.ok())
        fail(report.error().message + (chunks ? " (earlier chunks were imported)" : ""), exitCodeFor(report.error()));
      auto j = nlohmann::json::parse(*report, nullptr, false);
      const char* names[] = {"records", "inserted", "improved", "kept", "duplicates"};
      for (int i = 0; i < 5; ++i)
        if (j.is_object() && j.contains(names[i]) && j[names[i]].is_number_integer()) totals[i] += j[names[i]].get<int64_t>();
      if (j.is_object() && j.contains("errors") && j["errors"].is_array())
        for (const auto& e : j["errors"]) std::fprintf(stderr, "skipped: %s\n", e.dump().c_str());
      ++chunks;
      start = end;
    }
    if (*json) {
      std::printf("%s\n", nlohmann::json({{"records", totals[0]}, {"new", totals[0] - totals[4]}, {"duplicates", totals[4]},
                                          {"inserted", totals[1]}, {"improved", totals[2]}, {"kept", totals[3]}})
                              .dump(2)
                              .c_str());
      return;
    }
    std::printf("%s\n", storedLine(totals[0], totals[4], totals[1], totals[2], "imported ").c_str());
  });

  CLI::App* stats = c->add_subcommand("stats", "Service status: counts, sizes, version (JSON)");
  // It prints JSON either way; --json is accepted for scripts that pass it to every command.
  addJsonFlag(stats, *json, "machine-readable output (what it prints anyway)");
  stats->callback([args] {
    cache::CacheClient client = makeClient(*args);
    auto s = client.status();
    if (!s.ok()) failService(s.error());
    std::printf("%s\n", nlohmann::json::parse(*s).dump(2).c_str());
  });

  // Admin: list, quarantine, release, delete (issue 15's trust model).
  struct ListArgs {
    std::string key_id, writer, since, until, quarantined = "all";
    int64_t limit = 1000;
  };
  auto la = std::make_shared<ListArgs>();
  CLI::App* list = c->add_subcommand("list", "Records with their writers and quarantine state, as JSON lines (admin token)");
  list->add_option("--key-id", la->key_id, "records of this key");
  list->add_option("--writer", la->writer, "records written by this token name");
  list->add_option("--since", la->since, "received at or after this UTC time");
  list->add_option("--until", la->until, "received before this UTC time");
  list->add_option("--quarantined", la->quarantined, "0, 1 or all")->capture_default_str();
  list->add_option("--limit", la->limit, "records at most")->capture_default_str();
  addJsonFlag(list, *json, "accepted: the records are JSON lines anyway");
  list->callback([args, la] {
    cache::CacheClient client = makeClient(*args, /*bulk=*/true);
    std::string base;
    for (auto [name, v] : {std::pair<const char*, const std::string*>{"key_id", &la->key_id}, {"writer", &la->writer},
                           {"since", &la->since}, {"until", &la->until}, {"quarantined", &la->quarantined}})
      if (!v->empty()) base += std::string(base.empty() ? "" : "&") + name + "=" + cache::urlEncode(*v);
    int64_t shown = 0, after = 0;
    while (shown < la->limit) {
      const int64_t page_size = std::min<int64_t>(1000, la->limit - shown);
      auto page = client.adminRecords(base + (base.empty() ? "" : "&") + "limit=" + std::to_string(page_size) +
                                      "&after=" + std::to_string(after));
      if (!page.ok()) failService(page.error());
      auto j = nlohmann::json::parse(*page, nullptr, false);
      if (!j.is_object() || !j.contains("records")) fail("unreadable answer", kExitFailure);
      for (const auto& r : j["records"]) std::printf("%s\n", r.dump().c_str());
      shown += static_cast<int64_t>(j["records"].size());
      if (!j["next_after"].is_number_integer()) break;
      after = j["next_after"].get<int64_t>();
    }
  });
  for (const char* action : {"quarantine", "delete"}) {
    auto sel = std::make_shared<SelectorArgs>();
    auto release = std::make_shared<bool>(false);
    CLI::App* cmd = c->add_subcommand(
        action, std::string(action) == "delete"
                    ? "Delete records by id, key, writer or time received (admin token)"
                    : "Quarantine records (kept, never served or a winner) by id, key, writer or time received (admin token)");
    sel->add(cmd);
    if (std::string(action) == "quarantine") cmd->add_flag("--release", *release, "release them from quarantine instead");
    addJsonFlag(cmd, *json);
    cmd->callback([args, sel, release, action, json] {
      cache::CacheClient client = makeClient(*args, /*bulk=*/true);
      const std::string route = std::string(action) == "delete" ? "delete" : *release ? "release" : "quarantine";
      auto res = client.adminAction(route, sel->json());
      if (!res.ok()) failService(res.error());
      auto j = nlohmann::json::parse(*res, nullptr, false);
      const int64_t n = j.is_object() ? j.value("records", int64_t{0}) : 0;
      if (*json) {
        std::printf("%s\n", nlohmann::json({{"action", route}, {"dry_run", sel->dry_run}, {"records", n}}).dump(2).c_str());
        return;
      }
      std::printf("%s%s %lld records\n", sel->dry_run ? "would " : "",
                  route == "delete" ? (sel->dry_run ? "delete" : "deleted")
                  : route == "release" ? (sel->dry_run ? "release" : "released")
                                       : (sel->dry_run ? "quarantine" : "quarantined"),
                  static_cast<long long>(n));
    });
  }

  auto label = std::make_shared<std::string>();
  CLI::App* backup = c->add_subcommand("backup", "Ask the service for an online backup (admin token)");
  backup->add_option("--label", *label, "suffix for the backup file name");
  addJsonFlag(backup, *json);
  backup->callback([args, label, json] {
    cache::CacheClient client = makeClient(*args, /*bulk=*/true);
    auto s = client.backup(*label);
    if (!s.ok()) failService(s.error());
    if (*json) {
      auto j = nlohmann::json::parse(*s, nullptr, false);
      std::printf("%s\n", (j.is_discarded() ? nlohmann::json({{"backup", *s}}) : j).dump(2).c_str());
      return;
    }
    std::printf("%s\n", s->c_str());
  });
}

}  // namespace tessera::cli
