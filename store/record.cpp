// Owns the record's key, identity and ordering rules: key_id, fingerprint, "better", staleness,
// shape distance and timestamps. The JSON wire form lives in record_json.cpp.
#include "store/record.h"

#include <cmath>
#include <ctime>
#include <nlohmann/json.hpp>

#include "store/record_json.h"
#include "support/hash.h"
#include "support/strings.h"

namespace tessera::cache {

namespace {
constexpr std::string_view kStatusNames[] = {"ok",    "invalid-config", "compile-error", "timeout",
                                             "crash", "wrong-result",   "estimated"};
}  // namespace

std::string_view recordStatusName(RecordStatus s) { return kStatusNames[static_cast<int>(s)]; }

std::optional<RecordStatus> parseRecordStatus(std::string_view s) {
  for (size_t i = 0; i < std::size(kStatusNames); ++i)
    if (kStatusNames[i] == s) return static_cast<RecordStatus>(i);
  return std::nullopt;
}

RecordStatus recordStatusFromError(ErrorCode c) {
  switch (c) {
    case ErrorCode::InvalidConfig: return RecordStatus::InvalidConfig;
    case ErrorCode::CompileError: return RecordStatus::CompileError;
    case ErrorCode::Timeout: return RecordStatus::Timeout;
    case ErrorCode::WrongResult: return RecordStatus::WrongResult;
    default: return RecordStatus::Crash;
  }
}

std::string canonicalKey(const HardKey& k) {
  // A JSON array keeps field boundaries unambiguous (no separator can be smuggled into a field);
  // the version tag lets a future key format coexist with this one.
  nlohmann::json j = nlohmann::json::array(
      {"tessera-key/1", k.family, k.workload, k.shape, k.dtype, k.layout, k.target, k.arch, k.units});
  return dumpJson(j);
}

std::string keyIdOf(const HardKey& k) { return sha256Hex(canonicalKey(k)); }

bool isKeyId(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

Status finalizeRecord(Record& r) {
  TESSERA_TRY(validateRecord(r));
  auto cfg = nlohmann::json::parse(r.config, nullptr, /*allow_exceptions=*/false);
  r.config = dumpJson(cfg);  // validateRecord checked it is an object
  r.key_id = keyIdOf(r.key);
  return {};
}

std::string fingerprint(const Record& r) {
  nlohmann::json j = recordToJson(r);
  for (const char* assigned : {"id", "stale", "writer", "received_at", "quarantined", "trust", "tier", "kernel_ir"}) j.erase(assigned);
  return sha256Hex(dumpJson(j));
}

bool isWinnerCandidate(const Record& r) { return r.status == RecordStatus::Ok && r.trust != Trust::Refuted; }

bool isBetter(const Record& a, const Record& b) {
  if (!isWinnerCandidate(a)) return false;
  if (!isWinnerCandidate(b)) return true;
  const int ra = *winnerRank(a.trust, a.remeasured), rb = *winnerRank(b.trust, b.remeasured);
  if (ra != rb) return ra > rb;
  return a.median_us < b.median_us;
}

std::string toolchainOf(const Provenance& p) {
  // The unit separator cannot occur in provenance fields (control characters are refused).
  return p.tessera_version + '\x1f' + p.llvm_version + '\x1f' + p.cuda_version;
}

bool staleAgainst(const Provenance& recorded, const Provenance& current) {
  auto differs = [](const std::string& have, const std::string& want) { return !want.empty() && have != want; };
  return differs(recorded.tessera_version, current.tessera_version) ||
         differs(recorded.llvm_version, current.llvm_version) || differs(recorded.cuda_version, current.cuda_version);
}

std::vector<std::string> provenanceMismatch(const Provenance& recorded, const Provenance& current) {
  std::vector<std::string> out;
  auto check = [&](const std::string& have, const std::string& want, const char* name) {
    if (!want.empty() && have != want) out.emplace_back(name);
  };
  check(recorded.tessera_version, current.tessera_version, "tessera_version");
  check(recorded.llvm_version, current.llvm_version, "llvm_version");
  check(recorded.cuda_version, current.cuda_version, "cuda_version");
  check(recorded.cpu_model, current.cpu_model, "cpu_model");
  return out;
}

std::optional<double> shapeDistance(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  if (a.size() != b.size()) return std::nullopt;
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] <= 0 || b[i] <= 0) return std::nullopt;
    d += std::fabs(std::log(static_cast<double>(a[i]) / static_cast<double>(b[i])));
  }
  return d;
}

std::vector<std::string> keyDifferences(const HardKey& asked, const HardKey& stored) {
  std::vector<std::string> out;
  auto field = [&](const char* name, const std::string& mine, const std::string& theirs) {
    if (mine != theirs) out.push_back(std::string(name) + " " + theirs + " (asked " + mine + ")");
  };
  field("family", asked.family, stored.family);
  // A workload hash covers the shape: only at the same shape does another one mean another kernel.
  if (asked.workload != stored.workload && asked.shape == stored.shape)
    out.push_back("another workload of the family (another kernel or epilogue)");
  field("shape", formatShape(asked.shape), formatShape(stored.shape));
  field("dtype", asked.dtype, stored.dtype);
  field("layout", asked.layout, stored.layout);
  field("target", asked.target, stored.target);
  field("arch", asked.arch, stored.arch);
  field(asked.target == "host" ? "threads" : "units", std::to_string(asked.units), std::to_string(stored.units));
  return out;
}

std::string formatShape(const std::vector<int64_t>& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += 'x';
    out += std::to_string(s[i]);
  }
  return out;
}

Expected<std::vector<int64_t>> parseShape(std::string_view s) {
  if (s.empty() || s.size() > 200)
    return makeError(ErrorCode::InvalidArgument, "shape: expected dims like 1024x1024x512");
  std::vector<int64_t> dims;
  for (const std::string& part : split(s, 'x')) {
    auto v = parseInt(part);
    if (!v || *v < 1 || *v > kMaxDim)
      return makeError(ErrorCode::InvalidArgument,
                       "shape: '" + part + "' is not a dimension in 1.." + std::to_string(kMaxDim));
    dims.push_back(*v);
  }
  if (dims.size() > kMaxRank)
    return makeError(ErrorCode::InvalidArgument, "shape: at most 8 dims");
  return dims;
}

std::string utcNow() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

bool isUtcTimestamp(std::string_view s) {
  // YYYY-MM-DDTHH:MM:SSZ
  if (s.size() != 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' ||
      s[16] != ':' || s[19] != 'Z')
    return false;
  auto num = [&](size_t at, size_t len, int lo, int hi) {
    int v = 0;
    for (size_t i = at; i < at + len; ++i) {
      if (s[i] < '0' || s[i] > '9') return false;
      v = v * 10 + (s[i] - '0');
    }
    return v >= lo && v <= hi;
  };
  return num(0, 4, 1970, 9999) && num(5, 2, 1, 12) && num(8, 2, 1, 31) && num(11, 2, 0, 23) &&
         num(14, 2, 0, 59) && num(17, 2, 0, 60);
}

bool jsonValuesWithin(std::string_view text, size_t max) {
  // Every value but the first follows a ',', a ':', a '[' or a '{' outside a string.
  size_t values = 1;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if ((c == ',' || c == ':' || c == '[' || c == '{') && ++values > max) return false;
  }
  return true;
}

bool jsonDepthWithin(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > max_depth) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

}  // namespace tessera::cache
