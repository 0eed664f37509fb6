// Owns reading recorded measurements (search/import.h): record exports, and the Kernel Tuner
// cache-file import, where a brute-forced space (knobs = tune_params, one entry per measured
// configuration, failures as strings in `time`) becomes tuning records, so the same strategies,
// cost model and store work on generic GPU knob spaces.
#include "search/import.h"

#include <unistd.h>
#include <zlib.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "support/hash.h"
#include "support/stats.h"
#include "support/strings.h"
#include "support/text_file.h"

namespace tessera::search {
namespace {

using json = nlohmann::json;

// Record key fields are tokens of [A-Za-z0-9_.:+-]: "NVIDIA GeForce RTX 3090" -> NVIDIA_GeForce_RTX_3090.
std::string tokenize(const std::string& s) {
  std::string out;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
              c == ':' || c == '+' || c == '-';
    out += ok ? c : '_';
  }
  return out.substr(0, 64);
}

// Knob values as Tessera configs hold them: integers (bools and integral floats too) or text.
json knobValue(const json& v) {
  if (v.is_boolean()) return v.get<bool>() ? 1 : 0;
  if (v.is_number_integer() || v.is_number_unsigned()) return v.get<int64_t>();
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::floor(d) == d && std::fabs(d) < 9e15) return int64_t(d);
    return formatDouble(d);
  }
  if (v.is_string()) return v;
  return v.dump();
}

// Kernel Tuner's failure markers -> record statuses.
cache::RecordStatus failureStatus(const std::string& marker) {
  if (marker.find("Compil") != std::string::npos) return cache::RecordStatus::CompileError;
  if (marker.find("Invalid") != std::string::npos) return cache::RecordStatus::InvalidConfig;
  if (marker.find("Timeout") != std::string::npos) return cache::RecordStatus::Timeout;
  return cache::RecordStatus::Crash;  // RuntimeFailedConfig and anything unknown
}

// "2023-12-22 09:54:05.502007+00:00" -> "2023-12-22T09:54:05Z"; records need a fixed time so a
// re-import is identical, hence the epoch when the file has none.
std::string createdAt(const json& entry) {
  auto it = entry.find("timestamp");
  if (it != entry.end() && it->is_string()) {
    std::string s = it->get<std::string>();
    if (s.size() >= 19) {
      std::string t = s.substr(0, 10) + "T" + s.substr(11, 8) + "Z";
      if (cache::isUtcTimestamp(t)) return t;
    }
  }
  return "1970-01-01T00:00:00Z";
}

Error bad(const std::string& path, const std::string& what) {
  return makeError(ErrorCode::InvalidArgument, path + ": " + what);
}

}  // namespace

Expected<std::vector<cache::Record>> importKernelTuner(const std::string& path, const std::string& targetName) {
  TESSERA_ASSIGN(std::string text, readMaybeGzip(path));
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return bad(path, "not a JSON object (a Kernel Tuner cache file?)");
  for (const char* f : {"kernel_name", "problem_size", "tune_params_keys", "tune_params", "cache"})
    if (!doc.contains(f)) return bad(path, std::string("missing field '") + f + "'");
  if (!doc["kernel_name"].is_string()) return bad(path, "kernel_name must be a string");
  if (!doc["tune_params_keys"].is_array() || !doc["tune_params"].is_object() || !doc["cache"].is_object())
    return bad(path, "tune_params_keys, tune_params and cache must be an array, an object and an object");

  cache::HardKey key;
  key.family = tokenize(doc["kernel_name"].get<std::string>());
  const json& ps = doc["problem_size"];
  if (ps.is_array()) {
    for (const auto& d : ps)
      if (d.is_number_integer() && d.get<int64_t>() >= 1) key.shape.push_back(d.get<int64_t>());
      else return bad(path, "problem_size must hold positive integers");
  } else if (ps.is_number_integer() && ps.get<int64_t>() >= 1) {
    key.shape.push_back(ps.get<int64_t>());
  } else {
    return bad(path, "problem_size must be a positive integer or a list of them");
  }
  // Workload identity: the kernel, its problem and its space (the two convolution files share it).
  key.workload = sha256Hex("kerneltuner/1\x1f" + doc["kernel_name"].get<std::string>() + "\x1f" + ps.dump() + "\x1f" +
                           doc["tune_params"].dump());
  key.dtype = "f32";
  if (auto it = doc["tune_params"].find("PRECISION"); it != doc["tune_params"].end() && it->is_array() && it->size() == 1) {
    int64_t bits = (*it)[0].is_number() ? (*it)[0].get<int64_t>() : 32;
    key.dtype = bits == 16 ? "f16" : bits == 64 ? "f64" : "f32";
  }
  key.layout = "row";
  std::string device = doc.value("device_name", std::string());
  std::string target = !targetName.empty() ? targetName : device;
  if (target.empty()) return bad(path, "device_name is empty: name the device with --target");
  key.target = tokenize(target);
  key.arch = key.target;
  key.units = 1;

  std::vector<std::string> knobs;
  for (const auto& k : doc["tune_params_keys"]) {
    if (!k.is_string()) return bad(path, "tune_params_keys must be strings");
    knobs.push_back(k.get<std::string>());
  }

  std::vector<cache::Record> out;
  for (auto it = doc["cache"].begin(); it != doc["cache"].end(); ++it) {
    const json& e = it.value();
    const std::string where = path + ": cache[\"" + it.key() + "\"]";
    if (!e.is_object() || !e.contains("time")) return bad(where, "entry without a time");
    cache::Record r;
    r.key = key;
    r.provenance.cpu_model = device.empty() ? target : device;
    r.provenance.host = "kernel_tuner";
    r.provenance.created_at = createdAt(e);
    json cfg = json::object();
    for (const auto& k : knobs) {
      if (!e.contains(k)) return bad(where, "lacks knob " + k);
      cfg[k] = knobValue(e[k]);
    }
    r.config = cfg.dump();
    const json& t = e["time"];
    if (t.is_number() && t.get<double>() > 0 && std::isfinite(t.get<double>())) {
      double ms = t.get<double>();
      r.status = cache::RecordStatus::Ok;
      r.median_us = ms * 1000;
      std::vector<double> us;
      if (auto ts = e.find("times"); ts != e.end() && ts->is_array())
        for (const auto& v : *ts)
          if (v.is_number()) us.push_back(v.get<double>() * 1000);
      r.n = std::max<int64_t>(1, int64_t(us.size()));
      // The file's time is the mean of its samples; the quantiles come from the samples,
      // widened to contain it.
      r.p20_us = us.empty() ? r.median_us : std::min(quantile(us, 0.2), r.median_us);
      r.p80_us = us.empty() ? r.median_us : std::max(quantile(us, 0.8), r.median_us);
      if (auto g = e.find("GFLOP/s"); g != e.end() && g->is_number() && std::isfinite(g->get<double>()))
        r.gflops = std::max(0.0, g->get<double>());
    } else if (t.is_string()) {
      r.status = failureStatus(t.get<std::string>());
    } else {
      r.status = cache::RecordStatus::Crash;
    }
    TESSERA_TRY(cache::finalizeRecord(r));
    out.push_back(std::move(r));
  }
  return out;
}

bool KnobMatch::matches(const std::string& configJson) const {
  const json cfg = json::parse(configJson, nullptr, false);
  if (!cfg.is_object()) return false;
  for (const auto& [knob, value] : values) {
    auto it = cfg.find(knob);
    if (it == cfg.end()) return false;
    if (it->is_string() ? it->get<std::string>() != value : it->dump() != value) return false;
  }
  return true;
}

Expected<KnobMatch> parseKnobMatch(const std::string& text) {
  KnobMatch m;
  for (const std::string& part : split(text, ',')) {
    const size_t eq = part.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == part.size())
      return makeError(ErrorCode::InvalidArgument, "'" + text + "': expected knob=value[,knob=value...]");
    m.values.push_back({part.substr(0, eq), part.substr(eq + 1)});
  }
  if (m.values.empty()) return makeError(ErrorCode::InvalidArgument, "'" + text + "': expected knob=value[,knob=value...]");
  return m;
}

Expected<TableExclusion> parseTableExclusion(const std::string& text) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos || colon == 0)
    return makeError(ErrorCode::InvalidArgument, "'" + text + "': expected TABLE:knob=value[,knob=value...]");
  TESSERA_ASSIGN(KnobMatch m, parseKnobMatch(text.substr(colon + 1)));
  return TableExclusion{text.substr(0, colon), std::move(m)};
}

Expected<std::vector<TableExclusion>> parseTableExclusions(const std::vector<std::string>& texts) {
  std::vector<TableExclusion> out;
  for (const auto& t : texts) {
    TESSERA_ASSIGN(TableExclusion x, parseTableExclusion(t));
    out.push_back(std::move(x));
  }
  return out;
}

size_t setAside(std::vector<cache::Record>& records, const KnobMatch& match) {
  size_t n = 0;
  for (auto& r : records)
    if (r.status == cache::RecordStatus::Ok && match.matches(r.config)) {
      r.status = cache::RecordStatus::Crash;
      r.median_us = r.p20_us = r.p80_us = r.gflops = 0;
      ++n;
    }
  return n;
}

Expected<std::string> readMaybeGzip(const std::string& path, size_t max_bytes) {
  // A regular file only (a FIFO would block, /dev/zero never ends); gzread passes files that are
  // not gzip through unchanged, and the text is read up to max_bytes (decompressed) and no further.
  TESSERA_ASSIGN(const int fd, openRegularFile(path, "file"));
  gzFile f = gzdopen(fd, "rb");
  if (!f) {
    ::close(fd);
    return makeError(ErrorCode::IOError, "cannot open " + path);
  }
  std::string out;
  char buf[1 << 16];
  for (;;) {
    if (out.size() > max_bytes) {
      gzclose(f);
      return makeError(ErrorCode::InvalidArgument,
                       path + " holds more than " + describeBytes(max_bytes) + " (decompressed)");
    }
    int n = gzread(f, buf, sizeof buf);
    if (n < 0) {
      int errnum = 0;
      std::string msg = gzerror(f, &errnum);
      gzclose(f);
      return makeError(ErrorCode::IOError, "cannot read " + path + ": " + msg);
    }
    if (n == 0) break;
    out.append(buf, size_t(n));
  }
  gzclose(f);
  return out;
}

Expected<std::vector<cache::Record>> readRecordFile(const std::string& path) {
  TESSERA_ASSIGN(std::string text, readMaybeGzip(path));
  std::vector<cache::Record> out;
  size_t pos = 0, line = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    ++line;
    std::string_view l(text.data() + pos, end - pos);
    pos = end + 1;
    if (l.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    auto r = cache::decodeRecord(l);
    if (!r.ok()) return makeError(ErrorCode::InvalidArgument, path + ":" + std::to_string(line) + ": " + r.error().message);
    out.push_back(std::move(*r));
  }
  return out;
}

}  // namespace tessera::search
