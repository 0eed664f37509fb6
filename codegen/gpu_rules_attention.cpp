// Owns the GPU attention legality rules (gpu_rules.h, gpu_plans.h): the problem every family sees
// and the plans of flash-simt, flash-mma, flash-wgmma and flash-mfma from a config, without MLIR
// (the kernels: gpu_attention*.cpp).
#include <algorithm>
#include <cmath>

#include "codegen/gpu_plans.h"

namespace tessera::codegen {

namespace {

template <class Plan>
Status checkPlan(const ir::AttentionSpec& s, const GpuAttentionConfig& c, const TargetDesc& t,
                 Expected<Plan> (*make)(const ir::AttentionSpec&, const GpuAttentionConfig&, const TargetDesc&)) {
  TESSERA_ASSIGN(Plan p, make(s, c, t));
  (void)p;
  return {};
}

}  // namespace


void AttnDims::setProblem(const ir::AttentionSpec& s) {
  B = s.batch; H = s.heads; HKV = s.heads_kv; G = s.heads / s.heads_kv;
  SQ = s.seq_q; SKV = s.seq_kv; D = s.head_dim; off = s.seq_kv - s.seq_q;
  causal = s.causal; dtype = s.dtype;
  NQB = ceilDiv(SQ, BQ);
  NKB = ceilDiv(SKV, BK);
  qscale = s.scale / std::log(2.0);
  spec = s;
}


std::optional<MmaPath> attentionMmaPath(MmaFamily f, ir::ScalarType input, const TargetDesc& t) {
  const std::string dt(ir::typeName(input));
  if (f == MmaFamily::Mfma) {
    const MmaShape* s = t.vendor == Vendor::Amd && t.warpSize == 64 ? t.findMma(dt, "mfma") : nullptr;
    if (!s) return std::nullopt;
    return MmaPath{f, "mfma", *s, 0, false};
  }
  const char* kind = f == MmaFamily::Wgmma ? "wgmma" : "mma.sync";
  const MmaShape* s = t.vendor == Vendor::Nvidia ? t.findMma(dt, kind) : nullptr;
  if (!s) return std::nullopt;
  return MmaPath{f, kind, *s, 0, true};
}

Status tensorCoreInputs(const ir::AttentionSpec& s, const std::string& strategy, int64_t dimStep, const std::string& dimRule) {
  auto bad = [&](const std::string& m) { return makeError(ErrorCode::InvalidConfig, "attention (" + strategy + "): " + m); };
  if (s.dtype != ir::ScalarType::F16 && s.dtype != ir::ScalarType::BF16) return bad("f16 or bf16 inputs only");
  if (s.head_dim % dimStep || s.head_dim > 256) return bad(dimRule);
  return {};
}


Expected<SimtAttnPlan> makeSimtAttnPlan(const ir::AttentionSpec& s, const GpuAttentionConfig& c, const TargetDesc& t) {
  SimtAttnPlan p;
  p.BQ = c.BQ, p.BK = c.BK, p.DSPLIT = c.DSPLIT;
  auto bad = [](const std::string& m) { return makeError(ErrorCode::InvalidConfig, "attention: " + m); };
  if (p.BQ <= 0 || p.BK <= 0 || p.DSPLIT <= 0) return bad("BQ, BK and DSPLIT must be positive");
  if (p.BK > 128) return bad("BK must be <= 128 (BK scores per thread live in registers)");
  p.setProblem(s);
  p.VW = p.D % 4 == 0 ? 4 : p.D % 2 == 0 ? 2 : 1;
  p.DP = p.D;
  p.DC = p.D / p.VW;
  if (p.DC % p.DSPLIT) return bad("DSPLIT=" + std::to_string(p.DSPLIT) + " must divide head_dim/" + std::to_string(p.VW) + " = " + std::to_string(p.DC));
  p.DCS = p.DC / p.DSPLIT;
  p.T = p.BQ * p.DSPLIT;
  if (p.T > t.maxThreadsPerBlock) return bad(std::to_string(p.T) + " threads per block exceed " + std::to_string(t.maxThreadsPerBlock));
  if (p.T % t.warpSize) return bad("BQ*DSPLIT=" + std::to_string(p.T) + " must be a multiple of the warp size " + std::to_string(t.warpSize));
  if (p.smemBytes() > t.smemPerBlock)
    return bad("needs " + std::to_string(p.smemBytes()) + " B of shared memory, the limit is " + std::to_string(t.smemPerBlock));
  return p;
}

Expected<MmaAttnPlan> makeMmaAttnPlan(const ir::AttentionSpec& s, const GpuAttentionConfig& c, const TargetDesc& t) {
  auto bad = [](const std::string& m) { return makeError(ErrorCode::InvalidConfig, "attention (flash-mma): " + m); };
  if (!attentionMmaPath(MmaFamily::MmaSync, ir::ScalarType::F16, t)) return bad("needs an NVIDIA target with mma.sync");
  TESSERA_TRY(tensorCoreInputs(s, "flash-mma", 16, "head_dim must be a multiple of 16, at most 256"));
  MmaAttnPlan p;
  p.BQ = c.BQ, p.BK = c.BK, p.STAGES = c.STAGES;
  if (p.BQ % 16 || p.BQ < 16 || p.BQ > 128) return bad("BQ must be 16, 32, 64 or 128 (16 rows per warp)");
  if (p.BK % 16 || p.BK < 16 || p.BK > 128) return bad("BK must be a multiple of 16, at most 128");
  if (p.STAGES != 1 && p.STAGES != 2) return bad("STAGES must be 1 or 2");
  p.setProblem(s);
  p.W = p.BQ / 16;
  p.T = 32 * p.W;
  p.LD = p.D + 8;
  p.NKD = p.D / 16; p.NJ = p.BK / 8; p.NC = p.BK / 16; p.ND = p.D / 8;
  // Q's fragments stay in registers up to head_dim 128 (32 registers); past it they are re-read
  // from shared memory for each key block, so O's 4*D/8 accumulators fit.
  p.qInRegs = p.D <= 128;
  const int64_t limit = std::max(t.smemPerBlock, t.smemPerBlockOptIn);
  if (p.smemBytes() > limit)
    return bad("needs " + std::to_string(p.smemBytes()) + " B of shared memory, the limit is " + std::to_string(limit));
  return p;
}

Expected<WgmmaAttnPlan> makeWgmmaAttnPlan(const ir::AttentionSpec& s, const GpuAttentionConfig& c, const TargetDesc& t) {
  auto bad = [](const std::string& m) { return makeError(ErrorCode::InvalidConfig, "attention (flash-wgmma): " + m); };
  if (!attentionMmaPath(MmaFamily::Wgmma, ir::ScalarType::F16, t)) return bad("needs sm_90a (wgmma)");
  TESSERA_TRY(tensorCoreInputs(s, "flash-wgmma", 64, "head_dim must be 64, 128, 192 or 256 (whole 128-byte panels)"));
  WgmmaAttnPlan p;
  p.BQ = c.BQ, p.BK = c.BK, p.STAGES = c.STAGES;
  if (p.BQ != 64 && p.BQ != 128) return bad("BQ must be 64 or 128 (64 query rows per warpgroup)");
  if (p.BK != 64 && p.BK != 128) return bad("BK must be 64 or 128 (whole 128-byte panels of P)");
  const std::string& pipe = c.PIPE;
  if (pipe != "fa2" && pipe != "fa3" && pipe != "fa3-overlap" && pipe != "fa3-pingpong")
    return bad("PIPE must be fa2, fa3, fa3-overlap or fa3-pingpong");
  p.fa3 = pipe != "fa2";
  p.overlap = pipe == "fa3-overlap" || pipe == "fa3-pingpong";
  p.pingpong = pipe == "fa3-pingpong";
  if (p.pingpong && p.BQ != 128) return bad("PIPE=fa3-pingpong takes turns between two consumer warpgroups: BQ must be 128");
  if (p.overlap && s.head_dim > 128)
    return bad("PIPE=" + pipe + " keeps O beside S and two Ps in registers: head_dim at most 128 (256 spills)");
  if (!p.fa3 && p.STAGES != 1 && p.STAGES != 2) return bad("STAGES must be 1 or 2 (fa2's cp.async ring)");
  if (p.fa3 && (p.STAGES < 2 || p.STAGES > 4))
    return bad("STAGES must be 2, 3 or 4 with PIPE=" + pipe + " (the producer refills one slot while the consumers read another)");
  p.setProblem(s);
  p.WG = p.BQ / 64;
  p.T = 128 * (p.WG + (p.fa3 ? 1 : 0));
  p.NP = p.D / 64;
  // O (D/2) and S (BK/2) accumulators per thread, plus P and the softmax state.
  if (p.D / 2 + p.BK / 2 > 224) return bad("O and S need " + std::to_string(p.D / 2 + p.BK / 2) + " accumulator registers per thread");
  if (p.fa3) {
    // The register split (as the Hopper GEMM's, gpu_wgmma.cpp): at launch every thread holds
    // 64K / threads; the producer gives back all but kProducerRegs, the consumers take the rest.
    const int entry = int(std::min<int64_t>(248, 65536 / p.T / 8 * 8));
    // The overlapped pipelines keep a second P alive (the in-flight P·V's A operand beside the next
    // block's) and give the producer 24 registers (its one thread issues TMA copies), as
    // FlashAttention-3 does, so two consumer warpgroups get 240.
    if (p.overlap) p.producerRegs = 24;
    p.consumerRegs = int(std::min<int64_t>(240, (entry * (p.WG + 1) - p.producerRegs) / p.WG / 8 * 8));
    // O, S, P packed (two of them overlapped), softmax state and addresses.
    const int64_t need = p.D / 2 + p.BK / 2 + (p.overlap ? 2 : 1) * (p.BK / 4) + 40;
    if (p.consumerRegs < need)
      return bad(std::to_string(p.WG) + " consumer warpgroups get " + std::to_string(p.consumerRegs) + " registers each, O, S and P need about " +
                 std::to_string(need));
  }
  // fa3's mbarriers are static shared memory (ptxas pads them to 1 KB).
  const int64_t limit = std::max(t.smemPerBlock, t.smemPerBlockOptIn) - (p.fa3 ? 1024 : 0);
  if (p.smemBytes() > limit)
    return bad("needs " + std::to_string(p.smemBytes()) + " B of shared memory, the limit is " + std::to_string(limit));
  return p;
}

Expected<MfmaAttnPlan> makeMfmaAttnPlan(const ir::AttentionSpec& s, const GpuAttentionConfig& c, const TargetDesc& t) {
  auto bad = [](const std::string& m) { return makeError(ErrorCode::InvalidConfig, "attention (flash-mfma): " + m); };
  if (!attentionMmaPath(MmaFamily::Mfma, ir::ScalarType::F16, t))
    return bad("needs an AMD CDNA target with MFMA (wave64: gfx90a, gfx942)");
  TESSERA_TRY(tensorCoreInputs(s, "flash-mfma", 16, "head_dim must be a multiple of 16, at most 256"));
  MfmaAttnPlan p;
  const std::string& shape = c.MFMA;
  if (shape == "16x16x16") p.MN = 16, p.KI = 16, p.NR = 4;
  else if (shape == "32x32x8") p.MN = 32, p.KI = 8, p.NR = 16;
  else return bad("MFMA must be 16x16x16 or 32x32x8, not '" + shape + "'");
  p.BQ = c.BQ, p.BK = c.BK, p.STAGES = c.STAGES;
  p.W = c.wavesFor(p.MN);
  if (p.W < 1 || p.W > 16) return bad("WAVES must be 1..16");
  if (p.BQ < p.MN || p.BQ % (p.W * p.MN))
    return bad("BQ must be a multiple of WAVES x " + std::to_string(p.MN) + " (" + shape + ": " + std::to_string(p.MN) +
               " query rows per group)");
  p.NG = p.BQ / (p.W * p.MN);
  if (p.NG > 4) return bad("at most 4 query groups of " + std::to_string(p.MN) + " rows per wave");
  if (p.BK < p.MN || p.BK % p.MN || p.BK > 128)
    return bad("BK must be a multiple of " + std::to_string(p.MN) + ", at most 128");
  if (s.head_dim % p.MN) return bad("head_dim must be a multiple of " + std::to_string(p.MN) + " with " + shape);
  if (p.STAGES != 1 && p.STAGES != 2) return bad("STAGES must be 1 or 2");
  p.setProblem(s);
  p.T = 64 * p.W;
  p.LK = p.D + 4;
  p.LV = p.BK + 4;
  if (p.T > t.maxThreadsPerBlock) return bad(std::to_string(p.T) + " threads exceed the block limit");
  if (p.ldsBytes() > t.smemPerBlock)
    return bad("needs " + std::to_string(p.ldsBytes()) + " B of LDS, the limit is " + std::to_string(t.smemPerBlock));
  if (p.regEstimate() > t.operandRegsPerThread)
    return bad("keeps about " + std::to_string(p.regEstimate()) + " values per lane in registers, the limit is " +
               std::to_string(t.operandRegsPerThread));
  return p;
}

Status checkGpuAttention(const ir::Kernel& k, const ir::Config& c, const TargetDesc& t) {
  TESSERA_ASSIGN(ir::AttentionInfo info, ir::analyzeAttention(k));
  // A strategy that is not a string is no strategy either.
  const auto named = c.getStr("strategy");
  const std::string strategy = !c.has("strategy") ? "flash-simt" : named.ok() ? *named : "";
  if (strategy != "flash-simt" && strategy != "flash-mma" && strategy != "flash-wgmma" && strategy != "flash-mfma")
    return makeError(ErrorCode::InvalidConfig,
                     "attention: unknown strategy '" + strategy + "' (flash-simt, flash-mma, flash-wgmma, flash-mfma)");
  TESSERA_ASSIGN(GpuAttentionConfig cfg, readGpuAttentionConfig(c));
  if (strategy == "flash-mma") return checkPlan(info.spec, cfg, t, makeMmaAttnPlan);
  if (strategy == "flash-wgmma") return checkPlan(info.spec, cfg, t, makeWgmmaAttnPlan);
  if (strategy == "flash-mfma") return checkPlan(info.spec, cfg, t, makeMfmaAttnPlan);
  return checkPlan(info.spec, cfg, t, makeSimtAttnPlan);
}

}  // namespace tessera::codegen
