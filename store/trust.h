// Owns the trust rule of measurements (docs/team.md, "The trust model"): a record a writer or a
// worker sends is a claim; it becomes a confirmed measurement when another identity's measurement
// of the same key and config agrees with it within the noise (or an admin pins it, the writer is
// an admin-designated measuring identity, or the store's own machine measured it), a refuted one
// when another identity measured that config clearly slower (timesAgree, contradicts), and a
// disputed one when a reader's own run refuted it. The tiers served to readers follow from it
// (tierOf: reproduced, claim, estimate). Reproduced records outrank every claim, claims every
// disputed claim; refuted ones never win. The rule is written here once, in C++ (settleTrust,
// winnerRank) for the store core and clients, and as SQL fragments of the same rule that both SQL
// engines (SQLite, PostgreSQL) splice into their queries.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera::cache {

// Stored as an integer (records.trust); the order matters (higher is more trusted).
enum class Trust : int {
  Disputed = -2,  // a claim a reader's own run refuted (wrong, unrunnable, far slower): a candidate
                  // below every claim until another identity reproduces it
  Refuted = -1,   // another identity measured this config slower by more than the noise: never a winner
  Claim = 0,      // one identity's word (a writer's or a worker's), not yet confirmed by anyone else
  Confirmed = 1,  // another identity's measurement of the same key and config agrees within the noise
  Vouched = 2,    // pinned by an admin, written by an admin-designated measuring identity
                  // (`serve --measuring-token`), or measured by the store's own machine (a local store)
};
std::string_view trustName(Trust t);  // disputed | refuted | claim | confirmed | vouched
std::optional<Trust> parseTrust(std::string_view s);
inline bool isConfirmed(Trust t) { return t == Trust::Confirmed || t == Trust::Vouched; }

// What a reader is served, best tier first: a record measured and reproduced (two identities
// agree, an admin-designated measuring identity, an admin's pin, the reader's own machine), one
// identity's claim (disputed ones included, labelled by their trust), or the analytic model's
// estimate (nothing ran). A reader that asks for reproduced only (`--trust reproduced`,
// `?trust=reproduced`) is never served a claim.
enum class Tier : int { Estimate = 0, Claim = 1, Reproduced = 2 };
Tier tierOf(Trust t, bool estimated);
std::string_view tierName(Tier t);  // estimate | claim | reproduced
std::optional<Tier> parseTier(std::string_view s);

// Two medians of one config agree when the larger is at most `factor` times the smaller: 1.5
// leaves room for the run-to-run noise of a shared machine (5-10 % here) and for two machines of
// one key. A measurement contradicts a claim only when it is slower by more than factor^2 (2.25x):
// between the two lies a gray zone where a record is neither confirmed nor refuted, so that a
// measurement taken on a busy machine (a worker sharing its cores, a client under load) does not
// refute an honest one, while a lie of an order of magnitude never passes. A claim slower than the
// truth harms no one and is never contradicted.
inline constexpr double kDefaultAgreeFactor = 1.5;
bool timesAgree(double a_us, double b_us, double factor = kDefaultAgreeFactor);
bool contradicts(double claimed_us, double measured_us, double factor = kDefaultAgreeFactor);
// The factor a spot check of a host worker is judged with (issue 47: like with like): the noise's
// when the checking machine is the worker's model, else kOtherModelAgreeFactor, room for another
// CPU of the key's ISA level and threads (a contradiction past 4x: clock, caches and memory of two
// such CPUs differ by less; a lie of an order of magnitude does not pass). GPU keys name their
// hardware (architecture and SMs) and keep the noise's factor.
inline constexpr double kOtherModelAgreeFactor = 2.0;
double spotCheckFactor(const std::string& target, const std::string& worker_model, const std::string& checker_model,
                       double agree_factor = kDefaultAgreeFactor);

// One ok, unquarantined record of a key and config, as the rule sees it. The identity is the
// writer: the token name on a service ("" is the store's own machine in a local store).
struct Measurement {
  int64_t id = 0;
  std::string writer;
  double median_us = 0;
  Trust trust = Trust::Claim;
  // Measured by a worker (not a designated measuring identity) on a job of another token: the
  // service cannot tell whether the worker's token and a claim's writer are one person, so the
  // record stays a claim whoever agrees with it, and it confirms or refutes nobody (the submitter's
  // spot check judges it). It can be refuted.
  bool by_worker = false;
};
// The trust each record of one group (same key and config, ok and unquarantined) should have:
// vouched stays vouched; otherwise confirmed when a record of another writer agrees with it,
// refuted when one of another writer contradicts it, else a claim; records by workers confirm and
// refute nothing and are never confirmed. Returns the
// records whose trust changes, with the new value.
std::vector<std::pair<int64_t, Trust>> settleTrust(const std::vector<Measurement>& group,
                                                   double factor = kDefaultAgreeFactor);
// Records of a group the engines read to settle it, newest first; older ones keep what they had.
inline constexpr int kTrustGroupLimit = 256;
// The same over every config of one key (after an admin action): the records grouped by config.
struct ConfigMeasurement {
  std::string config;
  Measurement m;
};
std::vector<std::pair<int64_t, Trust>> settleKey(const std::vector<ConfigMeasurement>& records,
                                                 double factor = kDefaultAgreeFactor);
inline constexpr int kTrustKeyLimit = 4096;

// Winner order: reproduced (confirmed or vouched) records before claims, claims before disputed
// claims; among reproduced records a tuning run's re-measured winner before single measurements
// (among claims the flag counts for nothing: one identity re-measuring its own claim is still its
// word); then the lower median, then the older record. nullopt: not a candidate (refuted).
// isBetter (record.h) compares with it.
std::optional<int> winnerRank(Trust t, bool remeasured);

// The same rule in SQL, over a records table aliased `r` whose trust column holds Trust values and
// whose remeasured column is 0/1. Both SQL engines use exactly these texts.
// 1 for a record a worker measured for a job's submitter (records.measured_for), else 0: such a
// record neither confirms nor refutes another and is never confirmed itself (Measurement::by_worker).
inline constexpr const char* kByWorkerSql = "(CASE WHEN measured_for <> '' THEN 1 ELSE 0 END)";
inline constexpr const char* kCandidateSql = "r.status = 'ok' AND r.quarantined = 0 AND r.trust <> -1";
#define TESSERA_RANK_SQL "(CASE WHEN r.trust > 0 THEN 2 + r.remeasured WHEN r.trust = 0 THEN 0 ELSE -1 END)"
inline constexpr const char* kRankSql = TESSERA_RANK_SQL;
inline constexpr const char* kWinnerOrderSql = TESSERA_RANK_SQL " DESC, r.median_us ASC, r.id ASC";
#undef TESSERA_RANK_SQL

}  // namespace tessera::cache
