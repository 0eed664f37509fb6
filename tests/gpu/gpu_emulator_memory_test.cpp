// Tests the mapped-kernel emulator's memory model: the fiber orders every launch runs by default
// (the fixed one plus seeded PCT orders), the race shadow's reader sets, the generic and async
// proxies (fence.proxy.async), wgmma.fence, mbarrier init visibility, and the legal code that must
// not raise an alarm (shared-memory atomics, partial-mask and exited-lane collectives; only
// __syncwarp orders the lanes of a warp). Each fault is a negative control caught with the default
// options, its message naming the thread, the instruction and the address; each legal neighbour
// passes.
#include <gtest/gtest.h>

#include <regex>

#include "emulator/gpu_emu.h"
#include "codegen/gpu.h"
#include "gpu_check.h"
#include "ir/builders.h"
#include "targets/kernel_io.h"

using namespace tessera;
using namespace tessera::ir;

namespace {

struct Ran {
  emu::Report report;
  std::vector<int32_t> out;
  std::string compileError;
};

// Runs a one-kernel device module `text` (kernel @k taking one i32 output buffer of `words`
// words) on `grid` blocks of `block` threads with the default options but `tweak`.
Ran runText(const std::string& text, const std::string& target, int block, int words,
            const std::function<void(emu::Options&)>& tweak = {}, int grid = 1) {
  Ran r;
  codegen::GpuBinary bin;
  bin.mlirDevice = text;
  bin.launch.kernel = "k";
  bin.launch.block = {block, 1, 1};
  bin.launch.grid = {grid, 1, 1};
  bin.launch.kernelParams = {0};
  codegen::MappedEmuOptions o;
  if (tweak) tweak(o.run);
  auto mk = codegen::compileMapped(bin, testutil::gpuTarget(target), o);
  if (!mk.ok()) {
    r.compileError = mk.error().str();
    return r;
  }
  r.out.assign(size_t(words), -7);
  r.report = (*mk)->run({reinterpret_cast<uint64_t>(r.out.data())}, {{r.out.data(), r.out.size() * 4, "out"}});
  return r;
}

std::string errorsOf(const emu::Report& r) {
  std::string s;
  for (const auto& e : r.errors) s += "\n  " + e;
  return s;
}

// The first error containing `what`, or "".
std::string errorWith(const emu::Report& r, const std::string& what) {
  for (const auto& e : r.errors)
    if (e.find(what) != std::string::npos) return e;
  return "";
}

const char* kPrologue = R"(gpu.module @m {
  llvm.mlir.global internal @sm() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<64 x i32>
  llvm.func @k(%out: !llvm.ptr) attributes {gpu.kernel, nvvm.kernel} {
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %lane = nvvm.read.ptx.sreg.laneid : i32
    %c0 = llvm.mlir.constant(0 : i32) : i32
    %c1 = llvm.mlir.constant(1 : i32) : i32
    %c5 = llvm.mlir.constant(5 : i32) : i32
    %c16 = llvm.mlir.constant(16 : i32) : i32
    %c31 = llvm.mlir.constant(31 : i32) : i32
    %c63 = llvm.mlir.constant(63 : i32) : i32
    %full = llvm.mlir.constant(-1 : i32) : i32
    %sm = llvm.mlir.addressof @sm : !llvm.ptr<3>
    %s0 = llvm.getelementptr %sm[%c0] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
    %st = llvm.getelementptr %sm[%tid] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
    %ot = llvm.getelementptr %out[%tid] : (!llvm.ptr, i32) -> !llvm.ptr, i32
)";
const char* kEpilogue = R"(    llvm.return
  }
})";

// Thread 0 writes word 0; after a barrier every thread reads it; then thread 63 (warp 1) writes
// it again with `between` (a barrier, or nothing) after the reads.
std::string warModule(const std::string& between) {
  return std::string(kPrologue) + R"(    %is0 = llvm.icmp "eq" %tid, %c0 : i32
    llvm.cond_br %is0, ^w0, ^r
  ^w0:
    llvm.store %c5, %s0 : i32, !llvm.ptr<3>
    llvm.br ^r
  ^r:
    nvvm.barrier0
    %v = llvm.load %s0 : !llvm.ptr<3> -> i32
    llvm.store %v, %ot : i32, !llvm.ptr
)" + between + R"(    %is63 = llvm.icmp "eq" %tid, %c63 : i32
    llvm.cond_br %is63, ^w1, ^e
  ^w1:
    llvm.store %c1, %s0 : i32, !llvm.ptr<3>
    llvm.br ^e
  ^e:
)" + kEpilogue;
}

}  // namespace

// Warp 0 read the word, warp 1 read it last, then a lane of warp 1 overwrites it with no barrier:
// one reader per byte (the last) saw no race; the reader set sees warp 0's reads.
TEST(GpuEmulatorMemoryControls, WriteAfterReadByAnEarlierReaderIsARace) {
  Ran bad = runText(warModule(""), "sm_80", 64, 64);
  ASSERT_TRUE(bad.compileError.empty()) << bad.compileError;
  EXPECT_FALSE(bad.report.ok);
  const std::string e = errorWith(bad.report, "race: write-after-read");
  ASSERT_FALSE(e.empty()) << errorsOf(bad.report);
  EXPECT_NE(e.find("shared byte 0"), std::string::npos) << e;
  EXPECT_NE(e.find("warp 0"), std::string::npos) << e;  // the earlier reader
  EXPECT_NE(e.find("thread (63,0,0)"), std::string::npos) << e;  // the writer
  EXPECT_NE(e.find("llvm.load"), std::string::npos) << e;
  EXPECT_NE(e.find("llvm.store"), std::string::npos) << e;
  // The legal neighbour: a barrier between the reads and the write.
  Ran good = runText(warModule("    nvvm.barrier0\n"), "sm_80", 64, 64);
  EXPECT_TRUE(good.report.ok) << errorsOf(good.report);
  for (int t = 0; t < 64; ++t) EXPECT_EQ(good.out[size_t(t)], 5) << t;
}

namespace {

// Two warps and named barrier 1 of 64 threads: warp 1 runs `arriver`, warp 0 `syncer`.
std::string namedBarrierModule(const std::string& arriver, const std::string& syncer) {
  return std::string(kPrologue) + R"(    %c32 = llvm.mlir.constant(32 : i32) : i32
    %c64 = llvm.mlir.constant(64 : i32) : i32
    %other = llvm.xor %tid, %c32 : i32
    %so = llvm.getelementptr %sm[%other] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
    %w1 = llvm.icmp "sge" %tid, %c32 : i32
    llvm.cond_br %w1, ^arr, ^syn
  ^arr:
)" + arriver + R"(    llvm.br ^e
  ^syn:
)" + syncer + R"(    llvm.br ^e
  ^e:
)" + kEpilogue;
}

const char* kArrive = "    nvvm.barrier.arrive id = %c1 number_of_threads = %c64\n";
const char* kSync = "    nvvm.barrier id = %c1 number_of_threads = %c64\n";
const char* kStoreOwn = "    llvm.store %c5, %st : i32, !llvm.ptr<3>\n";
const char* kCopyOther = "    %v = llvm.load %so : !llvm.ptr<3> -> i32\n    llvm.store %v, %ot : i32, !llvm.ptr\n";

}  // namespace

// bar.arrive releases what the arriving warp wrote to the warps that wait at bar.sync (the
// ping-pong warpgroups' turns), but the arriver acquires nothing: a read after bar.arrive of what
// a waiter wrote is a race; arrivals no bar.sync ever meets are reported at the block's end.
TEST(GpuEmulatorMemoryControls, BarArriveReleasesToWaitersOnlyAndMustBeMet) {
  Ran good = runText(namedBarrierModule(std::string(kStoreOwn) + kArrive, std::string(kSync) + kCopyOther), "sm_90a", 64, 64);
  ASSERT_TRUE(good.compileError.empty()) << good.compileError;
  EXPECT_TRUE(good.report.ok) << errorsOf(good.report);
  for (int t = 0; t < 32; ++t) EXPECT_EQ(good.out[size_t(t)], 5) << t;
  Ran reversed = runText(namedBarrierModule(std::string(kArrive) + kCopyOther, std::string(kStoreOwn) + kSync), "sm_90a", 64, 64);
  ASSERT_TRUE(reversed.compileError.empty()) << reversed.compileError;
  const std::string e = errorWith(reversed.report, "race");
  ASSERT_FALSE(e.empty()) << "an arriver read what a waiter wrote, yet no race" << errorsOf(reversed.report);
  EXPECT_NE(e.find("llvm.load"), std::string::npos) << e;
  Ran dangling = runText(namedBarrierModule(std::string(kArrive) + kArrive, kSync), "sm_90a", 64, 64);
  ASSERT_TRUE(dangling.compileError.empty()) << dangling.compileError;
  const std::string d = errorWith(dangling.report, "arrivals no bar.sync met");
  ASSERT_FALSE(d.empty()) << errorsOf(dangling.report);
  EXPECT_NE(d.find("nvvm.barrier.arrive"), std::string::npos) << d;
}

namespace {

// Every thread takes a ticket from a global counter (out[200], -7 before the launch: an atomic
// add) and stores out[tid] = ticket when it is its own, else out[tid + 1000] (past the buffer): a
// kernel that assumes ticket == tid, the fixed order's outcome, faults in other orders. Then every
// thread adds to a shared counter thread 0 zeroed (atomics, after a barrier).
std::string ticketModule() {
  return std::string(kPrologue) + R"(    %c7 = llvm.mlir.constant(7 : i32) : i32
    %c200 = llvm.mlir.constant(200 : i32) : i32
    %c1000 = llvm.mlir.constant(1000 : i32) : i32
    %ctr = llvm.getelementptr %out[%c200] : (!llvm.ptr, i32) -> !llvm.ptr, i32
    %raw = llvm.atomicrmw add %ctr, %c1 monotonic : !llvm.ptr, i32
    %ticket = llvm.add %raw, %c7 : i32
    %same = llvm.icmp "eq" %ticket, %tid : i32
    %off = llvm.select %same, %c0, %c1000 : i1, i32
    %at = llvm.add %tid, %off : i32
    %p = llvm.getelementptr %out[%at] : (!llvm.ptr, i32) -> !llvm.ptr, i32
    llvm.store %ticket, %p : i32, !llvm.ptr
    %is0 = llvm.icmp "eq" %tid, %c0 : i32
    llvm.cond_br %is0, ^z, ^go
  ^z:
    llvm.store %c0, %s0 : i32, !llvm.ptr<3>
    llvm.br ^go
  ^go:
    nvvm.barrier0
    %n = llvm.atomicrmw add %s0, %c1 monotonic : !llvm.ptr<3>, i32
)" + kEpilogue;
}

}  // namespace

// Shared-memory atomics are not races (a positive test: no alarm in any order), and a fault that
// shows in one fiber order only (here: a thread assuming its ticket) is found by default, the
// report naming the order that found it.
TEST(GpuEmulatorMemory, AtomicsAreNoRaceAndAnOrderOnlyFaultIsFoundByDefault) {
  Ran fixed = runText(ticketModule(), "sm_80", 64, 256, [](emu::Options& o) { o.schedules = 1; });
  ASSERT_TRUE(fixed.compileError.empty()) << fixed.compileError;
  EXPECT_TRUE(fixed.report.ok) << "the fixed order gives every thread its own ticket" << errorsOf(fixed.report);
  Ran byDefault = runText(ticketModule(), "sm_80", 64, 256);
  EXPECT_FALSE(byDefault.report.ok) << "the default orders never gave a thread another's ticket";
  const std::string e = errorWith(byDefault.report, "out-of-bounds global store");
  ASSERT_FALSE(e.empty()) << errorsOf(byDefault.report);
  EXPECT_NE(e.find("thread ("), std::string::npos) << e;
  EXPECT_NE(e.find("llvm.store"), std::string::npos) << e;
  EXPECT_NE(e.find(" at 0x"), std::string::npos) << e;
  EXPECT_NE(e.find("PCT seed"), std::string::npos) << e;
  EXPECT_EQ(errorWith(byDefault.report, "race"), "") << "atomics reported as a race" << errorsOf(byDefault.report);
  // The fixed order's results are the launch's: every output written by the right thread.
  for (int t = 0; t < 64; ++t) EXPECT_EQ(byDefault.out[size_t(t)], t) << t;
}

namespace {

// Lanes 0-15 exchange values with shfl.sync over mask 0xffff while lanes 16-31 use mask
// 0xffff0000 at another instruction (both sides of a branch); `exitHigh`: lanes 16-31 exit
// instead and lanes 0-15 shuffle over the full mask.
std::string partialShflModule(bool exitHigh) {
  std::string s = std::string(kPrologue) + R"(    %lo = llvm.icmp "ult" %lane, %c16 : i32
    llvm.cond_br %lo, ^low, ^high
  ^low:
)";
  s += exitHigh ? "    %v0 = nvvm.shfl.sync idx %full, %tid, %c5, %c31 : i32 -> i32\n"
                : "    %m0 = llvm.mlir.constant(65535 : i32) : i32\n"
                  "    %v0 = nvvm.shfl.sync idx %m0, %tid, %c5, %c31 : i32 -> i32\n";
  s += R"(    llvm.store %v0, %ot : i32, !llvm.ptr
    llvm.br ^e
  ^high:
)";
  s += exitHigh ? "    llvm.return\n"
                : "    %m1 = llvm.mlir.constant(-65536 : i32) : i32\n"
                  "    %c21 = llvm.mlir.constant(21 : i32) : i32\n"
                  "    %v1 = nvvm.shfl.sync idx %m1, %tid, %c21, %c31 : i32 -> i32\n"
                  "    llvm.store %v1, %ot : i32, !llvm.ptr\n"
                  "    llvm.br ^e\n";
  return s + "  ^e:\n" + kEpilogue;
}

}  // namespace

// Partial-mask shuffles on both sides of a branch, and lanes that exited before a full-mask
// shuffle, are legal (PTX ISA: the non-exited members of membermask execute it): no divergence,
// no deadlock, the ISA's values.
TEST(GpuEmulatorMemory, PartialMaskAndExitedLanesAtCollectivesAreLegal) {
  Ran split = runText(partialShflModule(false), "sm_80", 32, 32);
  ASSERT_TRUE(split.compileError.empty()) << split.compileError;
  EXPECT_TRUE(split.report.ok) << errorsOf(split.report);
  for (int t = 0; t < 32; ++t) EXPECT_EQ(split.out[size_t(t)], t < 16 ? 5 : 21) << t;
  Ran exited = runText(partialShflModule(true), "sm_80", 32, 32);
  EXPECT_TRUE(exited.report.ok) << errorsOf(exited.report);
  for (int t = 0; t < 16; ++t) EXPECT_EQ(exited.out[size_t(t)], 5) << t;
}

namespace {

// Lane 0 writes a shared word, the warp meets at `meet` (a shuffle or a __syncwarp), lane 1 reads.
std::string laneOrderModule(const std::string& meet) {
  return std::string(kPrologue) + R"(    %is0 = llvm.icmp "eq" %tid, %c0 : i32
    llvm.cond_br %is0, ^w, ^m
  ^w:
    llvm.store %c5, %s0 : i32, !llvm.ptr<3>
    llvm.br ^m
  ^m:
)" + meet + R"(    %is1 = llvm.icmp "eq" %tid, %c1 : i32
    llvm.cond_br %is1, ^r, ^e
  ^r:
    %v = llvm.load %s0 : !llvm.ptr<3> -> i32
    llvm.store %v, %ot : i32, !llvm.ptr
    llvm.br ^e
  ^e:
)" + kEpilogue;
}

}  // namespace

// Only bar.warp.sync (__syncwarp) orders memory between the lanes of a warp: a shuffle does not
// (the negative control, a race naming both lanes), a __syncwarp does (the legal neighbour).
TEST(GpuEmulatorMemoryControls, OnlySyncwarpOrdersTheLanesOfAWarp) {
  Ran shfl = runText(laneOrderModule("    %x = nvvm.shfl.sync idx %full, %tid, %c0, %c31 : i32 -> i32\n"), "sm_80", 32, 32);
  ASSERT_TRUE(shfl.compileError.empty()) << shfl.compileError;
  const std::string e = errorWith(shfl.report, "race: read-after-write");
  ASSERT_FALSE(e.empty()) << "a shuffle ordered lane 0's store before lane 1's load" << errorsOf(shfl.report);
  EXPECT_NE(e.find("thread (0,0,0)"), std::string::npos) << e;
  EXPECT_NE(e.find("thread (1,0,0)"), std::string::npos) << e;
  EXPECT_NE(e.find("shared byte 0"), std::string::npos) << e;
  Ran sync = runText(laneOrderModule("    nvvm.bar.warp.sync %full : i32\n"), "sm_80", 32, 32);
  EXPECT_TRUE(sync.report.ok) << errorsOf(sync.report);
  EXPECT_EQ(sync.out[1], 5);
}

namespace {

// Thread 0 initialises an mbarrier for every thread of the block; `between` (a barrier, or
// nothing) follows; every thread arrives and waits for the phase.
std::string mbarrierModule(const std::string& between) {
  return R"(gpu.module @m {
  llvm.mlir.global internal @bar() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<2 x i64>
  llvm.func @k(%out: !llvm.ptr) attributes {gpu.kernel, nvvm.kernel} {
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c0 = llvm.mlir.constant(0 : i32) : i32
    %c64 = llvm.mlir.constant(64 : i32) : i32
    %b = llvm.mlir.addressof @bar : !llvm.ptr<3>
    %is0 = llvm.icmp "eq" %tid, %c0 : i32
    llvm.cond_br %is0, ^init, ^go
  ^init:
    nvvm.mbarrier.init %b, %c64 : !llvm.ptr<3>, i32
    llvm.br ^go
  ^go:
)" + between + R"(    %s = nvvm.mbarrier.arrive %b : !llvm.ptr<3> -> i64
    %ticks = llvm.mlir.constant(1000000 : i32) : i32
    nvvm.mbarrier.try_wait.parity %b, %c0, %ticks : !llvm.ptr<3>, i32, i32
    %ot = llvm.getelementptr %out[%tid] : (!llvm.ptr, i32) -> !llvm.ptr, i32
    llvm.store %tid, %ot : i32, !llvm.ptr
    llvm.return
  }
})";
}

}  // namespace

// An mbarrier's init is a write the block must order before any use: without the barrier after
// it, a thread's arrive races the init (caught in the fixed order, and by every PCT order).
TEST(GpuEmulatorMemoryControls, AnMbarrierUsedWithoutABarrierAfterItsInitIsARace) {
  Ran bad = runText(mbarrierModule(""), "sm_90a", 64, 64);
  ASSERT_TRUE(bad.compileError.empty()) << bad.compileError;
  EXPECT_FALSE(bad.report.ok);
  const std::string e = errorWith(bad.report, "race:");
  ASSERT_FALSE(e.empty()) << errorsOf(bad.report);
  EXPECT_NE(e.find("mbarrier.init"), std::string::npos) << e;
  EXPECT_NE(e.find("mbarrier.arrive"), std::string::npos) << e;
  EXPECT_NE(e.find("thread ("), std::string::npos) << e;
  EXPECT_NE(e.find("shared byte"), std::string::npos) << e;
  Ran good = runText(mbarrierModule("    nvvm.barrier0\n"), "sm_90a", 64, 64);
  EXPECT_TRUE(good.report.ok) << errorsOf(good.report);
  for (int t = 0; t < 64; ++t) EXPECT_EQ(good.out[size_t(t)], t);
}

// ---- global memory ----

namespace {

// Thread `a` and thread `b` (of blocks `blockA` and `blockB`) store out[0].
std::string twoStoresModule(int a, int blockA, int b, int blockB) {
  return std::string(R"(gpu.module @m {
  llvm.func @k(%out: !llvm.ptr) attributes {gpu.kernel, nvvm.kernel} {
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %bid = nvvm.read.ptx.sreg.ctaid.x : i32
    %ta = llvm.mlir.constant()") + std::to_string(a) + R"( : i32) : i32
    %tb = llvm.mlir.constant()" + std::to_string(b) + R"( : i32) : i32
    %ba = llvm.mlir.constant()" + std::to_string(blockA) + R"( : i32) : i32
    %bb = llvm.mlir.constant()" + std::to_string(blockB) + R"( : i32) : i32
    %x1 = llvm.icmp "eq" %tid, %ta : i32
    %x2 = llvm.icmp "eq" %bid, %ba : i32
    %isA = llvm.and %x1, %x2 : i1
    %y1 = llvm.icmp "eq" %tid, %tb : i32
    %y2 = llvm.icmp "eq" %bid, %bb : i32
    %isB = llvm.and %y1, %y2 : i1
    %either = llvm.or %isA, %isB : i1
    llvm.cond_br %either, ^st, ^e
  ^st:
    llvm.store %tid, %out : i32, !llvm.ptr
    llvm.br ^e
  ^e:
    llvm.return
  }
})";
}

// Block 0 stores data out[1] = 42 then sets the flag out[0] (an atomic exchange); block 1 reads
// the flag atomically and, when set, copies the data to out[2]. `fenced`: __threadfence after
// the data store and after the flag read.
std::string messageModule(bool fenced) {
  const std::string fence = fenced ? "    llvm.fence syncscope(\"agent\") seq_cst\n" : "";
  return std::string(R"(gpu.module @m {
  llvm.func @k(%out: !llvm.ptr) attributes {gpu.kernel, nvvm.kernel} {
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %bid = nvvm.read.ptx.sreg.ctaid.x : i32
    %c0 = llvm.mlir.constant(0 : i32) : i32
    %c1 = llvm.mlir.constant(1 : i32) : i32
    %c2 = llvm.mlir.constant(2 : i32) : i32
    %c42 = llvm.mlir.constant(42 : i32) : i32
    %data = llvm.getelementptr %out[%c1] : (!llvm.ptr, i32) -> !llvm.ptr, i32
    %res = llvm.getelementptr %out[%c2] : (!llvm.ptr, i32) -> !llvm.ptr, i32
    %t0 = llvm.icmp "eq" %tid, %c0 : i32
    llvm.cond_br %t0, ^one, ^e
  ^one:
    %b0 = llvm.icmp "eq" %bid, %c0 : i32
    llvm.cond_br %b0, ^produce, ^consume
  ^produce:
    llvm.store %c42, %data : i32, !llvm.ptr
)") + fence + R"(    %old = llvm.atomicrmw xchg %out, %c1 monotonic : !llvm.ptr, i32
    llvm.br ^e
  ^consume:
    %f = llvm.atomicrmw add %out, %c0 monotonic : !llvm.ptr, i32
)" + fence + R"(    %set = llvm.icmp "eq" %f, %c1 : i32
    llvm.cond_br %set, ^copy, ^e
  ^copy:
    %v = llvm.load %data : !llvm.ptr -> i32
    llvm.store %v, %res : i32, !llvm.ptr
    llvm.br ^e
  ^e:
    llvm.return
  }
})";
}

// The reverse: block 0 reads the data out[1] (copying it to out[2]), then sets the flag out[0];
// block 1 reads the flag and, when set, overwrites the data. `fenced`: __threadfence before the
// flag store and after the flag read, which orders the read before the overwrite.
std::string warBetweenBlocksModule(bool fenced) {
  const std::string fence = fenced ? "    llvm.fence syncscope(\"agent\") seq_cst\n" : "";
  return std::string(R"(gpu.module @m {
  llvm.func @k(%out: !llvm.ptr) attributes {gpu.kernel, nvvm.kernel} {
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %bid = nvvm.read.ptx.sreg.ctaid.x : i32
    %c0 = llvm.mlir.constant(0 : i32) : i32
    %c1 = llvm.mlir.constant(1 : i32) : i32
    %c2 = llvm.mlir.constant(2 : i32) : i32
    %c7 = llvm.mlir.constant(7 : i32) : i32
    %data = llvm.getelementptr %out[%c1] : (!llvm.ptr, i32) -> !llvm.ptr, i32
    %res = llvm.getelementptr %out[%c2] : (!llvm.ptr, i32) -> !llvm.ptr, i32
    %t0 = llvm.icmp "eq" %tid, %c0 : i32
    llvm.cond_br %t0, ^one, ^e
  ^one:
    %b0 = llvm.icmp "eq" %bid, %c0 : i32
    llvm.cond_br %b0, ^reader, ^writer
  ^reader:
    %v = llvm.load %data : !llvm.ptr -> i32
    llvm.store %v, %res : i32, !llvm.ptr
)") + fence + R"(    %old = llvm.atomicrmw xchg %out, %c1 monotonic : !llvm.ptr, i32
    llvm.br ^e
  ^writer:
    %f = llvm.atomicrmw add %out, %c0 monotonic : !llvm.ptr, i32
)" + fence + R"(    %set = llvm.icmp "eq" %f, %c1 : i32
    llvm.cond_br %set, ^over, ^e
  ^over:
    llvm.store %c7, %data : i32, !llvm.ptr
    llvm.br ^e
  ^e:
    llvm.return
  }
})";
}

void oneHostThread(emu::Options& o) { o.hostThreads = 1; }

}  // namespace

// Two threads of a block, or two blocks, storing one global element with nothing ordering them
// is a race naming both writers and the word; one writer is not.
TEST(GpuEmulatorMemoryControls, TwoThreadsOrBlocksStoringOneElementIsARace) {
  Ran threads = runText(twoStoresModule(0, 0, 33, 0), "sm_80", 64, 4, oneHostThread, 2);
  ASSERT_TRUE(threads.compileError.empty()) << threads.compileError;
  std::string e = errorWith(threads.report, "race: write-after-write on global word");
  ASSERT_FALSE(e.empty()) << errorsOf(threads.report);
  EXPECT_NE(e.find("thread (0,0,0)"), std::string::npos) << e;
  EXPECT_NE(e.find("thread (33,0,0)"), std::string::npos) << e;
  EXPECT_NE(e.find(" 0x"), std::string::npos) << e;
  EXPECT_NE(e.find("llvm.store"), std::string::npos) << e;
  Ran blocks = runText(twoStoresModule(0, 0, 0, 1), "sm_80", 64, 4, oneHostThread, 2);
  e = errorWith(blocks.report, "race: global word");
  ASSERT_FALSE(e.empty()) << errorsOf(blocks.report);
  EXPECT_NE(e.find("block (0,0,0)"), std::string::npos) << e;
  EXPECT_NE(e.find("block (1,0,0)"), std::string::npos) << e;
  EXPECT_NE(e.find("llvm.store"), std::string::npos) << e;
  Ran one = runText(twoStoresModule(5, 1, 5, 1), "sm_80", 64, 4, oneHostThread, 2);
  EXPECT_TRUE(one.report.ok) << errorsOf(one.report);
  EXPECT_EQ(one.out[0], 5);
}

// Message passing between blocks: with __threadfence after the data store and after the flag
// read the consumer's read of the data is ordered (no report, the value arrives); without the
// fences it is a race naming the producer's store and the consumer's load.
TEST(GpuEmulatorMemoryControls, UnfencedMessagePassingBetweenBlocksIsARace) {
  Ran fenced = runText(messageModule(true), "sm_80", 32, 4, oneHostThread, 2);
  ASSERT_TRUE(fenced.compileError.empty()) << fenced.compileError;
  EXPECT_TRUE(fenced.report.ok) << errorsOf(fenced.report);
  EXPECT_EQ(fenced.out[2], 42);
  Ran bare = runText(messageModule(false), "sm_80", 32, 4, oneHostThread, 2);
  const std::string e = errorWith(bare.report, "race: global word");
  ASSERT_FALSE(e.empty()) << errorsOf(bare.report);
  EXPECT_NE(e.find("block (0,0,0) thread 0"), std::string::npos) << e;
  EXPECT_NE(e.find("read by block (1,0,0) thread (0,0,0)"), std::string::npos) << e;
  EXPECT_NE(e.find("llvm.load"), std::string::npos) << e;
  EXPECT_NE(e.find("no device-scope fence"), std::string::npos) << e;
}

// Write-after-read between blocks: a block overwriting a word another block read is ordered
// only by the reader's release (fence, flag) and the writer's acquire; without the fences the
// overwrite is a race naming the reader's load, the writer's store and the word.
TEST(GpuEmulatorMemoryControls, AnUnorderedOverwriteOfAWordAnotherBlockReadIsARace) {
  Ran fenced = runText(warBetweenBlocksModule(true), "sm_80", 32, 4, oneHostThread, 2);
  ASSERT_TRUE(fenced.compileError.empty()) << fenced.compileError;
  EXPECT_TRUE(fenced.report.ok) << errorsOf(fenced.report);
  EXPECT_EQ(fenced.out[2], -7);  // block 0 read the data before block 1 overwrote it
  EXPECT_EQ(fenced.out[1], 7);
  Ran bare = runText(warBetweenBlocksModule(false), "sm_80", 32, 4, oneHostThread, 2);
  const std::string e = errorWith(bare.report, "race: write-after-read on global word");
  ASSERT_FALSE(e.empty()) << errorsOf(bare.report);
  EXPECT_NE(e.find("read by block (0,0,0) thread 0 at llvm.load"), std::string::npos) << e;
  EXPECT_NE(e.find("written by block (1,0,0) thread (0,0,0)"), std::string::npos) << e;
  EXPECT_NE(e.find("llvm.store"), std::string::npos) << e;
  EXPECT_NE(e.find(" 0x"), std::string::npos) << e;
  EXPECT_NE(e.find("no device-scope fence"), std::string::npos) << e;
}

// An output store moved before its buffer lands in the red zone between the emulated device's
// buffers, not in the neighbouring input: out of bounds, named.
TEST(GpuEmulatorMemoryControls, AnOverrunIntoANeighbourBufferIsNamed) {
  Kernel k = *buildElementwise({.expr = "y = x * 2", .shape = {64, 100}});
  const TargetDesc& t = testutil::gpuTarget("sm_80");
  auto cfg = testutil::gpuConfig(k, t);
  ASSERT_TRUE(cfg.ok());
  codegen::MappedEmuOptions o;
  o.deviceHook = [](const std::string& text) {
    std::regex store(R"(llvm\.store %(\w+), %(\w+) (\{[^}]*\} )?: vector<4xf32>, !llvm\.ptr(<1>)?\n)");
    std::smatch m;
    if (!std::regex_search(text, m, store)) return text;
    std::regex gep("%" + m[2].str() + R"( = llvm\.getelementptr (%\w+)\[(%\w+)\] : \(!llvm\.ptr(<1>)?, i64\))");
    std::smatch g;
    if (!std::regex_search(text, g, gep)) return text;
    const std::string repl = "%emu_back = llvm.mlir.constant(-64 : i64) : i64\n    %emu_idx = llvm.add " + g[2].str() +
                             ", %emu_back : i64\n    %" + m[2].str() + " = llvm.getelementptr " + g[1].str() +
                             "[%emu_idx] : (!llvm.ptr" + g[3].str() + ", i64)";
    return text.substr(0, size_t(g.position(0))) + repl + text.substr(size_t(g.position(0) + g.length(0)));
  };
  KernelIO io(k, 5);
  auto rep = testutil::runMapped(k, *cfg, t, io, o);
  ASSERT_TRUE(rep.ok()) << rep.error().str();
  const std::string e = errorWith(*rep, "out-of-bounds global store");
  ASSERT_FALSE(e.empty()) << errorsOf(*rep);
  EXPECT_NE(e.find("thread ("), std::string::npos) << e;
  EXPECT_NE(e.find("llvm.store"), std::string::npos) << e;
  EXPECT_NE(e.find("launch argument"), std::string::npos) << e;
}

// ---- Tessera's sm_90 kernels: fences removed from their device text ----

namespace {

Kernel attention(int64_t sq, int64_t skv, int64_t d) {
  return *buildAttention({.heads = 1, .seq_q = sq, .seq_kv = skv, .head_dim = d, .dtype = ScalarType::F16});
}

Config flashWgmma() { return *Config::parseAssignments("strategy=flash-wgmma,BQ=128,BK=64,STAGES=2"); }

// The report of `k` with `cfg` on sm_90a after `hook` rewrote its device text.
emu::Report runHooked(const Kernel& k, const Config& overrides, const std::function<std::string(const std::string&)>& hook) {
  const TargetDesc& t = testutil::gpuTarget("sm_90a");
  auto cfg = testutil::gpuConfig(k, t, overrides);
  EXPECT_TRUE(cfg.ok()) << (cfg.ok() ? "" : cfg.error().str());
  codegen::MappedEmuOptions o;
  o.deviceHook = hook;
  KernelIO io(k, 5);
  io.poisonOutputs();
  auto rep = testutil::runMapped(k, *cfg, t, io, o);
  EXPECT_TRUE(rep.ok()) << (rep.ok() ? "" : rep.error().str());
  return rep.ok() ? *rep : emu::Report{};
}

std::string dropLines(const std::string& s, const std::string& re) {
  return std::regex_replace(s, std::regex("\\n[^\\n]*" + re + "[^\\n]*"), "");
}

}  // namespace

// flash-wgmma writes K/V (cp.async) and P (stores) through the generic proxy and fences them
// to the async proxy before the wgmma reads them; without the fences the wgmma's read is named
// with both sites.
TEST(GpuEmulatorMemoryControls, AWgmmaReadWithoutFenceProxyAsyncNamesBothSites) {
  Kernel k = attention(128, 192, 64);
  emu::Report clean = runHooked(k, flashWgmma(), {});
  EXPECT_TRUE(clean.ok) << errorsOf(clean);
  emu::Report bad = runHooked(k, flashWgmma(), [](const std::string& s) {
    EXPECT_NE(s.find("nvvm.fence.proxy"), std::string::npos);
    return dropLines(s, "nvvm\\.fence\\.proxy");
  });
  const std::string e = errorWith(bad, "proxy:");
  ASSERT_FALSE(e.empty()) << errorsOf(bad);
  EXPECT_NE(e.find("no fence.proxy.async"), std::string::npos) << e;
  EXPECT_NE(e.find("wgmma"), std::string::npos) << e;  // the async-proxy reader
  EXPECT_TRUE(e.find("cp.async") != std::string::npos || e.find("llvm.store") != std::string::npos) << e;  // the writer
  EXPECT_NE(e.find("shared byte"), std::string::npos) << e;
  EXPECT_NE(e.find("thread ("), std::string::npos) << e;
}

// Without wgmma.fence before the first wgmma (the GEMM and flash-wgmma), the wgmma is named.
TEST(GpuEmulatorMemoryControls, AWgmmaWithoutWgmmaFenceIsReported) {
  Kernel g = *buildGemm({.m = 72, .n = 136, .k = 128, .dtype = ScalarType::F16});
  Config gemmCfg = *Config::parseAssignments("strategy=wgmma,STAGES=2");
  emu::Report clean = runHooked(g, gemmCfg, {});
  EXPECT_TRUE(clean.ok) << errorsOf(clean);
  for (bool attn : {false, true}) {
    emu::Report bad = attn ? runHooked(attention(128, 192, 64), flashWgmma(),
                                       [](const std::string& s) { return dropLines(s, "nvvm\\.wgmma\\.fence\\.aligned"); })
                           : runHooked(g, gemmCfg, [](const std::string& s) {
                               EXPECT_NE(s.find("nvvm.wgmma.fence.aligned"), std::string::npos);
                               return dropLines(s, "nvvm\\.wgmma\\.fence\\.aligned");
                             });
    const std::string e = errorWith(bad, "wgmma without a wgmma.fence");
    ASSERT_FALSE(e.empty()) << attn << errorsOf(bad);
    EXPECT_NE(e.find("thread ("), std::string::npos) << e;
    EXPECT_NE(e.find("wgmma.mma_async"), std::string::npos) << e;
  }
}

// The Hopper GEMM's thread 0 initialises the mbarrier ring, then the block barrier publishes it:
// without that barrier the producer's and consumers' first use races the init (by default, in
// the fixed order).
TEST(GpuEmulatorMemoryControls, TheGemmWithoutTheBarrierAfterMbarrierInitIsARace) {
  Kernel g = *buildGemm({.m = 72, .n = 136, .k = 128, .dtype = ScalarType::F16});
  emu::Report bad = runHooked(g, *Config::parseAssignments("strategy=wgmma,STAGES=2"), [](const std::string& s) {
    const size_t init = s.find("nvvm.fence.mbarrier.init");
    EXPECT_NE(init, std::string::npos);
    const size_t bar = s.find("nvvm.barrier0", init);
    EXPECT_NE(bar, std::string::npos);
    if (init == std::string::npos || bar == std::string::npos) return s;
    return s.substr(0, bar) + s.substr(bar + std::string("nvvm.barrier0").size());
  });
  const std::string e = errorWith(bad, "race:");
  ASSERT_FALSE(e.empty()) << errorsOf(bad);
  EXPECT_NE(e.find("mbarrier.init"), std::string::npos) << e;
  EXPECT_NE(e.find("thread ("), std::string::npos) << e;
  EXPECT_NE(e.find("shared byte"), std::string::npos) << e;
}

// A wgmma's accumulators hold poison until its wgmma.wait_group: the GEMM without its last wait
// reads them in the epilogue, flash-wgmma without its waits in the softmax; each read is named
// with the thread, the extract and the register, and the wgmma it waits on.
TEST(GpuEmulatorMemoryControls, AWgmmaAccumulatorReadBeforeItsWaitIsReported) {
  Kernel g = *buildGemm({.m = 72, .n = 136, .k = 128, .dtype = ScalarType::F16});
  Config gemmCfg = *Config::parseAssignments("strategy=wgmma,STAGES=2");
  for (bool attn : {false, true}) {
    auto drop = [](const std::string& s) {
      EXPECT_NE(s.find("nvvm.wgmma.wait.group.sync.aligned 0"), std::string::npos);
      return dropLines(s, "nvvm\\.wgmma\\.wait\\.group\\.sync\\.aligned 0");
    };
    emu::Report bad = attn ? runHooked(attention(128, 192, 64), flashWgmma(), drop) : runHooked(g, gemmCfg, drop);
    const std::string e = errorWith(bad, "wgmma accumulator read before its wgmma.wait_group");
    ASSERT_FALSE(e.empty()) << attn << errorsOf(bad);
    EXPECT_NE(e.find("thread ("), std::string::npos) << e;
    EXPECT_NE(e.find("llvm.extractvalue"), std::string::npos) << e;
    EXPECT_NE(e.find("accumulator register "), std::string::npos) << e;
    EXPECT_NE(e.find("of the wgmma at nvvm.wgmma.mma_async"), std::string::npos) << e;
  }
}

// The register side of wgmma.fence: flash-wgmma (both pipelines) reads S and O, computes P and
// rescales O, then fences before the P.V wgmma takes them. With that fence moved up to before
// the reads, the wgmma takes registers accessed since the last fence: named, with the read.
TEST(GpuEmulatorMemoryControls, AWgmmaTakingRegistersAccessedSinceItsFenceIsReported) {
  for (const char* pipe : {"", ",PIPE=fa3"}) {
    Config cfg = *Config::parseAssignments(std::string("strategy=flash-wgmma,BQ=128,BK=64,STAGES=2") + pipe);
    emu::Report bad = runHooked(attention(128, 192, 64), cfg, [](const std::string& s) {
      const std::string fence = "nvvm.wgmma.fence.aligned", wait = "nvvm.wgmma.wait.group.sync.aligned 0";
      const size_t last = s.rfind(fence), first = s.find(fence), w = s.find(wait);
      EXPECT_TRUE(last != std::string::npos && last != first && w != std::string::npos && w < last);
      if (last == std::string::npos || last == first || w == std::string::npos || w > last) return s;
      const size_t eol = s.find('\n', w);
      std::string t = s.substr(0, last) + s.substr(last + fence.size());  // the P.V fence, gone
      return t.substr(0, eol + 1) + "    " + fence + "\n" + t.substr(eol + 1);  // ...and put after the S wait
    });
    const std::string e = errorWith(bad, "wgmma reads registers accessed since the last wgmma.fence");
    ASSERT_FALSE(e.empty()) << pipe << errorsOf(bad);
    EXPECT_NE(e.find("thread ("), std::string::npos) << e;
    EXPECT_NE(e.find("llvm.extractvalue"), std::string::npos) << e;  // the read
    EXPECT_TRUE(e.find("A fragment") != std::string::npos || e.find("accumulator register") != std::string::npos) << e;
    emu::Report clean = runHooked(attention(128, 192, 64), cfg, {});
    EXPECT_TRUE(clean.ok) << pipe << errorsOf(clean);
  }
}

// ---- Tessera's own kernels under eight fiber orders ----

// Every family on every target stays clean when each launch runs the fixed order and seven PCT
// orders over three blocks.
TEST(GpuEmulatorMemory, TesserasKernelsAreCleanUnderEightSchedules) {
  struct Case {
    Kernel k;
    const char* target;
    const char* cfg;
  };
  std::vector<Case> cases = {
      {*buildGemm({.m = 64, .n = 64, .k = 96, .dtype = ScalarType::F16}), "sm_80", "strategy=mma,STAGES=3"},
      {*buildGemm({.m = 40, .n = 24, .k = 72, .dtype = ScalarType::BF16}), "sm_80", "strategy=mma-lane,VEC=8"},
      {*buildGemm({.m = 33, .n = 40, .k = 17, .dtype = ScalarType::F32}), "sm_80", "strategy=simt"},
      {*buildGemm({.m = 72, .n = 136, .k = 128, .dtype = ScalarType::F16}), "sm_90a", "strategy=wgmma,STAGES=2"},
      {*buildGemm({.m = 64, .n = 64, .k = 64, .dtype = ScalarType::BF16}), "gfx942", ""},
      {*buildElementwise({.expr = "y = gelu(x * 2)", .shape = {7, 1029}}), "sm_80", ""},
      {attention(64, 96, 64), "sm_80", "strategy=flash-mma"},
      {attention(77, 130, 40), "sm_80", "strategy=flash-simt"},
      {attention(128, 192, 64), "sm_90a", "strategy=flash-wgmma,BQ=128,BK=64,STAGES=2"},
      {attention(128, 192, 64), "sm_90a", "strategy=flash-wgmma,BQ=128,BK=64,STAGES=2,PIPE=fa3"},
      {attention(128, 192, 64), "sm_90a", "strategy=flash-wgmma,BQ=128,BK=64,STAGES=2,PIPE=fa3-pingpong"},
      {attention(64, 64, 64), "gfx942", ""},
  };
  for (const auto& c : cases) {
    const TargetDesc& t = testutil::gpuTarget(c.target);
    auto cfg = testutil::gpuConfig(c.k, t, *Config::parseAssignments(c.cfg));
    ASSERT_TRUE(cfg.ok()) << c.k.name << " " << c.target << ": " << cfg.error().str();
    codegen::MappedEmuOptions o;
    o.run.schedules = 8;
    o.run.scheduleBlocks = 3;
    o.run.seed = 1000;
    KernelIO io(c.k, 3);
    io.poisonOutputs();
    auto rep = testutil::runMapped(c.k, *cfg, t, io, o);
    ASSERT_TRUE(rep.ok()) << c.k.name << " " << c.target << ": " << rep.error().str();
    EXPECT_EQ(rep->schedules, 8) << c.k.name << " " << c.target;
    EXPECT_TRUE(rep->ok) << c.k.name << " " << c.target << " " << cfg->str() << errorsOf(*rep);
    auto cmp = io.check();
    ASSERT_TRUE(cmp.ok()) << cmp.error().str();
    EXPECT_TRUE(cmp->ok) << c.k.name << " " << c.target << ": " << cmp->firstBad;
  }
}
