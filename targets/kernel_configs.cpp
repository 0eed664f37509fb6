// Owns the typed configs' readers (kernel_configs.h).
#include "targets/kernel_configs.h"

#include <initializer_list>
#include <utility>

namespace tessera {

namespace {

// An optional integer knob: `v` keeps its default when the config has none.
Status readOptional(const ir::Config& c, const char* name, int64_t& v) {
  if (!c.has(name)) return {};
  TESSERA_ASSIGN(v, c.getInt(name));
  return {};
}
Status readOptional(const ir::Config& c, const char* name, std::string& v) {
  if (!c.has(name)) return {};
  TESSERA_ASSIGN(v, c.getStr(name));
  return {};
}

// Integer knobs the config must have, in this order: the first missing or mistyped is the error.
Status readRequired(const ir::Config& c, std::initializer_list<std::pair<const char*, int64_t*>> knobs) {
  for (auto [name, field] : knobs) {
    TESSERA_ASSIGN(*field, c.getInt(name));
  }
  return {};
}

}  // namespace

Expected<HostGemmConfig> readHostGemmConfig(const ir::Config& c) {
  HostGemmConfig g;
  TESSERA_ASSIGN(g.schedule, c.getStr("schedule"));
  if (g.schedule == "kvec") {
    TESSERA_TRY(readRequired(c, {{"MR", &g.MR}, {"NJ", &g.NJ}, {"KU", &g.KU}}));
  } else if (g.schedule == "nvec") {
    TESSERA_TRY(readRequired(c, {{"MR", &g.MR}, {"NV", &g.NV}, {"KU", &g.KU}, {"KC", &g.KC}}));
  } else {
    TESSERA_TRY(readRequired(c, {{"MC", &g.MC}, {"NC", &g.NC}, {"KC", &g.KC}, {"MR", &g.MR}, {"NR", &g.NR}, {"KU", &g.KU}}));
    TESSERA_ASSIGN(g.ORDER, c.getStr("ORDER"));
  }
  for (auto [name, field] : {std::pair{"MC", &g.MC}, {"NC", &g.NC}, {"KC", &g.KC}, {"MR", &g.MR}, {"NR", &g.NR},
                             {"KU", &g.KU}, {"NJ", &g.NJ}, {"NV", &g.NV}, {"THREADS", &g.THREADS}, {"PACKB", &g.PACKB}})
    TESSERA_TRY(readOptional(c, name, *field));
  TESSERA_TRY(readOptional(c, "ORDER", g.ORDER));
  return g;
}

Expected<HostAttentionConfig> readHostAttentionConfig(const ir::Config& c) {
  HostAttentionConfig a;
  TESSERA_TRY(readRequired(c, {{"BQ", &a.BQ}, {"BK", &a.BK}, {"MR1", &a.MR1}, {"NR1", &a.NR1}, {"MR2", &a.MR2},
                               {"NR2", &a.NR2}, {"U1", &a.U1}, {"U2", &a.U2}, {"VW", &a.VW}}));
  TESSERA_TRY(readOptional(c, "THREADS", a.THREADS));
  return a;
}

Expected<HostElementwiseConfig> readHostElementwiseConfig(const ir::Config& c) {
  HostElementwiseConfig e;
  TESSERA_TRY(readRequired(c, {{"VW", &e.VW}, {"UNROLL", &e.UNROLL}, {"NT", &e.NT}, {"CHUNK", &e.CHUNK}}));
  TESSERA_TRY(readOptional(c, "ROWS", e.ROWS));
  TESSERA_TRY(readOptional(c, "THREADS", e.THREADS));
  TESSERA_TRY(readOptional(c, "MATH", e.MATH));
  return e;
}

Expected<GpuElementwiseConfig> readGpuElementwiseConfig(const ir::Config& c) {
  GpuElementwiseConfig e;
  TESSERA_TRY(readRequired(c, {{"TPB", &e.TPB}, {"VW", &e.VW}, {"EPT", &e.EPT}, {"GRID", &e.GRID}}));
  return e;
}

Expected<GpuGemmConfig> readGpuGemmConfig(const ir::Config& c) {
  GpuGemmConfig g;
  TESSERA_ASSIGN(g.strategy, c.getStr("strategy"));
  TESSERA_TRY(readRequired(c, {{"BM", &g.BM}, {"BN", &g.BN}, {"BK", &g.BK}, {"TM", &g.TM}, {"TN", &g.TN}, {"VEC", &g.VEC},
                               {"STAGES", &g.STAGES}}));
  TESSERA_TRY(readOptional(c, "SPLITK", g.SPLITK));
  TESSERA_TRY(readOptional(c, "PERSIST", g.PERSIST));
  return g;
}

Expected<GpuAttentionConfig> readGpuAttentionConfig(const ir::Config& c) {
  GpuAttentionConfig a;
  TESSERA_TRY(readOptional(c, "strategy", a.strategy));
  TESSERA_TRY(readRequired(c, {{"BQ", &a.BQ}, {"BK", &a.BK}}));
  if (a.strategy == "flash-simt") {
    TESSERA_ASSIGN(a.DSPLIT, c.getInt("DSPLIT"));
  } else {
    TESSERA_TRY(readOptional(c, "DSPLIT", a.DSPLIT));
  }
  TESSERA_TRY(readOptional(c, "STAGES", a.STAGES));
  TESSERA_TRY(readOptional(c, "PIPE", a.PIPE));
  TESSERA_TRY(readOptional(c, "WAVES", a.WAVES));
  TESSERA_TRY(readOptional(c, "MFMA", a.MFMA));
  return a;
}

}  // namespace tessera
