// Owns the overview rule (kernel_list.h): labels, search words, and the SQL text both engines run.
#include "store/kernel_list.h"

#include <algorithm>
#include <cctype>

#include "targets/gpu_skus.h"

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

std::vector<std::string> productChips(std::string_view word) {
  const bool letter = std::any_of(word.begin(), word.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)); });
  const bool digit = std::any_of(word.begin(), word.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
  if (!letter || !digit) return {};
  // Product names are compared as the GPU table compares them: letters and digits only, no case.
  auto squash = [](std::string_view s) {
    std::string out;
    for (char c : s)
      if (std::isalnum(static_cast<unsigned char>(c))) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  const std::string w = squash(word);
  if (w.empty()) return {};
  std::vector<std::string> chips;
  auto add = [&](const std::string& c) {
    if (std::find(chips.begin(), chips.end(), c) == chips.end()) chips.push_back(c);
  };
  for (const GpuSku& s : gpuSkus()) {
    bool hit = squash(s.name).find(w) != std::string::npos;
    for (const auto& a : s.aliases) hit = hit || squash(a).find(w) != std::string::npos;
    if (!hit) continue;
    add(s.arch);
    if (chipRunsProduct(s.arch + "a", s)) add(s.arch + "a");
  }
  return chips;
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
  auto lower = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  // Column names come from this fixed table, never from the request.
  if (!q.key_id.empty()) w += " AND k.key_id = " + param(q.key_id);
  for (auto [col, val] : {std::pair<const char*, const std::string*>{"k.family", &q.family}, {"k.dtype", &q.dtype}})
    if (!val->empty()) w += q.loose ? std::string(" AND lower(") + col + ") = " + param(lower(*val)) : std::string(" AND ") + col + " = " + param(*val);
  if (!q.target.empty()) {
    // The length is a number this code prints; the prefix itself is a parameter.
    w += q.loose ? " AND substr(lower(k.target), 1, " + std::to_string(q.target.size()) + ") = " + param(lower(q.target))
                 : " AND k.target = " + param(q.target);
  }
  // instr/strpos rather than LIKE: a word's % or _ is then plain text, with nothing to escape.
  const std::string find = numbered ? "strpos(" : "instr(";
  for (size_t i = 0; i < q.words.size(); ++i) {
    const std::string& word = q.words[i];
    w += " AND (" + find + kKeyText + ", " + param(word) + ") > 0";
    // The kernel's expression: its stored IR text (a kernel without one is found by its key only).
    w += " OR EXISTS (SELECT 1 FROM kernel_texts t WHERE t.workload = k.workload AND " + find + "lower(t.ir), " +
         param(word) + ") > 0)";
    if (i < q.word_chips.size())
      for (const std::string& chip : q.word_chips[i]) w += " OR k.target = " + param(chip);
    w += ")";
  }
  return w;
}

std::string KernelSql::orderBy(KernelOrder o) {
  // Arrival and measured time read each listed key's records through records_by_key (as the
  // record count does): the overview's cost grows with the records, not only the keys.
  if (o == KernelOrder::Arrived)
    return " ORDER BY coalesce((SELECT max(r.id) FROM records r WHERE r.key_id = k.key_id AND r.quarantined = 0), 0) DESC, k.key_id";
  if (o == KernelOrder::Measured)
    return " ORDER BY coalesce((SELECT max(r.created_at) FROM records r WHERE r.key_id = k.key_id AND r.quarantined = 0), '') DESC, k.key_id";
  if (o == KernelOrder::Kernel)
    return " ORDER BY k.family, k.dtype, k.target, k.arch, k.rank, k.shape, k.key_id";
  // The winner's id is a column; only keys without one cost an index seek. Every key has a record
  // (a key row goes with its last record), so the newest id is never NULL.
  return " ORDER BY coalesce(k.winner_id, (SELECT max(r.id) FROM records r WHERE r.key_id = k.key_id)) DESC, k.key_id";
}

std::string KernelSql::countRecords() const {
  return std::string("SELECT count(*), coalesce(max(r.id), 0), coalesce(max(r.created_at), '') FROM records r WHERE r.key_id = ") + (numbered ? "$1" : "?") +
         " AND r.quarantined = 0";
}

}  // namespace tessera::cache
