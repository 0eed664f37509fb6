// Owns the one legality rule for a config outside a tune (issue 47): the schedule spaces built for
// a record's key, host (search/space_gemm.cpp, space_elementwise.cpp, space_attention.cpp) or GPU
// (space_gpu_gemm.cpp, space_gpu_elementwise.cpp, space_gpu_attention.cpp over the code
// generator's plans, codegen/gpu_rules.h), so that the cache service refuses what the tuner's own
// space could not run. These files and this rule form the MLIR-free library tessera_space_rules
// (with tessera_gpu_rules), which the service links.
#pragma once

#include <string>

#include "ir/ir.h"
#include "ir/schedule.h"
#include "support/status.h"
#include "targets/target_desc.h"

namespace tessera::search {

// The host space of kernel `k` on host target `t` (the family's rule file).
Expected<ir::Space> hostSpace(const ir::Kernel& k, const TargetDesc& t);

// The host a key names, for the legality rule: the most capable x86 machine of ISA level `arch`
// ("x86-64", "x86-64-v2|v3|v4": its vector width and registers, every optional unit of the level
// such as AMX and vdpbf16ps) with `units` threads. A space built on it offers every value any
// writer of that key could have been offered, so no honest record is refused. Other arches are
// InvalidArgument.
Expected<TargetDesc> hostOfKey(const std::string& arch, int units);

// The GPU chip a key names (a row of targets/gpu_targets.h, `units` SMs/CUs) for the legality
// rule: its space is gpuRuleSpace (search/space_gpu.h). NotFound for a name the table lacks.
Expected<TargetDesc> gpuOfKey(const std::string& chip, int units);

// Whether `config` (a JSON object; knobs it omits take the space's defaults, as `tessera run`
// completes them) is a config of space `s`: every knob the space's, every value in its domain,
// the cross-knob constraint. InvalidConfig naming the knob and its domain, or the constraint's reason.
Status checkConfigInSpace(const ir::Space& s, const std::string& config);

}  // namespace tessera::search
