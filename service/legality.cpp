// Owns the service's legality checks (legality.h).
#include "service/legality.h"

#include <map>

#include "ir/text.h"
#include "ir/verifier.h"
#include "search/config_rule.h"
#include "search/space_gpu.h"
#include "service/plausibility.h"

namespace tessera::cache {

namespace {

Expected<ir::Kernel> kernelOf(const HardKey& k, std::string_view text, const std::string& path) {
  auto kernel = ir::parseKernel(text);
  if (!kernel.ok()) return fieldError(path, "kernel_ir", "not a kernel text: " + kernel.error().message);
  if (Status v = ir::verify(*kernel); !v.ok()) return fieldError(path, "kernel_ir", "the kernel does not verify: " + v.error().message);
  const std::string family = ir::familyName(kernel->family);
  if (family != k.family)
    return fieldError(path, "kernel_ir", "a " + family + " kernel cannot be filed under a " + k.family + " key");
  return kernel;
}

}  // namespace

Status checkKernelTextKernel(const HardKey& k, std::string_view text, const std::string& path) {
  TESSERA_TRY(kernelOf(k, text, path));
  return {};
}

Status checkConfigLegal(const Record& r, const std::optional<std::string>& text, const std::string& path) {
  if (!text) return {};
  TESSERA_ASSIGN(ir::Kernel kernel, kernelOf(r.key, *text, path));
  if (r.key.target != "host") {
    // A GPU key names its chip (arch == target, plausibility.cpp) and its SMs/CUs. A chip the
    // table lacks (newer than it, or an imported device name) has no space: the knob table speaks.
    auto gpu = search::gpuOfKey(r.key.target, static_cast<int>(r.key.units));
    if (!gpu.ok()) return gpu.error().code == ErrorCode::NotFound ? Status{} : Status(fieldError(path, "units", gpu.error().message));
    auto space = search::gpuRuleSpace(kernel, *gpu);
    if (!space.ok()) return fieldError(path, "kernel_ir", "the kernel has no " + r.key.family + " space on " + r.key.target + ": " + space.error().message);
    if (Status s = search::checkConfigInSpace(*space, r.config); !s.ok())
      return fieldError(path, "config", s.error().message + " (the tuner's space for this kernel on " + r.key.target + ")");
    return {};
  }
  auto host = search::hostOfKey(r.key.arch, static_cast<int>(r.key.units));
  if (!host.ok()) return fieldError(path, "arch", host.error().message);
  auto space = search::hostSpace(kernel, *host);
  if (!space.ok()) return fieldError(path, "kernel_ir", "the kernel has no " + r.key.family + " space: " + space.error().message);
  if (Status s = search::checkConfigInSpace(*space, r.config); !s.ok())
    return fieldError(path, "config", s.error().message + " (the tuner's space for this kernel on " + r.key.arch + " with " +
                                   std::to_string(r.key.units) + " threads)");
  return {};
}

Expected<std::vector<LegalityRefusal>> legalityRefusals(RecordStore& store, const std::vector<Record>& records,
                                                        bool paths, size_t max) {
  std::map<std::string, std::optional<std::string>> texts;
  for (const Record& rec : records)
    if (!rec.kernel_ir.empty()) texts.emplace(rec.key.workload, rec.kernel_ir);
  std::vector<LegalityRefusal> out;
  for (size_t i = 0; i < records.size() && out.size() < max; ++i) {
    const Record& rec = records[i];
    auto it = texts.find(rec.key.workload);
    if (it == texts.end()) {
      TESSERA_ASSIGN(std::optional<std::string> stored, store.kernelText(rec.key.workload));
      it = texts.emplace(rec.key.workload, std::move(stored)).first;
    }
    if (Status s = checkConfigLegal(rec, it->second, paths ? "records[" + std::to_string(i) + "]" : ""); !s.ok())
      out.push_back({i, s.error().message});
  }
  return out;
}

}  // namespace tessera::cache
