// Tests the bundle library on real stores and real compilation: which config each entry gets
// (the exact winner, an estimate labelled as one, a nearest shape's config only when the space
// rules accept it at the asked shape, the default or nothing per policy), the kernel table's C
// escaping, kernels rebuilt from a store's winners, and the folder written (and never written over
// something that is not a bundle).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <span>

#include <nlohmann/json.hpp>

#include "bundle/bundle.h"
#include "bundle/resolve.h"
#include "bundle/table.h"
#include "bundle/winners.h"
#include "ir/text.h"
#include "client/client.h"
#include "service/server.h"
#include "store/store.h"
#include "store/tokens.h"
#include "ir/builders.h"
#include "ir/verifier.h"
#include "measure/records.h"
#include "search/space.h"

using namespace tessera;
using namespace tessera::bundle;
namespace fs = std::filesystem;

namespace {

ir::Kernel gemm(int64_t m, int64_t n, int64_t k) {
  ir::GemmSpec s;
  s.m = m;
  s.n = n;
  s.k = k;
  return *ir::buildGemm(s);
}

cache::Record record(const ir::Kernel& k, const TargetDesc& t, const ir::Config& c, double us,
                     cache::RecordStatus status = cache::RecordStatus::Ok) {
  cache::Record r;
  r.key = measure::hardKeyFor(k, t);
  r.config = c.toJson();
  r.status = status;
  r.median_us = r.p20_us = r.p80_us = us;
  r.n = status == cache::RecordStatus::Ok ? 10 : 0;
  r.provenance.tessera_version = "test";
  r.provenance.created_at = cache::utcNow();
  r.provenance.host = "tuner";
  if (status == cache::RecordStatus::Estimated) {
    r.estimator = "analytic-v1";
    r.bound = "memory";
  }
  EXPECT_TRUE(cache::finalizeRecord(r).ok());
  return r;
}

// A legal config of `k`'s host space that is not its default (so a test can tell them apart).
ir::Config nonDefault(const ir::Kernel& k) {
  ir::Space sp = *search::makeSpace(k, hostTarget());
  ir::Config def = sp.defaults();
  for (const auto& knob : sp.knobs)
    for (const auto& v : knob.domain) {
      ir::Config c = def;
      c.set(knob.name, v);
      if (!(c == def) && !sp.check(c)) return c;
    }
  ADD_FAILURE() << "no legal non-default config";
  return def;
}

RecordSources sources(cache::RecordStore* store) {
  RecordSources s;
  s.store = store;
  s.storeName = "test.db";
  return s;
}

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("tessera_bundle_test_" + std::to_string(getpid()));
  TempDir() { fs::remove_all(path); fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

}  // namespace

TEST(BundleResolve, ExactWinnerComesFirst) {
  auto store = cache::makeMemoryStore();
  ir::Kernel k = gemm(64, 64, 64);
  ir::Config c = nonDefault(k);
  ASSERT_TRUE(store->putOne(record(k, hostTarget(), c, 10)).ok());
  std::vector<std::string> notes;
  auto cands = resolveCandidates(k, hostTarget(), sources(store.get()), {}, &notes);
  ASSERT_TRUE(cands.ok()) << cands.error().str();
  ASSERT_GE(cands->size(), 2u);  // the winner, then the default as the fallback
  EXPECT_EQ(cands->front().source, "exact");
  EXPECT_EQ(cands->front().config, c);
  EXPECT_EQ(cands->back().source, "default");
}

TEST(BundleResolve, NearestShapeServesWhenItsConfigIsLegal) {
  auto store = cache::makeMemoryStore();
  ir::Kernel tuned = gemm(64, 64, 64), asked = gemm(60, 64, 64);
  ir::Config c = nonDefault(tuned);
  ASSERT_FALSE(search::makeSpace(asked, hostTarget())->check(c)) << "precondition: legal at the asked shape";
  ASSERT_TRUE(store->putOne(record(tuned, hostTarget(), c, 10)).ok());
  auto cands = resolveCandidates(asked, hostTarget(), sources(store.get()), {}, nullptr);
  ASSERT_TRUE(cands.ok());
  EXPECT_EQ(cands->front().source, "nearest");
  EXPECT_EQ(cands->front().config, c);
  ASSERT_TRUE(cands->front().record);
  EXPECT_EQ(cands->front().record->key.shape, (std::vector<int64_t>{64, 64, 64}));
  EXPECT_GT(cands->front().distance, 0);
}

TEST(BundleResolve, NearestConfigIllegalAtTheAskedShapeIsRejected) {
  auto store = cache::makeMemoryStore();
  ir::Kernel tuned = gemm(512, 512, 512), asked = gemm(8, 8, 8);
  ir::Space big = *search::makeSpace(tuned, hostTarget()), small = *search::makeSpace(asked, hostTarget());
  // A tile of the big space that the small space does not allow (tiles are clamped to the problem).
  std::optional<ir::Config> illegal;
  for (const auto& knob : big.knobs)
    for (const auto& v : knob.domain) {
      ir::Config c = big.defaults();
      c.set(knob.name, v);
      if (!big.check(c) && small.check(c) && !illegal) illegal = c;
    }
  ASSERT_TRUE(illegal) << "precondition: some config legal at 512^3 is illegal at 8^3";
  ASSERT_TRUE(store->putOne(record(tuned, hostTarget(), *illegal, 10)).ok());
  std::vector<std::string> notes;
  auto cands = resolveCandidates(asked, hostTarget(), sources(store.get()), {}, &notes);
  ASSERT_TRUE(cands.ok());
  ASSERT_EQ(cands->size(), 1u);
  EXPECT_EQ(cands->front().source, "default");
  ASSERT_FALSE(notes.empty());
  EXPECT_NE(notes.front().find("not used"), std::string::npos) << notes.front();
}

TEST(BundleResolve, AnEstimateIsUsedOnlyWithoutAMeasurementAndStaysAnEstimate) {
  auto store = cache::makeMemoryStore();
  ir::Kernel k = gemm(64, 64, 64);
  ir::Config c = nonDefault(k);
  ASSERT_TRUE(store->putOne(record(k, hostTarget(), c, 5, cache::RecordStatus::Estimated)).ok());
  auto cands = resolveCandidates(k, hostTarget(), sources(store.get()), {}, nullptr);
  ASSERT_TRUE(cands.ok());
  ASSERT_TRUE(cands->front().record);
  EXPECT_EQ(cands->front().record->status, cache::RecordStatus::Estimated);
  EXPECT_EQ(cands->front().record->estimator, "analytic-v1");
  // A measurement of the same key, even a slower one, comes first.
  ir::Config d = search::makeSpace(k, hostTarget())->defaults();
  ASSERT_TRUE(store->putOne(record(k, hostTarget(), d, 50)).ok());
  cands = resolveCandidates(k, hostTarget(), sources(store.get()), {}, nullptr);
  ASSERT_TRUE(cands.ok());
  EXPECT_EQ(cands->front().record->status, cache::RecordStatus::Ok);
}

TEST(BundleResolve, MissingPolicies) {
  auto store = cache::makeMemoryStore();
  ir::Kernel k = gemm(32, 32, 32);
  ResolveSettings s;
  auto def = resolveCandidates(k, hostTarget(), sources(store.get()), s, nullptr);
  ASSERT_TRUE(def.ok());
  ASSERT_EQ(def->size(), 1u);
  EXPECT_EQ(def->front().source, "default");
  s.missing = MissingPolicy::Skip;
  auto skip = resolveCandidates(k, hostTarget(), sources(store.get()), s, nullptr);
  ASSERT_TRUE(skip.ok());
  EXPECT_TRUE(skip->empty());
  s.missing = MissingPolicy::Fail;
  auto fail = resolveCandidates(k, hostTarget(), sources(nullptr), s, nullptr);
  ASSERT_FALSE(fail.ok());
  EXPECT_EQ(fail.error().code, ErrorCode::NotFound);
}

TEST(BundleTable, CStringsEscapeEverythingUnusual) {
  EXPECT_EQ(cString("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(cString("x\ny"), "\"x\\012y\"");
  EXPECT_EQ(cString("??="), "\"\\077\\077=\"");  // no trigraph can form
  EXPECT_EQ(cString(std::string("\0\xff", 2)), "\"\\000\\377\"");
}

TEST(BundleWinners, EveryWinnerIsRebuiltFromTheKernelTable) {
  auto store = cache::makeMemoryStore();
  const TargetDesc& t = hostTarget();
  ir::GemmSpec g;
  g.m = 48;
  g.n = 32;
  g.k = 16;
  g.transB = true;
  ir::Kernel gk = *ir::buildGemm(g);
  ir::AttentionSpec a;
  a.heads = 2;
  a.seq_q = 64;
  a.head_dim = 32;
  a.causal = true;
  ir::Kernel ak = *ir::buildAttention(a);
  ir::ElementwiseSpec e;
  e.expr = "y = relu(x)";
  e.shape = {8, 8};
  ir::Kernel ek = *ir::buildElementwise(e);
  g.epilogue = "relu(acc)";
  ir::Kernel epi = *ir::buildGemm(g);
  for (const ir::Kernel* k : {&gk, &ak, &ek, &epi})
    ASSERT_TRUE(store->putOne(record(*k, t, search::makeSpace(*k, t)->defaults(), 10)).ok());
  auto w = kernelsFromWinners(*store, {t});
  ASSERT_TRUE(w.ok()) << w.error().str();
  ASSERT_EQ(w->kernels.size(), 2u);
  std::set<std::string> hashes;
  for (const auto& r : w->kernels) hashes.insert(ir::workloadHash(r.kernel));
  EXPECT_TRUE(hashes.count(ir::workloadHash(gk)));
  EXPECT_TRUE(hashes.count(ir::workloadHash(ak)));
  EXPECT_EQ(w->notRebuilt.size(), 2u);  // the elementwise chain and the GEMM with an epilogue
  // With the kernels' texts in the store's kernel table (as `tessera tune` keeps them), every
  // winner comes back, the fused chain and the epilogue included, as the very kernel of its key.
  for (const ir::Kernel* k : {&ek, &epi})
    ASSERT_TRUE(store->putKernelText(ir::workloadHash(*k), ir::printKernel(*k, {.anonymize = true})).ok());
  auto all = kernelsFromWinners(*store, {t});
  ASSERT_TRUE(all.ok()) << all.error().str();
  EXPECT_TRUE(all->notRebuilt.empty());
  std::set<std::string> rebuilt;
  for (const auto& r : all->kernels) rebuilt.insert(ir::workloadHash(r.kernel));
  for (const ir::Kernel* k : {&gk, &ak, &ek, &epi}) EXPECT_TRUE(rebuilt.count(ir::workloadHash(*k)));
}

TEST(BundleWrite, WritesTheFolderAndReplacesOnlyBundles) {
  TempDir tmp;
  auto store = cache::makeMemoryStore();
  ir::Kernel k = gemm(32, 48, 16);
  ir::Config c = nonDefault(k);
  ASSERT_TRUE(store->putOne(record(k, hostTarget(), c, 10)).ok());
  BundleSettings s;
  s.targets = {hostTarget()};
  s.outDir = (tmp.path / "b").string();
  std::vector<KernelRequest> ks = {{k, "test"}, {gemm(16, 16, 16), "test"}};
  auto sum = writeBundle(ks, s, sources(store.get()));
  ASSERT_TRUE(sum.ok()) << sum.error().str();
  EXPECT_EQ(sum->entries, 2);
  EXPECT_EQ(sum->exact, 1);
  EXPECT_EQ(sum->untuned, 1);
  for (const char* f : {"tessera_bundle.h", "tessera_bundle_internal.h", "tessera_runtime.c", "tessera_runtime_gpu.c",
                        "tessera_bundle_table.c", "tessera_bundle_images.c", "Makefile", "manifest.json"})
    EXPECT_TRUE(fs::exists(tmp.path / "b" / f)) << f;
  std::ifstream in(tmp.path / "b" / "manifest.json");
  auto m = nlohmann::json::parse(in);
  EXPECT_EQ(m["format"], "tessera-bundle");
  EXPECT_FALSE(std::string(m["llvm_version"]).empty());
  ASSERT_EQ(m["entries"].size(), 2u);
  const auto& e0 = m["entries"][0];
  EXPECT_EQ(e0["source"], "exact");
  EXPECT_EQ(e0["time"]["kind"], "measured");
  EXPECT_EQ(e0["check"]["kind"], "reference");
  EXPECT_TRUE(e0["check"]["ok"].get<bool>());
  EXPECT_EQ(ir::Config::fromJson(e0["config"].dump())->str(), c.str());
  EXPECT_TRUE(fs::exists(tmp.path / "b" / std::string(e0["files"]["object"])));
  EXPECT_EQ(m["entries"][1]["source"], "default");
  EXPECT_EQ(m["entries"][1]["time"]["kind"], "none");

  // An existing bundle is replaced only when asked; a folder that is not a bundle never is.
  EXPECT_FALSE(writeBundle(ks, s, sources(store.get())).ok());
  s.replace = true;
  EXPECT_TRUE(writeBundle(ks, s, sources(store.get())).ok());
  fs::create_directories(tmp.path / "mine");
  std::ofstream(tmp.path / "mine" / "notes.txt") << "precious";
  s.outDir = (tmp.path / "mine").string();
  auto refused = writeBundle(ks, s, sources(store.get()));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("not a Tessera bundle"), std::string::npos);
  EXPECT_TRUE(fs::exists(tmp.path / "mine" / "notes.txt"));
}

TEST(BundleWrite, GpuEntriesCarryLaunchAndCodeObjects) {
  TempDir tmp;
  BundleSettings s;
  s.targets = {*parseBundleTarget("sm_80"), *parseBundleTarget("gfx942")};
  s.outDir = (tmp.path / "g").string();
  auto sum = writeBundle({{gemm(64, 64, 32), "test"}}, s, sources(nullptr));
  ASSERT_TRUE(sum.ok()) << sum.error().str();
  EXPECT_EQ(sum->entries, 2);
  std::ifstream in(tmp.path / "g" / "manifest.json");
  auto m = nlohmann::json::parse(in);
  const auto& nv = m["entries"][0];
  EXPECT_EQ(nv["target"], "sm_80");
  EXPECT_TRUE(fs::file_size(tmp.path / "g" / std::string(nv["files"]["cubin"])) > 0);
  EXPECT_TRUE(fs::file_size(tmp.path / "g" / std::string(nv["files"]["ptx"])) > 0);
  EXPECT_TRUE(nv["files"]["ptx_portable"].get<bool>());
  EXPECT_EQ(nv["check"]["kind"], "compile");
  const auto& amd = m["entries"][1];
  EXPECT_TRUE(fs::file_size(tmp.path / "g" / std::string(amd["files"]["hsaco"])) > 0);
}

TEST(BundleTargets, NamesAndLevels) {
  EXPECT_EQ(parseBundleTarget("host")->name, "host");
  auto v3 = parseBundleTarget("x86-64-v3");
  ASSERT_TRUE(v3.ok());
  EXPECT_EQ(v3->arch, "x86-64-v3");
  EXPECT_FALSE(parseBundleTarget("sm_12").ok());
  EXPECT_FALSE(parseBundleTarget("x86-64-v9").ok());
}

// bf16 GEMMs bundled for "any CPU of the level": objects with no conversion builtin to link
// (compiler-rt's __truncsfbf2 is in no libgcc of Debian 12), whatever this host has, and a winner
// that needs more than the level (bf16dot: avx512_bf16, tuned on a Zen 4) is not used for them:
// the level's default is, with the reason in the notes. Before, LLVM aborted the whole process
// ("Do not know how to split this operator's operand") compiling vdpbf16ps for x86-64-v4.
TEST(BundleWrite, HalfPrecisionObjectsNeedOnlyTheirIsaLevel) {
  TempDir tmp;
  auto store = cache::makeMemoryStore();
  // 97 rows: the level's default is blis on every level.
  ir::GemmSpec g{.m = 97, .n = 17, .k = 40, .dtype = ir::ScalarType::BF16};
  ir::Kernel k = *ir::buildGemm(g);
  ir::Kernel f16 = *ir::buildGemm({.m = 97, .n = 17, .k = 40, .dtype = ir::ScalarType::F16});
  BundleSettings s;
  for (const char* level : {"x86-64-v3", "x86-64-v4"}) s.targets.push_back(*parseBundleTarget(level));
  // A bf16dot winner recorded under the v4 key, as a Zen 4 with avx512_bf16 would store it.
  ir::Config dot = *ir::Config::parseAssignments("schedule=bf16dot,MR=8,NR=32,MC=48,NC=32,KC=32,KU=1,ORDER=ij");
  ASSERT_TRUE(store->putOne(record(k, s.targets[1], dot, 5)).ok());
  s.outDir = (tmp.path / "h").string();
  s.verify = false;  // compiled for the level only: this test runs on hosts of either level
  auto sum = writeBundle({{k, "test"}, {f16, "test"}}, s, sources(store.get()));
  ASSERT_TRUE(sum.ok()) << sum.error().str();
  EXPECT_EQ(sum->entries, 4);
  std::ifstream in(tmp.path / "h" / "manifest.json");
  auto m = nlohmann::json::parse(in);
  for (const auto& e : m["entries"]) {
    std::string obj = (tmp.path / "h" / std::string(e["files"]["object"])).string();
    std::string undefs;
    FILE* p = popen(("nm -u " + obj).c_str(), "r");
    ASSERT_NE(p, nullptr);
    char buf[256];
    while (std::fgets(buf, sizeof buf, p)) undefs += buf;
    pclose(p);
    EXPECT_EQ(undefs.find("__trunc"), std::string::npos) << obj << ":\n" << undefs;
    EXPECT_EQ(undefs.find("__extend"), std::string::npos) << obj << ":\n" << undefs;
    EXPECT_NE(std::string(e["config"].dump()).find("blis"), std::string::npos) << e["config"].dump();
  }
  std::string notes;
  for (const auto& e : m["entries"])
    if (std::string(e["name"]).rfind(k.name, 0) == 0 && e["arch"] == "x86-64-v4") notes = e["notes"].dump();
  EXPECT_NE(notes.find("schedule=bf16dot is outside its domain"), std::string::npos) << m.dump(1);
}

// Issue 47 (readers fall back). The shared cache's winner is a claim this machine refutes: a config
// the kernel's space here cannot run (mallory posted it before anyone sent the kernel's text, so the
// service's legality rule had nothing to check it against) and the fastest. The bundle takes the
// next candidate of the key in the winner order, the honest claim, and says what it skipped; once a
// reader's dispute demoted the lie, the honest record is the winner itself. The control: without
// fallbacks (sharedFallbacks 0, what the bundle did before) the entry is the untuned default.
TEST(BundleResolve, ARefutedOrDisputedSharedWinnerFallsBackToTheNextCandidate) {
  TempDir dir;
  const std::string db = (dir.path / "shared.db").string();
  auto tokens = cache::TokenStore::open(db);
  ASSERT_TRUE(tokens.ok()) << tokens.error().message;
  const std::string honest = *(*tokens)->add("honest", cache::Scope::Write);
  const std::string mallory = *(*tokens)->add("mallory", cache::Scope::Write);
  const std::string reader = *(*tokens)->add("reader", cache::Scope::Read);
  cache::ServerOptions so;
  so.db_path = db;
  so.synchronous_full = false;
  so.serve_ui = false;
  auto server = cache::CacheServer::start(so);
  ASSERT_TRUE(server.ok()) << server.error().message;
  const std::string url = "http://127.0.0.1:" + std::to_string((*server)->port());
  auto client = [&](const std::string& token) {
    return std::make_unique<cache::CacheClient>(cache::CacheClientOptions{.base_url = url, .token = token});
  };

  ir::Kernel k = gemm(64, 64, 64);
  const TargetDesc& t = hostTarget();
  ir::Config good = nonDefault(k);
  ir::Config bad = good;
  bad.set("MR", int64_t(3));  // no register tile of the space
  ASSERT_TRUE(search::makeSpace(k, t)->check(bad).has_value());
  cache::Record lie = record(k, t, bad, 5);
  ASSERT_TRUE(client(mallory)->put(std::span<const cache::Record>(&lie, 1)).ok);
  cache::Record truth = record(k, t, good, 50);
  truth.kernel_ir = ir::printKernel(k, {.anonymize = true});
  ASSERT_TRUE(client(honest)->put(std::span<const cache::Record>(&truth, 1)).ok);

  auto readerClient = client(reader);
  RecordSources src;
  src.client = readerClient.get();
  std::vector<std::string> notes;
  auto cands = resolveCandidates(k, t, src, {}, &notes);
  ASSERT_TRUE(cands.ok()) << cands.error().str();
  ASSERT_FALSE(cands->empty());
  EXPECT_EQ(cands->front().source, "exact");
  EXPECT_EQ(cands->front().config, good);
  std::string said;
  for (const auto& n : notes) said += n + "\n";
  EXPECT_NE(said.find("MR=3"), std::string::npos) << said;
  // The control: no fallbacks, the refuted winner leaves only the default.
  ResolveSettings none;
  none.sharedFallbacks = 0;
  auto alone = resolveCandidates(k, t, src, none, &notes);
  ASSERT_TRUE(alone.ok());
  EXPECT_EQ(alone->front().source, "default");
  // The reader's dispute demotes the lie for every reader: the honest record is the winner.
  auto listed = readerClient->candidates(cache::keyIdOf(lie.key), 2);
  ASSERT_TRUE(listed.ok() && !listed->empty());
  ASSERT_EQ(listed->front().config, bad.toJson());
  auto disputed = readerClient->dispute(listed->front().id, "MR=3 is no register tile here");
  ASSERT_TRUE(disputed.ok() && *disputed);
  notes.clear();
  auto after = resolveCandidates(k, t, src, none, &notes);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->front().source, "exact");
  EXPECT_EQ(after->front().config, good);
  (*server)->stop();
  (*server)->wait();
}
