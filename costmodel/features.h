// Owns feature extraction for the cost model: a FeatureExtractor turns a config into a fixed-
// length float vector. The generic one uses the knob values only (works for any space,
// including imported GPU tables); the host one adds quantities derived from (kernel, target).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "ir/schedule.h"
#include "targets/target_desc.h"

namespace tessera::costmodel {

class FeatureExtractor {
 public:
  virtual ~FeatureExtractor() = default;
  virtual std::vector<float> extract(const ir::Config& c) const = 0;
  virtual std::vector<std::string> names() const = 0;  // same length as extract()
};

struct KnobFeatureSettings {
  // Per positive-integer knob, its power-of-two valuation (trailing zero bits) and whether it is a
  // power of two: hardware favours multiples of the warp/wavefront, vector or cache-line width, a
  // property trees cannot read off the value with a few splits (on MI250X block_size_x 64, 128,
  // 256 are good and 48, 80, ..., 240 between them bad). Measured on the replay benchmark (100
  // seeds): the convolution tables need ~30% fewer trials with them.
  bool powerOfTwo = true;
  // Also log2 of the ratio and of the product of every pair of positive-integer knobs (per-thread
  // work MWG / MDIMC, threads MDIMC * NDIMC). Off: on the replay benchmark they changed nothing
  // measurable and doubled training time.
  bool pairwise = false;
};

// Per knob: the value (categorical: its domain index) and log2 of positive integer values; every
// knob of the space gets columns (constant ones too), so the layout depends on the knob names and
// types only and spaces of one family share a layout.
std::unique_ptr<FeatureExtractor> makeKnobFeatures(const ir::Space& space, const KnobFeatureSettings& s = {});
// What a cache key says about a workload (family, its shape, layout and dtype): all the derived
// host features need. Features are computed from this, never from the kernel itself, so stored
// records of other workloads (whose kernels are not kept, only their keys) get exactly the
// features they would have had when they were measured: the cost model can be warm-started
// from the store and across shapes.
struct WorkloadDesc {
  std::string family;          // gemm | elementwise | attention
  std::vector<int64_t> shape;  // gemm: [batch,] M, N, K; attention: B, H, Hkv, Sq, Skv, D; elementwise: iteration space
  std::string layout;          // gemm: row | tA | tB | tAtB; attention: row | causal
  std::string dtype;           // f32 | f16 | bf16 (a mixed "a:b" form counts as its first)
};

// Knob features plus derived host quantities (tile footprints relative to the caches,
// arithmetic intensity of the register tile, vector utilization, trip counts, padding waste,
// estimated vector registers) for the workload's family. Every family has the same number of
// derived columns, so one model can learn from several families' records.
// `base` plus one column `name` = f(config): e.g. the analytic model's log predicted time, so the
// cost model can lean on the prior where it has no measurements.
std::unique_ptr<FeatureExtractor> withFeature(std::unique_ptr<FeatureExtractor> base, std::string name,
                                              std::function<float(const ir::Config&)> f);
// The analytic estimate's column (a GPU tune's): the search's check of its prior governs the
// column of this name (search::PriorSettings::column).
inline constexpr const char* kEstimateFeature = "log2_estimated_us";

std::unique_ptr<FeatureExtractor> makeHostFeatures(const WorkloadDesc& w, const ir::Space& space, const TargetDesc& t);

}  // namespace tessera::costmodel
