// Owns the per-instruction costs of warp-wide accesses: shared-memory bank cycles and lines touched.
#include "costmodel/gpu_access.h"

#include <algorithm>
#include <map>
#include <set>

namespace tessera::costmodel {

int sharedCycles(const std::vector<int64_t>& addrs, int bytesPerLane, int banks) {
  if (addrs.empty()) return 0;
  const int width = std::max(4, bytesPerLane);
  if (width > 4) {
    const int64_t align = width == 12 ? 16 : width;
    const bool underaligned = std::any_of(addrs.begin(), addrs.end(), [&](int64_t a) { return ((a % align) + align) % align != 0; });
    if (underaligned) return int(addrs.size()) * ((width + 7) / 8);  // lane by lane, a clock per 8 bytes
  }
  const size_t lanesPerPhase = size_t(std::max(1, 128 / width));
  int cycles = 0;
  for (size_t start = 0; start < addrs.size(); start += lanesPerPhase) {
    // Per bank, the distinct 4-byte words this phase reads from it.
    std::map<int64_t, std::set<int64_t>> words;
    const size_t end = std::min(addrs.size(), start + lanesPerPhase);
    for (size_t l = start; l < end; ++l)
      for (int b = 0; b < width; b += 4) {
        int64_t word = (addrs[l] + b) / 4;
        words[((word % banks) + banks) % banks].insert(word);
      }
    size_t worst = 1;
    for (const auto& [bank, ws] : words) worst = std::max(worst, ws.size());
    cycles += int(worst);
  }
  return cycles;
}

int linesTouched(const std::vector<int64_t>& addrs, int bytesPerLane, int lineBytes) {
  std::set<int64_t> lines;
  const int64_t line = std::max(1, lineBytes);
  for (int64_t a : addrs) {
    int64_t first = a >= 0 ? a / line : (a - line + 1) / line;
    int64_t lastByte = a + std::max(1, bytesPerLane) - 1;
    int64_t last = lastByte >= 0 ? lastByte / line : (lastByte - line + 1) / line;
    for (int64_t l = first; l <= last; ++l) lines.insert(l);
  }
  return int(lines.size());
}

int l1Wavefronts(const std::vector<int64_t>& addrs, int bytesPerLane, int lineBytes, int bytesPerClock) {
  const size_t lanesPerPhase = size_t(std::max(1, std::max(bytesPerClock, 1) / std::max(bytesPerLane, 1)));
  int cycles = 0;
  for (size_t start = 0; start < addrs.size(); start += lanesPerPhase) {
    std::vector<int64_t> phase(addrs.begin() + long(start), addrs.begin() + long(std::min(addrs.size(), start + lanesPerPhase)));
    cycles += std::max(1, linesTouched(phase, bytesPerLane, lineBytes));
  }
  return cycles;
}

}  // namespace tessera::costmodel
