// Owns reading recorded measurements from files: record exports (JSON lines of cache::Record) and
// Kernel Tuner cache files of brute-forced GPU spaces (bench/data/README.md), gzip or plain. What
// they become is records; measure/replay.h turns a key's records into a replay table.
#pragma once

#include <string>
#include <vector>

#include "store/record.h"
#include "support/status.h"

namespace tessera::search {

// Kernel Tuner cache file (gzip or plain JSON) -> records (knobs = the file's tune_params;
// failures = string times -> status; throughput = 1000 / time_ms). `targetName` names the device
// when given (and must be given when the file's device_name is empty). Deterministic: importing
// a file twice yields identical records, so a store keeps one copy.
Expected<std::vector<cache::Record>> importKernelTuner(const std::string& path, const std::string& targetName);

// Knob values that pick configs out of a table ("read_only=1,use_shmem=1": the configs that have
// all of them); an error for text that is not such a list.
struct KnobMatch {
  std::vector<std::pair<std::string, std::string>> values;  // knob -> value as written
  bool matches(const std::string& configJson) const;
};
Expected<KnobMatch> parseKnobMatch(const std::string& text);
// "TABLE:knob=value,..." (the benches' --exclude): the configs of the tables whose name contains
// TABLE that match.
struct TableExclusion {
  std::string table;
  KnobMatch match;
};
Expected<TableExclusion> parseTableExclusion(const std::string& text);
Expected<std::vector<TableExclusion>> parseTableExclusions(const std::vector<std::string>& texts);
// Sets aside the measured records whose config matches (measurements not to be trusted, e.g. the
// A100 convolution file's measurement-order configs, bench/data/README.md): their status becomes
// Crash, as for a config that failed to run, so a replay that proposes one pays a trial and learns
// nothing of its time. Returns how many were set aside.
size_t setAside(std::vector<cache::Record>& records, const KnobMatch& match);

// Record exports: JSON lines of cache::Record, gzip or plain.
Expected<std::vector<cache::Record>> readRecordFile(const std::string& path);
// The whole file, gunzipped when it is gzip (plain files are read as they are): a regular file,
// at most max_bytes of text (the largest file in bench/data holds 16 MiB).
inline constexpr size_t kMaxImportBytes = size_t{256} << 20;
Expected<std::string> readMaybeGzip(const std::string& path, size_t max_bytes = kMaxImportBytes);

}  // namespace tessera::search
