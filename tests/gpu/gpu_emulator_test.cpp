// Tests the mapped-kernel emulator: every GPU kernel family, compiled for sm_80, sm_90 and gfx942
// and run after mapping (the NVVM / ROCDL module ptxas or the AMDGPU backend gets) with one fiber
// per GPU thread, matches the reference at odd shapes in f16 and bf16 with no race, bounds or
// async-copy report; and the negative controls: a wrong mma.sync A-fragment order, a wrong MFMA
// accumulator layout, a removed barrier, an off-by-one global store and a missing
// cp.async.wait_group are each caught with a message naming the thread, the instruction and the
// address.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "emulator/gpu_emu.h"
#include "codegen/gpu.h"
#include "gpu_check.h"
#include "ir/builders.h"
#include "search/space.h"
#include "search/space_ops.h"
#include "targets/kernel_io.h"

using namespace tessera;
using namespace tessera::ir;

namespace {

struct Outcome {
  bool ran = false, correct = false;
  std::string error, firstBad;
  emu::Report report;
};

// Compiles `k` with `overrides` for `target`, runs the mapped kernel behind the host wrapper on
// seeded inputs and compares with the reference; a wrong element is named with its writer.
Outcome emulate(const Kernel& k, const std::string& target, const Config& overrides = {},
                const codegen::MappedEmuOptions& o = {}) {
  Outcome out;
  const TargetDesc& t = testutil::gpuTarget(target);
  auto cfg = testutil::gpuConfig(k, t, overrides);
  if (!cfg.ok()) {
    out.error = cfg.error().str();
    return out;
  }
  auto bin = codegen::compileGpu(k, *cfg, t, {.wantBinary = false});
  if (!bin.ok()) {
    out.error = bin.error().str();
    return out;
  }
  auto mk = codegen::compileMapped(*bin, t, o);
  if (!mk.ok()) {
    out.error = mk.error().str();
    return out;
  }
  auto report = std::make_shared<emu::Report>();
  auto runner = codegen::makeDeviceRunner(codegen::mappedEmulatedDevice(*mk, t.name, report));
  KernelIO io(k, 7);
  io.poisonOutputs();
  auto ran = runner->run(*bin, k, io.buffers(), 1);
  out.report = *report;
  out.ran = ran.ok();
  if (!ran.ok()) out.error = ran.error().message;
  auto cmp = io.check();
  if (cmp.ok()) {
    out.correct = out.ran && cmp->ok;
    if (!cmp->ok)
      out.firstBad = cmp->firstBad + "; " +
                     codegen::whoWrote(*report, (*mk)->sites(), bin->launch, k, cmp->firstBadOutput, cmp->firstBadElement);
  }
  return out;
}

std::string describe(const Outcome& o) {
  std::string s = o.error + " " + o.firstBad;
  for (const auto& e : o.report.errors) s += "\n  " + e;
  return s;
}

Kernel gemm(int64_t m, int64_t n, int64_t k, ScalarType dt, bool ta = false, bool tb = false, std::string epi = "") {
  GemmSpec s{.m = m, .n = n, .k = k, .dtype = dt, .transA = ta, .transB = tb, .epilogue = epi};
  if (!epi.empty()) s.shapes["bias"] = {n};
  return *buildGemm(s);
}

const char* kTargets[] = {"sm_80", "sm_90", "gfx942"};

}  // namespace

TEST(GpuEmulator, GemmEveryTargetDtypeAndOddShape) {
  for (const char* target : kTargets)
    for (ScalarType dt : {ScalarType::F16, ScalarType::BF16})
      for (const Kernel& k : {gemm(37, 61, 45, dt), gemm(129, 77, 200, dt, false, true, "relu(acc + bias)"),
                              gemm(33, 40, 17, dt, true, false)}) {
        Outcome o = emulate(k, target);
        EXPECT_TRUE(o.correct) << target << " " << k.name << ": " << describe(o);
        EXPECT_TRUE(o.report.ok) << target << " " << k.name << ": " << describe(o);
      }
}

// Both strategies and both copy paths: the tensor-core GEMM with a 3-stage cp.async pipeline
// (sm_80/sm_90), synchronous copies, and the FMA (simt) GEMM; f32 too.
TEST(GpuEmulator, GemmStrategiesAndPipelines) {
  Kernel k = gemm(96, 80, 130, ScalarType::F16);
  for (const char* target : {"sm_80", "sm_90"})
    for (const char* cfg : {"strategy=mma,BM=64,BN=64,BK=32,TM=32,TN=32,STAGES=3", "strategy=mma,STAGES=1",
                            "strategy=simt,BM=32,BN=32,BK=16,TM=2,TN=4,STAGES=1"}) {
      Outcome o = emulate(k, target, *Config::parseAssignments(cfg));
      EXPECT_TRUE(o.correct && o.report.ok) << target << " " << cfg << ": " << describe(o);
    }
  Outcome f = emulate(gemm(31, 47, 23, ScalarType::F32), "gfx942");
  EXPECT_TRUE(f.correct && f.report.ok) << describe(f);
}

TEST(GpuEmulator, ElementwiseEveryTargetAndDtype) {
  for (const char* target : kTargets)
    for (ScalarType dt : {ScalarType::F16, ScalarType::BF16, ScalarType::F32}) {
      Kernel k = *buildElementwise(
          {.expr = "y = gelu(x * s + b)", .shape = {7, 1029}, .shapes = {{"s", {1029}}, {"b", {1029}}}, .dtype = dt});
      Outcome o = emulate(k, target);
      EXPECT_TRUE(o.correct && o.report.ok) << target << " " << k.name << ": " << describe(o);
    }
}

TEST(GpuEmulator, AttentionEveryTargetDtypeCausalAndGqa) {
  for (const char* target : kTargets)
    for (ScalarType dt : {ScalarType::F16, ScalarType::BF16}) {
      Kernel k = *buildAttention(
          {.heads = 4, .heads_kv = 2, .seq_q = 77, .seq_kv = 130, .head_dim = 40, .causal = true, .dtype = dt});
      Outcome o = emulate(k, target);
      EXPECT_TRUE(o.correct && o.report.ok) << target << " " << k.name << ": " << describe(o);
    }
  Outcome d64 = emulate(*buildAttention({.heads = 2, .seq_q = 64, .head_dim = 64, .dtype = ScalarType::F16}), "sm_80",
                        *Config::parseAssignments("strategy=flash-simt,STAGES=1,BK=32,DSPLIT=2"));
  EXPECT_TRUE(d64.correct && d64.report.ok) << describe(d64);
}

// A seeded fiber order (every round shuffled) finds the same kernels race-free and correct.
TEST(GpuEmulator, ShuffledFiberOrderChangesNothing) {
  codegen::MappedEmuOptions o;
  o.run.seed = 12345;
  Outcome r = emulate(gemm(64, 64, 96, ScalarType::F16), "sm_80", *Config::parseAssignments("STAGES=3"), o);
  EXPECT_TRUE(r.correct && r.report.ok) << describe(r);
}

// ---- negative controls ----

TEST(GpuEmulatorControls, WrongMmaSyncAFragmentOrderIsAWrongResultNamingItsWriter) {
  codegen::MappedEmuOptions o;
  o.run.fault = emu::HwFault::MmaSwapA;
  Outcome r = emulate(gemm(64, 64, 64, ScalarType::F16), "sm_80", {}, o);
  EXPECT_TRUE(r.ran);
  EXPECT_FALSE(r.correct);
  EXPECT_NE(r.firstBad.find("written by block ("), std::string::npos) << r.firstBad;
  EXPECT_NE(r.firstBad.find("thread ("), std::string::npos) << r.firstBad;
  EXPECT_NE(r.firstBad.find("llvm.store"), std::string::npos) << r.firstBad;
  EXPECT_NE(r.firstBad.find("address 0x"), std::string::npos) << r.firstBad;
}

TEST(GpuEmulatorControls, WrongMfmaAccumulatorLayoutIsAWrongResultNamingItsWriter) {
  for (emu::HwFault f : {emu::HwFault::MfmaTransposeD, emu::HwFault::MfmaReverseK}) {
    codegen::MappedEmuOptions o;
    o.run.fault = f;
    Outcome r = emulate(gemm(64, 64, 64, ScalarType::BF16), "gfx942", {}, o);
    EXPECT_FALSE(r.correct);
    EXPECT_NE(r.firstBad.find("written by block ("), std::string::npos) << r.firstBad;
    EXPECT_NE(r.firstBad.find("address 0x"), std::string::npos) << r.firstBad;
  }
}

TEST(GpuEmulatorControls, RemovedBarrierIsARace) {
  for (const char* target : {"sm_80", "gfx942"}) {
    codegen::MappedEmuOptions o;
    // The second barrier of the kernel (between a tile's stores and the reads of it) removed.
    o.deviceHook = [](const std::string& text) {
      std::regex bar(R"(\n\s*(nvvm\.barrier0|rocdl\.barrier|rocdl\.s\.barrier)\n)");
      std::smatch m;
      std::string s = text;
      int seen = 0;
      for (auto it = std::sregex_iterator(s.begin(), s.end(), bar); it != std::sregex_iterator(); ++it)
        if (seen++ == 1) return s.substr(0, size_t(it->position(0))) + "\n" + s.substr(size_t(it->position(0) + it->length(0)));
      return s;
    };
    Outcome r = emulate(gemm(64, 64, 64, ScalarType::F32), target, *Config::parseAssignments("strategy=simt"), o);
    EXPECT_FALSE(r.report.ok) << target;
    // The first thread to run reads the tile before anyone wrote it (uninitialised), the next
    // writes what another already read: the race.
    std::string e;
    for (const auto& err : r.report.errors)
      if (e.empty() && err.find("race:") != std::string::npos) e = err;
    ASSERT_FALSE(e.empty()) << describe(r);
    EXPECT_NE(e.find("shared byte"), std::string::npos) << e;
    EXPECT_NE(e.find("thread ("), std::string::npos) << e;
    EXPECT_NE(e.find("llvm.load"), std::string::npos) << e;
    EXPECT_FALSE(r.ran);  // the launch fails: the candidate is a wrong result
  }
}

// The output store's index moved `by` f32 elements on.
std::function<std::string(const std::string&)> shiftOutputStore(int by) {
  return [by](const std::string& text) {
    std::regex store(R"(llvm\.store %(\w+), %(\w+) (\{[^}]*\} )?: vector<4xf32>, !llvm\.ptr(<1>)?\n)");
    std::smatch m;
    if (!std::regex_search(text, m, store)) return text;
    const std::string ptr = m[2].str();
    std::regex gep("%" + ptr + R"( = llvm\.getelementptr (%\w+)\[(%\w+)\] : \(!llvm\.ptr(<1>)?, i64\))");
    std::smatch g;
    if (!std::regex_search(text, g, gep)) return text;
    std::string repl = "%emu_one = llvm.mlir.constant(" + std::to_string(by) + " : i64) : i64\n    %emu_idx = llvm.add " + g[2].str() +
                       ", %emu_one : i64\n    %" + ptr + " = llvm.getelementptr " + g[1].str() + "[%emu_idx] : (!llvm.ptr" +
                       g[3].str() + ", i64)";
    return text.substr(0, size_t(g.position(0))) + repl + text.substr(size_t(g.position(0) + g.length(0)));
  };
}

// One vector store too far (the kernel stores vector<4xf32>: the last thread's lands past the end).
TEST(GpuEmulatorControls, OffByOneGlobalStoreIsOutOfBounds) {
  codegen::MappedEmuOptions o;
  o.deviceHook = shiftOutputStore(4);
  Kernel k = *buildElementwise({.expr = "y = x * 2", .shape = {64, 100}});
  for (const char* target : {"sm_80", "gfx942"}) {
    Outcome r = emulate(k, target, {}, o);
    EXPECT_FALSE(r.report.ok) << target;
    ASSERT_FALSE(r.report.errors.empty()) << target;
    const std::string& e = r.report.errors.front();
    EXPECT_NE(e.find("out-of-bounds global store"), std::string::npos) << e;
    EXPECT_NE(e.find("at 0x"), std::string::npos) << e;
    EXPECT_NE(e.find("B from the start of launch argument"), std::string::npos) << e;
    EXPECT_NE(e.find("thread ("), std::string::npos) << e;
    EXPECT_NE(e.find("llvm.store"), std::string::npos) << e;
  }
}

// One element off: the 16-byte vector store the kernel declares aligned is not (a fault on the GPU).
TEST(GpuEmulatorControls, MisalignedVectorStoreIsReported) {
  codegen::MappedEmuOptions o;
  o.deviceHook = shiftOutputStore(1);
  Outcome r = emulate(*buildElementwise({.expr = "y = x * 2", .shape = {64, 100}}), "sm_80", {}, o);
  ASSERT_FALSE(r.report.errors.empty());
  const std::string& e = r.report.errors.front();
  EXPECT_NE(e.find("misaligned store of 16 B at 0x"), std::string::npos) << e;
  EXPECT_NE(e.find("16-byte alignment"), std::string::npos) << e;
  EXPECT_NE(e.find("thread ("), std::string::npos) << e;
}

TEST(GpuEmulatorControls, MissingCpAsyncWaitIsReported) {
  codegen::MappedEmuOptions o;
  // The pipeline's waits one group short: tiles are read while their copies are in flight.
  o.deviceHook = [](const std::string& text) {
    std::string s = text;
    std::regex wait(R"(nvvm\.cp\.async\.wait\.group (\d+))");
    std::string out;
    auto begin = std::sregex_iterator(s.begin(), s.end(), wait);
    size_t last = 0;
    for (auto it = begin; it != std::sregex_iterator(); ++it) {
      out += s.substr(last, size_t(it->position(0)) - last);
      out += "nvvm.cp.async.wait.group " + std::to_string(std::stoi((*it)[1].str()) + 1);
      last = size_t(it->position(0) + it->length(0));
    }
    return out + s.substr(last);
  };
  Outcome r = emulate(gemm(128, 64, 256, ScalarType::F16), "sm_80",
                      *Config::parseAssignments("strategy=mma,BM=64,BN=64,BK=32,TM=32,TN=32,STAGES=3"), o);
  EXPECT_FALSE(r.report.ok);
  ASSERT_FALSE(r.report.errors.empty());
  const std::string& e = r.report.errors.front();
  EXPECT_NE(e.find("in flight"), std::string::npos) << e;
  EXPECT_NE(e.find("cp.async"), std::string::npos) << e;
  EXPECT_NE(e.find("offset"), std::string::npos) << e;
  EXPECT_NE(e.find("thread ("), std::string::npos) << e;
}

// The bank-conflict counter: the mma.sync GEMM's ldmatrix without the XOR swizzle conflicts as the
// H100 profiler measured (10.6 per ldmatrix at 128x256x16 x3), and with it not at all.
TEST(GpuEmulator, BankConflictsBeforeAndAfterTheSwizzle) {
  Kernel k = gemm(256, 512, 64, ScalarType::F16);
  const TargetDesc& t = testutil::gpuTarget("sm_90");
  auto cfg = testutil::gpuConfig(k, t, *Config::parseAssignments("BM=128,BN=256,BK=16,STAGES=3,TM=64,TN=64"));
  ASSERT_TRUE(cfg.ok()) << cfg.error().str();
  double perLdmatrix[2];
  for (bool swizzle : {false, true}) {
    auto bin = codegen::compileGpu(k, *cfg, t, {.wantBinary = false, .sharedSwizzle = swizzle});
    ASSERT_TRUE(bin.ok()) << bin.error().str();
    auto mk = codegen::compileMapped(*bin, t);
    ASSERT_TRUE(mk.ok()) << mk.error().str();
    auto report = std::make_shared<emu::Report>();
    auto runner = codegen::makeDeviceRunner(codegen::mappedEmulatedDevice(*mk, t.name, report));
    KernelIO io(k, 3);
    ASSERT_TRUE(runner->run(*bin, k, io.buffers(), 1).ok());
    ASSERT_TRUE(io.check()->ok);
    uint64_t requests = 0, conflicts = 0;
    for (const auto& [site, v] : report->counters.sharedBySite) requests += v[0], conflicts += v[2];
    ASSERT_GT(requests, 0u);
    perLdmatrix[swizzle] = double(conflicts) / double(requests);
  }
  EXPECT_NEAR(perLdmatrix[0], 10.6, 0.5);
  EXPECT_EQ(perLdmatrix[1], 0.0);
}

// ---- the fragment layouts against the documents, independently of the code generator ----

// mma.sync m16n8k16 (.f16/.bf16) as the PTX ISA states it per element a0..a7, b0..b3, c0..c3
// (groupID = lane / 4, threadID_in_group = lane % 4): register r holds elements 2r and 2r + 1.
TEST(GpuEmulatorLayouts, MmaSyncMatchesThePtxIsaFragments) {
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 8; ++i) {
      int row = (i < 2 || (i >= 4 && i < 6)) ? g : g + 8;
      int col = t * 2 + (i & 1) + (i >= 4 ? 8 : 0);
      auto [r, c] = emu::layout::mmaA16816(lane, i / 2);
      EXPECT_EQ(r, row) << "a" << i << " lane " << lane;
      EXPECT_EQ(c + (i & 1), col) << "a" << i << " lane " << lane;
    }
    for (int i = 0; i < 4; ++i) {
      int row = t * 2 + (i & 1) + (i >= 2 ? 8 : 0);
      auto [k, n] = emu::layout::mmaB16816(lane, i / 2);
      EXPECT_EQ(k + (i & 1), row) << "b" << i;
      EXPECT_EQ(n, g) << "b" << i;
    }
    for (int i = 0; i < 4; ++i) {
      auto [r, c] = emu::layout::mmaC16816(lane, i);
      EXPECT_EQ(r, i < 2 ? g : g + 8) << "c" << i;
      EXPECT_EQ(c, t * 2 + (i & 1)) << "c" << i;
    }
  }
}

namespace {

// One calculator table: cell (row, col) -> (register, lane, upper half).
struct CalcCell {
  int reg, lane, half;
};
std::map<std::pair<int, int>, CalcCell> readCalculator(const std::string& file) {
  std::map<std::pair<int, int>, CalcCell> cells;
  std::ifstream in(std::string(TESSERA_GPU_TEST_DATA) + "/amd_matrix_calculator/" + file);
  std::string line;
  std::regex cell(R"(v(\d+)\{(\d+)\}(\.\[31:16\])?)");
  while (std::getline(in, line)) {
    if (line.empty() || !std::isdigit(static_cast<unsigned char>(line[0]))) continue;
    std::stringstream ss(line);
    std::string field;
    std::getline(ss, field, ',');
    const int row = std::stoi(field);
    for (int col = 0; std::getline(ss, field, ','); ++col) {
      std::smatch m;
      if (std::regex_search(field, m, cell))
        cells[{row, col}] = {std::stoi(m[1].str()), std::stoi(m[2].str()), m[3].matched ? 1 : 0};
    }
  }
  return cells;
}

}  // namespace

// Every element of A, B and D of v_mfma_f32_{16x16x16,32x32x8}_{f16,bf16} where the calculator
// puts it; a layout written from the same wrong memory as the kernels would fail here.
TEST(GpuEmulatorLayouts, MfmaMatchesTheCalculatorTables) {
  for (const char* dt : {"f16", "bf16"})
    for (int mn : {16, 32}) {
      const std::string stem = std::string("v_mfma_f32_") + (mn == 16 ? "16x16x16_" : "32x32x8_") + dt;
      auto A = readCalculator(stem + "_A.csv"), B = readCalculator(stem + "_B.csv"), D = readCalculator(stem + "_D.csv");
      const int K = mn == 16 ? 16 : 8;
      ASSERT_EQ(A.size(), size_t(mn * K)) << stem;
      ASSERT_EQ(B.size(), size_t(K * mn)) << stem;
      ASSERT_EQ(D.size(), size_t(mn * mn)) << stem;
      for (const auto& [rc, c] : A)
        EXPECT_EQ(emu::layout::mfmaA(mn, c.lane, 2 * c.reg + c.half), rc) << stem << " A lane " << c.lane;
      for (const auto& [rc, c] : B)
        EXPECT_EQ(emu::layout::mfmaB(mn, c.lane, 2 * c.reg + c.half), rc) << stem << " B lane " << c.lane;
      for (const auto& [rc, c] : D) EXPECT_EQ(emu::layout::mfmaD(mn, c.lane, c.reg), rc) << stem << " D lane " << c.lane;
    }
}

// ---- cross-lane operations, hand-written at the cut point, against their ISA semantics ----

namespace {

// Runs a one-kernel device module `text` (kernel @k taking one i32 output buffer) on `block`
// threads of one block; returns the buffer.
std::vector<int32_t> runModule(const std::string& text, const std::string& target, int block, int perThread) {
  codegen::GpuBinary bin;
  bin.mlirDevice = text;
  bin.launch.kernel = "k";
  bin.launch.block = {block, 1, 1};
  bin.launch.kernelParams = {0};
  auto mk = codegen::compileMapped(bin, testutil::gpuTarget(target));
  EXPECT_TRUE(mk.ok()) << (mk.ok() ? "" : mk.error().str());
  std::vector<int32_t> out(size_t(block * perThread), -7);
  if (!mk.ok()) return out;
  emu::Report r = (*mk)->run({reinterpret_cast<uint64_t>(out.data())}, {{out.data(), out.size() * 4, "out"}});
  EXPECT_TRUE(r.ok) << (r.errors.empty() ? "" : r.errors.front());
  return out;
}

// Stores %v<j> (j < n) at out[tid * n + j].
std::string storesOf(int n, const char* tid) {
  std::string s = "    %n = llvm.mlir.constant(" + std::to_string(n) + " : i32) : i32\n    %base = llvm.mul " + tid + ", %n : i32\n";
  for (int j = 0; j < n; ++j) {
    s += "    %j" + std::to_string(j) + " = llvm.mlir.constant(" + std::to_string(j) + " : i32) : i32\n";
    s += "    %i" + std::to_string(j) + " = llvm.add %base, %j" + std::to_string(j) + " : i32\n";
    s += "    %p" + std::to_string(j) + " = llvm.getelementptr %out[%i" + std::to_string(j) + "] : (!llvm.ptr, i32) -> !llvm.ptr, i32\n";
    s += "    llvm.store %v" + std::to_string(j) + ", %p" + std::to_string(j) + " : i32, !llvm.ptr\n";
  }
  return s;
}

}  // namespace

TEST(GpuEmulatorLanes, ShflAndVoteFollowThePtxIsa) {
  std::string text = R"(gpu.module @m {
  llvm.func @k(%out: !llvm.ptr) attributes {gpu.kernel, nvvm.kernel} {
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %mask = llvm.mlir.constant(-1 : i32) : i32
    %c0 = llvm.mlir.constant(0 : i32) : i32
    %c1 = llvm.mlir.constant(1 : i32) : i32
    %c2 = llvm.mlir.constant(2 : i32) : i32
    %c3 = llvm.mlir.constant(3 : i32) : i32
    %c5 = llvm.mlir.constant(5 : i32) : i32
    %c31 = llvm.mlir.constant(31 : i32) : i32
    %v0 = nvvm.shfl.sync bfly %mask, %tid, %c1, %c31 : i32 -> i32
    %v1 = nvvm.shfl.sync up %mask, %tid, %c1, %c0 : i32 -> i32
    %v2 = nvvm.shfl.sync down %mask, %tid, %c2, %c31 : i32 -> i32
    %v3 = nvvm.shfl.sync idx %mask, %tid, %c5, %c31 : i32 -> i32
    %lane = nvvm.read.ptx.sreg.laneid : i32
    %pr = llvm.icmp "slt" %lane, %c3 : i32
    %v4 = nvvm.vote.sync ballot %mask, %pr -> i32
)" + storesOf(5, "%tid") + R"(    llvm.return
  }
})";
  std::vector<int32_t> out = runModule(text, "sm_80", 64, 5);
  for (int t = 0; t < 64; ++t) {
    const int lane = t % 32, base = t - lane;
    EXPECT_EQ(out[size_t(t * 5 + 0)], t ^ 1) << t;                          // bfly 1
    EXPECT_EQ(out[size_t(t * 5 + 1)], lane >= 1 ? t - 1 : t) << t;          // up 1 (lane 0 keeps its own)
    EXPECT_EQ(out[size_t(t * 5 + 2)], lane + 2 <= 31 ? t + 2 : t) << t;     // down 2
    EXPECT_EQ(out[size_t(t * 5 + 3)], base + 5) << t;                       // idx 5
    EXPECT_EQ(out[size_t(t * 5 + 4)], 7) << t;                              // ballot(lane < 3)
  }
}

TEST(GpuEmulatorLanes, Wave64PermutesFollowTheCdna3Isa) {
  std::string text = R"(gpu.module @m {
  llvm.func @k(%out: !llvm.ptr) attributes {gpu.kernel, rocdl.kernel} {
    %tid = rocdl.workitem.id.x : i32
    %c1 = llvm.mlir.constant(1 : i32) : i32
    %c4 = llvm.mlir.constant(4 : i32) : i32
    %c100 = llvm.mlir.constant(100 : i32) : i32
    %m1 = llvm.mlir.constant(-1 : i32) : i32
    %c0 = llvm.mlir.constant(0 : i32) : i32
    %next = llvm.add %tid, %c1 : i32
    %addr = llvm.mul %next, %c4 : i32
    %v0 = rocdl.ds_bpermute %addr, %tid : (i32, i32) -> i32
    %sw = llvm.mlir.constant(1055 : i32) : i32
    %v1 = rocdl.ds_swizzle %tid, %sw : (i32, i32) -> i32
    %old = llvm.add %tid, %c100 : i32
    %v2 = rocdl.update.dpp %old, %tid with 273, 15, 15, false : i32
    %v3 = rocdl.readlane %tid, %c4 : (i32, i32) -> i32
    %v4 = rocdl.readfirstlane %tid : i32
    %lo = rocdl.mbcnt.lo %m1, %c0 : (i32, i32) -> i32
    %v5 = rocdl.mbcnt.hi %m1, %lo : (i32, i32) -> i32
)" + storesOf(6, "%tid") + R"(    llvm.return
  }
})";
  std::vector<int32_t> out = runModule(text, "gfx942", 64, 6);
  for (int t = 0; t < 64; ++t) {
    EXPECT_EQ(out[size_t(t * 6 + 0)], (t + 1) % 64) << t;                    // bpermute: lane (addr / 4)
    EXPECT_EQ(out[size_t(t * 6 + 1)], t ^ 1) << t;                           // swizzle and 0x1f, xor 1
    EXPECT_EQ(out[size_t(t * 6 + 2)], t % 16 >= 1 ? t - 1 : t + 100) << t;   // DPP row_shr:1, old kept at row start
    EXPECT_EQ(out[size_t(t * 6 + 3)], 4) << t;
    EXPECT_EQ(out[size_t(t * 6 + 4)], 0) << t;
    EXPECT_EQ(out[size_t(t * 6 + 5)], t) << t;                               // mbcnt lo + hi: the lane id
  }
}

// A measurement flushes L2 after a launch's arguments are uploaded, right before the launch: the
// device is still writing the flush when the launch arrives, so the start event does not fire on an
// idle device and the time excludes the host's launch latency (bench/gpu/torch_anchor.py times
// torch the same way). The sm_90a GEMM uploads its tensor maps before every launch; before this
// order the flush came first and an upload sat between it and the launch.
TEST(GpuRunner, TheFlushIsQueuedAfterTheUploadsRightBeforeEachTimedLaunch) {
  const TargetDesc& t = testutil::gpuTarget("sm_90a");
  Kernel k = gemm(128, 128, 64, ScalarType::F16);
  auto cfg = testutil::gpuConfig(k, t);
  ASSERT_TRUE(cfg.ok()) << cfg.error().str();
  auto bin = codegen::compileGpu(k, *cfg, t, {.wantBinary = false});
  ASSERT_TRUE(bin.ok()) << bin.error().str();
  auto mk = codegen::compileMapped(*bin, t, {});
  ASSERT_TRUE(mk.ok()) << mk.error().str();
  const size_t flushBytes = 12345;  // no argument of this kernel has this size
  auto calls = std::make_shared<std::vector<std::string>>();
  codegen::DeviceApi api = codegen::mappedEmulatedDevice(*mk, t.name, std::make_shared<emu::Report>());
  auto upload = api.upload;
  auto zero = api.zero;
  auto launch = api.launch;
  api.upload = [=](uint64_t d, const void* s, size_t n) {
    calls->push_back("upload");
    return upload(d, s, n);
  };
  api.zero = [=](uint64_t d, size_t n) {
    calls->push_back(n == flushBytes ? "flush" : "zero");
    return zero(d, n);
  };
  api.launch = [=](void* fn, const codegen::GpuLaunch& l, const std::vector<uint64_t>& args) {
    calls->push_back("launch");
    return launch(fn, l, args);
  };
  auto runner = codegen::makeDeviceRunner(std::move(api));
  KernelIO io(k, 3);
  MeasureOptions o;
  o.minTimeSec = 0;
  o.minRuns = o.maxRuns = 3;
  o.warmup = 1;
  auto samples = runner->measure(*bin, k, io.buffers(), o, int64_t(flushBytes));
  ASSERT_TRUE(samples.ok()) << samples.error().str();
  EXPECT_EQ(samples->size(), 3u);
  std::vector<size_t> launches;
  for (size_t i = 0; i < calls->size(); ++i)
    if ((*calls)[i] == "launch") launches.push_back(i);
  ASSERT_EQ(launches.size(), 5u);  // the checked run, the warm-up, three samples
  for (size_t j = 1; j < launches.size(); ++j) {
    EXPECT_EQ((*calls)[launches[j] - 1], "flush") << "launch " << j;
    // The tensor maps are uploaded for every launch, before the flush.
    EXPECT_NE(std::find(calls->begin() + std::ptrdiff_t(launches[j - 1]), calls->begin() + std::ptrdiff_t(launches[j]), "upload"),
              calls->begin() + std::ptrdiff_t(launches[j]))
        << "launch " << j;
  }
  EXPECT_EQ(std::count(calls->begin(), calls->begin() + std::ptrdiff_t(launches[0]), "flush"), 0);  // the checked run is not timed
}
