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

namespace {

std::string sanitizeName(const std::string& s) {
  std::string o;
  for (char c : s) o += (std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return o;
}

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
  // Multiply-adds (GEMM, attention) or elements (elementwise) at a size of the range: bounds the
  // check (attention's grow with the square of the sequence length).
  std::function<double(int64_t)> checkCost;
  if (maxKernel.family == ir::Family::Gemm) {
    TESSERA_ASSIGN(ir::GemmInfo g, ir::analyzeGemm(maxKernel));
    checkCost = [n = double(g.n) * double(g.k)](int64_t m) { return double(m) * n; };
  } else if (maxKernel.family == ir::Family::Attention) {
    TESSERA_ASSIGN(ir::AttentionInfo a, ir::analyzeAttention(maxKernel));
    checkCost = [n = 2.0 * double(a.spec.batch) * double(a.spec.heads) * double(a.spec.head_dim)](int64_t m) {
      return double(m) * double(m) * n;
    };
  } else {
    double perRow = 1;
    for (const auto* o : maxKernel.outputs()) perRow = std::max(perRow, double(o->numel()) / double(std::max<int64_t>(top, 1)));
    checkCost = [perRow](int64_t m) { return double(m) * perRow; };
  }
  if (f.threads < 1 || f.threads > 1024) return makeError(ErrorCode::InvalidArgument, "dispatch rule: threads out of range");
  TESSERA_ASSIGN(TargetDesc t, hostTargetAs(f.arch));
  t.units = f.threads;
  const bool native = s.hostCpu == HostCpu::Native && t.arch == hostTarget().arch;
  if (native) {
    TESSERA_ASSIGN(t, hostTargetWithThreads(f.threads));
  }
  const cache::HardKey key = search::hardKeyFor(maxKernel, t);
  auto kernelAt = [&](int64_t m) { return kernelAtExtent(maxKernel, m); };
  RangeBundle out;
  out.range.name = f.kernelName.empty() ? maxKernel.name : f.kernelName;
  out.range.family = key.family;
  out.range.dtype = key.dtype;
  out.range.arch = t.arch;
  out.range.dims = key.shape;
  out.range.lo = f.rule.lo;
  out.range.hi = f.rule.hi;
  out.range.dim = dim;
  const std::vector<int> keyDims = rangeKeyDims(maxKernel);
  out.range.dimMask = 0;
  for (int d : keyDims) out.range.dimMask |= 1u << d;
  json buckets = json::array();
  for (const auto& b : f.rule.buckets) {
    out.range.buckets.push_back({b.lo, b.hi, b.config});
    buckets.push_back({{"lo", b.lo}, {"hi", b.hi}, {"kernel", b.config}});
  }
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
      std::vector<int64_t> ms;
      for (const auto& b : f.rule.buckets) {
        if (b.config != int(i)) continue;
        for (int64_t m : {b.lo, b.lo + 2, b.lo + 16, b.hi})
          if (m >= b.lo && m <= b.hi && checkCost(m) <= kMaxCheckedMacs &&
              std::find(ms.begin(), ms.end(), m) == ms.end())
            ms.push_back(m);
      }
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
    row.name = name;
    row.family = key.family;
    row.shape = std::to_string(f.rule.lo) + ".." + cache::formatShape(key.shape);
    row.dims = key.shape;
    row.dtype = key.dtype;
    row.target = t.name;
    row.arch = t.arch;
    row.vendor = "host";
    row.config = c.toJson();
    row.source = "exact";
    row.tunedShape = dim + " " + std::to_string(f.rule.lo) + ".." + std::to_string(f.rule.hi);
    for (const auto* d : maxKernel.inputs())
      row.tensors.push_back({d->name, std::string(ir::typeName(d->dtype)), int(ir::byteSize(d->dtype)), false, d->shape});
    for (const auto* d : maxKernel.outputs())
      row.tensors.push_back({d->name, std::string(ir::typeName(d->dtype)), int(ir::byteSize(d->dtype)), true, d->shape});
    row.numInputs = int(maxKernel.inputs().size());
    row.numOutputs = int(maxKernel.outputs().size());
    row.hostSymbol = symbol;
    row.runtimeM = true;
    row.mLo = f.rule.lo;
    row.mHi = f.rule.hi;
    row.rangeDim = dim;
    row.rangeDimMask = out.range.dimMask;
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
  out.manifestJson = json{{"name", out.range.name},
                          {"dim", dim},
                          {"key_dims", keyDims},
                          {"lo", f.rule.lo},
                          {"hi", f.rule.hi},
                          {"shape_at_hi", cache::formatShape(key.shape)},
                          {"buckets", buckets},
                          {"train_regret", f.rule.trainRegret},
                          {"held_out_regret", f.rule.heldOutRegret}}
                         .dump();
  return out;
}

}  // namespace tessera::bundle
