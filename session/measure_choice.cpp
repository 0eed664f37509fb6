// Owns the choice of where a tune's candidates are measured (host, device, emulated device,
// analytic model, workers) and the access check of the shared cache.
#include <cstdio>

#include "client/endpoints.h"
#include "store/trust.h"
#include "costmodel/gpu_model.h"
#include "measure/device_measurer.h"
#include "measure/measure_helper.h"
#include "measure/estimate.h"
#include "measure/remote_measurer.h"
#include "support/load.h"
#include "session/tune_request.h"
#include "support/strings.h"
#include "targets/gpu_skus.h"
#include "support/si_format.h"

namespace tessera::session {

namespace {

using detail::bad;

}  // namespace

Status checkCacheAccess(cache::CacheClient& c, const std::string& need, const std::string& what,
                        const std::function<void(const std::string&)>& onWarning) {
  Status s = c.checkAccess(need, what);
  if (s.ok() || s.error().code == ErrorCode::PermissionDenied) return s;
  // The URL once: a transport error already starts with it.
  const std::string& url = c.options().base_url;
  const std::string& why = s.error().message;
  if (onWarning)
    onWarning("tessera cache " + (why.rfind(url + ": ", 0) == 0 ? why : url + ": " + why) + "; continuing without it");
  return {};
}

Expected<MeasureChoice> chooseMeasurer(const ir::Kernel& k, const TargetDesc& t, const std::string& device, bool estimate,
                                       const measure::MeasureSettings& ms, const Dialect& dl) {
  MeasureChoice c;
  if (estimate) {
    if (!t.isGpu()) return bad(dl.option("estimate") + " predicts GPU targets; the host is measured (drop " + dl.given("estimate") + ")");
    if (!device.empty()) return bad(dl.option("estimate") + " runs nothing: drop " + dl.option("device"));
    c.estimated = true;
    c.where = std::string("the analytic model ") + costmodel::kGpuModelName + " (nothing runs)";
    c.measurer = measure::makeEstimateMeasurer(k, t);
    return c;
  }
  // Every measured candidate runs in the measuring helper: without it nothing can be measured.
  if (auto helper = measure::findMeasureHelper(ms.helperPath); !helper.ok()) return helper.takeError();
  if (!t.isGpu()) {
    if (!device.empty()) return bad(dl.option("device") + " applies to GPU targets (the host measures on this CPU)");
    c.measurer = measure::makeHostMeasurer(k, t, ms);
    c.where = "host";
    c.loadControl = [](int threads) { return coreShareSlowdown(threads); };
    return c;
  }
  measure::DeviceSettings d;
  if (device == "emulated" || device == "emulated-pre") {
    d.emulated = true;
    d.emulatePre = device == "emulated-pre";
    c.emulated = true;
    // A CPU's time says nothing of the GPU's: the model ranks, the emulator refuses.
    c.where = std::string("the analytic model ") + costmodel::kGpuModelName + ", each candidate checked on the emulated " + t.name +
              (d.emulatePre ? " (the pre-mapping IR on this CPU)" : " (the mapped kernel on this CPU)");
    c.measurer = measure::makeEmulatorCheckedMeasurer(k, t, d, ms);
    return c;
  }
  if (!device.empty()) {
    auto idx = parseInt(device);
    if (!idx || *idx < 0)
      return bad(dl.option("device") + " takes a device index (0, 1, ...), 'emulated' (the mapped kernel on this CPU) or "
                 "'emulated-pre', got '" + device + "'");
    d.device = int(*idx);
  }
  auto attached = measure::probeDevice(t, d.device);
  if (!attached.ok()) {
    if (attached.error().code == ErrorCode::InvalidArgument) return attached.takeError();
    return makeError(ErrorCode::Unsupported, "no " + t.name + " device here (" + attached.error().message + "): " +
                                                 dl.given("estimate") + " ranks " + t.name +
                                                 "'s space with the analytic model; " + dl.given("device", "emulated", true) +
                                                 " runs the tuning loop on this CPU");
  }
  c.where = attached->name + " (" + attached->arch + ")";
  // The device's own row of the GPU table, when its name is there (the key's SMs are the device's).
  TargetDesc measured = t;
  if (auto sku = gpuForDeviceName(attached->name); sku && (sku->arch == t.arch || sku->arch + "a" == t.arch)) {
    auto own = targetOfGpu(sku->name, t);
    if (own.ok()) measured = *own;
  } else {
    std::fprintf(stderr,
                 "tessera: warning: the attached %s is not in the GPU table: its key and peaks are %s's default product's "
                 "(%s, %d units); add it with --gpu-facts (docs/gpus.md)\n",
                 attached->name.c_str(), t.name.c_str(), t.model.c_str(), t.units);
    measured.model = attached->name;
  }
  c.device = measured;
  c.measurer = measure::makeDeviceMeasurer(k, measured, d, ms);
  return c;
}

Expected<MeasureChoice> chooseWorkers(const ir::Kernel& k, TargetDesc& t, const cache::CacheClientOptions& co, int threads,
                                      double wait_s, const measure::MeasureSettings& ms,
                                      const std::function<void(const std::string&)>& onWarning, const Dialect& dl) {
  auto urls = cache::splitServiceUrls(co.base_url);
  if (urls.empty())
    return bad(dl.given("workers") + " measures through the shared service: pass " +
               (dl.kind == Dialect::Kind::Cli ? "--cache URL[,URL...]" : "cache=URL") + " or set TESSERA_CACHE_URL");
  if (!(wait_s > 0)) return bad(dl.option("worker-wait") + " must be more than 0 seconds");
  measure::RemoteSettings rs;
  // Patience with an unreachable service is the same as with an absent worker.
  rs.service = {urls, co.token, co.ca_cert, 10, wait_s};
  rs.measure = ms;
  rs.noWorkerTimeoutSec = wait_s;
  if (!t.isGpu() && threads != kAllCores) rs.hostThreads = threads;
  rs.onWarning = onWarning;
  auto w = measure::chooseWorkerTarget(t, rs);
  if (!w.ok() && w.error().code == ErrorCode::NotFound) return makeError(ErrorCode::Unavailable, w.error().message);
  if (!w.ok()) return w.takeError();
  t = w->target;
  MeasureChoice c;
  c.where = std::to_string(w->workers) + " live worker" + (w->workers == 1 ? "" : "s") + " of " + t.keyString() + " (" +
            w->model + ")";
  c.measurer = measure::makeRemoteMeasurer(k, *w, rs);
  // The spot check: this machine re-measures the workers' winner when it has their key's
  // hardware (ISA level and threads), whatever CPU model they name (issue 47: a worker that named
  // another model escaped the check); another model is judged with more room (spotCheckFactor).
  const TargetDesc& here = hostTarget();
  std::optional<measure::DeviceSettings> device;
  if (t.isGpu()) {
    if (measure::probeDevice(t, 0).ok()) device = measure::DeviceSettings{};
    else c.whyNotHere = "no " + t.name + " device here";
  } else if (here.arch != t.arch || here.units < t.units) {
    c.whyNotHere = "this machine (" + here.model + ", " + here.arch + ", " + countOf(here.units, "core") +
                   ") is not the workers' hardware";
  }
  c.spotAgreeFactor = cache::spotCheckFactor(t.name, t.model, here.model);
  if (c.whyNotHere.empty()) {
    const TargetDesc target = t;
    c.measureHere = [&k, target, device, ms](const std::vector<ir::Config>& configs)
        -> std::optional<std::vector<measure::TrialResult>> {
      auto m = device ? measure::makeDeviceMeasurer(k, target, *device, ms) : measure::makeHostMeasurer(k, target, ms);
      auto r = configs.size() == 1 ? m->measure(configs) : m->remeasure(configs, 3);
      if (!r.ok()) return std::nullopt;
      return std::move(*r);
    };
    // On the host, a re-timing's control: are the claimed threads' cores free now? (A device's
    // timing does not share this CPU's cores.)
    if (!device) c.controlHere = [](int threads) { return coreShareSlowdown(threads); };
  }
  const cache::JobClientOptions service = rs.service;
  c.reportSpotCheck = [service](const measure::TrialResult& claimed, const cache::Record& mine) -> std::string {
    const double ratio = claimed.samples.median_us > 0 ? mine.median_us / claimed.samples.median_us : 0;
    char head[200];
    std::snprintf(head, sizeof head, "the workers' winner re-measured here: %s, %s the %s worker %s claimed",
                  formatMicros(mine.median_us).c_str(), formatRatio(ratio).c_str(), formatMicros(claimed.samples.median_us).c_str(),
                  claimed.origin->workerId.c_str());
    if (claimed.origin->jobId.empty()) return head;
    cache::JobClient client(service);
    auto v = client.check(claimed.origin->jobId, claimed.origin->item, mine);
    if (!v.ok()) return std::string(head) + " (the service could not be told: " + v.error().message + ")";
    if (!v->quarantined) return std::string(head) + (v->agrees ? ": agrees" : ": contradicted");
    return std::string(head) + ": contradicted; the service quarantined worker " + v->worker + " and " +
           std::to_string(v->quarantined_records) + " of its records";
  };
  return c;
}

}  // namespace tessera::session
