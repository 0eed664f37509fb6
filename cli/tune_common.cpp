// Owns the CLI's shared tuning plumbing: provenance, cache client options, measurer choice.
#include "cli/tune_common.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "costmodel/gpu_model.h"
#include "search/device_measurer.h"
#include "cache_service/endpoints.h"
#include "search/estimate.h"
#include "search/remote_measurer.h"
#include "support/strings.h"
#include "targets/gpu_skus.h"

namespace tessera::cli {

namespace {

std::string envOr(const char* name, const std::string& def) {
  const char* v = std::getenv(name);
  return v && *v ? v : def;
}

Error bad(const std::string& m) { return makeError(ErrorCode::InvalidArgument, m); }

}  // namespace

search::ProvenanceInputs provenanceInputs() {
  search::ProvenanceInputs p;
  p.tesseraVersion = TESSERA_VERSION;
  p.llvmVersion = "22";
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  p.host = host;
  p.user = envOr("USER", "");
  if (p.user.empty())
    if (const passwd* pw = getpwuid(getuid())) p.user = pw->pw_name;
  return p;
}

cache::CacheClientOptions clientOptions(const std::string& flag) {
  cache::CacheClientOptions o;
  o.base_url = flag.empty() ? envOr("TESSERA_CACHE_URL", "") : flag;
  o.token = envOr("TESSERA_TOKEN", "");
  o.ca_cert = envOr("TESSERA_CA_CERT", "");  // https with a private CA (deploy/nginx/)
  return o;
}

std::string fmtDuration(double s) {
  char b[32];
  if (s >= 60) std::snprintf(b, sizeof b, "%dm%02ds", int(s / 60), int(s) % 60);
  else std::snprintf(b, sizeof b, "%.0fs", s);
  return b;
}

Expected<MeasureChoice> chooseMeasurer(const ir::Kernel& k, const TargetDesc& t, const std::string& device,
                                       bool estimate, const search::MeasureSettings& ms) {
  MeasureChoice c;
  if (estimate) {
    if (!t.isGpu()) return bad("--estimate predicts GPU targets; the host is measured (drop --estimate)");
    if (!device.empty()) return bad("--estimate runs nothing: drop --device");
    c.estimated = true;
    c.where = std::string("the analytic model ") + costmodel::kGpuModelName + " (nothing runs)";
    c.measurer = search::makeEstimateMeasurer(k, t);
    return c;
  }
  if (!t.isGpu()) {
    if (!device.empty()) return bad("--device applies to GPU targets (the host measures on this CPU)");
    c.measurer = search::makeHostMeasurer(k, t, ms);
    c.where = "host";
    return c;
  }
  search::DeviceSettings d;
  if (device == "emulated" || device == "emulated-pre") {
    d.emulated = true;
    d.emulatePre = device == "emulated-pre";
    c.emulated = true;
    c.where = "emulated " + t.name + (d.emulatePre ? " (the pre-mapping IR on this CPU)" : " (the mapped kernel on this CPU)");
    c.measurer = search::makeDeviceMeasurer(k, t, d, ms);
    return c;
  }
  if (!device.empty()) {
    auto idx = parseInt(device);
    if (!idx || *idx < 0)
      return bad("--device takes a device index (0, 1, ...), 'emulated' (the mapped kernel on this CPU) or 'emulated-pre', got '" +
                 device + "'");
    d.device = int(*idx);
  }
  auto attached = search::probeDevice(t, d.device);
  if (!attached.ok()) {
    if (attached.error().code == ErrorCode::InvalidArgument) return attached.takeError();
    return bad("no " + t.name + " device here (" + attached.error().message + "): --estimate ranks " + t.name +
               "'s space with the analytic model; --device emulated runs the tuning loop on this CPU");
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
  c.measurer = search::makeDeviceMeasurer(k, measured, d, ms);
  return c;
}

Expected<MeasureChoice> chooseWorkers(const ir::Kernel& k, TargetDesc& t, const std::string& cacheFlag, double wait_s,
                                      const search::MeasureSettings& ms) {
  cache::CacheClientOptions co = clientOptions(cacheFlag);
  auto urls = cache::splitServiceUrls(co.base_url);
  if (urls.empty()) return bad("--workers measures through the shared service: pass --cache URL[,URL...] or set TESSERA_CACHE_URL");
  if (!(wait_s > 0)) return bad("--worker-wait must be more than 0 seconds");
  search::RemoteSettings rs;
  // Patience with an unreachable service is the same as with an absent worker.
  rs.service = {urls, co.token, co.ca_cert, 10, wait_s};
  rs.measure = ms;
  rs.noWorkerTimeoutSec = wait_s;
  rs.onWarning = [](const std::string& w) { std::fprintf(stderr, "tessera: warning: %s\n", w.c_str()); };
  auto w = search::chooseWorkerTarget(t, rs);
  if (!w.ok()) return w.takeError();
  t = w->target;
  MeasureChoice c;
  c.where = std::to_string(w->workers) + " live worker" + (w->workers == 1 ? "" : "s") + " of " + t.keyString() + " (" +
            w->model + ")";
  c.measurer = search::makeRemoteMeasurer(k, *w, rs);
  return c;
}

}  // namespace tessera::cli
