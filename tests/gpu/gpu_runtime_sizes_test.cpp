// Tests shape-generic GPU elementwise and attention kernels (GpuCompileOptions::runtime) without a
// GPU: one kernel compiled at an upper bound of the rows (elementwise's leading dimension) or of
// the sequence length and batch (attention) runs every size up to it, size 1 and sizes that are
// no multiple of its tiles included, on the mapped-kernel emulator (exact allocations: any access
// past the runtime size is an error) behind the host wrapper, checked against the reference;
// negative controls (told one row short, the check fails); what cannot take runtime sizes is
// refused in one line.
#include <gtest/gtest.h>

#include <vector>

#include "codegen/gpu.h"
#include "../common/elementwise_kernel.h"
#include "gpu_check.h"
#include "ir/builders.h"
#include "ir/text.h"

using namespace tessera;
using namespace tessera::ir;

namespace {

using testutil::ew;

bool oneLine(const std::string& s) { return !s.empty() && s.find('\n') == std::string::npos; }

// The compile error of `k` with runtime `rt` ("" when it compiles).
std::string refusal(const Kernel& k, const char* target, const char* overrides, codegen::RuntimeDims rt) {
  auto g = testutil::compileShapeGeneric(k, testutil::gpuTarget(target), overrides, rt);
  return g.ok() ? "" : g.error().message;
}

struct EwCase {
  const char* target;
  const char* expr;
  Shape shape;  // at the bound: shape[0] = the rows' upper bound
  std::map<std::string, Shape> shapes;
  ScalarType dt;
  const char* config;
};

Kernel ewAt(const EwCase& c, int64_t rows) {
  Shape sh = c.shape;
  sh[0] = rows;
  auto shapes = c.shapes;
  for (auto& [name, s] : shapes)
    if (s.size() == sh.size() && s[0] == c.shape[0]) s[0] = rows;  // indexed by the rows
  return ew(c.expr, sh, shapes, c.dt);
}

void checkRows(const EwCase& c, const std::vector<int64_t>& rows) {
  const TargetDesc& t = testutil::gpuTarget(c.target);
  auto g = testutil::compileShapeGeneric(ewAt(c, c.shape[0]), t, c.config, {.m = true});
  ASSERT_TRUE(g.ok()) << c.config << ": " << g.error().str();
  EXPECT_TRUE(g->bin.launch.runtime.m);
  EXPECT_EQ(g->bin.launch.runtime.maxM, c.shape[0]);
  for (int64_t m : rows)
    EXPECT_EQ(testutil::runAtSizes(*g, t, ewAt(c, m), m, 0, c.shape[0] - m + 2), "")
        << c.target << " " << c.expr << " " << c.config << " rows=" << m;
}

}  // namespace

// One block per TPB*EPT vectors (GRID=0: grid.x follows the rows), a grid-stride kernel (GRID=1:
// its block count capped, the stride following the launched count), a row-broadcast operand and a
// column-broadcast one, f32 and f16, NVIDIA and AMD, a one-dimensional kernel.
TEST(GpuRuntimeSizes, ElementwiseRuntimeRows) {
  const std::vector<int64_t> rows = {1, 2, 3, 17, 63, 100};
  checkRows({"sm_80", "y = gelu(x * s + b)", {100, 36}, {{"s", {36}}, {"b", {100, 1}}}, ScalarType::F32,
             "TPB=64,VW=4,EPT=2,GRID=0"}, rows);
  checkRows({"sm_80", "y = x * s + b; z = relu(y)", {100, 160}, {{"s", {160}}, {"b", {100, 1}}}, ScalarType::F16,
             "TPB=64,VW=2,EPT=1,GRID=1"}, rows);
  checkRows({"gfx942", "y = silu(x) * w", {100, 24}, {{"w", {24}}}, ScalarType::BF16, "TPB=64,VW=4,EPT=1,GRID=0"}, rows);
  checkRows({"sm_90", "y = exp(x) + 1", {1000}, {}, ScalarType::F32, "TPB=64,VW=1,EPT=4,GRID=0"}, {1, 2, 3, 191, 999, 1000});
}

// The kernel told one row fewer than the buffers hold leaves the last row poisoned; and a kernel
// whose guard ignores the runtime rows (the bound's vectors instead) reads past the rows it was given.
TEST(GpuRuntimeSizes, ElementwiseNegativeControls) {
  EwCase c{"sm_80", "y = gelu(x * s + b)", {100, 36}, {{"s", {36}}, {"b", {100, 1}}}, ScalarType::F32, "TPB=64,VW=4,EPT=2,GRID=0"};
  const TargetDesc& t = testutil::gpuTarget(c.target);
  auto g = testutil::compileShapeGeneric(ewAt(c, 100), t, c.config, {.m = true});
  ASSERT_TRUE(g.ok()) << g.error().str();
  for (int64_t m : {1, 17, 64}) {
    EXPECT_NE(testutil::runAtSizes(*g, t, ewAt(c, m), m - 1, 0), "") << "rows=" << m << " told " << m - 1;
    EXPECT_EQ(testutil::runAtSizes(*g, t, ewAt(c, m), m, 0), "") << "rows=" << m;
  }
  // The same kernel compiled at a fixed shape (no runtime rows) and handed 17 rows: out of bounds.
  auto fixed = testutil::compileShapeGeneric(ewAt(c, 100), t, c.config, {});
  ASSERT_TRUE(fixed.ok()) << fixed.error().str();
  EXPECT_NE(testutil::runAtSizes(*fixed, t, ewAt(c, 17), 17, 0), "");
}

TEST(GpuRuntimeSizes, ElementwiseRefusals) {
  auto tr = parseKernel("kernel tr : elementwise {\n in x: f32[16, 9]\n out y: f32[9, 16]\n y[i, j] = x[j, i] * 2.0\n}");
  ASSERT_TRUE(tr.ok());
  std::string r = refusal(*tr, "sm_80", "", {.m = true});
  EXPECT_TRUE(oneLine(r) && r.find("below its outermost dimension") != std::string::npos) << r;
  r = refusal(ew("y = x * 2", {1024}), "sm_80", "VW=4", {.m = true});
  EXPECT_TRUE(oneLine(r) && r.find("VW=1") != std::string::npos) << r;
  r = refusal(ew("y = x * 2", {64, 32}), "gfx942", "", {.batch = true});
  EXPECT_TRUE(oneLine(r) && r.find("leading dimension") != std::string::npos) << r;
  EwCase c{"sm_80", "y = x * 2", {100, 32}, {}, ScalarType::F32, "TPB=64,VW=4,EPT=1,GRID=0"};
  auto g = testutil::compileShapeGeneric(ewAt(c, 100), testutil::gpuTarget("sm_80"), c.config, {.m = true});
  ASSERT_TRUE(g.ok()) << g.error().str();
  for (int64_t m : {0, -1, 101}) {
    auto l = codegen::launchAtSizes(g->bin.launch, std::vector<int64_t>{m, 0, 0}.data());
    ASSERT_FALSE(l.ok()) << m;
    EXPECT_TRUE(oneLine(l.error().message) && l.error().message.find("runtime rows=" + std::to_string(m) + " is outside 1..100") != std::string::npos) << l.error().message;
  }
  // grid.x follows the rows: 17 rows of 8 vectors in blocks of 64 vectors = 3 blocks (13 at 100).
  auto l = codegen::launchAtSizes(g->bin.launch, std::vector<int64_t>{17, 0, 0}.data());
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->grid[0], 3);
  EXPECT_EQ(g->bin.launch.grid[0], 13);
}

namespace {

struct AttnCase {
  const char* target;
  int64_t h, hkv, d;
  bool causal;
  ScalarType dt;
  int64_t maxSeq, maxBatch;
  const char* config;
};

Kernel attnAt(const AttnCase& c, int64_t seq, int64_t batch) {
  return testutil::attentionKernel(c.h, c.hkv, seq, seq, c.d, c.causal, c.dt, batch);
}

// Every (seq, batch) of `sizes` on one kernel compiled at (maxSeq, maxBatch) with runtime `rt`.
void checkAttention(const AttnCase& c, codegen::RuntimeDims rt, const std::vector<std::pair<int64_t, int64_t>>& sizes) {
  const TargetDesc& t = testutil::gpuTarget(c.target);
  auto g = testutil::compileShapeGeneric(attnAt(c, c.maxSeq, c.maxBatch), t, c.config, rt);
  ASSERT_TRUE(g.ok()) << c.config << ": " << g.error().str();
  EXPECT_EQ(g->bin.launch.runtime.m, rt.m);
  EXPECT_EQ(g->bin.launch.runtime.batch, rt.batch);
  for (auto [seq, batch] : sizes)
    EXPECT_EQ(testutil::runAtSizes(*g, t, attnAt(c, seq, batch), seq, batch, 1), "")
        << c.target << " " << c.config << (c.causal ? " causal" : "") << " seq=" << seq << " batch=" << batch;
}

}  // namespace

// flash-mma (FA2 on mma.sync, the default on sm_80..sm_90 for f16/bf16): one kernel compiled at
// seq 100 runs every length up to it (the key tail masked at the runtime length, Q rows clamped and
// their stores guarded, causal's diagonal at the runtime length), with both stage counts.
TEST(GpuRuntimeSizes, AttentionMmaRuntimeSeq) {
  const std::vector<std::pair<int64_t, int64_t>> seqs = {{1, 2}, {2, 2}, {17, 2}, {31, 2}, {64, 2}, {100, 2}};
  checkAttention({"sm_80", 2, 2, 32, false, ScalarType::F16, 100, 2, "strategy=flash-mma,BQ=32,BK=32,STAGES=2"}, {.m = true}, seqs);
  checkAttention({"sm_86", 4, 2, 16, true, ScalarType::BF16, 100, 2, "strategy=flash-mma,BQ=16,BK=16,STAGES=1"}, {.m = true}, seqs);
  checkAttention({"sm_90", 2, 1, 64, true, ScalarType::F16, 100, 2, "strategy=flash-mma,BQ=64,BK=32,STAGES=2"}, {.m = true},
                 {{1, 2}, {3, 2}, {65, 2}, {100, 2}});
}

// A runtime batch (grid.z) with and without the runtime length: flash-mma and flash-simt (f32).
TEST(GpuRuntimeSizes, AttentionRuntimeBatchAndSimt) {
  checkAttention({"sm_80", 2, 1, 32, true, ScalarType::F16, 45, 3, "strategy=flash-mma,BQ=16,BK=16,STAGES=2"}, {.batch = true},
                 {{45, 1}, {45, 3}});
  checkAttention({"sm_80", 2, 2, 32, false, ScalarType::F16, 70, 3, "strategy=flash-mma,BQ=32,BK=32,STAGES=2"},
                 {.m = true, .batch = true}, {{1, 1}, {33, 3}, {70, 2}});
  checkAttention({"sm_80", 2, 1, 8, true, ScalarType::F32, 70, 3, "strategy=flash-simt,BQ=32,BK=16,DSPLIT=1"},
                 {.m = true, .batch = true}, {{1, 1}, {2, 3}, {17, 3}, {33, 1}, {70, 2}});
}

// Told one position short, the kernel views the tensors at the wrong length: the check fails. A
// kernel compiled at the bound without runtime sizes, handed the buffers of a shorter length,
// reads past them.
TEST(GpuRuntimeSizes, AttentionNegativeControls) {
  AttnCase c{"sm_80", 2, 2, 32, true, ScalarType::F16, 100, 1, "strategy=flash-mma,BQ=32,BK=32,STAGES=2"};
  const TargetDesc& t = testutil::gpuTarget(c.target);
  auto g = testutil::compileShapeGeneric(attnAt(c, 100, 1), t, c.config, {.m = true});
  ASSERT_TRUE(g.ok()) << g.error().str();
  for (int64_t s : {17, 64}) {
    EXPECT_NE(testutil::runAtSizes(*g, t, attnAt(c, s, 1), s - 1, 1), "") << "seq=" << s << " told " << s - 1;
    EXPECT_EQ(testutil::runAtSizes(*g, t, attnAt(c, s, 1), s, 1), "") << "seq=" << s;
  }
  auto fixed = testutil::compileShapeGeneric(attnAt(c, 100, 1), t, c.config, {});
  ASSERT_TRUE(fixed.ok()) << fixed.error().str();
  EXPECT_NE(testutil::runAtSizes(*fixed, t, attnAt(c, 17, 1), 17, 1), "");
}

TEST(GpuRuntimeSizes, AttentionRefusalsAndPtxas) {
  Kernel k = testutil::attentionKernel(2, 2, 128, 128, 64, false, ScalarType::BF16);
  std::string r = refusal(k, "sm_90a", "strategy=flash-wgmma", {.m = true});
  EXPECT_TRUE(oneLine(r) && r.find("flash-wgmma") != std::string::npos && r.find("flash-mma") != std::string::npos) << r;
  r = refusal(k, "gfx942", "strategy=flash-mfma", {.batch = true});
  EXPECT_TRUE(oneLine(r) && r.find("flash-mfma") != std::string::npos && r.find("no runtime sizes") != std::string::npos) << r;
  r = refusal(k, "sm_80", "strategy=flash-mma", {.kv = true});
  EXPECT_TRUE(oneLine(r) && r.find("key length") != std::string::npos) << r;
  r = refusal(testutil::attentionKernel(2, 2, 1, 128, 64, false, ScalarType::F16), "sm_80", "strategy=flash-mma", {.m = true});
  EXPECT_TRUE(oneLine(r) && r.find("equal query and key lengths") != std::string::npos) << r;

  // ptxas takes the runtime-length flash-mma of the space's default at seq 4096 without spills;
  // the grid's query blocks follow the length.
  const TargetDesc& t = testutil::gpuTarget("sm_80");
  Kernel big = testutil::attentionKernel(8, 8, 4096, 4096, 64, true, ScalarType::F16, 4);
  auto c = testutil::gpuConfig(big, t);
  ASSERT_TRUE(c.ok()) << c.error().str();
  auto bin = codegen::compileGpu(big, *c, t, {.runtime = {.m = true, .batch = true}});
  ASSERT_TRUE(bin.ok()) << bin.error().str();
  EXPECT_EQ(bin->strategy, "flash-mma");
  EXPECT_TRUE(bin->resources.ok && !bin->resources.spills()) << bin->resources.summary();
  auto l = codegen::launchAtSizes(bin->launch, std::vector<int64_t>{100, 3, 0}.data());
  ASSERT_TRUE(l.ok()) << l.error().str();
  EXPECT_EQ(l->grid[0], (100 + bin->launch.runtime.rowsPerBlock - 1) / bin->launch.runtime.rowsPerBlock);
  EXPECT_EQ(l->grid[1], 8);
  EXPECT_EQ(l->grid[2], 3);
  for (int64_t s : {0, 4097}) {
    auto bad = codegen::launchAtSizes(bin->launch, std::vector<int64_t>{s, 1, 0}.data());
    ASSERT_FALSE(bad.ok());
    EXPECT_TRUE(oneLine(bad.error().message) && bad.error().message.find("runtime seq=" + std::to_string(s) + " is outside 1..4096") != std::string::npos) << bad.error().message;
  }
}
