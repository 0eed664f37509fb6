// Owns measuring through workers (ARCHITECTURE.md §2.7, issue 16): the Measurer that sends each batch as
// a job to the shared service and waits while the live workers of the key's target (several of
// them share a batch) compile and measure it; the final top-k re-measurement is one job item, so
// one machine measures it interleaved (ARCHITECTURE.md §2.7). The tuning session does not know the
// difference: results come back as TrialResults whose origin is the worker (its provenance; the
// service already holds their records). Before a tune starts, chooseWorkerTarget picks the
// workers' hardware (the largest group of live workers of the target with the same arch, units
// and model) and describes it as a TargetDesc, so the key and the space are the workers', not
// those of the machine that runs `tune`.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "client/job_client.h"
#include "ir/ir.h"
#include "measure/measurer.h"
#include "measure/protocol_measurer.h"
#include "support/status.h"
#include "targets/target_desc.h"

namespace tessera::measure {

struct RemoteSettings {
  cache::JobClientOptions service;
  MeasureSettings measure;  // sent with every job: the protocol of a local tune
  // A tune fails (in one line) when no live worker can take its jobs for this long, before it
  // starts or while it waits for a batch.
  double noWorkerTimeoutSec = 30;
  double pollSec = 0.2;  // job progress polling (starts faster, backs off to this)
  // Host targets: > 0 takes only workers that run kernels on this many threads (their units:
  // `tessera worker --threads N`), as `tune --threads N` asks; 0 takes the largest group.
  int hostThreads = 0;
  std::function<void(const std::string&)> onWarning;
};

// What the workers measure on: the target as they described it, their model, and how many are live.
struct WorkerTarget {
  TargetDesc target;
  std::string model;
  int64_t workers = 0;
};
// Waits up to noWorkerTimeoutSec for a live worker of `target`: NotFound with the one-line reason
// (and what to start) when none comes. GPU targets must match the registered target's arch and
// units; the host is described by the workers' ISA level, core count and CPU model.
Expected<WorkerTarget> chooseWorkerTarget(const TargetDesc& target, const RemoteSettings& s);

// measure()/remeasure() return an Unavailable error when the tune cannot go on: no live worker for
// noWorkerTimeoutSec while a batch waits, every worker refused the job (its IR or key), or the
// service stayed unreachable. Candidates' own failures are statuses, as with every Measurer; the
// error is the measuring backend itself gone, which the front end reports in one line (what was
// measured before is stored, and --resume continues).
std::unique_ptr<Measurer> makeRemoteMeasurer(const ir::Kernel& k, const WorkerTarget& w, const RemoteSettings& s);

}  // namespace tessera::measure
