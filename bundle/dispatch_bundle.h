// Owns the part of `tessera bundle --dispatch RULE` that compiles a dispatch rule: one
// shape-generic host object per config of the rule (runtime M, rows or seq), each checked here
// against the reference at a few sizes of its buckets, and the rule's table row (buckets ->
// entries).
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "bundle/dispatch_rule.h"
#include "bundle/table.h"
#include "support/status.h"

namespace tessera::bundle {

struct BundleSettings;

struct RangeEntry {
  TableEntry row;
  std::string manifestJson;  // the entry's manifest object
  std::string objectPath, object;
};

struct RangeBundle {
  std::vector<RangeEntry> entries;
  TableRange range;  // bucket entries index `entries` (the caller offsets them)
  std::string manifestJson;
};

Expected<RangeBundle> buildRangeBundle(const RangeRuleFile& f, const BundleSettings& s, std::set<std::string>* symbols,
                                       const std::function<void(const std::string&)>& progress);

}  // namespace tessera::bundle
