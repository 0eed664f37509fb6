// Owns `tessera gpus`: the GPU products Tessera knows by name (built in, and added by facts files),
// one per line with its chip and figures, or one GPU with the source of every figure.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/gpu_flags.h"
#include "targets/gpu_skus.h"
#include "targets/gpu_targets.h"

namespace tessera::cli {

namespace {

struct GpusFlags {
  GpuFlags gpu;
  std::string name, arch;
  bool json = false, references = false;
};

nlohmann::json skuJson(const GpuSku& s) {
  nlohmann::json sources = nlohmann::json::object();
  for (const auto& [f, src] : s.sources) sources[f] = src;
  auto d = defaultGpuOf(s.arch);
  return {{"name", s.name},
          {"aliases", s.aliases},
          {"arch", s.arch},
          {"segment", s.segment},
          {"units", s.units},
          {"clock_ghz", s.clockGHz},
          {"fp32_gflops", s.fp32Gflops},
          {"fp16_gflops", s.fp16Gflops},
          {"bf16_gflops", s.bf16Gflops},
          {"bandwidth_gbs", s.bandwidthGBs},
          {"l2_bytes", s.l2Bytes},
          {"smem_per_unit_bytes", s.smemPerUnit},
          {"registers_per_unit", s.regsPerUnit},
          {"warp_size", s.warpSize},
          {"default_of_arch", d && d->name == s.name},
          {"origin", s.origin},
          {"sources", sources}};
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

void gpusCommand(const GpusFlags& f) {
  loadGpuFacts(f.gpu);
  if (f.references) {
    for (const auto& [key, title] : gpuSkuReferences()) std::printf("%-14s %s\n", key.c_str(), title.c_str());
    return;
  }
  if (!f.name.empty()) {
    auto s = findGpu(f.name);
    if (!s.ok()) fail(s.error().message, 2);
    if (f.json) {
      std::printf("%s\n", skuJson(*s).dump(2).c_str());
      return;
    }
    auto d = defaultGpuOf(s->arch);
    std::printf("%s  (%s, %s%s)\n", s->name.c_str(), s->arch.c_str(), s->segment.c_str(),
                d && d->name == s->name ? "; the chip's default product" : "");
    if (!s->aliases.empty()) {
      std::string a;
      for (const auto& x : s->aliases) a += (a.empty() ? "" : ", ") + x;
      std::printf("also named   %s\n", a.c_str());
    }
    for (const auto& [field, unit] : gpuSkuFields()) {
      double v = gpuSkuValue(*s, field);
      std::string value = field == "clock" ? fmt("%.3g", v) : fmt(v >= 100 ? "%.0f" : "%.4g", v);
      auto src = s->sources.find(field);
      std::printf("%-10s %10s %-40s %s\n", field.c_str(), value.c_str(), unit.c_str(),
                  src == s->sources.end() ? "" : src->second.c_str());
    }
    if (s->origin != "built-in") std::printf("from %s\n", s->origin.c_str());
    std::printf("\nuse it with --gpu \"%s\" (tune, compare, compile, bundle); `tessera gpus --references` expands the sources\n",
                s->name.c_str());
    return;
  }
  std::vector<GpuSku> rows;
  for (const auto& s : gpuSkus())
    if (f.arch.empty() || s.arch == f.arch) rows.push_back(s);
  if (f.json) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& s : rows) a.push_back(skuJson(s));
    std::printf("%s\n", a.dump(2).c_str());
    return;
  }
  std::printf("%-36s %-8s %-12s %5s %6s %8s %8s %8s %7s %6s %6s\n", "GPU", "chip", "segment", "units", "GHz", "FP32 TF",
              "FP16 TF", "BF16 TF", "GB/s", "L2 MB", "smemKB");
  for (const auto& s : rows) {
    auto d = defaultGpuOf(s.arch);
    std::string name = s.name + (d && d->name == s.name ? " *" : "") + (s.origin != "built-in" ? " +" : "");
    std::printf("%-36s %-8s %-12s %5d %6.3g %8.1f %8.1f %8s %7.0f %6.3g %6.0f\n", name.c_str(), s.arch.c_str(),
                s.segment.c_str(), s.units, s.clockGHz, s.fp32Gflops / 1000, s.fp16Gflops / 1000,
                s.bf16Gflops > 0 ? fmt("%.1f", s.bf16Gflops / 1000).c_str() : "-", s.bandwidthGBs,
                double(s.l2Bytes) / (1024.0 * 1024.0), double(s.smemPerUnit) / 1024.0);
  }
  std::printf("\n%zu GPUs. * the chip's default product (--target CHIP), + from a facts file. FP16/BF16: matrix units with\n"
              "f32 accumulation, dense (the FMA pipes where a chip has none). Every figure's source: tessera gpus NAME.\n"
              "Add a GPU: --gpu-facts FILE or $TESSERA_GPU_FACTS (docs/gpus.md).\n",
              rows.size());
}

}  // namespace

void addGpusCommand(CLI::App& app) {
  auto f = std::make_shared<GpusFlags>();
  auto* g = app.add_subcommand("gpus", "the GPUs Tessera knows by name, with their facts and sources");
  g->add_option("name", f->name, "one GPU: every figure with its source");
  g->add_option("--arch", f->arch, "only the GPUs of this chip (sm_89, gfx942, ...)");
  g->add_flag("--json", f->json, "machine-readable output");
  g->add_flag("--references", f->references, "the documents the sources abbreviate");
  g->add_option("--gpu-facts", f->gpu.facts, "a JSON file of GPUs to add, repeatable (default: the files in $TESSERA_GPU_FACTS)")
      ->allow_extra_args(false);
  g->callback([f] { gpusCommand(*f); });
}

}  // namespace tessera::cli
