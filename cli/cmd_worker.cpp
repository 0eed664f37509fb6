// Owns `tessera worker` (measure candidates for the shared service on this machine until
// SIGINT/SIGTERM) and `tessera workers` (list the live workers). The service URLs and the token
// come from --cache/TESSERA_CACHE_URL and TESSERA_TOKEN (a token of scope worker), read here.
#include <gnu/libc-version.h>
#include <sys/utsname.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "client/job_client.h"
#include "cli/commands.h"
#include "cli/kernel_flags.h"
#include "cli/report.h"
#include "cli/tune_common.h"
#include "measure/device_measurer.h"
#include "measure/records.h"
#include "measure/worker.h"
#include "support/strings.h"

namespace tessera::cli {

namespace {

volatile std::sig_atomic_t gStop = 0;
extern "C" void onStop(int) { gStop = 1; }

struct WorkerFlags {
  CacheFlags cache;
  std::string target = "host", device;
  int slots = 1, buildThreads = 2, threads = kAllCores;
  double poll = 0.5, patience = 300;
  int64_t maxItems = 0;
  double maxJobMb = 4096;
  bool quiet = false, json = false;
};

// `tessera workers`: a status query, so it gives up sooner than a worker when nobody answers.
struct WorkersFlags {
  CacheFlags cache;
  std::string target;
  bool all = false, json = false;
  double patience = 10;
};

// What a worker tells the service about a GPU's software: the toolkit the binaries are built with.
std::string cudaToolkitVersion() {
  const char* path = "/usr/local/cuda/version.json";
  FILE* f = std::fopen(path, "r");
  if (!f) return "";
  char buf[4096];
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = 0;
  // "cuda" : { "name" : "CUDA SDK", "version" : "13.0.1" }
  std::string s(buf);
  auto at = s.find("\"cuda\"");
  if (at == std::string::npos) return "";
  at = s.find("\"version\"", at);
  if (at == std::string::npos) return "";
  at = s.find('"', s.find(':', at));
  auto end = s.find('"', at + 1);
  return at == std::string::npos || end == std::string::npos ? "" : s.substr(at + 1, end - at - 1);
}

// What runs a worker's kernels besides a GPU driver: the OS kernel and the C library.
std::string hostRuntimeVersion() {
  struct utsname u {};
  std::string out = uname(&u) == 0 ? std::string(u.sysname) + " " + u.release : "unknown OS";
  return out + ", glibc " + gnu_get_libc_version();
}

void workerCommand(const WorkerFlags& f) {
  cache::JobClientOptions service = jobClientOptions(f.cache, 30, f.patience);
  if (service.urls.empty()) fail("no service URL: pass --cache URL[,URL...] or set TESSERA_CACHE_URL", kExitBadInput);
  if (service.token.empty())
    fail("no token: set TESSERA_TOKEN (or --token) to a token of scope worker (tessera serve token add NAME --scope worker)",
         kExitBadInput);
  if (f.slots < 1 || f.slots > 64) fail("--slots must be in 1..64", kExitBadInput);
  if (f.buildThreads < 1 || f.buildThreads > 64) fail("--build-threads must be in 1..64", kExitBadInput);
  if (!(f.poll >= 0.01 && f.poll <= 60)) fail("--poll must be in 0.01..60 seconds", kExitBadInput);
  if (!(f.maxJobMb >= 1 && f.maxJobMb <= 1 << 20)) fail("--max-job-mb must be in 1..1048576", kExitBadInput);
  // A host worker measures on --threads threads (default: all cores): its units, the key of every
  // record it measures, and what `tune --workers --threads N` looks for.
  auto t = session::targetFor(f.target, f.threads);
  if (!t.ok()) failWith(t.error());

  measure::WorkerSettings s;
  s.service = service;
  s.target = *t;
  s.slots = f.slots;
  s.buildThreads = f.buildThreads;
  s.idlePollSec = f.poll;
  s.maxItems = f.maxItems;
  s.maxJobBytes = f.maxJobMb * double(1 << 20);
  measure::ProvenanceInputs in = provenanceInputs();
  if (t->isGpu()) {
    if (f.device == "emulated")
      fail("a worker measures on a device: the emulated device's timings are this CPU's and are never stored", kExitBadInput);
    if (!f.device.empty()) {
      auto idx = parseInt(f.device);
      if (!idx || *idx < 0) fail("--device takes a device index (0, 1, ...)", kExitBadInput);
      s.device.device = int(*idx);
    }
    auto attached = measure::probeDevice(*t, s.device.device);
    if (!attached.ok())
      fail("no " + t->name + " device " + std::to_string(s.device.device) + " here (" + attached.error().message +
               "): a worker measures on the device it registers",
           2);
    s.gpu = true;
    s.model = attached->name;
    s.deviceLabel = std::to_string(s.device.device);
    s.toolkitVersion = cudaToolkitVersion();
    s.driverVersion = attached->driverVersion;
    in.cudaVersion = s.toolkitVersion;
  } else {
    if (!f.device.empty()) fail("--device applies to GPU targets (a host worker measures on this CPU)", kExitBadInput);
    s.model = t->model;
    s.driverVersion = "none";  // the host's kernels run on no driver: the runtime says what runs them
  }
  s.runtimeVersion = hostRuntimeVersion();
  s.provenance = measure::provenanceFor(*t, in);
  if (s.gpu) s.provenance.cpu_model = s.model;  // what the record was measured on
  s.shouldStop = [] { return gStop != 0; };
  s.log = [q = f.quiet](const std::string& line) {
    if (!q) std::fprintf(stderr, "tessera worker: %s\n", line.c_str());
  };
  struct sigaction sa {};
  sa.sa_handler = onStop;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  auto stats = measure::runWorker(s);
  if (!stats.ok()) failWith(stats.error());
  if (f.json) {
    std::printf("%s\n", nlohmann::json({{"items", stats->items}, {"jobs", stats->jobs}, {"refused", stats->refused},
                                        {"leases_lost", stats->lost}})
                            .dump(2)
                            .c_str());
    return;
  }
  std::printf("tessera worker: stopped after %lld items of %lld jobs (%lld refused, %lld leases lost)\n",
              (long long)stats->items, (long long)stats->jobs, (long long)stats->refused, (long long)stats->lost);
}

void workersCommand(const WorkersFlags& f) {
  cache::JobClientOptions service = jobClientOptions(f.cache, 10, f.patience);
  if (service.urls.empty()) fail("no service URL: pass --cache URL[,URL...] or set TESSERA_CACHE_URL", kExitBadInput);
  cache::JobClient client(service);
  cache::WorkerFilter filter;
  filter.target = f.target;
  filter.live_only = !f.all;
  auto ws = client.workers(filter);
  if (!ws.ok()) failWith(ws.error());
  if (f.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& w : *ws) arr.push_back(cache::workerInfoToJson(w));
    std::printf("%s\n", arr.dump(2).c_str());
    return;
  }
  std::printf("%-32s %-10s %-12s %-6s %-5s %-7s %-16s %s\n", "ID", "TARGET", "ARCH", "UNITS", "LIVE", "LEASED", "HOST", "MODEL");
  for (const auto& w : *ws)
    std::printf("%-32s %-10s %-12s %-6lld %-5s %-7lld %-16s %s%s\n", w.id.c_str(), w.target.c_str(), w.arch.c_str(),
                (long long)w.units, w.live ? "yes" : "no", (long long)w.leased, w.host.c_str(), w.model.c_str(),
                w.quarantined.empty() ? "" : ("  QUARANTINED: " + w.quarantined).c_str());
}

}  // namespace

void addWorkerCommands(CLI::App& app) {
  auto f = std::make_shared<WorkerFlags>();
  auto* w = app.add_subcommand("worker", "measure candidates for tunes of the shared service on this machine (token of scope worker)");
  addCacheFlags(w, &f->cache);
  addThreadsOption(w, &f->threads);
  w->add_option("--target", f->target, "what this worker measures on: host, or the GPU target of --device")->capture_default_str();
  w->add_option("--device", f->device, "GPU targets: the device index (default 0)");
  w->add_option("--slots", f->slots, "candidates leased at once (built in parallel, measured one by one)")->capture_default_str();
  w->add_option("--build-threads", f->buildThreads, "parallel compiles")->capture_default_str();
  w->add_option("--poll", f->poll, "seconds between leases while idle")->capture_default_str();
  w->add_option("--patience", f->patience, "seconds a request is retried while no service URL answers")->capture_default_str();
  w->add_option("--max-items", f->maxItems, "stop after this many items (0: run until SIGINT/SIGTERM)")->capture_default_str();
  w->add_option("--max-job-mb", f->maxJobMb,
                "MiB of kernel inputs and outputs this worker holds at once, all jobs together (a bigger job is refused)")
      ->capture_default_str();
  w->add_flag("--quiet", f->quiet, "no log lines");
  addJsonFlag(w, f->json, "the summary when it stops as JSON (its log lines stay on stderr)");
  w->callback([f] { workerCommand(*f); });

  auto l = std::make_shared<WorkersFlags>();
  auto* ws = app.add_subcommand("workers", "list the live workers of the shared service");
  addCacheFlags(ws, &l->cache);
  ws->add_option("--target", l->target, "only this target");
  ws->add_flag("--all", l->all, "also workers no longer live");
  ws->add_option("--patience", l->patience, "seconds the request is retried while no service URL answers")
      ->capture_default_str();
  addJsonFlag(ws, l->json, "machine-readable: every field the service keeps of each worker");
  ws->callback([l] { workersCommand(*l); });
}

}  // namespace tessera::cli
