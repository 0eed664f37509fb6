// Owns `tessera bundle`: reads the kernels to ship (a spec file with one kernel per line in the
// flags' syntax, IR files, or every winner of the store for the targets), picks the store and the
// shared cache at the edge, and prints what bundle::writeBundle chose for each kernel.
//
// Spec file (`--kernels FILE`): one kernel per line, `#` starts a comment, quotes as in a shell:
//   gemm --m 1024 --n 1024 --k 1024 --dtype f32
//   attention --heads 8 --seq 1024 --head-dim 64 --causal
//   elementwise --expr 'y = gelu(x * s + b)' --shape 4096x4096 --shape s=4096 --shape b=4096
//   file attn.tsr                       # relative to the spec file's folder
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bundle/bundle.h"
#include "bundle/winners.h"
#include "client/client.h"
#include "store/store.h"
#include "cli/commands.h"
#include "cli/gpu_flags.h"
#include "cli/kernel_flags.h"
#include "cli/kernel_list.h"
#include "cli/tune_common.h"
#include "cli/report.h"
#include "measure/records.h"
#include "support/strings.h"

namespace tessera::cli {

namespace {

namespace fs = std::filesystem;

struct BundleFlags {
  std::string out, db = "tessera.db", targets = "host", missing = "fail", hostCpu = "level";
  std::string trust = "any";
  CacheFlags cache;
  std::vector<std::string> specFiles, irFiles, dispatchFiles;
  int threads = kAllCores;
  bool allWinners = false, noVerify = false, replace = false, json = false;
  GpuFlags gpu;
  const CLI::Option* targetsOption = nullptr;
};

// The table of what each entry is: the first thing a person checks before shipping a bundle.
void printTable(const bundle::BundleSummary& sum) {
  std::printf("\n%-28s %-18s %-9s %-11s %s\n", "kernel", "target", "time", "what", "config");
  for (const auto& r : sum.rows) {
    std::string target = r.target + (r.target == "host" ? "/" + r.arch + "/" + std::to_string(r.units) + "t" : "");
    std::string what = r.kind == "nearest" ? "nearest " + r.tunedShape : r.kind == "default" ? "DEFAULT" : r.kind;
    std::string time = r.timeUs > 0 ? fmtTime(r.timeUs) : "-";
    if (r.kind == "estimated") time += "*";
    std::printf("%-28s %-18s %-9s %-11s %s\n", r.name.c_str(), target.c_str(), time.c_str(), what.c_str(), r.config.c_str());
  }
  std::printf("(tuned: this key's measured winner; estimated*: predicted by the model, not measured; nearest S: the\n"
              " config tuned at shape S, legal here; DEFAULT: the space's default, untuned)\n");
}

void bundleCommand(const BundleFlags& f) {
  loadGpuFacts(f.gpu);
  if (f.out.empty()) fail("give the output folder: --out DIR", kExitBadInput);
  bundle::BundleSettings s;
  s.outDir = f.out;
  s.tesseraVersion = TESSERA_VERSION;
  s.verify = !f.noVerify;
  s.replace = f.replace;
  if (f.missing == "default") s.resolve.missing = bundle::MissingPolicy::Default;
  else if (f.missing == "skip") s.resolve.missing = bundle::MissingPolicy::Skip;
  else if (f.missing == "fail") s.resolve.missing = bundle::MissingPolicy::Fail;
  else fail("--missing must be fail, default or skip", kExitBadInput);
  s.resolve.reproducedOnly = f.trust == "reproduced";
  if (Status st = session::checkThreads(f.threads); !st.ok()) fail(st.error().message, kExitBadInput);
  if (f.hostCpu == "level") s.hostCpu = bundle::HostCpu::Level;
  else if (f.hostCpu == "native") s.hostCpu = bundle::HostCpu::Native;
  else fail("--host-cpu must be level or native", kExitBadInput);
  // --gpu alone bundles for those GPUs (their records: an L4's winners, not an RTX 4090's); with
  // --targets, they come after its targets.
  const bool onlyGpus = !f.gpu.gpus.empty() && !(f.targetsOption && f.targetsOption->count());
  for (const auto& name : onlyGpus ? std::vector<std::string>{} : split(f.targets, ',')) {
    std::string n(trim(name));
    if (n.empty()) continue;
    auto t = bundle::parseBundleTarget(n);
    if (!t.ok()) failWith(t.error());
    s.targets.push_back(*t);
  }
  for (const auto& g : f.gpu.gpus) {
    auto t = session::targetWithGpu("", {g}, kAllCores);
    if (!t.ok()) failWith(t.error());
    s.targets.push_back(*t);
  }
  // One bundle holds one code set per chip (its runtime picks by the device's architecture).
  for (size_t i = 0; i < s.targets.size(); ++i)
    for (size_t j = i + 1; j < s.targets.size(); ++j)
      if (s.targets[i].isGpu() && s.targets[i].name == s.targets[j].name)
        fail("the " + s.targets[i].model + " and the " + s.targets[j].model + " are both " + s.targets[i].name +
                 ": a bundle holds one " + s.targets[i].name + " code set; bundle them separately",
             kExitBadInput);
  if (s.targets.empty()) fail("--targets lists no target", kExitBadInput);

  std::vector<bundle::KernelRequest> kernels;
  for (const auto& path : f.specFiles) {
    auto list = readKernelList(path);
    if (!list.ok()) failWith(list.error());
    for (const auto& e : *list) {
      auto k = kernelOf(e);
      if (!k.ok()) failWith(k.error());
      // A line's --threads, else the command's: the host key's thread count.
      kernels.push_back({std::move(*k), e.where, e.threads != kAllCores ? e.threads : f.threads});
    }
  }
  for (const auto& path : f.irFiles) {
    KernelFlags kf;
    kf.family = "file";
    kf.file = path;
    auto k = buildKernel(kf);
    if (!k.ok()) failWith(k.error());
    kernels.push_back({std::move(*k), path, f.threads});
  }
  for (const auto& path : f.dispatchFiles) {
    auto rule = bundle::readRangeRuleFile(path);
    if (!rule.ok()) failWith(rule.error());
    s.dispatch.push_back(std::move(*rule));
  }
  if (kernels.empty() && !f.allWinners && s.dispatch.empty())
    fail("nothing to bundle: give --kernels FILE, --ir FILE, --dispatch RULE or --all-winners", kExitBadInput);

  // Read-only use of the store: a missing file is not created.
  std::unique_ptr<cache::RecordStore> store;
  if (fs::exists(f.db)) {
    auto st = cache::openSqliteStore(f.db);
    if (!st.ok()) failWith(st.error());
    store = std::move(*st);
  } else {
    std::fprintf(stderr, "tessera: warning: no store at %s\n", f.db.c_str());
  }
  cache::CacheClient client(clientOptions(f.cache));
  requireCacheAccess(client, "read", "bundle reads the shared winners");
  if (f.allWinners) {
    // With a shared cache, its winners count too; the texts of their kernels are filed in the
    // store's kernel table (a store in memory when there is no file: nothing is created).
    std::unique_ptr<cache::RecordStore> scratch;
    if (!store && client.enabled()) scratch = cache::makeMemoryStore();
    if (!store && !scratch) fail("--all-winners needs a store (--db) or a shared cache (--cache)", kExitBadInput);
    auto w = bundle::kernelsFromWinners(store ? *store : *scratch, s.targets, &client);
    if (!w.ok()) failWith(w.error());
    if (!w->warning.empty()) std::fprintf(stderr, "tessera: warning: %s\n", w->warning.c_str());
    for (auto& k : w->kernels) kernels.push_back(std::move(k));
    for (const auto& n : w->notRebuilt)
      std::fprintf(stderr, "tessera: warning: winner %s cannot be rebuilt (no text of its kernel in the store%s); list it with --kernels or --ir\n",
                   n.c_str(), client.enabled() ? " or the shared cache" : "");
    if (kernels.empty()) fail("no winner could be rebuilt for these targets", kExitNotFound);
  }
  bundle::RecordSources src;
  src.store = store.get();
  src.storeName = f.db;
  src.client = &client;
  measure::ProvenanceInputs pi;
  pi.tesseraVersion = TESSERA_VERSION;
  pi.llvmVersion = "22";
  src.current = measure::provenanceFor(hostTarget(), pi);

  bundle::BundleCallbacks cb;
  cb.onProgress = [&](const std::string& m) {
    if (!f.json) std::printf("  %s\n", m.c_str());
  };
  cb.onWarning = [](const std::string& m) { std::fprintf(stderr, "tessera: warning: %s\n", m.c_str()); };
  if (!f.json) std::printf("bundling %zu kernel%s for %s into %s\n", kernels.size(), kernels.size() == 1 ? "" : "s",
                           f.targets.c_str(), f.out.c_str());
  auto sum = bundle::writeBundle(kernels, s, src, cb);
  if (!sum.ok()) failWith(sum.error());
  if (f.json) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& r : sum->rows)
      rows.push_back({{"kernel", r.name}, {"target", r.target}, {"arch", r.arch}, {"units", r.units}, {"kind", r.kind},
                      {"config", r.config}, {"tuned_shape", r.tunedShape}, {"time_us", r.timeUs}, {"from", r.from}});
    nlohmann::json j = {{"dir", sum->dir},         {"entries", sum->entries}, {"exact", sum->exact},
                        {"nearest", sum->nearest}, {"untuned", sum->untuned}, {"estimated", sum->estimated},
                        {"skipped", sum->skipped}, {"link_flags", sum->link_flags}, {"rows", rows}};
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  printTable(*sum);
  std::printf("\nwrote %s: %d kernel%s (%d tuned at their shape, %d with a nearby shape's config, %d untuned defaults",
              sum->dir.c_str(), sum->entries, sum->entries == 1 ? "" : "s", sum->exact, sum->nearest, sum->untuned);
  if (sum->estimated) std::printf(", %d with ESTIMATED times", sum->estimated);
  std::printf(")%s\n", sum->skipped.empty() ? "" : ("; " + std::to_string(sum->skipped.size()) + " left out").c_str());
  std::printf("build:  make -C %s        (libtessera_bundle.a)\n", sum->dir.c_str());
  std::printf("use:    cc app.c -I%s %s/libtessera_bundle.a %s   (API: %s/tessera_bundle.h; flags also in %s/link.flags)\n",
              sum->dir.c_str(), sum->dir.c_str(), sum->link_flags.c_str(), sum->dir.c_str(), sum->dir.c_str());
}

}  // namespace

void addBundleCommand(CLI::App& app) {
  auto f = std::make_shared<BundleFlags>();
  auto* b = app.add_subcommand("bundle",
                               "compile tuned kernels ahead of time into a folder with a C runtime, a kernel table and a manifest");
  b->add_option("-o,--out", f->out, "output folder (created; an existing bundle needs --replace)");
  f->targetsOption = b->add_option("--targets", f->targets, "comma-separated: host, x86-64-v3, x86-64-v4, sm_80, sm_90, gfx942, ...")
      ->capture_default_str();
  addGpuFlags(b, &f->gpu, true);
  b->add_option("--kernels", f->specFiles, "file with one kernel per line, e.g. 'gemm --m 1024 --n 1024 --k 1024'");
  b->add_option("--ir", f->irFiles, "kernel files in the IR text form");
  b->add_option("--dispatch", f->dispatchFiles,
                "a dispatch rule from `tessera tune ... --m/--rows/--seq LO..HI` (its shape-generic kernels and buckets)");
  b->add_flag("--all-winners", f->allWinners, "every winner of the store for the targets");
  b->add_option("--db", f->db, "local SQLite store the winners come from")->capture_default_str();
  addCacheFlags(b, &f->cache);
  addThreadsOption(b, &f->threads);
  b->add_option("--missing", f->missing,
                "no tuned config for a kernel (nor a legal one of a nearby shape): fail (name every such entry, write "
                "nothing) | default (compile the space's default, labelled untuned) | skip")
      ->capture_default_str();
  b->add_option("--trust", f->trust,
                "any: the best record of the highest tier there is, a claim labelled as one; reproduced: never a "
                "claim (one token's word)")
      ->check(CLI::IsMember({"any", "reproduced"}))
      ->capture_default_str();
  b->add_option("--host-cpu", f->hostCpu,
                "host objects for the key's ISA level (level: any CPU of that level) or exactly this CPU (native)")
      ->capture_default_str();
  b->add_flag("--no-verify", f->noVerify, "do not run host kernels against the reference before bundling them");
  b->add_flag("--replace", f->replace, "replace an existing bundle folder");
  b->add_flag("--json", f->json, "machine-readable summary");
  b->callback([f] { bundleCommand(*f); });
}

}  // namespace tessera::cli
