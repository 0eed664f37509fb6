// Owns the in-memory RecordStore used by tests and tools: the same staleness and paging rules as
// the SQLite store, kept in plain containers under one mutex; what a record's arrival decides is
// the stores' one rule (store_core.h's admitRecord), only the containers are this file's.
#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <tuple>
#include <unordered_map>

#include "cache_service/kernel_text.h"
#include "cache_service/outbox.h"
#include "cache_service/store.h"
#include "cache_service/store_core.h"

namespace tessera::cache {

namespace {

class MemoryStore final : public RecordStore, public Outbox {
 public:
  explicit MemoryStore(Provenance current) : current_(std::move(current)) {}

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
    return serve(records_.at(it->second.winner));
  }

  Expected<ServedRecordPtr> bestMatching(std::string_view key_id, const Provenance& want) override {
    std::lock_guard<std::mutex> g(mu_);
    auto it = keys_.find(std::string(key_id));
    if (it == keys_.end()) return ServedRecordPtr{};
    auto eq = [](const std::string& w, const std::string& have) { return w.empty() || w == have; };
    const Record* bestRec = nullptr;
    for (int64_t id : it->second.ids) {
      const Record& r = records_.at(id);
      if (!eligible(r) || !eq(want.tessera_version, r.provenance.tessera_version) ||
          !eq(want.llvm_version, r.provenance.llvm_version) || !eq(want.cuda_version, r.provenance.cuda_version) ||
          !eq(want.cpu_model, r.provenance.cpu_model))
        continue;
      if (!bestRec || isBetter(r, *bestRec)) bestRec = &r;
    }
    return bestRec ? serve(*bestRec) : ServedRecordPtr{};
  }

  Expected<int64_t> administer(const RecordSelector& sel, AdminAction action, double agree_factor) override {
    std::lock_guard<std::mutex> g(mu_);
    if (sel.empty()) return int64_t{0};
    auto selected = [&](const Record& r) {
      return (sel.ids.empty() || std::find(sel.ids.begin(), sel.ids.end(), r.id) != sel.ids.end()) &&
             (sel.key_id.empty() || r.key_id == sel.key_id) && (sel.writer.empty() || r.writer == sel.writer) &&
             (sel.since.empty() || r.received_at >= sel.since) && (sel.until.empty() || r.received_at < sel.until);
    };
    // adminActionWhere's conditions (this store keeps no tokens, so none is revoked).
    auto applies = [&](const Record& r) {
      switch (action) {
        case AdminAction::Quarantine: return !r.quarantined;
        case AdminAction::Release: return r.quarantined;
        case AdminAction::Pin: return r.status == RecordStatus::Ok && !r.quarantined && r.trust != Trust::Vouched;
        case AdminAction::Unpin: return r.trust == Trust::Vouched;
        default: return true;
      }
    };
    int64_t n = 0;
    std::set<std::string> touched;
    for (auto it = records_.begin(); it != records_.end();) {
      Record& r = it->second;
      if (!selected(r) || !applies(r)) {
        ++it;
        continue;
      }
      ++n;
      if (action == AdminAction::Count) {
        ++it;
        continue;
      }
      touched.insert(r.key_id);
      if (action == AdminAction::Delete) {
        auto& ids = keys_[r.key_id].ids;
        ids.erase(std::remove(ids.begin(), ids.end(), r.id), ids.end());
        by_fp_.erase(fingerprint(r));
        unpushed_.erase(r.id);
        it = records_.erase(it);
        continue;
      }
      if (action == AdminAction::Quarantine || action == AdminAction::Release)
        r.quarantined = action == AdminAction::Quarantine;
      else
        r.trust = action == AdminAction::Pin ? Trust::Vouched : Trust::Claim;
      ++it;
    }
    for (const std::string& key : touched) {
      KeyState& k = keys_[key];
      std::vector<ConfigMeasurement> group;
      for (int64_t id : k.ids) {
        const Record& r = records_.at(id);
        if (r.status == RecordStatus::Ok && !r.quarantined) group.push_back({r.config, {r.id, r.writer, r.median_us, r.trust}});
      }
      for (const auto& [id, t] : settleKey(group, agree_factor)) records_.at(id).trust = t;
      recompute(k);
      if (k.ids.empty()) keys_.erase(key);
    }
    return n;
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
             (!q.winners_only || keys_.at(r.key_id).winner == r.id) && eq(q.writer, r.writer) &&
             (q.since.empty() || r.received_at >= q.since) && (q.until.empty() || r.received_at < q.until) &&
             (q.quarantine == QuarantineFilter::Include ||
              r.quarantined == (q.quarantine == QuarantineFilter::Only));
    };
    ListPage page;
    auto take = [&](const Record& r) {
      if (!match(r)) return true;
      if (page.records.size() == limit) {
        page.next_after = page.records.back().id;
        return false;
      }
      page.records.push_back(withStale(r));
      return true;
    };
    if (q.newest_first) {
      auto end = q.after_id > 0 ? records_.lower_bound(q.after_id) : records_.end();
      for (auto it = std::make_reverse_iterator(end); it != records_.rend() && take(it->second); ++it) {
      }
    } else {
      for (auto it = records_.upper_bound(q.after_id); it != records_.end() && take(it->second); ++it) {
      }
    }
    return page;
  }

  Expected<KernelPage> kernels(const KernelQuery& q) override {
    std::lock_guard<std::mutex> g(mu_);
    struct Listed {
      KernelRow row;
      int64_t newest = 0;
    };
    std::vector<Listed> all;
    for (const auto& [key_id, k] : keys_) {
      Listed l;
      const Record* estimate = nullptr;
      for (int64_t id : k.ids) {
        const Record& r = records_.at(id);
        l.newest = std::max(l.newest, id);
        if (r.quarantined) continue;
        ++l.row.records;
        if (r.status == RecordStatus::Estimated &&
            (!estimate || r.median_us < estimate->median_us || (r.median_us == estimate->median_us && r.id < estimate->id)))
          estimate = &r;
      }
      l.row.label = k.winner   ? KernelLabel::Measured
                    : estimate ? KernelLabel::Estimated
                    : l.row.records ? KernelLabel::Failed
                                    : KernelLabel::Quarantined;
      if (q.label != KernelLabel::Any && q.label != l.row.label) continue;
      const Record& any = records_.at(k.ids.front());
      if (!kernelMatches(q, any.key, key_id)) continue;
      if (k.winner) l.newest = k.winner;
      l.row.key = any.key;
      l.row.key_id = key_id;
      if (k.winner) l.row.shown = withStale(records_.at(k.winner));
      else if (estimate) l.row.shown = withStale(*estimate);
      all.push_back(std::move(l));
    }
    auto kernelOrder = [](const Listed& a, const Listed& b) {
      const HardKey &x = a.row.key, &y = b.row.key;
      return std::forward_as_tuple(x.family, x.dtype, x.target, x.arch, x.shape.size(), formatShape(x.shape), a.row.key_id) <
             std::forward_as_tuple(y.family, y.dtype, y.target, y.arch, y.shape.size(), formatShape(y.shape), b.row.key_id);
    };
    std::sort(all.begin(), all.end(), [&](const Listed& a, const Listed& b) {
      if (q.order == KernelOrder::Kernel) return kernelOrder(a, b);
      return a.newest != b.newest ? a.newest > b.newest : a.row.key_id < b.row.key_id;
    });
    KernelPage page;
    page.total = static_cast<int64_t>(all.size());
    const size_t from = static_cast<size_t>(std::clamp<int64_t>(q.offset, 0, page.total));
    const size_t n = std::min(all.size() - from, static_cast<size_t>(std::clamp(q.limit, 1, kMaxKernelPage)));
    for (size_t i = from; i < from + n; ++i) page.rows.push_back(std::move(all[i].row));
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
      if (auto d = shapeDistance(key.shape, w.key.shape)) out.push_back({withStale(w), *d});
    }
    rankNearest(key, out, limit);
    return out;
  }

  Expected<std::vector<Record>> exportSince(int64_t after_id, int limit) override {
    std::lock_guard<std::mutex> g(mu_);
    std::vector<Record> out;
    for (auto it = records_.upper_bound(after_id);
         it != records_.end() && static_cast<int>(out.size()) < limit; ++it)
      if (!it->second.quarantined) out.push_back(withStale(it->second));
    return out;
  }

  Outbox* outbox() override { return this; }
  Expected<std::vector<Record>> pending(int limit) override {
    std::lock_guard<std::mutex> g(mu_);
    std::vector<Record> out;
    for (int64_t id : unpushed_) {
      if (static_cast<int>(out.size()) >= limit) break;
      out.push_back(withStale(records_.at(id)));
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
      if (staleAgainst(records_.at(k.winner).provenance, current_)) ++s.stale_winners;
    }
    for (const auto& [id, r] : records_) s.quarantined += r.quarantined;
    s.outbox = static_cast<int64_t>(unpushed_.size());
    s.last_id = records_.empty() ? 0 : records_.rbegin()->first;
    return s;
  }

  Status backup(const std::string&) override {
    return makeError(ErrorCode::Unsupported, "the in-memory store has no backup");
  }
  Status ping() override { return {}; }
  Status putKernelText(const std::string& workload, const std::string& text) override {
    TESSERA_TRY(checkKernelText(workload, text));
    std::lock_guard<std::mutex> g(textsMu_);
    texts_.emplace(workload, text);
    return {};
  }
  Expected<std::optional<std::string>> kernelText(const std::string& workload) override {
    std::lock_guard<std::mutex> g(textsMu_);
    auto it = texts_.find(workload);
    if (it == texts_.end()) return std::optional<std::string>();
    return std::optional<std::string>(it->second);
  }
  Expected<std::vector<std::string>> kernelTextWorkloads(const std::string& prefix, int limit) override {
    std::lock_guard<std::mutex> g(textsMu_);
    std::vector<std::string> out;
    for (auto it = texts_.lower_bound(prefix); it != texts_.end() && it->first.starts_with(prefix) && int(out.size()) < limit; ++it)
      out.push_back(it->first);
    return out;
  }

 private:
  std::mutex textsMu_;
  std::map<std::string, std::string> texts_;  // the kernel table (kernel_text.h)
  struct KeyState {
    int64_t winner = 0;
    bool had_winner = false;  // "inserted" is the first winner a key ever has (until it has none again)
    std::vector<int64_t> ids;
  };

  static bool eligible(const Record& r) { return isWinnerCandidate(r) && !r.quarantined; }
  void recompute(KeyState& k) {
    k.winner = 0;
    for (int64_t id : k.ids) {
      const Record& r = records_.at(id);
      if (eligible(r) && (k.winner == 0 || isBetter(r, records_.at(k.winner)))) k.winner = id;
    }
    if (k.winner == 0) k.had_winner = false;
  }
  Record withStale(Record r) const {
    r.stale = staleAgainst(r.provenance, current_);
    return r;
  }
  ServedRecordPtr serve(const Record& r) const {
    auto served = std::make_shared<ServedRecord>();
    served->record = withStale(r);
    served->json = encodeRecord(served->record);
    return served;
  }

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
    r.writer = opts.writer;
    r.received_at = utcNow();
    r.quarantined = false;
    KeyState& k = keys_[r.key_id];
    const bool ok = r.status == RecordStatus::Ok;
    // The group of trust.h: ok, unquarantined records of the same config.
    std::vector<Measurement> group;
    if (ok)
      for (int64_t id : k.ids) {
        const Record& o = records_.at(id);
        if (o.status == RecordStatus::Ok && !o.quarantined && o.config == r.config)
          group.push_back({o.id, o.writer, o.median_us, o.trust});
      }
    core::Admission admitted = core::admitRecord(r, std::move(group), opts);
    r.remeasured = admitted.remeasured;
    r.trust = admitted.trust;
    for (const auto& [id, t] : admitted.others) records_.at(id).trust = t;
    const bool others = !admitted.others.empty();
    res.remeasured = r.remeasured;
    res.trust = r.trust;
    by_fp_.emplace(std::move(fp), r.id);
    if (opts.outbox) unpushed_.insert(r.id);
    k.ids.push_back(r.id);
    res.id = r.id;
    const int64_t before = k.winner;
    const bool first = k.winner == 0 && !k.had_winner;
    records_.emplace(r.id, std::move(r));
    if (others) {
      recompute(k);
    } else if (isWinnerCandidate(records_.at(res.id)) &&
               (k.winner == 0 || isBetter(records_.at(res.id), records_.at(k.winner)))) {
      k.winner = res.id;
    }
    if (k.winner == res.id && before != res.id) res.outcome = first ? PutOutcome::Inserted : PutOutcome::Improved;
    if (k.winner) k.had_winner = true;
    return res;
  }

  std::mutex mu_;
  std::map<int64_t, Record> records_;
  std::unordered_map<std::string, KeyState> keys_;
  std::unordered_map<std::string, int64_t> by_fp_;
  std::set<int64_t> unpushed_;
  int64_t last_id_ = 0;
  Provenance current_;
};

}  // namespace

std::unique_ptr<RecordStore> makeMemoryStore(const Provenance& current) {
  return std::make_unique<MemoryStore>(current);
}

}  // namespace tessera::cache
