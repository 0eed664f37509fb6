// Owns compiling a dispatch rule for a GPU target into bundle entries (dispatch_bundle.h): one
// shape-generic kernel (GEMM's runtime M, elementwise's rows, attention's sequence length) per
// config of the rule, as cubin + PTX with its launch (the grid's blocks and the wrapper's rows
// follow the size at run time), each checked here on the mapped-kernel emulator against the
// reference at a few sizes of its buckets.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "bundle/bundle.h"
#include "bundle/dispatch_bundle.h"
#include "bundle/range_dims.h"
#include "store/record.h"
#include "emulator/gpu_emu.h"
#include "codegen/gpu.h"
#include "codegen/gpu_runner.h"
#include "ir/families.h"
#include "ir/text.h"
#include "measure/records.h"
#include "targets/kernel_io.h"

namespace tessera::bundle {

using nlohmann::json;

using namespace range_parts;

namespace {

// The mapped-kernel emulator runs every GPU thread as a fiber: the check runs where M·N·K (or
// attention's multiply-adds) stays below this, or an elementwise kernel's elements below the second.
constexpr double kMaxEmulatedMacs = double(1 << 22);
constexpr double kMaxEmulatedElements = double(1 << 16);

// The shape-generic kernel `bin` at M = m on the emulator, against the reference; "" when right.
std::string checkAt(const codegen::GpuBinary& bin, const std::shared_ptr<const codegen::MappedKernel>& mk, const ir::Kernel& k,
                    const TargetDesc& t, int64_t m) {
  KernelIO io(k, 3);
  io.poisonOutputs();
  auto report = std::make_shared<emu::Report>();
  auto runner = codegen::makeDeviceRunner(codegen::mappedEmulatedDevice(mk, t.name, report));
  const int64_t sizes[codegen::kRuntimeSizeCount] = {m, 0, m};  // attention's key length follows its query length
  auto ran = runner->run(bin, k, io.buffers(), 1, sizes);
  if (!ran.ok()) return ran.error().message;
  if (!report->ok) return report->errors.empty() ? "the emulation failed" : report->errors.front();
  auto cmp = io.check();
  if (!cmp.ok()) return cmp.error().message;
  return cmp->ok ? "" : cmp->firstBad;
}

}  // namespace

Expected<RangeBundle> buildGpuRangeBundle(const RangeRuleFile& f, const TargetDesc& t, const BundleSettings& s,
                                          const std::function<void(const std::string&)>& progress) {
  TESSERA_ASSIGN(ir::Kernel maxKernel, ir::parseKernel(f.kernelIr));
  if (t.vendor != Vendor::Nvidia)
    return makeError(ErrorCode::Unsupported, "dispatch rule " + f.kernelName + ": shape-generic GPU kernels run on NVIDIA targets, not " + t.name);
  TESSERA_ASSIGN(int64_t top, rangeExtent(maxKernel));
  const std::string dim = rangeDimName(maxKernel);
  if (f.rule.dim != dim)
    return makeError(ErrorCode::InvalidArgument, "dispatch rule " + f.kernelName + ": it dispatches on " + f.rule.dim + ", its " +
                                                     ir::familyName(maxKernel.family) + " kernel on " + dim);
  if (top != f.rule.hi)
    return makeError(ErrorCode::InvalidArgument, "dispatch rule " + f.kernelName + ": its kernel has " + dim + "=" + std::to_string(top) +
                                                     ", the rule's range ends at " + std::to_string(f.rule.hi));
  TESSERA_ASSIGN(std::function<double(int64_t)> cost, checkCostOf(maxKernel, top));
  const double bound = maxKernel.family == ir::Family::Elementwise ? kMaxEmulatedElements : kMaxEmulatedMacs;
  const cache::HardKey key = measure::hardKeyFor(maxKernel, t);
  const std::vector<int> keyDims = rangeKeyDims(maxKernel);
  RangeBundle out;
  out.range = tableRange(f, f.kernelName.empty() ? maxKernel.name : f.kernelName, key.family, key.dtype, t.arch, key.shape, dim,
                         keyDims);
  for (size_t i = 0; i < f.rule.configs.size(); ++i) {
    TESSERA_ASSIGN(ir::Config c, ir::Config::parseAssignments(f.rule.configs[i]));
    const std::string name = out.range.name + "_range" + std::to_string(i);
    auto where = [&](const Error& e) { return makeError(e.code, name + " (" + c.str() + "): " + e.message); };
    auto bin = codegen::compileGpu(maxKernel, c, t, {.runtime = {.m = true}});
    if (!bin.ok()) return where(bin.error());
    if (!bin->resources.ok || bin->resources.spills()) {
      std::string why = bin->resources.summary();
      for (const auto& p : bin->resources.problems) why += "; " + p;
      return makeError(ErrorCode::InvalidConfig, name + " (" + c.str() + "): resources over " + t.name + "'s limits: " + why);
    }
    if (bin->binary.empty()) return makeError(ErrorCode::CompileError, name + ": no code object was produced for " + t.name);
    json checks = json::array();
    if (s.verify) {
      std::vector<int64_t> ms = checkSizes(f.rule, int(i), cost, bound);
      // Every kernel runs any size of the range: when its buckets are too big to emulate, it is
      // checked at the smallest sizes instead (1 and the largest size within the bound).
      int64_t fits = 0;
      for (int64_t lo = 1, hi = f.rule.hi; lo <= hi;) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (cost(mid) <= bound) fits = mid, lo = mid + 1;
        else hi = mid - 1;
      }
      if (ms.empty())
        for (int64_t m : {int64_t(1), fits})
          if (m >= 1 && std::find(ms.begin(), ms.end(), m) == ms.end()) ms.push_back(m);
      if (!ms.empty()) {
        auto mk = codegen::compileMapped(*bin, t);
        if (!mk.ok()) return where(mk.error());
        for (int64_t m : ms) {
          TESSERA_ASSIGN(ir::Kernel k, kernelAtExtent(maxKernel, m));
          std::string bad = checkAt(*bin, *mk, k, t, m);
          if (!bad.empty())
            return makeError(ErrorCode::WrongResult, name + " (" + c.str() + ") at " + dim + "=" + std::to_string(m) + ": " + bad);
          checks.push_back({{"m", m}, {"ok", true}});
        }
      }
    }
    RangeEntry e;
    TableEntry& row = e.row;
    row = rangeRow(f, out.range, name, t.name, "nvidia", c.toJson(), maxKernel);
    row.launch = bin->launch;
    row.binary = bin->binary;
    std::string ptx = bin->assembly;
    while (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
    row.ptx = ptx;
    row.ptxPortable = !t.arch.empty() && t.arch.back() != 'a';
    const std::string base = "gpu/" + sanitizeName(name) + "." + t.arch;
    e.files.push_back({base + ".cubin", bin->binary});
    e.files.push_back({base + ".ptx", ptx});
    e.manifestJson = json{{"name", name},
                          {"family", key.family},
                          {"target", t.name},
                          {"arch", t.arch},
                          {"vendor", "nvidia"},
                          {"shape", row.shape},
                          {"dtype", key.dtype},
                          {"units", 1},
                          {"runtime_m", {{"lo", f.rule.lo}, {"hi", f.rule.hi}, {"dim", dim}, {"key_dims", keyDims}}},
                          {"config", json::parse(row.config)},
                          {"source", "dispatch rule"},
                          {"strategy", bin->strategy},
                          {"launch", bin->launch.str()},
                          {"resources", bin->resources.summary()},
                          {"files", {{"cubin", base + ".cubin"}, {"ptx", base + ".ptx"}, {"ptx_portable", row.ptxPortable}}},
                          {"check", {{"kind", s.verify ? "reference on the mapped-kernel emulator at sizes of its buckets" : "none"},
                                     {"sizes", checks}}},
                          {"kernel_ir", f.kernelIr}}
                         .dump();
    if (progress)
      progress(name + " on " + t.name + ": shape-generic, " + dim + " " + std::to_string(f.rule.lo) + ".." + std::to_string(f.rule.hi) +
               ", config " + c.str() + ", " + bin->resources.summary() +
               (s.verify ? ", checked on the emulator at " + std::to_string(checks.size()) + " sizes" : ""));
    out.entries.push_back(std::move(e));
  }
  out.manifestJson = rangeManifest(f, out.range, keyDims);
  return out;
}

}  // namespace tessera::bundle
