// Owns the in-memory RecordStore used by tests and tools: the same merge, staleness and paging
// rules as the SQLite store, kept in plain containers under one mutex.
#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>

#include "cache_service/store.h"

namespace tessera::cache {

namespace {

class MemoryStore final : public RecordStore {
 public:
  Expected<std::vector<PutResult>> put(std::span<const Record> records,
                                       const PutOptions& opts) override {
    std::lock_guard<std::mutex> g(mu_);
    for (const Record& r : records)
      if (r.key_id.empty() || r.key_id != keyIdOf(r.key))
        return makeError(ErrorCode::InvalidArgument, "record not finalized (key_id missing or wrong)");
    std::vector<PutResult> out;
    for (const Record& r : records) out.push_back(putLocked(r, opts));
    return out;
  }

  Expected<ServedRecordPtr> best(std::string_view key_id) override {
    std::lock_guard<std::mutex> g(mu_);
    auto it = keys_.find(std::string(key_id));
    if (it == keys_.end() || it->second.winner == 0) return ServedRecordPtr{};
    auto served = std::make_shared<ServedRecord>();
    served->record = records_.at(it->second.winner);
    served->json = encodeRecord(served->record);
    return ServedRecordPtr(std::move(served));
  }

  Expected<ListPage> list(const ListQuery& q) override {
    std::lock_guard<std::mutex> g(mu_);
    const size_t limit = static_cast<size_t>(std::clamp(q.limit, 1, kMaxListLimit));
    auto match = [&](const Record& r) {
      auto eq = [](const std::string& want, const std::string& have) {
        return want.empty() || want == have;
      };
      return eq(q.key_id, r.key_id) && eq(q.family, r.key.family) && eq(q.workload, r.key.workload) &&
             eq(q.dtype, r.key.dtype) && eq(q.layout, r.key.layout) && eq(q.target, r.key.target) &&
             eq(q.arch, r.key.arch) && eq(q.status, std::string(recordStatusName(r.status))) &&
             (!q.units || *q.units == r.key.units) &&
             (!q.winners_only || keys_.at(r.key_id).winner == r.id);
    };
    ListPage page;
    for (auto it = records_.upper_bound(q.after_id); it != records_.end(); ++it) {
      if (!match(it->second)) continue;
      if (page.records.size() == limit) {
        page.next_after = page.records.back().id;
        break;
      }
      page.records.push_back(it->second);
    }
    return page;
  }

  Expected<std::vector<NearestMatch>> nearest(const HardKey& key, int limit) override {
    std::lock_guard<std::mutex> g(mu_);
    std::vector<NearestMatch> out;
    for (const auto& [id, k] : keys_) {
      if (k.winner == 0) continue;
      const Record& w = records_.at(k.winner);
      if (w.key.family != key.family || w.key.dtype != key.dtype || w.key.target != key.target ||
          w.key.arch != key.arch)
        continue;
      if (auto d = shapeDistance(key.shape, w.key.shape)) out.push_back({w, *d});
    }
    auto rank = [&](const NearestMatch& m) {
      return std::make_tuple(m.distance, m.record.key.layout != key.layout, m.record.median_us,
                             m.record.id);
    };
    std::sort(out.begin(), out.end(), [&](const auto& a, const auto& b) { return rank(a) < rank(b); });
    if (static_cast<int>(out.size()) > limit) out.resize(static_cast<size_t>(std::max(limit, 0)));
    return out;
  }

  Expected<std::vector<Record>> exportSince(int64_t after_id, int limit) override {
    std::lock_guard<std::mutex> g(mu_);
    std::vector<Record> out;
    for (auto it = records_.upper_bound(after_id);
         it != records_.end() && static_cast<int>(out.size()) < limit; ++it)
      out.push_back(it->second);
    return out;
  }

  Expected<std::vector<Record>> outbox(int limit) override {
    std::lock_guard<std::mutex> g(mu_);
    std::vector<Record> out;
    for (int64_t id : unpushed_) {
      if (static_cast<int>(out.size()) >= limit) break;
      out.push_back(records_.at(id));
    }
    return out;
  }

  Status markPushed(std::span<const int64_t> ids) override {
    std::lock_guard<std::mutex> g(mu_);
    for (int64_t id : ids) unpushed_.erase(id);
    return {};
  }

  Expected<StoreStats> stats() override {
    std::lock_guard<std::mutex> g(mu_);
    StoreStats s;
    s.records = static_cast<int64_t>(records_.size());
    s.keys = static_cast<int64_t>(keys_.size());
    for (const auto& [id, k] : keys_) {
      if (k.winner == 0) continue;
      ++s.winners;
      if (records_.at(k.winner).stale) ++s.stale_winners;
    }
    s.outbox = static_cast<int64_t>(unpushed_.size());
    s.last_id = records_.empty() ? 0 : records_.rbegin()->first;
    return s;
  }

  Status backup(const std::string&) override {
    return makeError(ErrorCode::Unsupported, "the in-memory store has no backup");
  }
  Status ping() override { return {}; }

 private:
  struct KeyState {
    int64_t winner = 0;
    std::string newest_at, newest_tc;
    std::vector<int64_t> ids;
  };

  PutResult putLocked(const Record& in, const PutOptions& opts) {
    PutResult res;
    res.key_id = in.key_id;
    std::string fp = fingerprint(in);
    if (auto it = by_fp_.find(fp); it != by_fp_.end()) {
      res.id = it->second;
      res.duplicate = true;
      return res;
    }
    Record r = in;
    r.id = ++last_id_;
    r.stale = false;
    by_fp_.emplace(std::move(fp), r.id);
    if (opts.outbox) unpushed_.insert(r.id);
    KeyState& k = keys_[r.key_id];
    k.ids.push_back(r.id);
    const std::string tc = toolchainOf(r.provenance);
    if (std::tie(r.provenance.created_at, tc) > std::tie(k.newest_at, k.newest_tc)) {
      const bool flip = tc != k.newest_tc && !k.newest_at.empty();
      k.newest_at = r.provenance.created_at;
      k.newest_tc = tc;
      if (flip)
        for (int64_t id : k.ids)
          if (id != r.id) records_.at(id).stale = toolchainOf(records_.at(id).provenance) != tc;
    } else {
      r.stale = tc != k.newest_tc;
    }
    if (isWinnerCandidate(r)) {
      if (k.winner == 0) {
        res.outcome = PutOutcome::Inserted;
        k.winner = r.id;
      } else if (isBetter(r, records_.at(k.winner))) {
        res.outcome = PutOutcome::Improved;
        k.winner = r.id;
      }
    }
    res.id = r.id;
    records_.emplace(r.id, std::move(r));
    return res;
  }

  std::mutex mu_;
  std::map<int64_t, Record> records_;
  std::unordered_map<std::string, KeyState> keys_;
  std::unordered_map<std::string, int64_t> by_fp_;
  std::set<int64_t> unpushed_;
  int64_t last_id_ = 0;
};

}  // namespace

std::unique_ptr<RecordStore> makeMemoryStore() { return std::make_unique<MemoryStore>(); }

}  // namespace tessera::cache
