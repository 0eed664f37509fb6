// Owns the fail-open cache client and the outbox push: HTTP answers become LookupResult /
// PushResult values, and transport failures become warnings with a backoff.
#include "client/client.h"

#include <algorithm>
#include <functional>
#include <set>

#include "client/endpoints.h"
#include "client/http.h"
#include "store/kernel_text.h"
#include "store/outbox.h"
#include "store/record_json.h"

namespace tessera::cache {

using nlohmann::json;

namespace {
constexpr size_t kPutChunk = 500;

// "tessera cache URL: WHY", the URL once: a transport error already starts with it.
std::string aboutCache(const std::string& url, const std::string& why) {
  return "tessera cache " + (why.rfind(url + ": ", 0) == 0 ? why : url + ": " + why);
}
}  // namespace

CacheClient::CacheClient(CacheClientOptions opts) : opts_(std::move(opts)) {
  // Every message of the client names the URL: never with its password.
  opts_.base_url = redactUrl(opts_.base_url);
  endpoints_ = std::make_unique<ServiceEndpoints>(
      EndpointOptions{splitServiceUrls(opts_.base_url), opts_.token, opts_.ca_cert, opts_.timeout_s});
}
CacheClient::~CacheClient() = default;

Expected<CacheClient::Reply> CacheClient::call(const char* method, const std::string& path,
                                               const std::string& body, const std::string& content_type,
                                               double timeout_s) {
  if (!enabled()) return makeError(ErrorCode::InvalidArgument, "no cache URL configured");
  {
    std::lock_guard<std::mutex> g(mu_);
    if (std::chrono::steady_clock::now() < skip_until_)
      return makeError(ErrorCode::Unavailable, "skipped: it failed moments ago (retrying after a backoff)");
  }
  // Every URL of the list is tried before this counts as a failure (endpoints.h).
  auto reply = endpoints_->send(method, path, body, content_type, timeout_s);
  if (!reply.ok() && reply.error().code == ErrorCode::InvalidArgument) return reply.takeError();  // a bad URL
  if (!reply.ok()) {
    std::lock_guard<std::mutex> g(mu_);
    skip_until_ = std::chrono::steady_clock::now() +
                  std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                      std::chrono::duration<double>(opts_.backoff_s));
    return reply.takeError();
  }
  Reply r;
  r.status = reply->status;
  r.body = std::move(reply->body);
  if (const std::string* h = reply->header("Tessera-Next-Since")) r.next_since = *h;
  if (const std::string* h = reply->header("Tessera-More")) r.more = *h;
  return r;
}

std::string CacheClient::describe(const Reply& r) const {
  std::string out = "HTTP " + std::to_string(r.status);
  auto j = parseJson(r.body);
  if (j.ok() && j->is_object()) {
    if (auto d = j->find("detail"); d != j->end() && d->is_string()) out += " (" + d->get<std::string>() + ")";
  }
  return out;
}

Error CacheClient::replyError(const std::string& what, const Reply& r, ErrorCode other) const {
  if (r.status == 401 || r.status == 403)
    return makeError(ErrorCode::PermissionDenied,
                     what + ": " + describe(r) +
                         (r.status == 401 ? (opts_.token.empty() ? "; no token given: set TESSERA_TOKEN or pass --token"
                                                                 : "; check TESSERA_TOKEN / --token")
                                          : "; the token's scope does not allow this"));
  return makeError(other, what + ": " + describe(r));
}

namespace {

// Turns a 200 answer of /v1/best into a LookupResult; `warn` makes the miss-with-warning.
LookupResult parseAnswer(std::string body, const std::function<LookupResult(const std::string&)>& warn) {
  LookupResult out;
  auto j = parseJson(body);
  if (!j.ok() || !j->is_object()) return warn("unreadable answer");
  out.raw_json = std::move(body);
  const std::string match = j->value("match", "");
  if (match == "exact") {
    auto it = j->find("record");
    if (it == j->end()) return warn("answer without a record");
    auto rec = recordFromJson(*it, "record");
    if (!rec.ok()) return warn("invalid record in answer: " + rec.error().message);
    out.kind = LookupResult::Kind::Hit;
    out.record = std::move(*rec);
    out.stale = j->value("stale", false);
    if (auto r = j->find("stale_reasons"); r != j->end() && r->is_array())
      for (const json& reason : *r)
        if (reason.is_string()) out.stale_reasons.push_back(reason.get<std::string>());
    return out;
  }
  if (match == "nearest") {
    auto cands = j->find("candidates");
    if (cands == j->end() || !cands->is_array()) return warn("answer without candidates");
    for (const json& c : *cands) {
      if (!c.is_object() || !c.contains("record") || !c.contains("distance") || !c["distance"].is_number())
        return warn("malformed nearest candidate");
      auto rec = recordFromJson(c["record"], "record");
      if (!rec.ok()) return warn("invalid record in answer: " + rec.error().message);
      out.nearest.push_back({std::move(*rec), c["distance"].get<double>()});
    }
    out.kind = out.nearest.empty() ? LookupResult::Kind::Miss : LookupResult::Kind::Nearest;
    return out;
  }
  return warn("unknown answer kind '" + match + "'");
}

}  // namespace

LookupResult CacheClient::lookup(const std::string& path_and_query) {
  LookupResult out;
  if (!enabled()) return out;
  std::function<LookupResult(const std::string&)> warn = [&](const std::string& why) {
    LookupResult miss;
    miss.warning = aboutCache(opts_.base_url, why) + "; continuing without it";
    return miss;
  };
  auto reply = call("GET", path_and_query, "", "", opts_.timeout_s);
  if (!reply.ok()) return warn(reply.error().message);
  if (reply->status == 404) return out;  // a plain miss
  if (reply->status != 200) {
    LookupResult refused = warn(describe(*reply));
    refused.http_status = reply->status;
    return refused;
  }
  // Whatever the service sends, a tuning run must not die of it: any surprise is a miss.
  try {
    return parseAnswer(std::move(reply->body), warn);
  } catch (const std::exception& e) {
    return warn(std::string("unreadable answer (") + e.what() + ")");
  }
}

namespace {
void appendProvenance(std::string& q, const Provenance& p) {
  auto add = [&](const char* name, const std::string& v) {
    if (v.empty()) return;
    q += q.find('?') == std::string::npos ? '?' : '&';
    q += name;
    q += '=';
    q += urlEncode(v);
  };
  add("tessera_version", p.tessera_version);
  add("llvm_version", p.llvm_version);
  add("cuda_version", p.cuda_version);
  add("cpu_model", p.cpu_model);
}
}  // namespace

LookupResult CacheClient::best(const HardKey& key, const Provenance& current, bool allow_nearest) {
  std::string q = "/v1/best?family=" + urlEncode(key.family) + "&workload=" + urlEncode(key.workload) +
                  "&shape=" + formatShape(key.shape) + "&dtype=" + urlEncode(key.dtype) +
                  "&layout=" + urlEncode(key.layout) + "&target=" + urlEncode(key.target) +
                  "&arch=" + urlEncode(key.arch) + "&units=" + std::to_string(key.units);
  if (!allow_nearest) q += "&nearest=0";
  appendProvenance(q, current);
  return lookup(q);
}

LookupResult CacheClient::bestById(const std::string& key_id, const Provenance& current) {
  if (!isKeyId(key_id)) {
    LookupResult out;
    out.warning = "tessera cache: '" + key_id + "' is not a key id";
    return out;
  }
  std::string q = "/v1/best/" + key_id;
  appendProvenance(q, current);
  return lookup(q);
}

PushResult CacheClient::put(std::span<const Record> records) {
  PushResult out;
  if (!enabled()) {
    out.warning = "no cache URL configured";
    return out;
  }
  for (size_t start = 0; start < records.size(); start += kPutChunk) {
    const size_t end = std::min(records.size(), start + kPutChunk);
    std::string body = "{\"records\":[";
    for (size_t i = start; i < end; ++i) {
      if (i > start) body += ',';
      body += encodeRecord(records[i]);
    }
    body += "]}";
    auto reply = call("POST", "/v1/records", body, "application/json", opts_.write_timeout_s);
    if (!reply.ok()) {
      out.warning = aboutCache(opts_.base_url, reply.error().message);
      return out;
    }
    auto j = parseJson(reply->body);
    if (reply->status != 200 || !j.ok() || !j->is_object() || !j->contains("results") ||
        !(*j)["results"].is_array() || (*j)["results"].size() != end - start) {
      out.http_status = reply->status;
      out.warning = "tessera cache " + opts_.base_url + ": records refused: " + describe(*reply);
      return out;
    }
    try {
      for (const json& r : (*j)["results"]) {
        PutResult p;
        const std::string outcome = r.value("outcome", "kept");
        p.outcome = outcome == "inserted" ? PutOutcome::Inserted
                    : outcome == "improved" ? PutOutcome::Improved
                                            : PutOutcome::Kept;
        p.id = r.value("id", int64_t{0});
        p.duplicate = r.value("duplicate", false);
        p.key_id = r.value("key_id", "");
        out.results.push_back(std::move(p));
      }
    } catch (const std::exception& e) {
      // Stored or not, we cannot tell: report failure so the records stay in the outbox (a
      // re-push is idempotent).
      out.results.clear();
      out.warning = std::string("tessera cache: unreadable answer to a submission (") + e.what() + ")";
      return out;
    }
  }
  out.ok = true;
  return out;
}

Expected<ListPage> CacheClient::list(const ListQuery& q) {
  std::string path = "/v1/records?limit=" + std::to_string(std::clamp(q.limit, 1, kMaxListLimit));
  auto add = [&](const char* name, const std::string& v) {
    if (!v.empty()) path += std::string("&") + name + "=" + urlEncode(v);
  };
  add("key_id", q.key_id);
  add("family", q.family);
  add("workload", q.workload);
  add("dtype", q.dtype);
  add("layout", q.layout);
  add("target", q.target);
  add("arch", q.arch);
  add("status", q.status);
  if (q.units) path += "&units=" + std::to_string(*q.units);
  if (q.winners_only) path += "&winners_only=1";
  if (q.after_id > 0) path += "&after=" + std::to_string(q.after_id);
  auto reply = call("GET", path, "", "", opts_.timeout_s);
  if (!reply.ok()) return reply.takeError();
  if (reply->status != 200) return makeError(ErrorCode::IOError, "records: " + describe(*reply));
  auto j = parseJson(reply->body);
  if (!j.ok() || !j->is_object() || !j->contains("records") || !(*j)["records"].is_array())
    return makeError(ErrorCode::IOError, "records: unreadable answer");
  ListPage page;
  for (const json& r : (*j)["records"]) {
    auto rec = recordFromJson(r, "records[]");
    if (!rec.ok()) return makeError(ErrorCode::IOError, "records: " + rec.error().message);
    page.records.push_back(std::move(*rec));
  }
  if (auto n = j->find("next_after"); n != j->end() && n->is_number_integer()) page.next_after = n->get<int64_t>();
  return page;
}

Expected<ExportPage> CacheClient::exportPage(int64_t since, int limit) {
  auto reply = call("GET", "/v1/export?since=" + std::to_string(since) + "&limit=" + std::to_string(limit), "",
                    "", opts_.bulk_timeout_s);
  if (!reply.ok()) return reply.takeError();
  if (reply->status != 200) return replyError("export", *reply);
  ExportPage page;
  page.jsonl = std::move(reply->body);
  page.next_since = std::strtoll(reply->next_since.c_str(), nullptr, 10);
  page.more = reply->more == "true";
  return page;
}

Expected<std::string> CacheClient::importLines(const std::string& jsonl, bool partial) {
  auto reply = call("POST", partial ? "/v1/import?partial=1" : "/v1/import", jsonl, "application/x-ndjson",
                    opts_.bulk_timeout_s);
  if (!reply.ok()) return reply.takeError();
  if (reply->status != 200) return replyError("import", *reply, ErrorCode::InvalidArgument);
  return std::move(reply->body);
}

Expected<std::string> CacheClient::status() {
  auto reply = call("GET", "/status", "", "", opts_.timeout_s * 5);
  if (!reply.ok()) return reply.takeError();
  if (reply->status != 200) return replyError("status", *reply);
  return std::move(reply->body);
}

Expected<Identity> CacheClient::whoami() {
  auto reply = call("GET", "/v1/whoami", "", "", opts_.timeout_s * 2);
  if (!reply.ok()) return reply.takeError();
  if (reply->status == 404) return makeError(ErrorCode::NotFound, "whoami: " + describe(*reply));
  if (reply->status != 200) return replyError("tessera cache " + opts_.base_url, *reply);
  auto j = parseJson(reply->body);
  if (!j.ok() || !j->is_object()) return makeError(ErrorCode::RuntimeError, "whoami: unreadable answer");
  Identity id;
  if (auto n = j->find("name"); n != j->end() && n->is_string()) id.name = n->get<std::string>();
  if (auto sc = j->find("scope"); sc != j->end() && sc->is_string()) id.scope = sc->get<std::string>();
  return id;
}

Expected<std::optional<std::string>> CacheClient::kernelText(const std::string& workload) {
  if (!isKeyId(workload)) return makeError(ErrorCode::InvalidArgument, "'" + workload + "' is not a workload hash");
  auto reply = call("GET", "/v1/kernel-texts/" + workload, "", "", opts_.bulk_timeout_s);
  if (!reply.ok()) return reply.takeError();
  if (reply->status == 404) return std::optional<std::string>();
  if (reply->status != 200) return replyError("kernel text " + workload.substr(0, 12), *reply);
  if (Status st = checkKernelText(workload, reply->body); !st.ok())
    return makeError(ErrorCode::InvalidArgument,
                     "the service " + opts_.base_url + " sent a kernel text that is refused: " + st.error().message);
  return std::optional<std::string>(std::move(reply->body));
}

Expected<std::vector<CacheClient::KeyMatch>> CacheClient::findKeys(const std::string& prefix, int limit) {
  const bool hex = prefix.size() >= 4 && prefix.size() <= 64 &&
                   prefix.find_first_not_of("0123456789abcdef") == std::string::npos;
  if (!hex) return makeError(ErrorCode::InvalidArgument, "'" + prefix + "' is not 4 to 64 lowercase hex characters");
  std::vector<KeyMatch> out;
  // Paged: a prefix also matches inside other hashes; only those that start with it count.
  for (int offset = 0; offset < 2000; offset += 200) {
    auto reply = call("GET", "/v1/kernels?q=" + prefix + "&label=any&order=kernel&limit=200&offset=" + std::to_string(offset),
                      "", "", opts_.bulk_timeout_s);
    if (!reply.ok()) return reply.takeError();
    if (reply->status != 200) return replyError("search", *reply);
    auto j = parseJson(reply->body);
    if (!j.ok() || !j->is_object() || !j->contains("kernels") || !(*j)["kernels"].is_array())
      return makeError(ErrorCode::RuntimeError, "search: unreadable answer");
    const json& page = (*j)["kernels"];
    for (const json& row : page) {
      if (!row.is_object() || !row.contains("key_id") || !row["key_id"].is_string() || !row.contains("key")) continue;
      auto key = hardKeyFromJson(row["key"], "key");
      if (!key.ok()) continue;
      const std::string id = row["key_id"].get<std::string>();
      if (id.rfind(prefix, 0) == 0 || key->workload.rfind(prefix, 0) == 0) out.push_back({id, std::move(*key)});
      if (int(out.size()) >= limit) return out;
    }
    if (page.size() < 200) break;
  }
  return out;
}

Status CacheClient::checkAccess(const std::string& need, const std::string& what) {
  if (!enabled()) return {};
  auto id = whoami();
  if (!id.ok()) {
    if (id.error().code == ErrorCode::NotFound) return {};  // an older service: its answers will tell
    return id.takeError();
  }
  const std::string& scope = id->scope;
  const bool canRead = scope == "read" || scope == "write" || scope == "admin" || scope == "anonymous";
  const bool canWrite = scope == "write" || scope == "admin";
  if (need == "write" ? canWrite : canRead) return {};
  std::string who = scope == "none"        ? "no token was given and it does not allow anonymous reads"
                    : scope == "anonymous" ? "no token was given (anonymous reads only)"
                                           : "token '" + id->name + "' has scope " + scope;
  return makeError(ErrorCode::PermissionDenied,
                   "tessera cache " + opts_.base_url + ": " + what + " and needs a " + need + " token, but " + who +
                       " (set TESSERA_TOKEN or pass --token; `tessera serve token add NAME --scope " +
                       (need == "write" ? "write" : "read") + "` makes one)");
}

Expected<std::string> CacheClient::backup(const std::string& label) {
  std::string body = label.empty() ? "" : dumpJson(json{{"label", label}});
  auto reply = call("POST", "/v1/admin/backup", body, body.empty() ? "" : "application/json", opts_.bulk_timeout_s);
  if (!reply.ok()) return reply.takeError();
  if (reply->status != 200) return replyError("backup", *reply);
  return std::move(reply->body);
}

Expected<std::string> CacheClient::adminRecords(const std::string& query) {
  auto reply = call("GET", "/v1/admin/records" + (query.empty() ? "" : "?" + query), "", "", opts_.bulk_timeout_s);
  if (!reply.ok()) return reply.takeError();
  if (reply->status != 200) return replyError("admin records", *reply);
  return std::move(reply->body);
}

Expected<std::string> CacheClient::adminAction(const std::string& action, const std::string& selector_json) {
  auto reply = call("POST", "/v1/admin/records/" + action, selector_json, "application/json", opts_.bulk_timeout_s);
  if (!reply.ok()) return reply.takeError();
  if (reply->status != 200) return replyError(action, *reply);
  return std::move(reply->body);
}

Expected<bool> CacheClient::dispute(int64_t id, const std::string& why, double measured_us) {
  json body = {{"why", why.substr(0, 200)}};
  if (measured_us > 0) body["measured_us"] = measured_us;
  auto reply = call("POST", "/v1/records/" + std::to_string(id) + "/dispute", body.dump(), "application/json",
                    opts_.write_timeout_s);
  if (!reply.ok()) return reply.takeError();
  if (reply->status != 200) return replyError("dispute", *reply);
  auto j = parseJson(reply->body);
  return j.ok() && j->is_object() && j->value("disputed", false);
}

Expected<std::vector<Record>> CacheClient::candidates(const std::string& key_id, int limit) {
  std::vector<Record> out;
  ListQuery q{.key_id = key_id, .status = "ok"};
  q.limit = std::clamp(limit, 1, kMaxListLimit);
  while (static_cast<int>(out.size()) < limit) {
    TESSERA_ASSIGN(ListPage page, list(q));
    for (Record& r : page.records)
      if (isWinnerCandidate(r) && !r.quarantined) out.push_back(std::move(r));
    if (page.next_after == 0) break;
    q.after_id = page.next_after;
  }
  std::stable_sort(out.begin(), out.end(), [](const Record& a, const Record& b) { return isBetter(a, b); });
  if (static_cast<int>(out.size()) > limit) out.resize(static_cast<size_t>(limit));
  return out;
}

OutboxReport pushOutbox(RecordStore& local, CacheClient& client, size_t max_records) {
  OutboxReport rep;
  Outbox* box = local.outbox();
  if (!box) return rep;  // a store that keeps no outbox has nothing waiting
  auto remaining = [&] {
    auto st = local.stats();
    rep.remaining = st.ok() ? static_cast<size_t>(st->outbox) : 0;
  };
  if (!client.enabled()) {
    remaining();
    return rep;
  }
  while (rep.pushed + rep.rejected < max_records) {
    auto batch = box->pending(static_cast<int>(std::min<size_t>(kPutChunk, max_records - rep.pushed - rep.rejected)));
    if (!batch.ok()) {
      rep.warning = "outbox: " + batch.error().message;
      break;
    }
    if (batch->empty()) break;
    // The kernels' texts go along, once per workload of the batch, so the service can rebuild them.
    std::set<std::string> texts;
    for (Record& r : *batch)
      if (texts.insert(r.key.workload).second)
        if (auto text = local.kernelText(r.key.workload); text.ok() && *text) r.kernel_ir = **text;
    PushResult res = client.put(*batch);
    std::vector<int64_t> done;
    if (res.ok) {
      for (const Record& r : *batch) done.push_back(r.id);
      rep.pushed += done.size();
    } else if (res.http_status == 422) {
      // The service refuses something in the batch; push one by one so the good records get
      // through, and drop the refused ones from the outbox instead of retrying them forever.
      for (const Record& r : *batch) {
        PushResult one = client.put(std::span<const Record>(&r, 1));
        if (one.ok) {
          ++rep.pushed;
        } else if (one.http_status == 422) {
          ++rep.rejected;
          if (rep.warning.empty()) rep.warning = one.warning;
        } else {
          rep.warning = one.warning;
          break;
        }
        done.push_back(r.id);
      }
    } else {
      rep.warning = res.warning;
    }
    if (!done.empty()) {
      if (Status s = box->markPushed(done); !s.ok()) {
        rep.warning = "outbox: " + s.error().message;
        break;
      }
    }
    if (!res.ok && res.http_status != 422) break;
  }
  remaining();
  return rep;
}

KernelTextReport fetchKernelTexts(RecordStore& local, CacheClient& client, std::span<const Record> records) {
  KernelTextReport rep;
  if (!client.enabled()) return rep;
  std::set<std::string> asked;
  for (const Record& r : records) {
    if (!asked.insert(r.key.workload).second) continue;
    if (auto have = local.kernelText(r.key.workload); have.ok() && *have) continue;
    auto text = client.kernelText(r.key.workload);
    if (!text.ok()) {
      ++rep.refused;
      if (rep.warning.empty()) rep.warning = text.error().message;
      continue;
    }
    if (!*text) {
      ++rep.missing;
      continue;
    }
    // The store checks the text against its key once more (putKernelText refuses any other).
    if (Status st = local.putKernelText(r.key.workload, **text); !st.ok()) {
      ++rep.refused;
      if (rep.warning.empty()) rep.warning = st.error().message;
      continue;
    }
    ++rep.filed;
  }
  return rep;
}

}  // namespace tessera::cache
