// Owns the family dispatch of the host and GPU rule spaces, the domain helpers the rule files share,
// and the legality rule built on them (search/config_rule.h).
#include <algorithm>
#include <variant>

#include "search/config_rule.h"
#include "search/space.h"
#include "search/space_gpu.h"
#include "targets/gpu_targets.h"

namespace tessera::search {

std::vector<ir::KnobValue> clampDomain(const std::vector<int64_t>& all, int64_t limit) {
  std::vector<int64_t> v = all;
  std::sort(v.begin(), v.end());
  std::vector<ir::KnobValue> out;
  for (int64_t x : v) {
    out.push_back(x);
    if (x >= limit) break;
  }
  return out;
}

int64_t pickAtMost(const std::vector<ir::KnobValue>& dom, int64_t want) {
  int64_t best = std::get<int64_t>(dom.front());
  for (const auto& v : dom)
    if (std::get<int64_t>(v) <= want) best = std::get<int64_t>(v);
  return best;
}

Expected<ir::Space> hostSpace(const ir::Kernel& k, const TargetDesc& t) {
  switch (k.family) {
    case ir::Family::Gemm: return gemmHostSpace(k, t);
    case ir::Family::Elementwise: return elementwiseHostSpace(k, t);
    case ir::Family::Attention: return attentionHostSpace(k, t);
  }
  return makeError(ErrorCode::Internal, "unknown family");
}

Expected<ir::Space> gpuRuleSpace(const ir::Kernel& k, const TargetDesc& t) {
  switch (k.family) {
    case ir::Family::Gemm: return gemmGpuSpace(k, t);
    case ir::Family::Elementwise: return elementwiseGpuSpace(k, t);
    case ir::Family::Attention: return attentionGpuSpace(k, t);
  }
  return makeError(ErrorCode::Internal, "unknown family");
}

Expected<TargetDesc> gpuOfKey(const std::string& chip, int units) {
  if (units < 1) return makeError(ErrorCode::InvalidArgument, "no GPU space for " + std::to_string(units) + " units");
  for (const TargetDesc& t : gpuTargets())
    if (t.name == chip) {
      TargetDesc out = t;
      out.units = units;
      return out;
    }
  return makeError(ErrorCode::NotFound, "no GPU space for '" + chip + "': not a chip of the table");
}

Expected<TargetDesc> hostOfKey(const std::string& arch, int units) {
  const int level = arch == "x86-64-v4" ? 4 : arch == "x86-64-v3" ? 3 : arch == "x86-64-v2" || arch == "x86-64" ? 2 : 0;
  if (!level) return makeError(ErrorCode::InvalidArgument, "no host space for arch '" + arch + "'");
  if (units < 1) return makeError(ErrorCode::InvalidArgument, "no host space for " + std::to_string(units) + " units");
  // Domains depend on the vector width and register count of the level, the optional units
  // (amx_bf16 and avx512_bf16 add schedules) and the thread count; the caches only move defaults.
  TESSERA_ASSIGN(TargetDesc t, hostPreset(level == 4 ? "sapphire-rapids" : "zen4-avx2"));
  for (const char* f : {"avx512_bf16", "amx_bf16"})
    if (level == 4 && !t.hasIsa(f)) t.isa.push_back(f);
  if (level == 2) {
    t.simdBits = 128;
    std::erase_if(t.isa, [](const std::string& f) { return f != "sse4_2"; });
  }
  t.arch = arch;
  t.units = t.cores = units;
  return t;
}

Status checkConfigInSpace(const ir::Space& s, const std::string& config) {
  TESSERA_ASSIGN(ir::Config given, ir::Config::fromJson(config));
  // Named knobs first, so that the refusal names the knob the record set rather than a default.
  for (const auto& [name, v] : given.values) {
    const ir::Knob* k = s.find(name);
    if (!k) {
      std::string names;
      for (const ir::Knob& kn : s.knobs) names += (names.empty() ? "" : ", ") + kn.name;
      return makeError(ErrorCode::InvalidConfig, "'" + name + "' is not a knob of this " + s.family + " space (" + names + ")");
    }
    if (k->indexOf(v) < 0) {
      std::string dom;
      for (const auto& d : k->domain) dom += (dom.empty() ? "" : ", ") + ir::knobValueStr(d);
      return makeError(ErrorCode::InvalidConfig,
                       name + "=" + ir::knobValueStr(v) + " is outside its domain {" + dom + "} for this kernel and target");
    }
  }
  TESSERA_ASSIGN(ir::Config full, s.complete(given));
  if (auto why = s.check(full)) return makeError(ErrorCode::InvalidConfig, *why);
  return {};
}

}  // namespace tessera::search
