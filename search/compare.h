// Owns comparing one kernel's winners across targets side by side (issue 13 item 4; `tessera
// compare`, the Python API): per target the winner — measured, else estimated, always labelled —
// from the local store or the shared cache, its tile choices, the compiler's resources and
// occupancy, time, throughput and share of the target's peak, the model's bound (and, when a
// measurement exists, how far the estimate was from it), plus a few lines on why the choices
// differ, derived from the targets' facts (wave64 vs warp32, LDS vs shared memory, MFMA vs
// mma.sync shapes, async copies, units and waves).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "client/client.h"
#include "store/record.h"
#include "store/store.h"
#include "codegen/gpu.h"
#include "ir/ir.h"
#include "ir/schedule.h"
#include "support/status.h"
#include "targets/target_desc.h"

namespace tessera::search {

struct CompareRow {
  TargetDesc target;
  enum class Source { None, Measured, Estimated };
  Source source = Source::None;
  std::string from;  // "local" | the service URL
  std::optional<cache::Record> record;
  ir::Config config;
  std::vector<std::pair<std::string, std::string>> facts;  // tile choices, threads, MMA, grid
  std::optional<codegen::ResourceReport> resources;          // GPU targets
  double timeUs = 0, throughput = 0, peakFraction = 0;       // GFLOP/s (compute-bound) or GB/s
  std::string bound;          // the analytic model's (GPU)
  double estimatedUs = 0;     // the model's prediction for this config (GPU; 0: none)
  std::string note;           // why a field is missing ("no record", "compile failed: ...")
};

struct Comparison {
  std::string kernel;
  std::vector<CompareRow> rows;  // in the order asked
  std::vector<std::string> why;  // derived differences between the targets' choices
};

// Reads each target's winner (local store first, then the shared cache) and fills the rows.
// `store` and `client` may be null.
Expected<Comparison> compareTargets(const ir::Kernel& k, const std::vector<TargetDesc>& targets,
                                    cache::RecordStore* store, cache::CacheClient* client,
                                    const cache::Provenance& current);

}  // namespace tessera::search
