// Owns the part of `tessera bundle --dispatch RULE` that compiles a dispatch rule: one
// shape-generic host object (or, for a GPU target, cubin + PTX) per config of the rule (runtime M,
// rows or seq; GPU: M) and one object per fixed bucket (compiled for its M alone), each checked here against the reference at a few sizes of its buckets (GPU:
// on the mapped-kernel emulator), and the rule's table row (buckets -> entries).
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "bundle/dispatch_rule.h"
#include "bundle/table.h"
#include "ir/ir.h"
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

// Parts both builders share (dispatch_bundle.cpp).
namespace range_parts {
// A name as a C identifier piece (symbols, file names).
std::string sanitizeName(const std::string& s);
// The range's table row and its bucket list (manifest form) for a rule over `dims` (the key's
// shape at the top) on `arch`; `dim`/`keyDims` as rangeKeyDims gives them.
TableRange tableRange(const RangeRuleFile& f, const std::string& name, const std::string& family, const std::string& dtype,
                      const std::string& arch, const std::vector<int64_t>& dims, const std::string& dim,
                      const std::vector<int>& keyDims);
// Sizes of the buckets of config `i` at which to check its kernel: each bucket's lo, lo + 2,
// lo + 16 and hi, where `cost(m)` stays within `bound`.
std::vector<int64_t> checkSizes(const DispatchRule& rule, int i, const std::function<double(int64_t)>& cost, double bound);
// The entry row's common part: name, key, target, config, the tensors of the rule's kernel (at
// the range's top) and the runtime range. The caller adds its code (host symbol; GPU binary).
TableEntry rangeRow(const RangeRuleFile& f, const TableRange& r, const std::string& name, const std::string& target,
                    const std::string& vendor, const std::string& configJson, const ir::Kernel& maxKernel);
// The range's manifest object.
std::string rangeManifest(const RangeRuleFile& f, const TableRange& r, const std::vector<int>& keyDims);
// What checking the rule's kernel (`maxKernel`, at the range's top `top`) costs at a size of the
// range: multiply-adds (GEMM, attention: the square of the sequence length) or elements
// (elementwise); bounds the sizes checkSizes picks.
Expected<std::function<double(int64_t)>> checkCostOf(const ir::Kernel& maxKernel, int64_t top);
}  // namespace range_parts

Expected<RangeBundle> buildRangeBundle(const RangeRuleFile& f, const BundleSettings& s, std::set<std::string>* symbols,
                                       const std::function<void(const std::string&)>& progress);
// The same for a rule whose arch is a GPU target (dispatch_bundle_gpu.cpp): NVIDIA; GEMM's M,
// elementwise's rows, attention's seq.
Expected<RangeBundle> buildGpuRangeBundle(const RangeRuleFile& f, const TargetDesc& t, const BundleSettings& s,
                                          const std::function<void(const std::string&)>& progress);

}  // namespace tessera::bundle
