// Owns the mapping between tuning results and cache records: the hard key of a (kernel, target),
// this process's provenance, TrialResult <-> Record.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "store/record.h"
#include "costmodel/features.h"
#include "ir/ir.h"
#include "measure/trial.h"
#include "targets/target_desc.h"

namespace tessera::measure {

// family, workload hash, shape (gemm: [batch,] M, N, K; attention: B, H, Hkv, Sq, Skv, D;
// elementwise: the iteration space), dtype, layout (gemm: row/tA/tB/tAtB), target name/arch/units.
cache::HardKey hardKeyFor(const ir::Kernel& k, const TargetDesc& t);
// What the derived cost-model features see of a key (its family, shape, layout and dtype).
costmodel::WorkloadDesc workloadOf(const cache::HardKey& key);

struct ProvenanceInputs {
  std::string tesseraVersion, llvmVersion, cudaVersion, host, user;
};
cache::Provenance provenanceFor(const TargetDesc& t, const ProvenanceInputs& in);

// Record status <-> trial status (estimated records are not measurements: nullopt).
std::optional<TrialStatus> trialStatusOf(cache::RecordStatus s);
cache::RecordStatus recordStatusOf(TrialStatus s);

struct TuningCost {
  int64_t trials = 0;
  double seconds = 0;
};
cache::Record toRecord(const TrialResult& r, const cache::HardKey& key, const cache::Provenance& p,
                       const TuningCost& cost = {});
// Records of one key back into results (configs parsed from JSON); records whose config does
// not parse are skipped.
std::vector<TrialResult> fromRecords(const std::vector<cache::Record>& records);

// A record's measured values on a trial (samples, throughputs, peak fraction, errors): what every
// reading of a record as a trial copies; its config, status and throughput are the caller's.
void copyMeasurement(const cache::Record& rec, TrialResult& r);

}  // namespace tessera::measure
