// Owns compiling a dispatch rule into bundle entries (dispatch_bundle.h).
#include "bundle/dispatch_bundle.h"

#include <functional>
#include <nlohmann/json.hpp>

#include "bundle/bundle.h"
#include "bundle/range_tune.h"
#include "cache_service/record.h"
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
    if (b.config != i) continue;
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
  for (const auto& b : f.rule.buckets) buckets.push_back({{"lo", b.lo}, {"hi", b.hi}, {"kernel", b.config}});
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
  if (auto gpu = getTarget(f.arch); gpu.ok() && gpu->isGpu()) return buildGpuRangeBundle(f, *gpu, s, progress);
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
  const cache::HardKey key = search::hardKeyFor(maxKernel, t);
  auto kernelAt = [&](int64_t m) { return kernelAtExtent(maxKernel, m); };
  const std::vector<int> keyDims = rangeKeyDims(maxKernel);
  RangeBundle out;
  out.range = tableRange(f, f.kernelName.empty() ? maxKernel.name : f.kernelName, key.family, key.dtype, t.arch, key.shape, dim,
                         keyDims);
  auto cache = makeSizedCompileCache(maxKernel, t);
  for (size_t i = 0; i < f.rule.configs.size(); ++i) {
    TESSERA_ASSIGN(ir::Config c, ir::Config::parseAssignments(f.rule.configs[i]));
    const std::string name = out.range.name + "_range" + std::to_string(i);
    std::string symbol = "tessera_" + sanitizeName(name) + "_" + sanitizeName(t.arch);
    for (int n = 2; symbols->count(symbol); ++n) symbol = "tessera_" + sanitizeName(name) + "_" + sanitizeName(t.arch) + "_" + std::to_string(n);
    symbols->insert(symbol);
    codegen::CompileOptions o{.cpu = native ? "" : t.arch, .symbol = symbol, .runtime = {.m = true}};
    auto obj = codegen::emitHost(maxKernel, c, t, codegen::Emit::Object, o);
    if (!obj.ok()) return makeError(obj.error().code, name + " (" + c.str() + "): " + obj.error().message);
    // The check: the same lowering JIT-compiled here, run at sizes of each of its buckets.
    json checks = json::array();
    if (s.verify) {
      const std::vector<int64_t> ms = checkSizes(f.rule, int(i), checkCost, kMaxCheckedMacs);
      search::MeasureSettings ms2;
      ms2.timeoutSec = s.verifyTimeoutSec;
      ms2.measure.minTimeSec = 0;
      ms2.measure.minRuns = 1;
      for (int64_t m : ms) {
        TESSERA_ASSIGN(ir::Kernel k, kernelAt(m));
        auto r = makeSizedHostMeasurer(cache, k, ms2)->measure({c}).front();
        if (!r.ok())
          return makeError(ErrorCode::WrongResult, name + " (" + c.str() + ") at " + dim + "=" + std::to_string(m) + ": " +
                                                       search::trialStatusName(r.status) + " " + r.message);
        checks.push_back({{"m", m}, {"max_rel_err", r.maxRelErr}});
      }
    }
    RangeEntry e;
    TableEntry& row = e.row;
    row = rangeRow(f, out.range, name, t.name, "host", c.toJson(), maxKernel);
    row.hostSymbol = symbol;
    e.manifestJson = json{{"name", name},
                          {"family", key.family},
                          {"target", t.name},
                          {"arch", t.arch},
                          {"vendor", "host"},
                          {"shape", row.shape},
                          {"dtype", key.dtype},
                          {"units", t.units},
                          {"runtime_m", {{"lo", f.rule.lo}, {"hi", f.rule.hi}, {"dim", dim}, {"key_dims", keyDims}}},
                          {"config", json::parse(row.config)},
                          {"source", "dispatch rule"},
                          {"symbol", symbol},
                          {"cpu", native ? "native (" + hostTarget().model + ")" : t.arch},
                          {"files", {{"object", "host/" + symbol + ".o"}}},
                          {"check", {{"kind", s.verify ? "reference at sizes of its buckets" : "none"}, {"sizes", checks}}},
                          {"kernel_ir", f.kernelIr}}
                         .dump();
    e.files.push_back({"host/" + symbol + ".o", std::move(*obj)});
    if (progress)
      progress(name + " on " + t.name + " (" + t.arch + "): shape-generic, " + dim + " " + std::to_string(f.rule.lo) + ".." +
               std::to_string(f.rule.hi) + ", config " + c.str() + (s.verify ? ", checked at " + std::to_string(checks.size()) + " sizes" : ""));
    out.entries.push_back(std::move(e));
  }
  out.manifestJson = rangeManifest(f, out.range, keyDims);
  return out;
}

}  // namespace tessera::bundle
