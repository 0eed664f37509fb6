// Owns the GPU test helpers.
#include "gpu_check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <regex>

#include "emulator/gpu_emu.h"
#include "codegen/gpu_runner.h"
#include "ir/builders.h"
#include "ir/reference.h"
#include "targets/kernel_io.h"
#include "search/space.h"

namespace tessera::testutil {

const TargetDesc& gpuTarget(const std::string& name) {
  static std::map<std::string, TargetDesc> cache;
  auto it = cache.find(name);
  if (it == cache.end()) it = cache.emplace(name, *getTarget(name)).first;
  return it->second;
}

Expected<ir::Config> gpuConfig(const ir::Kernel& k, const TargetDesc& t, const ir::Config& overrides) {
  TESSERA_ASSIGN(ir::Space space, search::makeSpace(k, t));
  TESSERA_ASSIGN(ir::Config cfg, space.complete(overrides));
  if (auto why = space.check(cfg)) return makeError(ErrorCode::InvalidConfig, *why + " [config " + cfg.str() + "]");
  return cfg;
}

EmuCheck checkEmulated(const ir::Kernel& k, const TargetDesc& t, const ir::Config& overrides, uint64_t seed,
                       const codegen::EmulateOptions& o) {
  EmuCheck r;
  auto cfg = gpuConfig(k, t, overrides);
  if (!cfg.ok()) { r.error = cfg.error().str(); return r; }
  auto exe = codegen::compileEmulated(k, *cfg, t, o);
  // A lane-level strategy (tensor-core attention) has no pre-mapping form: its mapped kernel is
  // what runs, unless the caller meant to break the pre-mapping IR (a negative control).
  if (!exe.ok() && exe.error().code == ErrorCode::Unsupported && !o.preHook) return checkMappedEmulated(k, t, *cfg, seed);
  if (!exe.ok()) { r.error = exe.error().str() + " [config " + cfg->str() + "]"; return r; }
  return runAndCompare(k, **exe, *cfg, seed);
}

EmuCheck checkMappedEmulated(const ir::Kernel& k, const TargetDesc& t, const ir::Config& cfg, uint64_t seed) {
  EmuCheck r;
  auto fail = [&](const std::string& why) {
    r.error = why + " [config " + cfg.str() + "]";
    return r;
  };
  auto bin = codegen::compileGpu(k, cfg, t, {.wantBinary = false});
  if (!bin.ok()) return fail(bin.error().str());
  auto mk = codegen::compileMapped(*bin, t);
  if (!mk.ok()) return fail(mk.error().str());
  r.compiled = true;
  auto report = std::make_shared<emu::Report>();
  auto runner = codegen::makeDeviceRunner(codegen::mappedEmulatedDevice(*mk, t.name, report));
  KernelIO io(k, seed);
  io.poisonOutputs();
  auto ran = runner->run(*bin, k, io.buffers(), 1);
  if (!ran.ok()) return fail("mapped emulation: " + ran.error().message);
  auto cmp = io.check();
  if (!cmp.ok()) return fail(cmp.error().str());
  r.maxRelErr = cmp->maxRelErr;
  r.correct = cmp->ok && report->ok;
  if (!cmp->ok) return fail(cmp->firstBad + " (max rel err " + std::to_string(cmp->maxRelErr) + ")");
  if (!report->ok) return fail("mapped emulation: " + (report->errors.empty() ? std::string("failed") : report->errors.front()));
  return r;
}

Expected<codegen::GpuBinary> compileFor(const ir::Kernel& k, const TargetDesc& t, const ir::Config& overrides) {
  TESSERA_ASSIGN(ir::Config cfg, gpuConfig(k, t, overrides));
  return codegen::compileGpu(k, cfg, t);
}

std::string breakNthForall(const std::string& pre, int nth, int dims) {
  std::regex re(dims == 1 ? R"(scf\.forall \(%[\w]+\) in \((\d+)\))" : R"(scf\.forall \(%[\w]+, %[\w]+\) in \((\d+), )");
  int i = 0;
  for (auto it = std::sregex_iterator(pre.begin(), pre.end(), re); it != std::sregex_iterator(); ++it, ++i) {
    if (i != nth) continue;
    const auto& m = *it;
    int64_t n = std::stoll(m[1].str());
    size_t pos = size_t(m.position(1));
    return pre.substr(0, pos) + std::to_string(std::max<int64_t>(1, n / 2)) + pre.substr(pos + size_t(m.length(1)));
  }
  return pre;
}

std::vector<ir::Config> knobExtremes(const ir::Space& s) {
  std::vector<ir::Config> out;
  // From each end of a knob's domain, the first value the space accepts with the others at their
  // defaults (a domain's far end is often illegal for one shape or target, its neighbour is not).
  auto legal = [&](const ir::Config& c) { return !s.check(c); };
  for (const auto& knob : s.knobs)
    for (bool fromFront : {true, false})
      for (size_t i = 0; i < knob.domain.size(); ++i) {
        const auto& v = knob.domain[fromFront ? i : knob.domain.size() - 1 - i];
        ir::Config c = s.defaults();
        if (c.values[knob.name] == v) break;  // reached the default: nothing new on this side
        c.set(knob.name, v);
        if (!legal(c)) continue;
        if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
        break;
      }
  return out;
}

int countOccurrences(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + needle.size())) ++n;
  return n;
}

Expected<emu::Report> runMapped(const ir::Kernel& k, const ir::Config& cfg, const TargetDesc& t, KernelIO& io,
                                const codegen::MappedEmuOptions& o) {
  TESSERA_ASSIGN(codegen::GpuBinary bin, codegen::compileGpu(k, cfg, t, {.wantBinary = false}));
  TESSERA_ASSIGN(auto mk, codegen::compileMapped(bin, t, o));
  auto report = std::make_shared<emu::Report>();
  auto runner = codegen::makeDeviceRunner(codegen::mappedEmulatedDevice(mk, t.name, report));
  auto ran = runner->run(bin, k, io.buffers(), 1);
  (void)ran;  // a launch the emulation faults fails; the report says why
  return *report;
}

Expected<ShapeGeneric> compileShapeGeneric(const ir::Kernel& maxK, const TargetDesc& t, const std::string& overrides,
                                           codegen::RuntimeDims rt, bool binary) {
  TESSERA_ASSIGN(ir::Config ov, ir::Config::parseAssignments(overrides));
  TESSERA_ASSIGN(ir::Config c, gpuConfig(maxK, t, ov));
  ShapeGeneric g;
  TESSERA_ASSIGN(g.bin, codegen::compileGpu(maxK, c, t, {.wantBinary = binary, .runtime = rt}));
  TESSERA_ASSIGN(g.mk, codegen::compileMapped(g.bin, t));
  return g;
}

std::string runAtSizes(const ShapeGeneric& g, const TargetDesc& t, const ir::Kernel& actual, int64_t m, int64_t batch,
                       int64_t spareRows) {
  KernelIO io(actual, 11);
  io.poisonOutputs();
  const size_t nIn = actual.inputs().size();
  std::vector<void*> bufs(io.buffers(), io.buffers() + io.count());
  const ir::TensorDecl& out = *actual.outputs()[0];
  const size_t outBytes = size_t(out.numel()) * size_t(ir::byteSize(out.dtype));
  const size_t rowBytes = out.shape.empty() ? outBytes : outBytes / size_t(out.shape[0]);
  std::vector<unsigned char> big(outBytes + size_t(spareRows) * rowBytes, 0xA5);
  std::memcpy(big.data(), bufs[nIn], outBytes);
  bufs[nIn] = big.data();
  auto report = std::make_shared<emu::Report>();
  auto runner = codegen::makeDeviceRunner(codegen::mappedEmulatedDevice(g.mk, t.name, report));
  const int64_t sizes[codegen::kRuntimeSizeCount] = {m, batch, 0};
  auto ran = runner->run(g.bin, actual, bufs.data(), 1, sizes);
  if (!ran.ok()) return "run: " + ran.error().str();
  if (!report->ok) return "emulation: " + (report->errors.empty() ? std::string("failed") : report->errors.front());
  for (size_t i = outBytes; i < big.size(); ++i)
    if (big[i] != 0xA5) return "written past the last row: byte " + std::to_string(i - outBytes) + " after it";
  std::memcpy(io.buffers()[nIn], big.data(), outBytes);
  auto cmp = io.check();
  if (!cmp.ok()) return cmp.error().str();
  return cmp->ok ? "" : cmp->firstBad;
}

ir::Kernel attentionKernel(int64_t h, int64_t hkv, int64_t sq, int64_t skv, int64_t d, bool causal, ir::ScalarType t,
                           int64_t b) {
  ir::AttentionSpec s;
  s.batch = b; s.heads = h; s.heads_kv = hkv; s.seq_q = sq; s.seq_kv = skv; s.head_dim = d; s.causal = causal; s.dtype = t;
  auto k = ir::buildAttention(s);
  EXPECT_TRUE(k.ok()) << (k.ok() ? "" : k.error().str());
  return *k;
}

std::vector<WgmmaCase> wgmmaDeviceCases() {
  auto spec = [](int64_t batch, int64_t m, int64_t n, int64_t k, ir::ScalarType dt, bool ta, bool tb, const std::string& epi) {
    ir::GemmSpec g;
    g.batch = batch; g.m = m; g.n = n; g.k = k; g.dtype = dt; g.transA = ta; g.transB = tb; g.epilogue = epi;
    if (!epi.empty()) g.shapes["bias"] = {n};
    return *ir::buildGemm(g);
  };
  auto cfg = [](std::initializer_list<std::pair<const char*, int64_t>> kv) {
    ir::Config c;
    c.set("strategy", std::string("wgmma"));
    for (auto& [k, v] : kv) c.set(k, v);
    return c;
  };
  using ir::ScalarType;
  return {
      {spec(0, 1000, 1000, 1000, ScalarType::F16, false, false, ""), cfg({})},
      {spec(0, 512, 384, 320, ScalarType::F16, false, false, ""), cfg({})},
      {spec(0, 200, 136, 70, ScalarType::F16, false, false, "relu(acc + bias)"), cfg({})},
      {spec(0, 130, 260, 200, ScalarType::BF16, true, true, "gelu(acc + bias)"), cfg({})},
      {spec(4, 256, 256, 256, ScalarType::BF16, false, false, ""), cfg({})},
      {spec(0, 256, 256, 4096, ScalarType::F16, false, false, ""), cfg({{"SPLITK", 4}})},
      {spec(0, 300, 300, 640, ScalarType::F16, false, false, ""), cfg({{"BM", 64}, {"BN", 128}, {"TM", 64}, {"TN", 128}, {"STAGES", 3}})},
      {spec(0, 300, 300, 640, ScalarType::BF16, false, false, ""), cfg({{"BM", 256}, {"BN", 128}, {"TM", 128}, {"TN", 128}, {"STAGES", 4}})},
      // 700 = 3 x 233.3: split-K's last slice is short (SPLITK's domain is {1, 2, 4, 8}).
      {spec(2, 192, 320, 700, ScalarType::F16, false, true, ""), cfg({{"BM", 128}, {"BN", 128}, {"TM", 64}, {"TN", 128}, {"STAGES", 2}, {"SPLITK", 4}})},
      // Persistent: 256 items (4 tiles x 64 batches) over at most one block per SM.
      {spec(64, 256, 256, 256, ScalarType::F16, false, false, ""),
       cfg({{"BM", 128}, {"BN", 128}, {"TM", 64}, {"TN", 128}, {"STAGES", 4}, {"PERSIST", 1}})},
  };
}

std::vector<WgmmaCase> flashWgmmaDeviceCases() {
  auto cfg = [](const std::string& pipe, int64_t bq, int64_t bk, int64_t stages) {
    ir::Config c;
    c.set("strategy", std::string("flash-wgmma"));
    c.set("PIPE", pipe);
    c.set("DSPLIT", int64_t(1));
    c.set("BQ", bq);
    c.set("BK", bk);
    c.set("STAGES", stages);
    return c;
  };
  using ir::ScalarType;
  return {
      // 48 KB of dynamic shared memory and 1 KB static: the launch must opt in (an H200 refused it).
      {attentionKernel(4, 4, 300, 300, 64, false, ScalarType::F16), cfg("fa3", 128, 64, 2)},
      {attentionKernel(4, 4, 333, 333, 128, true, ScalarType::F16), cfg("fa3", 128, 128, 2)},
      {attentionKernel(8, 2, 257, 257, 128, true, ScalarType::BF16), cfg("fa3", 128, 64, 2)},  // GQA
      {attentionKernel(2, 2, 200, 330, 64, false, ScalarType::F16, 2), cfg("fa3", 128, 128, 2)},
      {attentionKernel(4, 4, 190, 190, 128, false, ScalarType::F16), cfg("fa2", 128, 64, 2)},
      // FlashAttention-3's intra-warpgroup overlap and ping-pong (never yet run on a device).
      {attentionKernel(4, 4, 333, 333, 128, true, ScalarType::F16), cfg("fa3-pingpong", 128, 128, 2)},
      {attentionKernel(8, 2, 257, 257, 128, true, ScalarType::BF16), cfg("fa3-overlap", 128, 64, 3)},  // GQA
      {attentionKernel(2, 2, 200, 330, 64, false, ScalarType::F16), cfg("fa3-pingpong", 128, 128, 2)},
  };
}

std::vector<WgmmaCase> laneMmaDeviceCases() {
  auto spec = [](int64_t batch, int64_t m, int64_t n, int64_t k, ir::ScalarType dt, bool ta, bool tb, const std::string& epi) {
    ir::GemmSpec g;
    g.batch = batch; g.m = m; g.n = n; g.k = k; g.dtype = dt; g.transA = ta; g.transB = tb; g.epilogue = epi;
    if (!epi.empty()) g.shapes["bias"] = {n};
    return *ir::buildGemm(g);
  };
  auto cfg = [](std::initializer_list<std::pair<const char*, int64_t>> kv) {
    ir::Config c;
    c.set("strategy", std::string("mma-lane"));
    c.set("VEC", int64_t(8));
    for (auto& [k, v] : kv) c.set(k, v);
    return c;
  };
  using ir::ScalarType;
  return {
      {spec(0, 200, 136, 70, ScalarType::BF16, false, false, "relu(acc + bias)"), cfg({})},
      {spec(0, 130, 260, 200, ScalarType::BF16, true, true, "gelu(acc + bias)"), cfg({})},
      {spec(0, 17, 33, 65, ScalarType::F16, false, false, ""), cfg({})},
      {spec(3, 40, 24, 72, ScalarType::BF16, true, true, ""), cfg({})},
      {spec(4, 128, 128, 256, ScalarType::F16, false, false, ""), cfg({{"BM", 64}, {"BN", 64}, {"BK", 32}, {"TM", 32}, {"TN", 32}, {"STAGES", 4}})},
      {spec(0, 256, 256, 128, ScalarType::BF16, false, true, ""), cfg({{"BM", 128}, {"BN", 128}, {"BK", 32}, {"TM", 64}, {"TN", 64}, {"STAGES", 2}})},
  };
}

}  // namespace tessera::testutil
