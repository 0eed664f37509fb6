// Owns the service's half of the one legality rule (issue 47): a record's kernel text must parse,
// verify and be of its key's family, and a record's config must be one the tuner's own space for
// that kernel offers (search/config_rule.h, the same rule files the tuner builds spaces from): the
// host space of the key's ISA level, or the GPU space of its chip (search/space_gpu.h, over the
// code generator's plans, codegen/gpu_rules.h). Refusals are InvalidArgument naming the field, the
// knob and its domain; the HTTP layer answers 422.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "store/record.h"
#include "store/store.h"
#include "support/status.h"

namespace tessera::cache {

// A kernel text (already hashed to the key's workload, kernel_text.h) that parses, verifies and
// declares the key's family.
Status checkKernelTextKernel(const HardKey& k, std::string_view text, const std::string& path);

// `text`: the kernel text of the record's workload when the request or the store has it. Without
// one only the knob table (plausibility.h) speaks for the config: the space needs the kernel.
// GPU keys on a chip the table lacks are checked by the knob table only (they have no space).
Status checkConfigLegal(const Record& r, const std::optional<std::string>& text, const std::string& path);

// checkConfigLegal over a batch, each record with its workload's text from the batch itself (the
// client sends it once per workload) or else from `store`: the refusals as (index, message), at
// most `max` of them. `paths` names record i as "records[i]" (else unnamed).
struct LegalityRefusal {
  size_t index = 0;
  std::string message;
};
Expected<std::vector<LegalityRefusal>> legalityRefusals(RecordStore& store, const std::vector<Record>& records,
                                                        bool paths, size_t max = 50);

}  // namespace tessera::cache
