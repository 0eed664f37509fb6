// Owns the cost of one warp-wide memory instruction from its lanes' addresses: shared-memory/LDS
// cycles with bank conflicts and broadcast, and the cache lines or sectors a global access
// touches. Adapters of the analytic GPU model (measure/estimate.cpp, the Kernel Tuner models of the
// validation bench) turn a kernel's index arithmetic into these per-instruction costs instead of
// assuming every access is conflict-free and coalesced.
//
// The rules, the same for both vendors (CUDA C++ Programming Guide, "Shared Memory" of compute
// capability 5.x and later; the AMD GCN/CDNA ISA guides, "Local Data Share"): 32 banks of 4 bytes
// serve 128 bytes per clock; lanes that read the same 4-byte word share it (broadcast); an access
// wider than 4 bytes per lane is split into phases of 128 bytes (8-byte: 16 lanes per phase,
// 16-byte: 8 lanes), and each phase takes as many cycles as its most loaded bank has distinct
// words. A global access hitting L1 is served the same way: phases of the L1's bytes per clock
// (128 on NVIDIA, 64 on CDNA), each taking a clock per distinct cache line its lanes touch.
//
// An access wider than 4 bytes per lane at an address not aligned to its width exists only on AMD
// (NVIDIA's wide shared loads must be aligned): in the unaligned access mode the HSA runtime sets,
// LLVM merges a thread's consecutive dwords into ds_read_b64/b96/b128 (and ds_read2_b64) even
// when it knows only dword alignment, although its own cost hook ranks such an access below a
// single dword (SIISelLowering.cpp, allowsMisalignedMemoryAccessesImpl: "1 is simply slow, don't
// do it"). The LDS then serves the lanes one at a time, a clock per 8 bytes of each: a wave64
// 16-byte read takes 128 clocks where an aligned one takes 8. (Measured, Kernel Tuner's
// convolution on an MI250X: staged configs take 9.8 ms at 1x1 tiles and scale with the distinct
// values each thread reads, 2 values per clock per CU, 1/16 of the LDS's rate.)
#pragma once

#include <cstdint>
#include <vector>

namespace tessera::costmodel {

// Shared-memory/LDS cycles of one warp-wide access: lane i accesses `bytesPerLane` (4, 8, 12 or
// 16) bytes at byte address addrs[i]. A warp of 64 (wave64) is two sets of 32 lanes' phases. A
// wide access with a lane not aligned to its width (12 bytes: to 16) is served lane by lane.
int sharedCycles(const std::vector<int64_t>& addrs, int bytesPerLane, int banks = 32);

// Distinct `lineBytes`-aligned lines that lane i's `bytesPerLane` bytes at addrs[i] touch, over
// all lanes (with 32: the L2 sectors the access moves).
int linesTouched(const std::vector<int64_t>& addrs, int bytesPerLane, int lineBytes);

// L1 clocks (wavefronts) of one warp-wide global access that hits L1: the lanes in phases of
// `bytesPerClock` bytes, each phase a clock per distinct `lineBytes` line it touches.
int l1Wavefronts(const std::vector<int64_t>& addrs, int bytesPerLane, int lineBytes, int bytesPerClock);

}  // namespace tessera::costmodel
