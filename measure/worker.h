// Owns a measurement worker (ARCHITECTURE.md §2.7, issue 16): it registers this machine's hardware with
// the service, leases the items of jobs for its target, and for each job parses and verifies the
// kernel's IR text (the parser's limits), checks that the kernel on this machine's target has the
// job's hard key (a job never runs on hardware that does not match its key), compiles every
// candidate itself and measures it with the protocol of a local tune (host: makeHostMeasurer;
// GPU: makeDeviceMeasurer), and reports the records with this machine's provenance. A thread
// renews its leases by heartbeats while it measures; a worker that dies stops renewing, and its
// items go to another worker when their leases expire.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "client/job_client.h"
#include "store/record.h"
#include "measure/device_measurer.h"
#include "measure/protocol_measurer.h"
#include "support/status.h"
#include "targets/target_desc.h"

namespace tessera::measure {

struct WorkerSettings {
  cache::JobClientOptions service;
  TargetDesc target;          // this machine's: the host probe, or the GPU target of the attached device
  bool gpu = false;
  DeviceSettings device;      // GPU: which device (never the emulated one: its times are no device's)
  std::string model;          // what jobs may require: the CPU model, or the device's name
  std::string deviceLabel;    // "" on the host, else the device index
  std::string toolkitVersion, driverVersion, runtimeVersion;
  cache::Provenance provenance;  // this machine's (created_at is set per record)
  int slots = 1;                 // items leased at once (built in parallel, measured one after another)
  int buildThreads = 2;
  double idlePollSec = 0.5;      // between empty leases
  std::string workerId;          // empty: a fresh random id
  // Stops the worker once the item in flight is reported (checked between items and while idle).
  std::function<bool()> shouldStop;
  // One line per event (registered, job taken, item reported, problems); may be empty.
  std::function<void(const std::string&)> log;
  int64_t maxItems = 0;  // stop after reporting this many items (0: run until stopped)
  // The kernels' inputs and outputs this worker holds at once, all jobs together (a job is written
  // by any write token, and its tensors are allocated here): a job alone over it is refused; other
  // jobs' tensors are released before a new one's are allocated, and all of them while idle.
  double maxJobBytes = 4.0 * (1ull << 30);
};

struct WorkerStats {
  int64_t items = 0, jobs = 0, refused = 0, lost = 0;
};

// Runs until shouldStop (or maxItems). Errors: the service refused the registration (a wrong
// token), or gave no answer for longer than the client's patience.
Expected<WorkerStats> runWorker(const WorkerSettings& s);

}  // namespace tessera::measure
