// Owns writing a bundle (see bundle.h): per (kernel, target) the first candidate config that
// compiles (and, on the host, passes the reference check here), then the folder, written under a
// temporary name and renamed into place.
#include "bundle/bundle.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "bundle/dispatch_bundle.h"
#include "bundle/runtime_embed.h"
#include "bundle/table.h"
#include "codegen/codegen.h"
#include "codegen/gpu.h"
#include "ir/families.h"
#include "ir/text.h"
#include "measure/protocol_measurer.h"
#include "measure/records.h"
#include "search/space.h"
#include "measure/trial.h"
#include "support/si_format.h"

namespace tessera::bundle {

namespace fs = std::filesystem;
using nlohmann::json;

const char* llvmVersion() { return TESSERA_LLVM_VERSION; }

Expected<TargetDesc> parseBundleTarget(const std::string& name) {
  if (name.rfind("x86-64", 0) == 0) return hostTargetAs(name);
  return getTarget(name);
}

namespace {

// One compiled entry: its table row, manifest object and files (relative path -> bytes).
struct Built {
  TableEntry row;
  json manifest;
  std::vector<std::pair<std::string, std::string>> files;
};

std::string micros(double us) { return formatMicros(us); }

std::string sanitize(const std::string& s) {
  std::string o;
  for (char c : s) o += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return o;
}

// How a candidate's time is labelled everywhere: a measurement, an estimate, or nothing.
void describeTime(const Candidate& c, TableEntry& row, json& m) {
  json t = {{"kind", "none"}};
  if (c.record) {
    const cache::Record& r = *c.record;
    bool est = r.status == cache::RecordStatus::Estimated;
    row.timeKind = est ? "estimated" : "measured";
    row.timeUs = r.median_us;
    t = {{"kind", row.timeKind}, {"median_us", r.median_us}, {"at_shape", cache::formatShape(r.key.shape)},
         {"gflops", r.gflops}, {"gbps", r.gbps}, {"peak_fraction", r.peak_fraction}};
    if (est) {
      row.estimator = r.estimator;
      row.bound = r.bound;
      t["estimator"] = r.estimator;
      t["bound"] = r.bound;
      t["label"] = "ESTIMATED by " + r.estimator + " (" + r.bound + "-bound), not measured";
    } else {
      t["p20_us"] = r.p20_us;
      t["p80_us"] = r.p80_us;
      t["n"] = r.n;
      t["remeasured"] = r.remeasured;
      t["trust"] = std::string(cache::trustName(r.trust));
      t["tier"] = std::string(cache::tierName(cache::tierOf(r.trust, false)));
      t["label"] = std::string("measured") + (r.remeasured ? " (the tuning run's re-measured winner)" : "") +
                   (cache::isConfirmed(r.trust) ? "" : "; a claim of " + (r.writer.empty() ? std::string("an unnamed writer")
                                                                                            : "token " + r.writer) +
                                                         " nobody else confirmed");
    }
  }
  m["time"] = t;
}

json recordJson(const Candidate& c) {
  if (!c.record) return nullptr;
  const cache::Record& r = *c.record;
  const cache::Provenance& p = r.provenance;
  return {{"key_id", r.key_id},
          {"id", r.id},
          {"from", c.from},
          {"status", std::string(cache::recordStatusName(r.status))},
          {"trust", std::string(cache::trustName(r.trust))},
          {"writer", r.writer},
          {"stale", r.stale},
          {"trials", r.trials},
          {"tuning_seconds", r.tuning_seconds},
          {"key", {{"family", r.key.family}, {"workload", r.key.workload}, {"shape", r.key.shape},
                   {"dtype", r.key.dtype}, {"layout", r.key.layout}, {"target", r.key.target},
                   {"arch", r.key.arch}, {"units", r.key.units}}},
          {"provenance", {{"tessera_version", p.tessera_version}, {"llvm_version", p.llvm_version},
                          {"cuda_version", p.cuda_version}, {"cpu_model", p.cpu_model}, {"host", p.host},
                          {"user", p.user}, {"created_at", p.created_at}}}};
}

// The row and manifest fields every target shares.
Built common(const ir::Kernel& k, const TargetDesc& t, const Candidate& c, const std::string& name) {
  Built b;
  const cache::HardKey key = measure::hardKeyFor(k, t);
  TableEntry& row = b.row;
  row.name = name;
  row.family = key.family;
  row.shape = cache::formatShape(key.shape);
  row.dims = key.shape;
  row.dtype = key.dtype;
  row.target = t.name;
  row.arch = t.arch;
  row.vendor = vendorName(t.vendor);
  row.config = c.config.toJson();
  row.source = c.source;
  row.tunedShape = c.record ? cache::formatShape(c.record->key.shape) : "";
  json tensors = json::array();
  auto add = [&](const ir::TensorDecl* d, bool out) {
    row.tensors.push_back({d->name, std::string(ir::typeName(d->dtype)), int(ir::byteSize(d->dtype)), out, d->shape});
    tensors.push_back({{"name", d->name}, {"dtype", ir::typeName(d->dtype)}, {"shape", d->shape},
                       {"role", out ? "output" : "input"}});
  };
  for (const auto* d : k.inputs()) add(d, false);
  for (const auto* d : k.outputs()) add(d, true);
  row.numInputs = int(k.inputs().size());
  row.numOutputs = int(k.outputs().size());
  b.manifest = {{"name", name},
                {"family", key.family},
                {"target", t.name},
                {"arch", t.arch},
                {"vendor", row.vendor},
                {"shape", row.shape},
                {"dtype", key.dtype},
                {"layout", key.layout},
                {"key_id", cache::keyIdOf(key)},
                {"workload", key.workload},
                {"units", key.units},
                {"tensors", tensors},
                {"config", json::parse(row.config)},
                {"source", c.source},
                {"tuned_shape", row.tunedShape},
                {"distance", c.distance},
                {"record", recordJson(c)},
                {"kernel_ir", ir::printKernel(k)}};
  describeTime(c, row, b.manifest);
  return b;
}

// A tuned winner's time against its re-timing here (issue 25): a claim nobody confirmed (a
// worker's or another machine's word) whose time this machine contradicts (cache::contradicts,
// twice when the first re-timing does) is refused: the bundle says so and takes the next
// candidate. A confirmed or vouched winner (this machine's own tune, an admin's pin, two identities
// that agree) keeps its time; it may run slower here on a busy or another CPU without lying.
Status claimAgrees(const Candidate& c, measure::Measurer* m, measure::TrialResult& here) {
  if (!c.record || c.source != "exact" || c.record->status != cache::RecordStatus::Ok) return {};
  const cache::Record& rec = *c.record;
  if (cache::isConfirmed(rec.trust)) return {};
  if (cache::contradicts(rec.median_us, here.samples.median_us)) {
    TESSERA_ASSIGN(std::vector<measure::TrialResult> timed, m->measure({c.config}));
    const measure::TrialResult& again = timed.front();
    if (again.ok() && again.samples.median_us < here.samples.median_us) here = again;
  }
  if (!cache::contradicts(rec.median_us, here.samples.median_us)) return {};
  return makeError(ErrorCode::WrongResult,
                   "refused: it claims " + micros(rec.median_us) + " (a claim of " +
                       (rec.writer.empty() ? std::string("an unnamed writer") : "token " + rec.writer) +
                       " nobody confirmed) and was re-timed here at " + micros(here.samples.median_us) +
                       ", more than the noise allows (2.25x)");
}

Expected<Built> buildHost(const ir::Kernel& k, const TargetDesc& t, const Candidate& c, const BundleSettings& s,
                          const std::string& name, const std::string& symbol) {
  codegen::CompileOptions o;
  // The key's ISA level unless the caller wants this very CPU (and this CPU is of that level).
  const bool native = s.hostCpu == HostCpu::Native && t.arch == hostTarget().arch;
  o.cpu = native ? "" : t.arch;
  o.symbol = symbol;
  TESSERA_ASSIGN(std::string obj, codegen::emitHost(k, c.config, t, codegen::Emit::Object, o));
  Built b = common(k, t, c, name);
  b.row.hostSymbol = symbol;
  b.manifest["symbol"] = symbol;
  b.manifest["cpu"] = native ? "native (" + hostTarget().model + ")" : t.arch;
  b.manifest["files"] = {{"object", "host/" + symbol + ".o"}};
  b.files.push_back({"host/" + symbol + ".o", std::move(obj)});
  json check = {{"kind", "none"}};
  if (s.verify) {
    // The config at this shape, JIT-compiled from the same lowering for this CPU, run in a forked
    // child against the reference: what a nearest config or an untuned default must pass.
    measure::MeasureSettings ms;
    ms.timeoutSec = s.verifyTimeoutSec;
    ms.measure.minTimeSec = 0.02;
    ms.measure.minRuns = 3;
    auto m = measure::makeHostMeasurer(k, t, ms);
    TESSERA_ASSIGN(std::vector<measure::TrialResult> checked, m->measure({c.config}));
    measure::TrialResult r = checked.front();
    if (!r.ok())
      return makeError(ErrorCode::WrongResult, std::string("reference check here: ") +
                                                   measure::trialStatusName(r.status) +
                                                   (r.message.empty() ? "" : ": " + r.message));
    check = {{"kind", "reference"}, {"ok", true}, {"max_abs_err", r.maxAbsErr}, {"max_rel_err", r.maxRelErr},
             {"median_us_here", r.samples.median_us},
             {"how", "JIT of the same lowering for this CPU, forked child, outputs vs the reference evaluator"}};
    if (Status agreed = claimAgrees(c, m.get(), r); !agreed.ok()) return agreed.takeError();
    if (c.record && c.source == "exact" && !cache::isConfirmed(c.record->trust)) check["claim_retimed_us"] = r.samples.median_us;
  }
  b.manifest["check"] = check;
  return b;
}

Expected<Built> buildGpu(const ir::Kernel& k, const TargetDesc& t, const Candidate& c, const std::string& name) {
  TESSERA_ASSIGN(codegen::GpuBinary bin, codegen::compileGpu(k, c.config, t));
  if (!bin.resources.ok) {
    std::string why;
    for (const auto& p : bin.resources.problems) why += (why.empty() ? "" : "; ") + p;
    return makeError(ErrorCode::InvalidConfig, "resources over " + t.name + "'s limits: " + why);
  }
  if (bin.binary.empty()) return makeError(ErrorCode::CompileError, "no code object was produced for " + t.name);
  Built b = common(k, t, c, name);
  const std::string base = "gpu/" + sanitize(name) + "." + t.arch;
  b.row.launch = bin.launch;
  b.row.binary = bin.binary;
  json files;
  if (t.vendor == Vendor::Nvidia) {
    std::string ptx = bin.assembly;
    while (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
    b.row.ptx = ptx;
    // sm_90a-style targets use arch-specific instructions: their PTX cannot be JIT-compiled for
    // newer devices.
    b.row.ptxPortable = !t.arch.empty() && t.arch.back() != 'a';
    b.files.push_back({base + ".cubin", bin.binary});
    b.files.push_back({base + ".ptx", ptx});
    files = {{"cubin", base + ".cubin"}, {"ptx", base + ".ptx"}, {"ptx_portable", b.row.ptxPortable}};
  } else {
    b.files.push_back({base + ".hsaco", bin.binary});
    files = {{"hsaco", base + ".hsaco"}};
  }
  b.manifest["files"] = files;
  b.manifest["strategy"] = bin.strategy;
  b.manifest["launch"] = bin.launch.str();
  b.manifest["resources"] = bin.resources.summary();
  b.manifest["check"] = {{"kind", "compile"},
                         {"how", std::string(t.words().deviceCompiler) +
                                     " and resource limits; not run (no device when the bundle was built)"}};
  return b;
}

// The flags a program linking the bundle needs. Host kernels tuned with THREADS > 1 call the
// OpenMP runtime's __kmpc_* entry points (LLVM's ABI, which GCC's libgomp does not provide): the
// program takes libomp.so.5 by its soname from the system's package (Debian/Ubuntu libomp5,
// Fedora libomp), never through an rpath into LLVM's folder, which a deployment machine does not
// have. The -L is for a build machine whose only libomp is LLVM's (a missing folder is ignored);
// single-threaded bundles need nothing beyond libc.
std::string linkFlags(bool openmp) {
  std::string flags = "-ldl -lpthread -lm";
  if (!openmp) return flags;
  const std::string omp = TESSERA_LIBOMP;
  if (!omp.empty()) flags += " -L" + fs::path(omp).parent_path().string();
  return flags + " -l:libomp.so.5";
}

bool usesThreads(const json& config) {
  auto it = config.find("THREADS");
  return it != config.end() && it->is_number_integer() && it->get<int64_t>() > 1;
}

std::string makefile(const std::vector<std::string>& hostObjects, const std::string& libs) {
  std::string objs;
  for (const auto& o : hostObjects) objs += " \\\n  " + o;
  return "# Generated by `tessera bundle`: builds libtessera_bundle.a (the runtime, the kernel table and\n"
         "# the host objects). Link a program with it and $(LIBS) (also in link.flags); no LLVM or MLIR\n"
         "# needed.\n"
         "CC ?= cc\nCFLAGS ?= -O2\nAR ?= ar\nLIBS = " + libs + "\n"
         "RUNTIME = tessera_runtime.o tessera_runtime_gpu.o tessera_bundle_table.o tessera_bundle_images.o\n"
         "HOST_OBJECTS =" + objs + "\n\n"
         "libtessera_bundle.a: $(RUNTIME) $(HOST_OBJECTS)\n\t$(AR) rcs $@ $^\n\n"
         "%.o: %.c tessera_bundle.h tessera_bundle_internal.h tessera_runtime_hip.inc\n\t$(CC) $(CFLAGS) -std=c11 -c $< -o $@\n\n"
         "clean:\n\trm -f $(RUNTIME) libtessera_bundle.a\n";
}

Status writeFile(const fs::path& p, const std::string& bytes) {
  std::error_code ec;
  fs::create_directories(p.parent_path(), ec);
  std::ofstream out(p, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  out.close();
  if (!out) return makeError(ErrorCode::IOError, "cannot write " + p.string());
  return {};
}

// A folder we may replace: empty, or a bundle written by us.
Status checkReplaceable(const fs::path& dir, bool replace) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return {};
  if (!fs::is_directory(dir, ec)) return makeError(ErrorCode::InvalidArgument, dir.string() + " exists and is not a folder");
  if (fs::is_empty(dir, ec)) return {};
  std::ifstream in(dir / "manifest.json");
  json m = json::parse(in, nullptr, false);
  bool ours = !m.is_discarded() && m.is_object() && m.value("format", "") == "tessera-bundle";
  if (!ours) return makeError(ErrorCode::InvalidArgument, dir.string() + " exists and is not a Tessera bundle: choose another --out");
  if (!replace) return makeError(ErrorCode::InvalidArgument, dir.string() + " already holds a bundle (--replace overwrites it)");
  return {};
}

}  // namespace

Expected<BundleSummary> writeBundle(const std::vector<KernelRequest>& kernels, const BundleSettings& s,
                                    const RecordSources& src, const BundleCallbacks& cb) {
  if (s.outDir.empty()) return makeError(ErrorCode::InvalidArgument, "no output folder");
  if (s.targets.empty()) return makeError(ErrorCode::InvalidArgument, "no targets");
  if (kernels.empty() && s.dispatch.empty()) return makeError(ErrorCode::InvalidArgument, "no kernels to bundle");
  const fs::path dir(s.outDir);
  TESSERA_TRY(checkReplaceable(dir, s.replace));
  auto progress = [&](const std::string& m) { if (cb.onProgress) cb.onProgress(m); };
  auto warn = [&](const std::string& m) { if (cb.onWarning) cb.onWarning(m); };

  BundleSummary sum;
  std::vector<Built> built;
  std::set<std::string> seenKeys, names, symbols;
  json skipped = json::array();
  // Objects for "any CPU of the key's ISA level" are compiled, and their configs chosen, for what
  // every CPU of that level has: a winner that needs more (bf16dot's avx512_bf16, AMX) is not used
  // there, and the next candidate is (bf16 on a Zen 4 made LLVM abort the process when vdpbf16ps
  // was compiled for a generic x86-64-v4). A request's thread count is its host key's units.
  auto targetOf = [&](const TargetDesc& target, const KernelRequest& req) {
    const bool levelObjects = target.vendor == Vendor::Host &&
                              !(s.hostCpu == HostCpu::Native && target.arch == hostTarget().arch);
    TargetDesc t = levelObjects ? hostAtLevel(target) : target;
    if (t.vendor == Vendor::Host && req.threads > 0) t.units = req.threads;
    return t;
  };
  // Untuned entries fail the bundle unless defaults were asked for: all of them are named at once,
  // before anything is compiled.
  if (s.resolve.missing == MissingPolicy::Fail) {
    std::vector<std::string> missing;
    std::string firstWhy;
    size_t entries = 0;
    std::set<std::string> keys;
    for (const TargetDesc& target : s.targets)
      for (const KernelRequest& req : kernels) {
        const TargetDesc t = targetOf(target, req);
        if (!keys.insert(cache::keyIdOf(measure::hardKeyFor(req.kernel, t))).second) continue;
        ++entries;
        auto cands = resolveCandidates(req.kernel, t, src, s.resolve, nullptr);
        if (!cands.ok() && cands.error().code == ErrorCode::NotFound) {
          missing.push_back(req.kernel.name + " on " + t.keyString() + " (" + req.origin + ")");
          if (firstWhy.empty()) firstWhy = cands.error().message;
        }
        else if (!cands.ok())
          return cands.takeError();
      }
    if (!missing.empty()) {
      std::string list;
      for (size_t i = 0; i < missing.size() && i < 8; ++i) list += (i ? ", " : "") + missing[i];
      if (missing.size() > 8) list += ", and " + std::to_string(missing.size() - 8) + " more";
      return makeError(ErrorCode::NotFound, std::to_string(missing.size()) + " of " + std::to_string(entries) +
                                                " entries have no tuned config: " +
                                                list + "; tune them first, or ship the space's defaults labelled "
                                                "untuned (--missing default; missing=\"default\" in Python) or leave them "
                                                "out (--missing skip). First: " + firstWhy);
    }
  }
  for (const TargetDesc& target : s.targets) {
    for (const KernelRequest& req : kernels) {
      const TargetDesc t = targetOf(target, req);
      const ir::Kernel& k = req.kernel;
      const std::string keyId = cache::keyIdOf(measure::hardKeyFor(k, t));
      if (!seenKeys.insert(keyId).second) continue;  // listed twice
      auto skip = [&](const std::string& why) {
        sum.skipped.push_back(k.name + " on " + t.name + ": " + why);
        skipped.push_back({{"kernel", k.name}, {"target", t.name}, {"origin", req.origin}, {"why", why}});
        warn(k.name + " on " + t.name + " left out: " + why);
      };
      std::vector<std::string> notes;
      auto cands = resolveCandidates(k, t, src, s.resolve, &notes);
      if (!cands.ok()) {
        if (cands.error().code == ErrorCode::NotFound) return cands.takeError();
        skip(cands.error().message);
        continue;
      }
      if (cands->empty()) {
        skip("no tuned config");
        continue;
      }
      std::string name = k.name;
      for (int i = 2; names.count(name + "@" + t.name); ++i) name = k.name + "_" + std::to_string(i);
      names.insert(name + "@" + t.name);
      std::string symbol = "tessera_" + sanitize(name) + "_" + sanitize(t.arch);
      for (int i = 2; symbols.count(symbol); ++i) symbol = "tessera_" + sanitize(name) + "_" + sanitize(t.arch) + "_" + std::to_string(i);
      symbols.insert(symbol);
      std::optional<Built> ok;
      for (const Candidate& c : *cands) {
        auto b = t.vendor == Vendor::Host ? buildHost(k, t, c, s, name, symbol) : buildGpu(k, t, c, name);
        if (b.ok()) {
          ok = std::move(*b);
          break;
        }
        notes.push_back(c.source + " config " + c.config.str() + " not used: " + b.error().message);
        warn(k.name + " on " + t.name + ": skipped " + c.source + " config " + c.config.str() + ": " + b.error().message);
        // A shared claim refuted here: the reader's refutation demotes it for every reader.
        if (c.record && src.client && src.client->enabled() && c.from == src.client->options().base_url &&
            c.record->id > 0 && !cache::isConfirmed(c.record->trust))
          if (auto d = src.client->dispute(c.record->id, b.error().message); !d.ok())
            warn("the refutation of record " + std::to_string(c.record->id) + " was not recorded: " + d.error().message);
        if (s.resolve.missing == MissingPolicy::Fail && c.source == "default")
          return makeError(b.error().code, k.name + " on " + t.name + ": " + b.error().message);
      }
      if (!ok) {
        skip(notes.empty() ? "no candidate compiled" : notes.back());
        continue;
      }
      ok->manifest["origin"] = req.origin;
      ok->manifest["notes"] = notes;
      const TableEntry& row = ok->row;
      (row.source == "exact" ? sum.exact : row.source == "nearest" ? sum.nearest : sum.untuned)++;
      if (row.timeKind == "estimated") ++sum.estimated;
      {
        BundleRow r;
        r.name = name;
        r.target = t.name;
        r.arch = t.arch;
        r.units = t.units;
        r.kind = row.source == "exact" ? (row.timeKind == "estimated" ? "estimated" : "tuned") : row.source;
        auto cfg = ir::Config::fromJson(row.config);
        r.config = cfg.ok() ? cfg->str() : row.config;
        r.tunedShape = row.tunedShape;
        r.timeUs = row.timeKind == "none" ? 0 : row.timeUs;
        r.from = ok->manifest.contains("record") && ok->manifest["record"].is_object()
                     ? ok->manifest["record"].value("from", "")
                     : "";
        sum.rows.push_back(std::move(r));
      }
      std::string line = name + " on " + t.name + " (" + t.arch + "): " + row.source;
      if (row.source == "nearest") line += " (config tuned at " + row.tunedShape + ")";
      if (row.timeKind == "measured") line += ", measured " + micros(row.timeUs);
      if (row.timeKind == "measured" && ok->manifest["time"].value("tier", "") == "claim")
        line += " (a claim of token " + ok->manifest["record"].value("writer", std::string("?")) + ", not reproduced)";
      if (row.timeKind == "estimated") line += ", ESTIMATED " + micros(row.timeUs) + " (" + row.estimator + ")";
      if (row.source == "default") line += " (untuned)";
      progress(line);
      built.push_back(std::move(*ok));
    }
  }
  // Dispatch rules: their shape-generic kernels follow the fixed-shape ones in the table.
  std::vector<TableRange> ranges;
  json rangeManifest = json::array();
  for (const RangeRuleFile& rule : s.dispatch) {
    auto rb = buildRangeBundle(rule, s, &symbols, progress);
    if (!rb.ok()) return rb.takeError();
    const int base = int(built.size());
    for (auto& e : rb->entries) {
      Built b;
      b.row = std::move(e.row);
      b.manifest = json::parse(e.manifestJson);
      b.files = std::move(e.files);
      built.push_back(std::move(b));
      ++sum.exact;
      sum.rows.push_back({.name = built.back().row.name, .target = built.back().row.target, .arch = built.back().row.arch,
                          .units = built.back().manifest.value("units", 1), .kind = "dispatch",
                          .config = built.back().manifest.contains("config") ? ir::Config::fromJson(built.back().row.config)->str() : "",
                          .tunedShape = built.back().row.tunedShape});
    }
    for (auto& b : rb->range.buckets) b.entry += base;
    ranges.push_back(rb->range);
    rangeManifest.push_back(json::parse(rb->manifestJson));
  }
  if (built.empty()) return makeError(ErrorCode::NotFound, "nothing to bundle: every kernel was left out");

  // Write everything under a temporary name, then move it into place.
  fs::path tmp = dir;
  tmp += ".tmp-" + std::to_string(getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  auto fail = [&](Error e) -> Expected<BundleSummary> {
    fs::remove_all(tmp, ec);
    return e;
  };
  std::vector<TableEntry> rows;
  std::vector<std::string> hostObjects;
  json entries = json::array();
  bool openmp = false;
  for (auto& b : built) {
    for (const auto& [path, bytes] : b.files) {
      if (auto st = writeFile(tmp / path, bytes); !st.ok()) return fail(st.takeError());
      if (path.rfind("host/", 0) == 0) {
        hostObjects.push_back(path);
        openmp = openmp || usesThreads(b.manifest.value("config", json::object()));
      }
    }
    rows.push_back(b.row);
    entries.push_back(std::move(b.manifest));
  }
  TableSources table = tableSources(rows, ranges);
  std::vector<std::pair<std::string, std::string>> files = {{"tessera_bundle_table.c", table.table},
                                                            {"tessera_bundle_images.c", table.images},
                                                            {"Makefile", makefile(hostObjects, linkFlags(openmp))},
                                                            {"link.flags", linkFlags(openmp) + "\n"}};
  for (const auto& f : kRuntimeFiles) files.push_back({std::string(f.name), std::string(f.text)});
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  json targets = json::array();
  for (const auto& t : s.targets) targets.push_back({{"name", t.name}, {"arch", t.arch}, {"model", t.model}});
  json manifest = {{"format", "tessera-bundle"},
                   {"format_version", 1},
                   {"tessera_version", s.tesseraVersion},
                   {"llvm_version", llvmVersion()},
                   {"created_at", cache::utcNow()},
                   {"created_on", host},
                   {"sources", {{"store", src.store ? src.storeName : ""},
                                {"cache", src.client && src.client->enabled() ? src.client->options().base_url : ""}}},
                   {"host_cpu", s.hostCpu == HostCpu::Native ? "native" : "isa-level"},
                   {"targets", targets},
                   {"entries", entries},
                   {"ranges", rangeManifest},
                   {"skipped", skipped}};
  files.push_back({"manifest.json", manifest.dump(2) + "\n"});
  for (const auto& [path, bytes] : files)
    if (auto st = writeFile(tmp / path, bytes); !st.ok()) return fail(st.takeError());
  if (fs::exists(dir, ec)) fs::remove_all(dir, ec);  // checked above: empty or our own bundle
  fs::rename(tmp, dir, ec);
  if (ec) return fail(makeError(ErrorCode::IOError, "cannot move the bundle into " + dir.string() + ": " + ec.message()));
  sum.dir = dir.string();
  sum.link_flags = linkFlags(openmp);
  sum.entries = int(built.size());
  return sum;
}

}  // namespace tessera::bundle
