// Owns the synthetic hard tables of the replay benchmark and the search tests (issue 29, item 4):
// brute-forced landscapes generated from a seed, shaped like the spaces a search has never seen
// and finds hardest, so that what makes the search robust is checked on landscapes it was not
// tuned on, not only on the bundled files:
//   needle       one config within 95 % of the best at the bottom of a narrow, tilted basin (its
//                neighbours reach 0.85-0.93: the A100 convolution's shape), with ridges (the best
//                value of a knob depends on another's);
//   plateau      most of the space on a few flat levels (a fast path not taken: nothing to rank),
//                the good region a conjunction of two knobs' values, graded inside;
//   categorical  eight text-valued knobs whose effects are main effects times pairwise
//                interactions (a value good with one partner is bad with another);
//   trap         a deceptive pair of knobs: a broad basin at 0.85 for one pair of their values,
//                the best at another pair, either knob changed alone slow (the host GEMM's
//                register tile: rows and columns must change together);
//   plateau_trap a three-valued knob one value of which is a broad plateau at 0.80-0.87 of the
//                best while every config within 95 % has one of the other two, in narrow basins
//                slow on average (an unseen GPU space's trap: issue 49).
// Each is a list of records (one key, every config measured ok), as a replayed table needs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "store/record.h"

namespace tessera::bench {

// The kinds, in the order the bench prints them: "needle", "plateau", "categorical", "trap",
// "plateau_trap".
std::vector<std::string> syntheticKinds();
// The table of `kind` drawn from `seed` (same kind and seed: the same records); `scale` < 1 keeps
// fewer values per knob (a small table for tests). An empty list for an unknown kind.
std::vector<cache::Record> syntheticTable(const std::string& kind, uint64_t seed, double scale = 1.0);

}  // namespace tessera::bench
