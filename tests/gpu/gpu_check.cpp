// Owns the GPU test helpers.
#include "gpu_check.h"

#include <algorithm>
#include <regex>

#include "ir/reference.h"
#include "search/space.h"

namespace tessera::testutil {

const TargetDesc& gpuTarget(const std::string& name) {
  static std::map<std::string, TargetDesc> cache;
  auto it = cache.find(name);
  if (it == cache.end()) it = cache.emplace(name, *getTarget(name)).first;
  return it->second;
}

Expected<ir::Config> gpuConfig(const ir::Kernel& k, const TargetDesc& t, const ir::Config& overrides) {
  TESSERA_ASSIGN(ir::Space space, search::makeSpace(k, t));
  TESSERA_ASSIGN(ir::Config cfg, space.complete(overrides));
  if (auto why = space.check(cfg)) return makeError(ErrorCode::InvalidConfig, *why + " [config " + cfg.str() + "]");
  return cfg;
}

EmuCheck checkEmulated(const ir::Kernel& k, const TargetDesc& t, const ir::Config& overrides, uint64_t seed,
                       const codegen::EmulateOptions& o) {
  EmuCheck r;
  auto cfg = gpuConfig(k, t, overrides);
  if (!cfg.ok()) { r.error = cfg.error().str(); return r; }
  auto exe = codegen::compileEmulated(k, *cfg, t, o);
  if (!exe.ok()) { r.error = exe.error().str() + " [config " + cfg->str() + "]"; return r; }
  return runAndCompare(k, **exe, *cfg, seed);
}

Expected<codegen::GpuBinary> compileFor(const ir::Kernel& k, const TargetDesc& t, const ir::Config& overrides) {
  TESSERA_ASSIGN(ir::Config cfg, gpuConfig(k, t, overrides));
  return codegen::compileGpu(k, cfg, t);
}

std::string breakNthForall(const std::string& pre, int nth, int dims) {
  std::regex re(dims == 1 ? R"(scf\.forall \(%[\w]+\) in \((\d+)\))" : R"(scf\.forall \(%[\w]+, %[\w]+\) in \((\d+), )");
  int i = 0;
  for (auto it = std::sregex_iterator(pre.begin(), pre.end(), re); it != std::sregex_iterator(); ++it, ++i) {
    if (i != nth) continue;
    const auto& m = *it;
    int64_t n = std::stoll(m[1].str());
    size_t pos = size_t(m.position(1));
    return pre.substr(0, pos) + std::to_string(std::max<int64_t>(1, n / 2)) + pre.substr(pos + size_t(m.length(1)));
  }
  return pre;
}

std::vector<ir::Config> knobExtremes(const ir::Space& s) {
  std::vector<ir::Config> out;
  for (const auto& knob : s.knobs)
    for (const auto& v : {knob.domain.front(), knob.domain.back()}) {
      ir::Config c = s.defaults();
      if (c.values[knob.name] == v) continue;
      c.set(knob.name, v);
      if (s.check(c)) continue;
      if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
    }
  return out;
}

int countOccurrences(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + needle.size())) ++n;
  return n;
}

}  // namespace tessera::testutil
