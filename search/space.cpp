// Owns the family dispatch of schedule spaces (host rules: search/config_rule.h) and --space narrowing.
#include "search/space.h"
#include "search/config_rule.h"
#include "search/space_gpu.h"

#include <algorithm>
#include <variant>

#include "support/strings.h"
#include "targets/knob_table.h"

namespace tessera::search {

Expected<ir::Space> restrictSpace(const ir::Space& s, const std::string& spec) {
  ir::Space out = s;
  for (const auto& part : split(spec, ',')) {
    auto t = trim(part);
    if (t.empty()) continue;
    auto eq = t.find('=');
    if (eq == std::string_view::npos)
      return makeError(ErrorCode::InvalidArgument, "expected KNOB=v1|v2 in --space, got '" + std::string(t) + "'");
    std::string name(trim(t.substr(0, eq)));
    ir::Knob* knob = nullptr;
    for (auto& k : out.knobs)
      if (k.name == name) knob = &k;
    if (!knob) return makeError(ErrorCode::InvalidArgument, "--space names unknown knob '" + name + "'");
    std::vector<ir::KnobValue> keep;
    for (const auto& v : split(t.substr(eq + 1), '|')) {
      std::string vs(trim(v));
      ir::KnobValue kv = vs;
      if (auto i = parseInt(vs)) kv = *i;
      if (knob->indexOf(kv) < 0)
        return makeError(ErrorCode::InvalidArgument, "--space: " + name + "=" + vs + " is not in the knob's domain");
      keep.push_back(kv);
    }
    if (keep.empty()) return makeError(ErrorCode::InvalidArgument, "--space: no values for " + name);
    if (std::find(keep.begin(), keep.end(), knob->def) == keep.end()) knob->def = keep.front();
    knob->domain = keep;
  }
  return out;
}

namespace {

Expected<ir::Space> familySpace(const ir::Kernel& k, const TargetDesc& t) {
  if (t.isGpu()) return gpuSpace(k, t);
  return hostSpace(k, t);
}

// Every knob and categorical value a space offers is one the knob table lists (targets/knob_table.h): the
// cache service refuses records naming anything else, so a knob missing there is a bug here.
Status checkKnobTable(const ir::Space& s, const ir::Kernel& k, const TargetDesc& t) {
  const std::string family(ir::familyName(k.family));
  for (const ir::Knob& knob : s.knobs) {
    const KnobRow* row = findKnob(family, t.isGpu(), knob.name);
    if (!row)
      return makeError(ErrorCode::Internal, "knob " + knob.name + " of the " + family + " space on " + t.name +
                                                " is not in the knob table (targets/knob_table.cpp)");
    for (const ir::KnobValue& v : knob.domain) {
      // Integers: their range is the service's plausibility rule, not a property of the table.
      const std::string* str = std::get_if<std::string>(&v);
      if (str ? !knobValueListed(*row, *str) : row->values != nullptr)
        return makeError(ErrorCode::Internal, "value " + ir::knobValueStr(v) + " of knob " + knob.name + " (" + family +
                                                  " on " + t.name + ") is not in the knob table (targets/knob_table.cpp)");
    }
  }
  return {};
}

}  // namespace

Expected<ir::Space> makeSpace(const ir::Kernel& k, const TargetDesc& t) {
  TESSERA_ASSIGN(ir::Space s, familySpace(k, t));
  TESSERA_TRY(checkKnobTable(s, k, t));
  return s;
}

}  // namespace tessera::search
