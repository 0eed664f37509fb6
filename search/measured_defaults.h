// Owns where a GPU space's default config comes from when a device measured it: the table of
// starting configs per (family, target, dtype, size class) generated from the device tables
// (bench/data/device_*.jsonl.gz, by bench/gpu/defaults_table.py; tests/search/measured_defaults_test.cpp
// derives it again from those files and fails when it is stale), and the one function the spaces
// ask. Shapes no table covers keep their space's own rule (for the sm_90a GEMM: the analytic model
// when the rule's tiles leave SMs idle, space_gpu_gemm.cpp).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "ir/schedule.h"
#include "targets/target_desc.h"

namespace tessera::search {

struct MeasuredDefault {
  const char* family;
  const char* target;     // the compile target the records were measured for ("sm_90a")
  const char* dtype;
  const char* sizeClass;  // sizeClassOf's text
  const char* config;     // ir::Config::str()
  double worstRatio;      // its time over the best of each measured key, at worst (1: the best everywhere)
  int keys;               // measured keys (devices x exact shapes) behind it
  const char* files;      // the device tables it comes from
};

// The generated table (search/measured_defaults_table.inc).
std::span<const MeasuredDefault> measuredDefaults();

// A key's size class: its layout and its shape with every dimension rounded up to a power of two
// ("row 1024x1024x1024" for GEMM 1000^3; attention's shape is B, H, Hkv, Sq, Skv, D).
std::string sizeClassOf(const std::string& layout, const std::vector<int64_t>& shape);

// The config the device tables say `k` on `t` starts from, if a row of `table` covers its family,
// target, dtype and size class; nullopt otherwise (the space's own rule decides).
std::optional<ir::Config> measuredDefault(const ir::Kernel& k, const TargetDesc& t,
                                          std::span<const MeasuredDefault> table = measuredDefaults());

// `s` with its defaults replaced by measuredDefault's config when there is one and `s` accepts it;
// whether it did.
bool applyMeasuredDefault(ir::Space& s, const ir::Kernel& k, const TargetDesc& t,
                          std::span<const MeasuredDefault> table = measuredDefaults());

}  // namespace tessera::search
