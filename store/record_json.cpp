// Owns the record's JSON wire form and its field-by-field validation. This decoder faces the
// network and is the libFuzzer target, so it never throws and refuses anything it does not know.
#include "store/record_json.h"
#include "store/kernel_text.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <initializer_list>

namespace tessera::cache {

using nlohmann::json;

namespace {

Error bad(const std::string& path, const std::string& what) {
  return makeError(ErrorCode::InvalidArgument, (path.empty() ? "record" : path) + ": " + what);
}

std::string join(const std::string& path, std::string_view field) {
  return path.empty() ? std::string(field) : path + "." + std::string(field);
}

Status requireObject(const json& j, const std::string& path,
                     std::initializer_list<std::string_view> allowed) {
  if (!j.is_object()) return bad(path, "expected an object");
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (std::find(allowed.begin(), allowed.end(), it.key()) == allowed.end())
      return bad(join(path, it.key()), "unknown field");
  }
  return {};
}

// Each getter leaves `out` alone when the field is absent and not required.
Status getString(const json& obj, std::string_view field, const std::string& path,
                 std::string& out, bool required) {
  auto it = obj.find(field);
  if (it == obj.end()) return required ? bad(join(path, field), "missing") : Status{};
  if (!it->is_string()) return bad(join(path, field), "expected a string");
  out = it->get_ref<const std::string&>();
  return {};
}

Status getInt(const json& obj, std::string_view field, const std::string& path, int64_t& out,
              bool required) {
  auto it = obj.find(field);
  if (it == obj.end()) return required ? bad(join(path, field), "missing") : Status{};
  if (it->is_number_unsigned()) {
    uint64_t v = it->get<uint64_t>();
    if (v > static_cast<uint64_t>(INT64_MAX)) return bad(join(path, field), "integer too large");
    out = static_cast<int64_t>(v);
    return {};
  }
  if (!it->is_number_integer()) return bad(join(path, field), "expected an integer");
  out = it->get<int64_t>();
  return {};
}

Status getDouble(const json& obj, std::string_view field, const std::string& path, double& out,
                 bool required) {
  auto it = obj.find(field);
  if (it == obj.end()) return required ? bad(join(path, field), "missing") : Status{};
  if (!it->is_number()) return bad(join(path, field), "expected a number");
  out = it->get<double>();
  if (!std::isfinite(out)) return bad(join(path, field), "expected a finite number");
  return {};
}

// Names and tags: short, no spaces or control characters, so they are safe as URL query values,
// Prometheus-free labels and file-name parts.
bool isToken(const std::string& s, size_t max_len) {
  if (s.empty() || s.size() > max_len) return false;
  for (unsigned char c : s)
    if (!(std::isalnum(c) || c == '_' || c == '.' || c == '-' || c == ':' || c == '+')) return false;
  return true;
}

// The names `tessera serve token add` accepts (tokens.cpp).
bool isTokenName(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (unsigned char c : s)
    if (!(std::isalnum(c) || c == '_' || c == '-' || c == '.' || c == '@')) return false;
  return true;
}

// Valid UTF-8 without control characters: records built in code reach the JSON encoder too.
bool isPrintable(const std::string& s, size_t max_len) {
  if (s.size() > max_len) return false;
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) return false;
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    uint32_t cp = len == 1 ? c : c & (0x7f >> len);
    for (size_t k = 1; k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    // Provenance is printed on terminals (`tessera best`): C1 controls and the invisible format
    // characters that reorder or hide text (bidi overrides and isolates, zero-width marks, BOM)
    // are refused like C0 controls.
    if ((cp >= 0x80 && cp <= 0x9f) || (cp >= 0x200b && cp <= 0x200f) || (cp >= 0x202a && cp <= 0x202e) ||
        (cp >= 0x2066 && cp <= 0x2069) || cp == 0xfeff)
      return false;
    i += len;
  }
  return true;
}

bool isLowerHex(const std::string& s, size_t lo, size_t hi) {
  if (s.size() < lo || s.size() > hi) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

bool isNameText(const std::string& s, size_t max_len) { return isToken(s, max_len); }
bool isPrintableText(const std::string& s, size_t max_len) { return isPrintable(s, max_len); }

Expected<json> parseJson(std::string_view text, int max_depth) {
  if (!jsonDepthWithin(text, max_depth))
    return makeError(ErrorCode::ParseError,
                     "JSON nested deeper than " + std::to_string(max_depth) + " levels");
  if (!jsonValuesWithin(text, kMaxJsonValues))
    return makeError(ErrorCode::ParseError, "more than " + std::to_string(kMaxJsonValues) + " JSON values");
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return makeError(ErrorCode::ParseError, "malformed JSON");
  return j;
}

json hardKeyToJson(const HardKey& k) {
  return json{{"family", k.family}, {"workload", k.workload}, {"shape", k.shape},
              {"dtype", k.dtype},   {"layout", k.layout},     {"target", k.target},
              {"arch", k.arch},     {"units", k.units}};
}

json recordToJson(const Record& r) {
  json j;
  if (r.id) j["id"] = r.id;
  j["key_id"] = r.key_id.empty() ? keyIdOf(r.key) : r.key_id;
  j["key"] = hardKeyToJson(r.key);
  const Provenance& p = r.provenance;
  j["provenance"] = json{{"tessera_version", p.tessera_version}, {"llvm_version", p.llvm_version},
                         {"cuda_version", p.cuda_version},       {"cpu_model", p.cpu_model},
                         {"host", p.host},                       {"user", p.user},
                         {"created_at", p.created_at}};
  // Only when known: a record without them keeps the JSON, and so the fingerprint, it always had.
  if (!p.driver_version.empty()) j["provenance"]["driver_version"] = p.driver_version;
  if (!p.runtime_version.empty()) j["provenance"]["runtime_version"] = p.runtime_version;
  json cfg = json::parse(r.config, nullptr, false);
  j["config"] = cfg.is_discarded() ? json::object() : cfg;
  j["status"] = recordStatusName(r.status);
  j["result"] = json{{"n", r.n},
                     {"median_us", r.median_us},
                     {"p20_us", r.p20_us},
                     {"p80_us", r.p80_us},
                     {"gflops", r.gflops},
                     {"gbps", r.gbps},
                     {"peak_fraction", r.peak_fraction},
                     {"max_abs_err", r.max_abs_err},
                     {"max_rel_err", r.max_rel_err},
                     {"trials", r.trials},
                     {"tuning_seconds", r.tuning_seconds}};
  // Written only when set, so the fingerprints of records stored before the field existed (and of
  // every single measurement) are unchanged.
  if (r.remeasured) j["result"]["remeasured"] = true;
  if (r.status == RecordStatus::Estimated) j["estimate"] = json{{"model", r.estimator}, {"bound", r.bound}};
  j["stale"] = r.stale;
  // Written only when set: local stores have none of them.
  if (!r.writer.empty()) j["writer"] = r.writer;
  if (!r.received_at.empty()) j["received_at"] = r.received_at;
  if (r.quarantined) j["quarantined"] = true;
  // A stored record says whose word it stands on (trust.h); a record built in code has no store yet.
  if (r.id) {
    j["trust"] = trustName(r.trust);
    j["tier"] = tierName(tierOf(r.trust, r.status == RecordStatus::Estimated));
  }
  if (!r.kernel_ir.empty()) j["kernel_ir"] = r.kernel_ir;
  return j;
}

std::string dumpJson(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string encodeRecord(const Record& r) { return dumpJson(recordToJson(r)); }

Expected<HardKey> hardKeyFromJson(const json& j, const std::string& path) {
  TESSERA_TRY(requireObject(
      j, path, {"family", "workload", "shape", "dtype", "layout", "target", "arch", "units"}));
  HardKey k;
  TESSERA_TRY(getString(j, "family", path, k.family, true));
  TESSERA_TRY(getString(j, "workload", path, k.workload, true));
  auto sh = j.find("shape");
  if (sh == j.end()) return bad(join(path, "shape"), "missing");
  if (!sh->is_array()) return bad(join(path, "shape"), "expected an array of integers");
  for (size_t i = 0; i < sh->size() && i <= kMaxRank; ++i) {
    const json& d = (*sh)[i];
    if (!d.is_number_integer() && !d.is_number_unsigned())
      return bad(join(path, "shape") + "[" + std::to_string(i) + "]", "expected an integer");
    if (d.is_number_unsigned() && d.get<uint64_t>() > static_cast<uint64_t>(kMaxDim))
      return bad(join(path, "shape") + "[" + std::to_string(i) + "]", "dimension too large");
    k.shape.push_back(d.get<int64_t>());
  }
  if (sh->size() > kMaxRank) return bad(join(path, "shape"), "at most 8 dims");
  TESSERA_TRY(getString(j, "dtype", path, k.dtype, true));
  TESSERA_TRY(getString(j, "layout", path, k.layout, true));
  TESSERA_TRY(getString(j, "target", path, k.target, true));
  TESSERA_TRY(getString(j, "arch", path, k.arch, true));
  TESSERA_TRY(getInt(j, "units", path, k.units, true));
  TESSERA_TRY(validateHardKey(k, path));
  return k;
}

Status validateHardKey(const HardKey& k, const std::string& path) {
  if (!isToken(k.family, 64)) return bad(join(path, "family"), "expected a name of 1-64 [A-Za-z0-9_.:+-]");
  if (!isLowerHex(k.workload, 8, 128))
    return bad(join(path, "workload"), "expected 8-128 lowercase hex digits");
  if (k.shape.empty() || k.shape.size() > kMaxRank)
    return bad(join(path, "shape"), "expected 1 to 8 dims");
  for (size_t i = 0; i < k.shape.size(); ++i)
    if (k.shape[i] < 1 || k.shape[i] > kMaxDim)
      return bad(join(path, "shape") + "[" + std::to_string(i) + "]", "expected a dimension in 1..2^40");
  if (!isToken(k.dtype, 64)) return bad(join(path, "dtype"), "expected a name of 1-64 [A-Za-z0-9_.:+-]");
  if (!isToken(k.layout, 64)) return bad(join(path, "layout"), "expected a name of 1-64 [A-Za-z0-9_.:+-]");
  if (!isToken(k.target, 64)) return bad(join(path, "target"), "expected a name of 1-64 [A-Za-z0-9_.:+-]");
  if (!isToken(k.arch, 128)) return bad(join(path, "arch"), "expected a name of 1-128 [A-Za-z0-9_.:+-]");
  if (k.units < 1 || k.units > kMaxUnits) return bad(join(path, "units"), "expected an integer in 1..1048576");
  return {};
}

Status validateRecord(const Record& r, const std::string& path) {
  TESSERA_TRY(validateHardKey(r.key, join(path, "key")));
  const Provenance& p = r.provenance;
  const std::string pp = join(path, "provenance");
  for (auto [name, value] : {std::pair<const char*, const std::string*>{"tessera_version", &p.tessera_version},
                             {"llvm_version", &p.llvm_version}, {"cuda_version", &p.cuda_version},
                             {"cpu_model", &p.cpu_model}, {"host", &p.host}, {"user", &p.user},
                             {"driver_version", &p.driver_version}, {"runtime_version", &p.runtime_version}}) {
    if (!isPrintable(*value, 256))
      return bad(join(pp, name), "expected at most 256 characters without control characters");
  }
  if (!isUtcTimestamp(p.created_at))
    return bad(join(pp, "created_at"), "expected a UTC time like 2025-01-31T12:00:00Z");
  if (r.config.size() > kMaxConfigBytes) return bad(join(path, "config"), "larger than 16 KiB");
  auto cfg = parseJson(r.config);
  if (!cfg.ok() || !cfg->is_object()) return bad(join(path, "config"), "expected a JSON object");

  const std::string rp = join(path, "result");
  for (auto [name, v] : {std::pair<const char*, double>{"median_us", r.median_us}, {"p20_us", r.p20_us},
                         {"p80_us", r.p80_us}, {"gflops", r.gflops}, {"gbps", r.gbps},
                         {"peak_fraction", r.peak_fraction}, {"max_abs_err", r.max_abs_err},
                         {"max_rel_err", r.max_rel_err}, {"tuning_seconds", r.tuning_seconds}}) {
    if (!std::isfinite(v) || v < 0) return bad(join(rp, name), "expected a finite number >= 0");
  }
  if (r.n < 0) return bad(join(rp, "n"), "expected an integer >= 0");
  if (r.trials < 0) return bad(join(rp, "trials"), "expected an integer >= 0");
  if (r.remeasured && r.status != RecordStatus::Ok) return bad(join(rp, "remeasured"), "only an ok record is re-measured");
  const std::string ep = join(path, "estimate");
  if (r.status == RecordStatus::Estimated) {
    if (!isToken(r.estimator, 64)) return bad(join(ep, "model"), "expected the estimator's name of 1-64 [A-Za-z0-9_.:+-]");
    if (!isToken(r.bound, 32)) return bad(join(ep, "bound"), "expected a name of 1-32 [A-Za-z0-9_.:+-]");
  } else if (!r.estimator.empty() || !r.bound.empty()) {
    return bad(ep, "only an estimated record names an estimator");
  }
  if (r.status == RecordStatus::Ok) {
    // A winner must carry a real measurement: without it best-wins would compare nothing.
    if (r.n < 1) return bad(join(rp, "n"), "must be >= 1 for status ok");
    if (!(r.median_us > 0)) return bad(join(rp, "median_us"), "must be > 0 for status ok");
    if (r.p20_us > r.median_us || r.median_us > r.p80_us)
      return bad(rp, "expected p20_us <= median_us <= p80_us");
  }
  return {};
}

Expected<Record> recordFromJson(const json& j, const std::string& path) {
  TESSERA_TRY(requireObject(j, path,
                            {"id", "key_id", "key", "provenance", "config", "status", "result", "stale", "estimate",
                             "writer", "received_at", "quarantined", "trust", "tier", "kernel_ir"}));
  Record r;
  // id, stale, writer, received_at, quarantined and trust belong to the store that produced the record:
  // read back for the caller's information (so exports re-import and clients see them); stores
  // assign their own and never take these from a client.
  TESSERA_TRY(getInt(j, "id", path, r.id, false));
  if (r.id < 0) return bad(join(path, "id"), "expected an integer >= 0");
  for (auto [name, flag] : {std::pair<const char*, bool*>{"stale", &r.stale}, {"quarantined", &r.quarantined}}) {
    if (auto it = j.find(name); it != j.end()) {
      if (!it->is_boolean()) return bad(join(path, name), "expected a boolean");
      *flag = it->get<bool>();
    }
  }
  TESSERA_TRY(getString(j, "writer", path, r.writer, false));
  if (!r.writer.empty() && !isTokenName(r.writer)) return bad(join(path, "writer"), "expected a token name");
  TESSERA_TRY(getString(j, "received_at", path, r.received_at, false));
  if (!r.received_at.empty() && !isUtcTimestamp(r.received_at))
    return bad(join(path, "received_at"), "expected a UTC time like 2025-01-31T12:00:00Z");
  if (auto it = j.find("trust"); it != j.end()) {
    auto t = it->is_string() ? parseTrust(it->get_ref<const std::string&>()) : std::nullopt;
    if (!t) return bad(join(path, "trust"), "expected disputed, refuted, claim, confirmed or vouched");
    r.trust = *t;
  }

  auto key = j.find("key");
  if (key == j.end()) return bad(join(path, "key"), "missing");
  TESSERA_ASSIGN(r.key, hardKeyFromJson(*key, join(path, "key")));

  auto prov = j.find("provenance");
  if (prov == j.end()) return bad(join(path, "provenance"), "missing");
  const std::string pp = join(path, "provenance");
  TESSERA_TRY(requireObject(*prov, pp, {"tessera_version", "llvm_version", "cuda_version", "cpu_model",
                                        "host", "user", "created_at", "driver_version", "runtime_version"}));
  Provenance& p = r.provenance;
  TESSERA_TRY(getString(*prov, "tessera_version", pp, p.tessera_version, false));
  TESSERA_TRY(getString(*prov, "llvm_version", pp, p.llvm_version, false));
  TESSERA_TRY(getString(*prov, "cuda_version", pp, p.cuda_version, false));
  TESSERA_TRY(getString(*prov, "cpu_model", pp, p.cpu_model, false));
  TESSERA_TRY(getString(*prov, "host", pp, p.host, false));
  TESSERA_TRY(getString(*prov, "user", pp, p.user, false));
  TESSERA_TRY(getString(*prov, "created_at", pp, p.created_at, true));
  TESSERA_TRY(getString(*prov, "driver_version", pp, p.driver_version, false));
  TESSERA_TRY(getString(*prov, "runtime_version", pp, p.runtime_version, false));

  auto cfg = j.find("config");
  if (cfg == j.end()) return bad(join(path, "config"), "missing");
  if (!cfg->is_object()) return bad(join(path, "config"), "expected a JSON object");
  r.config = dumpJson(*cfg);  // object keys are sorted: this is the canonical form

  std::string status;
  TESSERA_TRY(getString(j, "status", path, status, true));
  auto st = parseRecordStatus(status);
  if (!st)
    return bad(join(path, "status"),
               "expected one of ok|invalid-config|compile-error|timeout|crash|wrong-result|estimated");
  r.status = *st;

  auto res = j.find("result");
  if (res == j.end()) {
    if (r.status == RecordStatus::Ok) return bad(join(path, "result"), "missing (required for status ok)");
  } else {
    const std::string rp = join(path, "result");
    TESSERA_TRY(requireObject(*res, rp, {"n", "median_us", "p20_us", "p80_us", "gflops", "gbps",
                                         "peak_fraction", "max_abs_err", "max_rel_err", "trials",
                                         "tuning_seconds", "remeasured"}));
    const bool ok = r.status == RecordStatus::Ok;
    TESSERA_TRY(getInt(*res, "n", rp, r.n, ok));
    TESSERA_TRY(getDouble(*res, "median_us", rp, r.median_us, ok));
    // Quantiles default to the median so a one-number measurement is still consistent.
    r.p20_us = r.p80_us = r.median_us;
    TESSERA_TRY(getDouble(*res, "p20_us", rp, r.p20_us, false));
    TESSERA_TRY(getDouble(*res, "p80_us", rp, r.p80_us, false));
    TESSERA_TRY(getDouble(*res, "gflops", rp, r.gflops, false));
    TESSERA_TRY(getDouble(*res, "gbps", rp, r.gbps, false));
    TESSERA_TRY(getDouble(*res, "peak_fraction", rp, r.peak_fraction, false));
    TESSERA_TRY(getDouble(*res, "max_abs_err", rp, r.max_abs_err, false));
    TESSERA_TRY(getDouble(*res, "max_rel_err", rp, r.max_rel_err, false));
    TESSERA_TRY(getInt(*res, "trials", rp, r.trials, false));
    TESSERA_TRY(getDouble(*res, "tuning_seconds", rp, r.tuning_seconds, false));
    if (auto it = res->find("remeasured"); it != res->end()) {
      if (!it->is_boolean()) return bad(join(rp, "remeasured"), "expected true or false");
      r.remeasured = it->get<bool>();
    }
  }
  if (auto est = j.find("estimate"); est != j.end()) {
    const std::string ep = join(path, "estimate");
    TESSERA_TRY(requireObject(*est, ep, {"model", "bound"}));
    TESSERA_TRY(getString(*est, "model", ep, r.estimator, true));
    TESSERA_TRY(getString(*est, "bound", ep, r.bound, true));
  }
  TESSERA_TRY(validateRecord(r, path));
  // The kernel's text travels with its record and is checked against the key it claims to be.
  TESSERA_TRY(getString(j, "kernel_ir", path, r.kernel_ir, false));
  if (j.contains("kernel_ir")) {
    if (Status s = checkKernelText(r.key.workload, r.kernel_ir); !s.ok()) return bad(join(path, "kernel_ir"), s.error().message);
  }
  r.key_id = keyIdOf(r.key);
  if (auto it = j.find("key_id"); it != j.end()) {
    if (!it->is_string()) return bad(join(path, "key_id"), "expected a string");
    if (it->get_ref<const std::string&>() != r.key_id)
      return bad(join(path, "key_id"), "does not match the key (expected " + r.key_id + ")");
  }
  return r;
}

// A record is at most 64 KiB of JSON; a line that carries its kernel's text (kernel_ir, at most
// 64 KiB, escaped in JSON at most twice as long) may be that much longer. Each field is bounded
// again where it is read.
inline constexpr size_t kMaxRecordLineBytes = 4 * kMaxConfigBytes + 2 * kMaxKernelTextBytes;

Expected<Record> decodeRecord(std::string_view json_text) {
  if (json_text.size() > kMaxRecordLineBytes)
    return makeError(ErrorCode::InvalidArgument, "record: larger than " + std::to_string(kMaxRecordLineBytes >> 10) +
                                                     " KiB (64 KiB, and a kernel_ir of at most 64 KiB)");
  auto j = parseJson(json_text);
  if (!j.ok()) return j.takeError();
  return recordFromJson(*j, "");
}

}  // namespace tessera::cache
