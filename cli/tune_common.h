// Owns what the tuning front ends of the CLI share (tune, best, compare): this machine's
// provenance, the shared-cache client options from flags and the environment (read here, at the
// edge: TESSERA_CACHE_URL, TESSERA_TOKEN, USER), and the choice of where candidates are measured.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "cache_service/client.h"
#include "ir/ir.h"
#include "search/measurer.h"
#include "search/protocol_measurer.h"
#include "search/records.h"
#include "support/status.h"
#include "targets/target_desc.h"

namespace tessera::cli {

search::ProvenanceInputs provenanceInputs();
// --cache FLAG, else $TESSERA_CACHE_URL; the token from $TESSERA_TOKEN; a CA from $TESSERA_CA_CERT.
cache::CacheClientOptions clientOptions(const std::string& flag);
std::string fmtDuration(double seconds);  // "42s", "3m05s"

// Where a tune's candidates are measured: the host (forked children), a GPU of the target's
// architecture (the device measurer), the emulated device (`--device emulated`: the GPU kernels'
// emulated form on this CPU, timings labelled and never stored), or the analytic model
// (`--estimate`: nothing runs, records are stored as estimated).
struct MeasureChoice {
  std::unique_ptr<search::Measurer> measurer;
  std::string where;  // for the report: "host", "NVIDIA H100 80GB HBM3 (sm_90)", "emulated sm_80 (this CPU)"
  bool emulated = false;
  bool estimated = false;
  // A device is attached and the GPU table knows its name: its product (SMs, clocks, peaks). An
  // unknown device keeps the target, with the device's name as its model.
  std::optional<TargetDesc> device;
};
// `device`: "" (the first device of the target's vendor), an index, or "emulated". Errors are
// InvalidArgument with the one-line message a user needs (exit 2), e.g. no device of the target's
// architecture and what to do instead.
Expected<MeasureChoice> chooseMeasurer(const ir::Kernel& k, const TargetDesc& t, const std::string& device,
                                       bool estimate, const search::MeasureSettings& ms);
// `tune --workers`: candidates measured by the live workers of `t` through the shared service
// (--cache / TESSERA_CACHE_URL, several URLs for replicas). Replaces `t` by the workers' hardware
// (the host: their ISA level, cores and CPU model), which is what the key and the space describe.
// NotFound, in one line, when no live worker shows up within `wait_s`.
Expected<MeasureChoice> chooseWorkers(const ir::Kernel& k, TargetDesc& t, const std::string& cacheFlag, double wait_s,
                                      const search::MeasureSettings& ms);

}  // namespace tessera::cli
