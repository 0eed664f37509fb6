// Tests shape-generic host attention kernels (CompileOptions::runtime: query length, batch and key
// length at run time): one kernel compiled for upper bounds runs every smaller size, odd ones
// included, causal or not, grouped-query heads, f32 and bf16, one or two threads, blocks that leave
// partial query and key blocks; negative controls: a wrong runtime size fails the check, causal
// sizes without keys for some rows write nothing, and other families refuse a key length.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/codegen.h"
#include "host_check.h"
#include "ir/builders.h"
#include "search/space.h"
#include "targets/kernel_io.h"

using namespace tessera;
using namespace tessera::ir;

namespace {

Config cfg(const Kernel& k, const TargetDesc& t, const std::string& overrides) {
  return testutil::spaceConfig(k, t, overrides);
}

// Runs `exe` on the kernel of the actual sizes with sizes {seq_q, batch, seq_kv}; "" when every
// output matches the reference.
std::string runSized(const codegen::HostExecutable& exe, const AttentionSpec& actual) {
  return testutil::runWithSizes(exe, *buildAttention(actual), 9,
                                {actual.seq_q, actual.batch, actual.seq_kv ? actual.seq_kv : actual.seq_q});
}

const TargetDesc& twoThreads() { return testutil::twoThreadHost(); }

std::string label(const AttentionSpec& s) {
  return "b=" + std::to_string(s.batch) + " sq=" + std::to_string(s.seq_q) + " skv=" + std::to_string(s.seq_kv) +
         (s.causal ? " causal " : " ") + std::string(typeName(s.dtype));
}

}  // namespace

// One length for queries and keys (self-attention, a decoder's prompt): seq and batch at run time.
TEST(HostAttentionRuntime, SequenceAndBatchAtRunTime) {
  const TargetDesc& t = twoThreads();
  for (ScalarType dt : {ScalarType::F32, ScalarType::BF16})
    for (bool causal : {false, true})
      for (const char* extra : {"THREADS=1", "THREADS=2"}) {
        AttentionSpec top{.batch = 3, .heads = 4, .heads_kv = 2, .seq_q = 70, .head_dim = 24, .causal = causal, .dtype = dt};
        Kernel maxK = *buildAttention(top);
        Config c = cfg(maxK, t, std::string("BQ=16,BK=32,VW=8,MR1=4,NR1=16,MR2=4,NR2=16,U1=2,U2=2,") + extra);
        auto exe = codegen::compileHost(maxK, c, t, {.runtime = {.m = true, .batch = true}});
        ASSERT_TRUE(exe.ok()) << exe.error().str();
        for (auto [b, s] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {2, 3}, {3, 17}, {1, 32}, {2, 33}, {3, 70}}) {
          AttentionSpec a = top;
          a.batch = b;
          a.seq_q = s;
          EXPECT_EQ(runSized(**exe, a), "") << label(a) << " " << extra;
        }
      }
}

// Query and key lengths apart (decoding against a cache, cross-attention), with the default blocks.
TEST(HostAttentionRuntime, QueryAndKeyLengthsApart) {
  const TargetDesc& t = hostTarget();
  for (bool causal : {false, true}) {
    AttentionSpec top{.batch = 2, .heads = 2, .seq_q = 33, .seq_kv = 100, .head_dim = 16, .causal = causal};
    Kernel maxK = *buildAttention(top);
    auto exe = codegen::compileHost(maxK, cfg(maxK, t, "BQ=8,BK=16"), t, {.runtime = {.m = true, .batch = true, .kv = true}});
    ASSERT_TRUE(exe.ok()) << exe.error().str();
    std::vector<std::pair<int64_t, int64_t>> sizes = {{1, 1}, {1, 17}, {3, 17}, {17, 100}, {33, 33}, {33, 65}, {8, 16}};
    if (!causal) sizes.push_back({33, 5});  // more queries than keys
    for (auto [q, kv] : sizes) {
      AttentionSpec a = top;
      a.seq_q = q;
      a.seq_kv = kv;
      a.batch = 1;
      EXPECT_EQ(runSized(**exe, a), "") << label(a);
    }
  }
}

// Negative controls: told one query row fewer (or one key fewer) than the buffers hold, the check
// fails; causal with more queries than keys writes nothing (all outputs stay poisoned).
TEST(HostAttentionRuntime, WrongRuntimeSizesFailTheCheck) {
  const TargetDesc& t = hostTarget();
  AttentionSpec top{.batch = 1, .heads = 2, .seq_q = 40, .seq_kv = 40, .head_dim = 16};
  Kernel maxK = *buildAttention(top);
  auto exe = codegen::compileHost(maxK, cfg(maxK, t, "BQ=8,BK=16"), t, {.runtime = {.m = true, .kv = true}});
  ASSERT_TRUE(exe.ok()) << exe.error().str();
  AttentionSpec a = top;
  a.seq_q = 13;
  a.seq_kv = 21;
  EXPECT_EQ(runSized(**exe, a), "");
  for (auto [q, kv] : std::vector<std::pair<int64_t, int64_t>>{{12, 21}, {13, 20}}) {
    Kernel k = *buildAttention(a);
    KernelIO io(k, 9);
    io.poisonOutputs();
    std::vector<void*> bufs(io.buffers(), io.buffers() + io.count());
    alignas(64) int64_t sizes[codegen::kRuntimeSizeCount] = {q, 1, kv};
    bufs.push_back(sizes);
    (*exe)->run(bufs.data());
    auto cmp = io.check();
    ASSERT_TRUE(cmp.ok());
    EXPECT_FALSE(cmp->ok) << "told sq=" << q << " skv=" << kv;
  }
  AttentionSpec ct = top;
  ct.causal = true;
  Kernel causalK = *buildAttention(ct);
  auto cexe = codegen::compileHost(causalK, cfg(causalK, t, "BQ=8,BK=16"), t, {.runtime = {.m = true, .kv = true}});
  ASSERT_TRUE(cexe.ok()) << cexe.error().str();
  AttentionSpec few = ct;
  few.seq_q = 5;
  few.seq_kv = 5;
  Kernel k = *buildAttention(few);
  KernelIO io(k, 9);
  io.poisonOutputs();
  std::vector<void*> bufs(io.buffers(), io.buffers() + io.count());
  alignas(64) int64_t sizes[codegen::kRuntimeSizeCount] = {5, 1, 4};  // 5 queries, 4 keys
  bufs.push_back(sizes);
  (*cexe)->run(bufs.data());
  auto cmp = io.check();
  ASSERT_TRUE(cmp.ok());
  EXPECT_FALSE(cmp->ok);
  EXPECT_EQ(runSized(**cexe, few), "");
}

TEST(HostAttentionRuntime, OnlyAttentionTakesAKeyLength) {
  const TargetDesc& t = hostTarget();
  Kernel g = *buildGemm({.m = 16, .n = 16, .k = 16});
  EXPECT_FALSE(codegen::compileHost(g, cfg(g, t, "schedule=blis"), t, {.runtime = {.kv = true}}).ok());
  Kernel ew = *buildElementwise({.expr = "y = x * 2", .shape = {8, 8}});
  EXPECT_FALSE(codegen::compileHost(ew, cfg(ew, t, ""), t, {.runtime = {.kv = true}}).ok());
}
