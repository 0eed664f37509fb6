// Owns the family adapters of the analytic GPU model: GEMM, attention and elementwise configs in
// the model's terms, as the code generator builds them (codegen/gpu_gemm.cpp, gpu_attention.cpp,
// gpu_elementwise.cpp).
#include "measure/estimate.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "codegen/gpu_backend.h"
#include "codegen/gpu_rules.h"
#include "ir/families.h"
#include "targets/kernel_configs.h"

namespace tessera::measure {

namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / std::max<int64_t>(b, 1); }
int64_t roundUp(int64_t v, int64_t m) { return ceilDiv(v, m) * m; }
std::string str(int64_t v) { return std::to_string(v); }

// An attention estimate's "key blocks" fact: the key blocks a query block visits.
std::string keyBlocks(bool causal, double visited, int64_t kvBlocks) {
  return causal ? "causal: " + std::to_string(int64_t(std::lround(visited))) + " of " + str(kvBlocks) + " visited on average"
                : str(kvBlocks) + " per query block";
}

// The estimate with its facts and, last, its grid (what every one-launch GPU estimate ends with).
KernelEstimate withGrid(KernelEstimate& e, std::vector<std::pair<std::string, std::string>> facts) {
  facts.emplace_back("grid", str(e.workload.blocks) + " blocks");
  e.facts = std::move(facts);
  return std::move(e);
}

// FMA-equivalent operations of one element of an elementwise expression: loads and index
// arithmetic are free, a transcendental costs its polynomial (as the code generator expands it).
double opCost(const ir::ExprRef& e) {
  if (!e) return 0;
  double c = 0;
  switch (e->op) {
    case ir::Op::FConst: case ir::Op::IConst: case ir::Op::Var: case ir::Op::Load: return 0;
    case ir::Op::Exp: case ir::Op::Log: case ir::Op::Tanh: case ir::Op::Sigmoid: case ir::Op::Silu:
      c = 12; break;
    case ir::Op::Gelu: case ir::Op::GeluErf: case ir::Op::Erf: c = 20; break;
    case ir::Op::Div: case ir::Op::Sqrt: case ir::Op::Rsqrt: c = 8; break;
    case ir::Op::Cast: c = 0.5; break;
    default: c = 1;
  }
  for (const auto& a : e->args) c += opCost(a);
  return c;
}

// Resources: the compiler's report when there is one (exact registers, shared memory, resident
// blocks), else the workload's own guesses.
void applyResources(costmodel::GpuWorkload& w, const codegen::ResourceReport* r) {
  if (!r) return;
  int regs = r->vendor == Vendor::Amd ? r->vgprs + r->agprs : r->registers;
  if (regs > 0) w.regsPerThread = regs;
  if (r->sharedBytes + r->dynamicSharedBytes > 0) w.smemPerBlock = r->sharedBytes + r->dynamicSharedBytes;
  if (r->blocksPerUnit > 0) w.blocksPerUnit = r->blocksPerUnit;
}

// DRAM traffic of a kernel whose blocks re-read shared operand panels: each wave's working set
// comes from DRAM once when it fits in L2 (plus what stays resident across waves), else the
// re-reads miss too.
double dramWithL2(double unique, double l2Traffic, double waveWorkingSet, double l2) {
  if (l2 > 0 && waveWorkingSet <= l2) return std::min(l2Traffic, unique);
  double miss = l2 > 0 ? 1.0 - l2 / waveWorkingSet : 1.0;
  return std::min(l2Traffic, unique + miss * std::max(0.0, l2Traffic - unique));
}

// A GPU GEMM's DRAM traffic (w.dramBytes; after w.l2Bytes and the block's resources are set): A,
// B and C once, plus what L2 cannot hold of a wave's working set. Blocks start x-fastest over N:
// a wave holds `rows` block rows and `cols` block columns; B stays in L2 when it fits in half of it.
void gemmDram(costmodel::GpuWorkload& w, const TargetDesc& t, const codegen::ResourceReport* res, double A, double B,
              double C, int64_t Np, int64_t Kp, int64_t BM, int64_t BN, int64_t bytes) {
  int bpu = res && res->blocksPerUnit > 0 ? res->blocksPerUnit : costmodel::residentBlocks(w, t);
  const double perWave = double(std::max(t.units, 1)) * std::max(bpu, 1);
  const double gridX = double(Np / BN);
  const double cols = std::min(perWave, gridX), rows = std::ceil(perWave / gridX);
  const double working = rows * BM * Kp * bytes + (B <= double(t.l2Bytes_gpu) / 2 ? B : cols * BN * Kp * bytes);
  w.dramBytes = dramWithL2(A + B + C, w.l2Bytes, working, double(t.l2Bytes_gpu));
}

// wgmma (codegen/nvidia/gpu_wgmma.cpp): a producer warpgroup issues TMA copies of (BM + BN) x 64 tiles
// into 128B-swizzled shared memory (no bank conflicts: the swizzle spreads each 128-byte row over
// the banks), consumer warpgroups run wgmma m64nTNk16 from shared-memory descriptors at the chip's
// full tensor peak (the table's wgmma row), all batches and K splits in one grid.
Expected<KernelEstimate> gemmWarpgroup(const ir::GemmInfo& g, const GpuGemmConfig& c, const TargetDesc& t,
                                       const codegen::ResourceReport* res) {
  const int64_t BM = c.BM, BN = c.BN, BK = c.BK, TM = c.TM, TN = c.TN, ST = c.STAGES;
  TESSERA_ASSIGN(const codegen::GpuBackend* backend, codegen::gpuBackendFor(t));
  auto path = backend->gemmWarpgroupMma(g.inType, t);
  if (!path) return makeError(ErrorCode::InvalidConfig, t.name + " has no wgmma for these operands");
  const int64_t split = std::max<int64_t>(c.SPLITK, 1);
  const int64_t persist = c.PERSIST;
  const int64_t bytes = ir::byteSize(g.inType), batch = std::max<int64_t>(g.batch, 1);
  const int64_t Mp = roundUp(g.m, BM), Np = roundUp(g.n, BN), Kp = roundUp(g.k, BK);
  const int64_t KT = Kp / BK, KTs = ceilDiv(KT, split);
  const int64_t consumers = (BM / TM) * (BN / TN);
  KernelEstimate e;
  costmodel::GpuWorkload& w = e.workload;
  const int64_t tiles = (Mp / BM) * (Np / BN);
  // Work items (tiles x batch x SPLITK) in waves of one block per SM (the register split holds the
  // whole register file): a persistent grid runs the same items in the same rounds per SM, so
  // it prices as many waves; what it changes is the latency between them (below).
  w.blocks = tiles * batch * split;
  w.launches = 1;
  w.threadsPerBlock = 128 * (consumers + 1);
  w.matrixCores = true;
  w.pipePeakGflops = t.computePeakGflops(g.inType) * path->shape.peakShare;
  // Per consumer warp and K tile: its share of the wgmma work in m16n8k16 units, against the
  // handful of other instructions (barrier wait, descriptors, release, wait_group).
  const double mmas = double(TM / 16) * double(TN / 8) * double(BK / 16) / 4.0;
  w.issueEfficiency = mmas / (mmas + 0.25 * 8.0);
  w.independentOps = mmas;
  w.regsPerThread = int(TM * TN / 128 + 40);
  w.smemPerBlock = persist ? roundUp(ST * (BM + BN) * BK * bytes, 1024) + BM * (BN + 8) * 4
                           : std::max(ST * (BM + BN) * BK * bytes, BM * (BN + 8) * 4);
  w.flopsPerBlock = 2.0 * double(BM) * double(BN) * double(KTs * BK);
  // Shared memory: TMA writes each tile once, every consumer's wgmma reads its A rows and B columns
  // per K tile, the C tile is staged (f32 write + read). The staging writes are pairs of adjacent
  // accumulator columns in 8-byte stores (gpu_wgmma_kernel.cpp): a half-warp phase covers the 32
  // banks once with rows BN + 8 floats apart; the row-wise reads are conflict-free too.
  w.smemBytesPerBlock = double(KTs * BK) * (double(BM + BN) * bytes + double(consumers) * double(TM + TN) * bytes) +
                        double(BM * BN) * 8.0;
  w.sharedConflictWays = 1;
  const double outBytes = double(ir::byteSize(g.outType));
  // L2: the TMA traffic of every block's panels, the output, split-K's f32 partials (write + read).
  const double partials = split > 1 ? double(BM * BN) * 8.0 : 0.0;
  w.l2Bytes = double(w.blocks) * (double(BM + BN) * double(KTs * BK) * bytes + partials) + double(tiles * batch * BM * BN) * outBytes;
  const double A = double(batch * Mp * Kp * bytes), B = double(batch * Kp * Np * bytes);
  const double C = double(batch * Mp * Np) * outBytes + (split > 1 ? double(w.blocks * BM * BN) * 8.0 : 0.0);
  gemmDram(w, t, res, A, B, C, Np, Kp, BM, BN, bytes);
  // TMA keeps STAGES - 1 tiles in flight per block, whatever the thread count.
  w.bytesInFlightPerThread = double((BM + BN) * BK * bytes) * double(std::max<int64_t>(ST - 1, 1)) / double(w.threadsPerBlock);
  w.serialSteps = KTs;
  w.stages = int(ST);
  // Split-K's reduction (gpu_wgmma_kernel.cpp): per slice a fence and an arrival (two round trips),
  // then the slice the block arrives last on, summed one element per thread and step (each step's
  // SPLITK loads in flight together: one round trip).
  if (split > 1) w.tailRounds = 2 * split + ceilDiv(TM * TN, 128 * split);
  // Each item's ring fill (the first TMA round trip) and its epilogue (the C tile staged, then
  // stored): in series per wave when every item is its own block; a persistent block fills the
  // next item's slots under this one's epilogue, so only its first fill and last epilogue show.
  if (persist)
    w.launchRounds = 2;
  else
    w.tailRounds += 2;
  applyResources(w, res);
  const std::string mmaName = "wgmma m64n" + str(TN) + "k16";
  w.what = mmaName + " + TMA, block " + str(BM) + "x" + str(BN) + "x" + str(BK) + ", " + str(consumers) + " consumer warpgroups" +
           (split > 1 ? ", split-K " + str(split) : "") + (persist ? ", persistent" : "");
  return withGrid(e, {{"strategy", "matrix cores, warpgroup level (wgmma fed by TMA, warp-specialized)"},
                      {"block tile", str(BM) + "x" + str(BN) + "x" + str(BK) + " (MxNxK)"},
                      {"warpgroup tile", str(TM) + "x" + str(TN) + " (" + str(consumers) + " consumers + 1 producer)"},
                      {"stages", str(ST) + " (mbarrier ring, TMA 128B swizzle: no bank conflicts)"},
                      {"split-K", str(split)},
                      {"scheduler", persist ? "persistent (a block per SM looping over the work items)" : "a block per work item"},
                      {"threads", str(w.threadsPerBlock)},
                      {"MMA", mmaName}});
}

Expected<KernelEstimate> gemm(const ir::Kernel& k, const ir::Config& c, const TargetDesc& t,
                              const codegen::ResourceReport* res) {
  TESSERA_ASSIGN(ir::GemmInfo g, ir::analyzeGemm(k));
  TESSERA_ASSIGN(GpuGemmConfig cfg, readGpuGemmConfig(c));
  const std::string& strategy = cfg.strategy;
  const int64_t BM = cfg.BM, BN = cfg.BN, BK = cfg.BK, TM = cfg.TM, TN = cfg.TN, VEC = cfg.VEC, ST = cfg.STAGES;
  if (BM <= 0 || BN <= 0 || BK <= 0 || TM <= 0 || TN <= 0 || BM % TM || BN % TN)
    return makeError(ErrorCode::InvalidConfig, "gemm estimate: inconsistent tiles " + c.str());
  const int64_t bytes = ir::byteSize(g.inType);
  const int64_t Mp = roundUp(g.m, BM), Np = roundUp(g.n, BN), Kp = roundUp(g.k, BK);
  // mma-lane (codegen/nvidia/gpu_gemm_lane.cpp): the same mma.sync work per warp as `mma`, every batch in
  // one grid, rows padded instead of swizzled (no conflicts either), the C tile staged in shared
  // memory and written once in the output type (no f32 workspace).
  const bool lane = strategy == "mma-lane";
  const bool mma = strategy == "mma" || lane;
  if (strategy == "wgmma") return gemmWarpgroup(g, cfg, t, res);
  if (VEC <= 0) return makeError(ErrorCode::InvalidConfig, "gemm estimate: VEC must be positive");
  KernelEstimate e;
  costmodel::GpuWorkload& w = e.workload;
  const int64_t batch = std::max<int64_t>(g.batch, 1);
  w.blocks = (Mp / BM) * (Np / BN) * (lane ? batch : 1);
  w.launches = lane ? 1 : batch;
  const int64_t tiles = (BM / TM) * (BN / TN);  // threads (simt) or warps (mma)
  w.threadsPerBlock = mma ? tiles * t.warpSize : tiles;
  const int64_t warps = ceilDiv(w.threadsPerBlock, t.warpSize);
  w.smemPerBlock = lane ? std::max(ST * (BM * (BK + 8) + BK * (BN + 8)) * bytes, BM * (BN + 8) * 4)
                        : ST * (BM * BK + BK * BN) * bytes;
  w.flopsPerBlock = 2.0 * double(BM) * double(BN) * double(Kp);
  // Global->shared copies per thread per K step: VEC elements each (global load + shared store).
  const double copies = double(BM * BK + BK * BN) / double(VEC) / double(std::max<int64_t>(w.threadsPerBlock, 1));
  std::string mmaName = "none (FMA pipes)";
  if (mma) {
    TESSERA_ASSIGN(const codegen::GpuBackend* backend, codegen::gpuBackendFor(t));
    auto path = lane ? backend->gemmLaneMma(g.inType, t) : backend->gemmMma(g.inType, t);
    if (!path) return makeError(ErrorCode::InvalidConfig, t.name + " has no matrix path for these operands");
    w.matrixCores = true;
    w.pipePeakGflops = t.computePeakGflops(g.inType) * path->shape.peakShare;
    // Per warp and 16-deep k slice: the MMAs, their fragment loads (ldmatrix) and the warp's share
    // of the tile copies (two instructions per copy, issued per thread = per warp instruction).
    const double mmas = double(TM / 16) * double(TN / path->shape.n);
    const double loads = double(TM / 16) + double(std::max<int64_t>(TN / 16, 1));
    const double copyInstr = 2.0 * copies * 16.0 / double(BK);
    w.issueEfficiency = mmas / (mmas + 0.5 * loads + 0.25 * copyInstr);
    w.independentOps = mmas;
    w.regsPerThread = int(TM * TN / t.warpSize + (TM / 16) * 4 + (TN / 8) * 2 + 40);
    mmaName = path->kind + " m" + str(path->shape.m) + "n" + str(path->shape.n) + "k" + str(path->shape.k);
    // ldmatrix-style fragment loads: each warp reads its A rows and B columns once per k.
    w.smemBytesPerBlock = double(Kp) * (double(warps) * double(TM + TN) * bytes + double(BM + BN) * bytes);
    if (lane) w.smemBytesPerBlock += double(BM * BN) * 8.0;  // the staged C tile, written and read
  } else {
    w.pipePeakGflops = t.peakGflopsF32;
    w.issueEfficiency = double(TM * TN) / (double(TM * TN + TM + TN + 2) + 2.0 * copies / double(BK));
    w.independentOps = double(TM * TN);
    w.regsPerThread = int(TM * TN + TM + TN + 24);
    // Per k a warp reads TM broadcast A values and TN rows of B values: one 128-byte wavefront each.
    w.smemBytesPerBlock = double(Kp) * (double(warps) * double(TM + TN) * 128 + double(BM + BN) * bytes);
  }
  // Global traffic: every block loads its A and B panels, writes its C tile (f32 workspace, then
  // the epilogue's read of it and the output's write).
  const double outBytes = double(ir::byteSize(g.outType));
  const double cBytes = lane ? outBytes : 8 + outBytes;  // per element of C
  w.l2Bytes = double(w.blocks) * (double(BM + BN) * double(Kp) * bytes + double(BM * BN) * cBytes);
  const double per = lane ? double(batch) : 1.0;  // a launch's share of the batches
  const double A = per * double(Mp * Kp * bytes), B = per * double(Kp * Np * bytes), C = per * double(Mp * Np) * cBytes;
  gemmDram(w, t, res, A, B, C, Np, Kp, BM, BN, bytes);
  w.bytesInFlightPerThread = double(BM * BK + BK * BN) * bytes / double(w.threadsPerBlock) * std::max<int64_t>(ST - 1, 1);
  w.serialSteps = Kp / BK;
  w.stages = int(ST);
  applyResources(w, res);
  w.what = mma ? std::string(lane ? "mma-lane " : "") + mmaName + ", block " + str(BM) + "x" + str(BN) + "x" + str(BK) + ", " + str(warps) + " warps"
               : "simt, block " + str(BM) + "x" + str(BN) + "x" + str(BK) + ", " + str(w.threadsPerBlock) + " threads";
  e.facts = {{"strategy", lane ? "matrix cores, lane-level mma.sync (ldmatrix, cp.async ring, batches in one grid)"
                                : mma ? "matrix cores" : "FMA pipes (simt)"},
             {"block tile", str(BM) + "x" + str(BN) + "x" + str(BK) + " (MxNxK)"},
             {mma ? "warp tile" : "thread tile", str(TM) + "x" + str(TN)},
             {"K step", str(BK)},
             {"stages", str(ST) + (ST > 1 ? " (cp.async pipeline)" : " (synchronous copies)")},
             {"vector width", str(VEC) + " x " + std::string(ir::typeName(g.inType)) + " (" + str(VEC * bytes) + " B copies)"},
             {"threads", str(w.threadsPerBlock) + " (" + str(warps) + " " + t.words().warps + " of " + str(t.warpSize) + ")"},
             {"MMA", mmaName},
             {"grid", str(w.blocks) + " blocks" + (w.launches > 1 ? " x " + str(w.launches) + " launches" : "")}};
  return e;
}

// flash-mma (codegen/nvidia/gpu_attention_mma.cpp): FlashAttention-2 on mma.sync m16n8k16, a warp per 16
// query rows; per visited key block each warp runs S = Q K^T and O += P V on the tensor pipe
// (2 * BK * D / 128 MMAs), loads K and V fragments with ldmatrix (BK * D / 128), and spends issue
// slots on the online softmax (about 6 instructions per score it holds: BK / 2), O's rescale (D / 2)
// and its share of the cp.async ring. K/V tiles cross shared memory once per warp.
// flash-wgmma (codegen/nvidia/gpu_attention_wgmma.cpp, sm_90a) is the same loop with both products on
// wgmma from shared memory (no ldmatrix; wgmma's full peak share), a warpgroup per 64 rows, and P
// through shared memory; its waits serialize the softmax and the MMAs of a warpgroup. Not yet
// calibrated on a device: its terms are flash-mma's, less the fragment loads, plus P's stores.
// PIPE=fa3 adds a producer warpgroup: the consumers issue no copies, P stays in registers (no
// stores, no warpgroup barrier), STAGES-1 slots of K/V are in flight behind the one being read,
// and the register split (setmaxnreg, one block per SM) is what bounds occupancy.
// An attention kernel's memory traffic (w.l2Bytes, w.dramBytes; after the block's resources are
// set): each block reads its Q rows and writes its O rows once and reads K and V per visited key
// block through L2; DRAM sees the unique bytes, plus K and V re-read when the heads of one wave do
// not fit in L2. Concurrent blocks of one wave cover perWave / qBlocks heads, whose K and V must
// stay in L2; query heads of one GQA group share theirs.
void attentionTraffic(costmodel::GpuWorkload& w, const TargetDesc& t, const codegen::ResourceReport* res,
                      const ir::AttentionSpec& a, int64_t BQ, int64_t BK, double visited) {
  const int64_t D = a.head_dim, Sq = a.seq_q, Skv = a.seq_kv > 0 ? a.seq_kv : a.seq_q;
  const int64_t H = a.heads, Hkv = a.heads_kv > 0 ? a.heads_kv : a.heads, B = std::max<int64_t>(a.batch, 1);
  const int64_t bytes = ir::byteSize(a.dtype), qBlocks = ceilDiv(Sq, BQ);
  const double qo = double(BQ * D * bytes) * 2;
  w.l2Bytes = double(w.blocks) * (qo + visited * double(BK * D * bytes) * 2);
  const double unique = double(B * H * Sq * D * bytes) * 2 + double(B * Hkv * Skv * D * bytes) * 2;
  int bpu = res && res->blocksPerUnit > 0 ? res->blocksPerUnit : costmodel::residentBlocks(w, t);
  const double perWave = double(std::max(t.units, 1)) * std::max(bpu, 1);
  const double headsInWave = std::max(1.0, perWave / double(qBlocks) / double(std::max<int64_t>(H / Hkv, 1)));
  w.dramBytes = dramWithL2(unique, w.l2Bytes, headsInWave * double(Skv * D * bytes) * 2, double(t.l2Bytes_gpu));
}

Expected<KernelEstimate> attentionMma(const GpuAttentionConfig& c, const TargetDesc& t,
                                      const codegen::ResourceReport* res, const ir::AttentionSpec& a, int64_t BQ,
                                      int64_t BK, double visited, int64_t kvBlocks, KernelEstimate e, bool wgmma) {
  const int64_t ST = c.STAGES;
  const auto path = codegen::attentionMmaPath(wgmma ? codegen::MmaFamily::Wgmma : codegen::MmaFamily::MmaSync,
                                              ir::ScalarType::F16, t);
  const MmaShape* mma = path ? &path->shape : nullptr;
  if (!mma) return makeError(ErrorCode::InvalidConfig, t.name + " has no " + (wgmma ? "wgmma for flash-wgmma" : "mma.sync for flash-mma"));
  const int64_t D = a.head_dim;
  const int64_t bytes = ir::byteSize(a.dtype), LD = D + 8;
  costmodel::GpuWorkload& w = e.workload;
  const int64_t warps = BQ / 16;
  const bool fa3 = wgmma && c.PIPE == "fa3";
  w.threadsPerBlock = (warps + (fa3 ? 4 : 0)) * t.warpSize;
  w.smemPerBlock = (std::max<int64_t>(ST, 1) * 2 * BK + BQ) * (wgmma ? D : LD) * bytes + (wgmma && !fa3 ? BQ * BK * bytes : 0);
  // flash-mma's registers, fitted to ptxas's reports of the whole flash-mma space (sm_80 and sm_90,
  // D 64 and 128, causal or not, BK and BQ 16-128, 1-2 stages: 254 kernels, 2026-11-27): O and the
  // Q fragments grow with D, S and P with BK, and the causal mask keeps S's element indices live
  // (0.3 per key column). Mean error 7.5 registers (the former D/2 + BK/2 + D/4 + 40: 19, and it
  // took the causal D128 BK128 kernels, which ptxas spills and Tessera refuses, for 200); it
  // classes 251 of the 254 as spilling or not as ptxas does (the 3 others fit at exactly 255).
  const double mmaRegs = 16 + 0.85 * double(D) + 0.75 * double(BK) + (a.causal ? 0.3 * double(BK) : 0.0) +
                         0.05 * double(BK * D) / 128.0;
  w.regsPerThread = fa3 ? int(std::min<int64_t>(248, 65536 / w.threadsPerBlock / 8 * 8))
                        : wgmma ? int(D / 2 + BK / 2 + 40) : int(mmaRegs);
  // Past the per-thread limit ptxas spills to local memory, and Tessera refuses kernels that spill
  // (codegen/nvidia/gpu_backend_nvidia.cpp): without the compiler's report, such a config is one the
  // model takes for unlaunchable (a prior ranks it last). With the report, its own problems decide.
  w.spills = !res && !fa3 && !wgmma && t.maxRegsPerThread > 0 && w.regsPerThread > t.maxRegsPerThread;
  w.matrixCores = true;
  w.pipePeakGflops = t.computePeakGflops(a.dtype) * mma->peakShare;
  w.flopsPerBlock = visited * 4.0 * double(BQ) * double(BK) * double(D);
  const double mmas = 2.0 * double(BK * D) / 128.0, loads = wgmma ? 0.0 : double(BK * D) / 128.0;
  const double copies = fa3 ? 0.0 : 2.0 * double(BK * D / 8) / double(w.threadsPerBlock) * 2.0;
  const double other = 3.0 * double(BK) + double(D) / 2.0 + 8.0 + copies + (wgmma && !fa3 ? double(BK) / 4.0 : 0.0);
  w.issueEfficiency = mmas / (mmas + 0.5 * loads + 0.25 * other);
  w.independentOps = std::max(1.0, double(D) / 8.0);
  w.smemBytesPerBlock = visited * (double(warps) + 1.0) * 2.0 * double(BK * D * bytes) + double(BQ * D * bytes) * 2;
  attentionTraffic(w, t, res, a, BQ, BK, visited);
  w.bytesInFlightPerThread = double(2 * BK * D * bytes) / double(w.threadsPerBlock) * double(std::max<int64_t>(ST - 1, 1));
  if (fa3) w.bytesInFlightPerThread = double(2 * BK * D * bytes) * double(ST - 1) / double(warps * t.warpSize);
  w.serialSteps = int64_t(std::ceil(visited));
  w.stages = int(ST);
  applyResources(w, res);
  const std::string mmaName = wgmma ? "wgmma m64n" + str(BK) + "k16 and m64n" + str(D) + "k16"
                                    : "mma.sync m" + str(mma->m) + "n" + str(mma->n) + "k" + str(mma->k);
  w.what = std::string(wgmma ? (fa3 ? "flash-wgmma fa3 (" : "flash-wgmma (") : "flash-mma (") + mmaName + "), " + str(BQ) + " query rows x " + str(BK) +
           " keys per step, " + str(warps) + " warps" + (fa3 ? " + a TMA producer warpgroup, " : ", ") + str(ST) + " stage(s)";
  return withGrid(e, {{"strategy", fa3     ? "FlashAttention-3 on wgmma: a TMA producer warpgroup, a consumer warpgroup per 64 query rows, P from registers"
                                   : wgmma ? "FlashAttention-2 on wgmma: a warpgroup per 64 query rows, P through shared memory"
                                           : "FlashAttention-2 on tensor cores: a warp per 16 query rows, P kept in registers"},
                      {"block tile", str(BQ) + " query rows x " + str(BK) + " keys"},
                      {"stages", str(ST) + (fa3 ? " (TMA + mbarrier ring)" : ST > 1 ? " (cp.async ring)" : " (synchronous copies)")},
                      {"threads", str(w.threadsPerBlock) + " (" + str(warps) + (fa3 ? " consumer warps and a producer warpgroup" : " warps") + " of " +
                                      str(t.warpSize) + ")"},
                      {"key blocks", keyBlocks(a.causal, visited, kvBlocks)},
                      {"MMA", mmaName}});
}

// flash-mfma (codegen/amd/gpu_attention_mfma.cpp): FlashAttention-2 on MFMA (wave64 CDNA), a wave per
// NG groups of MN query rows. Per visited key block each wave runs Sᵀ = K Qᵀ and Oᵀ += Vᵀ Pᵀ on the
// matrix pipe (NG * 2 * BK * D / (MN * KI) instructions of MN*MN*KI*2 flops, each taking that many
// flops / the SIMD's matrix rate in cycles), reads K and Vᵀ operands from LDS once for its groups
// (ds_read_b64 per MFMA pair of operands), and spends VALU cycles (4 per wave64 instruction on a
// 16-lane SIMD) on the online softmax (~7 instructions per score a lane holds), O's rescale and its
// share of the copies (V transposed by 2-byte LDS stores). Other waves' MFMAs overlap about half of
// that VALU work (the matrix pipe runs beside the VALU).
Expected<KernelEstimate> attentionMfma(const ir::Config& c, const GpuAttentionConfig& cfg, const TargetDesc& t,
                                       const codegen::ResourceReport* res, const ir::AttentionSpec& a, int64_t BQ,
                                       int64_t BK, double visited, int64_t kvBlocks, KernelEstimate e) {
  const int64_t ST = cfg.STAGES;
  const std::string& shape = cfg.MFMA;
  const int64_t MN = shape == "32x32x8" ? 32 : 16, KI = MN == 32 ? 8 : 16;
  const int64_t W = cfg.wavesFor(MN);
  const auto path = codegen::attentionMmaPath(codegen::MmaFamily::Mfma, a.dtype, t);
  const MmaShape* mfma = path ? &path->shape : nullptr;
  if (!mfma || t.warpSize != 64 || W <= 0 || BQ % (W * MN))
    return makeError(ErrorCode::InvalidConfig, t.name + ": no MFMA attention for " + c.str());
  const int64_t D = a.head_dim, NG = BQ / (W * MN);
  const int64_t bytes = ir::byteSize(a.dtype), T = 64 * W;
  costmodel::GpuWorkload& w = e.workload;
  w.threadsPerBlock = T;
  w.smemPerBlock = std::max<int64_t>(ST, 1) * (BK * (D + 4) + D * (BK + 4)) * bytes;
  w.regsPerThread = int(NG * (D * MN / 64 + BK * MN / 64 + BK * MN / 128 + 2 * D / KI + 4) + 32);
  w.matrixCores = true;
  w.pipePeakGflops = t.computePeakGflops(a.dtype) * mfma->peakShare;
  w.flopsPerBlock = visited * 4.0 * double(BQ) * double(BK) * double(D);
  const double simdFlopsPerClock =
      t.computePeakGflops(a.dtype) / (std::max(1.0, double(t.units)) * std::max(0.1, t.clockGHz) * std::max(1, t.simdsPerUnit));
  const double mfmas = double(NG) * 2.0 * double(BK * D) / double(MN * KI);
  const double mfmaCycles = mfmas * double(2 * MN * MN * KI) / std::max(1.0, simdFlopsPerClock);
  const double scores = double(NG * BK * MN) / 64.0;  // per lane and key block
  const double steps = double(ceilDiv(BK * D / 8, T));
  const double lds = double(BK * D) / double(MN * KI) * 2.0 + steps * 9.0;
  const double valu = 7.0 * scores + double(NG * D * MN) / 64.0 + scores / 2.0 + steps * 12.0 + 12.0;
  w.issueEfficiency = mfmaCycles / (mfmaCycles + 0.5 * 4.0 * (valu + lds));
  w.independentOps = std::max(1.0, double(NG * D / MN));
  w.smemBytesPerBlock = visited * (double(W) + 1.0) * 2.0 * double(BK * D * bytes);
  attentionTraffic(w, t, res, a, BQ, BK, visited);
  // STAGES=2: the next block's rows are in flight (in registers) during the compute.
  w.bytesInFlightPerThread = double(2 * BK * D * bytes) / double(T);
  w.serialSteps = int64_t(std::ceil(visited));
  w.stages = int(ST);
  applyResources(w, res);
  const std::string name = "mfma " + shape;
  w.what = "flash-mfma (" + name + "), " + str(BQ) + " query rows x " + str(BK) + " keys per step, " + str(W) +
           " waves x " + str(NG) + " group(s), " + str(ST) + " LDS buffer(s)";
  return withGrid(e, {{"strategy", "FlashAttention-2 on matrix cores: S^T = K Q^T, P^T kept in registers as the B operand"},
                      {"block tile", str(BQ) + " query rows x " + str(BK) + " keys"},
                      {"stages", str(ST) + (ST > 1 ? " (next block loaded during the compute)" : " (synchronous copies)")},
                      {"threads", str(T) + " (" + str(W) + " waves of 64, " + str(NG) + " group(s) of " + str(MN) + " rows each)"},
                      {"key blocks", keyBlocks(a.causal, visited, kvBlocks)},
                      {"MMA", name}});
}

Expected<KernelEstimate> attention(const ir::Kernel& k, const ir::Config& c, const TargetDesc& t,
                                   const codegen::ResourceReport* res) {
  TESSERA_ASSIGN(ir::AttentionInfo info, ir::analyzeAttention(k));
  const ir::AttentionSpec& a = info.spec;
  TESSERA_ASSIGN(GpuAttentionConfig cfg, readGpuAttentionConfig(c));
  const int64_t BQ = cfg.BQ, BK = cfg.BK, DS = cfg.DSPLIT;
  if (BQ <= 0 || BK <= 0 || DS <= 0) return makeError(ErrorCode::InvalidConfig, "attention estimate: bad config " + c.str());
  const int64_t D = a.head_dim, Sq = a.seq_q, Skv = a.seq_kv > 0 ? a.seq_kv : a.seq_q;
  const int64_t H = a.heads, B = std::max<int64_t>(a.batch, 1);
  const int64_t bytes = ir::byteSize(a.dtype);
  const int64_t qBlocks = ceilDiv(Sq, BQ), kvBlocks = ceilDiv(Skv, BK);
  // Key blocks visited per query block, averaged: causal masks skip those right of the diagonal.
  double visited = double(kvBlocks);
  if (a.causal) {
    double sum = 0;
    const int64_t off = Skv - Sq;
    for (int64_t qb = 0; qb < qBlocks; ++qb) {
      int64_t lastKey = std::min(Skv - 1, std::min(Sq, (qb + 1) * BQ) - 1 + off);
      sum += lastKey < 0 ? 0 : double(lastKey / BK + 1);
    }
    visited = sum / double(qBlocks);
  }
  KernelEstimate e;
  costmodel::GpuWorkload& w = e.workload;
  w.blocks = B * H * qBlocks;
  const std::string& strategy = cfg.strategy;
  if (strategy == "flash-mma" || strategy == "flash-wgmma")
    return attentionMma(cfg, t, res, a, BQ, BK, visited, kvBlocks, std::move(e), strategy == "flash-wgmma");
  if (strategy == "flash-mfma") return attentionMfma(c, cfg, t, res, a, BQ, BK, visited, kvBlocks, std::move(e));
  w.threadsPerBlock = BQ * DS;
  const int64_t warps = ceilDiv(w.threadsPerBlock, t.warpSize);
  w.smemPerBlock = 2 * BK * D * bytes + BQ * D * 4 + 2 * BQ * DS * 4 + (DS > 1 ? DS * BQ * BK * 4 : 0);
  w.regsPerThread = int(2 * BK + 48 + 2 * ceilDiv(D, DS));
  // Per visited key and query row: D FMAs for the score, D for P.V, and the online softmax with
  // our exp2 polynomial (~15 operations).
  w.flopsPerBlock = visited * double(BK) * double(BQ) * (4.0 * double(D) + 30);
  w.pipePeakGflops = t.peakGflopsF32;
  // Each FMA reads its K or V element from shared memory, four per 16-byte load.
  w.issueEfficiency = 1.0 / (1.0 + 0.25 + 0.1 * DS);
  w.independentOps = double(std::min<int64_t>(BK, 8));
  w.smemBytesPerBlock = visited * (2.0 * BK * D * bytes + double(warps) * 2.0 * BK * ceilDiv(D, DS) * 128.0 / 4 +
                                   2.0 * BQ * D * 4 + (DS > 1 ? 2.0 * DS * BQ * BK * 4 : 0));
  attentionTraffic(w, t, res, a, BQ, BK, visited);
  w.bytesInFlightPerThread = double(2 * BK * D * bytes) / double(w.threadsPerBlock);
  w.serialSteps = int64_t(std::ceil(visited));
  w.stages = 1;
  applyResources(w, res);
  w.what = "flash (FMA pipes), " + str(BQ) + " query rows x " + str(BK) + " keys per step, " + str(w.threadsPerBlock) + " threads";
  return withGrid(e, {{"strategy", "FlashAttention-style, online softmax, FMA pipes"},
                      {"block tile", str(BQ) + " query rows x " + str(BK) + " keys"},
                      {"head_dim split", str(DS) + " thread(s) per query row"},
                      {"threads", str(w.threadsPerBlock) + " (" + str(warps) + " " + t.words().warps + " of " + str(t.warpSize) + ")"},
                      {"key blocks", keyBlocks(a.causal, visited, kvBlocks)},
                      {"MMA", "none (FMA pipes)"}});
}

Expected<KernelEstimate> elementwise(const ir::Kernel& k, const ir::Config& c, const TargetDesc& t,
                                     const codegen::ResourceReport* res) {
  TESSERA_ASSIGN(ir::ElementwiseRegion r, ir::analyzeElementwise(k));
  TESSERA_ASSIGN(GpuElementwiseConfig cfg, readGpuElementwiseConfig(c));
  const int64_t TPB = cfg.TPB, VW = cfg.VW, EPT = cfg.EPT, GRID = cfg.GRID;
  if (TPB <= 0 || VW <= 0 || EPT <= 0 || GRID < 0) return makeError(ErrorCode::InvalidConfig, "elementwise estimate: bad config " + c.str());
  int64_t total = 1;
  for (int64_t d : r.iter) total *= d;
  const int64_t vectors = ceilDiv(total, VW), tile = TPB * EPT;
  KernelEstimate e;
  costmodel::GpuWorkload& w = e.workload;
  int64_t steps = 1;
  if (GRID == 0) {
    w.blocks = ceilDiv(vectors, tile);
  } else {
    w.blocks = std::min(GRID * std::max(t.units, 1), ceilDiv(vectors, tile));
    steps = ceilDiv(vectors, w.blocks * tile);
  }
  w.threadsPerBlock = TPB;
  double ops = 0;
  for (const auto& v : r.values) ops += opCost(v);
  // Per element: the math plus a load per operand and a store per output, VW lanes per instruction.
  double inBytesPerElem = 0;
  for (const auto& op : r.operands) {
    bool broadcast = std::count(op.dims.begin(), op.dims.end(), -1) > 0 || op.dims.size() < r.iter.size();
    if (!broadcast) inBytesPerElem += double(ir::byteSize(op.dtype));
  }
  const double memInstr = double(r.operands.size() + r.outputs.size()) / double(VW);
  w.flopsPerBlock = double(tile * VW * steps) * std::max(ops, 1.0) * 2;
  w.pipePeakGflops = t.peakGflopsF32;
  w.issueEfficiency = std::max(ops, 1.0) / (std::max(ops, 1.0) + memInstr + 2.0 / double(VW));
  w.independentOps = double(EPT * VW);
  w.regsPerThread = int(16 + EPT * VW * int64_t(r.operands.size() + r.outputs.size()));
  w.dramBytes = ir::kernelBytes(k);
  w.l2Bytes = w.dramBytes;
  w.bytesInFlightPerThread = double(EPT * VW) * std::max(inBytesPerElem, 1.0);
  w.serialSteps = steps;
  w.stages = 1;
  applyResources(w, res);
  w.what = str(TPB) + " threads x " + str(EPT) + " vectors of " + str(VW) + (GRID ? ", grid-stride " + str(GRID) + " blocks per unit" : "");
  e.facts = {{"threads", str(TPB) + " per block"},
             {"vector width", str(VW) + " lanes"},
             {"vectors per thread", str(EPT)},
             {"grid", GRID ? str(w.blocks) + " blocks (" + str(GRID) + " per unit), " + str(steps) + " grid-stride steps"
                           : str(w.blocks) + " blocks, one tile each"},
             {"MMA", "none"}};
  return e;
}

}  // namespace

Expected<KernelEstimate> estimateKernel(const ir::Kernel& k, const ir::Config& c, const TargetDesc& t,
                                        const codegen::ResourceReport* resources) {
  if (!t.isGpu()) return makeError(ErrorCode::Unsupported, "the analytic model describes GPU targets, not " + t.name);
  Expected<KernelEstimate> e = makeError(ErrorCode::Internal, "unknown family");
  switch (k.family) {
    case ir::Family::Gemm: e = gemm(k, c, t, resources); break;
    case ir::Family::Attention: e = attention(k, c, t, resources); break;
    case ir::Family::Elementwise: e = elementwise(k, c, t, resources); break;
  }
  if (!e.ok()) return e;
  e->flops = ir::kernelFlops(k);
  e->bytes = ir::kernelBytes(k);
  e->model = costmodel::estimateLaunch(e->workload, t);
  return e;
}

std::function<std::optional<double>(const ir::Config&)> estimatePrior(const ir::Kernel& k, const TargetDesc& t) {
  auto kernel = std::make_shared<ir::Kernel>(k);
  return [kernel, t](const ir::Config& c) -> std::optional<double> {
    auto e = estimateKernel(*kernel, c, t);
    if (!e.ok() || !e->model.fits) return std::nullopt;  // ranked last: the compiler would reject it
    return e->model.timeUs;
  };
}

}  // namespace tessera::measure
