// Owns GPU products by name: the lookup rules, a product's TargetDesc, and the facts files users
// add GPUs with (their checks: every field present, known, in range and consistent with its chip).
#include "targets/gpu_skus.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include "targets/gpu_sku_table.h"
#include "targets/gpu_targets.h"

namespace tessera {

namespace {

using json = nlohmann::json;

std::mutex& registryMutex() {
  static std::mutex m;
  return m;
}
std::vector<GpuSku>& userRows() {
  static std::vector<GpuSku> rows;
  return rows;
}

// Brand words that say nothing about which GPU it is ("NVIDIA GeForce RTX 4090" = "RTX 4090").
bool brandWord(const std::string& w) {
  return w == "nvidia" || w == "geforce" || w == "amd" || w == "radeon" || w == "gpu" || w == "tesla";
}

std::string normalize(const std::string& s) {
  std::string out, word;
  auto flush = [&] {
    if (!word.empty() && !brandWord(word)) out += word;
    word.clear();
  };
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c))) word += char(std::tolower(static_cast<unsigned char>(c)));
    else flush();
  }
  flush();
  return out;
}

const TargetDesc* chipRow(const std::string& arch) {
  for (const auto& t : gpuTargets())
    if (t.name == arch) return &t;
  return nullptr;
}

// The chip's own source for its per-architecture facts.
std::string chipSource(const TargetDesc& t) {
  if (t.vendor == Vendor::Nvidia) return "[CUDA-CC] compute capability " + t.arch.substr(3, 1) + "." + t.arch.substr(4, 1);
  if (t.arch == "gfx90a") return "[CDNA2-ISA]";
  if (t.arch == "gfx942") return "[CDNA3-ISA]";
  if (t.arch.rfind("gfx103", 0) == 0) return "[RDNA2-ISA]";
  return "[RDNA3-ISA, LLVM-AMDGPU]";
}

// Per-architecture fields of a product: its chip's.
void fillFromChip(GpuSku& s, const TargetDesc& chip) {
  if (s.smemPerUnit == 0) {
    s.smemPerUnit = chip.smemPerSM;
    s.sources["smem"] = chipSource(chip);
  }
  if (s.regsPerUnit == 0) {
    s.regsPerUnit = chip.regsPerSM;
    s.sources["registers"] = chipSource(chip);
  }
  if (s.warpSize == 0) {
    s.warpSize = chip.warpSize;
    s.sources["warp"] = chipSource(chip);
  }
}

std::vector<GpuSku> builtins() {
  static const std::vector<GpuSku> rows = [] {
    std::vector<GpuSku> v = detail::builtinGpuSkus();
    for (auto& s : v)
      if (const TargetDesc* chip = chipRow(s.arch)) fillFromChip(s, *chip);
    return v;
  }();
  return rows;
}

// Rows whose name or an alias matches `key` exactly (normalized), user rows first.
std::vector<GpuSku> exactMatches(const std::vector<GpuSku>& all, const std::string& key) {
  std::vector<GpuSku> out;
  for (const auto& s : all) {
    bool hit = normalize(s.name) == key;
    for (const auto& a : s.aliases) hit = hit || normalize(a) == key;
    if (hit) out.push_back(s);
  }
  return out;
}

// A chip's description with a product's own figures (the per-architecture ones stay the chip's).
TargetDesc withProduct(TargetDesc t, const GpuSku& s) {
  t.model = s.name;
  t.units = s.units;
  t.clockGHz = s.clockGHz;
  t.peakGflopsF32 = s.fp32Gflops;
  t.peakGflopsF16 = s.fp16Gflops;
  t.peakGflopsBF16 = s.bf16Gflops;
  t.memBandwidthGBs = s.bandwidthGBs;
  t.l2Bytes_gpu = s.l2Bytes;
  return t;
}

Error badGpu(const std::string& msg) { return makeError(ErrorCode::InvalidArgument, msg); }

std::string fmtNum(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

}  // namespace

const std::vector<std::pair<std::string, std::string>>& gpuSkuFields() {
  static const std::vector<std::pair<std::string, std::string>> f = {
      {"units", "SMs/CUs"},       {"clock", "GHz boost"},       {"fp32", "GFLOP/s FP32"},
      {"fp16", "GFLOP/s FP16 matrix, f32 accumulate"},           {"bf16", "GFLOP/s BF16 matrix"},
      {"bandwidth", "GB/s DRAM"}, {"l2", "MB L2"},              {"smem", "KB shared/LDS per unit"},
      {"registers", "32-bit registers per unit"},               {"warp", "threads per warp/wave"}};
  return f;
}

double gpuSkuValue(const GpuSku& s, const std::string& f) {
  if (f == "units") return s.units;
  if (f == "clock") return s.clockGHz;
  if (f == "fp32") return s.fp32Gflops;
  if (f == "fp16") return s.fp16Gflops;
  if (f == "bf16") return s.bf16Gflops;
  if (f == "bandwidth") return s.bandwidthGBs;
  if (f == "l2") return double(s.l2Bytes) / (1024.0 * 1024.0);
  if (f == "smem") return double(s.smemPerUnit) / 1024.0;
  if (f == "registers") return double(s.regsPerUnit);
  if (f == "warp") return s.warpSize;
  return 0;
}

std::vector<GpuSku> gpuSkus() {
  std::vector<GpuSku> all;
  {
    std::lock_guard<std::mutex> lock(registryMutex());
    all = userRows();
  }
  std::set<std::string> replaced;
  for (const auto& u : all) replaced.insert(normalize(u.name));
  for (const auto& b : builtins())
    if (!replaced.count(normalize(b.name))) all.push_back(b);
  return all;
}

const std::map<std::string, std::string>& gpuSkuReferences() { return detail::references(); }

Expected<GpuSku> findGpu(const std::string& name) {
  const std::string key = normalize(name);
  if (key.empty()) return badGpu("empty GPU name (tessera gpus lists them)");
  const std::vector<GpuSku> all = gpuSkus();
  std::vector<GpuSku> hits = exactMatches(all, key);
  if (hits.empty()) {
    // A unique row whose name contains the words given ("3060 laptop", "w7800").
    for (const auto& s : all)
      if (normalize(s.name).find(key) != std::string::npos) hits.push_back(s);
  }
  if (hits.size() == 1) return hits.front();
  if (hits.size() > 1 && hits.front().origin != "built-in" && hits[1].origin == "built-in") return hits.front();
  std::string list;
  if (hits.empty()) {
    // The rows sharing the most leading characters with the name, as suggestions.
    std::vector<std::pair<size_t, std::string>> near;
    for (const auto& s : all) {
      const std::string n = normalize(s.name);
      size_t best = 0;
      for (size_t at = 0; at < n.size(); ++at) {
        size_t l = 0;
        while (l < key.size() && at + l < n.size() && n[at + l] == key[l]) ++l;
        best = std::max(best, l);
      }
      near.push_back({best, s.name});
    }
    std::stable_sort(near.begin(), near.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    for (size_t i = 0; i < std::min<size_t>(3, near.size()); ++i) list += (i ? ", " : "") + near[i].second;
    return makeError(ErrorCode::NotFound, "unknown GPU '" + name + "' (closest: " + list +
                                              "); tessera gpus lists the known ones, and a facts file adds one (--gpu-facts FILE)");
  }
  for (size_t i = 0; i < hits.size() && i < 6; ++i) list += (i ? ", " : "") + hits[i].name;
  return badGpu("'" + name + "' names several GPUs: " + list + " (give more of the name)");
}

std::optional<GpuSku> gpuForDeviceName(const std::string& deviceName) {
  const std::string key = normalize(deviceName);
  if (key.empty()) return std::nullopt;
  auto hits = exactMatches(gpuSkus(), key);
  if (hits.empty()) return std::nullopt;
  return hits.front();
}

std::optional<GpuSku> defaultGpuOf(const std::string& arch) {
  const TargetDesc* chip = chipRow(arch);
  if (!chip) return std::nullopt;
  for (const auto& s : builtins())
    if (s.name == chip->model) return s;
  return std::nullopt;
}

bool chipRunsProduct(std::string_view chip, const GpuSku& s) {
  return chip == s.arch || (chip.size() == s.arch.size() + 1 && chip.starts_with(s.arch) && chip.back() == 'a');
}

Expected<TargetDesc> targetOfGpu(const std::string& name, const TargetDesc& chip) {
  TESSERA_ASSIGN(GpuSku s, findGpu(name));
  if (!chipRunsProduct(chip.arch, s))
    return badGpu("the " + s.name + " is " + s.arch + ", not " + chip.arch + " (drop --target, or pick a " + chip.arch + " GPU)");
  return withProduct(chip, s);
}

Expected<TargetDesc> targetOfGpu(const GpuSku& s) {
  // A Hopper product runs sm_90a's arch-specific code (wgmma, setmaxnreg), its only path past
  // mma.sync's half of the tensor peak: naming the GPU compiles for that. `--target sm_90` with
  // the name keeps the portable code (it also runs on later chips).
  const TargetDesc* chip = chipRow(s.arch == "sm_90" ? "sm_90a" : s.arch);
  if (!chip) return badGpu("the " + s.name + "'s chip " + s.arch + " is not one Tessera compiles for");
  return withProduct(*chip, s);
}

// ---------------------------------------------------------------------------------------------
// Facts files.

namespace {

// FLOPs per unit per clock of a product: what its architecture's SM/CU does, whichever product.
double perUnitClock(double gflops, int units, double clockGHz) { return gflops / (double(units) * clockGHz); }

struct FieldSpec {
  const char* key;
  const char* what;
  bool required;
};
const FieldSpec kFields[] = {
    {"name", "the product name, e.g. \"NVIDIA RTX A2000\"", true},
    {"aliases", "other names, e.g. [\"A2000\"] and the name the driver reports", false},
    {"arch", "the chip Tessera compiles for: sm_75 .. sm_90, gfx90a, gfx942, gfx1030 .. gfx1102", true},
    {"segment", "data centre | workstation | desktop | laptop", false},
    {"units", "SMs (NVIDIA) or CUs (AMD)", true},
    {"clock_ghz", "boost clock in GHz", true},
    {"fp32_gflops", "FP32 peak in GFLOP/s (TFLOPS x 1000)", true},
    {"fp16_gflops", "FP16 matrix peak with f32 accumulation, dense, GFLOP/s (the FMA rate where there are no matrix cores)", true},
    {"bf16_gflops", "BF16 matrix peak, dense, GFLOP/s (0: none)", false},
    {"bandwidth_gbs", "DRAM bandwidth in GB/s", true},
    {"l2_mb", "L2 cache in MB", true},
    {"smem_per_unit_kb", "shared memory / LDS per SM or CU, KB (the chip's when absent)", false},
    {"registers_per_unit", "32-bit registers per SM or CU (the chip's when absent)", false},
    {"warp_size", "threads per warp or wave (the chip's when absent)", false},
    {"source", "where the figures come from, e.g. the vendor's datasheet", true},
    {"sources", "per-field sources: {\"fp16_gflops\": \"...\"}", false},
};

Expected<GpuSku> parseOne(const json& o, const std::string& where) {
  auto err = [&](const std::string& field, const std::string& msg) {
    return badGpu(where + (field.empty() ? "" : ": " + field) + ": " + msg);
  };
  if (!o.is_object()) return err("", "expected an object with the GPU's facts");
  for (auto it = o.begin(); it != o.end(); ++it) {
    bool known = false;
    for (const auto& f : kFields) known = known || it.key() == f.key;
    if (!known) return err(it.key(), "unknown field (known: name, aliases, arch, units, clock_ghz, fp32_gflops, fp16_gflops, "
                                     "bf16_gflops, bandwidth_gbs, l2_mb, smem_per_unit_kb, registers_per_unit, warp_size, "
                                     "segment, source, sources)");
  }
  for (const auto& f : kFields)
    if (f.required && !o.contains(f.key)) return err(f.key, std::string("missing (") + f.what + ")");
  auto text = [&](const char* k, size_t max) -> Expected<std::string> {
    if (!o[k].is_string()) return err(k, "expected a string");
    std::string v = o[k].get<std::string>();
    if (v.empty() || v.size() > max) return err(k, "expected 1.." + std::to_string(max) + " characters");
    for (char c : v)
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e)
        return err(k, "printable ASCII only");
    return v;
  };
  auto number = [&](const char* k, double lo, double hi, const char* unit) -> Expected<double> {
    if (!o[k].is_number()) return err(k, "expected a number");
    double v = o[k].get<double>();
    if (!std::isfinite(v) || v < lo || v > hi)
      return err(k, fmtNum(v) + " is not a plausible " + unit + " (" + fmtNum(lo) + " .. " + fmtNum(hi) + ")");
    return v;
  };
  GpuSku s;
  s.origin = where;
  TESSERA_ASSIGN(s.name, text("name", 80));
  TESSERA_ASSIGN(s.arch, text("arch", 16));
  TESSERA_ASSIGN(std::string source, text("source", 200));
  const TargetDesc* chip = chipRow(s.arch);
  if (!chip) {
    std::string list;
    for (const auto& t : gpuTargets()) list += (list.empty() ? "" : ", ") + t.name;
    return err("arch", "'" + s.arch + "' is not a chip Tessera compiles for (" + list + ")");
  }
  if (o.contains("aliases")) {
    if (!o["aliases"].is_array() || o["aliases"].size() > 16) return err("aliases", "expected a list of up to 16 names");
    for (const auto& a : o["aliases"]) {
      if (!a.is_string() || a.get<std::string>().empty() || a.get<std::string>().size() > 80 || normalize(a.get<std::string>()).empty())
        return err("aliases", "every alias is a non-empty name of up to 80 characters");
      s.aliases.push_back(a.get<std::string>());
    }
  }
  if (o.contains("segment")) {
    TESSERA_ASSIGN(s.segment, text("segment", 32));
  } else {
    s.segment = "user";
  }
  TESSERA_ASSIGN(double units, number("units", 1, 1024, "SM/CU count"));
  if (units != std::floor(units)) return err("units", "expected a whole number of SMs/CUs");
  s.units = int(units);
  TESSERA_ASSIGN(s.clockGHz, number("clock_ghz", 0.2, 4.0, "boost clock in GHz"));
  TESSERA_ASSIGN(s.fp32Gflops, number("fp32_gflops", 1, 1e6, "FP32 peak in GFLOP/s"));
  TESSERA_ASSIGN(s.fp16Gflops, number("fp16_gflops", 1, 1e7, "FP16 peak in GFLOP/s"));
  if (o.contains("bf16_gflops")) {
    TESSERA_ASSIGN(s.bf16Gflops, number("bf16_gflops", 0, 1e7, "BF16 peak in GFLOP/s"));
  }
  TESSERA_ASSIGN(s.bandwidthGBs, number("bandwidth_gbs", 10, 20000, "DRAM bandwidth in GB/s"));
  TESSERA_ASSIGN(double l2mb, number("l2_mb", 0.125, 1024, "L2 size in MB"));
  s.l2Bytes = int64_t(l2mb * 1024 * 1024);

  // Consistency with the chip: an SM/CU of one architecture does the same work per clock in every
  // product (a GFLOP/s figure typed as TFLOPS, or the package's CUs against one die's peak, shows
  // here). The chip's default product gives the rate; matrix rates differ by up to 2x between
  // GeForce and data-centre parts of one chip.
  const double chipF32 = perUnitClock(chip->peakGflopsF32, chip->units, chip->clockGHz);
  const double f32 = perUnitClock(s.fp32Gflops, s.units, s.clockGHz);
  if (f32 < 0.5 * chipF32 || f32 > 1.25 * chipF32)
    return err("fp32_gflops", fmtNum(s.fp32Gflops) + " is " + fmtNum(f32) + " FLOPs per " +
                                  chip->words().unit + " per clock at " + fmtNum(s.clockGHz) + " GHz x " +
                                  std::to_string(s.units) + "; " + s.arch + " does " + fmtNum(chipF32) +
                                  " (check the units: GFLOP/s = TFLOPS x 1000, and the clock and SM/CU count)");
  const double chipF16 = perUnitClock(chip->peakGflopsF16, chip->units, chip->clockGHz);
  const double f16 = perUnitClock(s.fp16Gflops, s.units, s.clockGHz);
  if (f16 < 0.2 * chipF16 || f16 > 2.5 * chipF16)
    return err("fp16_gflops", fmtNum(s.fp16Gflops) + " is " + fmtNum(f16) + " FLOPs per unit per clock; " + s.arch + "'s is about " +
                                  fmtNum(chipF16) + " (a dense figure is wanted: half of a 'with sparsity' one)");
  if (s.bf16Gflops > 0 && chip->peakGflopsBF16 <= 0) return err("bf16_gflops", s.arch + " has no bf16 math: 0 or absent");
  if (s.bf16Gflops > 0) {
    const double bf = perUnitClock(s.bf16Gflops, s.units, s.clockGHz);
    if (bf < 0.2 * chipF16 || bf > 2.5 * chipF16) return err("bf16_gflops", fmtNum(s.bf16Gflops) + " is not a plausible " + s.arch + " BF16 peak");
  }
  // Architecture facts: a product cannot change its chip's.
  auto sameAsChip = [&](const char* k, double chipValue, double scale) -> Status {
    if (!o.contains(k)) return {};
    if (!o[k].is_number()) return err(k, "expected a number");
    if (o[k].get<double>() * scale != chipValue)
      return err(k, fmtNum(o[k].get<double>()) + " differs from " + s.arch + "'s " + fmtNum(chipValue / scale) +
                        " (an architecture fact; another value would be another chip)");
    return {};
  };
  TESSERA_TRY(sameAsChip("smem_per_unit_kb", double(chip->smemPerSM), 1024));
  TESSERA_TRY(sameAsChip("registers_per_unit", double(chip->regsPerSM), 1));
  TESSERA_TRY(sameAsChip("warp_size", double(chip->warpSize), 1));

  for (const char* f : {"units", "clock", "fp32", "fp16", "bf16", "bandwidth", "l2"}) s.sources[f] = source;
  if (o.contains("sources")) {
    if (!o["sources"].is_object()) return err("sources", "expected an object: field -> source");
    static const std::map<std::string, std::string> fieldOf = {
        {"units", "units"}, {"clock_ghz", "clock"}, {"fp32_gflops", "fp32"}, {"fp16_gflops", "fp16"},
        {"bf16_gflops", "bf16"}, {"bandwidth_gbs", "bandwidth"}, {"l2_mb", "l2"}};
    for (auto it = o["sources"].begin(); it != o["sources"].end(); ++it) {
      auto f = fieldOf.find(it.key());
      if (f == fieldOf.end()) return err("sources." + it.key(), "not a figure of the file");
      if (!it->is_string() || it->get<std::string>().empty() || it->get<std::string>().size() > 200)
        return err("sources." + it.key(), "expected a source of 1..200 characters");
      s.sources[f->second] = it->get<std::string>();
    }
  }
  fillFromChip(s, *chip);
  return s;
}

}  // namespace

Expected<std::vector<GpuSku>> parseGpuFacts(const std::string& text, const std::string& origin) {
  if (text.size() > (1u << 20)) return badGpu(origin + ": larger than 1 MB (a facts file lists a few GPUs)");
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded()) return badGpu(origin + ": not JSON");
  std::vector<json> items;
  if (doc.is_object() && doc.contains("gpus")) {
    if (doc.size() != 1) return badGpu(origin + ": the top-level object holds only \"gpus\"");
    if (!doc["gpus"].is_array() || doc["gpus"].empty() || doc["gpus"].size() > 256)
      return badGpu(origin + ": \"gpus\" must be a list of 1..256 GPUs");
    for (const auto& g : doc["gpus"]) items.push_back(g);
  } else if (doc.is_object()) {
    items.push_back(doc);
  } else {
    return badGpu(origin + ": expected one GPU object or {\"gpus\": [...]}");
  }
  std::vector<GpuSku> out;
  std::set<std::string> names;
  for (size_t i = 0; i < items.size(); ++i) {
    std::string where = origin + ": gpus[" + std::to_string(i) + "]";
    if (items[i].is_object() && items[i].contains("name") && items[i]["name"].is_string())
      where += " (" + items[i]["name"].get<std::string>().substr(0, 80) + ")";
    TESSERA_ASSIGN(GpuSku s, parseOne(items[i], where));
    s.origin = origin;
    if (!names.insert(normalize(s.name)).second) return badGpu(where + ": name: listed twice");
    out.push_back(std::move(s));
  }
  return out;
}

Expected<std::vector<GpuSku>> readGpuFactsFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return makeError(ErrorCode::IOError, "cannot read the GPU facts file " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return parseGpuFacts(ss.str(), path);
}

Status addGpuFacts(const std::vector<GpuSku>& rows) {
  std::lock_guard<std::mutex> lock(registryMutex());
  auto& user = userRows();
  for (const auto& r : rows) {
    const std::string key = normalize(r.name);
    user.erase(std::remove_if(user.begin(), user.end(), [&](const GpuSku& u) { return normalize(u.name) == key; }), user.end());
    user.push_back(r);
  }
  return {};
}

}  // namespace tessera
