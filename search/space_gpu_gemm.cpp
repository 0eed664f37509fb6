// Owns the GPU GEMM space (codegen/gpu_gemm.cpp): strategy (simt, or mma where the target has a
// matrix instruction our lowering reaches: mma.sync m16n8k16 f16 on NVIDIA, 16x16x16 f16/bf16
// MFMA on CDNA), block tile BM x BN x BK, thread (simt) / warp (mma) tile TM x TN, copy width VEC
// and cp.async stages. Legality = the code generator's own rules (threads, shared memory/LDS,
// copy distribution, MMA shapes; codegen::checkGpuConfig) plus a register estimate, so configs
// that obviously cannot fit the register file are never compiled. MLIR-free (tessera_space_rules):
// the cache service checks GPU records with it; the analytic model's default is space_gpu.cpp's.
#include <algorithm>

#include "codegen/gpu_rules.h"
#include "ir/families.h"
#include "search/space.h"
#include "search/space_util.h"
#include "search/space_gpu.h"

namespace tessera::search {
namespace {

using space_detail::geti;

using space_detail::roundUp;
int64_t ceilDivI(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

Expected<ir::Space> gemmGpuSpace(const ir::Kernel& k, const TargetDesc& t) {
  TESSERA_ASSIGN(ir::GemmInfo g, ir::analyzeGemm(k));
  const std::optional<codegen::MmaPath> mmaPath = codegen::gemmMmaPath(g.inType, t);
  const bool mma = mmaPath.has_value();
  const bool async = mma && mmaPath->asyncCopies;
  // sm_90a, f16/bf16: the warpgroup GEMM (wgmma + TMA, warp-specialized) and its knobs.
  const bool wg = codegen::gemmWarpgroupMmaPath(g.inType, t).has_value();
  // NVIDIA sm_80+, f16/bf16: the lane-level mma.sync kernel (cp.async ring, batches in one launch).
  const bool lane = codegen::gemmLaneMmaPath(g.inType, t).has_value();
  const int64_t bytes = ir::byteSize(g.inType);
  ir::Space s;
  s.family = "gemm";
  std::vector<ir::KnobValue> strat = {std::string("simt")};
  if (mma) strat.push_back(std::string("mma"));
  if (lane) strat.push_back(std::string("mma-lane"));
  if (wg) strat.push_back(std::string("wgmma"));
  // Tiles larger than the (16-rounded) problem only pad: clamp the domains there.
  std::vector<ir::KnobValue> bm = clampDomain({16, 32, 64, 128, 256}, roundUp(g.m, 16));
  std::vector<ir::KnobValue> bn = clampDomain({16, 32, 64, 128, 256}, roundUp(g.n, 16));
  std::vector<ir::KnobValue> bk = clampDomain({8, 16, 32, 64}, roundUp(g.k, 16));
  std::vector<ir::KnobValue> tm = {int64_t(1), int64_t(2), int64_t(4), int64_t(8), int64_t(16), int64_t(32), int64_t(64)};
  std::vector<ir::KnobValue> tn = tm;
  if (wg) {  // a consumer warpgroup's tile: 64 or 128 rows, up to 256 columns
    tm.push_back(int64_t(128));
    tn.push_back(int64_t(128));
    tn.push_back(int64_t(256));
  }
  std::vector<ir::KnobValue> vec;
  for (int64_t v : {1, 2, 4, 8})
    if (v * bytes <= 16) vec.push_back(v);
  std::vector<ir::KnobValue> stages = {int64_t(1)};
  if (async || lane) {
    stages.push_back(int64_t(2));
    stages.push_back(int64_t(3));
  }
  if (lane) stages.push_back(int64_t(4));
  if (wg)  // ring slots of the mbarrier pipeline
    for (int64_t st : {2, 3, 4, 5, 6})
      if (std::find(stages.begin(), stages.end(), ir::KnobValue(st)) == stages.end()) stages.push_back(st);
  std::sort(stages.begin(), stages.end());
  // SPLITK (wgmma): K ranges per output tile, for shapes with too few tiles to fill the SMs.
  std::vector<ir::KnobValue> splits = {int64_t(1)};
  const int64_t kTiles = ceilDivI(g.k, 64);
  if (wg)
    for (int64_t sk : {2, 4, 8, 16})
      if (sk <= kTiles) splits.push_back(sk);

  // Defaults. mma: the recipe's 128x128x32 block, 64x32 warp tiles (N at least the instruction's
  // TN multiple), 16-byte copies, 3 cp.async stages where asynchronous copies exist (48 KB: the
  // static limit; 102-124 registers, no spills). simt: 64x64x16 with 4x4 thread tiles
  // (mlir-recipes/emulation sched2: 64 registers).
  const bool useMma = mma;
  int64_t BM = pickAtMost(bm, useMma ? 128 : 64), BN = pickAtMost(bn, useMma ? 128 : 64), BK = pickAtMost(bk, useMma ? 32 : 16);
  int64_t TM = useMma ? std::min<int64_t>(64, BM) : 4, TN = useMma ? std::min<int64_t>(32, BN) : 4;
  if (useMma) TN = std::max<int64_t>(mmaPath->tnMultiple, TN);
  int64_t VEC = pickAtMost(vec, 16 / bytes);
  int64_t ST = async && roundUp(g.k, BK) / BK >= 3 ? 3 : 1;
  s.knobs = {
      {"strategy", strat, std::string(useMma ? "mma" : "simt"),
       "simt: FMA pipes; mma: tensor cores (mma.sync / MFMA); mma-lane: mma.sync kernel built lane by lane (f16/bf16, "
       "cp.async ring, batches in one launch); wgmma: warpgroup MMA fed by TMA (sm_90a)"},
      {"BM", bm, BM, "block tile rows"},
      {"BN", bn, BN, "block tile columns"},
      {"BK", bk, BK, "K step staged in shared memory / LDS"},
      {"TM", tm, TM, "rows per thread (simt) or per warp (mma)"},
      {"TN", tn, TN, "columns per thread (simt) or per warp (mma)"},
      {"VEC", vec, VEC, "elements per global->shared copy (16 bytes: 128-bit loads, cp.async)"},
      {"STAGES", stages, ST, "shared-memory buffers of the cp.async pipeline (1: synchronous copies); wgmma: mbarrier ring slots"},
  };
  if (lane && (!mma || g.batch > 0)) {
    // mma-lane where the `mma` strategy cannot take the type (bf16) or would launch once per batch:
    // 128x128x32 blocks of four 64x64 warp tiles, smaller where the problem is; the deepest ring
    // (4, 3 or 2 slots) with which two blocks fit in an SM's shared memory (ptxas: ~230 registers,
    // so the register file holds two blocks as well).
    int64_t lBM = pickAtMost(bm, 128), lBN = pickAtMost(bn, 128), lBK = std::max<int64_t>(pickAtMost(bk, 32), 16);
    int64_t lST = 2;
    for (int64_t st : {4, 3})
      if (2 * (st * (lBM * (lBK + 8) + lBK * (lBN + 8)) * 2 + t.smemReservedPerBlock) <= t.smemPerSM) {
        lST = st;
        break;
      }
    for (auto& kn : s.knobs) {
      if (kn.name == "strategy") kn.def = std::string("mma-lane");
      if (kn.name == "BM") kn.def = lBM;
      if (kn.name == "BN") kn.def = lBN;
      if (kn.name == "BK") kn.def = lBK;
      if (kn.name == "TM") kn.def = std::min<int64_t>(64, lBM);
      if (kn.name == "TN") kn.def = std::min<int64_t>(64, lBN);
      if (kn.name == "VEC") kn.def = int64_t(8);
      if (kn.name == "STAGES") kn.def = lST;
    }
  }
  if (wg) {
    // The default on sm_90a: wgmma, 128x256 blocks of two 64x256 consumer warpgroups (CUTLASS's
    // cooperative shape) and 4 ring slots, smaller where the problem is; split-K where the tiles
    // would leave most SMs idle and K is long.
    auto has = [](const std::vector<ir::KnobValue>& d, int64_t v) { return std::find(d.begin(), d.end(), ir::KnobValue(v)) != d.end(); };
    int64_t wBM = has(bm, 128) && g.m > 64 ? 128 : 64, wBN = has(bn, 256) && g.n > 128 ? 256 : has(bn, 128) && g.n > 64 ? 128 : 64;
    int64_t wTN = wBN, wTM = 64;
    const int64_t tiles = ceilDivI(g.m, wBM) * ceilDivI(g.n, wBN) * std::max<int64_t>(g.batch, 1);
    const ir::Config before = s.defaults();
    int64_t wSK = 1;
    // Only for long K: the partials' round trip and the last block's serial sum cost more than the
    // idle SMs at 1000^3 (H200: 50 us with SPLITK=4 against 19.5 us without).
    while (wSK * 2 <= 16 && tiles * wSK * 2 <= t.units && has(splits, wSK * 2) && kTiles >= 64 * wSK) wSK *= 2;
    for (auto& kn : s.knobs) {
      if (kn.name == "strategy") kn.def = std::string("wgmma");
      if (kn.name == "BM") kn.def = wBM;
      if (kn.name == "BN") kn.def = wBN;
      if (kn.name == "BK") kn.def = int64_t(64);
      if (kn.name == "TM") kn.def = wTM;
      if (kn.name == "TN") kn.def = wTN;
      if (kn.name == "VEC") kn.def = int64_t(16 / bytes);
      if (kn.name == "STAGES") kn.def = int64_t(4);
    }
    s.knobs.push_back({"SPLITK", splits, wSK, "wgmma: K ranges per output tile (split-K), reduced in parallel by the tile's blocks (a slice each)"});
    s.knobs.push_back({"PERSIST", {int64_t(0), int64_t(1)}, int64_t(0),
                       "wgmma: 1 = a persistent grid (a block per SM) looping over the tiles, batches and K ranges, the next "
                       "tile's loads under this one's epilogue"});
    ir::Config d = s.defaults();
    for (int64_t st : {4, 3, 2}) {
      d.set("STAGES", st);
      if (!s.check(d)) break;
    }
    if (s.check(d)) {  // no wgmma default fits: the mma.sync / simt one
      d = before;
      d.set("SPLITK", int64_t(1));
      d.set("PERSIST", int64_t(0));
    }
    for (auto& kn : s.knobs) kn.def = d.values.at(kn.name);
  }
  ir::Kernel kc = k;
  TargetDesc tc = t;
  s.constraint = [kc, tc](const ir::Config& c) -> std::optional<std::string> {
    Status st = codegen::checkGpuConfig(kc, c, tc);
    if (!st.ok()) return st.error().message;
    const std::string strategy = std::get<std::string>(c.values.at("strategy"));
    if (strategy == "wgmma") return std::nullopt;  // the plan's rules include the register split
    bool isMma = strategy == "mma" || strategy == "mma-lane";
    int64_t TMv = geti(c, "TM"), TNv = geti(c, "TN");
    if (TMv > 64 || TNv > 64) return "TM/TN above 64 are wgmma warpgroup tiles";
    if (geti(c, "STAGES") > (strategy == "mma-lane" ? 4 : 3)) return "cp.async pipelines take at most 3 stages (mma-lane: 4)";
    // Register estimate per thread: accumulators + one K step of operands + ~40 for addressing.
    int64_t regs = isMma ? TMv * TNv / tc.warpSize + (TMv / 16) * 4 + (TNv / 8) * 2 + 40 : TMv * TNv + TMv + TNv + 24;
    int64_t cap = tc.operandRegsPerThread;  // AMD: architectural VGPRs (AGPRs hold no operands here)
    if (regs > cap) return "about " + std::to_string(regs) + " registers per thread needed, the limit is " + std::to_string(cap);
    return std::nullopt;
  };
  // Keep the default legal on every shape (tiny problems can break the copy distribution).
  if (s.check(s.defaults())) {
    ir::Config d = s.defaults();
    for (int64_t vv : {int64_t(VEC), int64_t(4), int64_t(2), int64_t(1)}) {
      if (std::find(vec.begin(), vec.end(), ir::KnobValue(vv)) == vec.end()) continue;
      d.set("VEC", vv);
      for (int64_t st : {ST, int64_t(1)}) {
        d.set("STAGES", st);
        if (!s.check(d)) break;
      }
      if (!s.check(d)) break;
    }
    if (!s.check(d))
      for (auto& kn : s.knobs) kn.def = d.values.at(kn.name);
  }
  return s;
}

}  // namespace tessera::search
