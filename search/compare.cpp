// Owns the side-by-side comparison of one kernel's winners on several targets and the derived
// "why they differ" lines.
#include "search/compare.h"

#include <cmath>
#include <cstdio>

#include "codegen/gpu_backend.h"
#include "ir/families.h"
#include "measure/estimate.h"
#include "measure/records.h"
#include "store/list_all.h"
#include "targets/gpu_skus.h"

namespace tessera::search {

using measure::estimateKernel;
using measure::hardKeyFor;

namespace {

std::string num(double v, const char* f = "%.0f") {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

const std::string* fact(const CompareRow& r, const std::string& name) {
  for (const auto& [n, v] : r.facts)
    if (n == name) return &v;
  return nullptr;
}

// The winner of one target: a measurement wins over an estimate; the local store over the
// shared cache; among estimates, the fastest prediction.
void findWinner(CompareRow& row, const cache::HardKey& key, cache::RecordStore* store, cache::CacheClient* client,
                const cache::Provenance& current) {
  const std::string keyId = cache::keyIdOf(key);
  if (store) {
    // Two products can share a key (the same chip and SM count): the product's own records first.
    auto b = row.target.isGpu() && !row.target.model.empty()
                 ? store->bestMatching(keyId, cache::Provenance{.cpu_model = row.target.model})
                 : store->best(keyId);
    if (b.ok() && !*b) b = store->best(keyId);
    if (b.ok() && *b) {
      row.record = (*b)->record;
      row.source = CompareRow::Source::Measured;
      row.from = "local";
      return;
    }
  }
  if (client && client->enabled()) {
    auto r = client->best(key, current, false);
    if (r.kind == cache::LookupResult::Kind::Hit && r.record) {
      row.record = r.record;
      row.source = CompareRow::Source::Measured;
      row.from = client->options().base_url;
      return;
    }
  }
  if (store) {
    auto all = cache::listAll(*store, {.key_id = keyId});
    if (all.ok())
      for (const auto& rec : *all)
        if (rec.status == cache::RecordStatus::Estimated && (!row.record || rec.median_us < row.record->median_us) &&
            (rec.provenance.cpu_model.empty() || rec.provenance.cpu_model == row.target.model))
          row.record = rec;
    if (row.record) {
      row.source = CompareRow::Source::Estimated;
      row.from = "local";
    }
  }
}

void describeHost(CompareRow& row) {
  for (const auto& [k, v] : row.config.values) {
    std::string s = std::holds_alternative<int64_t>(v) ? std::to_string(std::get<int64_t>(v)) : std::get<std::string>(v);
    row.facts.push_back({k, s});
  }
}

// How a line names a target: its chip, or its product when both sides are one chip (an RTX 4090 and
// an L4 are both sm_89).
std::string shortModel(const TargetDesc& t) {
  std::string m = t.model;
  for (const char* brand : {"NVIDIA ", "GeForce ", "AMD ", "Radeon "})
    if (m.rfind(brand, 0) == 0) m = m.substr(std::string(brand).size());
  return m;
}

// Why the targets' choices differ: rules over the facts of every pair of GPU rows with winners.
std::vector<std::string> whyTheyDiffer(const std::vector<CompareRow>& rows, const ir::Kernel& k) {
  std::vector<std::string> out;
  const bool compute = ir::isComputeBound(k);
  std::vector<const CompareRow*> gpus;
  for (const auto& r : rows)
    if (r.target.isGpu() && r.source != CompareRow::Source::None) gpus.push_back(&r);
  for (size_t i = 0; i < gpus.size(); ++i)
    for (size_t j = i + 1; j < gpus.size(); ++j) {
      const CompareRow& a = *gpus[i];
      const CompareRow& b = *gpus[j];
      // Copies named for this pair's lines.
      TargetDesc ta = a.target;
      TargetDesc tb = b.target;
      if (ta.name == tb.name) {
        ta.name = shortModel(ta);
        tb.name = shortModel(tb);
      }
      auto unitWord = [](const TargetDesc& t) { return t.words().warpsFormal; };
      if (ta.warpSize != tb.warpSize) {
        std::string s = ta.name + " schedules " + unitWord(ta) + " of " + std::to_string(ta.warpSize) + ", " + tb.name +
                        " " + unitWord(tb) + " of " + std::to_string(tb.warpSize);
        if (a.resources && b.resources)
          s += ": the winners run " + std::to_string(a.resources->threadsPerBlock) + " threads (" +
               std::to_string(a.resources->threadsPerBlock / std::max(ta.warpSize, 1)) + " " + unitWord(ta) + ") vs " +
               std::to_string(b.resources->threadsPerBlock) + " (" +
               std::to_string(b.resources->threadsPerBlock / std::max(tb.warpSize, 1)) + " " + unitWord(tb) + ") per block";
        out.push_back(s);
      }
      const std::string* ma = fact(a, "MMA");
      const std::string* mb = fact(b, "MMA");
      if (ma && mb && *ma != *mb) {
        std::string s = "matrix instructions: " + ta.name + " " + *ma + ", " + tb.name + " " + *mb;
        const auto* pa = codegen::gpuBackend(ta.vendor);
        const auto* pb = codegen::gpuBackend(tb.vendor);
        auto path = [&](const codegen::GpuBackend* p, const TargetDesc& t) {
          return p ? p->gemmMma(ir::kernelInputType(k), t) : std::nullopt;
        };
        auto xa = path(pa, ta), xb = path(pb, tb);
        // The backend's matrix path explains a winner only when the winner runs it (sm_90a's
        // wgmma winners are not its mma.sync path).
        if (xa && ma->find(xa->kind) == std::string::npos) xa.reset();
        if (xb && mb->find(xb->kind) == std::string::npos) xb.reset();
        if (xa && xb && xa->tnMultiple != xb->tnMultiple)
          s += " (warp tiles' N a multiple of " + std::to_string(xa->tnMultiple) + " vs " + std::to_string(xb->tnMultiple) + ")";
        if (xa && xa->shape.peakShare < 1)
          s += "; " + ta.name + "'s " + xa->kind + " sustains about " + num(100 * xa->shape.peakShare) + "% of its matrix peak";
        if (xb && xb->shape.peakShare < 1)
          s += "; " + tb.name + "'s " + xb->kind + " sustains about " + num(100 * xb->shape.peakShare) + "% of its matrix peak";
        out.push_back(s);
      }
      // Static plus the launch's dynamic shared memory (ptxas reports only the static part).
      auto shared = [](const CompareRow& r) { return r.resources ? r.resources->sharedBytes + r.resources->dynamicSharedBytes : 0; };
      const bool usesShared = shared(a) > 0 || shared(b) > 0;
      if (usesShared && (ta.smemPerBlockOptIn != tb.smemPerBlockOptIn || ta.smemPerBlock != tb.smemPerBlock)) {
        std::string s = "on-chip memory per block: " + ta.name + " " + num(double(ta.smemPerBlock) / 1024) + " KB static (" +
                        num(double(ta.smemPerBlockOptIn) / 1024) + " KB opt-in) shared memory, " + tb.name + " " +
                        num(double(tb.smemPerBlock) / 1024) + " KB " + tb.words().sharedMemory;
        if (a.resources && b.resources)
          s += "; the winners use " + num(double(shared(a)) / 1024, "%.1f") + " KB vs " + num(double(shared(b)) / 1024, "%.1f") + " KB";
        out.push_back(s);
      }
      const std::string* sa = fact(a, "stages");
      const std::string* sb = fact(b, "stages");
      if (sa && sb && *sa != *sb) out.push_back("copy pipelines: " + ta.name + " " + *sa + ", " + tb.name + " " + *sb);
      const std::string* ba = fact(a, "block tile");
      const std::string* bb = fact(b, "block tile");
      if (ba && bb && *ba != *bb) out.push_back("block tiles: " + ta.name + " " + *ba + ", " + tb.name + " " + *bb);
      if (a.resources && b.resources && a.resources->limiter != b.resources->limiter)
        out.push_back("occupancy: " + ta.name + " " + std::to_string(a.resources->blocksPerUnit) + " blocks per " + ta.words().unit +
                      " (limited by " + a.resources->limiter + "), " + tb.name + " " +
                      std::to_string(b.resources->blocksPerUnit) + " per " + tb.words().unit + " (limited by " +
                      b.resources->limiter + ")");
      if (ta.units != tb.units) {
        std::string s = std::to_string(ta.units) + " " + ta.words().units + " vs " + std::to_string(tb.units) + " " +
                        tb.words().units;
        const std::string* ga = fact(a, "waves");
        const std::string* gb = fact(b, "waves");
        if (ga && gb) s += ": waves of " + *ga + " on " + ta.name + ", " + *gb + " on " + tb.name;
        out.push_back(s);
      }
      // The ridge point: FLOPs a kernel must do per DRAM byte to be compute-bound. A GPU with a
      // higher one (less bandwidth per FLOP) wants tiles that reuse each loaded byte more.
      const ir::ScalarType in = ir::kernelInputType(k);
      const double ra = ta.computePeakGflops(in) / std::max(ta.memBandwidthGBs, 1.0);
      const double rb = tb.computePeakGflops(in) / std::max(tb.memBandwidthGBs, 1.0);
      if (compute && std::max(ra, rb) > 1.5 * std::min(ra, rb)) {
        const TargetDesc& hi = ra > rb ? ta : tb;
        std::string s = "FLOPs per DRAM byte to be compute-bound: " + ta.name + " " + num(ra) + ", " + tb.name + " " + num(rb) +
                        " (" + num(ta.computePeakGflops(in) / 1000) + " vs " + num(tb.computePeakGflops(in) / 1000) +
                        " TFLOP/s over " + num(ta.memBandwidthGBs) + " vs " + num(tb.memBandwidthGBs) + " GB/s): " + hi.name +
                        " needs more reuse per loaded byte";
        const std::string* ba2 = fact(a, "block tile");
        const std::string* bb2 = fact(b, "block tile");
        if (ba2 && bb2 && *ba2 != *bb2) s += ", hence its larger block tile";
        out.push_back(s);
      }
      if (!a.bound.empty() && !b.bound.empty() && a.bound != b.bound)
        out.push_back("the model finds " + ta.name + " " + a.bound + "-bound (" + num(ta.memBandwidthGBs / 1000, "%.2f") +
                      " TB/s, " + num(ta.computePeakGflops(ir::kernelInputType(k)) / 1000) + " TFLOP/s) and " + tb.name + " " +
                      b.bound + "-bound (" + num(tb.memBandwidthGBs / 1000, "%.2f") + " TB/s, " +
                      num(tb.computePeakGflops(ir::kernelInputType(k)) / 1000) + " TFLOP/s)");
    }
  return out;
}

}  // namespace

Expected<Comparison> compareTargets(const ir::Kernel& k, const std::vector<TargetDesc>& targets,
                                    cache::RecordStore* store, cache::CacheClient* client,
                                    const cache::Provenance& current) {
  Comparison c;
  c.kernel = k.name;
  const bool compute = ir::isComputeBound(k);
  for (const auto& t : targets) {
    CompareRow row;
    row.target = t;
    findWinner(row, hardKeyFor(k, t), store, client, current);
    if (!row.record) {
      auto chipDefault = defaultGpuOf(t.name == "sm_90a" ? "sm_90" : t.name);
      const bool product = t.isGpu() && chipDefault && (chipDefault->name != t.model || chipDefault->units != t.units);
      row.note = "no record: `tessera tune ... " + (product ? "--gpu \"" + t.model + "\"" : "--target " + t.name) +
                 (t.isGpu() ? " --estimate`" : "`") + " or --tune N";
      // What is stored nearby, and which key fields keep it from answering (another thread
      // count is the usual one: records of different --threads never answer for each other).
      const cache::HardKey key = hardKeyFor(k, t);
      if (store) {
        auto near = store->nearest(key, 1);
        if (near.ok() && !near->empty()) {
          std::string diff;
          for (const auto& d : cache::keyDifferences(key, near->front().record.key)) diff += (diff.empty() ? "" : "; ") + d;
          row.note += "; the nearest stored record differs in " + diff;
        }
      }
      c.rows.push_back(std::move(row));
      continue;
    }
    auto cfg = ir::Config::fromJson(row.record->config);
    if (!cfg.ok()) {
      row.note = "stored config does not parse: " + cfg.error().message;
      row.source = CompareRow::Source::None;
      c.rows.push_back(std::move(row));
      continue;
    }
    row.config = *cfg;
    row.timeUs = row.record->median_us;
    row.throughput = compute ? row.record->gflops : row.record->gbps;
    row.peakFraction = row.record->peak_fraction;
    if (!t.isGpu()) {
      describeHost(row);
      c.rows.push_back(std::move(row));
      continue;
    }
    auto bin = codegen::compileGpu(k, row.config, t, {.wantBinary = false});
    if (bin.ok()) row.resources = bin->resources;
    else row.note = "compile failed: " + bin.error().message;
    auto e = estimateKernel(k, row.config, t, row.resources ? &*row.resources : nullptr);
    if (e.ok()) {
      row.facts = e->facts;
      row.facts.push_back({"waves", std::to_string(e->model.waves) + " x " + std::to_string(e->model.blocksPerUnit) +
                                        " block(s) per unit, " + num(100 * e->model.waveEfficiency) + "% filled"});
      row.bound = e->model.bound;
      row.estimatedUs = e->model.timeUs;
    }
    c.rows.push_back(std::move(row));
  }
  c.why = whyTheyDiffer(c.rows, k);
  return c;
}

}  // namespace tessera::search
