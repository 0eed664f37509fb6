// Owns the GPU attention space (codegen/gpu_attention*.cpp): the strategy (flash-simt, flash-mma on
// NVIDIA tensor cores, flash-mfma on AMD matrix cores), query rows per block BQ, keys per block BK,
// the head_dim split DSPLIT (flash-simt: threads per query row), STAGES, and on CDNA the waves per
// block and the MFMA shape, and on sm_90a flash-wgmma's pipeline (PIPE: fa2 or fa3). Legality: the code generator's rules (threads, shared memory/LDS, divisibility)
// plus a register estimate of the compute phase (BK scores and BK probabilities per thread).
#include <algorithm>

#include "codegen/gpu_rules.h"
#include "ir/families.h"
#include "search/space.h"
#include "search/space_gpu.h"

namespace tessera::search {

Expected<ir::Space> attentionGpuSpace(const ir::Kernel& k, const TargetDesc& t) {
  TESSERA_ASSIGN(ir::AttentionInfo info, ir::analyzeAttention(k));
  const ir::AttentionSpec& a = info.spec;
  ir::Space s;
  s.family = "attention";
  // flash-mma (tensor cores, codegen/nvidia/gpu_attention_mma.cpp) where mma.sync takes the input type
  // and the head dim is a multiple of 16 up to 256; flash-simt (FMA pipes) everywhere.
  using codegen::attentionMmaPath;
  using codegen::MmaFamily;
  const bool mma = attentionMmaPath(MmaFamily::MmaSync, ir::ScalarType::F16, t) &&
                   (a.dtype == ir::ScalarType::F16 || a.dtype == ir::ScalarType::BF16) && a.head_dim % 16 == 0 &&
                   a.head_dim <= 256;
  // flash-wgmma (codegen/nvidia/gpu_attention_wgmma.cpp) on sm_90a at head_dim 64..256 by 64: offered to
  // the search, not the default (flash-mma's figures are measured on an H200; its are not yet).
  const bool wgmma = mma && attentionMmaPath(MmaFamily::Wgmma, ir::ScalarType::F16, t) && a.head_dim % 64 == 0;
  // flash-mfma (matrix cores, codegen/amd/gpu_attention_mfma.cpp) on wave64 CDNA (gfx90a, gfx942).
  const bool mfma = attentionMmaPath(MmaFamily::Mfma, ir::ScalarType::F16, t) &&
                    (a.dtype == ir::ScalarType::F16 || a.dtype == ir::ScalarType::BF16) && a.head_dim % 16 == 0 &&
                    a.head_dim <= 256;
  std::vector<ir::KnobValue> strategies = {std::string("flash-simt")};
  if (wgmma) strategies.push_back(std::string("flash-wgmma"));
  if (mma) strategies.push_back(std::string("flash-mma"));
  if (mfma) strategies.push_back(std::string("flash-mfma"));
  std::vector<ir::KnobValue> bq = {int64_t(16), int64_t(32), int64_t(64), int64_t(128)};
  std::vector<ir::KnobValue> bk = {int64_t(8), int64_t(16), int64_t(32), int64_t(64), int64_t(128)};
  std::vector<ir::KnobValue> ds = {int64_t(1), int64_t(2), int64_t(4), int64_t(8)};
  std::vector<ir::KnobValue> stages = {int64_t(1), int64_t(2)};
  if (wgmma) stages.insert(stages.end(), {int64_t(3), int64_t(4)});  // flash-wgmma's fa3 ring
  s.knobs = {
      {"strategy", strategies, strategies.back(),
       "flash-simt: one query row per thread on the FMA pipes; flash-mma: FlashAttention-2 on mma.sync, 16 query rows "
       "per warp; flash-wgmma (sm_90a): both products on wgmma, 64 query rows per warpgroup; flash-mfma (CDNA): "
       "FlashAttention-2 on MFMA, 16 or 32 query rows per group"},
      {"BQ", bq, int64_t(64), "query rows per block"},
      {"BK", bk, int64_t(32), "keys per block staged in shared memory / LDS"},
      {"DSPLIT", ds, int64_t(1), "flash-simt: threads per query row (head_dim split); threads = BQ*DSPLIT"},
      {"STAGES", stages, int64_t(1),
       "flash-mma: shared-memory stages of the K/V cp.async ring (1: synchronous copies); flash-mfma: LDS buffers "
       "(2: the next block's loads in flight during the compute)"},
  };
  if (wgmma)
    s.knobs.push_back({"PIPE",
                       {std::string("fa2"), std::string("fa3"), std::string("fa3-overlap"), std::string("fa3-pingpong")},
                       std::string("fa2"),
                       "flash-wgmma: fa2 (every warpgroup computes, cp.async ring, P through shared memory), fa3 "
                       "(a TMA producer warpgroup, an mbarrier ring of STAGES slots, P from registers), fa3-overlap "
                       "(fa3 with S of the next key block issued before this block's softmax) or fa3-pingpong "
                       "(fa3-overlap with the two consumer warpgroups of BQ 128 taking turns at the tensor cores)"});
  if (mfma) {
    s.knobs.push_back({"WAVES", {int64_t(1), int64_t(2), int64_t(4), int64_t(8)}, int64_t(4),
                       "flash-mfma: waves per block (each owns BQ/WAVES query rows)"});
    std::vector<ir::KnobValue> shapes = {std::string("16x16x16")};
    if (a.head_dim % 32 == 0) shapes.push_back(std::string("32x32x8"));
    s.knobs.push_back({"MFMA", shapes, std::string("16x16x16"), "flash-mfma: the MFMA instruction shape"});
  }
  ir::Kernel kc = k;
  TargetDesc tc = t;
  const int64_t SQ = a.seq_q;
  s.constraint = [kc, tc](const ir::Config& c) -> std::optional<std::string> {
    const std::string strategy = std::get<std::string>(c.values.at("strategy"));
    int64_t BK = std::get<int64_t>(c.values.at("BK")), DSPLIT = std::get<int64_t>(c.values.at("DSPLIT"));
    int64_t STAGES = std::get<int64_t>(c.values.at("STAGES"));
    if (strategy != "flash-simt" && DSPLIT != 1) return strategy + " splits no row: DSPLIT must be 1";
    if (c.values.count("WAVES") && strategy != "flash-mfma" &&
        (std::get<int64_t>(c.values.at("WAVES")) != 4 || std::get<std::string>(c.values.at("MFMA")) != "16x16x16"))
      return std::string("WAVES and MFMA are flash-mfma's knobs");
    if (strategy == "flash-simt" && STAGES != 1) return std::string("flash-simt copies synchronously: STAGES must be 1");
    if (c.values.count("PIPE") && strategy != "flash-wgmma" && std::get<std::string>(c.values.at("PIPE")) != "fa2")
      return std::string("PIPE is flash-wgmma's knob");
    Status st = codegen::checkGpuConfig(kc, c, tc);
    if (!st.ok()) return st.error().message;
    if (strategy == "flash-simt" && 2 * BK + 48 > std::min(tc.maxRegsPerThread, 255))
      return "BK=" + std::to_string(BK) + " keeps about " + std::to_string(2 * BK + 48) + " values per thread in registers";
    return std::nullopt;
  };
  auto trySet = [&](const std::string& strategy, int64_t q, int64_t kk, int64_t d, int64_t st) {
    ir::Config c;
    c.set("strategy", strategy);
    c.set("BQ", q);
    c.set("BK", kk);
    c.set("DSPLIT", d);
    c.set("STAGES", st);
    if (wgmma) c.set("PIPE", std::string("fa2"));
    if (mfma) {
      c.set("WAVES", int64_t(4));
      c.set("MFMA", std::string("16x16x16"));
    }
    if (s.check(c)) return false;
    s.knobs[0].def = strategy;
    s.knobs[1].def = q;
    s.knobs[2].def = kk;
    s.knobs[3].def = d;
    s.knobs[4].def = st;
    return true;
  };
  // Tensor cores where they exist: 4 warps (64 query rows) and a 2-stage ring; 64 keys per block
  // up to head_dim 64, 32 above it (fewer registers for S and P: on an H200, H16 S4096 D128 ran
  // 368 us at 32 keys against 415 us at 64 causal, 492 against 542 not), fewer keys or one stage
  // where shared memory or registers bind (head_dim 256).
  const int64_t keys = a.head_dim > 64 ? 32 : 64;
  if (mfma) {
    // Matrix cores on CDNA: 4 waves, 16x16x16, and from the analytic model (no CDNA device has
    // measured it yet; H16 S4096 on gfx942): two groups of 16 query rows per wave (K/V operand
    // loads shared: 131 us against 155 at one group, D64), 32 keys, with two LDS buffers where
    // 3 blocks still fit a CU's 64 KB (D64), one buffer at D128 (two would leave 1 block per CU:
    // 145.6 us against 120.0 causal), 16 keys at D256; one group where the sequence is short.
    auto trySetMfma = [&](int64_t q, int64_t kk, int64_t w, int64_t st) {
      ir::Config c;
      c.set("strategy", std::string("flash-mfma"));
      c.set("BQ", q);
      c.set("BK", kk);
      c.set("DSPLIT", int64_t(1));
      c.set("STAGES", st);
      c.set("WAVES", w);
      c.set("MFMA", std::string("16x16x16"));
      if (s.check(c)) return false;
      for (auto& kn : s.knobs) kn.def = c.values.at(kn.name);
      return true;
    };
    const int64_t rows = SQ > 64 ? 128 : 64;
    const std::array<int64_t, 4> first = a.head_dim <= 64    ? std::array<int64_t, 4>{rows, 32, 4, 2}
                                         : a.head_dim <= 128 ? std::array<int64_t, 4>{rows, 32, 4, 1}
                                                             : std::array<int64_t, 4>{64, 16, 4, 2};
    for (auto [q, kk, w, st] : std::vector<std::array<int64_t, 4>>{first, {64, 32, 4, 2}, {64, 32, 4, 1}, {64, 16, 4, 1},
                                                                   {32, 16, 2, 1}, {16, 16, 1, 1}})
      if (trySetMfma(q, kk, w, st)) return s;
  }
  if (mma)
    for (auto [q, kk, st] : std::vector<std::array<int64_t, 3>>{{64, keys, 2}, {64, 64, 2}, {64, 32, 2}, {64, 64, 1},
                                                                {64, 32, 1}, {32, 32, 1}, {16, 16, 1}})
      if (trySet("flash-mma", q, kk, 1, st)) return s;
  // FMA pipes: the recipe's shape (BQ=64 rows, BK=32 keys, one thread per row) when legal, else
  // the first legal one trading key block, then head_dim split, then query block, preferring query
  // blocks that do not exceed the sequence (48 KB static shared memory bounds large head_dims).
  std::vector<std::array<int64_t, 3>> prefs;
  for (int64_t q : {64, 32, 128, 16})
    for (int64_t kk : {32, 16, 8, 64})
      for (int64_t d : {1, 2, 4, 8}) prefs.push_back({q, kk, d});
  std::stable_sort(prefs.begin(), prefs.end(), [SQ](const auto& x, const auto& y) {
    auto fits = [SQ](int64_t q) { return q <= std::max<int64_t>(16, (SQ + 15) / 16 * 16); };
    return fits(x[0]) > fits(y[0]);
  });
  for (const auto& [q, kk, d] : prefs)
    if (trySet("flash-simt", q, kk, d, 1)) break;
  return s;
}

}  // namespace tessera::search
