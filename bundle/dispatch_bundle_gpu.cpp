// Owns compiling a dispatch rule for a GPU target into bundle entries (dispatch_bundle.h): one
// shape-generic GEMM (runtime M) per config of the rule, as cubin + PTX with its launch (the grid's
// row blocks and the wrapper's rows follow M at run time), each checked here on the mapped-kernel
// emulator against the reference at a few sizes of its buckets.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "bundle/bundle.h"
#include "bundle/dispatch_bundle.h"
#include "bundle/range_tune.h"
#include "cache_service/record.h"
#include "codegen/gpu.h"
#include "codegen/gpu_emu.h"
#include "codegen/gpu_runner.h"
#include "ir/families.h"
#include "ir/text.h"
#include "measure/records.h"
#include "targets/kernel_io.h"

namespace tessera::bundle {

using nlohmann::json;

using namespace range_parts;

namespace {

// The mapped-kernel emulator runs every GPU thread as a fiber: the check runs where M·N·K stays
// below this.
constexpr double kMaxEmulatedMacs = double(1 << 22);

// The shape-generic kernel `bin` at M = m on the emulator, against the reference; "" when right.
std::string checkAt(const codegen::GpuBinary& bin, const std::shared_ptr<const codegen::MappedKernel>& mk, const ir::Kernel& k,
                    const TargetDesc& t, int64_t m) {
  KernelIO io(k, 3);
  io.poisonOutputs();
  auto report = std::make_shared<emu::Report>();
  auto runner = codegen::makeDeviceRunner(codegen::mappedEmulatedDevice(mk, t.name, report));
  const int64_t sizes[codegen::kRuntimeSizeCount] = {m, 0, 0};
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
  if (maxKernel.family != ir::Family::Gemm)
    return makeError(ErrorCode::Unsupported, "dispatch rule " + f.kernelName + ": shape-generic GPU kernels are GEMMs (runtime M); this is " +
                                                 ir::familyName(maxKernel.family));
  if (t.vendor != Vendor::Nvidia)
    return makeError(ErrorCode::Unsupported, "dispatch rule " + f.kernelName + ": shape-generic GPU kernels run on NVIDIA targets, not " + t.name);
  TESSERA_ASSIGN(int64_t top, rangeExtent(maxKernel));
  if (f.rule.dim != "M") return makeError(ErrorCode::InvalidArgument, "dispatch rule " + f.kernelName + ": a GPU GEMM's rule dispatches on M");
  if (top != f.rule.hi)
    return makeError(ErrorCode::InvalidArgument, "dispatch rule " + f.kernelName + ": its kernel has M=" + std::to_string(top) +
                                                     ", the rule's range ends at " + std::to_string(f.rule.hi));
  TESSERA_ASSIGN(ir::GemmInfo g, ir::analyzeGemm(maxKernel));
  const cache::HardKey key = search::hardKeyFor(maxKernel, t);
  const std::vector<int> keyDims = {0};  // GEMM's M: key dimension 0 (bundle/table.h)
  RangeBundle out;
  out.range = tableRange(f, f.kernelName.empty() ? maxKernel.name : f.kernelName, key.family, key.dtype, t.arch, key.shape, "M",
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
      std::vector<int64_t> ms = checkSizes(f.rule, int(i), [&](int64_t m) { return double(m) * double(g.n) * double(g.k); },
                                           kMaxEmulatedMacs);
      // Every kernel runs any M of the range: when its buckets are too big to emulate, it is
      // checked at the smallest sizes instead (M = 1 and the largest M within the bound).
      const int64_t fits = std::min<int64_t>(f.rule.hi, int64_t(kMaxEmulatedMacs / (double(g.n) * double(g.k))));
      if (ms.empty())
        for (int64_t m : {int64_t(1), fits})
          if (m >= 1 && std::find(ms.begin(), ms.end(), m) == ms.end()) ms.push_back(m);
      if (!ms.empty()) {
        auto mk = codegen::compileMapped(*bin, t);
        if (!mk.ok()) return where(mk.error());
        for (int64_t m : ms) {
          TESSERA_ASSIGN(ir::Kernel k, kernelAtExtent(maxKernel, m));
          std::string bad = checkAt(*bin, *mk, k, t, m);
          if (!bad.empty()) return makeError(ErrorCode::WrongResult, name + " (" + c.str() + ") at M=" + std::to_string(m) + ": " + bad);
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
                          {"runtime_m", {{"lo", f.rule.lo}, {"hi", f.rule.hi}, {"dim", "M"}, {"key_dims", {0}}}},
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
      progress(name + " on " + t.name + ": shape-generic, M " + std::to_string(f.rule.lo) + ".." + std::to_string(f.rule.hi) +
               ", config " + c.str() + ", " + bin->resources.summary() +
               (s.verify ? ", checked on the emulator at " + std::to_string(checks.size()) + " sizes" : ""));
    out.entries.push_back(std::move(e));
  }
  out.manifestJson = rangeManifest(f, out.range, keyDims);
  return out;
}

}  // namespace tessera::bundle
