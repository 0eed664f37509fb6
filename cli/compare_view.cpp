// Owns the comparison's cells, rows and JSON (compare_view.h), shared by `tessera compare` and
// the dashboard's Compare page.
#include "cli/compare_view.h"

#include <cstdio>

#include "store/record_json.h"
#include "cli/report.h"
#include "ir/builders.h"
#include "ir/families.h"
#include "ir/text.h"
#include "ir/verifier.h"
#include "measure/records.h"
#include "targets/target_desc.h"

namespace tessera::cli {

const char* compareSourceName(search::CompareRow::Source s) {
  switch (s) {
    case search::CompareRow::Source::Measured: return "measured";
    case search::CompareRow::Source::Estimated: return "estimated";
    case search::CompareRow::Source::None: return "none";
  }
  return "none";
}

const std::vector<std::string>& compareAttributes() {
  static const std::vector<std::string> attrs = {
      "winner",       "config",        "time",          "throughput", "bound",      "model vs measured",
      "strategy",     "block tile",    "warp tile",     "thread tile", "K step",    "stages",
      "head_dim split", "key blocks",  "vectors per thread", "vector width", "threads", "MMA",
      "grid",         "waves",         "registers",     "shared memory", "spills",  "occupancy"};
  return attrs;
}

std::string compareCell(const search::CompareRow& r, const std::string& what, const ir::Kernel& k) {
  const bool gpu = r.target.isGpu();
  if (what == "winner") {
    if (r.source == search::CompareRow::Source::None) return r.note.empty() ? "-" : "none";
    std::string s = compareSourceName(r.source);
    if (r.source == search::CompareRow::Source::Estimated && r.record) s += " (" + r.record->estimator + ")";
    if (r.from != "local") s += " [shared cache]";
    return s;
  }
  if (r.source == search::CompareRow::Source::None) return "";
  if (what == "config") return r.config.str();
  if (what == "time") return fmtTime(r.timeUs) + (r.source == search::CompareRow::Source::Estimated ? " (predicted)" : "");
  if (what == "throughput") {
    std::string s = fmtThroughput(k, r.throughput);
    return s + " (" + peakShareText(r.peakFraction, "peak") + ")";
  }
  if (what == "bound") return r.bound;
  if (what == "model vs measured" && gpu && r.source == search::CompareRow::Source::Measured && r.estimatedUs > 0) {
    char b[64];
    std::snprintf(b, sizeof b, "%s predicted (%+.0f%%)", fmtTime(r.estimatedUs).c_str(), 100 * (r.estimatedUs / r.timeUs - 1));
    return b;
  }
  if (r.resources) {
    const auto& res = *r.resources;
    char b[160];
    if (what == "registers") {
      if (res.vendor == Vendor::Amd) std::snprintf(b, sizeof b, "%d VGPR + %d AGPR, %d SGPR", res.vgprs, res.agprs, res.sgprs);
      else std::snprintf(b, sizeof b, "%d per thread", res.registers);
      return b;
    }
    if (what == "shared memory") {
      // Static plus the launch's dynamic shared memory (ptxas reports only the static part).
      std::snprintf(b, sizeof b, "%.1f KB %s", double(res.sharedBytes + res.dynamicSharedBytes) / 1024,
                    vendorWords(res.vendor).sharedShort);
      return b;
    }
    if (what == "spills") return res.spills() ? "yes" : "none";
    if (what == "occupancy") {
      std::snprintf(b, sizeof b, "%d blocks, %.0f%% (%s)", res.blocksPerUnit, 100 * res.occupancy, res.limiter.c_str());
      return b;
    }
  }
  for (const auto& [n, v] : r.facts)
    if (n == what) return v;
  return "";
}

nlohmann::json compareJson(const search::Comparison& c, const ir::Kernel& k) {
  nlohmann::json j = {{"kernel", c.kernel}, {"attributes", compareAttributes()}, {"why", c.why},
                      {"targets", nlohmann::json::array()}};
  for (const auto& r : c.rows) {
    nlohmann::json row = {{"target", r.target.name}, {"model", r.target.model}, {"source", compareSourceName(r.source)},
                          {"facts", nlohmann::json::object()}};
    if (!r.note.empty()) row["note"] = r.note;
    for (const auto& a : compareAttributes())
      if (auto v = compareCell(r, a, k); !v.empty()) row["facts"][a] = v;
    if (r.source != search::CompareRow::Source::None) {
      row["config"] = nlohmann::json::parse(r.config.toJson());
      row["time_us"] = r.timeUs;
      row[ir::isComputeBound(k) ? "gflops" : "gbps"] = r.throughput;
      row["peak_fraction"] = r.peakFraction;
      if (!r.bound.empty()) row["bound"] = r.bound;
      if (r.estimatedUs > 0) row["estimated_us"] = r.estimatedUs;
      if (r.record) row["record"] = cache::recordToJson(*r.record);
    }
    j["targets"].push_back(row);
  }
  return j;
}

Expected<ir::Kernel> kernelFromKey(const cache::HardKey& key) {
  auto dt = ir::parseDType(key.dtype);
  if (!dt) return makeError(ErrorCode::Unsupported, "the key's dtype '" + key.dtype + "' is not a kernel dtype");
  const auto& s = key.shape;
  Expected<ir::Kernel> k = makeError(ErrorCode::Unsupported, "");
  if (key.family == "gemm" && (s.size() == 3 || s.size() == 4) &&
      (key.layout == "row" || key.layout == "tA" || key.layout == "tB" || key.layout == "tAtB")) {
    ir::GemmSpec g;
    g.batch = s.size() == 4 ? s[0] : 0;
    g.m = s[s.size() - 3];
    g.n = s[s.size() - 2];
    g.k = s.back();
    g.dtype = *dt;
    g.transA = key.layout == "tA" || key.layout == "tAtB";
    g.transB = key.layout == "tB" || key.layout == "tAtB";
    k = ir::buildGemm(g);
  } else if (key.family == "attention" && s.size() == 6 && (key.layout == "row" || key.layout == "causal")) {
    ir::AttentionSpec a;
    a.batch = s[0];
    a.heads = s[1];
    a.heads_kv = s[2];
    a.seq_q = s[3];
    a.seq_kv = s[4];
    a.head_dim = s[5];
    a.causal = key.layout == "causal";
    a.dtype = *dt;
    k = ir::buildAttention(a);
  } else if (key.family == "elementwise") {
    return makeError(ErrorCode::Unsupported,
                     "the key of an elementwise kernel does not hold its expression and this store has no text of "
                     "it: compare it by its IR text (tessera compile elementwise ... --emit ir)");
  }
  if (!k.ok() || ir::workloadHash(*k) != key.workload)
    return makeError(ErrorCode::Unsupported,
                     "this key's kernel has parts its key does not hold (an epilogue, alpha/beta or a scale) and this "
                     "store has no text of it: compare it by its IR text (tessera compile ... --emit ir)");
  return k;
}

Expected<ir::Kernel> kernelFromText(const std::string& workload, const std::string& text) {
  const std::string shortHash = workload.substr(0, 12);
  auto k = ir::parseKernel(text);
  if (!k.ok()) return makeError(ErrorCode::InvalidArgument, "kernel text " + shortHash + ": " + k.error().message);
  if (Status v = ir::verify(*k); !v.ok())
    return makeError(ErrorCode::InvalidArgument, "kernel text " + shortHash + ": " + v.error().message);
  if (ir::workloadHash(*k) != workload)
    return makeError(ErrorCode::InvalidArgument, "kernel text " + shortHash + " is not the kernel of that hash");
  k->name = std::string(ir::familyName(k->family)) + "_" + workload.substr(0, 8);
  return std::move(*k);
}

Expected<std::string> serveCompare(cache::RecordStore& store, const cache::CompareRequest& req) {
  ir::Kernel k;
  if (req.key) {
    // Plain GEMM and attention from the key (checked against its workload hash: the same kernel
    // as its text, under the name `tessera compare` gives it from its flags); every other kernel,
    // fused chains and epilogues included, from the store's kernel table. Without a text either,
    // the key's refusal says how to compare it instead.
    auto fromKey = kernelFromKey(*req.key);
    if (fromKey.ok()) {
      k = std::move(*fromKey);
    } else {
      TESSERA_ASSIGN(auto text, store.kernelText(req.key->workload));
      if (!text) return fromKey.takeError();
      TESSERA_ASSIGN(k, kernelFromText(req.key->workload, *text));
    }
  } else {
    auto parsed = ir::parseKernel(req.kernel_text);
    if (!parsed.ok()) return makeError(ErrorCode::InvalidArgument, "kernel: " + parsed.error().message);
    if (Status v = ir::verify(*parsed); !v.ok()) return makeError(ErrorCode::InvalidArgument, "kernel: " + v.error().message);
    k = std::move(*parsed);
  }
  std::vector<TargetDesc> targets;
  for (const std::string& name : req.targets) {
    auto t = getTarget(name);
    if (!t.ok()) return makeError(ErrorCode::InvalidArgument, "targets: " + t.error().message);
    // The host row answers for the key's thread count when the key is a host key.
    if (t->vendor == Vendor::Host && req.key && req.key->target == "host" && req.key->units != t->units) {
      auto with = hostTargetWithThreads(static_cast<int>(req.key->units));
      if (with.ok()) t = std::move(with);
    }
    targets.push_back(*t);
  }
  cache::Provenance current;
  auto cmp = search::compareTargets(k, targets, &store, nullptr, current);
  if (!cmp.ok()) return makeError(cmp.error().code == ErrorCode::IOError ? ErrorCode::IOError : ErrorCode::InvalidArgument,
                                  cmp.error().message);
  return cache::dumpJson(compareJson(*cmp, k));
}

}  // namespace tessera::cli
