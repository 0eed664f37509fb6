// Tests that the cache service's knob check (service/plausibility.cpp over the knob table
// targets/knob_table.cpp, which the service uses to refuse configs naming knobs a family does not
// have) accepts every config the schedule spaces can produce, on the host and on every GPU target:
// a knob added to a space without the table would make the service refuse honest records.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <variant>

#include "service/legality.h"
#include "service/plausibility.h"
#include "ir/builders.h"
#include "ir/text.h"
#include "measure/records.h"
#include "search/space.h"
#include "search/space_ops.h"
#include "targets/gpu_targets.h"

namespace tessera {
namespace {

std::vector<ir::Kernel> kernels() {
  std::vector<ir::Kernel> ks;
  ir::GemmSpec g;
  g.m = 1024; g.n = 1000; g.k = 512;
  ks.push_back(*ir::buildGemm(g));
  g.dtype = ir::ScalarType::F16;
  ks.push_back(*ir::buildGemm(g));
  g.dtype = ir::ScalarType::BF16;  // bf16dot and amx are offered for bf16 only
  ks.push_back(*ir::buildGemm(g));
  ks.push_back(*ir::buildGemm({.m = 129, .n = 7, .k = 200}));  // kvec and its NJ: few columns only
  ks.push_back(*ir::buildGemm({.m = 5, .n = 300, .k = 200}));  // nvec and its NV: few rows only
  ir::ElementwiseSpec e;
  e.expr = "y = gelu(x * s + b)";
  e.shape = {512, 4096};
  e.shapes["s"] = {4096};
  e.shapes["b"] = {4096};
  ks.push_back(*ir::buildElementwise(e));
  ir::AttentionSpec a;
  a.heads = 8; a.seq_q = 1024; a.seq_kv = 1024; a.head_dim = 64; a.causal = true;
  ks.push_back(*ir::buildAttention(a));
  return ks;
}

TEST(KnobTable, EveryValueOfEverySpaceIsAccepted) {
  // The live host and the named machines (the knobs and values a space offers depend on the
  // host's ISA and cores: amx only with amx_bf16, bf16dot only with avx512_bf16, THREADS values up
  // to the cores), so the table is checked against every host's spaces on any host.
  std::vector<TargetDesc> targets = {hostTarget()};
  for (const auto& name : hostPresets()) targets.push_back(*hostPreset(name));
  for (const auto& t : gpuTargets()) targets.push_back(t);
  int checked = 0;
  for (const TargetDesc& t : targets) {
    for (const ir::Kernel& k : kernels()) {
      auto space = search::makeSpace(k, t);
      if (!space.ok()) continue;  // a family a target does not support yet
      cache::HardKey key = measure::hardKeyFor(k, t);
      EXPECT_TRUE(cache::checkConfigKnobs(key, space->defaults().toJson(), "").ok()) << t.name << " " << k.name;
      for (const ir::Knob& knob : space->knobs) {
        for (const ir::KnobValue& v : knob.domain) {
          ir::Config c;
          c.set(knob.name, v);
          Status s = cache::checkConfigKnobs(key, c.toJson(), "");
          EXPECT_TRUE(s.ok()) << t.name << " " << k.name << ": " << s.error().message;
          ++checked;
        }
      }
      // And the service's arch rule holds for the keys the tuner makes.
      EXPECT_TRUE(cache::checkTargetArch(key, "key").ok()) << t.name;
    }
  }
  EXPECT_GT(checked, 100);
}

TEST(KnobTable, HostScheduleValuesAndThreadsOfEveryNamedHostAreSeen) {
  // A negative control for the loop above: the presets do produce the values the table must list.
  std::set<std::string> schedules;
  bool threads = false;
  for (const auto& name : hostPresets()) {
    TargetDesc t = *hostPreset(name);
    for (const ir::Kernel& k : kernels()) {
      auto space = search::makeSpace(k, t);
      if (!space.ok()) continue;
      for (const ir::Knob& knob : space->knobs) {
        if (knob.name == "THREADS") threads = true;
        if (knob.name == "schedule")
          for (const ir::KnobValue& v : knob.domain)
            if (auto* s = std::get_if<std::string>(&v)) schedules.insert(*s);
      }
    }
  }
  EXPECT_TRUE(threads);
  for (const char* s : {"plain", "packed", "blis", "bf16dot", "amx", "kvec", "nvec"}) EXPECT_TRUE(schedules.count(s)) << s;
}

// Issue 47 (one legality rule): the service checks a host record's config with the tuner's space
// built for the key's ISA level and threads (search/config_rule.h), not for the writer's machine.
// Every config any named host's space offers (its default and 200 samples per kernel) passes the
// service's check on that host's key; the control: a value outside the domain is refused.
TEST(KnobTable, TheServicesLegalityRuleAdmitsEveryConfigOfEveryNamedHost) {
  search::Rng rng(47);
  int checked = 0;
  for (const auto& name : hostPresets()) {
    TargetDesc t = *hostPreset(name);
    for (const ir::Kernel& k : kernels()) {
      auto space = search::makeSpace(k, t);
      ASSERT_TRUE(space.ok()) << name << ": " << space.error().message;
      cache::Record r;
      r.key = measure::hardKeyFor(k, t);
      const std::optional<std::string> text = ir::printKernel(k, {.anonymize = true});
      std::vector<ir::Config> configs = {space->defaults()};
      for (int i = 0; i < 200; ++i)
        if (auto c = search::sampleLegal(*space, rng)) configs.push_back(*c);
      for (const ir::Config& c : configs) {
        r.config = c.toJson();
        Status s = cache::checkConfigLegal(r, text, "");
        ASSERT_TRUE(s.ok()) << name << " " << r.key.family << " " << r.config << ": " << s.error().message;
        ++checked;
      }
      if (const ir::Knob* vw = space->find("VW")) {
        ir::Config bad = space->defaults();
        bad.set("VW", int64_t(3));
        ASSERT_EQ(vw->indexOf(bad.values["VW"]), -1);
        r.config = bad.toJson();
        EXPECT_FALSE(cache::checkConfigLegal(r, text, "").ok()) << name << " " << r.config;
      }
    }
  }
  EXPECT_GT(checked, 4 * 6 * 100);
}

// Issue 47 (one legality rule, GPU keys, trust round seven): the service checks a GPU record's
// config with the chip's space, whose legality is the code generator's own plans (codegen/
// gpu_rules.h, linked without MLIR). Every config the tuner's space of every GPU of the table
// offers (its default, measured or modelled, and 40 samples per kernel) passes the service's check
// on that GPU's key, so no honest GPU record is refused; the controls: a block tile outside the
// domain (BM=48) and a config the rules refuse that the domains allow (the largest block tile of
// one-element thread tiles on the FMA pipes: thousands of threads per block) are refused.
TEST(KnobTable, TheServicesLegalityRuleAdmitsEveryConfigOfEveryGpu) {
  search::Rng rng(47);
  int checked = 0, refused = 0;
  for (const TargetDesc& t : gpuTargets()) {
    for (const ir::Kernel& k : kernels()) {
      auto space = search::makeSpace(k, t);
      if (!space.ok()) continue;  // a family a target does not support yet
      cache::Record r;
      r.key = measure::hardKeyFor(k, t);
      const std::optional<std::string> text = ir::printKernel(k, {.anonymize = true});
      std::vector<ir::Config> configs = {space->defaults()};
      for (int i = 0; i < 40; ++i)
        if (auto c = search::sampleLegal(*space, rng)) configs.push_back(*c);
      for (const ir::Config& c : configs) {
        r.config = c.toJson();
        Status s = cache::checkConfigLegal(r, text, "");
        ASSERT_TRUE(s.ok()) << t.name << " " << r.key.family << " " << r.config << ": " << s.error().message;
        ++checked;
      }
      if (k.family != ir::Family::Gemm) continue;
      ir::Config bad = space->defaults();
      bad.set("BM", int64_t(48));
      r.config = bad.toJson();
      EXPECT_FALSE(cache::checkConfigLegal(r, text, "").ok()) << t.name << " " << r.config;
      bad = space->defaults();
      for (auto [knob, v] : {std::pair{"TM", 1}, {"TN", 1}, {"VEC", 1}, {"STAGES", 1}}) bad.set(knob, int64_t(v));
      for (const char* knob : {"BM", "BN"}) bad.set(knob, space->find(knob)->domain.back());
      bad.set("strategy", std::string("simt"));
      if (bad.values.count("SPLITK")) bad.set("SPLITK", int64_t(1));
      ASSERT_TRUE(space->check(bad)) << t.name << " " << bad.str();  // the tuner's space refuses it too
      r.config = bad.toJson();
      Status s = cache::checkConfigLegal(r, text, "");
      EXPECT_FALSE(s.ok()) << t.name << " " << r.config;
      refused += !s.ok();
    }
  }
  EXPECT_GT(checked, 10 * 4 * 20);
  EXPECT_GT(refused, 5);
}

}  // namespace
}  // namespace tessera
