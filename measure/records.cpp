// Owns TrialResult <-> cache::Record conversion and the hard key of a kernel on a target.
#include "measure/records.h"

#include <cmath>

#include "ir/families.h"
#include "ir/verifier.h"

namespace tessera::measure {

cache::RecordStatus recordStatusOf(TrialStatus s) {
  switch (s) {
    case TrialStatus::Ok: return cache::RecordStatus::Ok;
    case TrialStatus::InvalidConfig: return cache::RecordStatus::InvalidConfig;
    case TrialStatus::CompileError: return cache::RecordStatus::CompileError;
    case TrialStatus::Timeout: return cache::RecordStatus::Timeout;
    case TrialStatus::Crash: return cache::RecordStatus::Crash;
    case TrialStatus::WrongResult: return cache::RecordStatus::WrongResult;
  }
  return cache::RecordStatus::Crash;
}

std::optional<TrialStatus> trialStatusOf(cache::RecordStatus s) {
  switch (s) {
    case cache::RecordStatus::Ok: return TrialStatus::Ok;
    case cache::RecordStatus::InvalidConfig: return TrialStatus::InvalidConfig;
    case cache::RecordStatus::CompileError: return TrialStatus::CompileError;
    case cache::RecordStatus::Timeout: return TrialStatus::Timeout;
    case cache::RecordStatus::Crash: return TrialStatus::Crash;
    case cache::RecordStatus::WrongResult: return TrialStatus::WrongResult;
    case cache::RecordStatus::Estimated: return std::nullopt;
  }
  return std::nullopt;
}

cache::HardKey hardKeyFor(const ir::Kernel& k, const TargetDesc& t) {
  cache::HardKey key;
  key.family = ir::familyName(k.family);
  key.workload = ir::workloadHash(k);
  key.layout = "row";
  auto ins = k.inputs();
  key.dtype = ins.empty() ? "f32" : std::string(ir::typeName(ins[0]->dtype));
  switch (k.family) {
    case ir::Family::Gemm:
      if (auto g = ir::analyzeGemm(k); g.ok()) {
        if (g->batch) key.shape.push_back(g->batch);
        key.shape.insert(key.shape.end(), {g->m, g->n, g->k});
        if (g->transA || g->transB) key.layout = std::string(g->transA ? "tA" : "") + (g->transB ? "tB" : "");
      }
      break;
    case ir::Family::Attention:
      if (auto a = ir::analyzeAttention(k); a.ok()) {
        const auto& s = a->spec;
        key.shape = {s.batch, s.heads, s.heads_kv, s.seq_q, s.seq_kv, s.head_dim};
        if (s.causal) key.layout = "causal";
      }
      break;
    case ir::Family::Elementwise:
      if (auto r = ir::analyzeElementwise(k); r.ok()) key.shape = r->iter;
      break;
  }
  if (key.shape.empty()) key.shape = {1};
  key.target = t.name;
  key.arch = t.arch;
  key.units = t.units;
  return key;
}

costmodel::WorkloadDesc workloadOf(const cache::HardKey& key) {
  return {key.family, key.shape, key.layout, key.dtype};
}

cache::Provenance provenanceFor(const TargetDesc& t, const ProvenanceInputs& in) {
  cache::Provenance p;
  p.tessera_version = in.tesseraVersion;
  p.llvm_version = in.llvmVersion;
  p.cuda_version = in.cudaVersion;
  p.cpu_model = t.model;
  p.host = in.host;
  p.user = in.user;
  p.created_at = cache::utcNow();
  return p;
}

cache::Record toRecord(const TrialResult& r, const cache::HardKey& key, const cache::Provenance& p,
                       const TuningCost& cost) {
  cache::Record rec;
  rec.key = key;
  rec.provenance = p;
  if (const auto& o = r.origin) {  // measured by a worker: its machine, its toolchain
    cache::Provenance& q = rec.provenance;
    q.host = o->host;
    q.user = o->user;
    q.cpu_model = o->cpuModel;
    q.tessera_version = o->tesseraVersion;
    q.llvm_version = o->llvmVersion;
    q.cuda_version = o->cudaVersion;
    if (!o->createdAt.empty()) q.created_at = o->createdAt;
  }
  rec.config = r.config.toJson();
  rec.status = recordStatusOf(r.status);
  rec.n = r.samples.n;
  rec.median_us = r.samples.median_us;
  rec.p20_us = r.samples.p20_us;
  rec.p80_us = r.samples.p80_us;
  rec.gflops = r.gflops;
  rec.gbps = r.gbps;
  rec.peak_fraction = r.peakFraction;
  rec.max_abs_err = std::isfinite(r.maxAbsErr) ? r.maxAbsErr : 1e300;
  rec.max_rel_err = std::isfinite(r.maxRelErr) ? r.maxRelErr : 1e300;
  rec.trials = cost.trials;
  rec.tuning_seconds = cost.seconds;
  if (r.estimated && r.ok()) {  // a prediction: its model and bound, no samples behind it
    rec.status = cache::RecordStatus::Estimated;
    rec.n = 0;
    rec.estimator = r.estimator;
    rec.bound = r.bound;
  }
  (void)cache::finalizeRecord(rec);
  return rec;
}

std::vector<TrialResult> fromRecords(const std::vector<cache::Record>& records) {
  std::vector<TrialResult> out;
  for (const auto& rec : records) {
    auto cfg = ir::Config::fromJson(rec.config);
    if (!cfg.ok()) continue;
    TrialResult r;
    r.config = *cfg;
    auto st = trialStatusOf(rec.status);
    if (!st) continue;  // estimated: not a measurement
    r.status = *st;
    copyMeasurement(rec, r);
    // Same measure as the host measurer: GB/s for bandwidth-bound elementwise kernels, GFLOP/s
    // otherwise; 1000/time for records without either (imported tables).
    double t = rec.key.family == "elementwise" ? rec.gbps : rec.gflops;
    r.throughput = t > 0 ? t : (rec.median_us > 0 ? 1e3 / rec.median_us : 0);
    if (!r.ok()) r.throughput = 0;
    out.push_back(std::move(r));
  }
  return out;
}

void copyMeasurement(const cache::Record& rec, TrialResult& r) {
  r.samples.n = rec.n;
  r.samples.median_us = rec.median_us;
  r.samples.p20_us = rec.p20_us;
  r.samples.p80_us = rec.p80_us;
  r.gflops = rec.gflops;
  r.gbps = rec.gbps;
  r.peakFraction = rec.peak_fraction;
  r.maxAbsErr = rec.max_abs_err;
  r.maxRelErr = rec.max_rel_err;
}

}  // namespace tessera::measure
