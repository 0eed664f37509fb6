// Owns the record routes: best lookup (by key_id with ETag/304, by hard key with the nearest-shape
// fallback, batched), record submission with best-wins outcomes, paged listing, nearest shapes.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "service/api_internal.h"
#include "service/legality.h"
#include "service/plausibility.h"
#include "store/record_json.h"
#include "support/strings.h"

namespace tessera::cache {

using nlohmann::json;

namespace {

constexpr size_t kMaxBatch = 1000;
const std::initializer_list<std::string_view> kProvenanceParams = {
    "tessera_version", "llvm_version", "cuda_version", "cpu_model"};

// Why a winner is stale for this asker: the store's flag (a newer toolchain measured the key)
// plus any soft-provenance field the asker sent that differs from the record's.
struct Freshness {
  std::vector<std::string> reasons;
  unsigned mask = 0;  // part of the ETag: the same record may be fresh for one asker, not another
};

Freshness freshness(const Record& rec, const Provenance& asker) {
  Freshness f;
  if (rec.stale) {
    f.reasons.emplace_back("toolchain_superseded");
    f.mask |= 1;
  }
  for (const std::string& field : provenanceMismatch(rec.provenance, asker)) {
    f.reasons.push_back(field);
    f.mask |= field == "tessera_version" ? 2u : field == "llvm_version" ? 4u : field == "cuda_version" ? 8u : 16u;
  }
  return f;
}

std::string reasonsJson(const Freshness& f) {
  std::string out = "[";
  for (size_t i = 0; i < f.reasons.size(); ++i) out += (i ? ",\"" : "\"") + f.reasons[i] + "\"";
  return out + "]";
}

// The hot path: the record's JSON is cached, so the answer is a few appends.
std::string exactJson(const ServedRecord& w, const Freshness& f) {
  std::string out;
  out.reserve(w.json.size() + 160);
  out += "{\"match\":\"exact\",\"key_id\":\"";
  out += w.record.key_id;
  out += "\",\"stale\":";
  out += f.reasons.empty() ? "false" : "true";
  out += ",\"stale_reasons\":";
  out += reasonsJson(f);
  out += ",\"record\":";
  out += w.json;
  out += '}';
  return out;
}

std::optional<ApiResponse> askerProvenance(const ApiRequest& r, Provenance& p) {
  for (auto name : kProvenanceParams) {
    const std::string* v = r.param(name);
    if (!v) continue;
    if (v->size() > 256)
      return problem(400, "invalid-query", "Invalid query", std::string(name) + ": longer than 256 characters");
    if (name == "tessera_version") p.tessera_version = *v;
    else if (name == "llvm_version") p.llvm_version = *v;
    else if (name == "cuda_version") p.cuda_version = *v;
    else p.cpu_model = *v;
  }
  return std::nullopt;
}

bool etagMatches(const std::string* if_none_match, const std::string& etag) {
  if (!if_none_match) return false;
  for (const std::string& part : split(*if_none_match, ',')) {
    std::string_view t = trim(part);
    if (t == "*") return true;
    if (t.starts_with("W/")) t.remove_prefix(2);
    if (t == etag) return true;
  }
  return false;
}

ApiResponse exactAnswer(RouteContext& c, const ApiRequest& r, const ServedRecord& w, const Provenance& asker) {
  c.metrics.lookup(Metrics::Lookup::Hit);
  Freshness f = freshness(w.record, asker);
  std::string etag = "\"" + std::to_string(w.record.id) + "-" + std::to_string(f.mask) + "\"";
  ApiResponse resp;
  resp.headers.emplace_back("ETag", etag);
  resp.headers.emplace_back("Cache-Control", "no-cache");
  if (etagMatches(r.header("If-None-Match"), etag)) {
    resp.status = 304;
    resp.content_type.clear();
    return resp;
  }
  resp.body = exactJson(w, f);
  return resp;
}

// What an asker counts as fresh: its own toolchain and CPU where it says them, the server's
// current toolchain where it does not.
Provenance freshnessWanted(const RouteContext& c, const Provenance& asker) {
  Provenance want = asker;
  const Provenance& cur = c.opts.current_toolchain;
  if (want.tessera_version.empty()) want.tessera_version = cur.tessera_version;
  if (want.llvm_version.empty()) want.llvm_version = cur.llvm_version;
  if (want.cuda_version.empty()) want.cuda_version = cur.cuda_version;
  return want;
}

// Staleness is per record: when the key's winner is stale for this asker, the best record that
// is fresh for it is the answer (one future-dated or foreign-toolchain record cannot turn an
// honest key into a miss). Without such a record the winner is served, flagged stale.
Expected<ServedRecordPtr> answerFor(RouteContext& c, std::string_view key_id, ServedRecordPtr winner,
                                    const Provenance& asker) {
  if (!winner || freshness(winner->record, asker).reasons.empty()) return winner;
  const Provenance want = freshnessWanted(c, asker);
  if (want.tessera_version.empty() && want.llvm_version.empty() && want.cuda_version.empty() && want.cpu_model.empty())
    return winner;
  TESSERA_ASSIGN(ServedRecordPtr fresh, c.store.bestMatching(key_id, want));
  return fresh ? fresh : winner;
}

ApiResponse noRecord(RouteContext& c, const std::string& key_id) {
  c.metrics.lookup(Metrics::Lookup::Miss);
  return problem(404, "no-record", "No record", "no ok record for this key", json{{"key_id", key_id}});
}

// `trust=reproduced`: the asker takes only a reproduced record (trust.h, Tier); `trust=any` (the
// default) the best record of the highest tier there is, labelled.
std::optional<ApiResponse> trustParam(const ApiRequest& r, bool& reproduced_only) {
  reproduced_only = false;
  const std::string* t = r.param("trust");
  if (!t || *t == "any") return std::nullopt;
  if (*t != "reproduced") return problem(400, "invalid-query", "Invalid query", "trust: expected reproduced or any");
  reproduced_only = true;
  return std::nullopt;
}

// A winner the asker may be served: with reproduced only, a claim is a miss (the winner order puts
// every reproduced record before the claims, so a claim winner means the key has none).
bool servable(const ServedRecordPtr& w, bool reproduced_only) {
  return w && (!reproduced_only || isConfirmed(w->record.trust));
}

// Hard key from query parameters; `need_workload` is false for nearest-shape searches, which
// ignore the workload and the layout (the layout only breaks ties).
std::optional<ApiResponse> keyFromQuery(const ApiRequest& r, bool need_workload, HardKey& k) {
  std::vector<std::string> missing, empty;
  auto get = [&](std::string_view name, std::string& out, bool required) {
    if (const std::string* v = r.param(name)) {
      out = *v;
      if (v->empty()) empty.emplace_back(name);
    } else if (required) {
      missing.emplace_back(name);
    }
  };
  if (r.param("kernel") && r.param("family"))
    return problem(400, "invalid-query", "Invalid query", "give either family or its alias kernel, not both");
  if (const std::string* v = r.param("kernel")) k.family = *v;
  else get("family", k.family, true);
  get("workload", k.workload, need_workload);
  std::string shape, units = "1";
  get("shape", shape, true);
  get("dtype", k.dtype, true);
  get("layout", k.layout, need_workload);
  get("target", k.target, true);
  get("arch", k.arch, true);
  get("units", units, need_workload);
  if (!missing.empty())
    return problem(400, "invalid-query", "Invalid query", "missing query parameters: " + join(missing, ", "));
  if (!empty.empty()) return problem(400, "invalid-query", "Invalid query", "empty query parameters: " + join(empty, ", "));
  auto dims = parseShape(shape);
  if (!dims.ok()) return problem(400, "invalid-query", "Invalid query", dims.error().message);
  k.shape = std::move(*dims);
  auto u = parseInt(units);
  if (!u) return problem(400, "invalid-query", "Invalid query", "units: expected an integer");
  k.units = *u;
  // Fill what a nearest search does not need with valid placeholders so one validator serves both.
  HardKey check = k;
  if (check.workload.empty()) check.workload = "00000000";
  if (check.layout.empty()) check.layout = "row";
  if (Status s = validateHardKey(check, "key"); !s.ok())
    return problem(400, "invalid-query", "Invalid query", s.error().message);
  return std::nullopt;
}

std::string candidatesJson(const std::vector<NearestMatch>& matches) {
  json arr = json::array();
  for (const NearestMatch& m : matches)
    arr.push_back(json{{"distance", m.distance}, {"key_id", m.record.key_id}, {"shape", m.record.key.shape},
                       {"stale", m.record.stale}, {"record", recordToJson(m.record)}});
  return dumpJson(arr);
}

}  // namespace

ApiResponse routeBest(RouteContext& c, const ApiRequest& r, const RouteMatch& m) {
  if (auto bad = checkQuery(r, {"tessera_version", "llvm_version", "cuda_version", "cpu_model", "trust"})) return *bad;
  bool reproduced_only = false;
  if (auto bad = trustParam(r, reproduced_only)) return *bad;
  if (!isKeyId(m.key_id))
    return problem(400, "bad-key-id", "Bad key id", "a key_id is 64 lowercase hex digits (sha256)");
  Provenance asker;
  if (auto bad = askerProvenance(r, asker)) return *bad;
  auto w = c.store.best(m.key_id);
  if (w.ok()) w = answerFor(c, m.key_id, *w, asker);
  if (!w.ok()) return storageProblem(w.error());
  if (!servable(*w, reproduced_only)) return noRecord(c, std::string(m.key_id));
  return exactAnswer(c, r, **w, asker);
}

ApiResponse routeBestQuery(RouteContext& c, const ApiRequest& r, const RouteMatch&) {
  if (auto bad = checkQuery(r, {"family", "kernel", "workload", "shape", "dtype", "layout", "target", "arch",
                                "units", "nearest", "limit", "tessera_version", "llvm_version",
                                "cuda_version", "cpu_model", "trust"}))
    return *bad;
  bool reproduced_only = false;
  if (auto bad = trustParam(r, reproduced_only)) return *bad;
  HardKey key;
  if (auto bad = keyFromQuery(r, /*need_workload=*/true, key)) return *bad;
  Provenance asker;
  if (auto bad = askerProvenance(r, asker)) return *bad;
  int64_t limit = 3;
  if (auto bad = intParam(r, "limit", 1, 20, limit)) return *bad;
  const std::string* nearest = r.param("nearest");
  if (nearest && *nearest != "0" && *nearest != "1")
    return problem(400, "invalid-query", "Invalid query", "nearest: expected 0 or 1");
  const std::string key_id = keyIdOf(key);
  auto w = c.store.best(key_id);
  if (w.ok()) w = answerFor(c, key_id, *w, asker);
  if (!w.ok()) return storageProblem(w.error());
  if (servable(*w, reproduced_only)) return exactAnswer(c, r, **w, asker);
  if (*w || (nearest && *nearest == "0")) return noRecord(c, key_id);
  auto near = c.store.nearest(key, static_cast<int>(limit));
  if (!near.ok()) return storageProblem(near.error());
  if (near->empty()) return noRecord(c, key_id);
  c.metrics.lookup(Metrics::Lookup::Nearest);
  ApiResponse resp;
  resp.headers.emplace_back("Cache-Control", "no-cache");
  resp.body = "{\"match\":\"nearest\",\"key_id\":\"" + key_id + "\",\"candidates\":" + candidatesJson(*near) + "}";
  return resp;
}

ApiResponse routeNearest(RouteContext& c, const ApiRequest& r, const RouteMatch&) {
  if (auto bad = checkQuery(r, {"family", "kernel", "workload", "shape", "dtype", "layout", "target", "arch",
                                "units", "limit"}))
    return *bad;
  HardKey key;
  if (auto bad = keyFromQuery(r, /*need_workload=*/false, key)) return *bad;
  int64_t limit = 5;
  if (auto bad = intParam(r, "limit", 1, 100, limit)) return *bad;
  auto near = c.store.nearest(key, static_cast<int>(limit));
  if (!near.ok()) return storageProblem(near.error());
  ApiResponse resp;
  resp.body = "{\"candidates\":" + candidatesJson(*near) + "}";
  return resp;
}

ApiResponse routeBestBatch(RouteContext& c, const ApiRequest& r, const RouteMatch&) {
  if (auto bad = checkQuery(r, {})) return *bad;
  auto body = parseJson(r.body);
  if (!body.ok()) return problem(400, "malformed-json", "Malformed JSON", body.error().message);
  const json& j = *body;
  auto invalid = [](std::string detail) {
    return problem(422, "invalid-request", "Invalid request", std::move(detail));
  };
  if (!j.is_object()) return invalid("expected an object with key_ids and/or keys");
  for (auto it = j.begin(); it != j.end(); ++it)
    if (it.key() != "key_ids" && it.key() != "keys" && it.key() != "provenance")
      return invalid(it.key() + ": unknown field");
  std::vector<std::string> ids;
  if (auto it = j.find("key_ids"); it != j.end()) {
    if (!it->is_array()) return invalid("key_ids: expected an array");
    if (it->size() > kMaxBatch) return invalid("key_ids: at most 1000 keys per batch");
    for (size_t i = 0; i < it->size(); ++i) {
      const json& v = (*it)[i];
      if (!v.is_string() || !isKeyId(v.get_ref<const std::string&>()))
        return invalid("key_ids[" + std::to_string(i) + "]: expected 64 lowercase hex digits");
      ids.push_back(v.get<std::string>());
    }
  }
  if (auto it = j.find("keys"); it != j.end()) {
    if (!it->is_array()) return invalid("keys: expected an array");
    if (it->size() + ids.size() > kMaxBatch)
      return invalid("keys: at most 1000 keys per batch");
    for (size_t i = 0; i < it->size(); ++i) {
      auto k = hardKeyFromJson((*it)[i], "keys[" + std::to_string(i) + "]");
      if (!k.ok()) return invalid(k.error().message);
      ids.push_back(keyIdOf(*k));
    }
  }
  Provenance asker;
  if (auto it = j.find("provenance"); it != j.end()) {
    if (!it->is_object()) return invalid("provenance: expected an object");
    for (auto f = it->begin(); f != it->end(); ++f) {
      if (!f->is_string() || f->get_ref<const std::string&>().size() > 256)
        return invalid("provenance." + f.key() + ": expected a string of at most 256 characters");
      const std::string& v = f->get_ref<const std::string&>();
      if (f.key() == "tessera_version") asker.tessera_version = v;
      else if (f.key() == "llvm_version") asker.llvm_version = v;
      else if (f.key() == "cuda_version") asker.cuda_version = v;
      else if (f.key() == "cpu_model") asker.cpu_model = v;
      else return invalid("provenance." + f.key() + ": unknown field");
    }
  }
  std::string out = "{\"results\":[";
  for (size_t i = 0; i < ids.size(); ++i) {
    auto w = c.store.best(ids[i]);
    if (w.ok()) w = answerFor(c, ids[i], *w, asker);
    if (!w.ok()) return storageProblem(w.error());
    if (i) out += ',';
    if (!*w) {
      c.metrics.lookup(Metrics::Lookup::Miss);
      out += "{\"key_id\":\"" + ids[i] + "\",\"match\":\"miss\"}";
    } else {
      c.metrics.lookup(Metrics::Lookup::Hit);
      out += exactJson(**w, freshness((*w)->record, asker));
    }
  }
  out += "]}";
  ApiResponse resp;
  resp.body = std::move(out);
  return resp;
}

ApiResponse routeRecordsPost(RouteContext& c, const ApiRequest& r, const RouteMatch&) {
  if (auto bad = checkQuery(r, {})) return *bad;
  auto body = parseJson(r.body);
  if (!body.ok()) return problem(400, "malformed-json", "Malformed JSON", body.error().message);
  // Accepted forms: one record object, an array of records, or {"records": [...]}.
  const json* list = nullptr;
  bool single = false;
  if (body->is_array()) {
    list = &*body;
  } else if (body->is_object() && body->size() == 1 && body->contains("records")) {
    list = &(*body)["records"];
    if (!list->is_array())
      return problem(422, "invalid-records", "Invalid records", "records: expected an array");
  } else if (body->is_object()) {
    single = true;
  } else {
    return problem(422, "invalid-records", "Invalid records", "expected a record, an array of records or {\"records\": [...]}");
  }
  if (list && list->empty()) return problem(422, "invalid-records", "Invalid records", "no records given");
  if (list && list->size() > kMaxBatch)
    return problem(422, "invalid-records", "Invalid records", "at most 1000 records per request");
  std::vector<Record> records;
  json errors = json::array();
  const size_t n = single ? 1 : list->size();
  for (size_t i = 0; i < n; ++i) {
    const std::string path = single ? "" : "records[" + std::to_string(i) + "]";
    auto rec = recordFromJson(single ? *body : (*list)[i], path);
    Status plausible = rec.ok() && c.opts.check_plausibility ? checkPlausible(*rec, path) : Status{};
    if (rec.ok() && plausible.ok()) {
      records.push_back(std::move(*rec));
    } else if (errors.size() < 50) {
      errors.push_back(json{{"index", i}, {"detail", rec.ok() ? plausible.error().message : rec.error().message}});
    }
  }
  // The one legality rule (legality.h): the kernel text parses and is of the key's family, and a
  // host config is one the tuner's space for that kernel offers.
  if (errors.empty() && c.opts.check_plausibility) {
    auto refused = legalityRefusals(c.store, records, !single);
    if (!refused.ok()) return storageProblem(refused.error());
    for (const LegalityRefusal& x : *refused) errors.push_back(json{{"index", x.index}, {"detail", x.message}});
  }
  if (!errors.empty()) {
    std::string first = errors[0]["detail"].get<std::string>();
    return problem(422, "invalid-records", "Invalid records",
                   errors.size() == 1 ? first : first + " (and more; see errors)", json{{"errors", errors}});
  }
  auto results = c.store.put(records, servicePut(c));
  if (!results.ok()) return storageProblem(results.error());
  // The kernels' texts (checked against their keys by recordFromJson) into the kernel table.
  for (const Record& rec : records)
    if (!rec.kernel_ir.empty())
      if (Status s = c.store.putKernelText(rec.key.workload, rec.kernel_ir); !s.ok()) return storageProblem(s.error());
  countWrites(c.metrics, *results);
  json out = json::array();
  int counts[3] = {0, 0, 0};
  int duplicates = 0;
  for (size_t i = 0; i < results->size(); ++i) {
    const PutResult& p = (*results)[i];
    ++counts[static_cast<int>(p.outcome)];
    duplicates += p.duplicate;
    out.push_back(json{{"index", i}, {"outcome", putOutcomeName(p.outcome)}, {"id", p.id},
                       {"key_id", p.key_id}, {"duplicate", p.duplicate}, {"remeasured", p.remeasured},
                       {"trust", trustName(p.trust)}});
  }
  return jsonResponse(json{{"results", out}, {"inserted", counts[0]}, {"improved", counts[1]},
                           {"kept", counts[2]}, {"duplicates", duplicates}});
}

ApiResponse routeRecordsList(RouteContext& c, const ApiRequest& r, const RouteMatch&) {
  if (auto bad = checkQuery(r, {"key_id", "family", "workload", "dtype", "layout", "target", "arch", "units",
                                "status", "winners_only", "after", "limit"}))
    return *bad;
  ListQuery q;
  auto text = [&](std::string_view name, std::string& out) -> std::optional<ApiResponse> {
    if (const std::string* v = r.param(name)) {
      if (v->empty() || v->size() > 128)
        return problem(400, "invalid-query", "Invalid query", std::string(name) + ": expected 1-128 characters");
      out = *v;
    }
    return std::nullopt;
  };
  for (auto [name, field] : {std::pair<std::string_view, std::string*>{"key_id", &q.key_id},
                             {"family", &q.family}, {"workload", &q.workload}, {"dtype", &q.dtype},
                             {"layout", &q.layout}, {"target", &q.target}, {"arch", &q.arch},
                             {"status", &q.status}})
    if (auto bad = text(name, *field)) return *bad;
  if (!q.key_id.empty() && !isKeyId(q.key_id))
    return problem(400, "bad-key-id", "Bad key id", "a key_id is 64 lowercase hex digits (sha256)");
  if (!q.status.empty() && !parseRecordStatus(q.status))
    return problem(400, "invalid-query", "Invalid query", "status: not a record status");
  int64_t units = 0, after = 0, limit = 100;
  if (auto bad = intParam(r, "units", 1, kMaxUnits, units)) return *bad;
  if (r.param("units")) q.units = units;
  if (auto bad = intParam(r, "after", 0, INT64_MAX, after)) return *bad;
  if (auto bad = intParam(r, "limit", 1, kMaxListLimit, limit)) return *bad;
  if (const std::string* w = r.param("winners_only")) {
    if (*w != "0" && *w != "1" && *w != "true" && *w != "false")
      return problem(400, "invalid-query", "Invalid query", "winners_only: expected 0, 1, true or false");
    q.winners_only = *w == "1" || *w == "true";
  }
  q.after_id = after;
  q.limit = static_cast<int>(limit);
  auto page = c.store.list(q);
  if (!page.ok()) return storageProblem(page.error());
  ApiResponse resp;
  resp.body = recordsPage(*page);
  return resp;
}

// A reader's own run refuted a record (wrong result, unrunnable here, re-timed far slower): the
// claim is demoted below every other claim for every reader (trust.h: disputed) until another
// identity reproduces it. Only claims are disputed (a reproduced record stands on two identities,
// a refuted one is never served), never the reader's own, and at most disputes_per_minute per token.
ApiResponse routeRecordDispute(RouteContext& c, const ApiRequest& r, const RouteMatch& m) {
  if (auto bad = checkQuery(r, {})) return *bad;
  int64_t id = 0;
  const std::string id_text(m.path_id);
  const bool digits =
      !id_text.empty() && id_text.size() <= 18 &&
      std::all_of(id_text.begin(), id_text.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
  if (!digits || (id = std::stoll(id_text)) <= 0)
    return problem(404, "not-found", "Not found", "a record id is a positive integer");
  auto body = parseJson(r.body);
  if (!body.ok() || !body->is_object())
    return problem(400, "malformed-json", "Malformed JSON", "expected an object {why, measured_us}");
  for (const auto& [k, v] : body->items())
    if (k != "why" && k != "measured_us") return problem(422, "invalid-dispute", "Invalid dispute", k + ": unknown field");
  const auto why = body->find("why");
  if (why == body->end() || !why->is_string() || why->get_ref<const std::string&>().empty() ||
      !isPrintableText(why->get_ref<const std::string&>(), 200))
    return problem(422, "invalid-dispute", "Invalid dispute", "why: 1-200 printable characters saying what the run found");
  if (auto t = body->find("measured_us");
      t != body->end() && (!t->is_number() || !(t->get<double>() > 0) || !std::isfinite(t->get<double>())))
    return problem(422, "invalid-dispute", "Invalid dispute", "measured_us: a positive number");
  if (c.disputes && !c.disputes->take(c.token_name)) {
    ApiResponse resp = problem(429, "too-many-disputes", "Too many disputes",
                               "at most " + std::to_string(c.opts.disputes_per_minute) + " disputes a minute per token");
    resp.headers.emplace_back("Retry-After", "60");
    return resp;
  }
  RecordSelector sel{.ids = {id}};
  sel.except_writer = c.token_name;
  auto n = c.store.administer(sel, AdminAction::Dispute, c.opts.agree_factor);
  if (!n.ok()) return storageProblem(n.error());
  std::fprintf(stderr, "tessera serve: token %s disputed record %lld: %s\n", c.token_name.c_str(), (long long)id,
               why->get_ref<const std::string&>().c_str());
  return jsonResponse(json{{"id", id}, {"disputed", *n > 0}});
}

}  // namespace tessera::cache
