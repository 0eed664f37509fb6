// Owns shape-range dispatch: parsing a range of one dimension (`--m 1..8192`, `--m 1,7,64`,
// `--rows 1..200`, `--seq 1..4096`), the representative points tuned and held out inside it, and
// the rule from a size to one of a few configs (a bucket table fitted to measured times by
// regret, its bucket count chosen on the held-out points; fixed buckets of one size each), with its JSON form (what `tessera
// tune` writes and `tessera bundle` reads).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "support/status.h"

namespace tessera::bundle {

// The largest size a range may reach (M of 2^20 rows), and the most values an explicit list holds.
inline constexpr int64_t kMaxRangeValue = int64_t{1} << 20;
inline constexpr size_t kMaxRangeList = 64;

struct ShapeRange {
  int64_t lo = 0, hi = 0;
  std::vector<int64_t> list;  // explicit values (sorted, unique); empty: every value of [lo, hi]
  std::string text;           // as given
};

// Whether `text` asks for a range or a list ("1..8192", "1,7,64") rather than one value.
bool isRangeText(const std::string& text);
// "LO..HI" (1 <= LO <= HI <= kMaxRangeValue) or "A,B,C" (positive, at most kMaxRangeList values).
// InvalidArgument with one line naming the flag otherwise.
Expected<ShapeRange> parseShapeRange(const std::string& text, const std::string& flag);

// The representative points of a range: `train` are tuned (both ends, then about log-spaced, at
// most `maxTrain`; an explicit list's values, all of them); `heldOut` lie between consecutive
// training points (odd values, geometric midpoints) and decide the rule's bucket count.
struct RangePoints {
  std::vector<int64_t> train, heldOut;
};
RangePoints rangePoints(const ShapeRange& r, int maxTrain = 14);

// Measured times: times[c][p] in microseconds for candidate config c at point p (points sorted
// ascending); a failed or missing measurement is +inf.
struct TimeTable {
  std::vector<int64_t> points;
  std::vector<std::string> configs;
  std::vector<std::vector<double>> times;
};

struct Bucket {
  int64_t lo = 0, hi = 0;  // inclusive
  int config = 0;          // index into DispatchRule::configs
  // A kernel compiled for this one size (lo == hi) in any schedule of the space: the few-row
  // kernels (nvec, plain, kvec) that have no shape-generic form, where they beat the generic ones.
  bool fixed = false;
};

struct DispatchRule {
  std::string dim = "M";
  int64_t lo = 0, hi = 0;             // the range the rule answers
  std::vector<std::string> configs;   // one kernel each
  std::vector<Bucket> buckets;        // ascending, contiguous, covering [lo, hi]
  // Geometric-mean regret (time / best candidate's time - 1) of the fitted rule.
  double trainRegret = 0, heldOutRegret = 0;
  // Which bucket answers `v`; -1 outside [lo, hi].
  int bucketOf(int64_t v) const;
};

// `rule` with size `v` answered by a fixed-shape kernel of `config` (added to the rule's configs
// when new): the bucket holding `v` is split around it. Refused outside the range, and where it
// would leave no shape-generic bucket (a range is served by at least one).
Status pinFixedBucket(DispatchRule& rule, int64_t v, const std::string& config);

struct FitSettings {
  int maxBuckets = 16;
  int maxKernels = 16;
  // The fewest buckets whose held-out regret is within this much of the best bucket count's.
  double tolerance = 0.01;
};

// Fits the rule for [lo, hi] from the times at training points `train` and held-out points
// `heldOut` (both indices into table.points): for each bucket count, the partition of the
// training points into contiguous runs with one config each that minimises their summed log
// regret (dynamic programming), each boundary then placed where the held-out points between
// its two training points lose least; the bucket count is the smallest within `tolerance` of the
// best held-out regret. Only configs some bucket uses are kept.
Expected<DispatchRule> fitDispatchRule(const TimeTable& table, const std::vector<size_t>& train,
                                       const std::vector<size_t>& heldOut, int64_t lo, int64_t hi,
                                       const FitSettings& s = {});

// Geometric-mean regret of choosing config choice[p] at each listed point.
double geomeanRegret(const TimeTable& table, const std::vector<size_t>& points, const std::vector<int>& choice);

// JSON: {"dim", "lo", "hi", "configs", "buckets": [{"lo","hi","config"[,"fixed": true]}],
// "train_regret", "held_out_regret"} plus whatever `extra` (a JSON object text) holds, e.g. the kernel.
std::string ruleToJson(const DispatchRule& r, const std::string& extraJson = "{}");
// Parses and validates (buckets contiguous over [lo, hi], configs referenced exist, a fixed
// bucket one size wide, at least one bucket shape-generic); rules without "fixed" load as before.
Expected<DispatchRule> ruleFromJson(const std::string& text);

// A rule file as `tessera tune --m LO..HI` writes it (session/range_tune.h): the rule, the kernel at the
// range's top (IR text), its name, and the ISA level and threads it was tuned for.
struct RangeRuleFile {
  DispatchRule rule;
  std::string kernelIr, kernelName, arch;
  int threads = 1;
};
Expected<RangeRuleFile> readRangeRuleFile(const std::string& path);

}  // namespace tessera::bundle
