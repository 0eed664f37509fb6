// Owns the overview of a store (the dashboard's first page, issue 28): one row per tuned kernel
// (hard key) with the record that represents it, filtered, searched, ordered and paged by the
// store, so a store of a million records answers a page without reading them all. The rule is
// written once here (which record a key shows, what each label means, the SQL both engines run);
// the engines differ only in placeholders and one string function.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "store/record.h"

namespace tessera::cache {

// What a key shows: its winner (the best ok, unquarantined record) when it has one ("measured");
// else its fastest unquarantined estimate ("estimated"); else nothing: "failed" when it has only
// failed candidates, "quarantined" when an admin set all its records aside (listed, so the
// overview counts keys without reading their records; its records stay unlisted).
enum class KernelLabel { Any, Measured, Estimated, Failed, Quarantined };
// measured|estimated|failed|quarantined|any
std::optional<KernelLabel> parseKernelLabel(std::string_view s);

enum class KernelOrder {
  Recent,  // newest shown record first: the winner's id, else the key's newest record
  Kernel,  // family, dtype, target, arch, rank, shape text, key_id (the keys_near index's order)
  Arrived,   // the key whose newest record the store received last first (any record, winner or not)
  Measured,  // the key with the newest measured time (its records' provenance created_at) first
};

inline constexpr int kMaxKernelPage = 200;
inline constexpr size_t kMaxSearchWords = 8;

struct KernelQuery {
  std::string key_id, family, dtype, target;  // exact matches; empty: any
  // A person's filters (the dashboard): family, dtype and target compared without case, and the
  // target as a prefix (sm_90 finds sm_90 and sm_90a). Off for programs that want one target.
  bool loose = false;
  // Each word (already lower-cased, at most kMaxSearchWords) must occur in the key's text:
  // "family shape dtype layout target arch units key_id workload" (shape as 1024x1024x512): a
  // key id or workload hash prefix (`tessera run` prints 12 characters) finds its keys; or in the
  // kernel's stored IR text (an expression: gelu, exp); or the word names GPU products and the
  // key is for one of their chips (word_chips, parallel to words: h100 finds sm_90 and sm_90a).
  std::vector<std::string> words;
  std::vector<std::vector<std::string>> word_chips;
  KernelLabel label = KernelLabel::Any;
  KernelOrder order = KernelOrder::Recent;
  int64_t offset = 0;
  int limit = 50;  // 1..kMaxKernelPage
};

struct KernelRow {
  HardKey key;
  std::string key_id;
  KernelLabel label = KernelLabel::Failed;  // any but Any
  std::optional<Record> shown;              // the winner or the fastest estimate
  int64_t records = 0;                      // unquarantined records of the key
  int64_t newest_id = 0;                    // its newest unquarantined record (the store's arrival order)
  std::string newest_measured;              // the latest created_at of its unquarantined records
};

struct KernelPage {
  std::vector<KernelRow> rows;
  int64_t total = 0;  // keys matching the query (all pages)
};

// Lower-cases a search box's text and splits it into words at spaces (at most kMaxSearchWords;
// more is an error naming the limit).
Expected<std::vector<std::string>> searchWords(std::string_view text);

// The chips of the GPU products a search word names (targets/gpu_skus.h: a product's name or an
// alias contains the word, compared without case, spaces or dashes), with the arch-specific
// variant a product also runs (sm_90a for an H100). Only words with a letter and a digit name
// products ("h100", "mi300", "a100"), so a shape's number never turns into a GPU.
std::vector<std::string> productChips(std::string_view word);

// The SQL both engines run. `numbered` picks $1-style placeholders (PostgreSQL) over `?` (SQLite).
// where(): the WHERE clause over `keys k` (params appended to `params`, all text); orderBy(): the
// ORDER BY clause; the statements that fill a row take the key_id as their only parameter.
struct KernelSql {
  bool numbered = false;
  std::string where(const KernelQuery& q, std::vector<std::string>& params) const;
  static std::string orderBy(KernelOrder o);
  // The key columns read for every listed key, in this order: key_id, family, workload, shape,
  // dtype, layout, target, arch, units, winner_id (NULL: none).
  static constexpr const char* kKeyColumns =
      "k.key_id, k.family, k.workload, k.shape, k.dtype, k.layout, k.target, k.arch, k.units, k.winner_id";
  // count(*), max(id), max(created_at) of a key's unquarantined records
  std::string countRecords() const;
};

}  // namespace tessera::cache
