// Owns the kernel digest (dashboard_digest.h): one pass over a key's records, kept compact (a few
// numbers per record, knob values interned), then bounded views of it.
#include "service/dashboard_digest.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <map>
#include <unordered_map>

#include "store/record_json.h"

namespace tessera::cache {

using nlohmann::json;

namespace {

struct Row {
  int64_t id = 0;
  RecordStatus status = RecordStatus::Ok;
  double median = 0;
  int64_t trial = 0;
  double received = 0, measured = 0;  // seconds since the epoch (0: unknown)
  std::string config, writer;          // for the points a chart keeps (hover, time against a knob)
};

bool timed(RecordStatus s) { return s == RecordStatus::Ok || s == RecordStatus::Estimated; }

double epochOf(const std::string& utc) {
  std::tm tm{};
  if (utc.size() != 20 || !strptime(utc.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm)) return 0;
  return static_cast<double>(timegm(&tm));
}

struct KnobValue {
  bool numeric = true;
  std::vector<double> measured, predicted;  // ok medians, estimated medians
};
using Knobs = std::map<std::string, std::map<std::string, KnobValue>>;

double medianOf(std::vector<double> xs) {
  const size_t n = xs.size();
  std::sort(xs.begin(), xs.end());
  return n % 2 ? xs[n / 2] : (xs[n / 2 - 1] + xs[n / 2]) / 2;
}

// Per knob with two or more values: each value's median (as the page's table shows it), the best
// and worst, their spread, and the share of the variance of log time the knob's values explain
// (a one-way analysis of variance: the first-order term of a functional ANOVA).
json knobEffects(const Knobs& knobs, bool predicted) {
  json out = json::array();
  for (const auto& [knob, values] : knobs) {
    std::vector<std::pair<std::string, const KnobValue*>> vals;
    for (const auto& [v, kv] : values)
      if (!(predicted ? kv.predicted : kv.measured).empty()) vals.emplace_back(v, &kv);
    if (vals.size() < 2) continue;
    const bool numeric = std::all_of(vals.begin(), vals.end(), [](auto& p) { return p.second->numeric; });
    if (numeric) std::sort(vals.begin(), vals.end(), [](auto& a, auto& b) { return std::stod(a.first) < std::stod(b.first); });
    double sum = 0, n = 0;
    for (auto& [v, kv] : vals)
      for (double t : predicted ? kv->predicted : kv->measured) sum += std::log(t), n += 1;
    const double mean = sum / n;
    double total = 0, between = 0;
    json jv = json::array();
    size_t best = 0, worst = 0;
    std::vector<double> medians;
    for (size_t i = 0; i < vals.size(); ++i) {
      const auto& ts = predicted ? vals[i].second->predicted : vals[i].second->measured;
      double s = 0;
      for (double t : ts) s += std::log(t), total += (std::log(t) - mean) * (std::log(t) - mean);
      between += ts.size() * (s / ts.size() - mean) * (s / ts.size() - mean);
      medians.push_back(medianOf(ts));
      if (medians[i] < medians[best]) best = i;
      if (medians[i] > medians[worst]) worst = i;
      jv.push_back(json{{"value", vals[i].first}, {"n", ts.size()}, {"median", medians[i]}});
    }
    out.push_back(json{{"knob", knob},
                       {"values", std::move(jv)},
                       {"best", json{{"value", vals[best].first}, {"median", medians[best]}}},
                       {"worst", json{{"value", vals[worst].first}, {"median", medians[worst]}}},
                       {"spread", medians[best] > 0 ? medians[worst] / medians[best] : 0.0},
                       {"importance", total > 0 ? between / total : 0.0}});
  }
  std::sort(out.begin(), out.end(), [](const json& a, const json& b) {
    const double x = a["spread"], y = b["spread"];
    return x != y ? x > y : a["knob"].get<std::string>() < b["knob"].get<std::string>();
  });
  return out;
}

// A tune is the records from a trial 1 on, in id order (workers report out of order: a second
// trial 1 starts the next tune only once the current one has its own), as the page used to find
// them from every record.
struct Tune {
  std::vector<const Row*> rows;
  bool has_first = false;
};

json tuneJson(const Tune& t, size_t index, int max_points) {
  std::vector<const Row*> rows = t.rows;
  std::stable_sort(rows.begin(), rows.end(), [](const Row* a, const Row* b) { return a->trial < b->trial; });
  std::map<std::string, int64_t> statuses;
  bool any_ok = false;
  for (const Row* r : rows) {
    statuses[std::string(recordStatusName(r->status))]++;
    any_ok = any_ok || r->status == RecordStatus::Ok;
  }
  // Best so far over what this tune has: measurements, else the model's predictions (a refused
  // candidate among estimates no longer empties the curve).
  const RecordStatus want = any_ok ? RecordStatus::Ok : RecordStatus::Estimated;
  const size_t stride = rows.size() > static_cast<size_t>(max_points) ? (rows.size() + max_points - 1) / max_points : 1;
  json pts = json::array();
  double best = INFINITY;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = *rows[i];
    const bool improves = r.status == want && r.median < best;
    if (improves) best = r.median;
    if (!improves && i % stride != 0 && i + 1 != rows.size()) continue;
    pts.push_back(json::array({r.trial, timed(r.status) ? json(r.median) : json(nullptr), recordStatusName(r.status),
                               std::isfinite(best) ? json(best) : json(nullptr), r.id}));
  }
  const Row& first = *t.rows.front();
  return json{{"index", index + 1},
              {"first_id", first.id},
              {"received", first.received},
              {"measured", first.measured},
              {"estimated", !any_ok && statuses.count("estimated")},
              {"records", rows.size()},
              {"statuses", statuses},
              {"points", std::move(pts)},
              {"thinned", stride > 1}};
}

}  // namespace

Expected<int64_t> newestRecordId(RecordStore& store, const std::string& key_id, int64_t after_id) {
  ListQuery q;
  q.key_id = key_id;
  q.newest_first = true;
  q.limit = 1;
  TESSERA_ASSIGN(ListPage page, store.list(q));
  const int64_t newest = page.records.empty() ? 0 : page.records.front().id;
  return newest > after_id ? newest : after_id;
}

Expected<json> kernelDigestJson(RecordStore& store, const std::string& key_id, const DigestLimits& lim) {
  std::vector<Row> rows;
  Knobs knobs;
  std::vector<Record> fastest, failed;  // the sample's candidates, bounded
  auto slower = [](const Record& a, const Record& b) { return a.median_us < b.median_us || (a.median_us == b.median_us && a.id < b.id); };
  std::map<std::string, int64_t> statuses;
  bool capped = false;
  ListQuery q;
  q.key_id = key_id;
  q.limit = kMaxListLimit;
  for (;;) {
    TESSERA_ASSIGN(ListPage page, store.list(q));
    for (Record& r : page.records) {
      if (static_cast<int64_t>(rows.size()) >= lim.max_records) {
        capped = true;
        break;
      }
      rows.push_back(Row{r.id, r.status, r.median_us, r.trials, epochOf(r.received_at), epochOf(r.provenance.created_at),
                         r.config, r.writer});
      statuses[std::string(recordStatusName(r.status))]++;
      if (timed(r.status) && r.median_us > 0) {
        auto cfg = json::parse(r.config, nullptr, false);
        if (cfg.is_object())
          for (auto it = cfg.begin(); it != cfg.end(); ++it) {
            KnobValue& kv = knobs[it.key()][it->is_string() ? it->get<std::string>() : it->dump()];
            kv.numeric = kv.numeric && it->is_number();
            (r.status == RecordStatus::Ok ? kv.measured : kv.predicted).push_back(r.median_us);
          }
        if (static_cast<int>(fastest.size()) < lim.sample || slower(r, fastest.front())) {
          fastest.push_back(std::move(r));
          std::push_heap(fastest.begin(), fastest.end(), slower);
          if (static_cast<int>(fastest.size()) > lim.sample) {
            std::pop_heap(fastest.begin(), fastest.end(), slower);
            fastest.pop_back();
          }
        }
      } else if (static_cast<int>(failed.size()) < lim.sample) {
        failed.push_back(std::move(r));
      }
    }
    if (capped || !page.next_after) break;
    q.after_id = page.next_after;
  }

  // Tunes, in id order (the store lists ascending ids).
  std::vector<Tune> tunes;
  for (const Row& r : rows) {
    if (r.trial < 1) continue;
    if (tunes.empty() || (r.trial == 1 && tunes.back().has_first)) tunes.emplace_back();
    tunes.back().has_first = tunes.back().has_first || r.trial == 1;
    tunes.back().rows.push_back(&r);
  }
  json jt = json::array();
  // The chart's budget shared by the tunes: what the browser parses and draws stays bounded however
  // many tunes a key has (each tune keeps every improvement of its best).
  const int per_tune = std::max(50, lim.curve_points / std::max<int>(1, static_cast<int>(tunes.size())));
  for (size_t i = 0; i < tunes.size(); ++i) jt.push_back(tuneJson(tunes[i], i, per_tune));

  // Time points: every record up to the bound, else every k-th plus the fastest of the sample.
  const size_t stride = rows.size() > static_cast<size_t>(lim.time_points) ? (rows.size() + lim.time_points - 1) / lim.time_points : 1;
  std::vector<int64_t> keep_ids;
  for (const Record& r : fastest) keep_ids.push_back(r.id);
  std::sort(keep_ids.begin(), keep_ids.end());
  json tp = json::array();
  double top = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    if (timed(r.status)) top = std::max(top, r.median);
    if (i % stride != 0 && !std::binary_search(keep_ids.begin(), keep_ids.end(), r.id)) continue;
    json cfg = json::parse(r.config, nullptr, false);
    tp.push_back(json::array({r.id, r.received, r.measured, timed(r.status) ? json(r.median) : json(nullptr), recordStatusName(r.status),
                              cfg.is_discarded() ? json::object() : std::move(cfg), r.writer}));
  }

  std::sort(fastest.begin(), fastest.end(), slower);
  json sample = json::array();
  for (const Record& r : fastest) sample.push_back(recordToJson(r));
  for (const Record& r : failed)
    if (static_cast<int>(sample.size()) < lim.sample) sample.push_back(recordToJson(r));

  return json{{"records", rows.size()},
              {"capped", capped},
              {"max_id", rows.empty() ? 0 : rows.back().id},
              {"statuses", statuses},
              {"slowest", top},
              {"tunes", std::move(jt)},
              {"time", json{{"points", std::move(tp)}, {"thinned", stride > 1}}},
              {"knobs", json{{"measured", knobEffects(knobs, false)}, {"predicted", knobEffects(knobs, true)}}},
              {"sample", std::move(sample)},
              {"sample_limit", lim.sample}};
}

}  // namespace tessera::cache
