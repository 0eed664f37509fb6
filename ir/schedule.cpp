// Owns config (de)serialization and space checks.
#include "ir/schedule.h"

#include <nlohmann/json.hpp>

#include "support/strings.h"

namespace tessera::ir {

std::string knobValueStr(const KnobValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  return std::get<std::string>(v);
}

int Knob::indexOf(const KnobValue& v) const {
  for (size_t i = 0; i < domain.size(); ++i)
    if (domain[i] == v) return int(i);
  return -1;
}

Expected<int64_t> Config::getInt(const std::string& k) const {
  auto it = values.find(k);
  if (it == values.end()) return makeError(ErrorCode::InvalidConfig, "config lacks knob '" + k + "'");
  if (const auto* i = std::get_if<int64_t>(&it->second)) return *i;
  return makeError(ErrorCode::InvalidConfig, "knob '" + k + "' must be an integer");
}

Expected<std::string> Config::getStr(const std::string& k) const {
  auto it = values.find(k);
  if (it == values.end()) return makeError(ErrorCode::InvalidConfig, "config lacks knob '" + k + "'");
  if (const auto* s = std::get_if<std::string>(&it->second)) return *s;
  return makeError(ErrorCode::InvalidConfig, "knob '" + k + "' must be a string");
}

std::string Config::toJson() const {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : values) {
    if (const auto* i = std::get_if<int64_t>(&v)) j[k] = *i;
    else j[k] = std::get<std::string>(v);
  }
  return j.dump();
}

Expected<Config> Config::fromJson(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return makeError(ErrorCode::InvalidArgument, "config must be a JSON object");
  Config c;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.value().is_number_integer()) c.values[it.key()] = it.value().get<int64_t>();
    else if (it.value().is_string()) c.values[it.key()] = it.value().get<std::string>();
    else return makeError(ErrorCode::InvalidArgument, "config knob '" + it.key() + "' must be an integer or a string");
  }
  return c;
}

std::string Config::str() const {
  std::vector<std::string> parts;
  for (const auto& [k, v] : values) parts.push_back(k + "=" + knobValueStr(v));
  return join(parts, ",");
}

Expected<Config> Config::parseAssignments(const std::string& text) {
  Config c;
  for (const auto& part : split(text, ',')) {
    auto t = trim(part);
    if (t.empty()) continue;
    size_t eq = t.find('=');
    if (eq == std::string_view::npos || eq == 0)
      return makeError(ErrorCode::InvalidArgument, "expected knob=value, got '" + std::string(t) + "'");
    std::string k(trim(t.substr(0, eq)));
    std::string v(trim(t.substr(eq + 1)));
    if (auto i = parseInt(v)) c.values[k] = *i;
    else c.values[k] = v;
  }
  return c;
}

const Knob* Space::find(const std::string& name) const {
  for (const auto& k : knobs)
    if (k.name == name) return &k;
  return nullptr;
}

Config Space::defaults() const {
  Config c;
  for (const auto& k : knobs) c.values[k.name] = k.def;
  return c;
}

std::optional<std::string> Space::check(const Config& c) const {
  for (const auto& [name, v] : c.values) {
    const Knob* k = find(name);
    if (!k) return "unknown knob '" + name + "' for " + family;
    if (k->indexOf(v) < 0) {
      std::vector<std::string> dom;
      for (const auto& d : k->domain) dom.push_back(knobValueStr(d));
      return "knob " + name + "=" + knobValueStr(v) + " is outside its domain {" + join(dom, ", ") + "}";
    }
  }
  for (const auto& k : knobs)
    if (!c.has(k.name)) return "config lacks knob '" + k.name + "'";
  if (constraint) return constraint(c);
  return std::nullopt;
}

Expected<Config> Space::complete(const Config& partial) const {
  Config c = defaults();
  for (const auto& [k, v] : partial.values) {
    if (!find(k)) {
      std::vector<std::string> names;
      for (const auto& kn : knobs) names.push_back(kn.name);
      return makeError(ErrorCode::InvalidConfig, "unknown knob '" + k + "' (knobs of " + family + ": " + join(names, ", ") + ")");
    }
    c.values[k] = v;
  }
  // A default the user did not name yields to the knobs they did: naming a one-thread schedule
  // (GEMM's plain or packed) without THREADS means one thread, whatever the size's default for the
  // parallel ones (`--config 'schedule=plain,...'` runs as written on any core count). Naming
  // THREADS too is the user's word, checked as given.
  // The constraint assumes values inside their domains (as check() ensures first): a value outside
  // one (MR=banana) is left for check() to name.
  auto inDomains = [&](const Config& x) {
    for (const auto& [name, v] : x.values)
      if (const Knob* k = find(name); !k || k->indexOf(v) < 0) return false;
    return true;
  };
  if (auto th = c.values.find("THREADS"); th != c.values.end() && !partial.has("THREADS") && constraint &&
                                           inDomains(c) && constraint(c) && std::holds_alternative<int64_t>(th->second)) {
    Config one = c;
    one.values["THREADS"] = int64_t(1);
    if (!constraint(one) && find("THREADS")->indexOf(one.values["THREADS"]) >= 0) c = one;
  }
  return c;
}

}  // namespace tessera::ir
