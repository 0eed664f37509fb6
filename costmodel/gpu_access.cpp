// Owns the per-instruction costs of warp-wide accesses: shared-memory bank cycles and lines touched.
#include "costmodel/gpu_access.h"

#include <algorithm>
#include <utility>

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
  // (bank, 4-byte word) of every word a phase reads, sorted: a bank's distinct words are one run.
  // A flat vector, not a map of sets: the Kernel Tuner models (bench/kerneltuner_models.cpp) call
  // this for every access of every config of a table, and half their time went to tree nodes.
  std::vector<std::pair<int64_t, int64_t>> words;
  for (size_t start = 0; start < addrs.size(); start += lanesPerPhase) {
    words.clear();
    const size_t end = std::min(addrs.size(), start + lanesPerPhase);
    for (size_t l = start; l < end; ++l)
      for (int b = 0; b < width; b += 4) {
        int64_t word = (addrs[l] + b) / 4;
        words.emplace_back(((word % banks) + banks) % banks, word);
      }
    std::sort(words.begin(), words.end());
    words.erase(std::unique(words.begin(), words.end()), words.end());
    size_t worst = 1;
    for (size_t i = 0; i < words.size();) {
      size_t j = i;
      while (j < words.size() && words[j].first == words[i].first) ++j;
      worst = std::max(worst, j - i);
      i = j;
    }
    cycles += int(worst);
  }
  return cycles;
}

int linesTouched(const std::vector<int64_t>& addrs, int bytesPerLane, int lineBytes) {
  std::vector<int64_t> lines;
  lines.reserve(addrs.size());
  const int64_t line = std::max(1, lineBytes);
  for (int64_t a : addrs) {
    int64_t first = a >= 0 ? a / line : (a - line + 1) / line;
    int64_t lastByte = a + std::max(1, bytesPerLane) - 1;
    int64_t last = lastByte >= 0 ? lastByte / line : (lastByte - line + 1) / line;
    for (int64_t l = first; l <= last; ++l) lines.push_back(l);
  }
  std::sort(lines.begin(), lines.end());
  return int(std::unique(lines.begin(), lines.end()) - lines.begin());
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
