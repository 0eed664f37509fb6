// Owns the mapped-kernel emulator's runtime interface (MLIR-free): launching a GPU kernel that
// was rewritten for the host (gpu_emu_rewrite.cpp) with one fiber per GPU thread, and what a launch
// reports: errors naming the thread, the instruction and the address (races, out-of-bounds,
// uninitialised shared memory, async-copy misuse, divergent collectives, deadlocks), and counters
// (shared-memory wavefronts and bank conflicts, global sectors per request, lane instructions).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tessera::emu {

// Special registers, the argument of __emu_sreg (the rewrite maps NVVM's and ROCDL's reads here).
enum Sreg : int32_t {
  kTidX, kTidY, kTidZ, kNtidX, kNtidY, kNtidZ, kCtaidX, kCtaidY, kCtaidZ, kNctaidX, kNctaidY, kNctaidZ,
  kLaneId, kWarpSize, kWarpId, kNwarpId, kClock,
};

// Flags of __emu_mem (a load or store the rewritten kernel is about to do).
// An atomic RMW (or atomic load/store) never races another atomic; a volatile access is treated
// as a relaxed atomic; acquire and release orderings act as device-scope fences around it.
enum AccessFlags : int32_t { kRead = 0, kWrite = 1, kAtomicRmw = 2, kVolatile = 4, kAcquire = 8, kRelease = 16 };

// What an instruction site is, for reports: "llvm.store vector<4xf32> (nvvm line 812)".
struct SiteTable {
  std::vector<std::string> sites;
  int add(std::string what) {
    sites.push_back(std::move(what));
    return int(sites.size()) - 1;
  }
  std::string name(int id) const {
    return id >= 0 && size_t(id) < sites.size() ? sites[size_t(id)] : "site " + std::to_string(id);
  }
};

// A global buffer the kernel may touch: accesses outside every one are out of bounds.
struct Extent {
  const void* base = nullptr;
  size_t bytes = 0;
  std::string name;  // "arg 2 (f32 workspace 256x256)"
};

// Faults of the hardware model, for negative controls: the emulator then computes as a GPU whose
// instruction differs from the one the kernel was written for (the kernel's assumption is wrong).
enum class HwFault {
  None,
  MmaSwapA,       // mma.sync: A fragment registers 1 and 2 exchanged
  MfmaTransposeD, // MFMA: accumulator rows and columns exchanged
  MfmaReverseK,   // MFMA: A's k order reversed within each group of 4
  WgmmaNoSwizzle, // wgmma: shared-memory operands read as if unswizzled (descriptor mode ignored)
  WgmmaSwapA,     // wgmma with A from registers: A fragment registers 1 and 2 exchanged
};

// The emulator's own form of a TMA tensor map (what the emulated device's encodeTensorMap writes
// into the 128 bytes a kernel receives instead of a CUtensorMap): a tiled map of up to 3 dims.
struct TensorMapForm {
  static constexpr uint64_t kMagic = 0x7473725f746d6170ull;  // "tsr_tmap"
  uint64_t magic = kMagic;
  uint64_t global = 0;          // address of element 0
  int32_t rank = 0, elemBytes = 0, swizzleBytes = 0, pad = 0;
  int64_t dims[3] = {1, 1, 1};  // elements, innermost first
  int64_t strides[2] = {0, 0};  // bytes between consecutive indices of dims 1 and 2
  int32_t box[3] = {1, 1, 1};
};
static_assert(sizeof(TensorMapForm) <= 128, "a tensor map is 128 bytes");

struct Options {
  int hostThreads = 0;        // blocks in parallel on this many host threads (0: every core)
  bool checks = true;         // races, uninitialised reads, bounds of shared memory (off: timing only)
  bool countInstructions = false;  // lane instructions (the rewrite adds per-block counts)
  // Fiber orders a launch runs: the fixed order over the whole grid (its results and counters are
  // the launch's), then schedules - 1 seeded PCT orders (random fiber priorities, `preemptions`
  // preemption points at memory accesses) over `scheduleBlocks` blocks (the first and the last),
  // each from the launch's initial global memory, which is restored after them. A fault that
  // shows in one order only (who initialises an mbarrier first, which lane reads last) is found by
  // default; three orders on two blocks keep a launch's cost within a few blocks' worth.
  int schedules = 3;
  uint64_t seed = 1;          // the PCT orders' seed: schedule i uses seed + i - 1 (reported)
  int scheduleBlocks = 2;
  int preemptions = 3;
  size_t stackBytes = 256 << 10;  // per GPU thread (mmap'd, with a guard page)
  int maxErrors = 16;         // reported in full; the rest counted
  HwFault fault = HwFault::None;
};

// Counters of one launch (the analytic model's calibration inputs).
struct Counters {
  uint64_t laneInstructions = 0;  // with countInstructions: LLVM-dialect ops executed, summed over lanes
  uint64_t barriers = 0, collectives = 0, switches = 0;
  // Shared memory / LDS: one request per warp and instruction instance; a wavefront is one pass
  // through the banks; conflicts = wavefronts beyond the ideal for the access width.
  uint64_t sharedRequests = 0, sharedWavefronts = 0, sharedIdealWavefronts = 0, bankConflicts = 0;
  // Global: requests per warp instruction instance and the 32-byte sectors they touch.
  uint64_t globalRequests = 0, globalSectors = 0, globalIdealSectors = 0;
  bool partial = false;  // a warp had too many requests in flight to group: some counted per lane
  // Per site: [requests, wavefronts or sectors, conflicts] for the report's top lines.
  std::map<int, std::array<uint64_t, 3>> sharedBySite, globalBySite;
};

// The last writer of a global word: its block, thread (linear id in the block) and instruction.
struct GlobalWriter {
  const void* addr = nullptr;
  std::array<int64_t, 3> ctaid{0, 0, 0};
  int tid = 0, site = -1;
};

struct Report {
  bool ok = true;
  std::vector<std::string> errors;  // the first Options::maxErrors, each naming thread, site, address
  uint64_t errorCount = 0;
  Counters counters;
  double seconds = 0;
  // Fiber orders run (1: the fixed order only) and the seed of the first PCT order; "" or why the
  // extra orders were skipped (buffers too large to restore).
  int schedules = 1;
  uint64_t seed = 0;
  std::string schedulesNote;
  // The last writer of every global word written, by address (for naming who wrote a wrong output
  // element; named only then, by writerName: a launch writes far more words than it reports).
  std::vector<GlobalWriter> lastWriter;
  std::array<int64_t, 3> block{1, 1, 1};
  int warpSize = 32;
  std::vector<uint64_t> launchArgs;  // the launch's argument pointers (GpuLaunch::args order)
};

using Entry = void (*)(void** args);

struct Launch {
  Entry entry = nullptr;
  std::array<int64_t, 3> grid{1, 1, 1}, block{1, 1, 1};
  int warpSize = 32;
  size_t sharedBytes = 0;          // static + dynamic shared memory / LDS per block
  std::vector<void*> args;         // one pointer per kernel parameter, pointing at its value
  std::vector<Extent> extents;     // global buffers
  const SiteTable* sites = nullptr;
  bool trackWriters = true;
};

// Runs every block of the grid (one fiber per thread); never throws. A fault in the kernel is an
// error in the report, never a crash of the process (out-of-bounds accesses land in a sink).
Report run(const Launch& l, const Options& o);
// "block (x,y,z) thread (x,y,z) [warp w lane l]" of a writer the report holds.
std::string writerName(const Report& r, const GlobalWriter& w);

// The runtime's entry points, by name, for the JIT's symbol table (and the device libraries'
// math functions convert-gpu-to-nvvm calls: __nv_fmaf, ...).
std::vector<std::pair<std::string, void*>> runtimeSymbols();

// The layouts of the warp-collective instructions (PTX ISA; AMD matrix instruction calculator
// for CDNA3), exposed so that tests check them against the documents independently.
namespace layout {
// mma.sync m16n8k16 (f16/bf16): A register r (0..3) of lane l holds A[row][col], col and col+1.
std::pair<int, int> mmaA16816(int lane, int reg);
std::pair<int, int> mmaB16816(int lane, int reg);   // B[k][n]: k and k+1 at n
std::pair<int, int> mmaC16816(int lane, int reg);   // C/D[row][col] (f32 accumulators)
// MFMA (wave64): element j (0..3) of lane l's A operand, B operand, and accumulator register r.
std::pair<int, int> mfmaA(int mn, int lane, int j);  // (m, k); mn = 16 (16x16x16) or 32 (32x32x8)
std::pair<int, int> mfmaB(int mn, int lane, int j);  // (k, n)
std::pair<int, int> mfmaD(int mn, int lane, int r);  // (m, n)
// wgmma m64nNk16 f32 accumulator: register r (0..N/2-1) of thread t (0..127) of the warpgroup.
std::pair<int, int> wgmmaD(int thread, int reg);     // (m, n)
// The shared-memory byte address of element (mn, k) of a wgmma operand from its matrix
// descriptor: K-major (k contiguous) or MN-major, with the descriptor's swizzle applied by
// absolute address (as the hardware does); -1 for a layout the emulator does not model (no
// swizzle / interleaved).
int64_t wgmmaOperandAddress(uint64_t desc, bool mnMajor, int elemBytes, int mn, int k);
// Whether a swizzled descriptor's base_offset names the row of the swizzle pattern (8 rows of the
// span: 1024, 512 or 256 bytes) its start lies at (`want`): the PTX ISA asks for it when the start
// is off the pattern boundary, and the hardware reads the wrong rows without it.
bool wgmmaBaseOffsetAgrees(uint64_t desc, int* want);
}  // namespace layout

}  // namespace tessera::emu
