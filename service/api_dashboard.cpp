// Owns the web dashboard's routes (issue 28): the pages under /ui/ (embedded files, with the
// dashboard's security headers), and the routes its pages call besides the records API: the
// overview (/v1/kernels), a kernel's summary, the comparison across targets, the job list, the
// caller's identity, and for admins the tokens (list, revoke) and the audit trail of writes.
// Every route here reads, except the two POSTs (a comparison, which computes, and a revocation).
#include <algorithm>
#include <cctype>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>

#include "service/api_internal.h"
#include "service/dashboard_digest.h"
#include "service/dashboard_json.h"
#include "service/http_compress.h"
#include "ir/text.h"
#include "store/kernel_text.h"
#include "store/record_json.h"
#include "service/ui_assets.h"
#include "support/strings.h"
#include "targets/gpu_skus.h"

namespace tessera::cache {

using nlohmann::json;

namespace {

constexpr size_t kMaxCompareTargets = 8;

ApiResponse withDashboardHeaders(ApiResponse r) {
  for (const auto& h : dashboardHeaders()) r.headers.push_back(h);
  return r;
}

ApiResponse redirect(std::string location) {
  ApiResponse r;
  r.status = 303;
  r.content_type = "text/plain; charset=utf-8";
  r.body = "see " + location + "\n";
  r.headers.emplace_back("Location", std::move(location));
  return withDashboardHeaders(std::move(r));
}

ApiResponse routeUi(RouteContext& c, const ApiRequest& r, const RouteMatch& m) {
  if (!c.opts.dashboard.serve_ui)
    return problem(404, "not-found", "Not found", "this server does not serve the dashboard");
  // The query belongs to the page's script (kernel.html?key=...), not to the file.
  // Relative locations: the pages work wherever a proxy mounts the service.
  if (m.id == RouteId::UiRoot) return redirect("ui/");
  if (r.path == "/ui") return redirect("ui/");
  const std::string_view name = std::string_view(r.path).substr(4);  // after "/ui/"
  const UiAsset* a = name.find('/') == std::string_view::npos ? findUiAsset(name) : nullptr;
  if (!a) return withDashboardHeaders(problem(404, "not-found", "Not found", "no file " + r.path));
  ApiResponse resp;
  // A file asked for by the version its page names never changes: the browser keeps it a year and
  // asks nothing. Pages, and files asked for without (or by an old) version, are revalidated.
  const std::string* v = r.param("v");
  const bool pinned = v && *v == a->version;
  for (const auto& h : dashboardHeaders())
    if (h.first != "Cache-Control") resp.headers.push_back(h);
  resp.headers.emplace_back("Cache-Control", pinned ? "public, max-age=31536000, immutable" : "no-cache");
  // Compressed once per process, at the encoders' best (ui_assets.h); chosen per request.
  Encoding e = Encoding::Identity;
  if (compressibleType(a->content_type) && a->served.size() >= kMinCompressBytes) {
    const std::string* ae = r.header("Accept-Encoding");
    e = acceptedEncoding(ae ? *ae : "");
    resp.headers.emplace_back("Vary", "Accept-Encoding");
  }
  resp.headers.emplace_back("ETag", a->etagFor(e));
  resp.content_type = std::string(a->content_type);
  if (const std::string* inm = r.header("If-None-Match"); inm && inm->find(a->etagFor(e)) != std::string::npos) {
    resp.status = 304;
    return resp;
  }
  resp.body = a->encoded(e);
  if (e != Encoding::Identity) resp.headers.emplace_back("Content-Encoding", std::string(encodingName(e)));
  return resp;
}

std::optional<ApiResponse> nameParam(const ApiRequest& r, std::string_view name, std::string& out) {
  if (const std::string* v = r.param(name)) {
    if (!isNameText(*v, 64))
      return problem(400, "invalid-query", "Invalid query", std::string(name) + ": expected a name of 1-64 [A-Za-z0-9_.:+-]");
    out = *v;
  }
  return std::nullopt;
}

ApiResponse routeKernels(RouteContext& c, const ApiRequest& r) {
  if (auto bad = checkQuery(r, {"family", "dtype", "target", "label", "q", "order", "offset", "limit"})) return *bad;
  KernelQuery q;
  for (auto [name, field] : {std::pair<std::string_view, std::string*>{"family", &q.family}, {"dtype", &q.dtype},
                             {"target", &q.target}})
    if (auto bad = nameParam(r, name, *field)) return *bad;
  if (const std::string* v = r.param("label")) {
    auto l = parseKernelLabel(*v);
    if (!l)
      return problem(400, "invalid-query", "Invalid query", "label: expected measured, estimated, failed, quarantined or any");
    q.label = *l;
  }
  if (const std::string* v = r.param("order")) {
    static const std::pair<std::string_view, KernelOrder> kOrders[] = {
        {"recent", KernelOrder::Recent}, {"kernel", KernelOrder::Kernel},
        {"arrived", KernelOrder::Arrived}, {"measured", KernelOrder::Measured}};
    auto it = std::find_if(std::begin(kOrders), std::end(kOrders), [&](const auto& o) { return o.first == *v; });
    if (it == std::end(kOrders))
      return problem(400, "invalid-query", "Invalid query", "order: expected recent, kernel, arrived or measured");
    q.order = it->second;
  }
  // A person types these: no case, and a target prefix finds its variants (sm_90 and sm_90a).
  q.loose = true;
  if (const std::string* v = r.param("q")) {
    // Key texts are ASCII names, so a search is too.
    const bool ascii = std::all_of(v->begin(), v->end(), [](char ch) { return ch >= 0x20 && ch <= 0x7e; });
    if (!ascii || v->size() > 256)
      return problem(400, "invalid-query", "Invalid query", "q: expected at most 256 printable ASCII characters");
    auto words = searchWords(*v);
    if (!words.ok()) return problem(400, "invalid-query", "Invalid query", words.error().message);
    q.words = std::move(*words);
    for (const std::string& w : q.words) q.word_chips.push_back(productChips(w));
  }
  int64_t offset = 0, limit = 50;
  if (auto bad = intParam(r, "offset", 0, 1'000'000'000, offset)) return *bad;
  if (auto bad = intParam(r, "limit", 1, kMaxKernelPage, limit)) return *bad;
  q.offset = offset;
  q.limit = static_cast<int>(limit);
  auto page = c.store.kernels(q);
  if (!page.ok()) return storageProblem(page.error());
  return jsonResponse(kernelPageJson(*page, q, &c.store));
}

// Long polls of the kernel page (?after=ID&wait=S): each holds a request thread while it waits,
// so a token holds at most kWaitsPerToken and the server kMaxWaits; a poll over the bound is
// answered at once (the page asks again after its pause).
constexpr int kWaitsPerToken = 2;
constexpr int kMaxWaits = 4;
constexpr int64_t kMaxWaitSeconds = 25;

class WaitSlots {
 public:
  bool take(const std::string& token) {
    std::lock_guard<std::mutex> g(mu_);
    if (total_ >= kMaxWaits || per_token_[token] >= kWaitsPerToken) return false;
    ++total_;
    ++per_token_[token];
    return true;
  }
  void give(const std::string& token) {
    std::lock_guard<std::mutex> g(mu_);
    --total_;
    if (--per_token_[token] == 0) per_token_.erase(token);
  }

 private:
  std::mutex mu_;
  int total_ = 0;
  std::map<std::string, int> per_token_;
};

WaitSlots& waitSlots() {
  static WaitSlots s;
  return s;
}

// Bumped when a server stops: the waits under way end at once (a stopping server lets its requests
// finish, and a poll must not hold it for its whole wait).
std::atomic<int64_t> gWaitGeneration{0};

// The digests of the keys pages asked for last, while the key's newest record id and record count
// stay the same and for at most kDigestTtl (an admin's pin or quarantine changes no id): a page
// reloaded, or opened by a second person, costs a lookup instead of a pass over every record.
// Entries belong to the Api that made them (its TokenUsage, held weakly): another Api of the same
// process, over another store, never reads them, even at a reused address.
constexpr size_t kDigestCacheKeys = 16;
constexpr auto kDigestTtl = std::chrono::seconds(10);

class DigestCache {
 public:
  using Owner = std::shared_ptr<TokenUsage>;
  std::optional<json> find(const Owner& owner, const std::string& key_id, int64_t newest, int64_t records) {
    std::lock_guard<std::mutex> g(mu_);
    for (const Entry& e : entries_)
      if (same(e, owner) && e.key_id == key_id && e.newest == newest && e.records == records &&
          std::chrono::steady_clock::now() - e.at < kDigestTtl)
        return e.digest;
    return std::nullopt;
  }
  void keep(const Owner& owner, const std::string& key_id, int64_t newest, int64_t records, const json& digest) {
    if (!owner) return;
    std::lock_guard<std::mutex> g(mu_);
    std::erase_if(entries_, [&](const Entry& e) { return e.owner.expired() || (same(e, owner) && e.key_id == key_id); });
    if (entries_.size() >= kDigestCacheKeys) entries_.erase(entries_.begin());
    entries_.push_back({owner, key_id, newest, records, std::chrono::steady_clock::now(), digest});
  }

 private:
  struct Entry {
    std::weak_ptr<TokenUsage> owner;
    std::string key_id;
    int64_t newest, records;
    std::chrono::steady_clock::time_point at;
    json digest;
  };
  static bool same(const Entry& e, const Owner& owner) {
    return owner && !e.owner.expired() && !e.owner.owner_before(owner) && !owner.owner_before(e.owner);
  }
  std::mutex mu_;
  std::vector<Entry> entries_;
};

DigestCache& digestCache() {
  static DigestCache c;
  return c;
}

ApiResponse routeKernelSummary(RouteContext& c, const ApiRequest& r, const RouteMatch& m) {
  if (auto bad = checkQuery(r, {"digest", "after", "wait"})) return *bad;
  if (!isKeyId(m.key_id)) return problem(400, "bad-key-id", "Bad key id", "a key_id is 64 lowercase hex digits (sha256)");
  const std::string key_id(m.key_id);
  bool digest = false;
  if (const std::string* v = r.param("digest")) {
    if (*v != "0" && *v != "1") return problem(400, "invalid-query", "Invalid query", "digest: expected 0 or 1");
    digest = *v == "1";
  }
  int64_t after = 0, wait = 0;
  if (auto bad = intParam(r, "after", 0, INT64_MAX, after)) return *bad;
  if (auto bad = intParam(r, "wait", 0, kMaxWaitSeconds, wait)) return *bad;
  if (r.param("after")) {
    // Nothing newer than `after` within `wait` seconds: {"unchanged": true}, and the page asks again.
    auto newest = newestRecordId(c.store, key_id, after);
    if (!newest.ok()) return storageProblem(newest.error());
    if (*newest == after && wait > 0) {
      // A key with no record at all has no page to keep live: 404 at once, no wait slot held.
      auto any = newestRecordId(c.store, key_id, 0);
      if (!any.ok()) return storageProblem(any.error());
      if (*any == 0) return problem(404, "unknown-key", "Not found", "no record has this key_id");
    }
    if (*newest == after && wait > 0 && waitSlots().take(c.token_name)) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(wait);
      const int64_t generation = gWaitGeneration.load();
      while (*newest == after && std::chrono::steady_clock::now() < until && gWaitGeneration.load() == generation) {
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
        newest = newestRecordId(c.store, key_id, after);
        if (!newest.ok()) break;
      }
      waitSlots().give(c.token_name);
      if (!newest.ok()) return storageProblem(newest.error());
    }
    if (*newest == after) return jsonResponse(json{{"unchanged", true}, {"max_id", after}});
  }
  auto j = kernelSummaryJson(c.store, key_id);
  if (!j.ok()) {
    if (j.error().code == ErrorCode::NotFound) return problem(404, "unknown-key", "Not found", j.error().message);
    return storageProblem(j.error());
  }
  if (digest) {
    auto newest = newestRecordId(c.store, key_id, 0);
    if (!newest.ok()) return storageProblem(newest.error());
    const int64_t records = (*j)["records"].get<int64_t>();
    const auto& owner = c.opts.dashboard.usage;
    if (auto hit = digestCache().find(owner, key_id, *newest, records)) {
      (*j)["digest"] = std::move(*hit);
    } else {
      auto d = kernelDigestJson(c.store, key_id);
      if (!d.ok()) return storageProblem(d.error());
      digestCache().keep(owner, key_id, *newest, records, *d);
      (*j)["digest"] = std::move(*d);
    }
  }
  return jsonResponse(*j);
}

// A kernel's canonical IR text from the kernel table (kernel_text.h), by the workload hash it is
// filed under, so that a client can compile any winner it pulled again. The text is checked once
// more before it leaves: a row changed behind the service's back is a 503, never served.
ApiResponse routeKernelText(RouteContext& c, const ApiRequest& r, const RouteMatch& m) {
  if (auto bad = checkQuery(r, {})) return *bad;
  if (!isKeyId(m.key_id))
    return problem(400, "bad-workload", "Bad workload hash", "a workload hash is 64 lowercase hex digits (sha256)");
  const std::string workload(m.key_id);
  auto text = c.store.kernelText(workload);
  if (!text.ok()) return storageProblem(text.error());
  if (!*text) return problem(404, "unknown-kernel", "Not found", "no kernel text for workload " + workload);
  if (Status st = checkKernelText(workload, **text); !st.ok())
    return problem(503, "corrupt-kernel-text", "Stored kernel text is damaged", st.error().message);
  ApiResponse resp;
  resp.content_type = "text/plain; charset=utf-8";
  resp.body = std::move(**text);
  return resp;
}

ApiResponse routeCompare(RouteContext& c, const ApiRequest& r) {
  if (auto bad = checkQuery(r, {})) return *bad;
  auto body = parseJson(r.body);
  if (!body.ok()) return problem(400, "malformed-json", "Malformed JSON", body.error().message);
  auto invalid = [](std::string d) { return problem(422, "invalid-request", "Invalid request", std::move(d)); };
  if (!body->is_object()) return invalid("expected an object: {\"key_id\" or \"kernel\", \"targets\"}");
  CompareRequest req;
  std::string key_id;
  for (auto it = body->begin(); it != body->end(); ++it) {
    const json& v = *it;
    if (it.key() == "key_id") {
      if (!v.is_string() || !isKeyId(v.get_ref<const std::string&>())) return invalid("key_id: expected 64 lowercase hex digits");
      key_id = v.get<std::string>();
    } else if (it.key() == "kernel") {
      if (!v.is_string() || v.get_ref<const std::string&>().empty() || v.get_ref<const std::string&>().size() > ir::kMaxIrTextBytes)
        return invalid("kernel: expected the kernel's IR text (at most 1 MiB)");
      req.kernel_text = v.get<std::string>();
    } else if (it.key() == "targets") {
      if (!v.is_array() || v.empty() || v.size() > kMaxCompareTargets)
        return invalid("targets: expected an array of 1-8 target names");
      for (const json& t : v) {
        if (!t.is_string() || !isNameText(t.get_ref<const std::string&>(), 64))
          return invalid("targets: expected target names of 1-64 [A-Za-z0-9_.:+-]");
        if (std::find(req.targets.begin(), req.targets.end(), t.get<std::string>()) != req.targets.end())
          return invalid("targets: '" + t.get<std::string>() + "' named twice");
        req.targets.push_back(t.get<std::string>());
      }
    } else {
      return invalid(it.key() + ": unknown field");
    }
  }
  if (key_id.empty() == req.kernel_text.empty()) return invalid("give exactly one of key_id and kernel");
  if (req.targets.empty()) return invalid("targets: missing");
  if (!c.opts.dashboard.compare)
    return problem(501, "compare-unavailable", "Not implemented",
                   "this build of tessera has no compiler: comparisons need the MLIR build of tessera serve");
  if (!key_id.empty()) {
    KernelQuery q;
    q.key_id = key_id;
    q.limit = 1;
    auto page = c.store.kernels(q);
    if (!page.ok()) return storageProblem(page.error());
    if (page->rows.empty()) return problem(404, "unknown-key", "Not found", "no kernel with key_id " + key_id);
    req.key = page->rows.front().key;
  }
  // A comparison compiles GPU kernels: one at a time per process, so a burst of them cannot take
  // every core (and every worker thread) from the lookups.
  static std::mutex busy;
  std::unique_lock<std::mutex> lock(busy, std::try_to_lock);
  if (!lock.owns_lock()) {
    ApiResponse resp = problem(503, "busy", "Busy", "another comparison is running; retry in a second");
    resp.headers.emplace_back("Retry-After", "1");
    return resp;
  }
  auto out = c.opts.dashboard.compare(c.store, req);
  if (!out.ok()) {
    if (out.error().code == ErrorCode::IOError) return storageProblem(out.error());
    return invalid(out.error().message);
  }
  ApiResponse resp;
  resp.body = std::move(*out);
  return resp;
}

ApiResponse routeJobsList(RouteContext& c, const ApiRequest& r) {
  if (auto bad = checkQuery(r, {"limit"})) return *bad;
  JobQueue* q = c.store.jobs();
  if (!q) return problem(503, "no-job-queue", "No job queue", "this store keeps no job queue");
  int64_t limit = 100;
  if (auto bad = intParam(r, "limit", 1, kMaxJobList, limit)) return *bad;
  // A job is its submitter's (and admins') business: others see the queue's totals only.
  const bool admin = c.token_scope && *c.token_scope == Scope::Admin;
  auto list = q->jobList(admin ? "" : c.token_name, static_cast<int>(limit), c.opts.queue);
  if (!list.ok()) return storageProblem(list.error());
  json jobs = json::array();
  if (admin || !c.token_name.empty())
    for (const JobSummary& j : list->jobs)
      jobs.push_back(json{{"id", j.id},         {"submitter", j.submitter}, {"kind", j.kind},
                          {"key", hardKeyToJson(j.key)}, {"key_id", j.key_id}, {"model", j.model},
                          {"state", j.state},   {"items", j.items},         {"queued", j.queued},
                          {"leased", j.leased}, {"done", j.done},           {"created_at", j.created_at},
                          {"finished_at", j.finished_at}, {"holders", j.holders}});
  const QueueTotals& t = list->totals;
  return jsonResponse(json{{"now", list->now},
                           {"scope", admin ? "all" : "own"},
                           {"totals", {{"open_jobs", t.open_jobs}, {"queued", t.queued}, {"leased", t.leased}, {"done", t.done}}},
                           {"jobs", std::move(jobs)}});
}

// Who the page is signed in as. No scope is needed to ask (a page without a token learns that it
// must show the sign-in prompt, or that anonymous reads are on); a token that is sent is checked.
ApiResponse routeWhoAmI(RouteContext& c, const ApiRequest& r) {
  if (auto bad = checkQuery(r, {})) return *bad;
  const std::string* authz = r.header("Authorization");
  if (!authz)
    return jsonResponse(json{{"name", nullptr}, {"scope", c.opts.allow_anonymous_reads ? "anonymous" : "none"}});
  std::string_view v = *authz;
  std::string scheme(v.substr(0, std::min<size_t>(7, v.size())));
  for (char& ch : scheme) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (scheme != "bearer ")
    return problem(401, "invalid-token", "Unauthorized", "Authorization must be 'Bearer <token>'");
  auto id = c.auth.identify(trim(v.substr(7)));
  if (!id) return problem(401, "invalid-token", "Unauthorized", "unknown or revoked token");
  if (c.opts.dashboard.usage) c.opts.dashboard.usage->touch(id->name);
  return jsonResponse(json{{"name", id->name}, {"scope", scopeName(id->scope)}});
}

// The GPU products of the target table (targets/gpu_skus.h), for a page that offers GPUs by name:
// each with the name a target list may carry (letters, digits and dashes, as /v1/compare takes
// it) and its chip.
ApiResponse routeGpus(RouteContext&, const ApiRequest& r) {
  if (auto bad = checkQuery(r, {})) return *bad;
  json gpus = json::array();
  for (const GpuSku& s : gpuSkus()) {
    std::string shortName = s.aliases.empty() ? s.name : s.aliases.front();
    for (char& ch : shortName)
      if (ch == ' ') ch = '-';
    if (!isNameText(shortName, 64)) continue;
    gpus.push_back(json{{"name", s.name}, {"target", shortName}, {"arch", s.arch}, {"segment", s.segment}});
  }
  return jsonResponse(json{{"gpus", std::move(gpus)}});
}

ApiResponse routeAdminTokens(RouteContext& c, const ApiRequest& r) {
  if (auto bad = checkQuery(r, {})) return *bad;
  if (!c.opts.dashboard.tokens) return problem(503, "no-token-store", "Unavailable", "token administration is not available here");
  auto all = c.opts.dashboard.tokens->list();
  if (!all.ok()) return storageProblem(all.error());
  json out = json::array();
  for (const TokenInfo& t : *all) {
    json j{{"name", t.name},
           {"scope", scopeName(t.scope)},
           {"created_at", t.created_at},
           {"revoked_at", t.revoked_at.empty() ? json(nullptr) : json(t.revoked_at)},
           {"hash_prefix", t.hash_prefix},
           {"last_used", nullptr},
           {"last_write", nullptr}};
    if (c.opts.dashboard.usage)
      if (auto at = c.opts.dashboard.usage->lastUsed(t.name)) j["last_used"] = *at;
    ListQuery q;
    q.writer = t.name;
    q.newest_first = true;
    q.limit = 1;
    q.quarantine = QuarantineFilter::Include;
    auto page = c.store.list(q);
    if (!page.ok()) return storageProblem(page.error());
    if (!page->records.empty()) j["last_write"] = page->records.front().received_at;
    out.push_back(std::move(j));
  }
  return jsonResponse(json{{"tokens", std::move(out)}, {"last_used_since", "this server process started"}});
}

ApiResponse routeAdminTokenRevoke(RouteContext& c, const ApiRequest& r) {
  if (auto bad = checkQuery(r, {})) return *bad;
  auto body = parseJson(r.body);
  if (!body.ok()) return problem(400, "malformed-json", "Malformed JSON", body.error().message);
  if (!body->is_object() || body->size() != 1 || !body->contains("name") || !(*body)["name"].is_string())
    return problem(422, "invalid-request", "Invalid request", "expected {\"name\": \"<token name>\"}");
  const std::string name = (*body)["name"].get<std::string>();
  if (Status s = checkTokenName(name); !s.ok()) return problem(422, "invalid-request", "Invalid request", s.error().message);
  if (!c.opts.dashboard.tokens) return problem(503, "no-token-store", "Unavailable", "token administration is not available here");
  if (Status s = c.opts.dashboard.tokens->revoke(name); !s.ok()) {
    if (s.error().code == ErrorCode::NotFound) return problem(404, "unknown-token", "Not found", s.error().message);
    return storageProblem(s.error());
  }
  std::fprintf(stderr, "tessera serve: admin '%s' revoked token '%s'\n", c.token_name.c_str(), name.c_str());
  if (c.opts.dashboard.reload_tokens) {
    if (Status s = c.opts.dashboard.reload_tokens(); !s.ok())
      std::fprintf(stderr, "tessera serve: token reload failed: %s\n", s.error().str().c_str());
  }
  return jsonResponse(json{{"revoked", name}});
}

ApiResponse routeAdminAudit(RouteContext& c, const ApiRequest& r) {
  if (auto bad = checkQuery(r, {"writer", "since", "until", "before", "quarantined", "limit"})) return *bad;
  ListQuery q;
  q.newest_first = true;
  q.quarantine = QuarantineFilter::Include;
  if (const std::string* v = r.param("writer")) {
    if (!checkTokenName(*v).ok()) return problem(400, "invalid-query", "Invalid query", "writer: expected a token name");
    q.writer = *v;
  }
  for (auto [name, field] : {std::pair<std::string_view, std::string*>{"since", &q.since}, {"until", &q.until}})
    if (const std::string* v = r.param(name)) {
      if (!isUtcTimestamp(*v))
        return problem(400, "invalid-query", "Invalid query", std::string(name) + ": expected a UTC time like 2025-01-31T12:00:00Z");
      *field = *v;
    }
  if (const std::string* v = r.param("quarantined")) {
    if (*v == "1") q.quarantine = QuarantineFilter::Only;
    else if (*v == "0") q.quarantine = QuarantineFilter::Exclude;
    else if (*v != "all") return problem(400, "invalid-query", "Invalid query", "quarantined: expected 0, 1 or all");
  }
  int64_t before = 0, limit = 100;
  if (auto bad = intParam(r, "before", 0, INT64_MAX, before)) return *bad;
  if (auto bad = intParam(r, "limit", 1, kMaxListLimit, limit)) return *bad;
  q.after_id = before;
  q.limit = static_cast<int>(limit);
  auto page = c.store.list(q);
  if (!page.ok()) return storageProblem(page.error());
  json records = json::array();
  for (const Record& rec : page->records) records.push_back(recordToJson(rec));
  return jsonResponse(json{{"records", std::move(records)},
                           {"next_before", page->next_after ? json(page->next_after) : json(nullptr)}});
}

}  // namespace

void endDashboardWaits() { ++gWaitGeneration; }

std::optional<RouteMatch> matchDashboardRoute(std::string_view method, std::string_view path) {
  RouteMatch m;
  auto route = [&](RouteId id, std::string_view want, std::optional<Scope> scope, BodyKind body) {
    m.id = id;
    m.scope = scope;
    m.body = body;
    if (method != want) {
      m.refuse = 405;
      m.allow = std::string(want);
    }
    return std::optional<RouteMatch>(m);
  };
  if (path == "/") return route(RouteId::UiRoot, "GET", std::nullopt, BodyKind::None);
  if (path == "/ui" || path.starts_with("/ui/")) return route(RouteId::UiAsset, "GET", std::nullopt, BodyKind::None);
  if (path == "/v1/kernels") return route(RouteId::Kernels, "GET", Scope::Read, BodyKind::None);
  if (path.starts_with("/v1/kernels/") && path.find('/', 12) == std::string_view::npos) {
    m.key_id = path.substr(12);
    return route(RouteId::KernelSummary, "GET", Scope::Read, BodyKind::None);
  }
  if (path.starts_with("/v1/kernel-texts/") && path.find('/', 17) == std::string_view::npos) {
    m.key_id = path.substr(17);  // the workload hash the text is filed under
    return route(RouteId::KernelText, "GET", Scope::Read, BodyKind::None);
  }
  if (path == "/v1/compare") return route(RouteId::Compare, "POST", Scope::Read, BodyKind::Json);
  if (path == "/v1/whoami") return route(RouteId::WhoAmI, "GET", std::nullopt, BodyKind::None);
  if (path == "/v1/gpus") return route(RouteId::Gpus, "GET", Scope::Read, BodyKind::None);
  if (path == "/v1/jobs" && method != "POST") {
    route(RouteId::JobsList, "GET", Scope::Read, BodyKind::None);
    if (m.refuse) m.allow = "GET, POST";
    return m;
  }
  if (path == "/v1/admin/tokens") return route(RouteId::AdminTokens, "GET", Scope::Admin, BodyKind::None);
  if (path == "/v1/admin/tokens/revoke") return route(RouteId::AdminTokenRevoke, "POST", Scope::Admin, BodyKind::Json);
  if (path == "/v1/admin/audit") return route(RouteId::AdminAudit, "GET", Scope::Admin, BodyKind::None);
  return std::nullopt;
}

ApiResponse routeDashboard(RouteContext& c, const ApiRequest& r, const RouteMatch& m) {
  switch (m.id) {
    case RouteId::UiRoot:
    case RouteId::UiAsset: return routeUi(c, r, m);
    case RouteId::Kernels: return routeKernels(c, r);
    case RouteId::KernelSummary: return routeKernelSummary(c, r, m);
    case RouteId::KernelText: return routeKernelText(c, r, m);
    case RouteId::Compare: return routeCompare(c, r);
    case RouteId::JobsList: return routeJobsList(c, r);
    case RouteId::WhoAmI: return routeWhoAmI(c, r);
    case RouteId::Gpus: return routeGpus(c, r);
    case RouteId::AdminTokens: return routeAdminTokens(c, r);
    case RouteId::AdminTokenRevoke: return routeAdminTokenRevoke(c, r);
    case RouteId::AdminAudit: return routeAdminAudit(c, r);
    default: break;
  }
  return problem(404, "not-found", "Not found", "no route " + r.path);
}

}  // namespace tessera::cache
