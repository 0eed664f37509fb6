// Owns the target of a tune as the front ends name it (by name and threads, or a GPU product by
// name), the GPU facts files, the kernel size check, and the dialect of option names.
#include "session/target_choice.h"

#include <cstdio>

#include "ir/families.h"
#include "targets/gpu_skus.h"
#include "support/si_format.h"

namespace tessera::session {

namespace {

using detail::bad;

}  // namespace

std::string Dialect::option(std::string_view name) const {
  if (kind == Kind::Cli) return "--" + std::string(name);
  std::string s(name);
  for (char& c : s)
    if (c == '-') c = '_';
  return s;
}

std::string Dialect::given(std::string_view name, std::string_view value, bool text) const {
  if (kind == Kind::Cli) return option(name) + (value.empty() ? "" : " " + std::string(value));
  if (value.empty()) return option(name) + "=True";
  return option(name) + "=" + (text ? "\"" + std::string(value) + "\"" : std::string(value));
}

Status checkThreads(int threads, const Dialect& d) {
  if (threads == kAllCores || (threads >= 1 && threads <= 1024)) return {};
  return bad(d.option("threads") + " must be between 1 and 1024");
}

Expected<TargetDesc> targetFor(const std::string& name, int threads, const Dialect& d) {
  TESSERA_ASSIGN(TargetDesc t, getTarget(name));
  if (threads == kAllCores) return t;
  if (t.vendor != Vendor::Host) return bad(d.option("threads") + " applies to the host target only");
  TESSERA_TRY(checkThreads(threads, d));
  return hostTargetWithThreads(threads);
}

Expected<TargetDesc> targetWithGpu(const std::string& target, const std::vector<std::string>& gpus, int threads,
                                   const Dialect& d) {
  if (gpus.empty()) return targetFor(target, threads, d);
  if (gpus.size() > 1) return bad(d.option("gpu") + " names one GPU here");
  if (threads != kAllCores) return bad(d.option("threads") + " applies to the host target only");
  auto gpu = findGpu(gpus.front());
  if (!gpu.ok()) return bad(gpu.error().message);
  if (target.empty() || target == "host") return targetOfGpu(*gpu);
  auto chip = getTarget(target);
  if (!chip.ok()) return chip.takeError();
  if (!chip->isGpu() || chip->name != chip->arch)
    return bad(d.option("gpu") + " picks the target; " + d.option("target") + ", when given, must be its chip (" + gpu->arch + ")");
  return targetOfGpu(gpus.front(), *chip);
}

Status loadGpuFacts(const std::vector<std::string>& files) {
  for (const auto& path : files) {
    TESSERA_ASSIGN(auto rows, readGpuFactsFile(path));
    (void)addGpuFacts(rows);
  }
  return {};
}

Status checkKernelSize(const ir::Kernel& k, int64_t maxElements, const Dialect& d) {
  double elements = 0;
  for (const auto& t : k.tensors)
    if (t.role != ir::TensorRole::Temp) elements += double(t.numel());
  if (elements <= double(maxElements)) return {};
  char what[240];
  std::snprintf(what, sizeof what, "the kernel's inputs and outputs hold %s elements (%s), more than %s %lld; raise it to "
                "run this kernel anyway", formatSi(elements, "").c_str(), formatSi(ir::kernelBytes(k), "B").c_str(),
                d.option("max-elements").c_str(),
                static_cast<long long>(maxElements));
  return bad(what);
}

}  // namespace tessera::session
