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
#pragma once

#include <cstdint>
#include <vector>

namespace tessera::costmodel {

// Shared-memory/LDS cycles of one warp-wide access: lane i accesses `bytesPerLane` (4, 8 or 16)
// bytes at byte address addrs[i]. A warp of 64 (wave64) is two sets of 32 lanes' phases.
int sharedCycles(const std::vector<int64_t>& addrs, int bytesPerLane, int banks = 32);

// Distinct `lineBytes`-aligned lines that lane i's `bytesPerLane` bytes at addrs[i] touch, over
// all lanes (with 32: the L2 sectors the access moves).
int linesTouched(const std::vector<int64_t>& addrs, int bytesPerLane, int lineBytes);

// L1 clocks (wavefronts) of one warp-wide global access that hits L1: the lanes in phases of
// `bytesPerClock` bytes, each phase a clock per distinct `lineBytes` line it touches.
int l1Wavefronts(const std::vector<int64_t>& addrs, int bytesPerLane, int lineBytes, int bytesPerClock);

}  // namespace tessera::costmodel
