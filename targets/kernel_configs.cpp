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
