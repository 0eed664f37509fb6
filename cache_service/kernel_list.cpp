// Owns the overview rule (kernel_list.h): labels, search words, and the SQL text both engines run.
#include "cache_service/kernel_list.h"

#include <cctype>

namespace tessera::cache {

std::optional<KernelLabel> parseKernelLabel(std::string_view s) {
  if (s == "any" || s.empty()) return KernelLabel::Any;
  if (s == "measured") return KernelLabel::Measured;
  if (s == "estimated") return KernelLabel::Estimated;
  if (s == "failed") return KernelLabel::Failed;
  if (s == "quarantined") return KernelLabel::Quarantined;
  return std::nullopt;
}

Expected<std::vector<std::string>> searchWords(std::string_view text) {
  std::vector<std::string> words;
  std::string cur;
  auto flush = [&] {
    if (!cur.empty()) words.push_back(std::move(cur));
    cur.clear();
  };
  for (char ch : text) {
    if (ch == ' ') flush();
    else cur += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  }
  flush();
  if (words.size() > kMaxSearchWords)
    return makeError(ErrorCode::InvalidArgument,
                     "q: at most " + std::to_string(kMaxSearchWords) + " words (got " + std::to_string(words.size()) + ")");
  return words;
}

namespace {

// The text a search word is looked for in, one SQL expression for both engines.
constexpr const char* kKeyText =
    "lower(k.family || ' ' || k.shape || ' ' || k.dtype || ' ' || k.layout || ' ' || k.target || ' ' || "
    "k.arch || ' ' || CAST(k.units AS TEXT) || ' ' || k.key_id || ' ' || k.workload)";
constexpr const char* kHasEstimate =
    "EXISTS (SELECT 1 FROM records e WHERE e.key_id = k.key_id AND e.status = 'estimated' AND e.quarantined = 0)";
constexpr const char* kHasRecord = "EXISTS (SELECT 1 FROM records e WHERE e.key_id = k.key_id AND e.quarantined = 0)";

}  // namespace

std::string KernelSql::where(const KernelQuery& q, std::vector<std::string>& params) const {
  auto param = [&](std::string v) {
    params.push_back(std::move(v));
    return numbered ? "$" + std::to_string(params.size()) : std::string("?");
  };
  std::string w = " WHERE ";
  switch (q.label) {
    case KernelLabel::Any: w += "1 = 1"; break;
    case KernelLabel::Measured: w += "k.winner_id IS NOT NULL"; break;
    case KernelLabel::Estimated: w += std::string("k.winner_id IS NULL AND ") + kHasEstimate; break;
    case KernelLabel::Failed:
      w += std::string("k.winner_id IS NULL AND NOT ") + kHasEstimate + " AND " + kHasRecord;
      break;
    case KernelLabel::Quarantined: w += std::string("k.winner_id IS NULL AND NOT ") + kHasRecord; break;
  }
  // Column names come from this fixed table, never from the request.
  for (auto [col, val] : {std::pair<const char*, const std::string*>{"k.key_id", &q.key_id}, {"k.family", &q.family},
                          {"k.dtype", &q.dtype}, {"k.target", &q.target}})
    if (!val->empty()) w += std::string(" AND ") + col + " = " + param(*val);
  // instr/strpos rather than LIKE: a word's % or _ is then plain text, with nothing to escape.
  for (const std::string& word : q.words)
    w += std::string(" AND ") + (numbered ? "strpos(" : "instr(") + kKeyText + ", " + param(word) + ") > 0";
  return w;
}

std::string KernelSql::orderBy(KernelOrder o) {
  if (o == KernelOrder::Kernel)
    return " ORDER BY k.family, k.dtype, k.target, k.arch, k.rank, k.shape, k.key_id";
  // The winner's id is a column; only keys without one cost an index seek. Every key has a record
  // (a key row goes with its last record), so the newest id is never NULL.
  return " ORDER BY coalesce(k.winner_id, (SELECT max(r.id) FROM records r WHERE r.key_id = k.key_id)) DESC, k.key_id";
}

std::string KernelSql::countRecords() const {
  return std::string("SELECT count(*) FROM records r WHERE r.key_id = ") + (numbered ? "$1" : "?") +
         " AND r.quarantined = 0";
}

}  // namespace tessera::cache
