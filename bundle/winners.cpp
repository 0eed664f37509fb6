// Owns rebuilding kernels from a store's winners (see winners.h).
#include "bundle/winners.h"

#include <cctype>
#include <set>

#include "ir/builders.h"
#include "ir/text.h"
#include "ir/verifier.h"
#include "store/list_all.h"

namespace tessera::bundle {
namespace {

// Kernels that the key could describe; the caller keeps the one whose hash matches.
std::vector<ir::Kernel> guesses(const cache::HardKey& key) {
  std::vector<ir::Kernel> out;
  auto dt = ir::parseDType(key.dtype);
  if (!dt) return out;
  const auto& s = key.shape;
  if (key.family == "gemm" && (s.size() == 3 || s.size() == 4)) {
    ir::GemmSpec g;
    size_t o = s.size() - 3;
    g.batch = o ? s[0] : 0;
    g.m = s[o];
    g.n = s[o + 1];
    g.k = s[o + 2];
    g.dtype = *dt;
    g.transA = key.layout.find("tA") != std::string::npos;
    g.transB = key.layout.find("tB") != std::string::npos;
    if (auto k = ir::buildGemm(g); k.ok()) out.push_back(std::move(*k));
  } else if (key.family == "attention" && s.size() == 6) {
    ir::AttentionSpec a;
    a.batch = s[0];
    a.heads = s[1];
    a.heads_kv = s[2];
    a.seq_q = s[3];
    a.seq_kv = s[4];
    a.head_dim = s[5];
    a.causal = key.layout == "causal";
    a.dtype = *dt;
    if (auto k = ir::buildAttention(a); k.ok()) out.push_back(std::move(*k));
  }
  return out;
}

// The kernel from the store's kernel table (store/kernel_text.h): parsed within the
// parser's limits, verified, and hashed again, so that only the kernel the key names comes back.
// Any family: fused elementwise chains and GEMMs with epilogues included.
std::optional<ir::Kernel> fromKernelTable(cache::RecordStore& store, const cache::Record& r) {
  auto text = store.kernelText(r.key.workload);
  if (!text.ok() || !*text) return std::nullopt;
  auto k = ir::parseKernel(**text);
  if (!k.ok() || !ir::verify(*k).ok() || ir::workloadHash(*k) != r.key.workload) return std::nullopt;
  // The stored text is anonymized (the hash's form): a name from the key, for the bundle's files.
  std::string shape = cache::formatShape(r.key.shape);
  k->name = r.key.family + "_" + shape + "_" + r.key.dtype + "_" + r.key.workload.substr(0, 8);
  for (char& c : k->name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
  return std::move(*k);
}

// The shared cache's winners for one target, paged (at most 100000, like the store's).
Expected<std::vector<cache::Record>> sharedWinners(cache::CacheClient& client, const std::string& target) {
  std::vector<cache::Record> out;
  cache::ListQuery q;
  q.target = target;
  q.winners_only = true;
  q.limit = cache::kMaxListLimit;
  while (out.size() < 100000) {
    TESSERA_ASSIGN(cache::ListPage page, client.list(q));
    for (auto& r : page.records) out.push_back(std::move(r));
    if (page.next_after <= q.after_id) break;
    q.after_id = page.next_after;
  }
  return out;
}

}  // namespace

Expected<WinnerKernels> kernelsFromWinners(cache::RecordStore& store, const std::vector<TargetDesc>& targets,
                                           cache::CacheClient* client) {
  WinnerKernels out;
  std::set<std::string> seen;
  for (const auto& t : targets) {
    cache::ListQuery q;
    q.target = t.name;
    q.winners_only = true;
    TESSERA_ASSIGN(auto winners, cache::listAll(store, q, 100000));
    if (client && client->enabled()) {
      auto shared = sharedWinners(*client, t.name);
      if (!shared.ok()) {
        if (out.warning.empty()) out.warning = "the shared cache's winners: " + shared.error().message;
      } else {
        cache::KernelTextReport rep = cache::fetchKernelTexts(store, *client, *shared);
        if (out.warning.empty()) out.warning = rep.warning;
        out.shared += shared->size();
        for (auto& r : *shared) winners.push_back(std::move(r));
      }
    }
    for (const cache::Record& r : winners) {
      if (!seen.insert(r.key.workload).second) continue;
      bool rebuilt = false;
      if (auto k = fromKernelTable(store, r)) {
        KernelRequest req{std::move(*k), "store winner " + r.key_id.substr(0, 12)};
        // A host key tuned on fewer threads than the target's cores is bundled as tuned.
        if (!t.isGpu() && r.key.units < t.units) req.threads = int(r.key.units);
        out.kernels.push_back(std::move(req));
        continue;
      }
      for (auto& k : guesses(r.key)) {
        if (ir::workloadHash(k) != r.key.workload) continue;
        out.kernels.push_back({std::move(k), "store winner " + r.key_id.substr(0, 12)});
        rebuilt = true;
        break;
      }
      if (!rebuilt)
        out.notRebuilt.push_back(r.key.family + " " + cache::formatShape(r.key.shape) + " " + r.key.dtype + " " +
                                 r.key.layout + " (key " + r.key_id.substr(0, 12) + ")");
    }
  }
  return out;
}

}  // namespace tessera::bundle
