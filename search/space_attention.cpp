// Owns the host attention space: query/key blocks BQ/BK, the register tiles MR1 x NR1 (S = Q·Kᵀ)
// and MR2 x NR2 (Acc += P·V), their unrolls U1/U2 and the vector width VW, with the register
// budget and divisibility rules measured in mlir-recipes/cpu-flash-attention/REPORT.md.
#include <algorithm>
#include <tuple>

#include "ir/families.h"
#include "search/space.h"
#include "search/space_util.h"

namespace tessera::search {
namespace {

using space_detail::roundUp;

using space_detail::geti;

// Accumulators + one row of B vectors + the broadcast must fit the vector register file; past it
// the micro-kernel spills and halves its speed (REPORT: 6x80 at D=80, 3x128 at D=128).
int64_t tileRegisters(int64_t mr, int64_t nr, int64_t vw) {
  int64_t nv = (nr + vw - 1) / vw;
  return mr * nv + nv + 1;
}

// The largest value of `dom` that is <= want (the smallest one when none is).

}  // namespace

Expected<ir::Space> attentionHostSpace(const ir::Kernel& k, const TargetDesc& t) {
  TESSERA_ASSIGN(ir::AttentionInfo info, ir::analyzeAttention(k));
  const ir::AttentionSpec& s = info.spec;
  const int64_t lanes = std::clamp(t.simdBits / 32, 4, 16), vregs = t.vectorRegisters;
  const int64_t SQ = s.seq_q, SKV = s.seq_kv, D = s.head_dim;
  const int64_t L = lanes;

  std::vector<ir::KnobValue> vwDom;
  if (L / 2 >= 4) vwDom.push_back(L / 2);
  vwDom.push_back(L);
  std::vector<ir::KnobValue> bqDom = clampDomain({16, 32, 48, 64, 96, 128, 192, 256}, SQ);
  std::vector<ir::KnobValue> bkDom = clampDomain({16, 32, 64, 128, 256, 512}, SKV);
  std::vector<ir::KnobValue> mr1Dom = clampDomain({1, 2, 3, 4, 6, 8, 12, 14}, SQ);
  std::vector<ir::KnobValue> nr1Dom = clampDomain({L, 2 * L, 4 * L, 8 * L}, roundUp(SKV, L));
  std::vector<ir::KnobValue> mr2Dom = clampDomain({1, 2, 3, 4, 5, 6, 8, 12}, SQ);
  std::vector<ir::KnobValue> nr2Dom = clampDomain({L, 2 * L, 3 * L, 4 * L, 5 * L, 6 * L, 8 * L}, roundUp(D, L));
  std::vector<ir::KnobValue> uDom = {int64_t(1), int64_t(2), int64_t(4), int64_t(8)};

  // Defaults: the recipe's best (BQ=48 BK=128 8x32 6x64 U=2 at D=64 on AVX-512; BK=256 from
  // D=128), with the register tiles re-derived from the budget for other D and narrower ISAs.
  const int64_t bq = pickAtMost(bqDom, 48);
  const int64_t bk = pickAtMost(bkDom, D >= 128 ? 256 : 128);
  auto rowsFit = [&](int64_t m) { return bq >= SQ || bq % m == 0; };
  const int64_t nr1 = pickAtMost(nr1Dom, std::min(2 * L, bk));
  int64_t mr1 = 1;
  for (const auto& v : mr1Dom) {
    int64_t m = std::get<int64_t>(v);
    if (m <= 8 && rowsFit(m) && tileRegisters(m, nr1, L) <= vregs) mr1 = m;
  }
  // PV tile: the one with the most FMAs per instruction of the micro-kernel (FMAs / (FMAs + V
  // loads + P broadcasts)), averaged over the column chunks of the padded head dim; a remainder
  // chunk (a narrower tile, P read once more) costs 10 %. Gives 6x64 at D=64/128, 4x80 at D=80,
  // 4x96 at D=96, 6x64 with a 16-wide remainder at D=200, 6x16 on AVX2.
  const int64_t dp = roundUp(D, L);
  auto efficiency = [&](int64_t m, int64_t nr) {
    auto tile = [&](int64_t cols) {
      double f = double(m * (cols / L));
      return f / (f + double(cols / L) + double(m));
    };
    int64_t full = dp / nr * nr;
    if (full == dp) return tile(nr);
    return 0.9 * (double(full) * tile(nr) + double(dp - full) * tile(dp - full)) / double(dp);
  };
  double best = -1;
  int64_t mr2 = 1, nr2 = L;
  for (const auto& nv : nr2Dom) {
    int64_t nr = std::min(std::get<int64_t>(nv), dp);
    for (const auto& mv : mr2Dom) {
      int64_t m = std::get<int64_t>(mv);
      // The register budget at the knob's value, as the space's rule below counts it (a 3 x 128
      // tile at D = 99 computes 112 columns but was counted at 112 here and at 128 there: an
      // illegal default on AVX-512).
      if (!rowsFit(m) || tileRegisters(m, std::get<int64_t>(nv), L) > vregs) continue;
      double e = efficiency(m, nr);
      if (e > best + 1e-9 || (e > best - 1e-9 && nr > nr2)) best = e, mr2 = m, nr2 = std::get<int64_t>(nv);
    }
  }

  ir::Space sp;
  sp.family = "attention";
  sp.knobs = {
      {"BQ", bqDom, bq, "query rows per block"},
      {"BK", bkDom, bk, "keys per block (scores of BQ x BK stay in L1/L2)"},
      {"MR1", mr1Dom, mr1, "rows of the S = Q·Kᵀ register tile"},
      {"NR1", nr1Dom, nr1, "columns (keys) of the S = Q·Kᵀ register tile"},
      {"MR2", mr2Dom, mr2, "rows of the Acc += P·V register tile"},
      {"NR2", nr2Dom, nr2, "columns (head dim) of the Acc += P·V register tile"},
      {"U1", uDom, pickAtMost(uDom, 2), "unroll of the head-dim loop of Q·Kᵀ"},
      {"U2", uDom, pickAtMost(uDom, 2), "unroll of the key loop of P·V"},
      {"VW", vwDom, L, "f32 lanes per vector"},
  };
  std::vector<ir::KnobValue> threadDom = hostThreadDomain(t);
  if (threadDom.size() > 1)
    sp.knobs.push_back({"THREADS", threadDom, defaultThreads(t, ir::kernelFlops(k), kAttentionFlopsPerThread),
                        "threads sharing the query blocks of each kv head"});
  sp.constraint = [vregs, SQ](const ir::Config& c) -> std::optional<std::string> {
    const int64_t BQ = geti(c, "BQ"), BK = geti(c, "BK"), VW = geti(c, "VW");
    const int64_t MR1 = geti(c, "MR1"), NR1 = geti(c, "NR1"), MR2 = geti(c, "MR2"), NR2 = geti(c, "NR2");
    if (NR1 % VW || NR2 % VW || BK % VW) return "NR1, NR2 and BK must be multiples of VW=" + std::to_string(VW);
    for (auto [name, mr, nr] : {std::tuple{"MR1xNR1", MR1, NR1}, std::tuple{"MR2xNR2", MR2, NR2}}) {
      int64_t regs = tileRegisters(mr, nr, VW);
      if (regs > vregs)
        return std::string("register tile ") + name + "=" + std::to_string(mr) + "x" + std::to_string(nr) + " needs " +
               std::to_string(regs) + " vector registers, the target has " + std::to_string(vregs);
    }
    if (NR1 > BK) return std::string("NR1 must not exceed BK");
    if (BK % NR1) return std::string("BK must be a multiple of NR1");
    // Full query blocks exist: the row tiles must divide them (a remainder tile wastes the block).
    if (BQ < SQ && (BQ % MR1 || BQ % MR2)) return std::string("BQ must be a multiple of MR1 and MR2");
    return std::nullopt;
  };
  return sp;
}

}  // namespace tessera::search
