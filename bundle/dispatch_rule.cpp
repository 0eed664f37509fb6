// Owns shape ranges, their representative points and the fitted dispatch rule (dispatch_rule.h).
#include "bundle/dispatch_rule.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "support/strings.h"
#include "support/text_file.h"

namespace tessera::bundle {

namespace {

Error bad(const std::string& m) { return makeError(ErrorCode::InvalidArgument, m); }

// A positive integer no larger than kMaxRangeValue, or nothing.
std::optional<int64_t> parseValue(std::string_view s) {
  if (s.empty() || s.size() > 12) return std::nullopt;
  for (char c : s)
    if (c < '0' || c > '9') return std::nullopt;
  auto v = parseInt(std::string(s));
  if (!v) return std::nullopt;
  return *v;
}

// A failed candidate costs as much as a 1000x slower one: never chosen while another ran.
constexpr double kFailedLog = 6.907755278982137;  // log(1000)

double logRegret(const TimeTable& t, size_t c, size_t p) {
  double best = std::numeric_limits<double>::infinity();
  for (const auto& row : t.times) best = std::min(best, row[p]);
  double v = t.times[c][p];
  if (!std::isfinite(v) || !std::isfinite(best) || best <= 0) return std::isfinite(best) ? kFailedLog : 0.0;
  return std::log(v / best);
}

}  // namespace

bool isRangeText(const std::string& text) { return text.find("..") != std::string::npos || text.find(',') != std::string::npos; }

Expected<ShapeRange> parseShapeRange(const std::string& text, const std::string& flag) {
  ShapeRange r;
  r.text = text;
  const std::string what = flag + " '" + (text.size() > 40 ? text.substr(0, 40) + "..." : text) + "'";
  if (auto dots = text.find(".."); dots != std::string::npos) {
    auto lo = parseValue(std::string_view(text).substr(0, dots));
    auto hi = parseValue(std::string_view(text).substr(dots + 2));
    if (!lo || !hi)
      return bad(what + ": expected LO..HI with whole numbers from 1 to " + std::to_string(kMaxRangeValue) + ", e.g. 1..8192");
    if (*lo < 1) return bad(what + ": sizes start at 1");
    if (*lo > *hi) return bad(what + ": the range is empty (LO is above HI)");
    if (*hi > kMaxRangeValue) return bad(what + ": at most " + std::to_string(kMaxRangeValue));
    r.lo = *lo;
    r.hi = *hi;
    return r;
  }
  std::set<int64_t> vals;
  size_t count = 0;
  for (const auto& part : split(text, ',')) {
    if (++count > kMaxRangeList) return bad(what + ": at most " + std::to_string(kMaxRangeList) + " values");
    auto v = parseValue(trim(part));
    if (!v) return bad(what + ": expected a comma-separated list of whole numbers, e.g. 1,7,64");
    if (*v < 1) return bad(what + ": sizes start at 1");
    if (*v > kMaxRangeValue) return bad(what + ": at most " + std::to_string(kMaxRangeValue));
    vals.insert(*v);
  }
  if (vals.empty()) return bad(what + ": no values");
  r.list.assign(vals.begin(), vals.end());
  r.lo = r.list.front();
  r.hi = r.list.back();
  return r;
}

RangePoints rangePoints(const ShapeRange& r, int maxTrain) {
  RangePoints out;
  std::set<int64_t> train;
  if (!r.list.empty()) {
    train.insert(r.list.begin(), r.list.end());
  } else {
    train.insert(r.lo);
    train.insert(r.hi);
    // Log-spaced: powers of two while they fit the budget, else a geometric sequence.
    std::vector<int64_t> pow2;
    for (int64_t v = 1; v < r.hi; v *= 2)
      if (v > r.lo) pow2.push_back(v);
    if (int(pow2.size()) + 2 <= maxTrain) {
      train.insert(pow2.begin(), pow2.end());
    } else {
      const int inner = std::max(0, maxTrain - 2);
      const double ratio = std::pow(double(r.hi) / double(r.lo), 1.0 / (inner + 1));
      for (int i = 1; i <= inner; ++i) train.insert(std::clamp<int64_t>(std::llround(double(r.lo) * std::pow(ratio, i)), r.lo, r.hi));
    }
  }
  out.train.assign(train.begin(), train.end());
  for (size_t i = 0; i + 1 < out.train.size(); ++i) {
    const int64_t a = out.train[i], b = out.train[i + 1];
    if (b - a < 2) continue;
    int64_t mid = std::llround(std::sqrt(double(a) * double(b)));
    if (mid % 2 == 0) mid += mid + 1 < b ? 1 : -1;  // odd sizes: the edges a kernel must handle
    mid = std::clamp(mid, a + 1, b - 1);
    out.heldOut.push_back(mid);
  }
  return out;
}

int DispatchRule::bucketOf(int64_t v) const {
  if (v < lo || v > hi) return -1;
  for (size_t i = 0; i < buckets.size(); ++i)
    if (v >= buckets[i].lo && v <= buckets[i].hi) return int(i);
  return -1;
}

Status pinFixedBucket(DispatchRule& rule, int64_t v, const std::string& config) {
  const int at = rule.bucketOf(v);
  if (at < 0) return makeError(ErrorCode::InvalidArgument, "a fixed bucket at " + std::to_string(v) + " lies outside the rule's range");
  const Bucket old = rule.buckets[size_t(at)];
  int generic = 0;
  for (const auto& b : rule.buckets) generic += b.fixed ? 0 : 1;
  if (!old.fixed && old.lo == old.hi && generic == 1)
    return makeError(ErrorCode::InvalidArgument, "pinning " + std::to_string(v) + " would leave the rule no shape-generic bucket");
  int c = int(std::find(rule.configs.begin(), rule.configs.end(), config) - rule.configs.begin());
  if (size_t(c) == rule.configs.size()) rule.configs.push_back(config);
  std::vector<Bucket> parts;
  if (v > old.lo) parts.push_back({old.lo, v - 1, old.config, old.fixed});
  parts.push_back({v, v, c, true});
  if (v < old.hi) parts.push_back({v + 1, old.hi, old.config, old.fixed});
  rule.buckets.erase(rule.buckets.begin() + at);
  rule.buckets.insert(rule.buckets.begin() + at, parts.begin(), parts.end());
  // A config no bucket names any more (the one a fixed bucket replaced) leaves the rule.
  for (int i = int(rule.configs.size()) - 1; i >= 0; --i) {
    if (std::any_of(rule.buckets.begin(), rule.buckets.end(), [&](const Bucket& b) { return b.config == i; })) continue;
    rule.configs.erase(rule.configs.begin() + i);
    for (auto& b : rule.buckets)
      if (b.config > i) --b.config;
  }
  return {};
}

double geomeanRegret(const TimeTable& table, const std::vector<size_t>& points, const std::vector<int>& choice) {
  if (points.empty()) return 0;
  double sum = 0;
  for (size_t i = 0; i < points.size(); ++i) sum += logRegret(table, size_t(choice[i]), points[i]);
  return std::exp(sum / double(points.size())) - 1;
}

Expected<DispatchRule> fitDispatchRule(const TimeTable& table, const std::vector<size_t>& trainIn,
                                       const std::vector<size_t>& heldOutIn, int64_t lo, int64_t hi, const FitSettings& s) {
  const size_t C = table.configs.size();
  if (C == 0) return makeError(ErrorCode::InvalidArgument, "no candidate configs to fit a dispatch rule from");
  if (table.times.size() != C) return makeError(ErrorCode::Internal, "time table rows do not match its configs");
  for (const auto& row : table.times)
    if (row.size() != table.points.size()) return makeError(ErrorCode::Internal, "time table columns do not match its points");
  if (trainIn.empty()) return makeError(ErrorCode::InvalidArgument, "no training points to fit a dispatch rule from");
  if (s.maxBuckets < 1 || s.maxKernels < 1) return makeError(ErrorCode::InvalidArgument, "a dispatch rule needs at least one bucket and kernel");
  auto byValue = [&](size_t a, size_t b) { return table.points[a] < table.points[b]; };
  std::vector<size_t> train = trainIn, held = heldOutIn;
  std::sort(train.begin(), train.end(), byValue);
  std::sort(held.begin(), held.end(), byValue);
  const size_t T = train.size();
  // prefix[c][i]: summed log regret of config c over the first i training points.
  std::vector<std::vector<double>> prefix(C, std::vector<double>(T + 1, 0.0));
  for (size_t c = 0; c < C; ++c)
    for (size_t i = 0; i < T; ++i) prefix[c][i + 1] = prefix[c][i] + logRegret(table, c, train[i]);
  auto segment = [&](size_t j, size_t i) {  // best config for training points [j, i)
    std::pair<double, int> best{std::numeric_limits<double>::infinity(), 0};
    for (size_t c = 0; c < C; ++c) best = std::min(best, {prefix[c][i] - prefix[c][j], int(c)});
    return best;
  };
  const double inf = std::numeric_limits<double>::infinity();
  const size_t maxS = std::min<size_t>(size_t(s.maxBuckets), T);
  // f[k][i]: least cost of the first i points in k segments; from[k][i]: where the last one starts.
  std::vector<std::vector<double>> f(maxS + 1, std::vector<double>(T + 1, inf));
  std::vector<std::vector<size_t>> from(maxS + 1, std::vector<size_t>(T + 1, 0));
  f[0][0] = 0;
  for (size_t k = 1; k <= maxS; ++k)
    for (size_t i = 1; i <= T; ++i)
      for (size_t j = k - 1; j < i; ++j) {
        if (f[k - 1][j] == inf) continue;
        double v = f[k - 1][j] + segment(j, i).first;
        if (v < f[k][i] - 1e-12) {
          f[k][i] = v;
          from[k][i] = j;
        }
      }

  std::optional<DispatchRule> chosen;
  double chosenHeld = inf, bestHeld = inf;
  std::vector<DispatchRule> fits;
  std::vector<double> heldOf;
  for (size_t S = 1; S <= maxS; ++S) {
    if (f[S][T] == inf) continue;
    // Runs of training points, each with its config; neighbours with the same config merge.
    std::vector<std::pair<size_t, int>> runs;  // (first training index, config)
    for (size_t i = T, k = S; k > 0; --k) {
      size_t j = from[k][i];
      runs.push_back({j, segment(j, i).second});
      i = j;
    }
    std::reverse(runs.begin(), runs.end());
    std::vector<std::pair<size_t, int>> merged;
    for (const auto& r : runs)
      if (merged.empty() || merged.back().second != r.second) merged.push_back(r);
    std::set<int> used;
    for (const auto& r : merged) used.insert(r.second);
    if (int(used.size()) > s.maxKernels) continue;
    // Boundaries: between the last training point of one run and the first of the next, the
    // split that loses least on the held-out points in between.
    DispatchRule rule;
    rule.lo = lo;
    rule.hi = hi;
    int64_t start = lo;
    for (size_t r = 0; r < merged.size(); ++r) {
      int64_t end = hi;
      if (r + 1 < merged.size()) {
        const int64_t a = table.points[train[merged[r + 1].first - 1]], b = table.points[train[merged[r + 1].first]];
        std::vector<size_t> between;
        for (size_t h : held)
          if (table.points[h] > a && table.points[h] < b) between.push_back(h);
        size_t bestSplit = 0;  // held-out points [0, split) go to run r
        double bestCost = inf;
        for (size_t split = 0; split <= between.size(); ++split) {
          double cost = 0;
          for (size_t q = 0; q < between.size(); ++q)
            cost += logRegret(table, size_t(q < split ? merged[r].second : merged[r + 1].second), between[q]);
          if (cost < bestCost - 1e-12) bestCost = cost, bestSplit = split;
        }
        const int64_t left = bestSplit == 0 ? a : table.points[between[bestSplit - 1]];
        const int64_t right = bestSplit == between.size() ? b : table.points[between[bestSplit]];
        end = std::clamp<int64_t>(std::llround(std::floor(std::sqrt(double(left) * double(right)))), left, right - 1);
      }
      rule.buckets.push_back({start, end, merged[r].second});
      start = end + 1;
    }
    // Keep only the configs in use, renumbered.
    std::map<int, int> renum;
    for (auto& b : rule.buckets) {
      auto [it, fresh] = renum.insert({b.config, int(rule.configs.size())});
      if (fresh) rule.configs.push_back(table.configs[size_t(b.config)]);
      b.config = it->second;
    }
    auto choices = [&](const std::vector<size_t>& pts) {
      std::vector<int> ch;
      for (size_t p : pts) {
        int bk = rule.bucketOf(table.points[p]);
        int orig = bk < 0 ? 0 : std::find(table.configs.begin(), table.configs.end(), rule.configs[size_t(rule.buckets[size_t(bk)].config)]) - table.configs.begin();
        ch.push_back(orig);
      }
      return ch;
    };
    rule.trainRegret = geomeanRegret(table, train, choices(train));
    rule.heldOutRegret = held.empty() ? rule.trainRegret : geomeanRegret(table, held, choices(held));
    fits.push_back(rule);
    heldOf.push_back(rule.heldOutRegret);
    bestHeld = std::min(bestHeld, rule.heldOutRegret);
  }
  if (fits.empty()) return makeError(ErrorCode::NotFound, "no dispatch rule within the kernel limit fits these measurements");
  for (size_t i = 0; i < fits.size(); ++i)
    if (heldOf[i] <= bestHeld + s.tolerance) {
      chosen = fits[i];
      chosenHeld = heldOf[i];
      break;
    }
  (void)chosenHeld;
  return *chosen;
}

std::string ruleToJson(const DispatchRule& r, const std::string& extraJson) {
  nlohmann::json j = nlohmann::json::parse(extraJson, nullptr, false);
  if (!j.is_object()) j = nlohmann::json::object();
  j["dim"] = r.dim;
  j["lo"] = r.lo;
  j["hi"] = r.hi;
  j["configs"] = r.configs;
  j["buckets"] = nlohmann::json::array();
  for (const auto& b : r.buckets) {
    nlohmann::json jb = {{"lo", b.lo}, {"hi", b.hi}, {"config", b.config}};
    if (b.fixed) jb["fixed"] = true;  // absent otherwise: the rules of earlier versions stay byte-identical
    j["buckets"].push_back(jb);
  }
  j["train_regret"] = r.trainRegret;
  j["held_out_regret"] = r.heldOutRegret;
  return j.dump(2) + "\n";
}

Expected<DispatchRule> ruleFromJson(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  auto invalid = [](const std::string& m) { return makeError(ErrorCode::InvalidArgument, "dispatch rule: " + m); };
  if (!j.is_object()) return invalid("not a JSON object");
  DispatchRule r;
  try {
    r.dim = j.at("dim").get<std::string>();
    r.lo = j.at("lo").get<int64_t>();
    r.hi = j.at("hi").get<int64_t>();
    r.configs = j.at("configs").get<std::vector<std::string>>();
    for (const auto& b : j.at("buckets"))
      r.buckets.push_back({b.at("lo").get<int64_t>(), b.at("hi").get<int64_t>(), b.at("config").get<int>(), b.value("fixed", false)});
    r.trainRegret = j.value("train_regret", 0.0);
    r.heldOutRegret = j.value("held_out_regret", 0.0);
  } catch (const std::exception&) {
    return invalid("missing or mistyped field (dim, lo, hi, configs, buckets)");
  }
  if (r.dim != "M" && r.dim != "rows" && r.dim != "seq")
    return invalid("only the dimensions M (GEMM), rows (elementwise) and seq (attention) are dispatched, not '" + r.dim + "'");
  if (r.lo < 1 || r.hi < r.lo || r.hi > kMaxRangeValue) return invalid("range out of bounds");
  if (r.configs.empty() || r.configs.size() > 64) return invalid("1 to 64 configs");
  if (r.buckets.empty() || r.buckets.size() > 64) return invalid("1 to 64 buckets");
  int64_t next = r.lo;
  int generic = 0;
  for (const auto& b : r.buckets) {
    if (b.lo != next || b.hi < b.lo) return invalid("buckets must cover the range in order without gaps");
    if (b.fixed && b.lo != b.hi) return invalid("a fixed bucket answers one size (lo == hi), not " + std::to_string(b.lo) + ".." + std::to_string(b.hi));
    generic += b.fixed ? 0 : 1;
    if (b.config < 0 || size_t(b.config) >= r.configs.size()) return invalid("a bucket names a config that does not exist");
    next = b.hi + 1;
  }
  if (next != r.hi + 1) return invalid("buckets must end at the range's end");
  if (generic == 0) return invalid("every bucket is fixed: a range needs at least one shape-generic bucket");
  return r;
}

Expected<RangeRuleFile> readRangeRuleFile(const std::string& path) {
  TESSERA_ASSIGN(std::string text, readTextFile(path, {.max_bytes = 8 << 20, .max_line_bytes = 0, .what = "dispatch rule"}));
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object() || j.value("format", "") != "tessera-dispatch-1")
    return makeError(ErrorCode::InvalidArgument, path + ": not a dispatch rule written by `tessera tune ... --m/--rows/--seq LO..HI`");
  RangeRuleFile f;
  TESSERA_ASSIGN(f.rule, ruleFromJson(text));
  if (!j.contains("kernel_ir") || !j["kernel_ir"].is_string() || !j.contains("arch") || !j["arch"].is_string() ||
      !j.contains("threads") || !j["threads"].is_number_integer())
    return makeError(ErrorCode::InvalidArgument, path + ": the rule names no kernel, arch or thread count");
  f.kernelIr = j["kernel_ir"].get<std::string>();
  f.kernelName = j.value("kernel", "");
  f.arch = j["arch"].get<std::string>();
  f.threads = j["threads"].get<int>();
  return f;
}

}  // namespace tessera::bundle
