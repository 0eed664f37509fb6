// Owns the Python face of tuning and sharing: tune (the same session::TuneRequest as `tessera
// tune`, in Python's words), best and nearest (the store, then the
// shared cache), compare (search::compareTargets, as `tessera compare`),
// Client (the shared cache service), bundle (bundle::writeBundle), and the Trial and Record
// objects they return. Environment variables are read by the Python layer, not here.
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdlib>
#include <filesystem>
#include <memory>

#include "bindings.h"
#include "bundle/bundle.h"
#include "client/client.h"
#include "store/list_all.h"
#include "store/store.h"
#include "search/compare.h"
#include "measure/estimate.h"
#include "measure/protocol_measurer.h"
#include "measure/records.h"
#include "session/tune_session.h"
#include "session/verify_hit.h"
#include "session/tune_request.h"

namespace tessera::py {
namespace {

nb::object configObject(const std::string& json) { return nb::module_::import_("json").attr("loads")(json); }

nb::dict provenanceDict(const cache::Provenance& p) {
  nb::dict d;
  d["tessera_version"] = p.tessera_version;
  d["llvm_version"] = p.llvm_version;
  d["cuda_version"] = p.cuda_version;
  d["cpu_model"] = p.cpu_model;
  d["host"] = p.host;
  d["user"] = p.user;
  d["created_at"] = p.created_at;
  return d;
}

measure::ProvenanceInputs provenanceInputs() { return session::provenanceInputs("python"); }

cache::Provenance provenanceHere(const TargetDesc& t) { return measure::provenanceFor(t, provenanceInputs()); }

// The local store: a SQLite file, or memory when `db` is empty. `create`: false for lookups (a
// mistyped path must not leave an empty store behind).
std::unique_ptr<cache::RecordStore> openStore(const std::string& db, bool create) {
  if (db.empty()) return cache::makeMemoryStore();
  if (!create && !std::filesystem::exists(db)) return nullptr;
  return unwrap(cache::openSqliteStore(db));
}

cache::CacheClientOptions clientOptions(const std::string& url, const std::string& token, const std::string& caCert) {
  cache::CacheClientOptions o;
  o.base_url = url;
  o.token = token;
  o.ca_cert = caCert;
  return o;
}

// Python's side of a warning: tessera.errors.TesseraWarning through `warnings` (the CLI's
// "tessera: warning:" lines), attributed to the caller of the public function.
void warn(const std::string& message) {
  nb::object cls = nb::module_::import_("tessera.errors").attr("TesseraWarning");
  nb::module_::import_("warnings").attr("warn")(message, cls, 3);
}

// As the CLI: a service that refuses the token is an error (AccessDeniedError); one that does not
// answer is a warning and a miss. Call with the GIL held.
void requireAccess(cache::CacheClient& c, const std::string& need, const std::string& what) {
  std::vector<std::string> warnings;
  Status s = [&] {
    nb::gil_scoped_release nogil;
    return session::checkCacheAccess(c, need, what, [&](const std::string& w) { warnings.push_back(w); });
  }();
  for (const auto& w : warnings) warn(w);
  if (!s.ok()) raise(s.error());
}

// A lookup's store: a missing file is not created, and not silently a miss either.
std::unique_ptr<cache::RecordStore> openLookupStore(const std::string& db) {
  auto store = openStore(db, false);
  if (!store && !db.empty()) warn("no store at " + db + " (nothing is read from it)");
  return store;
}

struct PyTuneResult {
  session::SessionResult s;
  std::optional<double> speedup;  // over the default; None when the default was never measured
  bool interrupted = false;
  bool emulated = false;  // measured on the emulated device: this CPU's timings, nothing stored
  bool estimated = false;  // predicted by the analytic model: nothing ran, stored as estimated
};

std::string outcomeName(session::SessionResult::Outcome o) {
  switch (o) {
    case session::SessionResult::Outcome::AlreadyTuned: return "already-tuned";
    case session::SessionResult::Outcome::Tuned: return "tuned";
    case session::SessionResult::Outcome::NothingCorrect: return "nothing-correct";
  }
  return "?";
}

PyTuneResult tune(const PyKernel& k, const std::string& target, int trials, double timeBudget, const std::string& db,
                  const std::string& cacheUrl, const std::string& token, const std::string& strategy, uint64_t seed,
                  int batch, int topK, double minTime, double timeout, bool resume, bool force, bool warmStart,
                  const std::string& space, nb::object onTrial, const std::string& device, bool estimate, int threads,
                  bool workers, double workerWait, const std::string& caCert) {
  // The same request as `tessera tune`, in Python's words: checked, measured where the CLI would
  // measure, stored and shared the same way.
  session::TuneRequest rq;
  rq.kernel = k.kernel;
  rq.target = targetFor(target, threads);
  rq.space = space;
  rq.device = device;
  rq.estimate = estimate;
  rq.workers = workers;
  rq.workerWait = workerWait;
  rq.threads = threads;
  rq.trials = trials;
  rq.timeBudget = timeBudget;
  rq.batch = batch;
  rq.topK = topK;
  rq.timeout = timeout;
  rq.minTime = minTime;
  rq.strategy = strategy;
  rq.seed = seed;
  rq.db = db;
  rq.cache = clientOptions(cacheUrl, token, caCert);
  rq.policy = force ? session::CachePolicy::Force : resume ? session::CachePolicy::Resume : session::CachePolicy::UseStored;
  rq.warmStart = warmStart;
  rq.provenance = provenanceInputs();
  rq.dialect.kind = session::Dialect::Kind::Python;
  PyTuneResult out;
  std::optional<nb::python_error> callbackError;
  std::vector<std::string> warnings;
  session::SessionCallbacks& cb = rq.callbacks;
  cb.onWarning = [&](const std::string& w) { warnings.push_back(w); };
  if (!onTrial.is_none())
    cb.onTrial = [&](const measure::TrialResult& r, const search::TuneProgress& p) {
      nb::gil_scoped_acquire gil;
      if (callbackError) return;
      try {
        nb::dict prog;
        prog["trial"] = p.trial;
        prog["trials"] = p.trials;
        prog["elapsed"] = p.elapsedSec;
        prog["eta"] = p.etaSec;
        prog["best"] = p.best ? nb::cast(*p.best, nb::rv_policy::copy) : nb::none();
        onTrial(nb::cast(r, nb::rv_policy::copy), prog);
      } catch (nb::python_error& e) {
        callbackError.emplace(std::move(e));
      }
    };
  // Ctrl-C (and a failing callback) end the search after the batch in flight, as in the CLI.
  cb.shouldStop = [&](const search::TuneProgress&) {
    nb::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) {
      PyErr_Clear();
      out.interrupted = true;
    }
    return out.interrupted || callbackError.has_value();
  };
  Expected<std::unique_ptr<session::OpenTune>> open = makeError(ErrorCode::Internal, "not opened");
  Expected<session::SessionResult> res = makeError(ErrorCode::Internal, "no session");
  {
    nb::gil_scoped_release nogil;
    open = session::openTune(std::move(rq));
    if (open.ok()) res = (*open)->run();
  }
  if (callbackError) throw std::move(*callbackError);
  for (const auto& w : warnings) warn(w);
  std::unique_ptr<session::OpenTune> tune = unwrap(std::move(open));
  const session::TuneProblem& problem = tune->problem();
  cache::RecordStore* store = tune->store();
  out.emulated = tune->measure().emulated;
  out.estimated = tune->measure().estimated;
  out.s = unwrap(std::move(res));
  // Speedup over the default: this run's same-run ratio, or for a kernel already tuned the stored
  // winner against the stored measurement of the default config (None when there is none).
  if (out.s.outcome == session::SessionResult::Outcome::Tuned && out.s.speedupOverDefault > 0) {
    out.speedup = out.s.speedupOverDefault;
  } else if (out.s.outcome == session::SessionResult::Outcome::AlreadyTuned && out.s.cached && store) {
    const std::string def = problem.space.defaults().toJson();
    auto all = cache::listAll(*store, {.key_id = out.s.keyId});
    if (all.ok())
      for (const auto& r : *all)
        if (r.status == cache::RecordStatus::Ok && r.median_us > 0 && out.s.cached->median_us > 0 &&
            ir::Config::fromJson(r.config).ok() && ir::Config::fromJson(r.config)->toJson() == def)
          out.speedup = std::max(out.speedup.value_or(0.0), r.median_us / out.s.cached->median_us);
  }
  return out;
}

std::optional<cache::Record> best(const PyKernel& k, const std::string& target, const std::string& db,
                                  const std::string& cacheUrl, const std::string& token, bool verify, int threads,
                                  const std::string& caCert) {
  TargetDesc t = targetFor(target, threads);
  cache::HardKey key = measure::hardKeyFor(k.kernel, t);
  if (auto store = openLookupStore(db)) {
    auto b = unwrap(store->best(cache::keyIdOf(key)));
    if (b) return b->record;
  }
  cache::CacheClient client(clientOptions(cacheUrl, token, caCert));
  if (!client.enabled()) return std::nullopt;
  requireAccess(client, "read", "best reads the shared winners");
  std::optional<cache::Record> hit;
  std::string why, refused;
  {
    nb::gil_scoped_release nogil;
    auto r = client.best(key, provenanceHere(t), false);
    if (r.refused()) refused = r.warning;
    if (!r.warning.empty()) why = r.warning;
    if (r.kind == cache::LookupResult::Kind::Hit && r.record) hit = r.record;
    // A shared winner is checked on this machine before it is handed out (host targets; a GPU
    // winner needs its device and comes back unverified, with a warning).
    if (hit && verify && !t.isGpu()) {
      auto problem = session::tuneProblem(k.kernel, t);
      measure::MeasureSettings ms;
      ms.measure.minTimeSec = 0.005;
      Status st = problem.ok() ? [&] {
        auto measurer = measure::makeHostMeasurer(k.kernel, t, ms);
        return session::verifySharedHit(*hit, problem->space, *measurer);
      }()
                               : Status(problem.error());
      if (!st.ok()) {
        why = "shared winner refused: " + st.error().message;
        hit.reset();
      }
    } else if (hit && verify) {
      why = "shared winner not verified: checking a " + t.name + " winner needs that device";
    }
  }
  if (!refused.empty()) raise(makeError(ErrorCode::PermissionDenied, refused));
  if (!why.empty()) warn(why);
  return hit;
}

std::vector<std::pair<double, cache::Record>> nearest(const PyKernel& k, const std::string& target, const std::string& db,
                                                      int limit, int threads) {
  std::vector<std::pair<double, cache::Record>> out;
  auto store = openLookupStore(db);
  if (!store) return out;
  for (auto& n : unwrap(store->nearest(measure::hardKeyFor(k.kernel, targetFor(target, threads)), limit)))
    out.push_back({n.distance, std::move(n.record)});
  return out;
}

// search::compareTargets (what `tessera compare` prints): per target the winner, measured, else
// estimated (labelled), else nothing, with its tile choices, resources, time and share of peak,
// and the lines on why the targets' choices differ.
nb::dict compare(const PyKernel& k, const std::vector<std::string>& targets, const std::string& db,
                 const std::string& cacheUrl, const std::string& token, int threads, const std::string& caCert) {
  std::vector<TargetDesc> ts;
  bool host = false;
  for (const auto& name : targets) {
    ts.push_back(targetFor(name, name == "host" ? threads : -1));
    host = host || !ts.back().isGpu();
  }
  if (threads != -1 && !host) raise(makeError(ErrorCode::InvalidArgument, "threads applies to the host target only: add \"host\" to targets"));
  auto store = openLookupStore(db);
  cache::CacheClient client(clientOptions(cacheUrl, token, caCert));
  requireAccess(client, "read", "compare reads the shared winners");
  Expected<search::Comparison> cmp = makeError(ErrorCode::Internal, "no comparison");
  {
    nb::gil_scoped_release nogil;
    cmp = search::compareTargets(k.kernel, ts, store.get(), &client, provenanceHere(hostTarget()));
  }
  search::Comparison c = unwrap(std::move(cmp));
  nb::list rows;
  for (const auto& r : c.rows) {
    nb::dict row;
    row["target"] = r.target.name;
    row["arch"] = r.target.arch;
    row["kind"] = r.source == search::CompareRow::Source::Measured   ? "measured"
                  : r.source == search::CompareRow::Source::Estimated ? "estimated"
                                                                      : "none";
    row["from"] = r.from;
    row["config"] = r.record ? configObject(r.config.toJson()) : nb::none();
    row["median_us"] = r.record ? nb::cast(r.timeUs) : nb::none();
    row["throughput"] = r.throughput;
    row["peak_fraction"] = r.peakFraction;
    row["bound"] = r.bound;
    row["estimated_us"] = r.estimatedUs;
    nb::dict facts;
    for (const auto& [key, v] : r.facts) facts[key.c_str()] = v;
    row["facts"] = facts;
    row["resources"] = r.resources ? nb::cast(r.resources->summary()) : nb::none();
    row["note"] = r.note;
    row["record"] = r.record ? nb::cast(*r.record, nb::rv_policy::copy) : nb::none();
    rows.append(row);
  }
  nb::dict out;
  out["kernel"] = c.kernel;
  out["rows"] = rows;
  out["why"] = c.why;
  return out;
}

struct PyClient {
  std::unique_ptr<cache::CacheClient> c;
};

nb::dict lookupDict(const cache::LookupResult& r) {
  nb::dict d;
  d["kind"] = r.kind == cache::LookupResult::Kind::Hit ? "hit" : r.kind == cache::LookupResult::Kind::Nearest ? "nearest" : "miss";
  d["record"] = r.record ? nb::cast(*r.record, nb::rv_policy::copy) : nb::none();
  d["stale"] = r.stale;
  d["stale_reasons"] = r.stale_reasons;
  nb::list near;
  for (const auto& n : r.nearest) near.append(nb::make_tuple<nb::rv_policy::copy>(n.distance, n.record));
  d["nearest"] = near;
  d["warning"] = r.warning;
  return d;
}

}  // namespace

void registerSessions(nb::module_& m) {
  nb::class_<measure::TrialResult>(m, "Trial", "One measured candidate.")
      .def_prop_ro("config", [](const measure::TrialResult& r) { return configObject(r.config.toJson()); }, "the candidate's config")
      .def_prop_ro("status", [](const measure::TrialResult& r) { return std::string(measure::trialStatusName(r.status)); }, "ok, invalid-config, compile-error, timeout, crash or wrong-result")
      .def_ro("message", &measure::TrialResult::message, "why a failed candidate failed")
      .def_prop_ro("median_us", [](const measure::TrialResult& r) { return r.samples.median_us; }, "median time (us)")
      .def_prop_ro("p20_us", [](const measure::TrialResult& r) { return r.samples.p20_us; }, "20th percentile time (us)")
      .def_prop_ro("p80_us", [](const measure::TrialResult& r) { return r.samples.p80_us; }, "80th percentile time (us)")
      .def_prop_ro("n", [](const measure::TrialResult& r) { return r.samples.n; }, "timed runs")
      .def_ro("gflops", &measure::TrialResult::gflops, "GFLOP/s (compute-bound kernels)")
      .def_ro("gbps", &measure::TrialResult::gbps, "GB/s read and written (memory-bound kernels)")
      .def_ro("peak_fraction", &measure::TrialResult::peakFraction, "share of the peak of the threads it ran on")
      .def_ro("max_abs_err", &measure::TrialResult::maxAbsErr, "largest absolute error against the reference")
      .def_ro("max_rel_err", &measure::TrialResult::maxRelErr, "largest relative error against the reference")
      .def_ro("compile_seconds", &measure::TrialResult::compileSeconds, "seconds its compile took")
      .def_ro("estimated", &measure::TrialResult::estimated, "predicted by the analytic model: nothing ran")
      .def_ro("emulated", &measure::TrialResult::emulated, "run on the emulated device (this CPU's timing)")
      .def_prop_ro("ok", &measure::TrialResult::ok, "compiled, ran and matched the reference")
      .def("__repr__", [](const measure::TrialResult& r) {
        return "<Trial " + r.config.str() + " " + measure::trialStatusName(r.status) +
               (r.ok() ? " " + std::to_string(r.samples.median_us) + " us" : "") + ">";
      });

  nb::class_<cache::Record>(m, "Record", "A stored tuning record (ARCHITECTURE.md §2.9).")
      .def_prop_ro("key", [](const cache::Record& r) {
        nb::dict d;
        d["family"] = r.key.family; d["workload"] = r.key.workload; d["shape"] = r.key.shape; d["dtype"] = r.key.dtype;
        d["layout"] = r.key.layout; d["target"] = r.key.target; d["arch"] = r.key.arch; d["units"] = r.key.units;
        return d;
      }, "the hard key: family, workload, shape, dtype, layout, target, arch, units")
      .def_ro("key_id", &cache::Record::key_id, "the hard key's id (64 hex)")
      .def_prop_ro("config", [](const cache::Record& r) { return configObject(r.config); }, "the stored config")
      .def_prop_ro("status", [](const cache::Record& r) { return std::string(cache::recordStatusName(r.status)); }, "ok, estimated, or the failure category")
      .def_ro("n", &cache::Record::n, "timed runs behind the median")
      .def_ro("median_us", &cache::Record::median_us, "median time in microseconds")
      .def_ro("p20_us", &cache::Record::p20_us, "20th percentile time (us)")
      .def_ro("p80_us", &cache::Record::p80_us, "80th percentile time (us)")
      .def_ro("gflops", &cache::Record::gflops, "GFLOP/s")
      .def_ro("gbps", &cache::Record::gbps, "GB/s")
      .def_ro("peak_fraction", &cache::Record::peak_fraction, "share of the peak it was measured against")
      .def_ro("max_rel_err", &cache::Record::max_rel_err, "largest relative error against the reference")
      .def_ro("trials", &cache::Record::trials, "trials of the tuning run that stored it")
      .def_ro("tuning_seconds", &cache::Record::tuning_seconds, "seconds of that tuning run")
      .def_ro("remeasured", &cache::Record::remeasured, "a run's winner, re-measured interleaved at its end")
      .def_ro("estimator", &cache::Record::estimator, "the model that predicted an estimated record")
      .def_ro("bound", &cache::Record::bound, "the model's bound: compute, memory, latency or launch")
      .def_ro("stale", &cache::Record::stale, "measured with another toolchain or CPU than the asker's")
      .def_prop_ro("trust", [](const cache::Record& r) { return std::string(cache::trustName(r.trust)); },
                   "whose word it stands on: vouched, confirmed, claim, disputed or refuted")
      .def_prop_ro("tier", [](const cache::Record& r) {
        return std::string(cache::tierName(cache::tierOf(r.trust, r.status == cache::RecordStatus::Estimated)));
      }, "reproduced, claim or estimate (docs/team.md, the trust model)")
      .def_prop_ro("provenance", [](const cache::Record& r) { return provenanceDict(r.provenance); }, "toolchain, CPU, host, user and time of the measurement")
      .def("to_json", [](const cache::Record& r) { return cache::encodeRecord(r); }, "the record's JSON wire form")
      .def("__repr__", [](const cache::Record& r) {
        return "<Record " + r.key.family + " " + cache::formatShape(r.key.shape) + " " + r.key.dtype + " on " + r.key.target +
               ": " + std::string(cache::recordStatusName(r.status)) + " " + std::to_string(r.median_us) + " us " + r.config + ">";
      });

  nb::class_<PyTuneResult>(m, "TuneResult", "What a tuning session did (session::SessionResult).")
      .def_prop_ro("outcome", [](const PyTuneResult& r) { return outcomeName(r.s.outcome); }, "tuned, already-tuned or nothing-correct")
      .def_prop_ro("key_id", [](const PyTuneResult& r) { return r.s.keyId; }, "the tuned key's id")
      .def_prop_ro("best", [](const PyTuneResult& r) { return r.s.tune.best; }, "The winner after the final re-measurement.")
      .def_prop_ro("winner", [](const PyTuneResult& r) { return r.s.winner; }, "The winner's stored record.")
      .def_prop_ro("cached", [](const PyTuneResult& r) { return r.s.cached; }, "Already tuned: the stored winner.")
      .def_prop_ro("cached_from", [](const PyTuneResult& r) { return r.s.cachedFrom; }, "already tuned: where the winner came from")
      .def_prop_ro("default", [](const PyTuneResult& r) { return r.s.tune.defaultConfig; }, "the default config's Trial")
      .def_prop_ro("history", [](const PyTuneResult& r) { return r.s.tune.trials; }, "Every measured candidate, in order.")
      .def_prop_ro("remeasured", [](const PyTuneResult& r) { return r.s.tune.remeasured; }, "the top-k re-measured at the end")
      .def_prop_ro("statuses", [](const PyTuneResult& r) { return r.s.statusCounts; }, "trials per status")
      .def_prop_ro("speedup_over_default", [](const PyTuneResult& r) { return r.speedup; },
                   "The winner's speedup over the default config (None when the default was never measured).")
      .def_prop_ro("seconds", [](const PyTuneResult& r) { return r.s.tune.seconds; }, "seconds the search took")
      .def_prop_ro("warm_start_samples", [](const PyTuneResult& r) { return r.s.warm.samples.size(); }, "stored results the model started from")
      .def_prop_ro("warm_start_workloads", [](const PyTuneResult& r) { return r.s.warm.workloads; }, "other workloads they came from")
      .def_prop_ro("stopped", [](const PyTuneResult& r) { return r.s.stopped; }, "the search was stopped early")
      .def_ro("interrupted", &PyTuneResult::interrupted, "Ctrl-C ended the search early")
      .def_ro("emulated", &PyTuneResult::emulated, "measured on the emulated device (nothing stored)")
      .def_ro("estimated", &PyTuneResult::estimated, "predicted by the analytic model (stored as estimated)");

  m.def("tune", &tune, nb::arg("kernel"), nb::arg("target") = "host", nb::arg("trials") = 200,
        nb::arg("time_budget") = 0.0, nb::arg("db") = "", nb::arg("cache") = "", nb::arg("token") = "",
        nb::arg("strategy") = "evolutionary", nb::arg("seed") = 0, nb::arg("batch") = search::SearchSettings{}.batchSize,
        nb::arg("top_k") = 5, nb::arg("min_time") = 0.05, nb::arg("timeout") = 20.0, nb::arg("resume") = false,
        nb::arg("force") = false, nb::arg("warm_start") = true, nb::arg("space") = "", nb::arg("on_trial") = nb::none(),
        nb::arg("device") = "", nb::arg("estimate") = false, nb::arg("threads") = -1, nb::arg("workers") = false,
        nb::arg("worker_wait") = 30.0, nb::arg("ca_cert") = "",
        "One tuning session (session::runTuneSession), as `tessera tune`.");
  m.def("best", &best, nb::arg("kernel"), nb::arg("target") = "host", nb::arg("db") = "", nb::arg("cache") = "",
        nb::arg("token") = "", nb::arg("verify") = true, nb::arg("threads") = -1, nb::arg("ca_cert") = "",
        "The stored winner: the local store, then the shared cache (checked here).");
  m.def("nearest", &nearest, nb::arg("kernel"), nb::arg("target") = "host", nb::arg("db") = "", nb::arg("limit") = 3,
        nb::arg("threads") = -1, "Winners of the closest tuned shapes in the local store.");
  m.def("compare", &compare, nb::arg("kernel"), nb::arg("targets"), nb::arg("db") = "", nb::arg("cache") = "",
        nb::arg("token") = "", nb::arg("threads") = -1, nb::arg("ca_cert") = "",
        "Each target's winner side by side (search::compareTargets).");

  nb::class_<PyClient>(m, "Client", "A client of the shared tuning cache (`tessera serve`).")
      .def("__init__", [](PyClient* self, const std::string& url, const std::string& token, double timeout,
                          const std::string& caCert) {
            if (url.empty()) raise(makeError(ErrorCode::InvalidArgument, "Client needs the service URL"));
            auto o = clientOptions(url, token, caCert);
            o.timeout_s = timeout;
            new (self) PyClient{std::make_unique<cache::CacheClient>(o)};
          }, nb::arg("url"), nb::arg("token") = "", nb::arg("timeout") = 1.0, nb::arg("ca_cert") = "")
      .def_prop_ro("url", [](const PyClient& c) { return c.c->options().base_url; }, "the service URL(s)")
      .def("best", [](PyClient& c, const PyKernel& k, const std::string& target, bool allowNearest, int threads) {
            TargetDesc t = targetFor(target, threads);
            cache::LookupResult r;
            {
              nb::gil_scoped_release nogil;
              r = c.c->best(measure::hardKeyFor(k.kernel, t), provenanceHere(t), allowNearest);
            }
            // A refused token is an error, never a miss; a service that is down is a miss and a warning.
            if (r.refused()) raise(makeError(ErrorCode::PermissionDenied, r.warning));
            if (!r.warning.empty()) warn(r.warning);
            return lookupDict(r);
          }, nb::arg("kernel"), nb::arg("target") = "host", nb::arg("allow_nearest") = true, nb::arg("threads") = -1,
          "Lookup (a refused token raises AccessDeniedError; a service that is down is a miss with a warning).")
      .def("whoami", [](PyClient& c) {
            Expected<cache::Identity> id = makeError(ErrorCode::Internal, "");
            {
              nb::gil_scoped_release nogil;
              id = c.c->whoami();
            }
            cache::Identity i = unwrap(std::move(id));
            nb::dict d;
            d["name"] = i.name.empty() ? nb::none() : nb::cast(i.name);
            d["scope"] = i.scope;
            return d;
          }, "The token's name and scope as the service sees them (GET /v1/whoami).")
      .def("status", [](PyClient& c) {
            nb::gil_scoped_release nogil;
            return unwrap(c.c->status());
          }, "The service's /status JSON.")
      .def("export", [](PyClient& c, int64_t since, int limit) {
            nb::gil_scoped_release nogil;
            auto p = unwrap(c.c->exportPage(since, limit));
            return std::make_pair(p.jsonl, p.more ? p.next_since : int64_t(0));
          }, nb::arg("since") = 0, nb::arg("limit") = 10000, "(JSON lines, next `since` or 0 at the end).")
      .def("push", [](PyClient& c, const std::string& db) {
            requireAccess(*c.c, "write", "push shares the outbox");
            auto store = openStore(db, false);
            if (!store) raise(makeError(ErrorCode::NotFound, "no store at " + db));
            cache::OutboxReport rep;
            {
              nb::gil_scoped_release nogil;
              rep = cache::pushOutbox(*store, *c.c);
            }
            nb::dict d;
            d["pushed"] = rep.pushed;
            d["rejected"] = rep.rejected;
            d["remaining"] = rep.remaining;
            d["warning"] = rep.warning;
            return d;
          }, nb::arg("db"), "Pushes the local store's outbox (records tuned while the service was unreachable).");

  m.def("bundle", [](const std::vector<const PyKernel*>& kernels, const std::vector<std::string>& targets,
                     const std::string& out, const std::string& db, const std::string& cacheUrl, const std::string& token,
                     const std::string& missing, const std::string& hostCpu, bool verify, bool replace, int threads,
                     const std::string& caCert) {
          bundle::BundleSettings s;
          s.outDir = out;
          s.tesseraVersion = TESSERA_VERSION;
          s.verify = verify;
          s.replace = replace;
          if (missing == "default") s.resolve.missing = bundle::MissingPolicy::Default;
          else if (missing == "skip") s.resolve.missing = bundle::MissingPolicy::Skip;
          else if (missing == "fail") s.resolve.missing = bundle::MissingPolicy::Fail;
          else raise(makeError(ErrorCode::InvalidArgument, "missing must be fail, default or skip"));
          if (hostCpu != "level" && hostCpu != "native") raise(makeError(ErrorCode::InvalidArgument, "host_cpu must be level or native"));
          s.hostCpu = hostCpu == "native" ? bundle::HostCpu::Native : bundle::HostCpu::Level;
          for (const auto& t : targets) s.targets.push_back(unwrap(bundle::parseBundleTarget(t)));
          check(session::checkThreads(threads, {session::Dialect::Kind::Python}));
          std::vector<bundle::KernelRequest> ks;
          for (const PyKernel* k : kernels) ks.push_back({k->kernel, "python", threads});
          auto store = openLookupStore(db);
          cache::CacheClient client(clientOptions(cacheUrl, token, caCert));
          requireAccess(client, "read", "bundle reads the shared winners");
          bundle::RecordSources src;
          src.store = store.get();
          src.storeName = db;
          src.client = &client;
          src.current = provenanceHere(hostTarget());
          Expected<bundle::BundleSummary> sum = makeError(ErrorCode::Internal, "no bundle");
          {
            nb::gil_scoped_release nogil;
            sum = bundle::writeBundle(ks, s, src);
          }
          bundle::BundleSummary r = unwrap(std::move(sum));
          nb::dict d;
          d["dir"] = r.dir;
          d["entries"] = r.entries;
          d["exact"] = r.exact;
          d["nearest"] = r.nearest;
          d["untuned"] = r.untuned;
          d["estimated"] = r.estimated;
          d["skipped"] = r.skipped;
          d["link_flags"] = r.link_flags;
          nb::list rows;
          for (const auto& row : r.rows) {
            nb::dict e;
            e["kernel"] = row.name;
            e["target"] = row.target;
            e["arch"] = row.arch;
            e["units"] = row.units;
            e["kind"] = row.kind;
            e["config"] = row.config;
            e["tuned_shape"] = row.tunedShape;
            e["time_us"] = row.timeUs;
            e["from"] = row.from;
            rows.append(e);
          }
          d["rows"] = rows;
          // Defaults shipped on request are still worth a word, as the CLI's table says DEFAULT.
          if (r.untuned > 0)
            warn(std::to_string(r.untuned) + " of " + std::to_string(r.entries) +
                 " bundle entries are the space's untuned defaults (missing=\"default\")");
          return d;
        }, nb::arg("kernels"), nb::arg("targets"), nb::arg("out"), nb::arg("db") = "", nb::arg("cache") = "",
        nb::arg("token") = "", nb::arg("missing") = "fail", nb::arg("host_cpu") = "level", nb::arg("verify") = true,
        nb::arg("replace") = false, nb::arg("threads") = -1, nb::arg("ca_cert") = "",
        "`tessera bundle`: the kernels' tuned configs compiled ahead of time into a folder with a C runtime.");
}

}  // namespace tessera::py
