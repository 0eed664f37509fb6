// Owns what the tuning front ends of the CLI share (tune, best, compare): this machine's
// provenance, the shared-cache client options from flags and the environment (read here, at the
// edge: TESSERA_CACHE_URL, TESSERA_TOKEN, USER), and the choice of where candidates are measured.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <vector>
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

// The shared cache's flags, the same on every command that talks to it: --cache URL[,URL...],
// --token and --ca-cert, each defaulting to its environment variable (TESSERA_CACHE_URL,
// TESSERA_TOKEN, TESSERA_CA_CERT; read by CLI11 here, at the edge).
struct CacheFlags {
  std::string url, token, caCert;
};
void addCacheFlags(CLI::App* cmd, CacheFlags* f);
cache::CacheClientOptions clientOptions(const CacheFlags& f);
// Before a command relies on the shared cache for `need` ("read" or "write"): a refusal (an
// unknown token, none where one is needed, a scope below `need`) ends the command (exit 6, with
// what to do); a service that does not answer is a warning and the command goes on without it.
void requireCacheAccess(cache::CacheClient& c, const std::string& need, const std::string& what);
// A tune's access: read is required (as above); a token that cannot write (a person's read token)
// tunes with the shared winners and gets a one-line warning that its results stay local.
void requireTuneAccess(cache::CacheClient& c, const std::string& what);

// Why a stored record of another key did not answer: the key fields that differ, and the flag that
// asks for that record when the thread count is the difference ("threads 1 (asked 2): --threads 1
// asks for it").
std::string missReason(const cache::HardKey& asked, const cache::HardKey& stored);
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
  // Through workers (chooseWorkers): the spot check of their winner (search::SessionCallbacks).
  // measureHere is empty when this machine cannot measure the workers' hardware (another CPU
  // model or fewer cores, no device of the target); reportSpotCheck tells the service and
  // returns the line the tune prints.
  std::function<std::optional<std::vector<search::TrialResult>>(const std::vector<ir::Config>&)> measureHere;
  std::function<std::string(const search::TrialResult&, const cache::Record&)> reportSpotCheck;
  std::string whyNotHere;  // when measureHere is empty
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
// `threads` (kAllCores or N): only host workers of that many threads answer for `tune --threads N`.
Expected<MeasureChoice> chooseWorkers(const ir::Kernel& k, TargetDesc& t, const CacheFlags& cache, int threads,
                                      double wait_s, const search::MeasureSettings& ms);

}  // namespace tessera::cli
