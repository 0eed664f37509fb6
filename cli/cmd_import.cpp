// Owns `tessera import kerneltuner FILE [--db PATH] [--target NAME]`: a Kernel Tuner cache file
// (brute-forced GPU space) becomes records in the local store, so replay and the cost model can
// use it. Idempotent: the store keeps one copy of identical records.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "support/si_format.h"
#include "store/record_json.h"
#include "store/store.h"
#include "cli/commands.h"
#include "search/import.h"
#include "support/strings.h"

namespace tessera::cli {
namespace {

struct ImportArgs {
  std::string file, db = "tessera.db", target;
  bool json = false;
};

void runKernelTunerImport(const ImportArgs& a) {
  auto recs = search::importKernelTuner(a.file, a.target);
  // A file that is not one (or is too big, or does not parse) is bad input: exit 2.
  if (!recs.ok()) fail(recs.error().message, recs.error().code == ErrorCode::IOError ? 1 : 2);
  if (recs->empty()) fail(a.file + " holds no measured configurations", 2);
  auto store = cache::openSqliteStore(a.db);
  if (!store.ok()) fail("cannot open " + a.db + ": " + store.error().message);
  auto res = (*store)->put(*recs);
  if (!res.ok()) fail("import into " + a.db + " failed: " + res.error().message);

  size_t fresh = 0, dup = 0, ok = 0;
  std::set<std::string> keys;
  for (size_t i = 0; i < res->size(); ++i) {
    (*res)[i].duplicate ? ++dup : ++fresh;
    if ((*recs)[i].status == cache::RecordStatus::Ok) ++ok;
    keys.insert((*res)[i].key_id);
  }
  const cache::Record& r0 = recs->front();
  if (a.json) {
    nlohmann::json j = {{"file", a.file}, {"db", a.db}, {"records", recs->size()}, {"new", fresh},
                        {"already_present", dup}, {"ok", ok}, {"failed", recs->size() - ok},
                        {"key", cache::hardKeyToJson(r0.key)}, {"best", nlohmann::json::array()}};
    for (const auto& k : keys) {
      auto best = (*store)->best(k);
      if (best.ok() && *best)
        j["best"].push_back({{"key_id", k}, {"median_us", (*best)->record.median_us}, {"config", (*best)->record.config}});
    }
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf("imported %s: %zu records (%zu new, %zu already present; %zu ok, %zu failed) into %s\n",
              a.file.c_str(), recs->size(), fresh, dup, ok, recs->size() - ok, a.db.c_str());
  std::printf("  kernel %s, problem %s, dtype %s, target %s\n", r0.key.family.c_str(),
              cache::formatShape(r0.key.shape).c_str(), r0.key.dtype.c_str(), r0.key.target.c_str());
  for (const auto& k : keys) {
    auto best = (*store)->best(k);
    if (best.ok() && *best)
      std::printf("  key %s: best %s with %s\n", k.c_str(), formatMicros((*best)->record.median_us).c_str(),
                  (*best)->record.config.c_str());
  }
}

}  // namespace

void addImportCommand(CLI::App& app) {
  auto* imp = app.add_subcommand("import", "import measurements from other tuners into the store");
  imp->require_subcommand(1);
  auto args = std::make_shared<ImportArgs>();
  auto* kt = imp->add_subcommand("kerneltuner", "import a Kernel Tuner cache file (.json or .json.gz)");
  kt->add_option("FILE", args->file, "Kernel Tuner cache file")->required();
  kt->add_option("--db", args->db, "SQLite store")->capture_default_str();
  kt->add_option("--target", args->target, "device name (required when the file's device_name is empty)");
  addJsonFlag(kt, args->json);
  kt->callback([args] { runKernelTunerImport(*args); });
}

}  // namespace tessera::cli
