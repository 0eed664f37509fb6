// Owns what the cache service accepts as a plausible record on write (issue 15): a target whose
// arch fits its name, a time no faster than the roofline bound of its key (roofline.h), sane
// sample counts, a config whose knobs exist for its family on that kind of target, and a
// created_at that is not in the future. Every refusal is an InvalidArgument naming the field and
// the reason; the HTTP layer answers it with 422.
#pragma once

#include <ctime>
#include <string>

#include "store/record.h"
#include "targets/target_desc.h"
#include "support/status.h"

namespace tessera::cache {

// The refusal of one field of a record at `path` ("records[3]"; empty: the record itself): an
// InvalidArgument naming path.field and why. The legality checks (legality.h) refuse the same way.
Error fieldError(const std::string& path, const std::string& field, const std::string& what);

struct PlausibilityOptions {
  std::time_t now = 0;               // server clock (0: time(nullptr))
  double future_skew_s = 86400;      // how far created_at may be ahead of the server clock
  double roofline_margin = 2;        // a host time below bound / margin is refused
  // A GPU's bound is its named product's peaks (tensor and memory) with at most this much room
  // (roofline.cpp: the fastest product of the chip per SM/CU, 1.25x for products users add): no
  // further margin. Issue 47: an sm_90 4096^3 f16 GEMM claimed at 60 us (464 us measured on an
  // H100; 139 us at its tensor peak) passed a margin of 2 on top of the 1.25.
  double gpu_margin = 1;
  int64_t max_samples = 10'000'000;  // result.n
  int64_t max_trials = 10'000'000;
  double max_tuning_seconds = 1e7;   // about 116 days
  double floor_us = 1e-3;            // no kernel of any target completes in less than 1 ns
};

// A host elementwise record's share of the writer's copy bandwidth may reach kHostCacheShareLimit
// (targets/target_desc.h) times the margin.

Status checkPlausible(const Record& r, const std::string& path, const PlausibilityOptions& o = {});

// Parts, exposed for tests.
Status checkTargetArch(const HardKey& k, const std::string& path);
// Knob names and values of `config` (a JSON object) for the key's family on its kind of target;
// families the table does not know get only the generic form check (identifier names, scalar
// values, short token strings).
Status checkConfigKnobs(const HardKey& k, const std::string& config, const std::string& path);

}  // namespace tessera::cache
