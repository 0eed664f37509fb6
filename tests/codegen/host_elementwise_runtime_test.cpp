// Tests shape-generic host elementwise kernels (CompileOptions::runtime.m: the leading dimension at
// run time): one kernel compiled for an upper bound of rows runs every row count up to it (odd ones
// included) with broadcast operands, row tiles (ROWS) that leave a partial tile, column chunks,
// two threads, the fast math forms and 16-bit dtypes; rank 1 and 3 kernels; negative controls: a
// wrong runtime size fails the check, and what cannot take a runtime leading dimension is refused.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "codegen/codegen.h"
#include "host_check.h"
#include "ir/builders.h"
#include "ir/text.h"
#include "search/space.h"
#include "targets/kernel_io.h"

using namespace tessera;
using namespace tessera::ir;

namespace {

Config cfg(const Kernel& k, const TargetDesc& t, const std::string& overrides) {
  return testutil::spaceConfig(k, t, overrides);
}

// Runs `exe` on the kernel of the actual shape with `rows` as the runtime leading dimension and
// checks every output against the reference ("" when all match).
std::string runRows(const codegen::HostExecutable& exe, const Kernel& actual, int64_t rows) {
  return testutil::runWithSizes(exe, actual, 5, {rows});
}

const TargetDesc& twoThreads() { return testutil::twoThreadHost(); }

// The spec at `rows` rows: the leading dimension of the default shape and of every override that
// has it (overrides of lower rank broadcast and keep their shape).
ElementwiseSpec atRows(ElementwiseSpec s, int64_t rows) {
  const size_t rank = s.shape.size();
  for (auto& [name, shape] : s.shapes)
    if (shape.size() == rank && shape[0] != 1) shape[0] = rows;
  s.shape[0] = rows;
  return s;
}

void checkRange(const ElementwiseSpec& top, const std::string& overrides, const std::vector<int64_t>& rows,
                const TargetDesc& t) {
  Kernel maxK = *buildElementwise(top);
  Config c = cfg(maxK, t, overrides);
  auto exe = codegen::compileHost(maxK, c, t, {.runtime = {.m = true}});
  ASSERT_TRUE(exe.ok()) << exe.error().str() << " " << c.str();
  for (int64_t r : rows) {
    Kernel k = *buildElementwise(atRows(top, r));
    EXPECT_EQ(runRows(**exe, k, r), "") << top.expr << " " << c.str() << " rows=" << r;
  }
}

const std::vector<int64_t> kOddRows = {1, 2, 3, 5, 7, 16, 17, 31, 64, 100};

}  // namespace

TEST(HostElementwiseRuntime, LeadingDimensionOddSizesWithBroadcasts) {
  const TargetDesc& t = twoThreads();
  // s and b broadcast along the rows; r is per row (a column); x and z have every row.
  ElementwiseSpec s{.expr = "y = gelu(x * s + b) + r; w = x - z", .shape = {100, 37}};
  s.shapes["s"] = {37};
  s.shapes["b"] = {1, 37};
  s.shapes["r"] = {100, 1};
  for (const char* o : {"VW=8,UNROLL=1,ROWS=1,CHUNK=0,THREADS=1", "VW=8,UNROLL=2,ROWS=3,CHUNK=16,THREADS=1",
                        "VW=4,UNROLL=1,ROWS=4,CHUNK=0,THREADS=2,MATH=precise", "VW=16,UNROLL=1,ROWS=2,NT=1,THREADS=2"})
    checkRange(s, o, kOddRows, t);
  // The fast math forms, on an expression without a cancelling sum: their approximation error is
  // relative to the term, and `gelu(..) + r` near zero fails the reference check with a kernel of
  // fixed shape too.
  s.expr = "y = gelu(x * s + b) * r; w = x - z";
  checkRange(s, "VW=4,UNROLL=1,ROWS=4,CHUNK=0,THREADS=2,MATH=fast", kOddRows, t);
}

TEST(HostElementwiseRuntime, HalfPrecisionAndOtherRanks) {
  const TargetDesc& t = twoThreads();
  for (ScalarType dt : {ScalarType::BF16, ScalarType::F16}) {
    ElementwiseSpec s{.expr = "y = silu(x) * u", .shape = {64, 29}, .dtype = dt};
    s.shapes["u"] = {29};
    checkRange(s, "VW=8,UNROLL=2,ROWS=2,THREADS=2", {1, 3, 17, 63, 64}, t);
  }
  // Rank 1: the leading dimension is also the vectorized one (masked tail of every size).
  checkRange({.expr = "y = x * x + 1", .shape = {1000}}, "VW=16,UNROLL=2", {1, 3, 17, 999, 1000}, t);
  // Rank 3: rows of the middle dimension tile; the leading one is a plain loop.
  ElementwiseSpec r3{.expr = "y = exp(x) - m", .shape = {9, 5, 33}};
  r3.shapes["m"] = {5, 1};
  checkRange(r3, "VW=8,UNROLL=1,ROWS=2,THREADS=2", {1, 2, 8, 9}, t);
}

// Negative control: told one row fewer than the buffers hold, the kernel leaves the last row
// poisoned and the check fails; told the right count, it passes.
TEST(HostElementwiseRuntime, WrongRuntimeSizeFailsTheCheck) {
  const TargetDesc& t = hostTarget();
  ElementwiseSpec s{.expr = "y = x + 1", .shape = {64, 17}};
  Kernel maxK = *buildElementwise(s);
  auto exe = codegen::compileHost(maxK, cfg(maxK, t, "VW=8,ROWS=3"), t, {.runtime = {.m = true}});
  ASSERT_TRUE(exe.ok()) << exe.error().str();
  Kernel k = *buildElementwise(atRows(s, 13));
  EXPECT_EQ(runRows(**exe, k, 13), "");
  EXPECT_NE(runRows(**exe, k, 12), "");
  // A kernel compiled without runtime sizes takes its shape: the same buffers of 64 rows pass.
  auto fixed = codegen::compileHost(maxK, cfg(maxK, t, "VW=8,ROWS=3"), t);
  ASSERT_TRUE(fixed.ok());
  KernelIO io(maxK, 5);
  io.poisonOutputs();
  (*fixed)->run(io.buffers());
  EXPECT_TRUE(io.check()->ok);
}

TEST(HostElementwiseRuntime, RefusesWhatCannotTakeARuntimeLeadingDimension) {
  const TargetDesc& t = hostTarget();
  Kernel ew = *buildElementwise({.expr = "y = x * 2", .shape = {8, 8}});
  auto batch = codegen::compileHost(ew, cfg(ew, t, ""), t, {.runtime = {.batch = true}});
  ASSERT_FALSE(batch.ok());
  EXPECT_NE(batch.error().str().find("leading dimension"), std::string::npos) << batch.error().str();
  // A tensor read transposed has the leading index below its outermost dimension.
  auto tr = parseKernel("kernel tr : elementwise {\n in x: f32[9, 17]\n out y: f32[17, 9]\n y[i, j] = x[j, i] * 2.0\n}");
  ASSERT_TRUE(tr.ok()) << tr.error().str();
  auto e = codegen::compileHost(*tr, cfg(*tr, t, ""), t, {.runtime = {.m = true}});
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().str().find("below its outermost"), std::string::npos) << e.error().str();
  EXPECT_FALSE(codegen::compileHost(ew, cfg(ew, t, ""), t, {.runtime = {.kv = true}}).ok());
}
