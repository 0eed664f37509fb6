// Tests GPUs by name (targets/gpu_skus.h): the built-in table parses and every row is complete and
// consistent with its chip, names resolve as users type them, each chip's default product is the
// per-architecture row, and facts files with missing, unknown or absurd fields are one clear error.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <set>

#include "targets/gpu_skus.h"
#include "targets/gpu_targets.h"

namespace tessera {
namespace {

const TargetDesc* chip(const std::string& arch) {
  for (const auto& t : gpuTargets())
    if (t.name == arch) return &t;
  return nullptr;
}

TEST(GpuSkus, EveryRowIsCompleteWithASourceForEveryFigure) {
  const auto rows = gpuSkus();
  EXPECT_GE(rows.size(), 40u);
  std::set<std::string> names, archs, segments;
  const auto& refs = gpuSkuReferences();
  for (const auto& s : rows) {
    SCOPED_TRACE(s.name);
    EXPECT_TRUE(names.insert(s.name).second) << "listed twice";
    ASSERT_NE(chip(s.arch), nullptr) << s.arch;
    archs.insert(s.arch);
    segments.insert(s.segment);
    EXPECT_GT(s.units, 0);
    EXPECT_GT(s.clockGHz, 0.5);
    EXPECT_GT(s.fp32Gflops, 0);
    EXPECT_GE(s.fp16Gflops, s.fp32Gflops);
    EXPECT_GE(s.bf16Gflops, 0);
    EXPECT_GT(s.bandwidthGBs, 0);
    EXPECT_GT(s.l2Bytes, 0);
    EXPECT_GT(s.smemPerUnit, 0);
    EXPECT_GT(s.regsPerUnit, 0);
    EXPECT_TRUE(s.warpSize == 32 || s.warpSize == 64);
    for (const auto& [field, unit] : gpuSkuFields()) {
      auto it = s.sources.find(field);
      ASSERT_NE(it, s.sources.end()) << field;
      EXPECT_FALSE(it->second.empty()) << field;
      // Every abbreviation a source uses ("[ADA-WP]", "[RDNA3-ISA, LLVM-AMDGPU]") is in the reference list.
      const std::string& src = it->second;
      for (size_t at = src.find('['); at != std::string::npos; at = src.find_first_of("[,", at + 1)) {
        size_t b = src.find_first_not_of(" [,", at), e = src.find_first_not_of(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-", b);
        if (b == std::string::npos || b == e) break;
        if (src[at] == ',' && src.rfind('[', at) < src.rfind(']', at) + 1) continue;  // a comma outside brackets
        EXPECT_TRUE(refs.count("[" + src.substr(b, e - b) + "]")) << field << ": " << src;
      }
    }
    // An SM/CU does the same FP32 work per clock in every product of its chip (the datasheets'
    // figures are consistent with the unit counts and clocks given).
    const TargetDesc& c = *chip(s.arch);
    const double perClock = s.fp32Gflops / (s.units * s.clockGHz);
    const double chipPerClock = c.peakGflopsF32 / (c.units * c.clockGHz);
    EXPECT_NEAR(perClock / chipPerClock, 1.0, 0.05) << perClock << " vs " << chipPerClock;
    if (c.peakGflopsBF16 <= 0) EXPECT_EQ(s.bf16Gflops, 0);
  }
  // The families the issue names are all there.
  for (const char* a : {"sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "gfx90a", "gfx942", "gfx1030", "gfx1100"})
    EXPECT_TRUE(archs.count(a)) << a;
  for (const char* seg : {"data centre", "workstation", "desktop", "laptop"}) EXPECT_TRUE(segments.count(seg)) << seg;
}

TEST(GpuSkus, EachChipsDefaultProductIsItsTableRow) {
  for (const auto& t : gpuTargets()) {
    if (t.name == "sm_90a") continue;  // sm_90's silicon
    auto d = defaultGpuOf(t.name);
    ASSERT_TRUE(d.has_value()) << t.name << ": no product named " << t.model;
    auto fromSku = targetOfGpu(*d);
    ASSERT_TRUE(fromSku.ok());
    EXPECT_EQ(fromSku->units, t.units) << t.name;
    EXPECT_EQ(fromSku->clockGHz, t.clockGHz) << t.name;
    EXPECT_EQ(fromSku->peakGflopsF32, t.peakGflopsF32) << t.name;
    EXPECT_EQ(fromSku->peakGflopsF16, t.peakGflopsF16) << t.name;
    EXPECT_EQ(fromSku->peakGflopsBF16, t.peakGflopsBF16) << t.name;
    EXPECT_EQ(fromSku->memBandwidthGBs, t.memBandwidthGBs) << t.name;
    EXPECT_EQ(fromSku->l2Bytes_gpu, t.l2Bytes_gpu) << t.name;
  }
}

TEST(GpuSkus, NamesResolveAsUsersAndDriversWriteThem) {
  EXPECT_EQ(findGpu("RTX 4090")->name, "NVIDIA GeForce RTX 4090");
  EXPECT_EQ(findGpu("nvidia geforce rtx-4090")->name, "NVIDIA GeForce RTX 4090");
  EXPECT_EQ(findGpu("4090 laptop")->name, "NVIDIA GeForce RTX 4090 Laptop GPU");
  EXPECT_EQ(findGpu("L4")->name, "NVIDIA L4");
  EXPECT_EQ(findGpu("Tesla T4")->name, "NVIDIA T4");
  EXPECT_EQ(findGpu("w7800")->arch, "gfx1100");
  // Driver names: the Kernel Tuner files' device_name and CUDA's names for H100 parts.
  EXPECT_EQ(gpuForDeviceName("NVIDIA GeForce RTX 3060 Laptop GPU")->units, 30);
  EXPECT_EQ(gpuForDeviceName("NVIDIA H100 80GB HBM3")->units, 132);
  EXPECT_EQ(gpuForDeviceName("NVIDIA H100 PCIe")->units, 114);
  EXPECT_EQ(gpuForDeviceName("NVIDIA A100-PCIE-40GB")->arch, "sm_80");
  EXPECT_FALSE(gpuForDeviceName("NVIDIA Quantum Z9000").has_value());
  // Several products, or none: one line that says which.
  auto several = findGpu("MI300");
  ASSERT_FALSE(several.ok());
  EXPECT_EQ(several.error().code, ErrorCode::InvalidArgument);
  EXPECT_NE(several.error().message.find("MI300X"), std::string::npos) << several.error().message;
  auto none = findGpu("Voodoo 5");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, ErrorCode::NotFound);
  EXPECT_NE(none.error().message.find("tessera gpus"), std::string::npos);
  // Targets by GPU name: the chip's description with the product's figures.
  auto l4 = getTarget("L4"), r4090 = getTarget("RTX 4090");
  ASSERT_TRUE(l4.ok() && r4090.ok());
  EXPECT_EQ(l4->name, "sm_89");
  EXPECT_EQ(l4->units, 58);
  EXPECT_EQ(r4090->units, 128);
  EXPECT_EQ(l4->smemPerSM, r4090->smemPerSM);
  EXPECT_NE(l4->keyString(), r4090->keyString());
  // sm_90a takes sm_90's products; another chip's product is refused.
  auto pcieA = targetOfGpu("H100 PCIe", *chip("sm_90a"));
  ASSERT_TRUE(pcieA.ok());
  EXPECT_EQ(pcieA->name, "sm_90a");
  EXPECT_EQ(pcieA->units, 114);
  EXPECT_NE(pcieA->findMma("f16", "wgmma"), nullptr);
  EXPECT_FALSE(targetOfGpu("L4", *chip("sm_80")).ok());
  // A Hopper product named alone compiles for sm_90a (wgmma: the only path past mma.sync's half of
  // its tensor peak); with its portable chip named, sm_90 it stays.
  for (const char* name : {"H100", "H200", "H100 PCIe"}) {
    auto byName = getTarget(name);
    ASSERT_TRUE(byName.ok()) << name;
    EXPECT_EQ(byName->name, "sm_90a") << name;
    EXPECT_NE(byName->findMma("bf16", "wgmma"), nullptr) << name;
  }
  auto portable = targetOfGpu("H200", *chip("sm_90"));
  ASSERT_TRUE(portable.ok());
  EXPECT_EQ(portable->name, "sm_90");
  EXPECT_EQ(portable->findMma("f16", "wgmma"), nullptr);
  EXPECT_EQ(getTarget("A100")->name, "sm_80");  // other chips: their own
}

const char* kA2000 = R"({"name": "NVIDIA RTX A2000 12GB", "aliases": ["A2000"], "arch": "sm_86", "units": 26,
  "clock_ghz": 1.2, "fp32_gflops": 7990, "fp16_gflops": 31950, "bf16_gflops": 31950, "bandwidth_gbs": 288,
  "l2_mb": 3, "source": "NVIDIA RTX A2000 datasheet"})";

TEST(GpuSkus, AFactsFileAddsAGpu) {
  auto rows = parseGpuFacts(kA2000, "mine.json");
  ASSERT_TRUE(rows.ok()) << rows.error().message;
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].smemPerUnit, 100 * 1024);  // the chip's
  EXPECT_EQ((*rows)[0].sources.at("fp16"), "NVIDIA RTX A2000 datasheet");
  ASSERT_TRUE(addGpuFacts(*rows).ok());
  auto t = getTarget("A2000");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->units, 26);
  EXPECT_EQ(t->model, "NVIDIA RTX A2000 12GB");
  EXPECT_EQ(findGpu("a2000")->origin, "mine.json");
  // The list form, from a file.
  std::string path = testing::TempDir() + "gpus.json";
  std::ofstream(path) << R"({"gpus": [)" << kA2000 << "]}";
  auto fromFile = readGpuFactsFile(path);
  ASSERT_TRUE(fromFile.ok()) << fromFile.error().message;
  EXPECT_EQ(fromFile->size(), 1u);
  EXPECT_FALSE(readGpuFactsFile(path + ".missing").ok());
}

// A facts file's mistakes: each is one line naming the file, the GPU and the field.
TEST(GpuSkus, FactsFileMistakesAreClearErrors) {
  auto failsWith = [](const std::string& text, const std::string& needle) {
    auto r = parseGpuFacts(text, "f.json");
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
    EXPECT_EQ(r.error().message.find('\n'), std::string::npos) << r.error().message;
    EXPECT_EQ(r.error().message.rfind("f.json", 0), 0u) << r.error().message;
  };
  auto with = [](const std::string& key, const std::string& value) {
    std::string s = kA2000;
    size_t at = s.find("\"" + key + "\":");
    if (value.empty()) {  // remove the field
      size_t end = s.find(',', at);
      return s.erase(at, end + 1 - at);
    }
    size_t v = s.find(':', at) + 1, end = s.find_first_of(",}", v);
    if (s[v + 1] == '[') end = s.find(']', v) + 1;
    return s.replace(v, end - v, " " + value);
  };
  failsWith(with("units", ""), "units: missing");
  failsWith(with("bandwidth_gbs", ""), "bandwidth_gbs: missing");
  failsWith(with("source", "\"\""), "source");
  failsWith(with("units", "-3"), "units: -3 is not a plausible");
  failsWith(with("units", "26.5"), "whole number");
  failsWith(with("clock_ghz", "1200"), "clock_ghz: 1200 is not a plausible");
  failsWith(with("fp32_gflops", "7.99"), "fp32_gflops");                 // TFLOPS typed as GFLOP/s
  failsWith(with("fp32_gflops", "79900"), "check the units");
  failsWith(with("fp16_gflops", "\"lots\""), "fp16_gflops: expected a number");
  failsWith(with("bandwidth_gbs", "1e9"), "bandwidth_gbs");
  failsWith(with("l2_mb", "0"), "l2_mb");
  failsWith(with("arch", "\"sm_120\""), "arch: 'sm_120' is not a chip");
  failsWith(with("name", "\"\""), "name");
  failsWith(R"({"name": "x", "arch": "sm_86", "unit": 26})", "unit: unknown field");
  failsWith(R"({"gpus": []})", "\"gpus\" must be a list");
  failsWith("not json", "not JSON");
  failsWith(std::string(R"({"gpus": [)") + kA2000 + "," + kA2000 + "]}", "listed twice");
  // bf16 on a chip without it; an architecture fact another chip would have.
  failsWith(R"({"name": "T4 clone", "arch": "sm_75", "units": 40, "clock_ghz": 1.59, "fp32_gflops": 8100,
    "fp16_gflops": 65000, "bf16_gflops": 65000, "bandwidth_gbs": 320, "l2_mb": 4, "source": "x"})",
            "bf16_gflops: sm_75 has no bf16 math");
  // A dense figure is wanted: the 'with sparsity' one is twice it (and beyond a GeForce part's rate).
  failsWith(with("fp16_gflops", "127800"), "a dense figure is wanted");
  std::string smem = kA2000;
  smem.insert(smem.size() - 1, R"(, "smem_per_unit_kb": 164)");
  failsWith(smem, "smem_per_unit_kb: 164 differs from sm_86's 100");
}

}  // namespace
}  // namespace tessera
