// Owns the part of `tessera bundle --dispatch RULE` that compiles a dispatch rule: one
// shape-generic host object (or, for a GPU target, cubin + PTX) per config of the rule (runtime M,
// rows or seq; GPU: M), each checked here against the reference at a few sizes of its buckets (GPU:
// on the mapped-kernel emulator), and the rule's table row (buckets -> entries).
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "bundle/dispatch_rule.h"
#include "bundle/table.h"
#include "support/status.h"
#include "targets/target_desc.h"

namespace tessera::bundle {

struct BundleSettings;

struct RangeEntry {
  TableEntry row;
  std::string manifestJson;  // the entry's manifest object
  std::vector<std::pair<std::string, std::string>> files;  // relative path -> bytes (object; cubin, PTX)
};

struct RangeBundle {
  std::vector<RangeEntry> entries;
  TableRange range;  // bucket entries index `entries` (the caller offsets them)
  std::string manifestJson;
};

Expected<RangeBundle> buildRangeBundle(const RangeRuleFile& f, const BundleSettings& s, std::set<std::string>* symbols,
                                       const std::function<void(const std::string&)>& progress);
// The same for a rule whose arch is a GPU target (dispatch_bundle_gpu.cpp): NVIDIA, GEMM M.
Expected<RangeBundle> buildGpuRangeBundle(const RangeRuleFile& f, const TargetDesc& t, const BundleSettings& s,
                                          const std::function<void(const std::string&)>& progress);

}  // namespace tessera::bundle
