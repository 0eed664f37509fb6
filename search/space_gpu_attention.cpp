// Owns the GPU attention space (codegen/gpu_attention.cpp): query rows per block BQ, keys per
// block BK and the head_dim split DSPLIT (threads per query row; threads = BQ*DSPLIT, a whole
// number of warps). Legality: the code generator's rules (threads, shared memory/LDS, divisibility)
// plus a register estimate of the compute phase (BK scores and BK probabilities per thread).
#include <algorithm>

#include "codegen/gpu.h"
#include "ir/families.h"
#include "search/space.h"
#include "search/space_gpu.h"

namespace tessera::search {

Expected<ir::Space> attentionGpuSpace(const ir::Kernel& k, const TargetDesc& t) {
  TESSERA_ASSIGN(ir::AttentionInfo info, ir::analyzeAttention(k));
  const ir::AttentionSpec& a = info.spec;
  ir::Space s;
  s.family = "attention";
  std::vector<ir::KnobValue> bq = {int64_t(16), int64_t(32), int64_t(64), int64_t(128)};
  std::vector<ir::KnobValue> bk = {int64_t(8), int64_t(16), int64_t(32), int64_t(64)};
  std::vector<ir::KnobValue> ds = {int64_t(1), int64_t(2), int64_t(4), int64_t(8)};
  s.knobs = {
      {"BQ", bq, int64_t(64), "query rows per block"},
      {"BK", bk, int64_t(32), "keys per block staged in shared memory / LDS"},
      {"DSPLIT", ds, int64_t(1), "threads per query row (head_dim split); threads = BQ*DSPLIT"},
  };
  ir::Kernel kc = k;
  TargetDesc tc = t;
  const int64_t SQ = a.seq_q;
  s.constraint = [kc, tc](const ir::Config& c) -> std::optional<std::string> {
    Status st = codegen::checkGpuConfig(kc, c, tc);
    if (!st.ok()) return st.error().message;
    int64_t BQ = std::get<int64_t>(c.values.at("BQ")), BK = std::get<int64_t>(c.values.at("BK"));
    if (2 * BK + 48 > std::min(tc.maxRegsPerThread, 255))
      return "BK=" + std::to_string(BK) + " keeps about " + std::to_string(2 * BK + 48) + " values per thread in registers";
    (void)BQ;
    return std::nullopt;
  };
  // Default: the recipe's shape (BQ=64 rows, BK=32 keys, one thread per row) when legal, else the
  // first legal one trading key block, then head_dim split, then query block, preferring query
  // blocks that do not exceed the sequence (48 KB static shared memory bounds large head_dims).
  std::vector<std::array<int64_t, 3>> prefs;
  for (int64_t q : {64, 32, 128, 16})
    for (int64_t kk : {32, 16, 8, 64})
      for (int64_t d : {1, 2, 4, 8}) prefs.push_back({q, kk, d});
  std::stable_sort(prefs.begin(), prefs.end(), [SQ](const auto& x, const auto& y) {
    auto fits = [SQ](int64_t q) { return q <= std::max<int64_t>(16, (SQ + 15) / 16 * 16); };
    return fits(x[0]) > fits(y[0]);
  });
  for (const auto& [q, kk, d] : prefs) {
    ir::Config c;
    c.set("BQ", q);
    c.set("BK", kk);
    c.set("DSPLIT", d);
    if (!s.check(c)) {
      s.knobs[0].def = q;
      s.knobs[1].def = kk;
      s.knobs[2].def = d;
      break;
    }
  }
  return s;
}

}  // namespace tessera::search
