// Owns the GPU GEMM legality rules (gpu_rules.h, gpu_plans.h): the matrix instruction each vendor's
// GEMM reaches, and the plans of strategies simt/mma (gpu_gemm.cpp), mma-lane (gpu_gemm_lane.cpp)
// and wgmma (gpu_wgmma.cpp) from a config, without MLIR.
#include <algorithm>

#include "codegen/gpu_plans.h"

namespace tessera::codegen {

namespace {

int64_t roundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

Error bad(const std::string& m) { return makeError(ErrorCode::InvalidConfig, "gemm: " + m); }

}  // namespace

// NVIDIA: mma.sync m16n8k16 with f16 operands (nvgpu has no bf16/tf32 mma.sync rewrite in MLIR 22);
// multi-stage cp.async pipelines exist on every chip of the table (sm_80+). AMD: 16x16x16 MFMA
// with f16 or bf16 operands (CDNA; our own contract -> amdgpu.mfma rewrite), synchronous copies only.
std::optional<MmaPath> gemmMmaPath(ir::ScalarType input, const TargetDesc& t) {
  if (t.vendor == Vendor::Nvidia) {
    if (input != ir::ScalarType::F16) return std::nullopt;
    const MmaShape* s = t.findMma("f16", "mma.sync");
    if (!s) return std::nullopt;
    return MmaPath{MmaFamily::MmaSync, "mma.sync", *s, 8, true};
  }
  if (t.vendor == Vendor::Amd) {
    if (input == ir::ScalarType::F32) return std::nullopt;
    const MmaShape* s = t.findMma(std::string(ir::typeName(input)), "mfma");
    if (!s) return std::nullopt;
    return MmaPath{MmaFamily::Mfma, "mfma", MmaShape{s->dtype, 16, 16, 16, "mfma"}, 16, false};
  }
  return std::nullopt;
}

// mma.sync m16n8k16 with f16 or bf16 operands, fed by cp.async (sm_80 and later: the chips whose
// table row lists the m16n8k16 shape for the type; sm_75's mma.sync is m16n8k8 and has no cp.async).
std::optional<MmaPath> gemmLaneMmaPath(ir::ScalarType input, const TargetDesc& t) {
  if (t.vendor != Vendor::Nvidia) return std::nullopt;
  if (input != ir::ScalarType::F16 && input != ir::ScalarType::BF16) return std::nullopt;
  const MmaShape* s = t.findMma(std::string(ir::typeName(input)), "mma.sync");
  if (!s || s->k != 16) return std::nullopt;
  return MmaPath{MmaFamily::MmaSync, "mma.sync", *s, 16, true};
}

// wgmma.mma_async m64nNk16 with f16 or bf16 operands from shared memory, fed by TMA: the chips
// whose table row lists it (sm_90a: the arch-specific instructions).
std::optional<MmaPath> gemmWarpgroupMmaPath(ir::ScalarType input, const TargetDesc& t) {
  if (t.vendor != Vendor::Nvidia) return std::nullopt;
  if (input != ir::ScalarType::F16 && input != ir::ScalarType::BF16) return std::nullopt;
  const MmaShape* s = t.findMma(std::string(ir::typeName(input)), "wgmma");
  if (!s) return std::nullopt;
  return MmaPath{MmaFamily::Wgmma, "wgmma", *s, 64, true};
}

namespace {

// Copy distribution of a rows x cols tile over `threads`: each thread moves VEC contiguous
// elements of some rows.
Status copyThreads(int64_t rows, int64_t cols, int64_t vec, int64_t threads, int64_t out[2], const char* what) {
  if (cols % vec) return bad(std::string(what) + " tile width " + std::to_string(cols) + " is not a multiple of VEC=" + std::to_string(vec));
  int64_t c1 = cols / vec;
  if (c1 > threads || threads % c1) return bad(std::string(what) + " copy: " + std::to_string(c1) + " vectors per row do not split over " + std::to_string(threads) + " threads");
  int64_t c0 = std::min(threads / c1, rows);
  if (rows % c0) return bad(std::string(what) + " copy: " + std::to_string(rows) + " rows do not split over " + std::to_string(c0) + " thread rows");
  out[0] = c0;
  out[1] = c1;
  return {};
}

}  // namespace

Expected<gemm::Tiling> makeGemmTiling(const ir::GemmInfo& g, const GpuGemmConfig& c, const TargetDesc& t) {
  gemm::Tiling p;
  const std::string& strategy = c.strategy;
  p.BM = c.BM, p.BN = c.BN, p.BK = c.BK, p.TM = c.TM, p.TN = c.TN, p.VEC = c.VEC, p.stages = c.STAGES;
  p.inType = g.inType;
  p.warp = t.warpSize;
  const int64_t bytes = ir::byteSize(g.inType);
  for (auto [nm, v] : {std::pair{"BM", p.BM}, {"BN", p.BN}, {"BK", p.BK}, {"TM", p.TM}, {"TN", p.TN}, {"VEC", p.VEC}, {"STAGES", p.stages}})
    if (v <= 0) return bad(std::string(nm) + " must be positive");
  if (p.BM % p.TM || p.BN % p.TN) return bad("the block tile must be a multiple of TM x TN");
  if (p.VEC * bytes > 16) return bad("VEC=" + std::to_string(p.VEC) + " exceeds 16-byte copies");
  std::string dt(ir::typeName(g.inType));
  if (strategy == "simt") {
    p.path = gemm::Path::Simt;
    if (p.stages != 1) return bad("STAGES > 1 needs strategy=mma (cp.async pipeline)");
    p.threads = (p.BM / p.TM) * (p.BN / p.TN);
    p.blockX = p.BN / p.TN;
    p.blockY = p.BM / p.TM;
  } else if (strategy == "mma") {
    std::optional<MmaPath> mma = gemmMmaPath(g.inType, t);
    if (!mma)
      return bad(t.name + " has no matrix instruction our lowering reaches for " + dt +
                 " operands (NVIDIA: f16 mma.sync; CDNA: f16/bf16 MFMA): use strategy=simt");
    p.path = mma->family == MmaFamily::Mfma ? gemm::Path::Mfma : gemm::Path::MmaSync;
    const MmaShape& sh = mma->shape;
    if (p.TN % mma->tnMultiple)
      return bad("TN must be a multiple of " + std::to_string(mma->tnMultiple) + " (" + mma->kind + " m" +
                 std::to_string(sh.m) + "n" + std::to_string(sh.n) + "k" + std::to_string(sh.k) + ")");
    if (p.stages != 1 && !mma->asyncCopies) return bad("STAGES > 1 needs asynchronous copies (cp.async)");
    if (p.TM % 16 || p.BK % 16) return bad("TM and BK must be multiples of 16");
    p.threads = int64_t(t.warpSize) * (p.BM / p.TM) * (p.BN / p.TN);
    p.blockX = int64_t(t.warpSize) * (p.BN / p.TN);
    p.blockY = p.BM / p.TM;
    if (p.stages > 1 && p.VEC * bytes != 16) return bad("a cp.async pipeline copies 16 bytes: VEC*bytes must be 16");
  } else {
    return bad("strategy must be simt, mma, mma-lane or wgmma, got " + strategy);
  }
  if (p.threads > t.maxThreadsPerBlock)
    return bad(std::to_string(p.threads) + " threads per block exceed " + std::to_string(t.maxThreadsPerBlock));
  int64_t smem = p.stages * (p.BM * p.BK + p.BK * p.BN) * bytes;
  if (smem > t.smemPerBlock)
    return bad("A/B tiles need " + std::to_string(smem) + " B of shared memory, the limit is " + std::to_string(t.smemPerBlock));
  p.smemLimit = t.smemPerBlock;
  TESSERA_TRY(copyThreads(p.BM, p.BK, p.VEC, p.threads, p.copyA, "A"));
  TESSERA_TRY(copyThreads(p.BK, p.BN, p.VEC, p.threads, p.copyB, "B"));
  // cp.async groups are formed from straight-line per-thread copies: a copy that leaves threads
  // idle is predicated and would stay synchronous.
  if (p.stages > 1 && (p.copyA[0] * p.copyA[1] != p.threads || p.copyB[0] * p.copyB[1] != p.threads))
    return bad("a cp.async pipeline needs the A and B tile copies to use all " + std::to_string(p.threads) + " threads");
  p.Mp = roundUp(g.m, p.BM);
  p.Np = roundUp(g.n, p.BN);
  p.Kp = roundUp(g.k, p.BK);
  if (p.stages > 1 && p.Kp / p.BK < p.stages)
    return bad("K=" + std::to_string(g.k) + " has fewer than STAGES=" + std::to_string(p.stages) + " K tiles");
  return p;
}

namespace lane {

namespace {
Error bad(const std::string& m) { return makeError(ErrorCode::InvalidConfig, "gemm (mma-lane): " + m); }
}  // namespace

Expected<Plan> makePlan(const ir::GemmInfo& g, const GpuGemmConfig& c, const TargetDesc& t) {
  if (!gemmLaneMmaPath(g.inType, t))
    return bad(t.name + " has no mma.sync m16n8k16 for " + std::string(ir::typeName(g.inType)) +
               " operands with cp.async (NVIDIA sm_80 and later, f16/bf16): use strategy=simt");
  Plan p;
  p.g = g;
  p.batch = std::max<int64_t>(g.batch, 1);
  const int64_t VEC = c.VEC;
  p.BM = c.BM, p.BN = c.BN, p.BK = c.BK, p.TM = c.TM, p.TN = c.TN, p.S = c.STAGES;
  if (c.SPLITK != 1) return bad("SPLITK > 1 needs strategy=wgmma");
  if (VEC != 8) return bad("VEC must be 8: the ring moves 16-byte chunks (cp.async)");
  if (p.TM <= 0 || p.TM % 16 || p.TM > 128) return bad("TM (rows per warp) must be 16, 32, ..., 128");
  if (p.TN <= 0 || p.TN % 16 || p.TN > 128) return bad("TN (columns per warp) must be a multiple of 16 (ldmatrix.x4 covers two n8 tiles), at most 128");
  if (p.BM <= 0 || p.BN <= 0 || p.BM % p.TM || p.BN % p.TN) return bad("the block tile must be a multiple of the warp tile TM x TN");
  if (p.BK != 16 && p.BK != 32 && p.BK != 64) return bad("BK must be 16, 32 or 64");
  if (p.S < 2 || p.S > 4) return bad("STAGES must be 2, 3 or 4 (cp.async ring slots)");
  if (p.TM * p.TN / 32 > 128) return bad("a " + std::to_string(p.TM) + "x" + std::to_string(p.TN) + " warp tile needs " +
                                         std::to_string(p.TM * p.TN / 32) + " accumulator registers per thread (at most 128)");
  p.warpsN = p.BN / p.TN;
  p.warps = (p.BM / p.TM) * p.warpsN;
  p.T = 32 * p.warps;
  if (p.T > t.maxThreadsPerBlock) return bad(std::to_string(p.T) + " threads per block exceed " + std::to_string(t.maxThreadsPerBlock));
  if (p.warps > 16) return bad(std::to_string(p.warps) + " warps per block: at most 16");
  // A: [M][K] (or [K][M] when transposed); B: [K][N] (or [N][K]). A stored row that is not a
  // multiple of 8 elements cannot be moved in 16-byte chunks: that operand is copied row-major.
  p.A.pack = g.transA ? g.m % 8 != 0 : g.k % 8 != 0;
  p.A.kMajor = !g.transA || p.A.pack;
  p.A.rows = p.A.kMajor ? g.m : g.k;
  p.A.pitch = p.A.kMajor ? roundUp(g.k, 8) : g.m;
  p.A.tileR = p.A.kMajor ? p.BM : p.BK;
  p.A.tileC = p.A.kMajor ? p.BK : p.BM;
  p.B.pack = g.transB ? g.k % 8 != 0 : g.n % 8 != 0;
  p.B.kMajor = g.transB && !p.B.pack;
  p.B.rows = p.B.kMajor ? g.n : g.k;
  p.B.pitch = p.B.kMajor ? g.k : roundUp(g.n, 8);
  p.B.tileR = p.B.kMajor ? p.BN : p.BK;
  p.B.tileC = p.B.kMajor ? p.BK : p.BN;
  for (Operand* o : {&p.A, &p.B}) o->ld = o->tileC + kPad;
  p.KT = ceilDiv(g.k, p.BK);
  p.tilesM = ceilDiv(g.m, p.BM);
  p.tilesN = ceilDiv(g.n, p.BN);
  if (p.tilesM > 65535 || p.batch > 65535) return bad("the grid's y and z dimensions hold at most 65535 blocks");
  p.ringBytes = p.S * (p.A.slotElems() + p.B.slotElems()) * 2;
  // The staged C tile reuses the ring: in row bands (a multiple of 8 rows: an accumulator's 8-row
  // half never straddles two) when the whole tile would need more shared memory than the ring.
  const int64_t rowBytes = (p.BN + kStagePad) * 4;
  while (p.BM / p.passes * rowBytes > p.ringBytes && p.BM % (2 * p.passes) == 0 && (p.BM / (2 * p.passes)) % 8 == 0) p.passes *= 2;
  p.passRows = p.BM / p.passes;
  p.stagingBytes = p.passRows * rowBytes;
  p.dynamicBytes = std::max(p.ringBytes, p.stagingBytes);
  const int64_t limit = std::max(t.smemPerBlock, t.smemPerBlockOptIn);
  if (p.dynamicBytes > limit)
    return bad("the ring and the staged C tile need " + std::to_string(p.dynamicBytes) + " B of shared memory, the limit is " +
               std::to_string(limit) + " B");
  return p;
}

}  // namespace lane

namespace wgmma {

namespace {
Error bad(const std::string& m) { return makeError(ErrorCode::InvalidConfig, "gemm (wgmma): " + m); }
}  // namespace

Expected<Plan> makePlan(const ir::GemmInfo& g, const PlanInputs& in) {
  Plan p;
  p.g = g;
  p.batch = std::max<int64_t>(g.batch, 1);
  p.BM = in.BM, p.BN = in.BN, p.TM = in.TM, p.TN = in.TN, p.stages = in.STAGES, p.splitK = in.SPLITK;
  p.elementBytes = ir::byteSize(g.inType);
  if (g.inType != ir::ScalarType::F16 && g.inType != ir::ScalarType::BF16)
    return bad("wgmma takes f16 or bf16 operands, not " + std::string(ir::typeName(g.inType)));
  if (in.BK != kBK) return bad("BK must be 64: a K step is one 128-byte swizzled row of 2-byte elements");
  if (in.VEC != 16 / p.elementBytes) return bad("VEC is not used (TMA moves the tiles): only VEC=" + std::to_string(16 / p.elementBytes) + " is offered");
  if (p.TM != 64 && p.TM != 128) return bad("TM (rows per consumer warpgroup) must be 64 or 128 (wgmma m64 steps)");
  if (p.TN % kBoxN || p.TN > 256 || p.TN <= 0) return bad("TN (columns per consumer warpgroup) must be 64, 128, 192 or 256");
  if (p.BM <= 0 || p.BN <= 0 || p.BM % p.TM || p.BN % p.TN) return bad("the block tile must be a multiple of TM x TN");
  // nvgpu's warpgroup.mma.store places a warp's rows at 16 x (tid.x / 32): warpgroup w's fragments
  // land 64 w rows down, so the consumers must split the block's rows in warpgroup order.
  if (p.TN != p.BN) return bad("TN must equal BN: the consumer warpgroups split the block's rows (BM / TM of them)");
  if (p.BM > 256) return bad("BM must be at most 256 (a TMA box has at most 256 rows)");
  if (p.TM * p.TN > 128 * 128) return bad("a warpgroup tile of " + std::to_string(p.TM) + "x" + std::to_string(p.TN) +
                                          " needs " + std::to_string(p.TM * p.TN / 128) + " accumulator registers per thread (at most 128)");
  // MLIR 22's lowering of warpgroup.mma.store places the second m64 half of a 128-row accumulator
  // as many rows down as one half holds registers per thread (TN / 2) instead of 64: right at
  // TN=128 only. At 128x64 the halves overlap (the NVVM adds 32 rows; the mapped-kernel emulator
  // reports the write-after-write race, and an H200 measured the result wrong, 2026-11-27).
  if (p.TM == 128 && p.TN != 128)
    return bad("TM=128 needs TN=128: MLIR 22's warpgroup store puts a 128-row accumulator's second half TN/2 rows "
               "down, not 64");
  p.consumers = int((p.BM / p.TM) * (p.BN / p.TN));
  if (p.consumers > 4) return bad(std::to_string(p.consumers) + " consumer warpgroups: at most 4 share the register file");
  p.threads = 128 * (int64_t(p.consumers) + 1);
  if (p.threads > in.maxThreads) return bad(std::to_string(p.threads) + " threads per block exceed " + std::to_string(in.maxThreads));
  if (p.stages < 2) return bad("STAGES must be at least 2: the producer refills a slot while the consumers read the other");
  if (p.stages > 8) return bad("STAGES must be at most 8");
  // The register split: at launch every thread holds R = 64K / threads (ptxas, .minnctapersm 1);
  // the producer gives back all but kProducerRegs, the consumers take the rest (multiples of 8).
  const int entry = int(std::min<int64_t>(248, 65536 / p.threads / 8 * 8));
  p.consumerRegs = std::min(240, (entry * (p.consumers + 1) - kProducerRegs) / p.consumers / 8 * 8);
  const int accRegs = int(p.TM * p.TN / 128);
  if (p.consumerRegs < accRegs + 40)
    return bad(std::to_string(p.consumers) + " consumer warpgroups get " + std::to_string(p.consumerRegs) + " registers each, " +
               std::to_string(accRegs) + " accumulators need about " + std::to_string(accRegs + 40));
  p.KT = (g.k + kBK - 1) / kBK;
  if (p.splitK < 1) return bad("SPLITK must be positive");
  if (p.splitK > p.KT) return bad("SPLITK=" + std::to_string(p.splitK) + " exceeds the " + std::to_string(p.KT) + " K tiles");
  p.KTs = (p.KT + p.splitK - 1) / p.splitK;
  if ((p.splitK - 1) * p.KTs >= p.KT)
    return bad("SPLITK=" + std::to_string(p.splitK) + " leaves a split without K tiles (" + std::to_string(p.KT) + " tiles)");
  p.tilesM = (g.m + p.BM - 1) / p.BM;
  p.tilesN = (g.n + p.BN - 1) / p.BN;
  if (in.PERSIST != 0 && in.PERSIST != 1) return bad("PERSIST must be 0 or 1");
  p.persistent = in.PERSIST == 1;
  p.work = p.batch * p.splitK * p.tilesM * p.tilesN;
  // The register split gives one block the whole register file (65536 / threads at launch): one
  // block per SM, so a persistent grid is at most one block per SM.
  p.gridBlocks = p.persistent ? std::min(p.work, std::max<int64_t>(in.units, 1)) : p.work;
  if (!p.persistent && p.batch * p.splitK > 65535) return bad("batch x SPLITK exceeds the grid's z limit (65535)");
  // TMA reads rows whose pitch is a multiple of 16 bytes from 16-byte aligned addresses: A as
  // [M][K] and B as [K][N]; anything else (transposed, or a pitch that is not) is copied first.
  p.packA = g.transA || (g.k * p.elementBytes) % 16 != 0;
  p.packB = g.transB || (g.n * p.elementBytes) % 16 != 0;
  p.pitchA = p.packA ? roundUp(g.k, 8) : g.k;
  p.pitchB = p.packB ? roundUp(g.n, 8) : g.n;
  p.stageBytes = (p.BM + p.BN) * kBK * p.elementBytes;
  p.ringBytes = p.stages * p.stageBytes;
  p.stagingBytes = p.BM * (p.BN + kStagePad) * 4;
  p.stagingOffset = p.persistent ? roundUp(p.ringBytes, 1024) : 0;
  p.flagOffset = roundUp(p.persistent ? p.stagingOffset + p.stagingBytes : std::max(p.ringBytes, p.stagingBytes), 1024);
  p.dynamicBytes = p.flagOffset + 16;
  // Static shared memory holds the 2 x STAGES mbarriers (ptxas reports 1 KB with its padding).
  if (p.dynamicBytes + 1024 > in.smemOptIn)
    return bad(std::string(p.persistent ? "the ring and, past it, the C tile (PERSIST=1) need " : "the ring and the C tile need ") +
               std::to_string(p.dynamicBytes) + " B of shared memory, the limit is " +
               std::to_string(in.smemOptIn - 1024) + " B");
  return p;
}

std::string registerPoolProblem(const Plan& p, int regs) {
  const int64_t pool = int64_t(regs) * p.threads, want = 128 * (int64_t(kProducerRegs) + int64_t(p.consumers) * p.consumerRegs);
  if (regs > p.consumerRegs)
    return "setmaxnreg: the consumers ask for " + std::to_string(p.consumerRegs) + " registers but start with " + std::to_string(regs);
  if (pool < want)
    return "setmaxnreg: the block holds " + std::to_string(pool) + " registers, its warpgroups ask for " + std::to_string(want);
  return "";
}

}  // namespace wgmma

Expected<wgmma::Plan> planGpuGemmWgmma(const ir::GemmInfo& g, const GpuGemmConfig& c, const TargetDesc& t) {
  if (!gemmWarpgroupMmaPath(g.inType, t))
    return makeError(ErrorCode::InvalidConfig, "gemm: " + t.name + " has no wgmma for " + std::string(ir::typeName(g.inType)) +
                                                   " operands (sm_90a, f16/bf16): use strategy=mma or simt");
  wgmma::PlanInputs in{};
  in.BM = c.BM, in.BN = c.BN, in.BK = c.BK, in.TM = c.TM, in.TN = c.TN, in.VEC = c.VEC, in.STAGES = c.STAGES;
  in.SPLITK = c.SPLITK;
  in.PERSIST = c.PERSIST;
  in.units = t.units;
  in.smemOptIn = std::max(t.smemPerBlock, t.smemPerBlockOptIn);
  in.maxThreads = t.maxThreadsPerBlock;
  return wgmma::makePlan(g, in);
}

Status checkGpuGemm(const ir::Kernel& k, const ir::Config& c, const TargetDesc& t) {
  TESSERA_ASSIGN(ir::GemmInfo g, ir::analyzeGemm(k));
  TESSERA_ASSIGN(GpuGemmConfig cfg, readGpuGemmConfig(c));
  return checkGpuGemm(g, cfg, t);
}

Status checkGpuGemm(const ir::GemmInfo& g, const GpuGemmConfig& c, const TargetDesc& t) {
  const bool isWgmma = c.strategy == "wgmma";
  if (c.PERSIST != 0 && !isWgmma) return bad("PERSIST=1 needs strategy=wgmma");
  if (c.strategy == "mma-lane") {
    TESSERA_ASSIGN(lane::Plan p, lane::makePlan(g, c, t));
    (void)p;
    return {};
  }
  if (c.SPLITK != 1 && !isWgmma) return bad("SPLITK > 1 needs strategy=wgmma");
  if (isWgmma) {
    TESSERA_ASSIGN(wgmma::Plan w, planGpuGemmWgmma(g, c, t));
    (void)w;
    return {};
  }
  TESSERA_ASSIGN(gemm::Tiling p, makeGemmTiling(g, c, t));
  (void)p;
  return {};
}

}  // namespace tessera::codegen
