// Owns the measured starting configs of the GPU spaces (see measured_defaults.h).
#include "search/measured_defaults.h"

#include "measure/records.h"

namespace tessera::search {

using measure::hardKeyFor;

namespace {

constexpr MeasuredDefault kTable[] = {
#include "search/measured_defaults_table.inc"
};

}  // namespace

std::span<const MeasuredDefault> measuredDefaults() { return kTable; }

std::string sizeClassOf(const std::string& layout, const std::vector<int64_t>& shape) {
  std::string out = layout + " ";
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t p = 1;
    while (p < shape[i]) p *= 2;
    out += (i ? "x" : "") + std::to_string(p);
  }
  return out;
}

std::optional<ir::Config> measuredDefault(const ir::Kernel& k, const TargetDesc& t, std::span<const MeasuredDefault> table) {
  const cache::HardKey key = hardKeyFor(k, t);
  const std::string cls = sizeClassOf(key.layout, key.shape);
  for (const auto& row : table) {
    if (key.family != row.family || key.target != row.target || key.dtype != row.dtype || cls != row.sizeClass) continue;
    auto c = ir::Config::parseAssignments(row.config);
    if (c.ok()) return *c;
  }
  return std::nullopt;
}

bool applyMeasuredDefault(ir::Space& s, const ir::Kernel& k, const TargetDesc& t, std::span<const MeasuredDefault> table) {
  auto c = measuredDefault(k, t, table);
  // A row measured before a knob existed lacks it: the space's own default fills it in.
  if (!c) return false;
  ir::Config full = s.defaults();
  for (const auto& [name, v] : c->values) {
    if (!full.has(name)) return false;  // a knob this space does not have: not the same kernel
    full.set(name, v);
  }
  if (s.check(full)) return false;
  for (auto& kn : s.knobs) kn.def = full.values.at(kn.name);
  return true;
}

}  // namespace tessera::search
