// Owns the schedule spaces: per-family rules deriving knobs, their legal domains and the
// default config from (kernel, target). The search samples from these; `tessera run` without
// --config uses the default.
#pragma once

#include "ir/ir.h"
#include "ir/schedule.h"
#include "support/status.h"
#include "targets/target_desc.h"

namespace tessera::search {

Expected<ir::Space> makeSpace(const ir::Kernel& k, const TargetDesc& t);

// Family rules (one file each).
Expected<ir::Space> gemmHostSpace(const ir::Kernel& k, const TargetDesc& t);
Expected<ir::Space> elementwiseHostSpace(const ir::Kernel& k, const TargetDesc& t);
Expected<ir::Space> attentionHostSpace(const ir::Kernel& k, const TargetDesc& t);

// Narrows knob domains: "MC=32|64|128,schedule=packed" keeps only those values (each must be
// in the knob's domain); the defaults move to the first kept value when theirs was dropped.
Expected<ir::Space> restrictSpace(const ir::Space& s, const std::string& spec);

// Values of `all` below `limit`, plus the smallest one at or above it: larger tiles would all
// behave like that one (they are clamped to the problem), so they are not separate choices.
std::vector<ir::KnobValue> clampDomain(const std::vector<int64_t>& all, int64_t limit);

// The largest integer value of `dom` that is <= want (the smallest one when none is).
int64_t pickAtMost(const std::vector<ir::KnobValue>& dom, int64_t want);

}  // namespace tessera::search
