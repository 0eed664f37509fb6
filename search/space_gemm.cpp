// Owns the host GEMM space: schedule family (plain | packed), cache tiles MC/NC/KC, register
// tile MR x NR, k unroll KU and micro-loop order, with the constraints measured in
// mlir-recipes/cpu-gemm-packed/REPORT.md §4.
#include <algorithm>

#include "ir/families.h"
#include "search/space.h"

namespace tessera::search {
namespace {

int64_t roundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

int64_t lanesOf(const TargetDesc& t) { return std::max(4, t.simdBits / 32); }

int64_t geti(const ir::Config& c, const char* k) { return std::get<int64_t>(c.values.at(k)); }

}  // namespace

Expected<ir::Space> gemmHostSpace(const ir::Kernel& k, const TargetDesc& t) {
  TESSERA_ASSIGN(ir::GemmInfo g, ir::analyzeGemm(k));
  const int64_t lanes = lanesOf(t), vregs = t.vectorRegisters;
  ir::Space s;
  s.family = "gemm";
  // NR: one to four vector registers wide; powers of two only (NR=48 legalizes into 3.6 GFLOP/s).
  std::vector<int64_t> nrs = {lanes, 2 * lanes, 4 * lanes};
  std::vector<ir::KnobValue> nrDom = clampDomain(nrs, g.n);
  std::vector<ir::KnobValue> mrDom = clampDomain({1, 2, 4, 6, 8, 12, 14}, g.m);
  std::vector<ir::KnobValue> mcDom = clampDomain({16, 32, 48, 64, 96, 128, 192, 256}, g.m);
  std::vector<ir::KnobValue> ncDom = clampDomain({32, 64, 128, 256, 512, 1024, 2048, 4096}, g.n);
  std::vector<ir::KnobValue> kcDom = clampDomain({16, 32, 64, 128, 256, 384, 512, 768, 1024}, g.k);

  // Defaults: the recipe's best (8x32 on AVX-512, 6x16 on AVX2), packing once the operands
  // outgrow the L2 (measured: plain wins while they fit, packed from there on).
  int64_t nrDef = std::min<int64_t>(2 * lanes, std::get<int64_t>(nrDom.back()));
  int64_t mrDef = lanes >= 16 ? 8 : 6;
  while (mrDef * nrDef / lanes + nrDef / lanes + 1 > vregs && mrDef > 1) --mrDef;
  mrDef = std::min(mrDef, std::get<int64_t>(mrDom.back()));
  // Snap MR to the domain (clampDomain may have cut 8 for tiny M).
  int64_t mr = pickAtMost(mrDom, mrDef);
  double bytes = 4.0 * double(g.m * g.k + g.k * g.n + g.m * g.n);
  // Skinny problems (few rows of A) do not amortize packing B: the full table of 32x2048x512
  // (bench/data/host_gemm_32x2048x512) has its 47 configs within 5% of the best all plain, and
  // the packed default ran 2.7x slower than the best; plain with the whole row of B as one
  // cache block (NC=2048) is within 1% of it, NC=512 only at 81%.
  bool skinny = g.m < 64;
  // With AVX2's 16 vector registers packing pays at every size but the skinny ones: measured on
  // an x86-64-v3 Zen 4, packed 6x16 against the best plain default ran 36.7/36.0 GFLOP/s at 64³,
  // 62.6/38.8 at 128³ and 73.5/38.9 at 256³. The plain-while-it-fits-L2 rule is AVX-512's.
  const bool wide = lanes >= 16;
  bool packedDef = !skinny && (bytes > double(t.l2Bytes) || !wide);
  // Plain has no packing to pad the edge tiles: on AVX2 take the largest MR up to the default
  // that divides M (32x2048x512: plain MR=4 48.0 GFLOP/s, MR=6 21.7).
  if (!packedDef && !wide && g.m % mr)
    for (const auto& v : mrDom) {
      int64_t x = std::get<int64_t>(v);
      if (x <= mrDef && x * 2 >= mrDef && g.m % x == 0) mr = x;
    }
  // MC: the largest domain value up to 64 that MR divides (48 for AVX2's MR=6: a bare 64 would
  // break the space's own MC % MR rule), else the smallest such value; when MR divides none (tiny
  // M: the domain was clamped), MC >= M keeps any value legal.
  int64_t mcDef = 0, mcAbove = 0;
  for (const auto& v : mcDom) {
    int64_t x = std::get<int64_t>(v);
    if (x % mr) continue;
    if (x <= 64) mcDef = std::max(mcDef, x);
    else if (!mcAbove) mcAbove = x;
  }
  if (!mcDef) mcDef = mcAbove ? mcAbove : pickAtMost(mcDom, 64);
  s.knobs = {
      {"schedule", {std::string("plain"), std::string("packed")}, std::string(packedDef ? "packed" : "plain"),
       "packed: BLIS-style packed A/B panels; plain: cache tiling only"},
      {"MC", mcDom, mcDef, "rows of A per cache block"},
      {"NC", ncDom, pickAtMost(ncDom, packedDef || (skinny && bytes > double(t.l2Bytes)) ? 2048 : 512),
       "columns of B per cache block"},
      {"KC", kcDom, pickAtMost(kcDom, 512), "depth of a cache block (balanced: equal blocks)"},
      {"MR", mrDom, mr, "register tile rows"},
      {"NR", nrDom, nrDef, "register tile columns (vector lanes)"},
      {"KU", {int64_t(1), int64_t(2), int64_t(4)}, int64_t(1), "unroll of the k micro-loop"},
      {"ORDER", {std::string("ij"), std::string("ji")}, std::string("ij"), "micro-tile loop order (ij: A panel in L1)"},
  };
  const int64_t M = g.m, N = g.n;
  s.constraint = [lanes, vregs, M, N](const ir::Config& c) -> std::optional<std::string> {
    int64_t MC = geti(c, "MC"), NC = geti(c, "NC"), MR = geti(c, "MR"), NR = geti(c, "NR");
    // accumulators + B vectors + the A broadcast must fit the vector register file
    int64_t regs = (MR * ((NR + lanes - 1) / lanes)) + (NR + lanes - 1) / lanes + 1;
    if (regs > vregs)
      return "register tile " + std::to_string(MR) + "x" + std::to_string(NR) + " needs " + std::to_string(regs) +
             " vector registers, the target has " + std::to_string(vregs);
    if (MR > std::min(MC, roundUp(M, MR))) return std::string("MR must not exceed MC");
    if (MC % MR && MC < M) return std::string("MC must be a multiple of MR");
    if (NR > std::min(NC, roundUp(N, NR))) return std::string("NR must not exceed NC");
    if (NC % NR && NC < N) return std::string("NC must be a multiple of NR");
    return std::nullopt;
  };
  return s;
}

}  // namespace tessera::search
