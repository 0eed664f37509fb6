// Tests the GPU target table and the occupancy arithmetic of the resource report.
#include <gtest/gtest.h>

#include "codegen/gpu.h"
#include "targets/target_desc.h"

using namespace tessera;

TEST(GpuTargets, EveryRequiredChipIsDescribed) {
  for (const char* n : {"sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "gfx90a", "gfx942", "gfx1100"}) {
    auto t = getTarget(n);
    ASSERT_TRUE(t.ok()) << n;
    EXPECT_NE(t->vendor, Vendor::Host) << n;
    EXPECT_GT(t->units, 0) << n;
    EXPECT_TRUE(t->warpSize == 32 || t->warpSize == 64) << n;
    EXPECT_EQ(t->maxThreadsPerBlock, 1024) << n;
    EXPECT_GT(t->regsPerSM, 0) << n;
    EXPECT_GT(t->smemPerBlock, 0) << n;
    EXPECT_GE(t->smemPerSM, t->smemPerBlock) << n;
    EXPECT_GT(t->maxBlocksPerSM, 0) << n;
    EXPECT_GT(t->maxWarpsPerSM, 0) << n;
    EXPECT_GT(t->l2Bytes_gpu, 0) << n;
    EXPECT_GT(t->peakGflopsF32, 0) << n;
    EXPECT_GT(t->peakGflopsF16, t->peakGflopsF32) << n;
    EXPECT_GT(t->memBandwidthGBs, 0) << n;
    EXPECT_FALSE(t->mma.empty()) << n;
  }
  EXPECT_NE(getTarget("sm_80")->findMma("f16", "mma.sync"), nullptr);
  EXPECT_NE(getTarget("gfx942")->findMma("bf16", "mfma"), nullptr);
  EXPECT_EQ(getTarget("gfx1100")->findMma("f16", "mfma"), nullptr);
  EXPECT_NE(getTarget("sm_90a")->findMma("f16", "wgmma"), nullptr);
  EXPECT_EQ(getTarget("sm_90")->findMma("f16", "wgmma"), nullptr);
  EXPECT_EQ(getTarget("gfx1100")->warpSize, 32);
}

TEST(GpuTargets, OccupancyFromResources) {
  // sm_80, 256 threads, 128 registers: 128*32 = 4096 regs/warp, 8 warps -> 32768 per block -> 2 blocks.
  codegen::ResourceReport r;
  r.threadsPerBlock = 256;
  r.registers = 128;
  r.sharedBytes = 16384;
  codegen::finishResourceReport(r, *getTarget("sm_80"));
  EXPECT_EQ(r.blocksPerUnit, 2);
  EXPECT_EQ(r.limiter, "registers");
  EXPECT_TRUE(r.ok);
  // 48 KB + 1 KB reserved: 3 blocks of 164 KB on sm_80.
  r.registers = 32;
  r.sharedBytes = 48 * 1024;
  codegen::finishResourceReport(r, *getTarget("sm_80"));
  EXPECT_EQ(r.blocksPerUnit, 3);
  EXPECT_EQ(r.limiter, "shared memory");
  // Spills reject.
  r.spillStoreBytes = 8;
  codegen::finishResourceReport(r, *getTarget("sm_80"));
  EXPECT_FALSE(r.ok);
  // gfx942: 128 VGPRs -> 4 waves per SIMD -> 16 waves per CU; 256 threads = 4 waves -> 4 blocks.
  codegen::ResourceReport a;
  a.threadsPerBlock = 256;
  a.vgprs = 128;
  a.sgprs = 32;
  codegen::finishResourceReport(a, *getTarget("gfx942"));
  EXPECT_EQ(a.blocksPerUnit, 4);
  EXPECT_EQ(a.wavesPerUnit, 16);
  EXPECT_DOUBLE_EQ(a.occupancy, 0.5);
  EXPECT_TRUE(a.ok);
  a.sharedBytes = 70000;
  codegen::finishResourceReport(a, *getTarget("gfx942"));
  EXPECT_FALSE(a.ok);
}
