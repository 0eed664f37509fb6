// Owns the Kernel Tuner kernels in the analytic model's terms: CLBlast's Xgemm and Kernel Tuner's
// 2-D convolution, each config turned into a GpuWorkload from the kernels' own index arithmetic
// (warp-level bank cycles and cache lines from costmodel/gpu_access.h), on the GPUs the files were
// measured on.
#include "bench/kerneltuner_models.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>

#include "costmodel/gpu_access.h"
#include "targets/gpu_skus.h"
#include "targets/gpu_targets.h"

namespace tessera::bench {

namespace {

using costmodel::GpuWorkload;
using costmodel::MemLevel;

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / std::max<int64_t>(b, 1); }

Error bad(const std::string& what) { return makeError(ErrorCode::InvalidConfig, what); }

Expected<int64_t> knob(const ir::Config& c, const char* name) {
  auto v = c.getInt(name);
  if (!v.ok()) return bad(std::string("missing integer knob ") + name);
  return *v;
}

int lineBytes(const TargetDesc& t) { return t.l1LineBytes > 0 ? t.l1LineBytes : 128; }
int l1Rate(const TargetDesc& t) { return t.l1BytesPerClock > 0 ? t.l1BytesPerClock : 128; }
// L1 clocks of one warp-wide global access (one wavefront: l1Rate bytes).
// NVIDIA, one word per lane: the warp's bytes at the L1's rate, or a clock per line touched if
// more; a contiguous 128 bytes at an unaligned address cost 2 clocks, not 3 (half-warp phases each
// touching both lines): the unstaged convolution configs measured 1/1.5 of the phase count on the
// RTX A4000 at every tile shape, 1/1.2 on the A6000, and the Xgemm files' Spearman rises with it.
// Wider lanes keep the phase count (the Xgemm files' direct loads of vectors rank worse without).
double l1Clocks(const std::vector<int64_t>& addrs, int bytesPerLane, const TargetDesc& t) {
  if (bytesPerLane == 4 && t.vendor == Vendor::Nvidia) {
    const double bytes = double(addrs.size()) * bytesPerLane;
    return std::max(std::ceil(bytes / l1Rate(t)), double(costmodel::linesTouched(addrs, bytesPerLane, lineBytes(t))));
  }
  return costmodel::l1Wavefronts(addrs, bytesPerLane, lineBytes(t), l1Rate(t));
}

// One warp-wide instruction: lane l (0..warp-1) accesses `bytes` at addr(l).
template <class Addr>
std::vector<int64_t> lanes(int warp, Addr addr) {
  std::vector<int64_t> a(size_t(std::max(warp, 1)));
  for (int l = 0; l < warp; ++l) a[size_t(l)] = addr(l);
  return a;
}

// DRAM traffic when the blocks of a wave march through K together (they run the same instruction
// stream from a common start): the wave's operand panels come from DRAM once if a window of a
// few K steps of them fits in L2 (the blocks' skew), else every block's loads miss.
double dramMarching(double perWaveUnique, double waves, double windowBytes, double l2Traffic, double l2Bytes) {
  if (windowBytes <= l2Bytes) return std::min(l2Traffic, perWaveUnique * waves);
  return l2Traffic;
}

// ---------------------------------------------------------------------------------------------
// CLBlast Xgemm (xgemm_part1..3.opencl): a workgroup of MDIMC x MDIMC... threads computes an
// MWG x NWG tile of C, each thread MWI x NWI = MWG/MDIMC x NWG/NDIMC outputs held in registers
// (cpm), stepping K by KWG. SA/SB: the A/B tile of a K step is staged in local memory by all
// threads (the MDIMA x KDIMA / NDIMB x KDIMB reshaped layout), else each thread reads its own
// MWI (NWI) values from global memory for every k. Per k a thread loads MWI/VWM vectors of A and
// NWI/VWN of B (STRM/STRN 0: a thread's vectors are adjacent) and does MWI x NWI FMAs.
Expected<GpuWorkload> xgemm(const ir::Config& c, const TargetDesc& t) {
  int64_t v[14];
  const char* names[14] = {"MWG", "NWG", "KWG", "MDIMC", "NDIMC", "MDIMA", "NDIMB", "KWI", "VWM", "VWN", "STRM", "STRN", "SA", "SB"};
  for (int i = 0; i < 14; ++i) {
    TESSERA_ASSIGN(v[i], knob(c, names[i]));
    if (i < 10 && v[i] <= 0) return bad(std::string(names[i]) + " must be positive");
  }
  const auto [MWG, NWG, KWG, MDIMC, NDIMC, MDIMA, NDIMB, KWI, VWM, VWN] =
      std::tuple{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9]};
  const int64_t STRM = v[10], STRN = v[11], SA = v[12], SB = v[13];
  const int64_t M = 4096, N = 4096, K = 4096, T = MDIMC * NDIMC;
  // The space's restrictions (gemm.py): every tile divides evenly.
  if (KWG % KWI || MWG % (MDIMC * VWM) || NWG % (NDIMC * VWN) || MWG % (MDIMA * VWM) || NWG % (NDIMB * VWN) ||
      T % MDIMA || T % NDIMB || KWG % (T / MDIMA) || KWG % (T / NDIMB) || M % MWG || N % NWG)
    return bad("Xgemm restrictions not met");
  const int64_t MWI = MWG / MDIMC, NWI = NWG / NDIMC;
  const int warp = std::max(t.warpSize, 1);
  const int64_t warps = ceilDiv(T, warp);
  // A realM/realN vector of VW floats moves in 16-byte pieces (the widest load per lane).
  auto pieces = [](int64_t vw) { return std::max<int64_t>(1, vw * 4 / 16); };
  auto pieceBytes = [](int64_t vw) { return int(std::min<int64_t>(16, vw * 4)); };
  auto tx = [&](int l) { return int64_t(l) % MDIMC; };
  auto ty = [&](int l) { return int64_t(l) / MDIMC; };

  // Per k: the A and B values of a thread, from local memory (bank cycles) or global (lines).
  double sharedK = 0, linesK = 0, loadsK = 0;
  for (int64_t mi = 0; mi < MWI / VWM; ++mi)
    for (int64_t p = 0; p < pieces(VWM); ++p) {
      auto a = lanes(warp, [&](int l) {
        int64_t mg = STRM ? tx(l) + mi * MDIMC : mi + tx(l) * (MWI / VWM);
        return mg * VWM * 4 + p * 16;
      });
      if (SA) sharedK += costmodel::sharedCycles(a, pieceBytes(VWM));
      else linesK += l1Clocks(a, pieceBytes(VWM), t);
      loadsK += 1;
    }
  for (int64_t ni = 0; ni < NWI / VWN; ++ni)
    for (int64_t p = 0; p < pieces(VWN); ++p) {
      auto a = lanes(warp, [&](int l) {
        int64_t ng = STRN ? ty(l) + ni * NDIMC : ni + ty(l) * (NWI / VWN);
        return ng * VWN * 4 + p * 16;
      });
      if (SB) sharedK += costmodel::sharedCycles(a, pieceBytes(VWN));
      else linesK += l1Clocks(a, pieceBytes(VWN), t);
      loadsK += 1;
    }
  // Per K step: the staging of the local tiles (global load + local store per vector piece).
  double sharedStep = 0, linesStep = 0, stageInstr = 0;
  auto stage = [&](int64_t dimA, int64_t WG, int64_t VW, bool strided, int64_t rowElems) {
    const int64_t kdim = T / dimA, wa = WG / dimA, kwa = KWG / kdim;
    for (int64_t mia = 0; mia < wa / VW; ++mia)
      for (int64_t kia = 0; kia < kwa; ++kia)
        for (int64_t p = 0; p < pieces(VW); ++p) {
          auto idx = [&](int l) {
            int64_t la0 = l % dimA, la1 = l / dimA;
            int64_t mg = strided ? la0 + mia * dimA : mia + la0 * (wa / VW);
            return std::pair{kia + la1 * kwa, mg};
          };
          auto g = lanes(warp, [&](int l) { auto [kg, mg] = idx(l); return (kg * (rowElems / VW) + mg) * VW * 4 + p * 16; });
          auto s = lanes(warp, [&](int l) { auto [kg, mg] = idx(l); return (kg * (WG / VW) + mg) * VW * 4 + p * 16; });
          linesStep += l1Clocks(g, pieceBytes(VW), t);
          sharedStep += costmodel::sharedCycles(s, pieceBytes(VW));
          stageInstr += 2;
        }
  };
  if (SA) stage(MDIMA, MWG, VWM, STRM != 0, M);
  if (SB) stage(NDIMB, NWG, VWN, STRN != 0, N);

  GpuWorkload w;
  w.blocks = (M / MWG) * (N / NWG);
  w.threadsPerBlock = T;
  w.smemPerBlock = KWG * (SA * MWG + SB * NWG) * 4;
  // Registers: the accumulators, one k's A and B values, indices and pointers (the staging
  // copies reuse the A and B registers: ptxas reports 168 for the RTX 3090's best,
  // 128 + 8 + 16 + 16).
  const double acc = double(MWI * NWI);
  const double staged = double((SA * MWG + SB * NWG) * KWG) / double(T);
  const double regs = acc + double(MWI + NWI) + 16;
  const double spilled = std::max(0.0, regs - double(t.maxRegsPerThread > 0 ? t.maxRegsPerThread : 255));
  w.regsPerThread = int(std::min(regs, double(t.maxRegsPerThread > 0 ? t.maxRegsPerThread : 255)));
  // Instructions per thread per k: the FMAs; the loads; the staging, barriers and loop per K
  // step; an address update per global stream; spilled accumulators go to local memory and back.
  const double fmas = acc;
  double other = loadsK + (stageInstr + ((SA || SB) ? 2 : 0)) / double(KWG) + 3.0 / double(KWI) +
                 (SA ? 0 : 1) + (SB ? 0 : 1) + 2 * spilled;
  w.flopsPerBlock = 2.0 * double(MWG * NWG) * double(K);
  w.pipePeakGflops = t.peakGflopsF32;
  w.issueEfficiency = fmas / (fmas + other);
  w.independentOps = acc;
  const double steps = double(K / KWG);
  w.smemBytesPerBlock = double(warps) * 128.0 * (double(K) * sharedK + steps * sharedStep);
  w.l1BytesPerBlock = double(warps) * double(l1Rate(t)) * (double(K) * (linesK + 2 * spilled) + steps * linesStep);
  const double spillBytes = double(K) * spilled * 8.0 * double(T);
  w.l2Bytes = double(w.blocks) * (double(MWG + NWG) * double(K) * 4 + 2.0 * double(MWG * NWG) * 4 + spillBytes);
  // A wave's blocks run x-fastest over M: `cols` A panels and `rows` B panels.
  const int bpu = std::max(1, costmodel::residentBlocks(w, t));
  const double perWave = double(std::max(t.units, 1)) * bpu, gridX = double(M / MWG);
  const double cols = std::min(perWave, gridX), rows = std::ceil(perWave / gridX);
  const double waves = std::ceil(double(w.blocks) / perWave);
  const double perWaveUnique = (cols * double(MWG) + rows * double(NWG)) * double(K) * 4 + perWave * double(MWG * NWG) * 8;
  const double window = (cols * double(MWG) + rows * double(NWG)) * double(KWG) * 4 * 4;
  w.dramBytes = dramMarching(perWaveUnique, waves, window, w.l2Bytes, double(t.l2Bytes_gpu));
  w.dramBytes = std::max(w.dramBytes, double(M * K + K * N + 2 * M * N) * 4);
  w.bytesInFlightPerThread = staged * 4 + (SA ? 0 : double(MWI * KWI) * 4) + (SB ? 0 : double(NWI * KWI) * 4);
  // Serial rounds: a staged K step waits for its tiles (DRAM for the wave's first touch); a
  // thread reading A or B itself waits for every KWI-unrolled k (L2: the panels are shared).
  const bool direct = !SA || !SB;
  const double dram = costmodel::latencyCycles(MemLevel::Dram, t.vendor), l2 = costmodel::latencyCycles(MemLevel::L2, t.vendor);
  const double directRounds = direct ? double(K / KWI) : 0, stagedRounds = (SA || SB) ? steps : 0;
  w.serialSteps = int64_t(std::max(directRounds, stagedRounds));
  w.serialStepCycles = (directRounds * l2 + stagedRounds * dram) / double(w.serialSteps);
  w.stages = 1;
  w.what = "Xgemm " + std::to_string(MWG) + "x" + std::to_string(NWG) + "x" + std::to_string(KWG);
  return w;
}

std::string describeXgemm(const ir::Config& c) {
  auto g = [&](const char* k) { auto v = c.getInt(k); return v.ok() ? *v : 0; };
  const int64_t T = g("MDIMC") * g("NDIMC");
  char b[200];
  std::snprintf(b, sizeof b, "tile %lldx%lld, %lld threads of %lldx%lld outputs, vectors %lld/%lld, A %s, B %s",
                (long long)g("MWG"), (long long)g("NWG"), (long long)T, (long long)(T ? g("MWG") / g("MDIMC") : 0),
                (long long)(T ? g("NWG") / g("NDIMC") : 0), (long long)g("VWM"), (long long)g("VWN"),
                g("SA") ? "local" : "global", g("SB") ? "local" : "global");
  return b;
}

// ---------------------------------------------------------------------------------------------
// Kernel Tuner's convolution (convolution.cu): a block of block_size_x x block_size_y threads
// computes a (bsx*tile_size_x) x (bsy*tile_size_y) output tile, each thread tile_x x tile_y
// outputs strided by the block size. use_shmem: the block's input tile with its 14-pixel border
// is staged in shared memory (padded rows when use_padding and the width would conflict), else
// every product reads global memory (through L1; read_only: __ldg). The 15x15 filter sits in
// constant memory (use_cmem = 1 in the space): an FMA operand on NVIDIA, scalar registers on AMD.
// A grid that does not divide the 4096x4096 image takes the bounds-checked variant.
//
// What the compilers make of it (checked by compiling the public kernel with nvcc 13 for sm_80
// and clang 22 for gfx90a, -O3; counts from the PTX and the AMDGPU assembly):
//  - the fully unrolled loops let the compiler load each distinct input value a thread needs
//    once (rows overlap across tile_y when block_size_y < 15): R x C loads, R = distinct rows,
//    C = distinct columns (32x4 threads, 1x3 tile: 345 ld.shared for 675 FMAs). Not so for
//    __ldg on NVIDIA in the PTX (ld.global.nc not merged: 1800 loads for 1800 FMAs; ptxas of
//    CUDA 12.3 does merge them in the SASS, 810 at 64x4 / 2x4, but holds them in 255 registers
//    against 32, which the register term below stands in for) nor for guarded
//    global loads (675 for 675);
//  - AMD merges a row's consecutive columns into 16-byte loads (global_load_dwordx4: 144 for
//    540 values), and into 16- and 12-byte LDS reads at addresses only dword aligned
//    (ds_read2_b64, ds_read_b96: 60 for 225 values at 1x1), which the LDS serves lane by lane
//    (costmodel/gpu_access.h); guarded loads stay single, each behind its own branch (678
//    branches for 675 loads) and waited for one by one, and guarded code hoists the filter's
//    scalar loads, spilling SGPRs to VGPR lanes and VGPRs to scratch;
//  - read_only changes only the global loads: staged, the staging loop's loads (LDG.E vs
//    LDG.E.CONSTANT), and the code after the barrier is the same for both values (the files' own
//    kernel compiled by NVRTC and ptxas of CUDA 11.8, 12.2 and 12.3, the toolkits current when
//    the files were measured, Dec. 2023, for sm_80 and sm_86): no term of a staged estimate;
//  - the staging loop's trip count depends on the thread index: it stays a loop, each
//    iteration waiting for its load before the store to shared memory;
//  - HIP's default launch bound (1024 threads) caps a thread at 128 VGPRs (512 per SIMD lane /
//    four waves): beyond it values go to scratch memory (private segment > 0), which happens
//    as tiles and block_size_y grow (reuse across rows keeps more values live).
Expected<GpuWorkload> convolution(const ir::Config& c, const TargetDesc& t) {
  int64_t v[7];
  const char* names[7] = {"block_size_x", "block_size_y", "tile_size_x", "tile_size_y", "read_only", "use_padding", "use_shmem"};
  for (int i = 0; i < 7; ++i) {
    TESSERA_ASSIGN(v[i], knob(c, names[i]));
  }
  const int64_t bsx = v[0], bsy = v[1], tx = v[2], ty = v[3], ro = v[4], pad = v[5], sh = v[6];
  TESSERA_ASSIGN(int64_t fw, knob(c, "filter_width"));
  TESSERA_ASSIGN(int64_t fh, knob(c, "filter_height"));
  if (bsx <= 0 || bsy <= 0 || tx <= 0 || ty <= 0 || fw <= 0 || fh <= 0) return bad("convolution: sizes must be positive");
  if (bsx * bsy > 1024) return bad("convolution: more than 1024 threads");
  const bool amd = t.vendor == Vendor::Amd;
  const int64_t W = 4096, H = 4096, bw = fw / 2 * 2, bh = fh / 2 * 2, inW = W + bw;
  const int64_t tileW = bsx * tx, tileH = bsy * ty;
  const bool guarded = W % tileW != 0 || H % tileH != 0;
  int64_t smemW = tileW + bw;
  if (sh && pad && bsx % 32 != 0 && (smemW - bsx) % 32 != 0) smemW += (32 - (bw + tileW - bsx)) & 31;
  const int64_t smemH = tileH + bh;
  const int warp = std::max(t.warpSize, 1);
  const int64_t T = bsx * bsy, warps = ceilDiv(T, warp);
  // Distinct input values per thread: rows ty*bsy+i overlap across tile_y when bsy < fh.
  const int64_t R = std::min(fh * ty, (ty - 1) * bsy + fh), C = std::min(fw * tx, (tx - 1) * bsx + fw);
  const double fmas = double(fh * fw * tx * ty);
  const bool merged = sh || !(guarded || (ro && !amd));  // the compiler loads each value once
  const double values = merged ? double(R * C) : fmas;
  double loadInstr = values;
  // AMD, staged: each row's run of consecutive columns (one run per output column when the runs do
  // not overlap, bsx >= fw) is read 16 bytes at a time (ds_read2_b64), its last 3 columns as one
  // 12-byte read, 2 as ds_read2_b32, 1 as ds_read_b32; the column depends on the thread, so only
  // dword alignment is known (gfx90a code: 15 rows x (3 ds_read2_b64 + 1 ds_read_b96) at 1x1).
  const int64_t runs = bsx >= fw ? tx : 1, run = bsx >= fw ? fw : C;
  // RDNA (wave32): its LDS serves the merged reads at the full rate; costed lane by lane as on
  // gfx90a, the W7800's measured best (staged, 32x2 threads, 1x4 tiles, 0.82 ms) had a 4.0 ms
  // shared-memory term and ranked 345th.
  const bool rdna = amd && t.warpSize == 32;
  if (amd && sh && !rdna) loadInstr = double(R * runs * (run / 4 + (run % 4 ? 1 : 0)));
  if (amd && !sh && !guarded) loadInstr = double(R * tx * ceilDiv(fw, 4));             // dwordx4 per row segment
  const int loadBytes = amd && !sh && !guarded ? 16 : 4;
  auto lx = [&](int l) { return int64_t(l) % bsx; };
  auto ly = [&](int l) { return int64_t(l) / bsx; };

  GpuWorkload w;
  w.blocks = ceilDiv(W, tileW) * ceilDiv(H, tileH);
  w.threadsPerBlock = T;
  w.smemPerBlock = sh ? smemH * smemW * 4 : 0;
  w.flopsPerBlock = 2.0 * fmas * double(T);
  w.pipePeakGflops = t.peakGflopsF32;
  w.independentOps = double(tx * ty);
  // Staging: each thread copies ceil(rows/bsy) x ceil(cols/bsx) values, a loop iteration each.
  const double stageCopies = sh ? double(ceilDiv(smemH, bsy) * ceilDiv(tileW + bw, bsx)) : 0;
  // Instructions besides the FMAs: the loads, the staging copies (load, store, loop), the
  // barrier, a branch around every guarded AMD load, the epilogue.
  double other = loadInstr + 4 * stageCopies + (sh ? 1 : 0) + (amd && guarded && !sh ? 3 * values : 0) + 2 * double(tx * ty) + 8;
  // NVIDIA, unstaged __ldg: a plain load addresses its value as base register + immediate offset,
  // an __ldg computes its own 64-bit address (IMAD.MOV, IMAD, LEA, LEA.HI.X: sm_80 code of the
  // file's kernel from CUDA 11.8, 12.2 and 12.3 alike, 9.0 instructions per FMA against 2.7 at
  // 32x4 / 1x3 guarded, 6.4 against 2.1 at 1x1); measured, bounds-checked __ldg configs take
  // 1.4-3x their plain twins' time (medians per tile shape) on the A100, A4000 and A6000.
  if (!amd && !sh && ro) other += 6 * loadInstr;
  // Registers. NVIDIA: ptxas keeps the accumulators and a few values (32 registers for most of
  // the space), more when unmerged __ldg loads are hoisted (182 at 64x1 threads, 2x4 tile).
  // AMD: the merged loads keep rows for reuse live (66 VGPRs at 1x1, 80 at 64x1 / 1x4, 98 at
  // 64x2 / 1x4, 128 and scratch at 64x4 / 1x4): about 4 per accumulator and 4 per value row
  // segment awaiting reuse (bsy rows x tile_x segments for each later tile_y). Rows are shared
  // between a thread's outputs only when bsy < fh (R above): from bsy = 15 on nothing waits for
  // reuse (64x16 / 1x4: 66 VGPRs staged, 82 unstaged, no scratch).
  double regs = 26 + 2.0 * double(tx * ty) + (!merged && !guarded ? std::min(150.0, fmas / 10) : 0);
  const int64_t reuseRows = bsy < fh ? bsy * (ty - 1) : 0;
  if (amd) regs = (sh ? 20 : 62) + 4.0 * double(tx * ty) + 4.0 * double(reuseRows * tx);
  const double regCap = amd ? 128 : 255;
  // AMD, bounds-checked: the compiler hoists the filter's scalar loads above the branches; the 225
  // values overflow the SGPRs into VGPR lanes (a v_readlane per FMA), the VGPRs reach the cap and
  // spill (gfx90a code of every guarded config with more than one output per thread, and of every
  // guarded unstaged one: 128 VGPRs, 0.4-2.3 KB of scratch, a scratch reload per two FMAs).
  const bool hoisted = amd && guarded && (!sh || tx * ty > 1);
  if (hoisted) regs = regCap;
  const double spilled = std::max(0.0, regs - regCap);
  w.regsPerThread = int(std::min(regs, regCap));
  // A spilled value goes to scratch and comes back for each of its uses (about a filter row).
  other += 2 * spilled * double(fw);
  if (hoisted) other += 1.5 * fmas;
  w.issueEfficiency = fmas / (fmas + other);
  // Per warp instruction: shared bank cycles of a read (every filter offset shifts all lanes
  // alike), or the L1 clocks of a global read (averaged over the filter's column offsets and a
  // few rows: the 4110-float input rows are not line-aligned).
  const int active = int(std::min<int64_t>(warp, T));
  auto readAt = [&](int64_t column) { return lanes(active, [&](int l) { return (ly(l) * smemW + lx(l) + column) * 4; }); };
  const double readCycles = costmodel::sharedCycles(readAt(0), 4);
  // AMD: bank cycles of one row run's reads as the compiler merges them (under-aligned: lane by lane).
  double runCycles = 0;
  if (amd && sh && !rdna) {
    for (int64_t c0 = 0; c0 + 4 <= run; c0 += 4) runCycles += 2 * costmodel::sharedCycles(readAt(c0), 8);
    const int64_t rest = run % 4, c0 = run - rest;
    if (rest == 3) runCycles += costmodel::sharedCycles(readAt(c0), 12);
    if (rest == 2) runCycles += 2 * costmodel::sharedCycles(readAt(c0), 4);
    if (rest == 1) runCycles += costmodel::sharedCycles(readAt(c0), 4);
  }
  double globalClocks = 0;
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t j = 0; j < fw; ++j)
      globalClocks += l1Clocks(lanes(warp, [&](int l) { return ((r + ly(l)) * inW + lx(l) + j) * 4; }), loadBytes, t);
  globalClocks /= double(4 * fw);
  double stageClocks = 0;
  for (int64_t r = 0; r < 4; ++r) stageClocks += l1Clocks(lanes(warp, [&](int l) { return ((r + ly(l)) * inW + lx(l)) * 4; }), 4, t);
  stageClocks /= 4;
  const double spillClocks = (2 * spilled * double(fw) + (hoisted ? 0.5 * fmas : 0)) * double(warp) * 4 / double(l1Rate(t));
  if (sh) {
    const double reads = amd && !rdna ? runCycles * double(R * runs) : readCycles * loadInstr;
    w.smemBytesPerBlock = double(warps) * 128.0 * (reads + readCycles * stageCopies);
    w.l1BytesPerBlock = double(warps) * double(l1Rate(t)) * (stageClocks * stageCopies + spillClocks);
  } else {
    w.l1BytesPerBlock = double(warps) * double(l1Rate(t)) * (globalClocks * loadInstr + spillClocks);
  }
  const double footprint = double(smemH * (tileW + bw)) * 4;
  w.l2Bytes = double(w.blocks) * (footprint + double(tileW * tileH) * 4 + spilled * double(fw) * 8 * double(T));
  w.dramBytes = double((H + bh) * inW + H * W) * 4;
  w.bytesInFlightPerThread = sh ? 4 : std::min(loadInstr, 16.0) * loadBytes;
  // Serial rounds: the staging loop, an iteration per copy (DRAM: the block's first touch);
  // without staging the merged loads go out in batches as registers allow (L2 round trips), a
  // guarded AMD load waits alone.
  const double dram = costmodel::latencyCycles(MemLevel::Dram, t.vendor), l2 = costmodel::latencyCycles(MemLevel::L2, t.vendor);
  if (sh) {
    w.serialSteps = int64_t(stageCopies);
    w.serialStepCycles = dram;
    w.serialPrologue = true;  // every FMA waits for the barrier after the staging loop
  } else if (amd && guarded) {
    // Each load waits alone, and so does the scratch reload of the spilled value beside it.
    w.serialSteps = int64_t(values);
    w.serialStepCycles = 2 * l2;
  } else {
    w.serialSteps = int64_t(std::ceil(loadInstr / 32.0));
    w.serialStepCycles = l2;
  }
  w.stages = 1;
  w.what = "convolution " + std::to_string(bsx) + "x" + std::to_string(bsy) + " threads, tile " + std::to_string(tx) + "x" +
           std::to_string(ty);
  return w;
}

std::string describeConvolution(const ir::Config& c) {
  auto g = [&](const char* k) { auto v = c.getInt(k); return v.ok() ? *v : 0; };
  char b[200];
  std::snprintf(b, sizeof b, "%lldx%lld threads, %lldx%lld outputs each, %s%s%s", (long long)g("block_size_x"),
                (long long)g("block_size_y"), (long long)g("tile_size_x"), (long long)g("tile_size_y"),
                g("use_shmem") ? "input staged in shared memory" : "input read from global", g("use_padding") ? ", padded" : "",
                g("read_only") ? ", __ldg" : "");
  return b;
}

// The bundled files, their kernel and the GPU they were measured on (the MI250X file's
// device_name is empty; a HIP device is one GCD): the one list the names, the models and the
// benches' default tables come from.
const std::vector<std::array<const char*, 3>>& bundledFiles() {
  static const std::vector<std::array<const char*, 3>> files = {
    {"gemm_RTX_3090", "Xgemm", "NVIDIA GeForce RTX 3090"},
    {"gemm_RTX_2080_Ti", "Xgemm", "NVIDIA GeForce RTX 2080 Ti"},
    {"convolution_A100", "convolution_kernel", "NVIDIA A100-PCIE-40GB"},
    {"convolution_MI250X", "convolution_kernel", "AMD Instinct MI250X"},
    // The same kernels on more GPUs (same spaces; the convolution files are one 2023-2025 campaign).
    {"gemm_RTX_Titan", "Xgemm", "NVIDIA TITAN RTX"},
    {"gemm_RTX_3060_laptop", "Xgemm", "NVIDIA GeForce RTX 3060 Laptop GPU"},
    {"convolution_A4000", "convolution_kernel", "NVIDIA RTX A4000"},
    {"convolution_A6000", "convolution_kernel", "NVIDIA RTX A6000"},
    {"convolution_W6600", "convolution_kernel", "AMD Radeon PRO W6600"},
    {"convolution_W7800", "convolution_kernel", "AMD Radeon PRO W7800"}};
  return files;
}

}  // namespace

std::vector<std::string> kernelTunerModelNames(const std::string& family) {
  std::vector<std::string> out;
  for (const auto& [name, fam, gpu] : bundledFiles())
    if (family.empty() || family == fam) out.push_back(name);
  return out;
}

std::optional<KernelTunerModel> kernelTunerModelFor(const std::string& family, const TargetDesc& gpu) {
  KernelTunerModel m;
  m.target = gpu;
  m.targetNote = "the GPU table's " + gpu.model + " (" + gpu.name + ", " + std::to_string(gpu.units) + " " +
                 gpu.words().units + ")";
  if (family == "Xgemm") {
    m.kernel = "CLBlast Xgemm, M = N = K = 4096, f32 (OpenCL)";
    m.workload = [t = gpu](const ir::Config& c) { return xgemm(c, t); };
    m.describe = describeXgemm;
    return m;
  }
  if (family == "convolution_kernel") {
    m.kernel = "Kernel Tuner convolution, 4096x4096 image, f32";
    m.workload = [t = gpu](const ir::Config& c) { return convolution(c, t); };
    m.describe = describeConvolution;
    return m;
  }
  if (family == "dedispersion_kernel") {
    m.kernel = "dedispersion, 25000 samples x 2048 DMs x 1536 channels, u8 in, f32 out";
    m.workload = [t = gpu](const ir::Config& c) { return dedispersionWorkload(c, t); };
    m.describe = describeDedispersion;
    return m;
  }
  return std::nullopt;
}

Expected<TargetDesc> kernelTunerGpu(const std::string& deviceName, const std::string& gpu) {
  if (!gpu.empty()) {
    TESSERA_ASSIGN(TargetDesc t, getTarget(gpu));
    if (!t.isGpu()) return makeError(ErrorCode::InvalidArgument, "--gpu names a GPU, not the host");
    return t;
  }
  if (auto sku = gpuForDeviceName(deviceName)) return targetOfGpu(*sku);
  return makeError(ErrorCode::InvalidArgument, "the GPU table has no '" + deviceName +
                                                   "' (the file's device_name): name its GPU with --gpu NAME (tessera gpus)");
}

std::optional<KernelTunerModel> kernelTunerModel(const std::string& table) {
  for (const auto& [name, family, gpu] : bundledFiles()) {
    if (table != name) continue;
    auto t = kernelTunerGpu(gpu, "");
    if (!t.ok()) return std::nullopt;
    auto m = kernelTunerModelFor(family, *t);
    if (m) m->table = table;
    return m;
  }
  return std::nullopt;
}

std::function<std::optional<double>(const ir::Config&)> kernelTunerPrior(const KernelTunerModel& m) {
  return [m](const ir::Config& c) -> std::optional<double> {
    auto w = m.workload(c);
    if (!w.ok()) return std::nullopt;
    auto e = costmodel::estimateLaunch(*w, m.target);
    if (!e.fits) return std::nullopt;
    return e.timeUs;
  };
}

namespace {

// Ranks 1..n with ties averaged.
std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<size_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < idx.size();) {
    size_t j = i;
    while (j + 1 < idx.size() && v[idx[j + 1]] == v[idx[i]]) ++j;
    for (size_t k = i; k <= j; ++k) r[idx[k]] = double(i + j) / 2 + 1;
    i = j + 1;
  }
  return r;
}

}  // namespace

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  auto ra = ranks(a), rb = ranks(b);
  const double mean = (double(a.size()) + 1) / 2;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    sab += (ra[i] - mean) * (rb[i] - mean);
    saa += (ra[i] - mean) * (ra[i] - mean);
    sbb += (rb[i] - mean) * (rb[i] - mean);
  }
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : 0;
}

}  // namespace tessera::bench
