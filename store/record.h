// Owns the tuning record (ARCHITECTURE.md §2.9): hard key, soft provenance, measured value, the key_id
// derived from the hard key, the "better" order, shape distance, and the JSON wire form.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/trust.h"
#include "support/status.h"

namespace tessera::cache {

// Fields that must all match for a record to be reused. The canonical form of these fields,
// hashed with SHA-256, is the record's key_id.
struct HardKey {
  std::string family;          // kernel family: "gemm", "elementwise", "attention", ...
  std::string workload;        // canonical workload hash of the kernel (lowercase hex)
  std::vector<int64_t> shape;  // problem dims (e.g. M, N, K); rank 1..8, every dim >= 1
  std::string dtype;           // "f32", "f16", "bf16", or a mixed form such as "f16:f32"
  std::string layout;          // operand layout: "row", "tA", "tB", "tAtB", ...
  std::string target;          // target name: "host", "sm_90a", "gfx942", ...
  std::string arch;            // target arch: "x86-64-v4", "sm_90a", "gfx942", ...
  int64_t units = 1;           // cores / SMs / CUs of the target
  bool operator==(const HardKey&) const = default;
};

// Where and with what a record was measured. A toolchain mismatch makes a record stale: it is
// still served, flagged, so the tuner can re-measure it instead of trusting it blindly.
struct Provenance {
  std::string tessera_version, llvm_version, cuda_version;  // toolchain (cuda_version: CUDA/ROCm)
  std::string cpu_model, host, user;
  std::string created_at;  // UTC, exactly "YYYY-MM-DDTHH:MM:SSZ" so text order is time order
  // The GPU driver and runtime (CUDA runtime, HIP) the measurement ran on; '' for host records and
  // records from before they were kept. Not part of the toolchain a record goes stale against.
  std::string driver_version, runtime_version;
  bool operator==(const Provenance&) const = default;
};

// Candidate outcome categories; every measured candidate is stored with one of these.
enum class RecordStatus { Ok, InvalidConfig, CompileError, Timeout, Crash, WrongResult, Estimated };
std::string_view recordStatusName(RecordStatus s);
std::optional<RecordStatus> parseRecordStatus(std::string_view s);
// The tuner's categorized failures map onto statuses (InvalidConfig -> invalid-config, ...);
// categories that are not candidate outcomes map to Crash.
RecordStatus recordStatusFromError(ErrorCode c);

struct Record {
  HardKey key;
  std::string key_id;  // sha256 hex of the canonical hard key; set by finalizeRecord/decodeRecord
  Provenance provenance;
  std::string config = "{}";  // the schedule decisions: a JSON object, stored canonicalized
  RecordStatus status = RecordStatus::Ok;
  int64_t n = 0;  // samples behind the summary
  double median_us = 0, p20_us = 0, p80_us = 0;
  double gflops = 0, gbps = 0, peak_fraction = 0;
  double max_abs_err = 0, max_rel_err = 0;
  int64_t trials = 0;         // tuning cost: candidates measured for this key in the run
  double tuning_seconds = 0;  // tuning cost: wall time of the run
  // The winner of a tuning run after its final interleaved re-measurement (ARCHITECTURE.md §2.7), as
  // opposed to one candidate's single measurement during the search. Such a record outranks every
  // single measurement of its key: a lucky sample must not displace what the run confirmed.
  bool remeasured = false;
  // Status estimated only: the analytic model that predicted median_us (name/version, e.g.
  // "analytic-v1") and what bounds the prediction ("compute", "memory", "latency", "launch").
  // An estimate is never a measurement: it never wins a key and is always shown labelled.
  std::string estimator, bound;
  // Assigned by a store, never part of the record's identity (fingerprint) and never taken from
  // a client: read back from JSON for information only.
  int64_t id = 0;
  bool stale = false;        // measured with another toolchain than the store's current one
  std::string writer;        // name of the token that stored it on a service ("" locally)
  std::string received_at;   // when the store received it (UTC, created_at format)
  bool quarantined = false;  // set aside by an admin: kept, never served or a winner
  // Whose word the record stands on (trust.h): a claim until another identity's measurement of
  // the same key and config agrees with it (confirmed), or contradicts it (refuted); vouched when
  // an admin pinned it or the store's own machine measured it. The store's to decide.
  Trust trust = Trust::Claim;
  // Sent with the record, kept apart from it: the canonical IR text of the key's kernel
  // (kernel_text.h), which a store files in its kernel table under key.workload. Empty: not sent.
  std::string kernel_ir;
};

// Canonical text of a hard key and its SHA-256 (the key_id). Stable across versions: changing
// either orphans every stored record.
std::string canonicalKey(const HardKey& k);
std::string keyIdOf(const HardKey& k);
bool isKeyId(std::string_view s);  // 64 lowercase hex digits

// Sets key_id from the key and canonicalizes config; call before handing a record to a store
// built in code (decodeRecord does it for records read from JSON).
Status finalizeRecord(Record& r);

// Identity of a record's content (everything except id and stale): equal fingerprints mean the
// same measurement, which makes imports and retried submissions idempotent.
std::string fingerprint(const Record& r);

// "Better" = a winner candidate, then winnerRank (trust.h: confirmed before claims, then
// re-measured before single measurements), then a lower median; non-candidates are never better
// than anything. This is the winner rule of every store.
bool isBetter(const Record& a, const Record& b);
bool isWinnerCandidate(const Record& r);  // status ok and not refuted

// Toolchain triple compared for staleness (tessera, LLVM, CUDA/ROCm versions).
std::string toolchainOf(const Provenance& p);
// Staleness of one record, never of a key: true when a toolchain field set in `current`
// (tessera_version, llvm_version, cuda_version) differs from the record's. An empty `current`
// makes nothing stale; what other records of the key say never matters.
bool staleAgainst(const Provenance& recorded, const Provenance& current);
// Names of the soft-provenance fields of `recorded` that differ from the non-empty fields of
// `current` (tessera_version, llvm_version, cuda_version, cpu_model); empty = fresh.
std::vector<std::string> provenanceMismatch(const Provenance& recorded, const Provenance& current);

// Why a stored record does not answer for `asked`: each key field that differs, as
// "threads 1 (asked 2)", "shape 64x64x32 (asked 64x64x64)", "another workload of the family", in
// key order. Host units are threads (`--threads`), GPU units SMs/CUs. Empty for equal keys.
std::vector<std::string> keyDifferences(const HardKey& asked, const HardKey& stored);

// Nearest-shape distance: sum over dims of |log(a/b)|; nullopt for different ranks.
std::optional<double> shapeDistance(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

// "1024x1024x512" <-> {1024, 1024, 512}.
std::string formatShape(const std::vector<int64_t>& s);
Expected<std::vector<int64_t>> parseShape(std::string_view s);

// Current UTC time in the created_at format; validity check for that format.
std::string utcNow();
bool isUtcTimestamp(std::string_view s);

// JSON wire form (one record). Decoding validates field by field and reports the first problem
// as "<path>: <what is wrong>" with ErrorCode::InvalidArgument; unknown fields are refused so a
// typo never silently drops a measurement. The store-assigned fields (id, stale) are optional and
// read back for information (stores assign their own); a key_id on input must match the key.
Expected<Record> decodeRecord(std::string_view json_text);
std::string encodeRecord(const Record& r);

// Limits shared by the decoder and the HTTP layer.
inline constexpr size_t kMaxConfigBytes = 16 * 1024;
inline constexpr int kMaxJsonDepth = 32;
// Rejects JSON text nested deeper than max_depth without parsing it (deep nesting is how a
// recursive parser or destructor is made to overflow its stack).
bool jsonDepthWithin(std::string_view text, int max_depth);
// The parsed tree of a JSON text costs about 50 bytes per value: "1,1,1,..." makes 22 bytes of
// memory of every byte of text. No request of the API needs this many values (1000 records are
// about 40,000), so parseJson refuses more before it builds anything.
inline constexpr size_t kMaxJsonValues = 500'000;
// Counts the values of a JSON text (without parsing it) up to `max`; false when there are more.
bool jsonValuesWithin(std::string_view text, size_t max);

}  // namespace tessera::cache
