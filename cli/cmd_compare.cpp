// Owns `tessera compare`: one kernel's winners on several targets side by side (NVIDIA and AMD
// tile choices, the host too): measured, else estimated (labelled), with resources, occupancy,
// time, throughput, share of peak, the model's bound, and why the choices differ. `--tune N`
// first tunes what is missing (on an attached device or the host) or estimates it (a GPU that is
// not here).
#include <cstdio>
#include <set>

#include "client/client.h"
#include "store/kernel_list.h"
#include "store/store.h"
#include "cli/commands.h"
#include "cli/compare_view.h"
#include "cli/gpu_flags.h"
#include "cli/kernel_flags.h"
#include "cli/report.h"
#include "cli/tune_common.h"
#include "session/tune_request.h"
#include "costmodel/gpu_model.h"
#include "ir/families.h"
#include "ir/text.h"
#include "ir/verifier.h"
#include "search/compare.h"
#include "session/tune_session.h"
#include "session/verify_hit.h"
#include "support/strings.h"

namespace tessera::cli {

namespace {

struct CompareFlags {
  KernelFlags kernel;
  std::string stored;  // `key HASH`: a stored kernel's key_id or workload hash, or a prefix of one
  std::string targets = "sm_90,gfx942", db = "tessera.db";
  CacheFlags cache;
  int tune = 0, threads = kAllCores;
  bool json = false;
  GpuFlags gpu;
  const CLI::Option* targetsOption = nullptr;
};

// `text` in lines of at most `width`, each ending after a ',' or a ' ' where one is in reach (a
// token longer than the width is cut).
std::vector<std::string> wrapAtTokens(const std::string& text, size_t width) {
  std::vector<std::string> out;
  size_t at = 0;
  while (text.size() - at > width) {
    size_t cut = width;
    for (size_t i = width; i > 0; --i)
      if (text[at + i - 1] == ',' || text[at + i - 1] == ' ') {
        cut = i;
        break;
      }
    out.push_back(text.substr(at, cut));
    at += cut;
  }
  if (at < text.size() || out.empty()) out.push_back(text.substr(at));
  return out;
}

// Tunes (device or host) or estimates (a GPU not attached here) what has no record yet, into the
// store and the shared cache the comparison reads (its access was checked for writing).
void fillMissing(const ir::Kernel& k, const TargetDesc& t, cache::RecordStore& store, const CompareFlags& f, bool json) {
  session::TuneRequest rq;
  rq.kernel = k;
  rq.target = t;
  rq.estimateWithoutDevice = true;
  rq.deviceProduct = false;  // the row shown is the target's
  rq.trials = f.tune;
  rq.store = &store;
  rq.cache = clientOptions(f.cache);
  rq.checkAccess = false;
  rq.provenance = provenanceInputs();
  rq.callbacks.onWarning = [](const std::string& w) { std::fprintf(stderr, "tessera: warning: %s\n", w.c_str()); };
  auto open = session::openTune(std::move(rq));
  if (!open.ok()) failWith(open.error());
  session::OpenTune& tune = **open;
  if (!json)
    std::fprintf(stderr, "%s %s on %s: %d trials (%s)\n", tune.measure().estimated ? "estimating" : "tuning", k.name.c_str(),
                 t.name.c_str(), tune.trials(), tune.measure().where.c_str());
  auto r = tune.run();
  if (!r.ok()) failWith(r.error());
  if (r->outcome == session::SessionResult::Outcome::NothingCorrect) {
    std::string why;
    for (const auto& [s, n] : r->statusCounts) why += " " + s + "=" + std::to_string(n);
    std::fprintf(stderr, "tessera: warning: %s: no candidate produced a correct result (%d trials:%s)\n", t.name.c_str(),
                 int(r->tune.trials.size()), why.c_str());
  }
}

// `compare ... key HASH`: the kernel of a stored key, given by its key_id or its workload hash (or a
// unique prefix of 6+ hex digits of either, among the store's keys and its kernel table), compiled
// from its text in the kernel table, any family (fused chains, GEMM epilogues). Without a text here, the shared cache's, checked against the hash
// by the client and filed in the store. The text is parsed, verified and hashed again: only the
// kernel the hash names comes back.
Expected<ir::Kernel> storedKernel(cache::RecordStore& store, cache::CacheClient& client, const std::string& given) {
  const bool hex = given.size() >= 6 && given.size() <= 64 && given.find_first_not_of("0123456789abcdef") == std::string::npos;
  if (!hex)
    return makeError(ErrorCode::InvalidArgument, "key " + given + ": expected a key_id or workload hash, or a prefix of at least 6 of its hex digits");
  cache::KernelQuery q;
  q.words = {given};
  q.limit = cache::kMaxKernelPage;
  TESSERA_ASSIGN(cache::KernelPage page, store.kernels(q));
  std::set<std::string> workloads;
  for (const auto& row : page.rows)
    if (row.key_id.rfind(given, 0) == 0 || row.key.workload.rfind(given, 0) == 0) workloads.insert(row.key.workload);
  // The kernel table too: a store may hold texts of kernels it has no records of (what
  // `bundle --all-winners --cache` or `best` leave behind); two are enough to call it ambiguous.
  TESSERA_ASSIGN(auto texts, store.kernelTextWorkloads(given, 2));
  workloads.insert(texts.begin(), texts.end());
  // A key this store has never seen (tuned on another machine, `tune --cache`): the shared cache's
  // kernel table resolves a key_id or a workload hash, full or a prefix, the same way.
  if (workloads.empty() && client.enabled()) {
    // A whole workload hash needs no search (its text is fetched by it below), so a service that
    // cannot search (an older one, a proxy) does not stop it.
    auto found = client.findKeys(given, 100);
    if (!found.ok() && found.error().code != ErrorCode::NotFound && given.size() != 64) return found.takeError();
    if (found.ok())
      for (const auto& m : *found)
        if (m.key_id.rfind(given, 0) == 0 || m.key.workload.rfind(given, 0) == 0) workloads.insert(m.key.workload);
  }
  if (workloads.empty() && given.size() == 64) workloads.insert(given);  // a workload hash this store has no key of
  if (workloads.empty())
    return makeError(ErrorCode::NotFound, "key " + given + ": no kernel in the store" +
                                              (client.enabled() ? std::string(" or the shared cache") : std::string()) +
                                              " has that key_id or workload hash");
  if (workloads.size() > 1)
    return makeError(ErrorCode::InvalidArgument, "key " + given + ": " + std::to_string(workloads.size()) + " kernels match; give more digits");
  const std::string w = *workloads.begin();
  TESSERA_ASSIGN(auto text, store.kernelText(w));
  if (!text && client.enabled()) {
    auto fetched = client.kernelText(w);
    if (!fetched.ok()) return fetched.takeError();
    text = std::move(*fetched);
    if (text) (void)store.putKernelText(w, *text);  // kept for next time; the comparison goes on either way
  }
  if (!text)
    return makeError(ErrorCode::NotFound, "key " + given + ": no text of kernel " + w.substr(0, 12) + " in the store" +
                                              (client.enabled() ? " or the shared cache" : "") +
                                              ": give the kernel by its family's flags or an IR file");
  return kernelFromText(w, *text);
}

void compareCommand(const CompareFlags& f) {
  loadGpuFacts(f.gpu);
  const bool stored = f.kernel.family == "key";
  auto k = stored ? Expected<ir::Kernel>(makeError(ErrorCode::Internal, "not yet")) : buildKernel(f.kernel);
  if (!stored && !k.ok()) failWith(k.error());
  std::vector<TargetDesc> targets;
  bool host = false;
  // --gpu alone compares those GPUs; with --targets, they come after its targets.
  const bool onlyGpus = !f.gpu.gpus.empty() && !(f.targetsOption && f.targetsOption->count());
  for (const auto& name : onlyGpus ? std::vector<std::string>{} : split(f.targets, ',')) {
    std::string n(trim(name));
    if (n.empty()) continue;
    // --threads is the host column's key (its units), as in tune and best.
    auto t = n == "host" ? session::targetFor(n, f.threads) : getTarget(n);
    if (!t.ok()) failWith(t.error());
    host = host || !t->isGpu();
    targets.push_back(*t);
  }
  for (const auto& g : f.gpu.gpus) {
    auto t = session::targetWithGpu("", {g}, kAllCores);
    if (!t.ok()) failWith(t.error());
    targets.push_back(*t);
  }
  if (targets.empty()) fail("--targets needs at least one target (e.g. sm_90,gfx942,host)", kExitBadInput);
  if (f.threads != kAllCores && !host) fail("--threads applies to the host target only: add host to --targets", kExitBadInput);
  if (f.tune < 0) fail("--tune must be at least 0", kExitBadInput);
  auto store = cache::openSqliteStore(f.db);
  if (!store.ok()) failWith(store.error());
  cache::CacheClient client(clientOptions(f.cache));
  requireCacheAccess(client, f.tune > 0 ? "write" : "read",
                     f.tune > 0 ? "compare --tune shares what it tunes" : "compare reads the shared winners");
  if (stored) {
    k = storedKernel(**store, client, f.stored);
    if (!k.ok()) failWith(k.error());
  }
  cache::Provenance prov = measure::provenanceFor(targets.front(), provenanceInputs());
  auto cmp = search::compareTargets(*k, targets, store->get(), &client, prov);
  if (!cmp.ok()) failWith(cmp.error());
  if (f.tune > 0) {
    bool filled = false;
    for (const auto& row : cmp->rows)
      if (row.source == search::CompareRow::Source::None) {
        fillMissing(*k, row.target, **store, f, f.json);
        filled = true;
      }
    if (filled) cmp = search::compareTargets(*k, targets, store->get(), &client, prov);
    if (!cmp.ok()) failWith(cmp.error());
  }
  const std::vector<std::string>& attrs = compareAttributes();
  if (f.json) {
    std::printf("%s\n", compareJson(*cmp, *k).dump(2).c_str());
    return;
  }
  // Side by side: one column per target.
  std::printf("%s\n\n", cmp->kernel.c_str());
  const int w0 = 18, w = 44;
  std::printf("%-*s", w0, "");
  for (const auto& r : cmp->rows) std::printf(" %-*s", w, targetLabel(r.target).substr(0, w).c_str());
  std::printf("\n");
  for (const auto& a : attrs) {
    std::vector<std::string> cells;
    bool any = false;
    for (const auto& r : cmp->rows) {
      cells.push_back(compareCell(r, a, *k));
      any |= !cells.back().empty();
    }
    if (!any) continue;
    // A value longer than its column continues on the next lines of that column, broken after a
    // comma or a space (a config's knob=value pairs stay whole).
    std::vector<std::vector<std::string>> wrapped;
    size_t lines = 1;
    for (const auto& c : cells) {
      wrapped.push_back(wrapAtTokens(c, size_t(w)));
      lines = std::max(lines, wrapped.back().size());
    }
    for (size_t l = 0; l < lines; ++l) {
      std::printf("%-*s", w0, l == 0 ? a.c_str() : "");
      for (const auto& c : wrapped) std::printf(" %-*s", w, l < c.size() ? c[l].c_str() : "");
      std::printf("\n");
    }
  }
  for (const auto& r : cmp->rows)
    if (!r.note.empty()) std::printf("\n%s: %s", targetLabel(r.target).c_str(), r.note.c_str());
  if (!cmp->why.empty()) {
    std::printf("\n\nwhy they differ\n");
    for (const auto& y : cmp->why) std::printf("  - %s\n", y.c_str());
  } else {
    std::printf("\n");
  }
}

}  // namespace

void addCompareCommand(CLI::App& app) {
  auto f = std::make_shared<CompareFlags>();
  auto* c = app.add_subcommand("compare", "one kernel's winners on several targets side by side (measured, else estimated)");
  f->targetsOption =
      c->add_option("--targets", f->targets, "comma-separated targets or GPU names, e.g. sm_90,gfx942,host")->capture_default_str();
  addGpuFlags(c, &f->gpu, true);
  c->add_option("--db", f->db, "local SQLite store")->capture_default_str();
  addCacheFlags(c, &f->cache);
  addThreadsOption(c, &f->threads);
  c->add_option("--tune", f->tune,
                "first tune what is missing with N trials (a GPU not attached here: estimate its space's top N)");
  c->add_flag("--json", f->json, "machine-readable output");
  addKernelSubcommands(c, &f->kernel, [f] { compareCommand(*f); });
  auto* key = c->add_subcommand("key", "a stored kernel, by its key_id or workload hash (or a unique prefix of 6+ hex digits), from the kernel table");
  key->add_option("hash", f->stored, "key_id or workload hash, as the dashboard and `tessera cache` show them")->required();
  key->fallthrough();
  key->callback([f] {
    f->kernel.family = "key";
    compareCommand(*f);
  });
}

}  // namespace tessera::cli
