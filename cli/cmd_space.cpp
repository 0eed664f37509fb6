// Owns `tessera space`: what the tuner would search for a kernel on a target — every knob with
// its default, legal domain and meaning, the size of the knob product and how many of its configs
// are legal (enumerated when small enough, estimated by uniform sampling otherwise), so a user
// can choose --trials, --space or --strategy exhaustive before spending machine time.
#include <cstdio>

#include "cli/commands.h"
#include "cli/kernel_flags.h"
#include "cli/report.h"
#include "search/space.h"
#include "search/space_ops.h"
#include <nlohmann/json.hpp>

namespace tessera::cli {

namespace {

struct SpaceFlags {
  KernelFlags kernel;
  std::string target = "host", spaceSpec;
  int threads = kAllCores;
  bool json = false;
};

// Knob products up to this size are enumerated; larger ones are sampled.
constexpr size_t kEnumerateLimit = 2000000;
constexpr int kSamples = 200000;

struct LegalCount {
  double count = 0;
  bool exact = false;
};

LegalCount countLegal(const ir::Space& s) {
  if (auto all = search::enumerateLegal(s, kEnumerateLimit)) return {double(all->size()), true};
  // Uniform draws from the knob product (not sampleLegal: that one only returns legal configs).
  search::Rng rng(1);
  int legal = 0;
  for (int i = 0; i < kSamples; ++i)
    if (!s.check(search::sampleProduct(s, rng))) ++legal;
  return {search::productSize(s) * double(legal) / kSamples, false};
}

void spaceCommand(const SpaceFlags& f) {
  auto k = buildKernel(f.kernel);
  if (!k.ok()) failWith(k.error());
  auto t = session::targetFor(f.target, f.threads);
  if (!t.ok()) failWith(t.error());
  auto space = search::makeSpace(*k, *t);
  if (!space.ok()) failWith(space.error());
  if (!f.spaceSpec.empty()) {
    space = search::restrictSpace(*space, f.spaceSpec);
    if (!space.ok()) failWith(space.error());
  }
  LegalCount legal = countLegal(*space);
  double product = search::productSize(*space);
  if (f.json) {
    nlohmann::json knobs = nlohmann::json::array();
    for (const auto& kn : space->knobs) {
      nlohmann::json dom = nlohmann::json::array();
      for (const auto& v : kn.domain) dom.push_back(ir::knobValueStr(v));
      knobs.push_back({{"name", kn.name}, {"default", ir::knobValueStr(kn.def)}, {"domain", dom}, {"help", kn.help}});
    }
    nlohmann::json j = {{"kernel", k->name},       {"target", t->name},       {"family", space->family},
                        {"knobs", knobs},          {"product", product},      {"legal", legal.count},
                        {"legal_exact", legal.exact}, {"default", space->defaults().str()}};
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf("space of %s on %s (%s)\n\n", k->name.c_str(), t->name.c_str(), t->arch.c_str());
  std::printf("%-10s %-9s %-40s %s\n", "knob", "default", "domain", "meaning");
  for (const auto& kn : space->knobs) {
    std::string dom;
    for (const auto& v : kn.domain) dom += (dom.empty() ? "" : "|") + ir::knobValueStr(v);
    std::printf("%-10s %-9s %-40s %s\n", kn.name.c_str(), ir::knobValueStr(kn.def).c_str(), dom.c_str(), kn.help.c_str());
  }
  std::printf("\n%zu knobs, %.0f configs in the product, %s%.0f legal (%s)\n", space->knobs.size(), product,
              legal.exact ? "" : "about ", legal.count, legal.exact ? "enumerated" : "estimated from uniform samples");
}

}  // namespace

void addSpaceCommand(CLI::App& app) {
  auto f = std::make_shared<SpaceFlags>();
  auto* s = app.add_subcommand("space", "show the knobs, domains and size of the space `tune` searches");
  s->add_option("--target", f->target, "target")->capture_default_str();
  s->add_option("--space", f->spaceSpec, "narrow knob domains, as for tune");
  addThreadsOption(s, &f->threads);
  s->add_flag("--json", f->json, "machine-readable output");
  addKernelSubcommands(s, &f->kernel, [f] { spaceCommand(*f); });
}

}  // namespace tessera::cli
