// Owns compiling a dispatch rule into bundle entries (dispatch_bundle.h).
#include "bundle/dispatch_bundle.h"

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>

#include "bundle/bundle.h"
#include "bundle/range_dims.h"
#include "store/record.h"
#include "codegen/codegen.h"
#include "ir/families.h"
#include "ir/text.h"
#include "ir/verifier.h"
#include "measure/records.h"
#include "measure/trial.h"

namespace tessera::bundle {

using nlohmann::json;

namespace range_parts {

std::string sanitizeName(const std::string& s) {
  std::string o;
  for (char c : s) o += (std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return o;
}

TableRange tableRange(const RangeRuleFile& f, const std::string& name, const std::string& family, const std::string& dtype,
                      const std::string& arch, const std::vector<int64_t>& dims, const std::string& dim,
                      const std::vector<int>& keyDims) {
  TableRange r;
  r.name = name;
  r.family = family;
  r.dtype = dtype;
  r.arch = arch;
  r.dims = dims;
  r.lo = f.rule.lo;
  r.hi = f.rule.hi;
  r.dim = dim;
  r.dimMask = 0;
  for (int d : keyDims) r.dimMask |= 1u << d;
  for (const auto& b : f.rule.buckets) r.buckets.push_back({b.lo, b.hi, b.config});
  return r;
}

std::vector<int64_t> checkSizes(const DispatchRule& rule, int i, const std::function<double(int64_t)>& cost, double bound) {
  std::vector<int64_t> ms;
  for (const auto& b : rule.buckets) {
    if (b.config != i || b.fixed) continue;  // a fixed bucket's kernel is its own entry
    for (int64_t m : {b.lo, b.lo + 2, b.lo + 16, b.hi})
      if (m >= b.lo && m <= b.hi && cost(m) <= bound && std::find(ms.begin(), ms.end(), m) == ms.end()) ms.push_back(m);
  }
  return ms;
}

TableEntry rangeRow(const RangeRuleFile& f, const TableRange& r, const std::string& name, const std::string& target,
                    const std::string& vendor, const std::string& configJson, const ir::Kernel& maxKernel) {
  TableEntry row;
  row.name = name;
  row.family = r.family;
  row.shape = std::to_string(f.rule.lo) + ".." + cache::formatShape(r.dims);
  row.dims = r.dims;
  row.dtype = r.dtype;
  row.target = target;
  row.arch = r.arch;
  row.vendor = vendor;
  row.config = configJson;
  row.source = "exact";
  row.tunedShape = r.dim + " " + std::to_string(f.rule.lo) + ".." + std::to_string(f.rule.hi);
  for (const auto* d : maxKernel.inputs())
    row.tensors.push_back({d->name, std::string(ir::typeName(d->dtype)), int(ir::byteSize(d->dtype)), false, d->shape});
  for (const auto* d : maxKernel.outputs())
    row.tensors.push_back({d->name, std::string(ir::typeName(d->dtype)), int(ir::byteSize(d->dtype)), true, d->shape});
  row.numInputs = int(maxKernel.inputs().size());
  row.numOutputs = int(maxKernel.outputs().size());
  row.runtimeM = true;
  row.mLo = f.rule.lo;
  row.mHi = f.rule.hi;
  row.rangeDim = r.dim;
  row.rangeDimMask = r.dimMask;
  return row;
}

std::string rangeManifest(const RangeRuleFile& f, const TableRange& r, const std::vector<int>& keyDims) {
  json buckets = json::array();
  for (const auto& b : f.rule.buckets) {
    json jb = {{"lo", b.lo}, {"hi", b.hi}, {"kernel", b.config}};
    if (b.fixed) jb["fixed"] = true;
    buckets.push_back(jb);
  }
  return json{{"name", r.name},
              {"dim", r.dim},
              {"key_dims", keyDims},
              {"lo", f.rule.lo},
              {"hi", f.rule.hi},
              {"shape_at_hi", cache::formatShape(r.dims)},
              {"buckets", buckets},
              {"train_regret", f.rule.trainRegret},
              {"held_out_regret", f.rule.heldOutRegret}}
      .dump();
}

Expected<std::function<double(int64_t)>> checkCostOf(const ir::Kernel& maxKernel, int64_t top) {
  if (maxKernel.family == ir::Family::Gemm) {
    TESSERA_ASSIGN(ir::GemmInfo g, ir::analyzeGemm(maxKernel));
    return std::function<double(int64_t)>([n = double(g.n) * double(g.k)](int64_t m) { return double(m) * n; });
  }
  if (maxKernel.family == ir::Family::Attention) {
    TESSERA_ASSIGN(ir::AttentionInfo a, ir::analyzeAttention(maxKernel));
    return std::function<double(int64_t)>([n = 2.0 * double(a.spec.batch) * double(a.spec.heads) * double(a.spec.head_dim)](int64_t m) {
      return double(m) * double(m) * n;
    });
  }
  double perRow = 1;
  for (const auto* o : maxKernel.outputs()) perRow = std::max(perRow, double(o->numel()) / double(std::max<int64_t>(top, 1)));
  return std::function<double(int64_t)>([perRow](int64_t m) { return double(m) * perRow; });
}

}  // namespace range_parts

using namespace range_parts;

namespace {

// The reference evaluator is slow: the check runs where M·N·K (or the elements) stay below this.
constexpr double kMaxCheckedMacs = double(1 << 27);

}  // namespace

Expected<RangeBundle> buildRangeBundle(const RangeRuleFile& f, const BundleSettings& s, std::set<std::string>* symbols,
                                       const std::function<void(const std::string&)>& progress) {
  if (auto gpu = getTarget(f.arch); gpu.ok() && gpu->isGpu()) {
    if (std::any_of(f.rule.buckets.begin(), f.rule.buckets.end(), [](const Bucket& b) { return b.fixed; }))
      return makeError(ErrorCode::InvalidArgument, "dispatch rule " + f.kernelName + ": fixed buckets are for host ranges");
    return buildGpuRangeBundle(f, *gpu, s, progress);
  }
  TESSERA_ASSIGN(ir::Kernel maxKernel, ir::parseKernel(f.kernelIr));
  TESSERA_ASSIGN(int64_t top, rangeExtent(maxKernel));
  const std::string dim = rangeDimName(maxKernel);
  if (f.rule.dim != dim)
    return makeError(ErrorCode::InvalidArgument, "dispatch rule " + f.kernelName + ": it dispatches on " + f.rule.dim + ", its " +
                                                     ir::familyName(maxKernel.family) + " kernel on " + dim);
  if (top != f.rule.hi)
    return makeError(ErrorCode::InvalidArgument, "dispatch rule " + f.kernelName + ": its kernel has " + dim + "=" +
                                                     std::to_string(top) + ", the rule's range ends at " + std::to_string(f.rule.hi));
  TESSERA_ASSIGN(std::function<double(int64_t)> checkCost, checkCostOf(maxKernel, top));
  if (f.threads < 1 || f.threads > 1024) return makeError(ErrorCode::InvalidArgument, "dispatch rule: threads out of range");
  TESSERA_ASSIGN(TargetDesc t, hostTargetAs(f.arch));
  t.units = f.threads;
  const bool native = s.hostCpu == HostCpu::Native && t.arch == hostTarget().arch;
  if (native) {
    TESSERA_ASSIGN(t, hostTargetWithThreads(f.threads));
  }
  const cache::HardKey key = measure::hardKeyFor(maxKernel, t);
  auto kernelAt = [&](int64_t m) { return kernelAtExtent(maxKernel, m); };
  const std::vector<int> keyDims = rangeKeyDims(maxKernel);
  RangeBundle out;
  out.range = tableRange(f, f.kernelName.empty() ? maxKernel.name : f.kernelName, key.family, key.dtype, t.arch, key.shape, dim,
                         keyDims);
  auto cache = makeSizedCompileCache(maxKernel, t);
  measure::MeasureSettings checkSettings;
  checkSettings.timeoutSec = s.verifyTimeoutSec;
  checkSettings.measure.minTimeSec = 0;
  checkSettings.measure.minRuns = 1;
  auto symbolFor = [&](const std::string& name) {
    std::string symbol = "tessera_" + sanitizeName(name) + "_" + sanitizeName(t.arch);
    for (int n = 2; symbols->count(symbol); ++n) symbol = "tessera_" + sanitizeName(name) + "_" + sanitizeName(t.arch) + "_" + std::to_string(n);
    symbols->insert(symbol);
    return symbol;
  };
  // What every host entry of the range says of itself; each kind adds its range, check and IR.
  auto hostManifest = [&](const std::string& name, const TableEntry& row, const std::string& symbol) {
    return json{{"name", name},          {"family", key.family},
                {"target", t.name},      {"arch", t.arch},
                {"vendor", "host"},      {"shape", row.shape},
                {"dtype", key.dtype},    {"units", t.units},
                {"config", json::parse(row.config)},
                {"source", "dispatch rule"},
                {"symbol", symbol},
                {"cpu", native ? "native (" + hostTarget().model + ")" : t.arch},
                {"files", {{"object", "host/" + symbol + ".o"}}}};
  };
  // One entry per config some shape-generic bucket names (compiled with runtime M), then one per
  // fixed bucket (compiled for its size); each bucket of the table row points at its entry.
  std::vector<int> genericEntry(f.rule.configs.size(), -1);
  for (size_t i = 0; i < f.rule.configs.size(); ++i) {
    if (std::none_of(f.rule.buckets.begin(), f.rule.buckets.end(), [&](const Bucket& b) { return b.config == int(i) && !b.fixed; }))
      continue;
    TESSERA_ASSIGN(ir::Config c, ir::Config::parseAssignments(f.rule.configs[i]));
    const std::string name = out.range.name + "_range" + std::to_string(i);
    const std::string symbol = symbolFor(name);
    codegen::CompileOptions o{.cpu = native ? "" : t.arch, .symbol = symbol, .runtime = {.m = true}};
    auto obj = codegen::emitHost(maxKernel, c, t, codegen::Emit::Object, o);
    if (!obj.ok()) return makeError(obj.error().code, name + " (" + c.str() + "): " + obj.error().message);
    // The check: the same lowering JIT-compiled here, run at sizes of each of its buckets.
    json checks = json::array();
    if (s.verify) {
      for (int64_t m : checkSizes(f.rule, int(i), checkCost, kMaxCheckedMacs)) {
        TESSERA_ASSIGN(ir::Kernel k, kernelAt(m));
        TESSERA_ASSIGN(auto checked, makeSizedHostMeasurer(cache, k, checkSettings)->measure({c}));
        const measure::TrialResult& r = checked.front();
        if (!r.ok())
          return makeError(ErrorCode::WrongResult, name + " (" + c.str() + ") at " + dim + "=" + std::to_string(m) + ": " +
                                                       measure::trialStatusName(r.status) + " " + r.message);
        checks.push_back({{"m", m}, {"max_rel_err", r.maxRelErr}});
      }
    }
    RangeEntry e;
    TableEntry& row = e.row;
    row = rangeRow(f, out.range, name, t.name, "host", c.toJson(), maxKernel);
    row.hostSymbol = symbol;
    json m = hostManifest(name, row, symbol);
    m["runtime_m"] = {{"lo", f.rule.lo}, {"hi", f.rule.hi}, {"dim", dim}, {"key_dims", keyDims}};
    m["check"] = {{"kind", s.verify ? "reference at sizes of its buckets" : "none"}, {"sizes", checks}};
    m["kernel_ir"] = f.kernelIr;
    e.manifestJson = m.dump();
    e.files.push_back({"host/" + symbol + ".o", std::move(*obj)});
    if (progress)
      progress(name + " on " + t.name + " (" + t.arch + "): shape-generic, " + dim + " " + std::to_string(f.rule.lo) + ".." +
               std::to_string(f.rule.hi) + ", config " + c.str() + (s.verify ? ", checked at " + std::to_string(checks.size()) + " sizes" : ""));
    genericEntry[i] = int(out.entries.size());
    out.entries.push_back(std::move(e));
  }
  for (size_t bi = 0; bi < f.rule.buckets.size(); ++bi) {
    const Bucket& b = f.rule.buckets[bi];
    if (!b.fixed) {
      out.range.buckets[bi].entry = genericEntry[size_t(b.config)];
      continue;
    }
    if (maxKernel.family != ir::Family::Gemm)
      return makeError(ErrorCode::InvalidArgument, "dispatch rule " + f.kernelName + ": fixed buckets are for GEMM ranges of M");
    TESSERA_ASSIGN(ir::Config c, ir::Config::parseAssignments(f.rule.configs[size_t(b.config)]));
    TESSERA_ASSIGN(ir::Kernel k, kernelAt(b.lo));
    const std::string name = out.range.name + "_range" + std::to_string(b.config) + "_" + dim + std::to_string(b.lo);
    const std::string symbol = symbolFor(name);
    codegen::CompileOptions o{.cpu = native ? "" : t.arch, .symbol = symbol};
    auto obj = codegen::emitHost(k, c, t, codegen::Emit::Object, o);
    if (!obj.ok()) return makeError(obj.error().code, name + " (" + c.str() + "): " + obj.error().message);
    json checks = json::array();
    if (s.verify && checkCost(b.lo) <= kMaxCheckedMacs) {
      TESSERA_ASSIGN(auto checked, measure::makeHostMeasurer(k, t, checkSettings)->measure({c}));
      const measure::TrialResult& r = checked.front();
      if (!r.ok())
        return makeError(ErrorCode::WrongResult,
                         name + " (" + c.str() + "): " + measure::trialStatusName(r.status) + " " + r.message);
      checks.push_back({{"m", b.lo}, {"max_rel_err", r.maxRelErr}});
    }
    RangeEntry e;
    TableEntry& row = e.row;
    row = rangeRow(f, out.range, name, t.name, "host", c.toJson(), k);
    // A kernel of one shape that only its range answers: tessera_find reaches it through the
    // bucket (range_dim set), tessera_run_dims runs it at that shape alone.
    const cache::HardKey kk = measure::hardKeyFor(k, t);
    row.dims = kk.shape;
    row.shape = cache::formatShape(kk.shape);
    row.tunedShape = dim + " " + std::to_string(b.lo) + " (fixed bucket of " + std::to_string(f.rule.lo) + ".." + std::to_string(f.rule.hi) + ")";
    row.runtimeM = false;
    row.mLo = row.mHi = b.lo;
    row.hostSymbol = symbol;
    json m = hostManifest(name, row, symbol);
    m["range_fixed"] = {{"range", out.range.name}, {"dim", dim}, {"size", b.lo}};
    m["check"] = {{"kind", s.verify ? "reference at its size" : "none"}, {"sizes", checks}};
    m["kernel_ir"] = ir::printKernel(k);
    e.manifestJson = m.dump();
    e.files.push_back({"host/" + symbol + ".o", std::move(*obj)});
    if (progress)
      progress(name + " on " + t.name + " (" + t.arch + "): fixed bucket " + dim + "=" + std::to_string(b.lo) + ", config " + c.str() +
               (checks.empty() ? "" : ", checked"));
    out.range.buckets[bi].entry = int(out.entries.size());
    out.entries.push_back(std::move(e));
  }
  out.manifestJson = rangeManifest(f, out.range, keyDims);
  return out;
}

}  // namespace tessera::bundle
