// Owns schedule data: knobs (named, with a finite domain), configs (knob name -> value) and
// spaces (knobs + legality rule). A config is plain data attached to a kernel before lowering; a
// cache hit, a hand-written override and a search result all take the same path.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "support/status.h"

namespace tessera::ir {

using KnobValue = std::variant<int64_t, std::string>;
std::string knobValueStr(const KnobValue& v);

struct Knob {
  std::string name;
  std::vector<KnobValue> domain;  // legal values before cross-knob constraints
  KnobValue def;
  std::string help;
  bool isCategorical() const { return !domain.empty() && std::holds_alternative<std::string>(domain[0]); }
  // Position of `v` in the domain, or -1.
  int indexOf(const KnobValue& v) const;
};

class Config {
 public:
  std::map<std::string, KnobValue> values;

  bool has(const std::string& k) const { return values.count(k) != 0; }
  // Typed access; a missing or mistyped knob is an InvalidConfig error naming the knob.
  Expected<int64_t> getInt(const std::string& k) const;
  Expected<std::string> getStr(const std::string& k) const;
  void set(const std::string& k, KnobValue v) { values[k] = std::move(v); }
  // The threads a host kernel with this config runs on: its THREADS knob, 1 without one.
  int hostThreads() const {
    auto it = values.find("THREADS");
    return it != values.end() && std::holds_alternative<int64_t>(it->second) ? int(std::get<int64_t>(it->second)) : 1;
  }

  std::string toJson() const;                      // {"MC":64,"schedule":"packed"}
  static Expected<Config> fromJson(const std::string& text);
  std::string str() const;                         // MC=64,schedule=packed (sorted)
  static Expected<Config> parseAssignments(const std::string& text);  // "MC=64,NR=32"
  bool operator==(const Config& o) const { return values == o.values; }
  bool operator<(const Config& o) const { return values < o.values; }
};

struct Space {
  std::string family;        // "gemm", "elementwise", "attention"
  std::vector<Knob> knobs;
  // Cross-knob legality (footprints, divisibility, register budgets); nullopt when legal,
  // otherwise the reason.
  std::function<std::optional<std::string>(const Config&)> constraint;
  // Replayed spaces (a brute-forced table): when set, the legal configs are exactly these, so the
  // search samples uniformly from the list instead of rejection-sampling the knob product. The
  // constraint must then accept exactly these configs. Shared: spaces are copied freely.
  std::shared_ptr<const std::vector<Config>> members;

  const Knob* find(const std::string& name) const;
  Config defaults() const;
  // Domain membership of every knob, no unknown knobs, then the constraint.
  std::optional<std::string> check(const Config& c) const;
  // Overlays `partial` (user overrides) on the defaults; unknown knobs are an error.
  Expected<Config> complete(const Config& partial) const;
};

}  // namespace tessera::ir
