// Tests replay: the Kernel Tuner import (fields, statuses, determinism, idempotent store import),
// tables built from records, the replay measurer, and record files (JSON lines).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "store/store.h"
#include "search/space_ops.h"
#include "test_tables.h"

using namespace tessera;
using namespace tessera::search;
using namespace tessera::measure;

namespace {

std::string tempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("tessera_" + std::to_string(::getpid()) + "_" + name)).string();
}

// A tiny Kernel Tuner cache file in the real format, plain JSON, with failures.
std::string writeTinyKernelTunerFile() {
  std::string path = tempPath("kt.json");
  std::ofstream(path) << R"({"device_name": "NVIDIA GeForce RTX 3090", "kernel_name": "vector_add",
    "problem_size": [1000000], "tune_params_keys": ["block_size_x", "use_fast"],
    "tune_params": {"block_size_x": [128, 256], "use_fast": [0, 1]}, "objective": "time",
    "cache": {
      "128,0": {"block_size_x": 128, "use_fast": 0, "time": 0.5, "times": [0.49, 0.5, 0.52], "GFLOP/s": 2.0,
                "timestamp": "2023-02-13 19:27:48.129080+00:00"},
      "128,1": {"block_size_x": 128, "use_fast": 1, "time": 0.25, "times": [0.25, 0.25]},
      "256,0": {"block_size_x": 256, "use_fast": 0, "time": "CompilationFailedConfig"},
      "256,1": {"block_size_x": 256, "use_fast": 1, "time": "RuntimeFailedConfig"}}})";
  return path;
}

}  // namespace

TEST(Replay, ImportsAKernelTunerFile) {
  std::string path = writeTinyKernelTunerFile();
  auto recs = importKernelTuner(path, "");
  ASSERT_TRUE(recs.ok()) << recs.error().message;
  ASSERT_EQ(recs->size(), 4u);
  std::map<std::string, const cache::Record*> byConfig;
  for (const auto& r : *recs) byConfig[r.config] = &r;
  const cache::Record& ok = *byConfig.at(R"({"block_size_x":128,"use_fast":0})");
  EXPECT_EQ(ok.key.family, "vector_add");
  EXPECT_EQ(ok.key.shape, std::vector<int64_t>{1000000});
  EXPECT_EQ(ok.key.dtype, "f32");
  EXPECT_EQ(ok.key.layout, "row");
  EXPECT_EQ(ok.key.target, "NVIDIA_GeForce_RTX_3090");
  EXPECT_EQ(ok.key.arch, ok.key.target);
  EXPECT_EQ(ok.key.units, 1);
  EXPECT_EQ(ok.key.workload.size(), 64u);
  EXPECT_EQ(ok.status, cache::RecordStatus::Ok);
  EXPECT_DOUBLE_EQ(ok.median_us, 500);
  EXPECT_LE(ok.p20_us, ok.median_us);
  EXPECT_GE(ok.p80_us, ok.median_us);
  EXPECT_EQ(ok.n, 3);
  EXPECT_EQ(ok.gflops, 2.0);
  EXPECT_EQ(ok.provenance.created_at, "2023-02-13T19:27:48Z");
  EXPECT_EQ(byConfig.at(R"({"block_size_x":256,"use_fast":0})")->status, cache::RecordStatus::CompileError);
  EXPECT_EQ(byConfig.at(R"({"block_size_x":256,"use_fast":1})")->status, cache::RecordStatus::Crash);

  // Deterministic: a second import gives the same records, and --target renames the device.
  auto again = importKernelTuner(path, "");
  ASSERT_TRUE(again.ok());
  for (size_t i = 0; i < recs->size(); ++i) EXPECT_EQ(cache::fingerprint((*recs)[i]), cache::fingerprint((*again)[i]));
  auto named = importKernelTuner(path, "sm_86");
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named->front().key.target, "sm_86");
  EXPECT_EQ(named->front().key.workload, recs->front().key.workload) << "the workload does not depend on the device";

  // The replay table: the fastest config wins, failures are kept as failures.
  auto t = tableFromRecords("tiny", *recs);
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->results.size(), 4u);
  EXPECT_DOUBLE_EQ(t->bestThroughput(), 1000.0 / 0.25);
  EXPECT_EQ(t->countAtLeast(0.95), 1u);
  std::filesystem::remove(path);
}

TEST(Replay, RefusesFilesItCannotKey) {
  const auto& recs = tables::mi250xRecords();  // imported with --target MI250X
  ASSERT_EQ(recs.size(), 4362u);
  EXPECT_EQ(recs.front().key.target, "MI250X");
  auto noTarget = importKernelTuner(tables::dataFile("convolution_MI250X.json.gz"), "");
  ASSERT_FALSE(noTarget.ok());
  EXPECT_NE(noTarget.error().message.find("--target"), std::string::npos);
  EXPECT_FALSE(importKernelTuner(tempPath("missing.json"), "x").ok());
  std::string bad = tempPath("bad.json");
  std::ofstream(bad) << R"({"kernel_name": "k"})";
  auto r = importKernelTuner(bad, "x");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("problem_size"), std::string::npos);
  std::filesystem::remove(bad);
}

TEST(Replay, FailureStatusesOfARealFile) {
  auto recs = importKernelTuner(tables::dataFile("convolution_A100.json.gz"), "");
  ASSERT_TRUE(recs.ok());
  std::map<cache::RecordStatus, int> n;
  for (const auto& r : *recs) n[r.status]++;
  EXPECT_EQ(recs->size(), 4362u);
  EXPECT_EQ(n[cache::RecordStatus::Ok], 4201);
  EXPECT_EQ(n[cache::RecordStatus::Crash], 155);        // RuntimeFailedConfig
  EXPECT_EQ(n[cache::RecordStatus::CompileError], 6);   // CompilationFailedConfig
  EXPECT_EQ(recs->front().key.target, "NVIDIA_A100-PCIE-40GB");
}

// Configs set aside by knob values (the benches' --exclude): every measured config with all the
// values, none without; text that is not such a list is one clear error.
TEST(Replay, SetsAsideTheConfigsItIsTold) {
  auto recs = importKernelTuner(tables::dataFile("convolution_A100.json.gz"), "");
  ASSERT_TRUE(recs.ok());
  auto x = parseTableExclusion("convolution_A100:read_only=1,use_padding=0,use_shmem=1");
  ASSERT_TRUE(x.ok()) << x.error().message;
  EXPECT_EQ(x->table, "convolution_A100");
  std::vector<cache::Record> kept = *recs;
  EXPECT_EQ(setAside(kept, x->match), 800u);
  for (size_t i = 0; i < kept.size(); ++i) {
    const bool all = x->match.matches((*recs)[i].config);
    if ((*recs)[i].status == cache::RecordStatus::Ok) EXPECT_EQ(kept[i].status != cache::RecordStatus::Ok, all) << (*recs)[i].config;
  }
  EXPECT_EQ(setAside(kept, x->match), 0u);  // twice: nothing more
  auto none = parseKnobMatch("read_only=7");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(setAside(kept, *none), 0u);  // a value no config has (control: the count above is not every config)
  for (const char* bad : {"", "read_only", "=1", "read_only=", "a=1,,b=2"})
    EXPECT_FALSE(parseKnobMatch(bad).ok()) << bad;
  for (const char* bad : {"read_only=1", ":read_only=1", "convolution_A100:", "convolution_A100:x"})
    EXPECT_FALSE(parseTableExclusion(bad).ok()) << bad;
  EXPECT_EQ(parseTableExclusions({"a:x=1", "b:y=2,z=3"})->size(), 2u);
  EXPECT_FALSE(parseTableExclusions({"a:x=1", "b"}).ok());  // one bad entry fails the list
}

TEST(Replay, ImportIntoTheStoreIsIdempotent) {
  std::string db = tempPath("import.db");
  std::string path = writeTinyKernelTunerFile();
  auto recs = importKernelTuner(path, "");
  ASSERT_TRUE(recs.ok());
  {
    auto store = cache::openSqliteStore(db);
    ASSERT_TRUE(store.ok()) << store.error().message;
    auto first = (*store)->put(*recs);
    ASSERT_TRUE(first.ok());
    for (const auto& p : *first) EXPECT_FALSE(p.duplicate);
  }
  auto store = cache::openSqliteStore(db);
  ASSERT_TRUE(store.ok());
  auto again = importKernelTuner(path, "");
  ASSERT_TRUE(again.ok());
  auto second = (*store)->put(*again);
  ASSERT_TRUE(second.ok());
  for (const auto& p : *second) EXPECT_TRUE(p.duplicate);
  auto stats = (*store)->stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->records, 4);
  auto best = (*store)->best(recs->front().key_id);
  ASSERT_TRUE(best.ok() && *best);
  EXPECT_EQ((*best)->record.config, R"({"block_size_x":128,"use_fast":1})");
  store->reset();
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(db + suffix);
  std::filesystem::remove(path);
}

TEST(Replay, MeasurerAnswersFromTheTable) {
  const auto& t = tables::mi250x();
  EXPECT_EQ(t.results.size(), 4362u);
  EXPECT_EQ(t.countAtLeast(0.95), 9u);
  auto m = makeReplayMeasurer(t);
  ir::Config unknown = t.space.defaults();
  unknown.set("block_size_x", int64_t(12345));
  auto rs = *m->measure({t.results[5].config, unknown});
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0].throughput, t.results[5].throughput);
  EXPECT_TRUE(rs[0].ok());
  EXPECT_EQ(rs[1].status, TrialStatus::InvalidConfig);
  EXPECT_EQ(m->lookups(), 2u);
  auto again = *m->remeasure({t.results[5].config}, 3);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].throughput, t.results[5].throughput);
  EXPECT_EQ(m->lookups(), 5u);
}

TEST(Replay, RecordFilesRoundTripAndSplitByKey) {
  // Two workloads in one export: the MI250X table and the tiny file.
  std::string kt = writeTinyKernelTunerFile();
  auto tiny = importKernelTuner(kt, "");
  ASSERT_TRUE(tiny.ok());
  std::string path = tempPath("export.jsonl");
  {
    std::ofstream f(path);
    for (size_t i = 0; i < 300; ++i) f << cache::encodeRecord(tables::mi250xRecords()[i]) << "\n";
    for (const auto& r : *tiny) f << cache::encodeRecord(r) << "\n";
  }
  auto recs = readRecordFile(path);
  ASSERT_TRUE(recs.ok()) << recs.error().message;
  EXPECT_EQ(recs->size(), 304u);
  auto groups = groupByKey(*recs);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].size(), 300u);
  EXPECT_EQ(groups[1].size(), 4u);
  EXPECT_FALSE(tableFromRecords("mixed", *recs).ok()) << "a table holds one key";
  auto t = tableFromRecords("part", groups[0]);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->results.size(), 300u);
  std::ofstream(path, std::ios::app) << "{\"not\": \"a record\"}\n";
  auto broken = readRecordFile(path);
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.error().message.find(":305:"), std::string::npos) << broken.error().message;
  std::filesystem::remove(path);
  std::filesystem::remove(kt);
}
