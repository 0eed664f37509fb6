// Owns the typed configs' readers (kernel_configs.h).
#include "targets/kernel_configs.h"

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

}  // namespace

Expected<HostGemmConfig> readHostGemmConfig(const ir::Config& c) {
  HostGemmConfig g;
  TESSERA_ASSIGN(g.schedule, c.getStr("schedule"));
  if (g.schedule == "kvec") {
    TESSERA_ASSIGN(g.MR, c.getInt("MR"));
    TESSERA_ASSIGN(g.NJ, c.getInt("NJ"));
    TESSERA_ASSIGN(g.KU, c.getInt("KU"));
  } else if (g.schedule == "nvec") {
    TESSERA_ASSIGN(g.MR, c.getInt("MR"));
    TESSERA_ASSIGN(g.NV, c.getInt("NV"));
    TESSERA_ASSIGN(g.KU, c.getInt("KU"));
    TESSERA_ASSIGN(g.KC, c.getInt("KC"));
  } else {
    TESSERA_ASSIGN(g.MC, c.getInt("MC"));
    TESSERA_ASSIGN(g.NC, c.getInt("NC"));
    TESSERA_ASSIGN(g.KC, c.getInt("KC"));
    TESSERA_ASSIGN(g.MR, c.getInt("MR"));
    TESSERA_ASSIGN(g.NR, c.getInt("NR"));
    TESSERA_ASSIGN(g.KU, c.getInt("KU"));
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
  for (auto [name, field] : {std::pair{"BQ", &a.BQ}, {"BK", &a.BK}, {"MR1", &a.MR1}, {"NR1", &a.NR1}, {"MR2", &a.MR2},
                             {"NR2", &a.NR2}, {"U1", &a.U1}, {"U2", &a.U2}, {"VW", &a.VW}}) {
    TESSERA_ASSIGN(*field, c.getInt(name));
  }
  TESSERA_TRY(readOptional(c, "THREADS", a.THREADS));
  return a;
}

Expected<HostElementwiseConfig> readHostElementwiseConfig(const ir::Config& c) {
  HostElementwiseConfig e;
  TESSERA_ASSIGN(e.VW, c.getInt("VW"));
  TESSERA_ASSIGN(e.UNROLL, c.getInt("UNROLL"));
  TESSERA_ASSIGN(e.NT, c.getInt("NT"));
  TESSERA_ASSIGN(e.CHUNK, c.getInt("CHUNK"));
  TESSERA_TRY(readOptional(c, "ROWS", e.ROWS));
  TESSERA_TRY(readOptional(c, "THREADS", e.THREADS));
  TESSERA_TRY(readOptional(c, "MATH", e.MATH));
  return e;
}

Expected<GpuElementwiseConfig> readGpuElementwiseConfig(const ir::Config& c) {
  GpuElementwiseConfig e;
  TESSERA_ASSIGN(e.TPB, c.getInt("TPB"));
  TESSERA_ASSIGN(e.VW, c.getInt("VW"));
  TESSERA_ASSIGN(e.EPT, c.getInt("EPT"));
  TESSERA_ASSIGN(e.GRID, c.getInt("GRID"));
  return e;
}

Expected<GpuGemmConfig> readGpuGemmConfig(const ir::Config& c) {
  GpuGemmConfig g;
  TESSERA_ASSIGN(g.strategy, c.getStr("strategy"));
  TESSERA_ASSIGN(g.BM, c.getInt("BM"));
  TESSERA_ASSIGN(g.BN, c.getInt("BN"));
  TESSERA_ASSIGN(g.BK, c.getInt("BK"));
  TESSERA_ASSIGN(g.TM, c.getInt("TM"));
  TESSERA_ASSIGN(g.TN, c.getInt("TN"));
  TESSERA_ASSIGN(g.VEC, c.getInt("VEC"));
  TESSERA_ASSIGN(g.STAGES, c.getInt("STAGES"));
  TESSERA_TRY(readOptional(c, "SPLITK", g.SPLITK));
  TESSERA_TRY(readOptional(c, "PERSIST", g.PERSIST));
  return g;
}

Expected<GpuAttentionConfig> readGpuAttentionConfig(const ir::Config& c) {
  GpuAttentionConfig a;
  TESSERA_TRY(readOptional(c, "strategy", a.strategy));
  TESSERA_ASSIGN(a.BQ, c.getInt("BQ"));
  TESSERA_ASSIGN(a.BK, c.getInt("BK"));
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
