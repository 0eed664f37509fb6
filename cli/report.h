// Owns how results are shown: the human table and the --json object for one kernel run (exit
// codes: exit_codes.h).
#pragma once

#include <string>

#include "cli/exit_codes.h"
#include "ir/ir.h"
#include "ir/schedule.h"
#include "nlohmann/json.hpp"
#include "support/load.h"
#include "support/status.h"
#include "targets/host_runner.h"
#include "targets/target_desc.h"

namespace tessera::cli {


std::string targetSummary(const TargetDesc& t);
// The load control (support/load.h) read three times at `threads`, the least slowdown kept, as the
// copy probe reads it: a task that holds a core slows every reading; one reading on an idle VM can
// read high.
double steadyCoreShare(int threads);
// "load 4.39 before, 4.40 after on 2 cores" ("?" where /proc/loadavg could not be read).
std::string loadSpan(const LoadReading& before, const LoadReading& after);
// What a run's share of a peak is of: "the FMA peak of 2 threads", "the bf16 peak of 1 thread"
// (vdpbf16ps or AMX), "the copy bandwidth of 1 thread".
std::string peakName(const TargetDesc& t, bool compute, int threads, ir::ScalarType input = ir::ScalarType::F32);
nlohmann::json targetJson(const TargetDesc& t);

struct RunReport {
  const ir::Kernel* kernel = nullptr;
  const TargetDesc* target = nullptr;
  ir::Config config;
  double compileSeconds = 0;
  HostRunResult result;
};
std::string formatRun(const RunReport& r);
nlohmann::json runJson(const RunReport& r);

// "72.4 GFLOP/s" for compute-bound kernels, "18.3 GB/s" for the others (v in that unit); from
// 10^4 GFLOP/s and 10^3 GB/s on, "341.6 TFLOP/s" and "4.11 TB/s" (GPU figures).
std::string fmtThroughput(const ir::Kernel& k, double v);

// Kernel times in a unit that keeps at least three significant digits ("0.412 us", "12.34 us",
// "1.234 ms", "2.345 s"): tiny kernels must not all read "0.000 ms". The unit is chosen by
// `unitOf` (default: the value itself), so a median's p20/p80 read in the median's unit;
// fmtTimeNumber leaves the unit out.
std::string fmtTime(double us, double unitOf = -1);
std::string fmtTimeNumber(double us, double unitOf);

// Parses --config: a JSON object or "knob=value,knob=value".
Expected<ir::Config> parseConfigArg(const std::string& s);

}  // namespace tessera::cli
