// Owns the knob table (knob_table.h).
#include "targets/knob_table.h"

namespace tessera {

namespace {

constexpr bool kHost = false, kGpu = true;

constexpr KnobRow kKnobs[] = {
    {"gemm", kHost, "schedule", "plain|packed|blis|bf16dot|amx|kvec|nvec"}, {"gemm", kHost, "MC", nullptr},
    {"gemm", kHost, "NC", nullptr},              {"gemm", kHost, "KC", nullptr},
    {"gemm", kHost, "MR", nullptr},              {"gemm", kHost, "NR", nullptr},
    {"gemm", kHost, "KU", nullptr},              {"gemm", kHost, "ORDER", "ij|ji"},
    {"gemm", kHost, "NJ", nullptr},  // kvec: columns per register tile
    {"gemm", kHost, "NV", nullptr},  // nvec: vectors per row of a register tile
    {"gemm", kGpu, "strategy", "simt|mma|mma-lane|wgmma"}, {"gemm", kGpu, "BM", nullptr},
    {"gemm", kGpu, "BN", nullptr},               {"gemm", kGpu, "BK", nullptr},
    {"gemm", kGpu, "TM", nullptr},               {"gemm", kGpu, "TN", nullptr},
    {"gemm", kGpu, "VEC", nullptr},              {"gemm", kGpu, "STAGES", nullptr},
    {"gemm", kGpu, "SPLITK", nullptr},  // wgmma (sm_90a): K ranges per output tile
    {"gemm", kGpu, "PERSIST", nullptr},  // wgmma (sm_90a): a persistent grid over the tiles
    {"elementwise", kHost, "VW", nullptr},       {"elementwise", kHost, "UNROLL", nullptr},
    {"elementwise", kHost, "CHUNK", nullptr},    {"elementwise", kHost, "NT", nullptr},
    {"elementwise", kHost, "ROWS", nullptr},     {"elementwise", kHost, "MATH", "precise|fast"},
    {"elementwise", kGpu, "TPB", nullptr},
    {"elementwise", kGpu, "VW", nullptr},        {"elementwise", kGpu, "EPT", nullptr},
    {"elementwise", kGpu, "GRID", nullptr},      {"attention", kHost, "BQ", nullptr},
    {"attention", kHost, "BK", nullptr},         {"attention", kHost, "MR1", nullptr},
    {"attention", kHost, "NR1", nullptr},        {"attention", kHost, "MR2", nullptr},
    {"attention", kHost, "NR2", nullptr},        {"attention", kHost, "U1", nullptr},
    {"attention", kHost, "U2", nullptr},         {"attention", kHost, "VW", nullptr},
    {"attention", kGpu, "BQ", nullptr},          {"attention", kGpu, "BK", nullptr},
    {"attention", kGpu, "DSPLIT", nullptr},      {"attention", kGpu, "strategy", "flash-simt|flash-mma|flash-wgmma|flash-mfma"},
    {"attention", kGpu, "STAGES", nullptr},
    {"attention", kGpu, "WAVES", nullptr},       {"attention", kGpu, "MFMA", "16x16x16|32x32x8"},  // CDNA
    {"attention", kGpu, "PIPE", "fa2|fa3|fa3-overlap|fa3-pingpong"},  // flash-wgmma (sm_90a)
    // Threads of a host kernel (issue 14); the same number is the key's `units`.
    {"gemm", kHost, "THREADS", nullptr},        {"elementwise", kHost, "THREADS", nullptr},
    {"attention", kHost, "THREADS", nullptr},
};

}  // namespace

std::span<const KnobRow> knobTable() { return kKnobs; }

const KnobRow* findKnob(std::string_view family, bool gpu, std::string_view name) {
  for (const KnobRow& r : kKnobs)
    if (r.gpu == gpu && family == r.family && name == r.name) return &r;
  return nullptr;
}

bool knobValueListed(const KnobRow& row, std::string_view v) {
  if (!row.values) return false;
  std::string_view all = row.values;
  while (!all.empty()) {
    size_t bar = all.find('|');
    if (all.substr(0, bar) == v) return true;
    all = bar == std::string_view::npos ? std::string_view() : all.substr(bar + 1);
  }
  return false;
}

}  // namespace tessera
