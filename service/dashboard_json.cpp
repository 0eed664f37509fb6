// Owns the dashboard's JSON documents (dashboard_json.h).
#include "service/dashboard_json.h"

#include <algorithm>

#include "store/record_json.h"
#include "service/roofline.h"

namespace tessera::cache {

using nlohmann::json;

namespace {

std::string_view labelName(KernelLabel l) {
  switch (l) {
    case KernelLabel::Measured: return "measured";
    case KernelLabel::Estimated: return "estimated";
    case KernelLabel::Failed: return "failed";
    case KernelLabel::Quarantined: return "quarantined";
    case KernelLabel::Any: break;
  }
  return "any";
}

json throughputJson(const Record& r) {
  const bool memory = memoryBoundFamily(r.key.family);
  return json{{"value", memory ? r.gbps : r.gflops}, {"unit", memory ? "GB/s" : "GFLOP/s"}};
}

double dtypePeak(const GpuPeakRow& g, const std::string& dtype) {
  if (dtype == "f32") return g.gflops_f32;
  if (dtype == "f16") return g.gflops_f16;
  if (dtype == "bf16") return g.gflops_bf16;
  return std::max({g.gflops_f32, g.gflops_f16, g.gflops_bf16});
}

}  // namespace

bool memoryBoundFamily(std::string_view family) { return family == "elementwise"; }

json kernelRowJson(const KernelRow& row) {
  json j{{"key_id", row.key_id},
         {"key", hardKeyToJson(row.key)},
         {"label", labelName(row.label)},
         {"records", row.records},
         {"newest_id", row.newest_id},
         {"newest_measured", row.newest_measured},
         {"shown", nullptr}};
  if (row.shown) {
    j["shown"] = recordToJson(*row.shown);
    j["throughput"] = throughputJson(*row.shown);
    j["stale"] = row.shown->stale;
  }
  return j;
}

json kernelPageJson(const KernelPage& page, const KernelQuery& q, RecordStore* store) {
  json rows = json::array();
  for (const KernelRow& r : page.rows) {
    json row = kernelRowJson(r);
    // Whether the kernel can be compiled again from this store (its text is in the kernel table).
    if (store) {
      auto text = store->kernelText(r.key.workload);
      row["rebuildable"] = text.ok() && text->has_value();
    }
    rows.push_back(std::move(row));
  }
  return json{{"total", page.total}, {"offset", q.offset}, {"limit", q.limit}, {"kernels", std::move(rows)}};
}

json rooflineJson(const KernelRow& row) {
  const HardKey& k = row.key;
  json j{{"compute_gflops", nullptr}, {"bandwidth_gbs", nullptr}, {"intensity", nullptr}};
  if (auto w = minimumWork(k)) {
    j["min_flops"] = w->flops;
    j["min_bytes"] = w->bytes;
  }
  const Record* r = row.shown ? &*row.shown : nullptr;
  // Every record of a key counts the same FLOPs and bytes, so one record's ratio is the key's.
  if (r && r->gflops > 0 && r->gbps > 0) {
    j["intensity"] = r->gflops / r->gbps;
    j["intensity_source"] = "the tuner's FLOP and byte counts of this kernel";
  } else if (auto w = minimumWork(k); w && w->flops > 0 && w->bytes > 0) {
    j["intensity"] = w->flops / w->bytes;
    j["intensity_source"] = "the minimum work of the key (each operand read or written once)";
  } else {
    j["intensity_source"] = "no FLOP count for this kernel";
  }
  size_t n = 0;
  const GpuPeakRow* rows = gpuPeakRows(&n);
  for (size_t i = 0; i < n; ++i) {
    if (k.target != rows[i].name) continue;
    const double scale = std::max(1.0, static_cast<double>(k.units) / rows[i].units);
    j["compute_gflops"] = dtypePeak(rows[i], k.dtype) * scale;
    j["bandwidth_gbs"] = rows[i].gbs_dram * scale;
    j["compute_source"] = std::string(rows[i].name) + " " + k.dtype + " peak (target table)";
    j["bandwidth_source"] = std::string(rows[i].name) + " DRAM bandwidth (target table)";
    // Another product of the chip (an L4 is sm_89 like the table's RTX 4090): the peak its record
    // was measured against is that product's own.
    const bool compute = !memoryBoundFamily(k.family);
    if (r && k.units != rows[i].units && r->peak_fraction > 0 && (compute ? r->gflops : r->gbps) > 0) {
      j[compute ? "compute_gflops" : "bandwidth_gbs"] = (compute ? r->gflops : r->gbps) / r->peak_fraction;
      j[compute ? "compute_source" : "bandwidth_source"] =
          std::string("the peak the tuner measured against on ") + (r->provenance.cpu_model.empty() ? k.target : r->provenance.cpu_model);
      j[compute ? "bandwidth_source" : "compute_source"] =
          std::string(rows[i].name) + "'s default product (target table; this key has " + std::to_string(k.units) + " units)";
    }
    return j;
  }
  const bool memory = memoryBoundFamily(k.family);
  const std::string where = r && !r->provenance.cpu_model.empty() ? " on " + r->provenance.cpu_model : "";
  if (r && r->peak_fraction > 0 && (memory ? r->gbps : r->gflops) > 0) {
    const double roof = (memory ? r->gbps : r->gflops) / r->peak_fraction;
    j[memory ? "bandwidth_gbs" : "compute_gflops"] = roof;
    j[memory ? "bandwidth_source" : "compute_source"] =
        std::string(memory ? "the copy bandwidth" : "the FMA peak") + " the tuner measured against" + where;
  }
  if (j[memory ? "compute_gflops" : "bandwidth_gbs"].is_null())
    j[memory ? "compute_source" : "bandwidth_source"] =
        std::string("unknown: records of ") + k.family + " on " + k.target + " carry only their " +
        (memory ? "bandwidth" : "compute") + " share";
  return j;
}

Expected<json> kernelSummaryJson(RecordStore& store, const std::string& key_id) {
  KernelQuery q;
  q.key_id = key_id;
  q.limit = 1;
  TESSERA_ASSIGN(KernelPage page, store.kernels(q));
  if (page.rows.empty()) return makeError(ErrorCode::NotFound, "no kernel with key_id " + key_id);
  const KernelRow& row = page.rows.front();
  json j = kernelRowJson(row);
  j["roofline"] = rooflineJson(row);
  // The kernel itself, as its canonical IR text (the anonymized print whose SHA-256 is the
  // workload), when the kernel table holds it: what bundle --all-winners and compare rebuild from.
  TESSERA_ASSIGN(auto text, store.kernelText(row.key.workload));
  j["rebuildable"] = text.has_value();
  j["kernel_text"] = text ? json(*text) : json(nullptr);
  json near = json::array();
  TESSERA_ASSIGN(auto matches, store.nearest(row.key, 9));
  for (const NearestMatch& m : matches) {
    if (m.record.key_id == key_id || near.size() >= 8) continue;
    const Record& w = m.record;
    near.push_back(json{{"key_id", w.key_id},
                        {"shape", w.key.shape},
                        {"layout", w.key.layout},
                        {"median_us", w.median_us},
                        {"gflops", w.gflops},
                        {"gbps", w.gbps},
                        {"peak_fraction", w.peak_fraction},
                        {"intensity", w.gflops > 0 && w.gbps > 0 ? json(w.gflops / w.gbps) : json(nullptr)},
                        {"distance", m.distance}});
  }
  j["nearest"] = std::move(near);
  return j;
}

}  // namespace tessera::cache
